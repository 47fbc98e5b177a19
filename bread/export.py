"""Events -> JSON lines and CSV, for jq, spreadsheets and ``spark.read.json``.

JSON keeps each value's type as far as JSON allows; what JSON has no type
for becomes an object with one ``$``-key saying what it is (docs/guide.md
lists them): an int beyond 53 bits ``{"$int": "..."}``, a non-finite float
``{"$float": "nan"}``, bytes ``{"$bytes": base64}``, a datetime
``{"$datetime": iso}`` (with ``"zone": "Europe/Paris"`` where it had a named zone), a Decimal ``{"$decimal": "1.10"}``, a tuple
``{"$tuple": [...]}``, a dataclass ``{"$dataclass": type, "fields": {...}}``...
"""

from __future__ import annotations

import base64
import csv
import functools
import datetime as _dt
import io
import json
import math
import uuid
from decimal import Decimal
from typing import Any, Iterable, Iterator

from blogformat.values import DataclassValue, EnumValue, ExceptionValue, ExtValue, OpaqueValue

from .events import Event

_SAFE_INT = 1 << 53
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _int_text(v: int) -> str:
    """An int's decimal digits; past Python's limit on them (4300 digits by default: the
    conversion takes quadratic time, so a crafted file's huge int would take minutes),
    its hexadecimal, ``0x...``, which takes linear time."""
    try:
        return str(v)
    except ValueError:
        return hex(v)


def json_value(v: Any) -> Any:
    """A value as JSON can hold it (see the module docstring)."""
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v if -_SAFE_INT <= v <= _SAFE_INT else {"$int": _int_text(v)}
    if t is float:
        return v if math.isfinite(v) else {"$float": repr(v)}
    if t is list:
        return [json_value(x) for x in v]
    if t is dict:
        if all(type(k) is str for k in v):
            return {k: json_value(x) for k, x in v.items()}
        return {"$map": [[json_value(k), json_value(x)] for k, x in v.items()]}
    if t is tuple:
        return {"$tuple": [json_value(x) for x in v]}
    if isinstance(v, (set, frozenset)):   # SetValue, FrozenSetValue: in the logged order
        return {"$frozenset" if isinstance(v, frozenset) else "$set": [json_value(x) for x in v]}
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, _dt.datetime):
        zone = getattr(v.tzinfo, "key", None) or getattr(v.tzinfo, "zone", None)
        return {"$datetime": v.isoformat(), "zone": zone} if isinstance(zone, str) \
            else {"$datetime": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"$date": v.isoformat()}
    if isinstance(v, _dt.time):
        return {"$time": v.isoformat()}
    if isinstance(v, _dt.timedelta):
        return {"$timedelta": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, Decimal):
        return {"$decimal": str(v)}
    if isinstance(v, uuid.UUID):
        return {"$uuid": str(v)}
    if isinstance(v, EnumValue):
        return {"$enum": v.type, "name": v.name, "value": json_value(v.value)}
    if isinstance(v, DataclassValue):
        return {"$dataclass": v.type, "fields": json_value(v.fields)}
    if isinstance(v, ExceptionValue):
        # Frames and chain as a file holds them: a crafted one's items may be any value.
        return {"$exception": v.type, "message": v.message, "traceback": v.traceback,
                "frames": json_value([list(f) for f in v.frames]),
                "notes": json_value(list(v.notes)),
                "chain": json_value([[t, m, [list(f) for f in fr], list(no), link]
                                     for t, m, fr, no, link in v.chain])}
    if isinstance(v, OpaqueValue):
        return {"$opaque": v.type, "text": v.text}
    if isinstance(v, ExtValue):
        return {"$ext": v.code, "data": base64.b64encode(v.data).decode("ascii")}
    return {"$opaque": type(v).__name__, "text": str(v)}   # pragma: no cover - not decoded


#: Characters of JSON that the values of one event make at most (its args and fields
#: together; one value for ``json_text``). A value past it is written as
#: ``{"$cut": type, "limit": MAX_JSON}``. Its text could be far larger than its bytes:
#: a crafted file's list of 40,000 references to a record type whose name (written
#: once, in the metadata) is 128 Ki characters long names it 40,000 times, 5 GB.
MAX_JSON = 64 << 20


def json_size(v: Any, left: int) -> int:
    """At least the characters of the JSON of ``v`` (a ``json_value``), escapes counted
    at their longest; counting stops once past ``left``."""
    t = type(v)
    if t is str:
        return len(v) + 2 if v.isascii() and v.isprintable() else 6 * len(v) + 2
    if t is list:
        n = 2
        for x in v:
            if n > left:
                break
            n += json_size(x, left - n) + 1
        return n
    if t is dict:
        n = 2
        for k, x in v.items():
            if n > left:
                break
            n += json_size(k, left - n) + json_size(x, left - n) + 2
        return n
    return 24   # a number, true, false, null


def json_values(values: Any, left: int = MAX_JSON) -> tuple[list, int]:
    """The ``json_value`` of each value, and what is left of ``left`` after them: a value
    whose JSON would pass it is ``{"$cut": type, "limit": MAX_JSON}`` instead."""
    out = []
    for v in values:
        j = json_value(v)
        n = json_size(j, left)
        if n > left:
            j = {"$cut": type(v).__name__, "limit": MAX_JSON}
            n = 0
        left -= n
        out.append(j)
    return out, left


_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode


def json_text(value: Any) -> str:
    """Compact JSON of a value (``json_value``), in UTF-8 as it is, except that a text
    with a lone surrogate (no UTF-8 for it) is written all in ASCII escapes."""
    if type(value) is list:
        v: Any = json_values(value)[0]
    elif type(value) is dict:
        vals, _ = json_values(value.values())
        v = dict(zip(value, vals)) if all(type(k) is str for k in value) \
            else {"$map": [[json_value(k), x] for k, x in zip(value, vals)]}
    else:
        v = json_values([value])[0][0]
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
        "source": {"id": src.id, "function": src.function, "file": src.file, "line": src.line,
                   "format": src.format},
        "message": ev.message,
    }
    args, left = json_values(ev.args)
    fields = ev.fields
    out["args"] = args
    out["fields"] = dict(zip(fields, json_values(fields.values(), left)[0]))
    if src.backtrace:
        out["backtrace"] = True
    return out


def jsonl(events: Iterable[Event], tz: _dt.tzinfo | None = None) -> Iterator[str]:
    """One JSON object per line (ASCII: a lone surrogate is written as its escape)."""
    dumps = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode
    for ev in events:
        yield dumps(event_object(ev, tz)) + "\n"


CSV_COLUMNS = ("time", "severity", "category", "writer", "function", "file", "line",
               "message", "args", "fields")


def csv_rows(events: Iterable[Event], tz: _dt.tzinfo | None = None) -> Iterator[str]:
    """RFC 4180 CSV (CRLF line ends, quotes where needed) with a header row; ``args`` and
    ``fields`` as JSON."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(CSV_COLUMNS)
    dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
    for ev in events:
        o = event_object(ev, tz)
        w.writerow((o["time"], o["severity"], o["category"], o["writer"], ev.function, ev.file,
                    ev.line, o["message"], dumps(o["args"]), dumps(o["fields"])))
        if buf.tell() > 1 << 16:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()
