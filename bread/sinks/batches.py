"""Entries -> batches of columns, for pandas, Arrow and the Spark data source.

``Reader.batches`` (and ``bread.read_batches``) yields the events as batches
of columns instead of one object per event. With pyarrow installed, a batch
is a ``pyarrow.RecordBatch``; otherwise a dict of column name -> values, the
numeric columns as ``array.array("q")`` (no Python object per event).

The columns sink of ``bread.decode.decoder``: its C side (``bread/sinks/_batches.c``,
``Renderer.columns``) decodes each events frame into int64 buffers (clock,
time, source id, writer id) and the message's UTF-8, which become Arrow
arrays without a copy (each a ``Block``: its memory goes back to a pool that the
next batch's buffers reuse once Arrow lets go of it); the columns that are
properties of a call site or a writer are looked up per batch. The Python path
builds the same columns from Events, and is the reference.
"""

from __future__ import annotations

import array
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from blogformat.entries import EventSource, FileHeader, WriterProp
from blogformat.severity import Severity

from .. import accel
from ..decode.decoder import PYTHON, Native, utf8
from ..entries import Entry
from ..errors import OptionError
from ..events import Event, EventStream
from ..frames import Frame
from .json import compact, json_pair

if TYPE_CHECKING:
    from .._speedups import Renderer

#: Every column, in this order; ``columns=`` picks some. ``args`` and ``fields`` are JSON
#: text (``bread.sinks.json.json_text``: a list, an object); ``host``, ``pid`` and ``program``
#: come from the file header of the stream (None where it does not say), ``path`` is the
#: input's name.
COLUMNS = ("time", "clock", "severity", "severity_value", "category", "writer", "writer_id",
           "source_id", "function", "file", "line", "format", "message", "args", "fields",
           "host", "pid", "program", "path")
#: Columns that are a property of the stream (its file header) or of the input.
STREAM_COLUMNS = ("host", "pid", "program", "path")
#: Columns that are a property of the call site.
SOURCE_COLUMNS = {
    "severity": lambda s: severity_name(s.severity),
    "severity_value": lambda s: s.severity,
    "category": lambda s: _text(s.category),
    "function": lambda s: _text(s.function),
    "file": lambda s: _text(s.file),
    "line": lambda s: s.line,
    "format": lambda s: _text(s.format),
}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT_COLUMNS = {"time", "clock", "severity_value", "writer_id", "source_id", "line", "pid"}
_TEXT_COLUMNS = ("message", "args", "fields")
#: What an event of a source the file never described shows (as ``bread.read`` does).
_UNKNOWN = EventSource(0, 0, "?", "?", "?", 0, "", "")


def severity_name(value: int) -> str:
    """A severity's name (``INFO``), or its number where no Severity has it."""
    try:
        return Severity(value).name
    except ValueError:
        return str(value)


def _int64(v: int) -> int | None:
    return v if _INT64[0] <= v <= _INT64[1] else None


def _text(v: str) -> str:
    """Text a column holds: valid UTF-8, a lone surrogate (from a file's undecodable
    bytes) written as ``\\udXXX``, as in the message column."""
    return utf8(v).decode()


def _origin_value(origin: Any, name: str) -> Any:
    """A stream column's value (``Origin``): text as ``_text`` writes it (a header's
    host or program may hold a lone surrogate; the path is already ``name_text``)."""
    v = getattr(origin, name)
    return _text(v) if type(v) is str else v


def _utf8_or_none(v: str | None) -> bytes | None:
    return None if v is None else v.encode()


def check_columns(columns: Sequence[str] | None) -> tuple[str, ...]:
    """The columns asked for, checked (a clear error for an unknown name)."""
    if columns is None:
        return COLUMNS
    if isinstance(columns, str):
        raise TypeError("columns must be a sequence of column names, not a str")
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise OptionError(f"unknown column(s) {', '.join(map(repr, unknown))}; "
                          f"the columns are {', '.join(COLUMNS)}")
    return tuple(dict.fromkeys(columns))


def has_arrow() -> bool:
    """True if pyarrow can be imported."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


class BatchSink(Native):
    """Events as batches of at most ``batch_size`` rows (``bread.decode.decoder.Sink``): the
    outputs are lists of batches, the C renderer's column buffers or rows of Events made
    by Python. Sorted, it is given the sorted Events (no item of its own to merge). Its
    own C side (``Native``): the Renderer's ``columns`` call, and ``columnar``."""

    item = None

    def __init__(self, stream: EventStream, columns: tuple[str, ...], batch_size: int, *,
                 arrow: bool) -> None:
        self.stream = stream
        self.columns = columns
        self.batch_size = batch_size
        self.arrow = arrow
        self._rows: list[Event] = []            # Python path: the batch's events
        self._c: Any = None                     # the C renderer
        self._walk: Any = None                  # its call that fills the buffers
        self._c_pending = False                 # its buffers hold rows
        self._tables: dict[str, tuple[dict[int, Any], Any]] = {}   # see _table
        self._repeated: dict[tuple[str, int], Any] = {}   # a stream column's Arrow array
        self.native: Native | None = self
        self.columnar = self._columnar

    def metadata(self, e: Entry, apply: Callable[[Entry], bool]) -> list:
        # A batch looks its sources and writers up when it is made: any that is described
        # (its rows may already refer to it) or a new stream ends it.
        t = type(e)
        ready = list(self._flush()) if t is FileHeader or t is EventSource or t is WriterProp \
            else []
        apply(e)
        if t is FileHeader:
            self._tables.clear()
            self._repeated.clear()
        elif (t is EventSource or t is WriterProp) and self._tables:
            self._retable(e)   # type: ignore[arg-type]
        return ready

    # --- the C renderer --------------------------------------------------------

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        c = accel.speedups.Renderer([], fallback, False)  # type: ignore[union-attr]
        c.max_rows = self.batch_size
        c.want_message = "message" in self.columns
        c.want_json = "args" in self.columns or "fields" in self.columns
        self._c = c
        self._walk = c.columns    # a frame's rows (None: its rest) into the C buffers
        return c

    def step(self, c: Any) -> Callable[[Frame | None], list]:
        return self._c_step

    def _columnar(self, fr: Frame | None) -> list:
        """As ``_c_step``, the rows of a columnar frame (``Renderer.columnar``: state
        PYTHON after its first call if C took none of it)."""
        ready = list(self._flush()) if fr is None or self._rows else []
        if self._c.columnar(fr):
            self._c_pending = True
        return ready

    def _c_step(self, fr: Frame | None) -> list:
        """Rows of a frame (None: of its rest) into the C buffers; the batches to give
        first: the Python path's rows before a frame, a whole batch before the rest."""
        ready = list(self._flush()) if fr is None or self._rows else []
        if self._walk(fr):
            self._c_pending = True
        if self._c.state == PYTHON:
            ready += self._flush()
        return ready

    def fallback(self, event: Event) -> tuple[bytes, bytes, bytes]:
        """The message, args and fields (UTF-8) of an event (or of its source, or writer)
        that the C renderer leaves to Python."""
        cols = self.columns
        if "args" in cols or "fields" in cols:   # within one MAX_JSON, as -o jsonl
            args, fields = json_pair(event.args, event.fields)
        return (utf8(event.message) if "message" in cols else b"",
                compact(args).encode() if "args" in cols else b"",
                compact(fields).encode() if "fields" in cols else b"")

    # --- Python path: the reference -----------------------------------------

    def python(self, events: Iterator[Event]) -> Iterator[list]:
        size = self.batch_size
        for ev in events:
            if self._c_pending:   # rows of the C path come first
                yield list(self._flush())
            self._rows.append(ev)
            if len(self._rows) >= size:
                yield list(self._flush())

    def finish(self) -> Iterator[list]:
        yield list(self._flush())

    def _python_columns(self) -> dict[str, list]:
        rows = self._rows
        out: dict[str, list] = {}
        pairs: list = []   # args and fields: their JSON within one MAX_JSON, made once
        for name in self.columns:
            if name == "time":
                out[name] = [_int64(e.ns) for e in rows]
            elif name == "clock":
                out[name] = [_int64(e.clock) for e in rows]
            elif name in SOURCE_COLUMNS:
                get = SOURCE_COLUMNS[name]
                vals = [get(e.source) for e in rows]
                out[name] = [_int64(v) for v in vals] if name in _INT_COLUMNS else vals
            elif name == "writer":
                out[name] = [_text(e.writer_prop.name) for e in rows]
            elif name == "writer_id":
                out[name] = [_int64(e.writer_prop.id) for e in rows]
            elif name == "source_id":
                out[name] = [_int64(e.source.id) for e in rows]
            elif name == "message":
                out[name] = [utf8(e.message).decode() for e in rows]
            elif name in ("args", "fields"):
                pairs = pairs or [json_pair(e.args, e.fields) for e in rows]
                out[name] = [compact(p[0 if name == "args" else 1]) for p in pairs]
            elif name in STREAM_COLUMNS:
                out[name] = [_origin_value(e.origin, name) for e in rows]
        return out

    def _c_columns(self) -> tuple[int, dict[str, Any]]:
        (rows, clock, ns, sid, wid, msg, msg_off, args, args_off, fields,
         fields_off) = self._c.take_columns()
        return rows, {"clock": clock, "time": ns, "source_id": sid, "writer_id": wid,
                      "message": (msg_off, msg), "args": (args_off, args),
                      "fields": (fields_off, fields)}

    # --- batches -----------------------------------------------------------------

    def _flush(self) -> Iterator[Any]:
        if self._rows:
            cols = self._python_columns()
            n = len(self._rows)
            self._rows = []
            yield self._make(n, cols, None)
        if self._c_pending:
            self._c_pending = False
            n, bufs = self._c_columns()
            if n:
                yield self._make(n, None, bufs)

    def stream_value(self, name: str) -> Any:
        """A stream column's value: the input's name, or what its file header says."""
        return _origin_value(self.stream.origin, name)

    def _lookups(self, name: str, ids: Sequence[int]) -> list:
        """Per distinct id, the value of a source or writer column."""
        if name in SOURCE_COLUMNS:
            get = SOURCE_COLUMNS[name]
            return [get(self.stream.sources.get(i, _UNKNOWN)) for i in ids]
        return [_text(w.name) if (w := self.stream.writers.get(i)) is not None else ""
                for i in ids]

    def _make(self, n: int, cols: dict[str, list] | None, bufs: dict[str, Any] | None) -> Any:
        if bufs is None:
            assert cols is not None
            if not self.arrow:
                return {k: array.array("q", v) if k in _INT_COLUMNS and None not in v else v
                        for k, v in cols.items()}
            import pyarrow as pa
            return pa.RecordBatch.from_arrays([_arrow_list(k, v) for k, v in cols.items()],
                                              names=list(cols))
        if self.arrow:
            return self._arrow_batch(n, bufs)
        bufs = {k: (bytes(v[0]), bytes(v[1])) if type(v) is tuple else bytes(v)
                for k, v in bufs.items()}   # the C Blocks (buffers) as bytes
        sids = array.array("q", bufs["source_id"])
        wids = array.array("q", bufs["writer_id"])
        out: dict[str, Any] = {}
        for name in self.columns:
            if name in ("time", "clock"):
                out[name] = array.array("q", bufs[name])
            elif name == "source_id":
                out[name] = sids
            elif name == "writer_id":
                out[name] = wids
            elif name in _TEXT_COLUMNS:
                off = array.array("q", bufs[name][0])
                data = bufs[name][1]
                out[name] = [data[off[i]:off[i + 1]].decode() for i in range(n)]
            elif name in STREAM_COLUMNS:
                v = self.stream_value(name)
                out[name] = array.array("q", [v] * n) if name == "pid" and v is not None \
                    else [v] * n
            else:
                ids = sids if name in SOURCE_COLUMNS else wids
                distinct = sorted(set(ids))
                table = dict(zip(distinct, self._lookups(name, distinct)))
                vals = [table[i] for i in ids]
                if name in _INT_COLUMNS:   # beyond int64 (a hostile line): None, in a list
                    vals = [_int64(v) for v in vals]
                    out[name] = vals if None in vals else array.array("q", vals)
                else:
                    out[name] = vals
        return out

    def _table(self, name: str) -> tuple[dict[int, Any], Any]:
        """A source or writer column's value per id as ``gather`` takes it (UTF-8 bytes,
        or an int within 64 bits; None for a null), and the value of an unknown id;
        made once per column per stream (``_retable`` keeps it up to date)."""
        t = self._tables.get(name)
        if t is None:
            if name in SOURCE_COLUMNS:
                get = SOURCE_COLUMNS[name]
                conv = _int64 if name in _INT_COLUMNS else _utf8_or_none
                t = ({i: conv(get(s)) for i, s in self.stream.sources.items()},
                     conv(get(_UNKNOWN)))
            else:
                t = ({i: utf8(w.name) for i, w in self.stream.writers.items()}, b"")
            self._tables[name] = t
        return t

    def _retable(self, e: EventSource | WriterProp) -> None:
        """The tables made so far, brought up to date for the one id ``e`` describes
        (not remade whole: a stream may describe a source before each frame)."""
        is_src = type(e) is EventSource
        owner = self.stream.sources.get(e.id) if is_src else self.stream.writers.get(e.id)
        for name, (table, _) in self._tables.items():
            if (name in SOURCE_COLUMNS) != is_src:
                continue
            if owner is None:
                table.pop(e.id, None)
            elif is_src:
                conv = _int64 if name in _INT_COLUMNS else _utf8_or_none
                table[e.id] = conv(SOURCE_COLUMNS[name](owner))
            else:
                table[e.id] = utf8(owner.name)   # type: ignore[union-attr]  # a WriterProp

    def _gathered(self, name: str, ids: Any, id_bytes: bytes, n: int) -> Any:
        """The column of a source's or a writer's property, one value per row."""
        import pyarrow as pa
        table, default = self._table(name)
        text = name not in _INT_COLUMNS
        got = accel.speedups.gather(id_bytes, table, default, text)   # type: ignore[union-attr]
        if got is not None:
            values, offsets, validity = got
            valid = pa.py_buffer(validity) if validity is not None else None
            if text:
                return pa.Array.from_buffers(pa.string(), n, [valid, pa.py_buffer(offsets),
                                                              pa.py_buffer(values)])
            return pa.Array.from_buffers(pa.int64(), n, [valid, pa.py_buffer(values)])
        # More text than one Arrow string array holds: Arrow's own take (which says so).
        import pyarrow.compute as pc
        distinct = pc.unique(ids)
        values = _arrow_list(name, self._lookups(name, distinct.to_pylist()))
        return values.take(pc.index_in(ids, value_set=distinct))

    def _arrow_batch(self, n: int, bufs: dict[str, Any]) -> Any:
        import pyarrow as pa

        def ints(b: bytes) -> Any:
            return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(b)])

        sids, wids = ints(bufs["source_id"]), ints(bufs["writer_id"])
        arrays = []
        for name in self.columns:
            if name == "time":
                arrays.append(ints(bufs["time"]).view(pa.timestamp("ns", tz="UTC")))
            elif name == "clock":
                arrays.append(ints(bufs["clock"]))
            elif name == "source_id":
                arrays.append(sids)
            elif name == "writer_id":
                arrays.append(wids)
            elif name in _TEXT_COLUMNS:
                off, data = bufs[name]
                arrays.append(pa.Array.from_buffers(pa.large_string(), n,
                                                    [None, pa.py_buffer(off), pa.py_buffer(data)]))
            elif name in STREAM_COLUMNS:   # one value for the whole batch, made once per size
                arr = self._repeated.get((name, n))
                if arr is None:
                    v = self.stream_value(name)
                    arr = self._repeated[name, n] = pa.repeat(
                        pa.scalar(v, pa.int64() if name == "pid" else pa.string()), n)
                arrays.append(arr)
            else:
                key = "source_id" if name in SOURCE_COLUMNS else "writer_id"
                arrays.append(self._gathered(name, sids if key == "source_id" else wids,
                                             bufs[key], n))
        return pa.RecordBatch.from_arrays(arrays, names=list(self.columns))


def _arrow_list(name: str, values: list) -> Any:
    import pyarrow as pa
    if name == "time":
        return pa.array(values, pa.int64()).view(pa.timestamp("ns", tz="UTC"))
    if name in _INT_COLUMNS:
        return pa.array([_int64(v) if v is not None else None for v in values], pa.int64())
    return pa.array(values, pa.large_string() if name in _TEXT_COLUMNS else pa.string())


def portable(batch: Any) -> Any:
    """A batch as Spark and Parquet readers take it everywhere: time in microseconds
    (``clock`` keeps every tick; 64 bits of ns are always within the years 1678-2261),
    text as ``string`` rather than ``large_string``."""
    import pyarrow as pa
    arrays = []
    for name, col in zip(batch.schema.names, batch.columns):
        if name == "time":
            col = col.cast(pa.timestamp("us", tz="UTC"), safe=False)
        elif pa.types.is_large_string(col.type):
            col = col.cast(pa.string())
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
