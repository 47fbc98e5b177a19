"""Channel: one thread's encoded events, waiting for the consumer.

A channel is a byte buffer of events already encoded as msgpack arrays
``[source id, clock delta, [args...](, texts)]``, back to back, each delta
relative to the previous event of the channel. The calling thread appends;
the consumer ``take()``s everything at once and starts the channel afresh.
This is the C binlog's design: the call serializes, the consumer only copies.

An event is accepted if its exact encoded size keeps the buffer within
``limit``; ``blog.pipeline.backpressure`` sets the limits and decides what a refused
push does. While ``inside`` is set (the owning thread writes the outputs beside the main
one) every push is refused, a take from another thread meanwhile included; set back, the
limit is the one the channel's state gives. Only a take and ``inside`` read the flag,
never a push. A channel knows nothing of its writer: the fast paths hand a push it
refused (at its limit, or values it leaves to the caller to capture) to its
``on_overflow`` callback (the writer's ``push_event``), the only call back.

``PyChannel`` is the reference implementation. ``_speedups.Channel`` (``_channel.c``
beside this module) is the same in C; there, each method runs without releasing the GIL,
so no lock is needed. Both accept and refuse the same pushes and hold the same bytes (a
property test says so). ``Channel``, at the end of this module, is the one chosen here.
"""

from __future__ import annotations

import threading

from blogformat.typinglite import TYPE_CHECKING, NamedTuple
from blogformat.entries import WriterProp
from blogformat.eventframes import event_prefix
from blogformat.values import all_plain, plain_packer

from ..accel import speedups

if TYPE_CHECKING:
    from typing import Any, Callable, Union

    from .. import _speedups

    #: What a channel calls with a push it refused: (sid, clock, template, values, field
    #: names).
    OnOverflow = Callable[..., None]

    #: What a channel's ``take()`` gives: a Taken, or its C twin (the same fields, in order).
    AnyTaken = Union["Taken", _speedups.Taken]

_NO_LO, _NO_HI = (1 << 63) - 1, -(1 << 63)   # the bounds of an empty channel


class Mark(NamedTuple):
    """In-band metadata of a channel: a writer's rename, from this point of its events on
    (``_speedups.Mark`` is its C twin)."""

    offset: int          # bytes of the channel before it
    count: int           # type: ignore[assignment]  # events before it (hides tuple.count)
    prev: int            # the clock of the event before it (the deltas' base there)
    entry: WriterProp    # the rename


class Taken(NamedTuple):
    """What ``take()`` returns (``_speedups.Taken`` is its C twin)."""

    data: bytes      # the encoded events, back to back
    count: int       # type: ignore[assignment]  # how many events (hides tuple.count)
    base: int        # the clock the first event's delta is relative to
    lo: int          # the least clock of the events
    hi: int          # the greatest clock of the events
    marks: list[Mark]   # in-band metadata: a writer's rename


class PyChannel:
    """A bounded byte buffer of encoded events (see the module docstring)."""

    def __init__(self, capacity: int, wake_at: int, on_overflow: OnOverflow | None,
                 clock: int) -> None:
        self.capacity = capacity    # bytes the channel may hold
        self.wake_at = wake_at      # bytes at which the consumer is woken
        self.on_overflow = on_overflow   # takes a push refused here (the writer's push_event)
        self.dropped = 0            # events dropped so far; written by the producer only
        self.prev = clock           # clock of the last event pushed
        # Reentrant: a signal handler or finalizer on this thread may log mid-push.
        self._lock = threading.RLock()
        # For plain values (tuples pack as arrays). No hook: an int beyond 64 bits
        # raises, and push_values leaves it to the caller, as the C channel does.
        self._pack_event = plain_packer().pack
        self._busy = False          # a push is in progress on the owning thread
        self._nested: list[tuple] = []
        self.slot: Any = None       # the crash buffer's mirror (blog.files.crashbuf.Slot), if any
        self._inside = False
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self.count = 0
        self.base = self.prev
        self.lo, self.hi = _NO_LO, _NO_HI     # as the C channel: LLONG_MAX, LLONG_MIN
        self.marks: list[Mark] = []
        self.woken = False
        self._set_limit()

    def _set_limit(self) -> None:
        # With the lock held: -1 inside an output, else the capacity once the consumer was
        # woken, else the wake-up length (what backpressure.overflow sets, from each take on).
        if self._inside:
            self.limit = -1
        elif self.woken:
            self.limit = self.capacity
        else:
            self.limit = min(self.wake_at, self.capacity)

    @property
    def inside(self) -> bool:
        """True while the owning thread writes the outputs beside the main one: every push
        is refused (a limit of -1, which a take keeps). Set False, the limit is the one the
        channel's state gives: its capacity once it woke the consumer, else the wake-up
        length."""
        return self._inside

    @inside.setter
    def inside(self, value: bool) -> None:
        with self._lock:
            self._inside = bool(value)
            self._set_limit()

    @property
    def nbytes(self) -> int:
        """Bytes waiting."""
        return len(self._buf)

    def push_values(self, sid: int, clock: int, values: tuple) -> bool:
        """Append ``[sid, delta, [values...]]``, values being plain scalars.

        Returns False, appending nothing, if that would pass ``limit`` or a
        value is not a plain scalar msgpack encodes as it is (an int beyond 64 bits), nor
        of exactly a plain type: a tuple, a subclass of int, float or str (an IntEnum) is
        the caller's to capture, as the C channel leaves it.
        """
        if not all_plain(values):   # msgpack would pack them as a list and as their base
            return False
        try:
            return self._push(sid, clock, 3, values, b"", False)
        except (OverflowError, TypeError):
            return False

    def push_raw(self, sid: int, clock: int, nelems: int, tail: bytes, force: bool = False) -> bool:
        """Append an event whose elements after the clock delta are encoded in ``tail``.

        Returns False, appending nothing, if that would pass ``limit`` (unless ``force``).
        """
        return self._push(sid, clock, nelems, None, tail, force)

    def _push(self, sid: int, clock: int, nelems: int, values: tuple | None, tail: bytes,
              force: bool) -> bool:
        with self._lock:
            if self._busy:
                # A signal handler or finalizer logging on this thread in the middle of a
                # push: its event waits until the push in progress has appended its own,
                # so that no delta is computed against a stale previous clock.
                self._nested.append((sid, clock, nelems, values, tail))
                return True
            self._busy = True
            try:
                b = self._encode(sid, clock, nelems, values, tail)
                if not force and len(self._buf) + len(b) > self.limit:
                    return False
                self._append(b, clock)
                return True
            finally:
                while self._nested:
                    n = self._nested.pop(0)
                    try:
                        self._append(self._encode(*n), n[1])
                    except (OverflowError, TypeError):   # an int beyond 64 bits, nested
                        self.dropped += 1
                self._busy = False

    def _encode(self, sid: int, clock: int, nelems: int, values: tuple | None,
                tail: bytes) -> bytes:
        if values is not None:
            return self._pack_event((sid, clock - self.prev, values))
        return event_prefix(nelems, sid, clock - self.prev) + tail

    def _append(self, event: bytes, clock: int) -> None:
        # With the lock held, right after _encode.
        self._buf += event
        if self.slot is not None:
            self.slot.append(event)
        self.prev = clock
        if clock < self.lo:
            self.lo = clock
        if clock > self.hi:
            self.hi = clock
        self.count += 1

    def mark(self, entry: WriterProp) -> None:
        """Metadata (a writer's new name) that applies from this point of the channel on."""
        with self._lock:
            self.marks.append(Mark(len(self._buf), self.count, self.prev, entry))

    def take(self, seq: int = 0) -> Taken:
        """Everything so far, and the channel starts afresh. With a crash buffer, the
        mirrored half is marked taken by consume ``seq`` and the thread goes on in the other."""
        with self._lock:
            r = Taken(bytes(self._buf), self.count, self.base, self.lo, self.hi, self.marks)
            self._reset()
            if self.slot is not None:
                self.slot.take(seq, self.prev)
            return r

    def use_slot(self, slot: Any) -> None:
        """Mirror the channel into ``slot`` (a crash buffer's channel file) from now on,
        starting with what it holds; None stops."""
        with self._lock:
            if slot is not None:
                slot.load(bytes(self._buf), self.base)
            self.slot = slot


def _no_c_channels(local: Any) -> None:
    """The pure-Python path's ``forget_thread_channel``: no thread has a C channel to forget."""


#: A thread's channel: the C one where the C fast path is built (and not chosen away), else
#: the reference. Chosen once, here; the writer makes its channel with it.
Channel: type[PyChannel] | type[_speedups.Channel] = (
    PyChannel if speedups is None else speedups.Channel)
#: In a child made by fork(): the calling thread forgets its C channel of a session (the
#: C call paths find it through the thread state, not the session's ``threading.local``).
forget_thread_channel: Callable[[Any], None] = (
    _no_c_channels if speedups is None else speedups.forget_thread_channel)
