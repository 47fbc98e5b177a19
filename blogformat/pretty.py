"""Events -> text: the C++ bread's ``%`` placeholders for events and dates, and escaping.

Shared by both sides: ``bread`` prints its lines with it (``bread.render`` names the
same objects) and blog's ``TextStream`` shows live events with it, so a line on the
console is the line ``bread`` prints, and the writer never imports the reader.
"""

from __future__ import annotations

import datetime as _dt
import os
import re

from . import TEXT_VERSION
from .entries import SOURCE_BACKTRACE, EventSource, WriterProp
from .errors import FormatError
from .lazy import loaded
from .placeholders import CUT_MARK, MAX_MESSAGE, render_safe
from .severity import ABBREVIATIONS
from .tracebacks import render as render_traceback
from .typinglite import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from .valueclasses import ExceptionValue

#: How an event shows by default (``bread``, ``blog.TextStream``): ``bread --help``
#: lists the placeholders.
DEFAULT_FORMAT = "%S %C [%d] %n %m%K (%G:%L)"
#: Before the message (``%m``) of an event written from a backtrace buffer.
BACKTRACE_MARK = "[backtrace] "
#: How ``%d`` and ``%u`` show an event's time by default (``%N``: its nanoseconds).
DEFAULT_DATE_FORMAT = "%Y-%m-%d %H:%M:%S.%N"
#: Before each line of a traceback shown under its event.
TRACEBACK_INDENT = "    "

_UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1)


class Process(Protocol):
    """The writing process as its stream's file header names it, None where it does not
    say (an Event has it, and ``bread.events.Origin``)."""

    @property
    def host(self) -> str | None: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def program(self) -> str | None: ...

    @property
    def text_version(self) -> int:
        """What the stream's header asks of its text (``TEXT_VERSION``), 1 where it does not."""
        ...


class Event(Process, Protocol):
    """What a printer reads of an event (``bread.Event`` has it, and blog's TextStream's)."""

    source: EventSource
    writer_prop: WriterProp
    clock: int
    ns: int
    tz: _dt.tzinfo

    @property
    def message(self) -> str: ...

    @property
    def fields(self) -> dict: ...


def severity_text(value: int) -> str:
    """``TRAC DEBG INFO WARN ERRO CRIT``, or ``????`` for a value no severity has."""
    return ABBREVIATIONS.get(value, "????")  # type: ignore[call-overload]


def _offset(tz: _dt.tzinfo) -> int:
    off = tz.utcoffset(None)
    return int(off.total_seconds()) if off is not None else 0


#: ``DateFormat``'s numeric codes and the field each shows: ``%Y`` in four digits, the others
#: in two (``%y``: the year's last two).
_DATE_FIELDS = {"Y": "year", "y": "year", "m": "month", "d": "day", "H": "hour", "M": "minute",
                "S": "second"}


class DateFormat:
    """``%Y %y %m %d %H %M %S %N %z %Z`` over nanoseconds since the epoch and a zone; another
    placeholder is a FormatError."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.parts = _split(pattern, "YymdHMSNzZ")   # (literal, code or None) pairs
        self._second: tuple | None = None           # (secs, zone) of the cached pieces
        self._pieces: list[str] = []                 # the text around each %N, of that second

    def __call__(self, ns: int, tz: _dt.tzinfo) -> str:
        secs, frac = divmod(ns, 1_000_000_000)
        last = self._second   # the date is rendered once per second (per zone object: zones
        if last is None or last[0] != secs or last[1] is not tz:   # equal by offset differ by name)
            pieces = self._render(secs, tz)
            if pieces is None:
                return f"<clock {ns} out of range>"
            self._second, self._pieces = (secs, tz), pieces
        pieces = self._pieces
        if len(pieces) == 1:
            return pieces[0]
        return f"{frac:09d}".join(pieces)

    def _render(self, secs: int, tz: _dt.tzinfo) -> list[str] | None:
        """The text of the second ``secs`` split where the nanoseconds go; None if out of range."""
        named: _dt.tzinfo | _Named = tz   # what %Z shows
        try:
            if type(tz) is _dt.timezone:   # a file's fixed offset
                offset = _offset(tz)
                t = _EPOCH + _dt.timedelta(seconds=secs + offset)
            else:   # a named zone (--tz): its offset and name at that moment (DST)
                t = (_EPOCH.replace(tzinfo=_UTC) + _dt.timedelta(seconds=secs)).astimezone(tz)
                off = t.utcoffset() or _dt.timedelta(0)
                offset = off.days * 86400 + off.seconds
                named = _Named(t.tzname() or "")
        except (OverflowError, ValueError):
            return None
        pieces: list[str] = []
        out: list[str] = []
        for lit, code in self.parts:
            out.append(lit)
            if code is None:
                continue
            field = _DATE_FIELDS.get(code)
            if field is not None:
                value = getattr(t, field)
                out.append(f"{value:04d}" if code == "Y" else f"{value % 100:02d}")
            elif code == "N":
                pieces.append("".join(out))
                out = []
            elif code == "z":
                sign = "-" if offset < 0 else "+"
                h, m = divmod(abs(offset) // 60, 60)
                out.append(f"{sign}{h:02d}{m:02d}")
            elif code == "Z":
                out.append(named.tzname(None) or "")
        pieces.append("".join(out))
        return pieces


class _Named:
    """The name a zone has at one moment, for ``%Z``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def tzname(self, dt: object) -> str:
        return self.name


def _split(pattern: str, codes: str) -> list[tuple[str, str | None]]:
    """Split a ``%`` pattern into (literal, code) pairs (``%%`` a percent sign, and a ``%``
    that ends it or comes before a character that is not a letter: literal). FormatError
    for a ``%`` before a letter that is no code, naming it."""
    parts: list[tuple[str, str | None]] = []
    lit = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "%" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if n == "%":
                lit.append("%")
                i += 2
                continue
            if n in codes:
                parts.append(("".join(lit), n))
                lit = []
                i += 2
                continue
            if n.isascii() and n.isalpha():   # another character: literal ("100% done")
                raise FormatError(f"unknown placeholder {'%' + n!r} in {pattern!r} (known: "
                                  f"{' '.join('%' + c for c in codes)} %%)")
        lit.append(c)
        i += 1
    parts.append(("".join(lit), None))
    return parts


#: Terminal colours by severity (``--color``): what goes before and after a line.
_COLORS = {0x20: "\x1b[2m", 0x40: "\x1b[2m", 0x100: "\x1b[33m", 0x200: "\x1b[31m",
           0x400: "\x1b[1;31m"}
_RESET = "\x1b[0m"


def colors(severity: int) -> tuple[str, str]:
    """(before, after) a line of this severity on a colour terminal; ("", "") for none."""
    code = _COLORS.get(severity)
    if code is None:   # info, and values no severity has: the terminal's own colour
        return "", ""
    return code, _RESET


def unparsed_message(fmt: str, args: Sequence[Any]) -> str:
    """The message of an event whose format does not parse (a file is untrusted): the
    format, then the values' reprs, cut as ``placeholders.render`` cuts."""
    parts = [fmt[:MAX_MESSAGE + 1]]
    size = len(parts[0])
    for a in args:
        if size > MAX_MESSAGE:
            break
        parts.append(" " + render_safe(a, "r", "", decoded=True))
        size += len(parts[-1])
    text = "".join(parts)
    return text[:MAX_MESSAGE] + CUT_MARK if size > MAX_MESSAGE else text


#: ``-f`` placeholders whose text is a property of the call site: rendered once per source.
SOURCE_TEXT: dict[str, Callable[[EventSource], str]] = {
    "I": lambda s: str(s.id),
    "S": lambda s: severity_text(s.severity),
    "C": lambda s: s.category,
    "M": lambda s: s.function,
    "F": lambda s: s.file,
    "G": lambda s: os.path.basename(s.file),
    "L": lambda s: str(s.line),
    "P": lambda s: s.format,
    "T": lambda s: s.arg_tags,
}


#: ``-f`` placeholders whose text is a property of the writing process (its stream's file
#: header): host, process id, program (``sys.argv[0]``'s base name); empty where the header
#: does not say. The C++ bread has none of these letters.
PROCESS_TEXT: dict[str, Callable[[Process], str]] = {
    "h": lambda p: p.host or "",
    "p": lambda p: "" if p.pid is None else str(p.pid),
    "a": lambda p: p.program or "",
}


def fields_text(event: Event) -> str:
    """An event's keyword fields as ``name=value`` pairs (``%k``): its call's fields and
    those of its context (``blog.context``). A str value is quoted (repr) if it is empty or
    holds a space, ``=`` or a quote; an exception as ``KeyError('k')`` (``exception_text``);
    any other value as ``{}`` would show it; a name that is not an identifier is quoted."""
    fields = event.fields
    if not fields:
        return ""
    out = []
    for name, value in fields.items():
        if type(value) is str:
            text = repr(value) if (not value or any(c in value for c in " =\"'")
                                   or not value.isprintable()) else value
        elif _is_exception(value):
            text = exception_text(value)
        else:
            text = render_safe(value, None, "", decoded=True)
        out.append(f"{field_name(name)}={text}")
    text = " ".join(out)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + CUT_MARK


def field_name(name: str) -> str:
    """A field's name as ``%k`` shows it: quoted (repr) if it is not an identifier."""
    return name if name.isidentifier() else repr(name)


def shown_fields(event: Event) -> str:
    """``%K``, the fields of the default format: ``%k``'s text after a space, if the event
    has fields and its stream's header asks for them (``TEXT_VERSION``); else nothing."""
    if not event.source.field_names or event.text_version < TEXT_VERSION:
        return ""
    text = fields_text(event)
    return " " + text if text else ""


def _is_exception(value: Any) -> bool:
    """True for a decoded exception (``blogformat.valueclasses``, with ``dataclasses``, is
    imported with the first extension value decoded: a file of plain values loads neither)."""
    return type(value) is loaded("blogformat.valueclasses", "ExceptionValue")


def exception_text(exc: ExceptionValue) -> str:
    """An exception as its repr shows it, ``KeyError('missing')``: its type's name and the
    text it was logged with (``str(exc)``, which for a KeyError is already a repr)."""
    name = exc.type.rsplit(".", 1)[-1]
    if name == "NoneType":   # exc_info=True outside an except block (NO_EXCEPTION)
        return "None"
    if not exc.message:
        return f"{name}()"
    return f"{name}({exc.message})" if name == "KeyError" else f"{name}({exc.message!r})"


def traceback_text(exc: ExceptionValue) -> str:
    """What Python prints for an exception: its traceback (its chain and notes too), or for
    one never raised, its last line (``KeyError: 'k'``)."""
    if exc.traceback is not None:
        return exc.traceback
    return render_traceback(exc.type, exc.message, (), exc.notes, exc.chain, None)


def tracebacks_text(event: Event, escape: bool) -> str:
    """The tracebacks of the exceptions among an event's fields, each line on a line of its
    own after a newline and TRACEBACK_INDENT, escaped if asked; "" for none."""
    out = []
    for value in event.fields.values():
        if _is_exception(value):
            for line in traceback_text(value).rstrip("\n").split("\n"):
                out.append(f"\n{TRACEBACK_INDENT}{escape_controls(line) if escape else line}")
    return "".join(out)


class PrettyPrinter:
    """Renders events with bread's ``-f`` placeholders (``%S %C [%d] %n %m (%G:%L)`` ...); an
    unknown placeholder in either format is a FormatError naming it.

    ``traceback``: under an event's line, the tracebacks of the exceptions among its fields
    (``line``): True always, False never, None (the default) where its stream's header asks
    for them (``TEXT_VERSION``).
    """

    CODES = "ISCMFGLPTntdurmkKhpa"

    def __init__(self, event_format: str = DEFAULT_FORMAT,
                 date_format: str = DEFAULT_DATE_FORMAT, zone: _dt.tzinfo | None = None,
                 color: bool = False, traceback: bool | None = None) -> None:
        self.date = DateFormat(date_format)
        self.zone = zone   # %d in this zone instead of the writer's (bread --tz)
        self.color = color   # lines coloured by severity (bread --color)
        self.traceback = traceback
        self.parts = _split(event_format, self.CODES)   # (literal, code or None) pairs
        self._getters = [(lit, self._getter(code)) for lit, code in self.parts]

    def _getter(self, code: str | None) -> Callable[[Event], str] | None:
        if code is None:
            return None
        if code in SOURCE_TEXT:
            text = SOURCE_TEXT[code]
            return lambda e: text(e.source)
        if code in PROCESS_TEXT:
            return PROCESS_TEXT[code]
        date, zone = self.date, self.zone
        return {
            "n": lambda e: e.writer_prop.name,
            "t": lambda e: str(e.writer_prop.id),
            "d": (lambda e: date(e.ns, e.tz)) if zone is None else (lambda e: date(e.ns, zone)),
            "u": lambda e: date(e.ns, _UTC),
            "r": lambda e: str(e.clock),
            # flags (not the backtrace property): read for every event on this path
            "m": lambda e: BACKTRACE_MARK + e.message if e.source.flags & SOURCE_BACKTRACE
            else e.message,
            "k": fields_text,
            "K": shown_fields,
        }[code]

    def __call__(self, event: Event) -> str:
        out = []
        for lit, get in self._getters:
            out.append(lit)
            if get is not None:
                out.append(get(event))
        return "".join(out)

    def shows_tracebacks(self, process: Process) -> bool:
        """Whether the events of this stream show their tracebacks (``traceback``)."""
        if self.traceback is None:
            return process.text_version >= TEXT_VERSION
        return self.traceback

    def line(self, event: Event, escape: bool) -> str:
        """The event's line as bread prints it: control characters escaped if asked, the
        tracebacks of its exceptions under it (``traceback``), then coloured if this printer
        colours (the colour's own escapes are not escaped)."""
        text = self(event)
        if escape:
            text = escape_controls(text)
        if event.source.field_names and self.shows_tracebacks(event):
            text += tracebacks_text(event, escape)
        if self.color:
            before, after = colors(event.source.severity)
            text = before + text + after
        return text


#: The invisible format characters that reorder what a reader sees (Unicode's bidirectional
#: marks, embeddings, overrides and isolates): ALM, LRM, RLM, LRE..RLO, LRI..PDI.
BIDI_FORMATS = (0x061c, 0x200e, 0x200f, *range(0x202a, 0x202f), *range(0x2066, 0x206a))

# C0 controls (but tab), DEL and C1 controls as \xNN (\n, \r), bidi formats as \uNNNN.
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f,
                                         *range(0x80, 0xa0)]}
_ESCAPES.update({0x0a: "\\n", 0x0d: "\\r"})
_ESCAPES.update({c: f"\\u{c:04x}" for c in BIDI_FORMATS})
_ESCAPED = re.compile("[" + "".join(re.escape(chr(c)) for c in _ESCAPES) + "]")


def escape_controls(text: str) -> str:
    """Replace control characters (C0 but tab, DEL, C1) and the bidirectional format
    characters (``BIDI_FORMATS``) by escapes (``\\x1b``, ``\\n``, ``\\u202e``), so that a
    log line cannot drive a terminal nor reorder what its reader sees."""
    if _ESCAPED.search(text) is None:   # most lines: a scan in C, not a lookup per character
        return text
    return text.translate(_ESCAPES)
