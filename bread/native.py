"""The C fast path's tables kept in step with an EventStream (``bread/_native.c``).

The C Renderer knows call sites, writers and the clock sync only as this
module tells it, from the same entries the Python EventStream reads: what it
renders is therefore what Python would, for the same state. Used by
``bread.lines`` (text) and ``bread.batches`` (columns).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable, Iterable, Iterator

from blogformat.entries import (ClockSync, EventSource, FileHeader, RawEvent, TypeTable,
                                WriterProp)
from blogformat.valuedecoding import begin_event, unpackb

from . import accel
from .entries import Entry
from .events import Event, EventStream, message_plan
from .filters import NO_FILTER, Filter
from .frames import Frame
from .merge import clamp64, event_run

UTC = _dt.timezone.utc

#: Source and writer ids the C renderer keeps in its tables; others go through Python.
MAX_C_IDS = 65536
#: The C renderer's ``state`` after a call: frame done, more to come, Python reads the rest.
DONE, MORE, PYTHON = 0, 1, 2


def utf8(text: str) -> bytes:
    """Text as bread writes it: UTF-8, a lone surrogate as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace")


def message_items(src: EventSource) -> list | None:
    """``events.message_plan`` with its literals in UTF-8, for the C renderer."""
    plan = message_plan(src)
    if plan is None:
        return None
    return [utf8(x) if isinstance(x, str) else x for x in plan]


class NativeState:
    """Applies entries to ``stream`` and tells the C ``renderer`` what changed.

    ``source_items(src)`` gives the event-format items of a source (text
    output) or ``[]`` (columns). ``ok`` is False while the clock sync in force
    does not fit the C renderer (clocks beyond 64 bits): then Python reads.
    """

    def __init__(self, stream: EventStream, renderer: Any,
                 source_items: Callable[[EventSource], list], flt: Filter = NO_FILTER,
                 decorate: Callable[[EventSource], tuple[bytes, bytes]] | None = None) -> None:
        self.stream = stream
        self.renderer = renderer
        self.source_items = source_items
        self.decorate = decorate   # bytes before and after each line of a source (colour)
        self.filter = flt
        self.ok = True
        if flt.since is not None or flt.until is not None:
            renderer.set_window(_clamp(flt.since, -(1 << 63)), _clamp(flt.until, (1 << 63) - 1))

    def apply(self, e: Entry) -> None:
        if not self.stream.apply(e):
            return       # beyond the stream's limits: damage, not kept
        c = self.renderer
        if type(e) is EventSource:
            if 0 <= e.id < MAX_C_IDS:
                c.add_source(e.id, self.source_items(e), message_items(e), len(e.field_names),
                             e, e.field_names, not self.filter.source_ok(e),
                             *(self.decorate(e) if self.decorate else ()))
        elif type(e) is WriterProp:
            if 0 <= e.id < MAX_C_IDS:
                c.add_writer(e.id, utf8(e.name), str(e.id).encode(), e,
                             not self.filter.writer_ok(e))
        elif type(e) is ClockSync:
            tz = self.stream.tz
            off = tz.utcoffset(None)
            try:
                c.set_sync(e.clock_value, e.frequency, e.ns_since_epoch,
                           int(off.total_seconds()) if off is not None else 0,
                           utf8(tz.tzname(None) or ""), tz)
                self.ok = True
            except OverflowError:   # clocks beyond 64 bits: Python reads them
                self.ok = False
        elif type(e) is FileHeader:
            c.reset()
            self.ok = True


def raw_event(data: bytes, offset: int, writer_id: int, clock: int,
              types: TypeTable | None = None) -> RawEvent:
    """An event the C code leaves to Python: its bytes (one event array, already known
    to decode), the offset of its frame, its writer and clock; the stream's descriptions
    of value types."""
    begin_event()
    ev = unpackb(data, types)
    texts = ev[3] if len(ev) > 3 and type(ev[3]) is dict else {}
    return RawEvent(offset, writer_id, ev[0], clock, ev[2], texts)


def _clamp(v: int | None, default: int) -> int:
    return default if v is None else clamp64(v)


class EventDecoder:
    """Entries -> Events with the C fast path: whole events frames decoded at once.

    The Python path is ``EventStream`` itself; this gives the same Events
    (a property test says so). ``entries`` come from ``iter_entries(...,
    raw_events=True)``.
    """

    #: Events per call of the C decoder. Small on purpose: the events a caller has
    #: already dropped are freed before the collector counts them, so it rarely runs
    #: (with 4096, a third of the time went to the cyclic GC).
    CHUNK = 32

    def __init__(self, stream: EventStream, source: str = "", flt: Filter = NO_FILTER) -> None:
        self.stream = stream
        self.source = source
        self.filter = flt
        self._offset = 0
        c = accel.speedups.Renderer([], _no_text, False)   # type: ignore[union-attr]
        c.set_event_type(Event, self._fallback, UTC)
        c.max_rows = self.CHUNK
        self.native = NativeState(stream, c, lambda src: [], flt)

    def chunks(self, entries: Iterable[Entry | Frame]) -> Iterator[Iterable[Event]]:
        """The Events, in chunks: lists of at most ``CHUNK`` (the C decoder's), or a
        generator over the rest of a frame the C decoder leaves to Python."""
        native = self.native
        apply, c = native.apply, native.renderer
        for e in entries:
            if type(e) is not Frame:
                apply(e)
            elif not native.ok:
                yield self._python_frame(e)
            else:
                self._offset = e.offset
                yield c.events(e.payload, e.offset, self.stream.origin)
                while c.state == MORE:
                    yield c.events(None, e.offset, self.stream.origin)
                if c.state == PYTHON:
                    yield self._python_frame(e, skip=c.rendered)

    def _python_frame(self, fr: Frame, skip: int = 0) -> Iterator[Event]:
        return self.stream.frame(fr, self.filter.keeps, self.source, skip)

    def runs(self, entries: Iterable[Entry | Frame]) -> Iterator[int | tuple]:
        """For the sorted merge (``bread.merge``): each events frame's offset, then its
        kept Events as runs ``(writer id, events, keys)``."""
        native = self.native
        apply, c = native.apply, native.renderer
        c.max_rows = 1 << 16    # the merge holds a frame's events whatever the chunk
        for e in entries:
            if type(e) is not Frame:
                apply(e)
                continue
            yield e.offset
            skip = 0
            if native.ok:
                self._offset = e.offset
                c.want_keys = 1
                try:
                    evs = c.events(e.payload, e.offset, self.stream.origin)
                    while c.state == MORE:
                        evs += c.events(None, e.offset, self.stream.origin)
                finally:
                    c.want_keys = 0
                keys = c.take_keys()
                if evs:
                    yield evs[0].writer_prop.id, evs, keys
                if c.state != PYTHON:
                    continue
                skip = c.rendered
            yield from event_run(self._python_frame(e, skip))

    def _fallback(self, data: bytes, writer_id: int, clock: int) -> Event | None:
        event = self.stream.event(raw_event(data, self._offset, writer_id, clock,
                                            self.stream.types))
        return event if self.filter.keeps(event) else None


def _no_text(data: bytes, writer_id: int, clock: int) -> bytes:
    raise AssertionError("text rendering is not used for events")  # pragma: no cover
