"""Values as JSON, and events as JSON lines and CSV, for jq, spreadsheets and
``spark.read.json``.

JSON keeps each value's type as far as JSON allows; what JSON has no type
for becomes an object with one ``$``-key saying what it is (docs/reading.md
lists them). An int within 64 bits (signed or unsigned) is a number, a larger
one ``{"$int": "..."}``; a non-finite float ``{"$float": "nan"}``, bytes
``{"$bytes": base64}``, a datetime ``{"$datetime": iso}`` (with ``"zone":
"Europe/Paris"`` where it had a named zone), a Decimal ``{"$decimal": "1.10"}``,
a tuple ``{"$tuple": [...]}``, a dataclass ``{"$dataclass": type, "fields": {...}}``...
A value of another format's reading says its own JSON (``json_object``: the C++
structures, enums and repeated values of ``bread.cxx.values``).
"""

from __future__ import annotations

import binascii
import functools
import datetime as _dt
import io
import json
import math
import sys
from decimal import Decimal
from typing import Any, Iterable, Iterator

from blogformat.valueclasses import DataclassValue, EnumValue, ExceptionValue, ExtValue, OpaqueValue

from ..events import Event
from ..render import BIDI_FORMATS, escape_controls

#: The ints that are JSON numbers: those of 64 bits, signed or unsigned (Python's json,
#: pandas, Spark, DuckDB and jq 1.7 read them exactly); the others are ``{"$int": ...}``.
_INT_MIN, _INT_END = -(1 << 63), 1 << 64
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _int_text(v: int) -> str:
    """An int's decimal digits; past Python's limit on them (4300 digits by default: the
    conversion takes quadratic time, so a crafted file's huge int would take minutes),
    its hexadecimal, ``0x...``, which takes linear time."""
    try:
        return str(v)
    except ValueError:
        return hex(v)


#: Characters of JSON that the values of one event make at most (its args and fields
#: together). A value that would pass it is written as ``{"$cut": type, "limit":
#: MAX_JSON}``, and counting stops there: its text could be far larger than its bytes
#: (a crafted file's list of 40,000 references to a record type whose name, written once
#: in the metadata, is 128 Ki characters long names it 40,000 times, 5 GB).
MAX_JSON = 64 << 20
#: Containers nested deeper than this are written as ``{"$cut": type, "depth": ...}``
#: (a crafted file's nesting would otherwise exhaust the recursion limit).
MAX_JSON_DEPTH = 100


class _Spent(Exception):
    """The JSON budget is spent: the value being converted is cut."""


class _Budget:
    """Characters of JSON still allowed, taken as the conversion makes each text."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def text(self, s: str) -> str:
        """``s``, its JSON's length (at its longest, escapes and all) taken."""
        n = len(s)
        if s.isascii() and s.isprintable():
            n += s.count('"') + s.count("\\") + 2
        else:
            n = 12 * n + 2   # \uXXXX, or a surrogate pair of them, per character
        self.left -= n
        if self.left < 0:
            raise _Spent
        return s

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _Spent


_UNBOUNDED = 1 << 62


def _base64(data: bytes | bytearray) -> str:
    """``base64.b64encode(data)`` as text (binascii, which it calls: base64 costs an import)."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def json_value(v: Any) -> Any:
    """A value as JSON can hold it (see the module docstring)."""
    return _json(v, 0, _Budget(_UNBOUNDED))


def _json(v: Any, depth: int, b: _Budget) -> Any:
    t = type(v)
    if v is None or t is bool:
        b.take(5)
        return v
    if t is str:
        return b.text(v)
    if t is int:
        b.take(24)
        return v if _INT_MIN <= v < _INT_END else {"$int": b.text(_int_text(v))}
    if t is float:
        b.take(24)
        return v if math.isfinite(v) else {"$float": repr(v)}
    d = depth + 1
    b.take(16)
    if d > MAX_JSON_DEPTH:
        return {"$cut": t.__name__, "depth": MAX_JSON_DEPTH}
    if t is list:
        return [_json(x, d, b) for x in v]
    if t is dict:
        if all(type(k) is str for k in v):
            return {b.text(k): _json(x, d, b) for k, x in v.items()}
        return {"$map": [[_json(k, d, b), _json(x, d, b)] for k, x in v.items()]}
    if t is tuple:
        return {"$tuple": [_json(x, d, b) for x in v]}
    if isinstance(v, (set, frozenset)):   # SetValue, FrozenSetValue: in the logged order
        return {"$frozenset" if isinstance(v, frozenset) else "$set": [_json(x, d, b) for x in v]}
    if isinstance(v, (bytes, bytearray)):
        b.take(len(v) * 4 // 3 + 16)
        return {"$bytes": _base64(v)}
    if isinstance(v, _dt.datetime):
        zone = getattr(v.tzinfo, "key", None) or getattr(v.tzinfo, "zone", None)
        return {"$datetime": v.isoformat(), "zone": b.text(zone)} if isinstance(zone, str) \
            else {"$datetime": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"$date": v.isoformat()}
    if isinstance(v, _dt.time):
        return {"$time": v.isoformat()}
    if isinstance(v, _dt.timedelta):
        return {"$timedelta": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, Decimal):
        return {"$decimal": b.text(str(v))}
    uuid = sys.modules.get("uuid")    # (no value is a UUID before uuid is imported)
    if uuid is not None and isinstance(v, uuid.UUID):
        return {"$uuid": str(v)}
    if isinstance(v, EnumValue):
        return {"$enum": b.text(v.type), "name": b.text(v.name), "value": _json(v.value, d, b)}
    if isinstance(v, DataclassValue):
        return {"$dataclass": b.text(v.type), "fields": _json(v.fields, d, b)}
    if isinstance(v, ExceptionValue):
        # Frames and chain as a file holds them: a crafted one's items may be any value.
        got = {"$exception": b.text(v.type), "message": b.text(v.message),
               "traceback": None if v.traceback is None else b.text(v.traceback),
               "frames": _json([list(f) for f in v.frames], d, b),
               "notes": _json(list(v.notes), d, b),
               "chain": _json([[t, m, [list(f) for f in fr], list(no), link]
                               for t, m, fr, no, link in v.chain], d, b)}
        if v.exceptions:     # a group's, each as an exception value of its own
            got["exceptions"] = [_json(x, d, b) for x in v.exceptions]
        if v.syntax:
            got["syntax"] = _json(list(v.syntax), d, b)
        return got
    if isinstance(v, OpaqueValue):
        return {"$opaque": b.text(v.type), "text": b.text(v.text)}
    if isinstance(v, ExtValue):
        b.take(len(v.data) * 4 // 3 + 16)
        return {"$ext": v.code, "data": _base64(v.data)}
    as_json = getattr(t, "json_object", None)   # a C++ binlog file's (bread.cxx.values)
    if as_json is not None:
        return as_json(v, b.text, lambda x: _json(x, d, b))
    return {"$opaque": type(v).__name__, "text": str(v)}   # pragma: no cover - not decoded


def json_values(values: Any, left: int = MAX_JSON) -> tuple[list, int]:
    """The ``json_value`` of each value, and what is left of ``left`` (characters of JSON)
    after them: a value whose JSON would pass it is ``{"$cut": type, "limit": MAX_JSON}``
    instead, found without making more than ``left`` of it."""
    out = []
    b = _Budget(left)
    for v in values:
        before = b.left
        try:
            j = _json(v, 0, b)
        except _Spent:
            b.left = before
            j = {"$cut": type(v).__name__, "limit": MAX_JSON}
        out.append(j)
    return out, b.left


def json_pair(args: Any, fields: dict) -> tuple[list, Any]:
    """The JSON of an event's args (a list) and fields (an object, or ``$map`` if a name
    is not a str), within one MAX_JSON together, as ``-o jsonl`` writes them."""
    a, left = json_values(args)
    vals, _ = json_values(fields.values(), left)
    if all(type(k) is str for k in fields):
        return a, dict(zip(fields, vals))
    return a, {"$map": [[json_value(k), x] for k, x in zip(fields, vals)]}


_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode


def json_text(value: Any) -> str:
    """Compact JSON of a value (``json_value``; a list's items or a dict's values past
    MAX_JSON cut as ``json_values`` cuts them), in UTF-8 as it is, except that a text
    with a lone surrogate (no UTF-8 for it) is written all in ASCII escapes."""
    if type(value) is list:
        v: Any = json_values(value)[0]
    elif type(value) is dict:
        v = json_pair((), value)[1]
    else:
        v = json_values([value])[0][0]
    return compact(v)


def compact(v: Any) -> str:
    """A ``json_value``'s compact JSON text (all in ASCII escapes if a lone surrogate
    would have no UTF-8)."""
    text = _COMPACT(v)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return _ASCII(v)
    return text


def iso_time(ns: int, tz: _dt.tzinfo) -> str:
    """ISO 8601 with nanoseconds and the zone's offset; the raw number if out of range."""
    secs, frac = divmod(ns, 1_000_000_000)
    head, tail = _iso_second(secs, tz)
    return str(ns) if head is None else f"{head}.{frac:09d}{tail}"


def iso_parts(secs: int, tz: _dt.tzinfo) -> tuple[bytes, bytes] | None:
    """``iso_time``'s text of a second, before its nanoseconds (the ``.`` included) and
    after them; None if out of range (the C writer's time in ``--tz``'s zone)."""
    head, tail = _iso_second(secs, tz)
    return None if head is None else ((head + ".").encode(), tail.encode())


@functools.lru_cache(maxsize=64)   # events come many to a second
def _iso_second(secs: int, tz: _dt.tzinfo) -> tuple[str | None, str]:
    try:
        t = (_EPOCH + _dt.timedelta(seconds=secs)).astimezone(tz)
    except (OverflowError, ValueError):
        return None, ""
    off = t.utcoffset() or _dt.timedelta(0)
    mins = (off.days * 86400 + off.seconds) // 60
    sign = "-" if mins < 0 else "+"
    h, m = divmod(abs(mins), 60)
    return t.strftime("%Y-%m-%dT%H:%M:%S"), f"{sign}{h:02d}:{m:02d}"


def event_object(ev: Event, tz: _dt.tzinfo | None = None) -> dict:
    """One event as a JSON object (``-o jsonl``)."""
    src = ev.source
    sev = ev.severity
    out = {
        "time": iso_time(ev.ns, tz or ev.tz),
        "severity": getattr(sev, "name", str(sev)),
        "severity_value": src.severity,
        "category": src.category,
        "writer": ev.writer,
        "writer_id": ev.writer_id,
        "host": ev.host,
        "pid": ev.pid,
        "program": ev.program,
        "source": {"id": src.id, "function": src.function, "file": src.file, "line": src.line,
                   "format": src.format},
        "message": ev.message,
    }
    out["args"], out["fields"] = json_pair(ev.args, ev.fields)
    if src.backtrace:
        out["backtrace"] = True
    return out


def ascii_json(value: Any) -> str:
    """Compact JSON of a ``json_value`` (or of an object of them) all in ASCII: a character
    outside it, a lone surrogate too, as its escape."""
    return _ASCII(value)


def json_line(ev: Event, tz: _dt.tzinfo | None = None) -> str:
    """One event's line of ``-o jsonl``: its ``event_object`` in ASCII, and a newline."""
    return _ASCII(event_object(ev, tz)) + "\n"


def jsonl(events: Iterable[Event], tz: _dt.tzinfo | None = None) -> Iterator[str]:
    """One JSON object per line (ASCII: a lone surrogate is written as its escape)."""
    for ev in events:
        yield json_line(ev, tz)


CSV_COLUMNS = ("time", "severity", "category", "writer", "function", "file", "line",
               "message", "args", "fields", "host", "pid", "program")

#: What makes a spreadsheet run a cell as a formula when the cell begins with it (OWASP's
#: CSV injection): a cell of the file's text that does gets a leading ``'``.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: What escaping shows as JSON's own escapes in the args and fields cells (json escapes
#: C0 itself): DEL, C1 and the bidi format characters, so that the cell stays valid JSON.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in (0x7f, *range(0x80, 0xa0), *BIDI_FORMATS)}


def _defused(text: str) -> str:
    """``text``, with a leading ``'`` if a spreadsheet would run it as a formula."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def text_cell(text: str, escape: bool = True, quote_formulas: bool = True) -> str:
    """A CSV cell of the file's text: with ``quote_formulas`` a leading ``'`` if a
    spreadsheet would run it, then with ``escape`` its control and bidi format characters
    as escapes (``render.escape_controls``)."""
    if quote_formulas:
        text = _defused(text)
    return escape_controls(text) if escape else text


def csv_cells(ev: Event, tz: _dt.tzinfo | None = None, *, escape: bool = True,
              quote_formulas: bool = True) -> tuple:
    """One event's cells of ``-o csv``, in ``CSV_COLUMNS``' order (``csv_rows`` says how)."""
    o = event_object(ev, tz)
    category, writer, function, file, message, host, program = (
        text_cell(t, escape, quote_formulas) for t in (
            o["category"], o["writer"], ev.function, ev.file, o["message"], ev.host or "",
            ev.program or ""))
    args, fields = _COMPACT(o["args"]), _COMPACT(o["fields"])
    if escape:
        args, fields = args.translate(_JSON_ESCAPES), fields.translate(_JSON_ESCAPES)
    return (o["time"], o["severity"], category, writer, function, file, ev.line,
            message, args, fields, host, "" if ev.pid is None else ev.pid, program)


def csv_rows(events: Iterable[Event], tz: _dt.tzinfo | None = None, *, escape: bool = True,
             quote_formulas: bool = True) -> Iterator[str]:
    """RFC 4180 CSV (CRLF line ends, quotes where needed) with a header row; ``args`` and
    ``fields`` as JSON.

    ``escape``: control and bidi format characters in the cells are escapes, as in bread's
    text (``render.escape_controls``; in the JSON cells JSON's ``\\u0085``), so that a row
    is one line that cannot drive a terminal. ``quote_formulas``: a cell of the file's
    text (category, writer, function, file, message, host, program) that begins with a
    ``FORMULA_STARTS`` gets a leading ``'`` (OWASP), so that a spreadsheet shows it instead
    of running it; bread's own columns (time, severity, line) and the JSON (``[``, ``{``)
    never do."""
    import csv   # (here: the reader imports this module, and only CSV needs it)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(CSV_COLUMNS)
    for ev in events:
        w.writerow(csv_cells(ev, tz, escape=escape, quote_formulas=quote_formulas))
        if buf.tell() > 1 << 16:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()
