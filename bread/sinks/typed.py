"""The typed table of one call site, read: its rows as Arrow batches, or its columns' kinds.

Two ``bread.decode.decoder`` sinks over a reader whose filter names the site
(``Filter.source``), so that the C walk skips every other event before making
anything of it:

- ``TypedSink``: the site's events as ``pyarrow.RecordBatch`` es of the
  ``tables.COMMON`` columns and one typed column per argument (the kinds
  given, found before). Where every column is of a kind C makes (null, bool,
  int64, float64, string), ``bread/sinks/_tables.c`` puts each value straight into
  its column's buffer, which becomes an Arrow array without a copy; else the
  rows are made from the C renderer's Events. The common columns of a call site
  or a writer are looked up per batch (``BatchSink``'s gather).
- ``KindSink``: the kinds of the site's columns (``tables.Typer``), found by C as
  a bit per kind seen per column, widened in Python.

The Python path makes the same from Events (what C leaves: a rich value, a
lone surrogate; or everything without the extension) and is the reference.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from blogformat.entries import EventSource, FileHeader

from .. import accel
from ..decode.decoder import Native, Sink
from ..entries import Entry
from ..events import Event, EventStream
from ..frames import Frame
from . import tables
from .batches import BatchSink

if TYPE_CHECKING:
    from .._speedups import Renderer

#: The kinds ``bread/sinks/_tables.c`` makes columns of; the most columns it makes.
C_KINDS = ("null", "bool", "int64", "float64", "string")
C_COLUMNS = 32
#: Events per call of the C renderer where it makes Events (few: see
#: ``bread.sinks.events.EventSink.CHUNK``).
CHUNK = 256


class Outputs(Protocol):
    """What the sinks here are read through: a ``bread.Reader`` (its ``outputs``)."""

    def outputs(self, sink: Callable[[EventStream], Sink]) -> Iterator[Any]: ...


class TypedSink(BatchSink):
    """One input's events of the site ``typer`` describes (its positional values, fields
    and their kinds) as Arrow batches of at most ``batch_size`` rows, the arguments'
    columns named ``names``; ``late`` counts those whose values do not fit the kinds
    (written after they were found)."""

    def __init__(self, stream: EventStream, typer: tables.Typer, names: list[str],
                 batch_size: int) -> None:
        super().__init__(stream, ("severity", "writer"), batch_size, arrow=True)
        self.typer = typer
        self.names = names
        self.late = 0
        fields = typer.fields
        self._in_c = (all(k in C_KINDS for k in typer.kinds) and typer.positional <= C_COLUMNS
                      and len(fields) <= C_COLUMNS and len(set(fields)) == len(fields))

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        c = accel.speedups.Renderer([], fallback, False)  # type: ignore[union-attr]
        self._c = c
        if self._in_c:
            c.max_rows = self.batch_size
            self._typed()
            self._walk = c.typed
        else:
            c.max_rows = CHUNK
            c.set_event_type(Event, _dt.timezone.utc)
        return c

    def _typed(self) -> None:
        t = self.typer
        self._c.set_typed(bytes(tables.KINDS.index(k) for k in t.kinds), t.positional,
                          tuple(t.fields))

    def step(self, c: Any) -> Callable[[Frame | None], list]:
        return self._c_step if self._in_c else self._events_step

    def _events_step(self, fr: Frame | None) -> list:
        ready: list = []
        for out in self.python(iter(self._c.events(fr))):
            ready += out
        return ready

    def fallback(self, event: Event) -> Any:
        return event     # the Events mode's (typed rows never call it)

    def metadata(self, e: Entry, apply: Callable[[Entry], bool]) -> list:
        ready = super().metadata(e, apply)
        if self._in_c and self._c is not None and (type(e) is EventSource
                                                   or type(e) is FileHeader):
            self.late += self._c.take_typed()[5]   # (flushed) and which source is the site's
            self._typed()
        return ready

    def _flush(self) -> Iterator[Any]:
        if self._rows:
            typer, rows = self.typer, []
            for ev in self._rows:
                if typer.fits(ev):
                    rows.append(tables.common_values(ev) + typer.row(ev))
                else:        # written after the kinds were found
                    self.late += 1
            self._rows = []
            if rows:
                yield tables.batch(self.names, typer.kinds, rows)
        if self._c_pending:
            self._c_pending = False
            n, us, sids, wids, cols, late = self._c.take_typed()
            self.late += late
            if n:
                yield self._c_batch(n, us, sids, wids, cols)

    def _c_batch(self, n: int, us: bytes, sids: bytes, wids: bytes, cols: list) -> Any:
        import pyarrow as pa

        def ints(b: bytes) -> Any:
            return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(b)])

        def buf(b: bytes | None) -> Any:
            return None if b is None else pa.py_buffer(b)

        wid = ints(wids)
        arrays = [ints(us).view(pa.timestamp("us", tz="UTC")),
                  self._gathered("severity", ints(sids), sids, n),
                  self._gathered("writer", wid, wids, n), wid]
        for name in ("host", "pid", "path"):
            v = self.stream_value(name)
            arrays.append(pa.repeat(pa.scalar(v, pa.int64() if name == "pid" else pa.string()),
                                    n))
        for kind, (data, offsets, valid) in zip(self.typer.kinds, cols):
            if kind == "null":
                arrays.append(pa.nulls(n, pa.string()))
                continue
            bufs = [buf(valid)] + ([buf(offsets)] if kind == "string" else []) + [buf(data)]
            arrays.append(pa.Array.from_buffers(tables.arrow_type(kind), n, bufs))
        return pa.RecordBatch.from_arrays(arrays, names=list(tables.COMMON) + self.names)


class KindSink(Native):
    """One input's share of finding a site's column kinds: into ``found`` (shared by the
    inputs), a ``Kinds``; it gives nothing out. Its own C side (``Native``): the
    Renderer's ``typed`` call in its kinds mode."""

    metadata = item = None

    def __init__(self, stream: EventStream, found: "Kinds") -> None:
        self.stream = stream
        self.found = found
        self._c: Any = None
        self.native: Native | None = self

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        c = self._c = accel.speedups.Renderer([], fallback, False)  # type: ignore[union-attr]
        c.set_typed(None, 0, ())
        return c

    def step(self, c: Any) -> Callable[[Frame | None], list]:
        return self._step

    def _step(self, fr: Frame | None) -> list:
        c = self._c
        c.typed(fr)
        positional, pos_bits, field_bits, sids = c.take_typed()
        for sid in sids:     # each a source of this stream that the site's name names
            self.found.source(self.stream.sources[sid])
        if sids:
            assert self.found.typer is not None
            self.found.typer.add_kinds(positional, pos_bits, field_bits)
        return []

    def python(self, events: Iterator[Event]) -> tuple:
        for ev in events:
            self.found.source(ev.source).add(ev)
        return ()

    def finish(self) -> tuple:
        return ()


class Kinds:
    """The Typer of the events ``which`` names, over every input."""

    def __init__(self, which: int | str) -> None:
        self.which = which
        self.typer: tables.Typer | None = None

    def source(self, src: EventSource) -> tables.Typer:
        self.typer = tables.typer_of(self.typer, src, self.which)
        return self.typer


class TypedTable:
    """The events of ``reader`` (whose filter names the site) as Arrow batches of the
    site's typed table (iterate it), the arguments' columns named ``names``; then
    ``late`` counts the events left out, whose values do not fit the kinds ``typer``
    holds."""

    def __init__(self, reader: Outputs, typer: tables.Typer, names: list[str],
                 batch_size: int = 65536) -> None:
        self.reader = reader
        self.typer = typer
        self.names = names
        self.batch_size = batch_size
        self._sinks: list[TypedSink] = []

    @property
    def late(self) -> int:
        return sum(s.late for s in self._sinks)

    def _sink(self, stream: EventStream) -> TypedSink:
        self._sinks.append(TypedSink(stream, self.typer, self.names, self.batch_size))
        return self._sinks[-1]

    def __iter__(self) -> Iterator[Any]:
        for out in self.reader.outputs(self._sink):
            yield from out


def find_kinds(reader: Outputs, which: int | str) -> tables.Typer | None:
    """The Typer of the events of ``reader`` that ``which`` names (the reader's filter
    names them too), None if there is none."""
    found = Kinds(which)
    for _ in reader.outputs(lambda stream: KindSink(stream, found)):
        pass
    return found.typer
