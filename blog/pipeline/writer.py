"""SessionWriter: one thread's handle for adding events to a Session; Writers: a session's
writers, one per thread that logged."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections import deque

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import WriterProp
from blogformat.eventframes import MAX_EVENT_PREFIX
from blogformat.placeholders import Template

from .richvalues import cut, encode_values
from .channel import Channel, forget_thread_channel
from .registry import Registry

if TYPE_CHECKING:
    from typing import Iterator, Sequence

    from .backpressure import Backpressure
    from ..files.crashbuf import CrashBuffer, Slot


#: A writer's name is written cut to this many characters (docs/format.md 9.1).
MAX_WRITER_NAME = 4096


class SessionWriter:
    """Owns the calling thread's Channel; named after the thread unless renamed.

    Created on the thread's first event. The hot path touches only the
    channel; everything here is the slow path.
    """

    __slots__ = ("id", "_name", "stream_name", "channel", "registry", "pressure", "thread",
                 "ident", "native_id", "pid", "ended", "kept", "echo", "__weakref__")

    def __init__(self, registry: Registry, writer_id: int, pressure: Backpressure,
                 name: str | None = None) -> None:
        thread = threading.current_thread()
        self.id = writer_id
        self._name = thread.name if name is None else name
        self.stream_name = self._name  # the name in effect where the consumer has got to
        self.channel = Channel(pressure.capacity, pressure.wake_bytes, self.push_event,
                               time.time_ns())
        self.registry = registry
        self.pressure = pressure
        self.thread = thread
        self.ident = thread.ident or 0
        self.native_id = getattr(thread, "native_id", None) or 0
        self.pid = os.getpid()
        self.ended = False   # set when the thread's locals are freed: it has ended
        self.kept: deque[tuple[int, int, int, bytes]] | None = None   # the backtrace
        #: The writer of what the thread logs while it writes the outputs beside the main
        #: one (``Writers.writing_outputs``): never fed back to a callable output.
        self.echo: SessionWriter | None = None

    def alive(self) -> bool:
        """True while the writer's thread runs (any thread: ``threading``'s or ``_thread``'s).
        The main thread runs until the process ends: ``threading`` calls it stopped before
        the atexit handlers and multiprocessing's last records, which may log."""
        return not self.ended and (self.thread.is_alive()
                                   or self.thread is threading.main_thread())

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
            self.registry.described(self.entry())
        else:
            self.stream_name = value
            self.registry.note(self.entry())   # not in band: recorded as it is now

    def entry(self, name: str | None = None) -> WriterProp:
        """The WriterProp metadata entry (with the current name unless given)."""
        name = self._name if name is None else name
        if len(name) > MAX_WRITER_NAME:
            name = name[:MAX_WRITER_NAME]
        return WriterProp(self.id, name, self.ident, self.native_id, self.pid)

    def push_event(self, sid: int, clock: int, tpl: Template | None, values: tuple,
                   field_names: Sequence[str]) -> None:
        """Queue an event of the Python path: plain values straight into the channel,
        anything else encoded (and captured) now: the channel refuses a value not of
        exactly a plain type, as both twins do. An event larger than a whole channel is
        logged with its largest values cut, each marked (``blog.pipeline.richvalues.cut``)."""
        if not self.channel.push_values(sid, clock, values):
            nelems, tail = encode_values(tpl, values, field_names,
                                         self.registry.keep_source_lines)
            if len(tail) + MAX_EVENT_PREFIX > self.channel.capacity:
                nelems, tail = encode_values(None, cut(values, self.channel.capacity),
                                             field_names)
            self.push(sid, clock, nelems, tail)

    def keep(self, sid: int, clock: int, tpl: Template | None, values: tuple,
             field_names: Sequence[str]) -> None:
        """Keep an event below the minimum severity in the backtrace (encoded now: what
        it shows is what it held at the call); the oldest goes when it is full."""
        bt = self.registry.backtrace
        if bt is None:
            return
        kept = self.kept
        if kept is None or kept.maxlen != bt.size:
            kept = self.kept = deque(kept or (), maxlen=bt.size)
        nelems, tail = encode_values(tpl, values, field_names, self.registry.keep_source_lines)
        if len(tail) + MAX_EVENT_PREFIX > self.channel.capacity:
            nelems, tail = encode_values(None, cut(values, self.channel.capacity), field_names)
        kept.append((sid, clock, nelems, tail))

    def write_backtrace(self) -> None:
        """Queue the kept events, oldest first, each marked as from the backtrace (its
        source's twin), then forget them."""
        kept = self.kept
        if not kept:
            return
        self.kept = None
        twins: dict[int, int] = {}
        for sid, clock, nelems, tail in kept:
            twin = twins.get(sid)
            if twin is None:
                twin = twins[sid] = self.registry.backtrace_source(sid)
            self.push(twin, clock, nelems, tail)

    def forget_backtrace(self) -> None:
        """Drop what the backtrace keeps (its settings changed)."""
        self.kept = None

    def push(self, sid: int, clock: int, nelems: int, tail: bytes) -> None:
        """Queue an event whose elements after the clock delta are encoded in ``tail``."""
        if not self.channel.push_raw(sid, clock, nelems, tail):
            if self.channel.inside and self.echo is not None:   # inside an output
                self.echo.push_echo(sid, clock, nelems, tail)
                return
            self.pressure.overflow(self.channel, sid, clock, nelems, tail)

    def push_echo(self, sid: int, clock: int, nelems: int, tail: bytes) -> None:
        """Queue an event logged from inside an output: never waiting (the thread is the
        one writing), dropped and counted if the channel is full."""
        ch = self.channel
        if ch.nbytes + len(tail) + MAX_EVENT_PREFIX <= ch.capacity:
            ch.push_raw(sid, clock, nelems, tail, force=True)
        else:
            ch.dropped += 1


class ThreadEnd:
    """Kept in the thread's locals: freed when the thread ends, it marks its writer ended
    (a thread started with ``_thread`` is a dummy to ``threading``, alive forever)."""

    __slots__ = ("writer",)

    def __init__(self, writer: SessionWriter) -> None:
        self.writer = writer

    def __del__(self) -> None:
        self.writer.ended = True
        if self.writer.echo is not None:
            self.writer.echo.ended = True


class Writers:
    """A session's SessionWriters: one per thread, made on its first event, forgotten once
    its thread ended and its channel is empty. ``local`` holds, per thread, ``.w`` its
    writer and ``.c`` its Channel (what the fast paths read), and ``.end`` its ThreadEnd."""

    def __init__(self, registry: Registry, pressure: Backpressure) -> None:
        self.registry = registry
        self.pressure = pressure
        self.local = threading.local()
        self.all: list[SessionWriter] = []
        self._ids = itertools.count(1)
        #: The ids of the writers of what threads log inside outputs (``writing_outputs``).
        self.echo_ids: set[int] = set()

    def writer(self) -> SessionWriter:
        """The calling thread's SessionWriter (made on first use)."""
        try:
            return self.local.w
        except AttributeError:
            return self.new_writer()

    def new_writer(self) -> SessionWriter:
        """Make the calling thread's SessionWriter (``writer()`` does when needed)."""
        w = self._add()
        self.local.w = w
        self.local.c = w.channel
        self.local.end = ThreadEnd(w)
        return w

    def _add(self, name: str | None = None) -> SessionWriter:
        """A new writer of the calling thread (named ``name``, else after the thread)."""
        reg = self.registry
        with reg.lock:
            w = SessionWriter(reg, next(self._ids), self.pressure, name)
            self.all.append(w)
            reg.note(w.entry())
            if reg.mirror is not None:
                w.channel.use_slot(reg.mirror.slot(w.id, self.pressure.capacity,
                                                   w.channel.prev))
        return w

    @contextlib.contextmanager
    def writing_outputs(self) -> Iterator[None]:
        """While the calling thread writes the outputs beside the main one: what it logs
        goes to a writer of its own (``SessionWriter.echo``, named "<thread> (in an
        output)"), written to every output but never fed back to a callable output
        (whose events would log more events, with no end), and never waiting for room.
        Its channel refuses every push meanwhile (``inside``: a take from another thread
        keeps it so), so the fast paths hand them to ``SessionWriter.push``; on the way out
        its limit is the one its state gives then (woken or not since a take)."""
        w = self.writer()
        if w.echo is None:
            w.echo = self._add(f"{w.name} (in an output)")
            self.echo_ids.add(w.echo.id)
        ch = w.channel
        was, ch.inside = ch.inside, True
        try:
            yield
        finally:
            ch.inside = was

    def mirror_into(self, cb: CrashBuffer | None, stop: bool) -> dict[int, Slot | None]:
        """Mirror every channel into ``cb`` from now on (with ``lock`` held); with None, and
        ``stop``, no channel is mirrored any more. Returns the writers' channel files."""
        slots: dict[int, Slot | None] = {}
        for w in self.all:
            if cb is not None:
                slots[w.id] = cb.slot(w.id, self.pressure.capacity, w.channel.prev)
                w.channel.use_slot(slots[w.id])
            elif stop:
                w.channel.use_slot(None)
        return slots

    def entries(self) -> list[WriterProp]:
        """The writers' properties, with the names in effect where the consumer has got to."""
        return [w.entry(w.stream_name) for w in self.all]

    def retire(self, writers: list[SessionWriter]) -> list[SessionWriter]:
        """Forget the ones of ``writers`` whose thread ended and channel is empty; return them."""
        dead = [w for w in writers if not w.alive() and not w.channel.nbytes]
        if dead:
            with self.registry.lock:
                self.all = [w for w in self.all if w not in dead]
        return dead

    def forked(self, pressure: Backpressure) -> None:
        """In a child made by fork(): the parent's threads and their channels are not ours (not
        touched: their locks may be held); the child's writers wait on ``pressure``."""
        self.all = []
        self.echo_ids.clear()
        self.pressure = pressure
        for name in ("w", "c", "end"):
            self.local.__dict__.pop(name, None)
        forget_thread_channel(self.local)   # the C call paths' entry of this thread: gone too
