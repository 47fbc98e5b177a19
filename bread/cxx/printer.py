"""Values and events of a C++ binlog file -> text, exactly as the C++ ``bread`` prints them.

Values: bools ``true``/``false``, floats ``%.16g``, chars and strings as their bytes (a NUL
too), sequences ``[a, b]``, tuples ``(a, b)``, the empty option ``{null}``, enums by their
enumerator's name (else ``0x`` and the value in hex), structs ``Name{ a: 1, b: x }`` (the
name cut before its first ``<``; an empty struct: its name), and the types the C++ bread
knows by name: ``binlog::address`` (``0x...``), ``system_clock::time_point`` (the date
format), ``duration`` (``1ns 2us 3ms 4s 5m 6h``), ``filesystem::path``,
``directory_entry`` and ``error_code`` (their text).

Events: the ``-f`` placeholders ``%I %S %C %M %F %G %L %P %T %n %t %d %u %r %m %%``;
another letter after ``%`` is printed as it is (``%X``), as in the date format
(``%Y %y %m %d %H %M %S %N %z %Z``; ``%%`` there stays ``%%``).
"""

from __future__ import annotations

import math
import os
import time
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any, Callable, NamedTuple

from blogformat.entries import ClockSync, EventSource, WriterProp

from .values import NOTHING, Enum, Repeated, Struct, split_tags

#: The severities by value, as the C++ bread names them (others: ``UNKW``).
SEVERITIES = {1 << 5: "TRAC", 1 << 6: "DEBG", 1 << 7: "INFO", 1 << 8: "WARN", 1 << 9: "ERRO",
              1 << 10: "CRIT", 1 << 15: "NOLG"}
#: A stream's clock before its first ClockSync: no frequency, so no time.
NO_SYNC = ClockSync(0, 0, 0, 0, "")
NO_WRITER = WriterProp(0, "")
_DURATIONS = (("std::nano>", "ns"), ("std::micro>", "us"), ("std::milli>", "ms"),
              ("std::ratio<1>>", "s"), ("std::ratio<60>>", "m"), ("std::ratio<3600>>", "h"))
_TEXT_STRUCTS = {("std::filesystem::path", "`str'[c"),
                 ("std::filesystem::directory_entry", "`path'{std::filesystem::path`str'[c}"),
                 ("std::error_code", "`message'[c")}
_G16 = Context(prec=16, rounding=ROUND_HALF_EVEN)


class CxxEvent(NamedTuple):
    """An event with what its stream said before it: its source, the last writer and
    clock sync, and its decoded arguments."""

    source: EventSource
    writer: WriterProp
    sync: ClockSync
    clock: int
    args: tuple
    offset: int


def to_int64(v: int) -> int:
    """A 64-bit value as the signed integer C++ reads it as."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _cdiv(a: int, b: int) -> int:
    """C's integer division: toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def clock_ns(sync: ClockSync, clock: int) -> int | None:
    """Nanoseconds since the epoch of a clock value, as the C++ reader computes them; None
    without a clock sync (no positive frequency)."""
    freq = to_int64(sync.frequency)
    if freq <= 0:
        return None
    ticks = to_int64(clock - sync.clock_value)
    q = _cdiv(ticks, freq)
    r = ticks - q * freq
    return to_int64(sync.ns_since_epoch) + q * 1_000_000_000 + _cdiv(r * 1_000_000_000, freq)


def c_g16(v: Any) -> str:
    """A float or an exact Decimal (a long double) as C's ``%.16g`` (a NaN with its sign,
    which Python's ``%`` leaves out: ``-nan``)."""
    if not isinstance(v, Decimal):
        if v != v:
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        return "%.16g" % v
    if not v:
        return "-0" if v.is_signed() else "0"
    q = _G16.plus(v)
    sign, digits, exp = q.as_tuple()
    assert isinstance(exp, int)
    x = len(digits) + exp - 1
    if -4 <= x < 16:
        s = format(q, "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{'-' if sign else ''}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"


_TWO_DIGITS = frozenset("ymdHMS")


def parse(pattern: str) -> list[tuple[str, str]]:
    """``pattern`` as (literal, code) pairs: the code is the character after a ``%``, ""
    after the last literal (a ``%`` that ends the pattern is a literal)."""
    out = []
    lit: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c != "%" or i == n:
            lit.append(c)
            continue
        out.append(("".join(lit), pattern[i]))
        lit = []
        i += 1
    out.append(("".join(lit), ""))
    return out


def expand(parts: list[tuple[str, str]], field: Callable[[str], str]) -> str:
    """Parsed ``parts`` with each code replaced by ``field`` of it."""
    out = []
    for lit, code in parts:
        out.append(lit)
        if code:
            out.append(field(code))
    return "".join(out)


class DateText:
    """A date format (``-d``) over nanoseconds since the epoch, an offset and a zone name."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.parts = parse(pattern)

    def __call__(self, ns: int, offset: int, zone: str) -> str:
        ns += offset * 1_000_000_000
        secs = _cdiv(ns, 1_000_000_000)
        nsec = ns - secs * 1_000_000_000
        try:
            t = time.gmtime(secs)
            year, month, day, hour, minute, sec = t[:6]
        except (OverflowError, ValueError, OSError):   # gmtime fails: the zeroed fields
            year, month, day, hour, minute, sec = 1900, 1, 0, 0, 0, 0

        def field(spec: str) -> str:
            if spec == "Y":
                return str(year)
            if spec in _TWO_DIGITS:
                v = {"y": (year - 1900) % 100, "m": month, "d": day, "H": hour,
                     "M": minute, "S": sec}[spec]
                return f"{v:02d}"
            if spec == "N":
                return ("%.9d" % nsec)[:9]
            if spec == "z":
                a = abs(offset)
                h, m = a // 3600, a // 60 - 60 * (a // 3600)
                return (f"{'+' if offset >= 0 else '-'}{h if h < 100 else 0:02d}"
                        f"{m if m < 100 else 0:02d}")
            if spec == "Z":
                return zone.split("\0", 1)[0]
            return "%" + spec
        return expand(self.parts, field)


class ValueText:
    """Argument values as text. ``local``: a time point in the writer's zone (the C++
    bread's choice unless ``%u`` comes before ``%d`` in the event format); ``sync`` the
    clock sync in force (its zone)."""

    def __init__(self, date: DateText, local: bool = True) -> None:
        self.date = date
        self.local = local
        self.sync = NO_SYNC

    def __call__(self, v: Any) -> str:
        t = type(v)
        if t is str:
            return v
        if t is bool:
            return "true" if v else "false"
        if t is int:
            return str(v)
        if t is float or t is Decimal:
            return c_g16(v)
        if v is None:
            return "{null}"
        if t is list:
            return "[" + ", ".join(self(x) for x in v if x is not NOTHING) + "]"
        if t is tuple:
            return "(" + ", ".join(self(x) for x in v) + ")"
        if t is Struct:
            return self.struct(v)
        if t is Enum:
            return v.enumerator or "0x" + v.hex
        if t is Repeated:
            return f"[{self(v.value)} ... <repeats {v.times} times>]"
        return ""   # NOTHING: a variant's option that names no tag

    def struct(self, s: Struct) -> str:
        name, tag = s.name, s.tag
        if name == "binlog::address" and tag == "`value'L":
            return f"0x{s.fields[0][1]:X}"
        if name == "std::chrono::system_clock::time_point" and tag == "`ns'l":
            ns = s.fields[0][1]
            if self.local:
                return self.date(ns, self.sync.tz_offset, self.sync.tz_name)
            return self.date(ns, 0, "UTC")
        if name.startswith("std::chrono::duration<Rep,") and tag in ("`count'l", "`count'i"):
            for end, suffix in _DURATIONS:
                if name.endswith(end):
                    return f"{s.fields[0][1]}{suffix}"
        if (name, tag) in _TEXT_STRUCTS:
            v = s.fields[0][1]
            return v.fields[0][1] if type(v) is Struct else v
        short = name.split("<", 1)[0]
        if not tag:
            return short
        return short + "{ " + ", ".join(
            f"{n}: {self(v)}" if n else self(v) for n, v in s.fields) + " }"


def message(fmt: str, args: tuple, text: Callable[[Any], str]) -> str:
    """The format string with each ``{}`` replaced by the next value's text (nothing once
    the values run out)."""
    if "{}" not in fmt:
        return fmt
    pieces = fmt.split("{}")
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        if i < len(args):
            out.append(text(args[i]))
        out.append(piece)
    return "".join(out)


def uses_local_time(event_format: str) -> bool:
    """False only if ``%u`` comes before ``%d`` in the event format (``%%`` is a percent)."""
    placeholder = False
    for c in event_format:
        if placeholder:
            if c == "d":
                return True
            if c == "u":
                return False
            placeholder = False
        else:
            placeholder = c == "%"
    return True


class CxxPrinter:
    """Events of C++ binlog files as the C++ bread's lines (``-f`` and ``-d``, its
    defaults the same as bread's); each line ends with a newline, as there."""

    def __init__(self, event_format: str, date_format: str) -> None:
        self.format = event_format + "\n"
        self.parts = parse(self.format)
        self.date = DateText(date_format)
        self.values = ValueText(self.date, uses_local_time(self.format))

    def __call__(self, ev: CxxEvent) -> str:
        return expand(self.parts, lambda spec: self.field(spec, ev))

    def plan(self, src: EventSource) -> tuple[list, list | None]:
        """A source's line for the C printer (``bread/cxx/_binlog.c``): literals (bytes, its own
        fields rendered) and the codes that change per event (ints); and its message:
        literals and ``(tag, shown)`` pairs, None if a tag is one C does not read."""
        line: list = []
        fixed = CxxEvent(src, NO_WRITER, NO_SYNC, 0, (), 0)
        for lit, code in self.parts:
            line.append(lit)
            if code in _PER_EVENT:
                line.append(ord(code))
            elif code:
                line.append(self.field(code, fixed))
        items = [as_bytes(x) if isinstance(x, str) else x for x in line]
        line = [x for x in _joined(items) if x != b""]
        tags = split_tags(src.arg_tags)
        if not all(t in _C_TAGS for t in tags):
            return line, None
        pieces = src.format.split("{}")
        msg: list = [as_bytes(pieces[0])]
        for i, piece in enumerate(pieces[1:]):
            if i < len(tags):
                msg.append((ord(tags[i][0]), True))
            msg.append(as_bytes(piece))
        msg.extend((ord(t[0]), False) for t in tags[len(pieces) - 1:])
        return line, [x for x in msg if x != b""]

    def field(self, spec: str, ev: CxxEvent) -> str:
        src = ev.source
        if spec == "m":
            self.values.sync = ev.sync
            return message(src.format, ev.args, self.values)
        if spec in "du":
            ns = clock_ns(ev.sync, ev.clock)
            if ns is None:
                return "no_clock_sync?"
            if spec == "d":
                return self.date(ns, ev.sync.tz_offset, ev.sync.tz_name)
            return self.date(ns, 0, "UTC")
        get = _FIELDS.get(spec)
        return "%" + spec if get is None else get(ev)


#: Codes whose text changes per event (the rest are the source's own).
_PER_EVENT = frozenset("ntdurm")
#: Tags that the C printer reads.
_C_TAGS = frozenset("ycbsilBSILfd") | {"[c"}


def as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _joined(items: list) -> list:
    """Adjacent bytes joined."""
    out: list = []
    for x in items:
        if out and type(x) is bytes and type(out[-1]) is bytes:
            out[-1] += x
        else:
            out.append(x)
    return out


#: Event fields other than the message and the times.
_FIELDS: dict[str, Callable[[CxxEvent], str]] = {
    "I": lambda e: str(e.source.id),
    "S": lambda e: SEVERITIES.get(e.source.severity, "UNKW"),
    "C": lambda e: e.source.category,
    "M": lambda e: e.source.function,
    "F": lambda e: e.source.file,
    "G": lambda e: os.path.basename(e.source.file.replace("\\", "/")),
    "L": lambda e: str(e.source.line),
    "P": lambda e: e.source.format,
    "T": lambda e: e.source.arg_tags,
    "n": lambda e: e.writer.name,
    "t": lambda e: str(e.writer.id),
    "r": lambda e: str(e.clock),
    "%": lambda e: "%",
}
