"""Back-pressure: what a thread does when its channel is full. All of it is here.

A channel accepts events up to its ``limit``: the session's wake-up length
at first, so that the push that crosses it leaves the fast path once and
wakes the drainer (the consumer); the limit then rises to the channel's
capacity. A push past the capacity waits for the drainer to make room
(policy "block") or drops the event and counts it (policy "drop"). An event
larger than a whole channel is always dropped and counted.

One Backpressure belongs to each Session; it is the only code that sets a
channel's limits or counts its drops.
"""

from __future__ import annotations

import threading
import time

from blogformat.typinglite import TYPE_CHECKING, Protocol
from blogformat.eventframes import MAX_EVENT_PREFIX
from blogformat.frames import MAX_PAYLOAD

from .. import process
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from typing import Any, Callable

#: When the channel is full: wait for the consumer (``overflow=``'s default).
BLOCK = "block"
#: When the channel is full: drop the event and count it.
DROP = "drop"

#: The largest channel: what one channel holds goes into one frame (escaped, twice its size).
MAX_CHANNEL_CAPACITY = MAX_PAYLOAD // 2 - 1024
MIN_CHANNEL_CAPACITY = 64

#: How long a blocked push sleeps between tries, in seconds.
_RETRY = 0.0005


class Drainer(Protocol):
    """Whoever drains a session's channels (a Consumer)."""

    def wake(self) -> None:
        """Ask for a consume as soon as possible; safe from signal handlers and finalizers."""

    def can_wait(self) -> bool:
        """True if the calling thread may wait for this drainer to make room."""


def check_overflow(overflow: str) -> str:
    """``overflow`` if it is "block" or "drop", else a ValueError."""
    if overflow not in (BLOCK, DROP):
        raise ConfigurationError(f"overflow must be {BLOCK!r} or {DROP!r}, not {overflow!r}")
    return overflow


def check_capacity(capacity: int) -> int:
    """``capacity`` if it is a channel size the format can frame, else a ValueError."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) \
            or not MIN_CHANNEL_CAPACITY <= capacity <= MAX_CHANNEL_CAPACITY:
        raise ConfigurationError(f"channel_capacity must be bytes from {MIN_CHANNEL_CAPACITY} to "
                                 f"{MAX_CHANNEL_CAPACITY}, not {capacity!r}")
    return capacity


class Handover:
    """Stands in for the drainer while a session moves from one to the next.

    Between the old consumer's detach and the new one's attach, a thread whose
    channel is full waits (policy "block") instead of dropping. The thread doing
    the move, and any thread for which ``busy()`` is true (it holds what the move
    needs), never waits.
    """

    def __init__(self, busy: Callable[[], bool]) -> None:
        self._mover = threading.get_ident()
        self._busy = busy

    def wake(self) -> None:
        """Nothing to wake: the next drainer consumes as soon as it starts."""

    def can_wait(self) -> bool:
        """True for any thread but the mover's, unless it is busy."""
        return threading.get_ident() != self._mover and not self._busy()


class Backpressure:
    """A session's channel limits, overflow policy and drainer."""

    def __init__(self, *, capacity: int, policy: str) -> None:
        self.capacity = check_capacity(capacity)
        self.policy = check_overflow(policy)
        self.wake_bytes = capacity       # a channel holding this much wakes the drainer
        self._drainer: Drainer | None = None
        self._handover: Handover | None = None

    @property
    def drainer(self) -> Drainer | None:
        """The attached drainer, if any."""
        return self._drainer

    def attach(self, drainer: Drainer, wake_bytes: int) -> None:
        """Let ``drainer`` be woken when a channel holds ``wake_bytes`` (it replaces a handover)."""
        d = self._drainer
        if d is not None and d is not drainer and d is not self._handover:
            raise RuntimeError("the session already has a running consumer")
        self._drainer = drainer
        self.wake_bytes = wake_bytes

    def detach(self, drainer: Drainer) -> None:
        """Forget ``drainer`` (if it is the one attached); a handover, if begun, stands in."""
        if self._drainer is drainer:
            self._drainer = self._handover

    def begin_handover(self, handover: Handover) -> None:
        """From the current drainer's detach to the next one's attach, ``handover`` stands in."""
        self._handover = handover

    def end_handover(self) -> None:
        """The move is over (done or failed): the handover no longer stands in."""
        if self._drainer is self._handover:
            self._drainer = None
        self._handover = None

    def configure(self, *, capacity: int | None = None, policy: str | None = None) -> None:
        """Change the capacity of channels or the policy (checked first, applied together)."""
        if capacity is not None:
            check_capacity(capacity)
        if policy is not None:
            check_overflow(policy)
        if capacity is not None:
            self.capacity = capacity
        if policy is not None:
            self.policy = policy

    def arm(self) -> None:
        """Every channel's next push (``apply``: now) and a new channel's first take the
        slow path (after a fork: the drainer's thread is started again there); the
        drainer's attach ends it."""
        self.wake_bytes = 0

    def apply(self, channel: Any) -> None:
        """Give ``channel`` the current capacity and wake-up length (from its next take on;
        armed, at once)."""
        channel.capacity = self.capacity
        channel.wake_at = self.wake_bytes
        if self.wake_bytes == 0:
            channel.limit = 0
            channel.woken = False

    def wake(self) -> None:
        """Wake the drainer, if there is one."""
        d = self._drainer
        if d is not None:
            d.wake()

    def can_block(self) -> bool:
        """True if a thread whose channel is full may wait for the drainer. A drainer that
        says no may have been replaced while it was asked (a consumer stopped by a move
        says no once detached, a handover standing in): then the one in its place is asked."""
        d = self._drainer
        while d is not None:
            if d.can_wait():
                return True
            now = self._drainer
            if now is d:
                return False
            d = now
        return False

    def overflow(self, channel: Any, sid: int, clock: int, nelems: int, tail: bytes) -> None:
        """The slow path of a push that the channel refused: wake, then block or drop."""
        process.restart_threads()     # after a fork (the channel was armed): the drainer's
        ch = channel
        if len(tail) + MAX_EVENT_PREFIX > ch.capacity:
            ch.dropped += 1          # could never fit: dropped, and counted
            self.wake()
            return
        if not ch.woken:
            # Wake the consumer once, and stay on the fast path until the channel is full.
            # Queued first: a drainer that writes at once (a LateWriter) writes it too.
            ch.woken = True
            ch.limit = ch.capacity
            pushed = ch.push_raw(sid, clock, nelems, tail)
            self.wake()
            if pushed:
                return
        if self.policy == BLOCK and self.can_block():
            # Wait for the consumer to make room: nothing is lost, the caller is delayed.
            while self.can_block():
                process.restart_threads()
                self.wake()
                time.sleep(_RETRY)
                if ch.push_raw(sid, clock, nelems, tail, force=ch.nbytes == 0):
                    return
        ch.dropped += 1
        self.wake()
