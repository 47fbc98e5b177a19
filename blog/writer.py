"""SessionWriter: one thread's handle for adding events to a Session."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Sequence

from .capture import encode_values
from .channel import BLOCK, new_channel
from .format import ENTRY_WRITER_PROP
from .placeholders import Template
from .values import all_plain

if TYPE_CHECKING:
    from .session import Session


class SessionWriter:
    """Owns the calling thread's Channel; named after the thread unless renamed.

    Created on the thread's first event. The hot path touches only the
    channel; everything here is the slow path.
    """

    __slots__ = ("id", "_name", "stream_name", "channel", "session", "thread", "ident",
                 "native_id", "pid", "__weakref__")

    def __init__(self, session: Session, writer_id: int, capacity: int, wake_at: int) -> None:
        thread = threading.current_thread()
        self.id = writer_id
        self._name = thread.name
        self.stream_name = self._name  # the name in effect where the consumer has got to
        self.channel = new_channel(capacity, wake_at, self, time.time_ns())
        self.session = session
        self.thread = thread
        self.ident = thread.ident or 0
        self.native_id = getattr(thread, "native_id", None) or 0
        self.pid = os.getpid()

    @property
    def name(self) -> str:
        """The writer's name, printed by bread's ``%n``."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("writer name must be a str")
        self._name = value
        if threading.current_thread() is self.thread:
            # In band: events queued before the rename keep the old name in the file.
            self.channel.mark(self.entry())
        else:
            self.stream_name = value
            self.session._writer_changed(self)

    def entry(self, name: str | None = None) -> list:
        """The WriterProp metadata entry array (with the current name unless given)."""
        return [ENTRY_WRITER_PROP, self.id, self._name if name is None else name,
                self.ident, self.native_id, self.pid]

    def push_event(self, sid: int, clock: int, tpl: Template | None, values: tuple,
                   field_names: Sequence[str]) -> None:
        """Queue an event of the Python path: plain values straight into the channel,
        anything else encoded (and captured) now."""
        if not (all_plain(values) and self.channel.push_values(sid, clock, values)):
            self.push(sid, clock, *encode_values(tpl, values, field_names))

    def push(self, sid: int, clock: int, nelems: int, tail: bytes) -> None:
        """Queue an event whose elements after the clock delta are encoded in ``tail``."""
        if not self.channel.push_raw(sid, clock, nelems, tail):
            self.overflow(sid, clock, nelems, tail)

    def overflow(self, sid: int, clock: int, nelems: int, tail: bytes) -> None:
        """Slow path of a push: the channel reached its wake-up length or its capacity."""
        ch = self.channel
        session = self.session
        if len(tail) + 20 > ch.capacity:
            ch.dropped += 1          # could never fit: dropped, and counted
            session._wake()
            return
        if not ch.woken:
            # Wake the consumer once, and stay on the fast path until the channel is full.
            ch.woken = True
            ch.limit = ch.capacity
            session._wake()
            if ch.push_raw(sid, clock, nelems, tail):
                return
        if session.overflow == BLOCK and session._can_block():
            # Wait for the consumer to make room: nothing is lost, the caller is delayed.
            while session._can_block():
                session._wake()
                time.sleep(0.0005)
                if ch.push_raw(sid, clock, nelems, tail, force=ch.nbytes == 0):
                    return
        ch.dropped += 1
        session._wake()
