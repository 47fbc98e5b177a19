"""Entries -> a sink's output: one decoder per input, the C fast path where it can.

A ``Decoder`` applies the metadata of one input to its ``EventStream`` and,
when the C extension is built, to the tables of a C ``Renderer``
(``bread/decode/_native.c``), from the same entries: what C makes is therefore what
Python would, for the same state. Each events frame is handed to C, called
again while it says there is more, and read by Python from the event where C
stopped (a value or a byte C leaves to Python); an event C cannot make alone
goes to the one fallback here, one at a time.

What becomes of the events is the sink's (``Sink``, ``bread.sinks``): text lines,
Event objects, columns, typed tables, made by Python; its C side (``Native``) says what the
Renderer is made with and which of its calls makes a frame's outputs, and the decoder
drives it. For the merge, ``bread.merge.Keyed`` wraps a sink: its runs, keyed by time.
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING, Protocol
from blogformat.entries import ClockSync, EventSource, FileHeader, WriterProp
from blogformat.eventframes import RawEvent
from blogformat.frames import FRAME_COLUMNS
from blogformat.valuedecoding import begin_event, unpackb
from blogformat.valuetypes import TypeTable

from .. import accel
from ..entries import Entry, columnar_parts, iter_entries
from ..events import Event, EventStream, Origin, clamp64, message_plan
from ..frames import Damage, Frame
from .filters import NO_FILTER, Filter

if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable, Iterable, Iterator

    from .._speedups import Renderer

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


class Native:
    """A sink's C side: the C Renderer the decoder makes for it (``renderer``) and calls
    for each events frame (``step``), the per-source and per-writer constants it bakes
    into the Renderer's tables, and what C takes for an event it leaves to Python
    (``fallback``). The decoder alone drives the Renderer; the defaults are the Event
    objects' (nothing baked in). Twin of ``bread/decode/_native.c``."""

    #: What comes before each line of a source and after it, not escaped (colour), or None.
    decorate: Callable[[EventSource], tuple[bytes, bytes]] | None = None
    #: The call that takes a columnar frame as it is (into columns), or None: such a frame
    #: then comes as the events frames it stands for (``entries.columnar_parts``).
    columnar: Callable[[Frame | None], Any] | None = None

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        """A C Renderer for this sink that calls ``fallback`` for what it leaves to Python;
        ``keyed``: for the merge (``Renderer.keyed``)."""
        raise NotImplementedError

    def step(self, c: Renderer) -> Callable[[Frame | None], Any]:
        """The call that makes outputs of a frame (then of its rest, given None) with
        ``c``; what it returns is given out if not empty."""
        raise NotImplementedError

    def fallback(self, ev: Event) -> Any:
        """What the Renderer takes for an event it leaves to Python (kept by the filter)."""
        return ev

    def source_items(self, src: EventSource, origin: Origin) -> list:
        """The event-format items of a source of a stream from ``origin`` (text:
        ``bread.sinks.lines``), else ``[]``."""
        return []

    def writer_text(self, w: WriterProp) -> bytes:
        """What C writes as the name of writer ``w``: its name in UTF-8."""
        return utf8(w.name)


class Sink(Protocol):
    """What becomes of the events of one input, made by Python (``python``, ``finish``);
    ``native``, its C side, makes the same of whole frames where the extension is built
    (None: Python makes everything). ``metadata``, if not None, takes in each entry that is
    not a frame in place of ``Decoder.apply`` (calling it) and gives what is to come out
    before the next (a batch that the entry ends). ``item``, if not None, is one event's
    output alone (a text line, an Event): sorted, the merge orders those
    (``bread.merge.Sorted``); a sink without it is given the sorted Events."""

    @property
    def native(self) -> Native | None: ...

    @property
    def metadata(self) -> Callable[[Entry, Callable[[Entry], bool]], Any] | None: ...

    @property
    def item(self) -> Callable[[Event], Any] | None: ...

    def python(self, events: Iterator[Event]) -> Iterable[Any]:
        """The outputs of a frame's events (those C left), made by Python."""

    def finish(self) -> Iterable[Any]:
        """What is left to give at the end of the input."""


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
        native = sink.native
        #: The sink's C side, where the extension is built (else None: Python makes all).
        self.native = None if accel.speedups is None else native
        #: The sink takes columnar frames as they are (``iter_entries(columns=...)``).
        self.columns = not keyed and native is not None and native.columnar is not None
        self._offset = 0
        c = self.c = None if self.native is None else self.native.renderer(self._fallback, keyed)
        #: Its call that makes the outputs of a frame (``Native.step``).
        self.step: Any = None if c is None or self.native is None else self.native.step(c)
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
        python = sink.python
        step = self.step
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
            native: Any = self.native
            step = native.columnar
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
        native: Any = self.native
        if type(e) is EventSource:
            if 0 <= e.id < MAX_C_IDS:
                decorate = native.decorate
                c.add_source(e.id, native.source_items(e, self.stream.origin), message_items(e),
                             len(e.field_names), e, e.field_names,
                             not self.filter.source_ok(e), *(decorate(e) if decorate else ()))
        elif type(e) is WriterProp:
            if 0 <= e.id < MAX_C_IDS:
                c.add_writer(e.id, native.writer_text(e), str(e.id).encode(), e,
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
            c.set_origin(self.stream.origin)
            self.ok = True
        return True

    def _fallback(self, data: bytes, writer_id: int, clock: int) -> Any:
        """An event the C renderer leaves to Python: its bytes, writer and clock; what the
        sink makes of it, or None if the filter leaves it out."""
        stream = self.stream
        event = stream.event(raw_event(data, self._offset, writer_id, clock, stream.types))
        native: Any = self.native
        return native.fallback(event) if self.filter.keeps(event) else None


def decoded(stream: EventStream, sink: Sink, frames: Iterable[Frame | Damage],
            flt: Filter = NO_FILTER, source: str = "", keyed: bool = False) -> Iterator[Any]:
    """A blog file's ``frames`` decoded into what ``sink`` makes of them, the metadata
    applied to ``stream`` (a ``Decoder``'s outputs; ``keyed``: runs for the merge)."""
    decoder = Decoder(stream, sink, flt, source, keyed)
    yield from decoder.outputs(iter_entries(frames, source, raw_events=True,
                                            columns=decoder.columns))


def binlog_outputs(f: BinaryIO, name: str, sink: Sink, keeps: Callable[[Event], bool],
                   damaged: Callable[[int, str], None], keyed: bool = False) -> Iterator[Any]:
    """A C++ binlog file (``bread.cxx``): its Events, those ``keeps`` keeps, given to the
    sink's Python path; for the merge (``keyed``), each block's offset, then its events
    in time order to the sink (``bread.cxx.merge``). Its damage goes to ``damaged``
    (offset, reason) and ends it."""
    from ..cxx.events import read_events   # (only for C++ files: it imports decimal)
    events = read_events(f, name, damaged)
    if keyed:
        from ..cxx.merge import runs
        yield from runs(events, keeps, sink.python)
        return
    yield from sink.python(ev for ev in events if keeps(ev))
    yield from sink.finish()


def _clamp(v: int | None, default: int) -> int:
    return default if v is None else clamp64(v)
