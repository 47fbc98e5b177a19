"""Entries -> a sink's output: one decoder per input, the C fast path where it can.

A ``Decoder`` applies the metadata of one input to its ``EventStream`` and,
when the C extension is built, to the tables of a C ``Renderer``
(``bread/_native.c``), from the same entries: what C makes is therefore what
Python would, for the same state. Each events frame is handed to C, called
again while it says there is more, and read by Python from the event where C
stopped (a value or a byte C leaves to Python); an event C cannot make alone
goes to the one fallback here, one at a time.

What becomes of the events is the sink's (``Sink``): text lines
(``bread.lines``), JSON lines or CSV rows (``bread.exportlines``), Event objects
(``bread.events``) or columns (``bread.columnar.batches``); each also gives them
with their sort keys, as runs for the merge (``bread.merge``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol

from blogformat.entries import ClockSync, EventSource, FileHeader, WriterProp
from blogformat.eventframes import RawEvent
from blogformat.frames import FRAME_COLUMNS
from blogformat.valuedecoding import begin_event, unpackb
from blogformat.valuetypes import TypeTable

from . import accel
from .entries import Entry, columnar_parts
from .events import Event, EventStream, Origin, message_plan
from .filters import NO_FILTER, Filter
from .frames import Frame
from .merge import clamp64

if TYPE_CHECKING:
    from ._speedups import Renderer

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


def raw_event(data: bytes, offset: int, writer_id: int, clock: int,
              types: TypeTable | None = None) -> RawEvent:
    """An event the C code leaves to Python: its bytes (one event array, already known
    to decode), the offset of its frame, its writer and clock; the stream's descriptions
    of value types."""
    begin_event()
    ev = unpackb(data, types)
    texts = ev[3] if len(ev) > 3 and type(ev[3]) is dict else {}
    return RawEvent(offset, writer_id, ev[0], clock, ev[2], texts)


class Sink(Protocol):
    """What becomes of the events of one input: the C renderer's call for a frame and
    the Python twin of that call, each giving outputs (in file order), or runs
    ``(writer id, items, keys)`` for the merge."""

    @property
    def decorate(self) -> Callable[[EventSource], tuple[bytes, bytes]] | None:
        """What comes before each line of a source and after it, not escaped (colour)."""

    @property
    def metadata(self) -> Callable[[Entry, Callable[[Entry], bool]], Any] | None:
        """None, or what takes in each entry that is not a frame in place of
        ``Decoder.apply`` (calling it) and gives what is to come out before the next."""

    def renderer(self, fallback: Callable[[bytes, int, int], Any],
                 keyed: bool) -> Renderer | None:
        """A C Renderer for this output that calls ``fallback`` for what it leaves to
        Python; None if Python makes everything (text with ``%k``)."""

    def step(self, c: Any) -> Callable[[Frame | None], Any]:
        """The call that makes outputs of a frame (then of its rest, given None) with
        ``c``; what it returns is given out if not empty."""

    def python(self, events: Iterator[Event]) -> Iterable[Any]:
        """The outputs of a frame's events (those C left), made by Python."""

    def runs(self, events: Iterator[Event]) -> Iterable[Any]:
        """The same as runs ``(writer id, items, keys)`` for the merge."""

    def finish(self) -> Iterable[Any]:
        """What is left to give at the end of the input."""

    def fallback(self, ev: Event) -> Any:
        """What the C renderer takes for an event it leaves to Python (kept by the filter)."""

    def source_items(self, src: EventSource, origin: Origin) -> list:
        """The event-format items of a source of a stream from ``origin`` (text:
        ``bread.lines``; JSON lines and CSV rows: ``bread.exportlines``), else ``[]``.

        A sink may also have ``writer_text(writer) -> bytes``: what the C renderer writes
        as the writer's name (JSON lines, CSV rows); without it, the name in UTF-8."""


class Decoder:
    """Entries (``iter_entries(..., raw_events=True)``) -> what ``sink`` makes of them.

    ``keyed``: for the merge, the output is each events frame's offset, then its
    runs. ``c`` is the C renderer, None on the pure-Python path; ``ok`` is False
    while C does not read (none, or a clock sync beyond 64 bits): then Python reads.
    """

    def __init__(self, stream: EventStream, sink: Sink, flt: Filter = NO_FILTER,
                 source: str = "", keyed: bool = False) -> None:
        self.stream = stream
        self.sink = sink
        self.filter = flt
        self.source = source
        self.keyed = keyed
        #: The sink takes columnar frames as they are (``iter_entries(columns=...)``).
        self.columns = not keyed and hasattr(sink, "columnar_step")
        self._offset = 0
        self.c = None if accel.speedups is None else sink.renderer(self._fallback, keyed)
        self._writer_text: Callable[[WriterProp], bytes] | None = getattr(sink, "writer_text",
                                                                         None)
        self.ok = self.c is not None
        if self.c is not None:
            self.c.set_origin(stream.origin)
            if flt.since is not None or flt.until is not None:
                self.c.set_window(_clamp(flt.since, -(1 << 63)), _clamp(flt.until, (1 << 63) - 1))

    def outputs(self, entries: Iterable[Entry | Frame], finish: bool = True) -> Iterator[Any]:
        """The sink's outputs, frame by frame (with ``keyed``, offsets and runs); with
        ``finish``, then what the sink holds at the end."""
        stream, sink = self.stream, self.sink
        c: Any = self.c
        apply, metadata = self.apply, sink.metadata
        keeps, source, keyed = self.filter.keeps, self.source, self.keyed
        python = sink.runs if keyed else sink.python
        step: Any = None if c is None else c.keyed if keyed else sink.step(c)
        for e in entries:
            if type(e) is not Frame:
                if metadata is None:
                    apply(e)
                else:
                    out = metadata(e, apply)
                    if out:
                        yield out
                continue
            if keyed:
                yield e.offset
            if e.kind == FRAME_COLUMNS:   # only where ``columns`` asked for them
                yield from self._columnar(e)
                continue
            if not self.ok:
                yield from python(stream.frame(e, keeps, source))
                continue
            self._offset = e.offset
            out = step(e)
            while True:
                if out:
                    yield out
                if c.state == DONE:
                    break
                if c.state == PYTHON:   # from here on, the bytes are Python's to judge
                    yield from python(stream.frame(e, keeps, source, c.rendered))
                    break
                out = step(None)
        if finish and not keyed:
            yield from sink.finish()

    def _columnar(self, fr: Frame) -> Iterator[Any]:
        """A columnar frame: by C into the sink's columns where it takes the frame as it is
        (``Renderer.columnar``), else as the events frames it stands for."""
        c: Any = self.c
        if self.ok:
            self._offset = fr.offset
            step = self.sink.columnar_step   # type: ignore[attr-defined]
            out = step(fr)
            while True:
                if out:
                    yield out
                if c.state == DONE:
                    return
                if c.state == PYTHON:   # (at its first call: nothing of it was taken)
                    break
                out = step(None)
        yield from self.outputs(columnar_parts(fr, self.source), finish=False)

    def apply(self, e: Entry) -> bool:
        """Take in an entry that is not a frame: the stream's, then the C tables'."""
        if not self.stream.apply(e):
            return False     # beyond the stream's limits: damage, not kept
        c = self.c
        if c is None:
            return True
        if type(e) is EventSource:
            if 0 <= e.id < MAX_C_IDS:
                decorate = self.sink.decorate
                c.add_source(e.id, self.sink.source_items(e, self.stream.origin), message_items(e),
                             len(e.field_names), e, e.field_names,
                             not self.filter.source_ok(e), *(decorate(e) if decorate else ()))
        elif type(e) is WriterProp:
            if 0 <= e.id < MAX_C_IDS:
                text = self._writer_text
                c.add_writer(e.id, utf8(e.name) if text is None else text(e),
                             str(e.id).encode(), e, not self.filter.writer_ok(e))
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
            c.set_origin(self.stream.origin)
            self.ok = True
        return True

    def _fallback(self, data: bytes, writer_id: int, clock: int) -> Any:
        """An event the C renderer leaves to Python: its bytes, writer and clock; what the
        sink makes of it, or None if the filter leaves it out."""
        stream = self.stream
        event = stream.event(raw_event(data, self._offset, writer_id, clock, stream.types))
        return self.sink.fallback(event) if self.filter.keeps(event) else None


def _clamp(v: int | None, default: int) -> int:
    return default if v is None else clamp64(v)
