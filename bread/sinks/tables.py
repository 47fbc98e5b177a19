"""Typed tables per call site: one column per argument, with Arrow types.

What Parquet export writes beside the events table, and what
``bread.spark.events`` loads: the events of one EventSource (a call site) as
rows whose columns are its arguments, typed, as a columnar log keeps each
field in its own typed column. Columns are named after the keyword fields,
and after an ``@blog.event`` function's parameters, else ``arg0``, ``arg1``,
... for the positional values.

A column's type is the widest common type of the values the site logged
(``Typer``): only bools ``bool``; ints (and bools) within 64 bits ``int64``;
ints and floats ``float64`` (an int beyond 2**53 loses precision there); only
str ``string``; only datetimes ``timestamp[us, UTC]``; only dates ``date32``;
None is a null in any of them. Anything else (ints beyond 64 bits, mixed
kinds, lists, dicts, Decimals, dataclasses...) is ``string`` holding each
value's JSON (``bread.sinks.json.json_text``): never a silent null.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, Iterator

from blogformat.entries import EventSource

from ..errors import OptionError
from ..events import Event
from ..decode.filters import names_source
from .batches import severity_name
from .json import json_text

#: Columns every typed table starts with (then the arguments).
COMMON = ("time", "severity", "writer", "writer_id", "host", "pid", "path")
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: Microseconds of the years 1 to 9999, what datetime, Spark and pandas hold.
TIME_RANGE_US = (-62_135_596_800_000_000, 253_402_300_799_999_999)
#: Kinds of value, from narrow to wide.
KINDS = ("null", "bool", "int64", "float64", "string", "timestamp", "date", "json")


def site(src: EventSource) -> tuple:
    """What identifies a call site across files and processes (ids differ between them)."""
    return (src.category, src.function, src.file, src.line, src.format)


def argument_names(src: EventSource, positional: int) -> list[str]:
    """The columns of a source's arguments: the positional ones named as the source
    names them (an ``@blog.event`` function's parameters), else ``arg0``...; then its
    keyword fields."""
    known = src.arg_names if len(src.arg_names) == positional else ()
    names = list(known or (f"arg{i}" for i in range(positional))) + list(src.field_names)
    seen: set[str] = set(COMMON)
    out = []
    for n in names:     # a field named like a common column, or twice, gets a suffix
        base, k = n, 1  # (whatever the case: Spark's column names are case-insensitive)
        while n.casefold() in seen:
            n, k = f"{base}_{k}", k + 1
        seen.add(n.casefold())
        out.append(n)
    return out


def _kind(v: Any) -> str:
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "bool"
    if t is int:
        return "int64" if _INT64[0] <= v <= _INT64[1] else "json"
    if t is float:
        return "float64"
    if t is str:
        return "string"
    if t is _dt.datetime:
        return "timestamp"
    if t is _dt.date:
        return "date"
    return "json"


def widest(a: str, b: str) -> str:
    """The kind that holds values of kinds ``a`` and ``b``."""
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    nums = ("bool", "int64", "float64")
    if a in nums and b in nums:
        return nums[max(nums.index(a), nums.index(b))]
    return "json"


class Typer:
    """The kinds of a site's columns, widened value by value: ``positional`` values, then
    one per field of ``fields`` (the source's field names)."""

    def __init__(self, src: EventSource, positional: int = 0, kinds: list[str] | None = None,
                 fields: tuple[str, ...] | None = None) -> None:
        self.source = src
        self.fields = src.field_names if fields is None else fields
        self.positional = positional
        self.kinds: list[str] = list(kinds or [])

    def add(self, ev: Event) -> None:
        if len(ev.args) > self.positional:
            # more positional values than seen before: the fields move right
            extra = len(ev.args) - self.positional
            self.kinds[self.positional:self.positional] = ["null"] * extra
            self.positional = len(ev.args)
        self._fields_in()
        for i, v in enumerate(self.row(ev)):
            self.kinds[i] = widest(self.kinds[i], _kind(v))

    def _fields_in(self) -> None:
        n = self.positional + len(self.fields)
        if len(self.kinds) < n:
            self.kinds += ["null"] * (n - len(self.kinds))

    def add_kinds(self, positional: int, pos_bits: list[int], field_bits: list[int]) -> None:
        """Widen by kinds found elsewhere (``bread/sinks/_tables.c``): ``positional`` values at
        most, and the kinds seen per positional value and per field, a bit per kind."""
        if positional > self.positional:
            extra = positional - self.positional
            self.kinds[self.positional:self.positional] = ["null"] * extra
            self.positional = positional
        self._fields_in()
        for i, bits in enumerate(pos_bits + [0] * (self.positional - len(pos_bits))
                                 + field_bits):
            for k, kind in enumerate(KINDS):
                if bits >> k & 1:
                    self.kinds[i] = widest(self.kinds[i], kind)

    def fits(self, ev: Event) -> bool:
        """The event's values fit the columns as they are (a file that grew after the types
        were found may hold ones that do not)."""
        if len(ev.args) > self.positional:
            return False
        return all(widest(k, _kind(v)) == k for k, v in zip(self.kinds, self.row(ev)))

    @property
    def names(self) -> list[str]:
        return argument_names(self.source, self.positional)

    def row(self, ev: Event) -> list:
        """An event's argument values in the columns' order (None where it has none)."""
        args = list(ev.args)[:self.positional]
        return args + [None] * (self.positional - len(args)) + \
            [ev.fields.get(f) for f in self.fields]


def columns_typer(positional: int, kinds: list[str], fields: tuple[str, ...]) -> Typer:
    """A Typer of columns found before (elsewhere: Spark's driver), with no call site."""
    return Typer(EventSource(0, 0, "", "", "", 0, "", "", fields), positional, kinds)


def arrow_type(kind: str) -> Any:
    import pyarrow as pa
    return {"null": pa.string(), "bool": pa.bool_(), "int64": pa.int64(),
            "float64": pa.float64(), "string": pa.string(),
            "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32(),
            "json": pa.string()}[kind]


def spark_type(kind: str) -> str:
    return {"null": "STRING", "bool": "BOOLEAN", "int64": "BIGINT", "float64": "DOUBLE",
            "string": "STRING", "timestamp": "TIMESTAMP", "date": "DATE",
            "json": "STRING"}[kind]


def convert(kind: str, values: list) -> list:
    """Values as a column of ``kind`` holds them."""
    if kind == "json":
        return [None if v is None else json_text(v) for v in values]
    if kind == "float64":
        return [None if v is None else float(v) for v in values]
    if kind == "int64":
        return [None if v is None else int(v) for v in values]
    if kind == "timestamp":
        return [None if v is None else v if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc)
                for v in values]
    if kind == "null":
        return [None] * len(values)
    if kind == "string":     # a lone surrogate has no UTF-8: written \udXXX, as in messages
        return [v if v is None or v.isascii() else v.encode("utf-8", "backslashreplace").decode()
                for v in values]
    return values


def _int64(v: int) -> int | None:
    return v if _INT64[0] <= v <= _INT64[1] else None


def common_values(ev: Event) -> list:
    """The COMMON columns of an event (a time beyond the years 1-9999 or an id beyond
    64 bits, only in a crafted file: None)."""
    us = ev.ns // 1000
    return [us if TIME_RANGE_US[0] <= us <= TIME_RANGE_US[1] else None,
            severity_name(ev.source.severity), ev.writer, _int64(ev.writer_id), ev.host,
            ev.pid, ev.path]


def batch(names: list[str], kinds: list[str], rows: list[list]) -> Any:
    """A pyarrow.RecordBatch of COMMON columns and typed arguments from rows of
    ``common_values(ev) + typer.row(ev)``."""
    import pyarrow as pa
    cols = list(zip(*rows)) if rows else [()] * (len(COMMON) + len(names))
    arrays = [pa.array(cols[0], pa.int64()).view(pa.timestamp("us", tz="UTC")),
              pa.array(cols[1], pa.string()), pa.array(cols[2], pa.string()),
              pa.array(cols[3], pa.int64()), pa.array(cols[4], pa.string()),
              pa.array(cols[5], pa.int64()), pa.array(cols[6], pa.string())]
    for k, kind in enumerate(kinds):
        arrays.append(pa.array(convert(kind, list(cols[len(COMMON) + k])), arrow_type(kind)))
    return pa.RecordBatch.from_arrays(arrays, names=list(COMMON) + names)


def infer(events: Iterable[Event], which: int | str) -> Typer | None:
    """The Typer of the events whose source ``which`` names (None if none does); all
    matching sources must be one call site (its format and fields)."""
    typer: Typer | None = None
    for ev in events:
        if not names_source(ev.source, which):
            continue
        typer = typer_of(typer, ev.source, which)
        typer.add(ev)
    return typer


def typer_of(typer: Typer | None, src: EventSource, which: int | str) -> Typer:
    """The Typer of the events ``which`` names, with one more of their sources: a new one
    if None; an error if the source is another kind of event (format, fields)."""
    if typer is None:
        return Typer(src)
    if (src.format, src.field_names) != (typer.source.format, typer.source.field_names):
        raise OptionError(f"{which!r} names more than one kind of event: "
                          f"{typer.source.format!r} and {src.format!r}; "
                          "name the format string or the source id")
    return typer


def rows_of(events: Iterable[Event], which: int | str, typer: Typer) -> Iterator[list]:
    for ev in events:
        if names_source(ev.source, which):
            yield common_values(ev) + typer.row(ev)
