"""The stdlib ``logging`` bridge: records of ``logging`` (and ``warnings``) as blog events.

    import blog, blog.stdlib
    blog.basic_config("app.blog")
    blog.stdlib.capture(min_severity="INFO")  # every logger's records, into the file

or, from ``logging.config.dictConfig`` alone: ``{"class": "blog.stdlib.BlogHandler",
"filename": "app.blog", "rotate_bytes": 64 << 20}`` (``basic_config``'s options).

A record becomes an event of an EventSource per call site (pathname, line,
function, logger name, level): the logger's name is the category, the level the
nearest severity (``severity_of``), the ``%``-style message and its arguments are
kept as they are (the source's format has the printf style, and ``bread`` renders it
as ``logging`` would), ``extra`` becomes keyword fields, ``exc_info`` the field
``exception`` and ``stack_info`` the field ``stack`` (an ``extra`` key of either name
is kept with one more ``_``: ``_extra_name``). A message without arguments is
kept as it is (the style literal). A site's first format is its own; a record whose
format or text is another (an f-string: a new text at each call) is kept as its text,
the one value of the site's source of format ``{}``, as is a record ``logging`` cannot
format (arguments that do not fit the message: their number, a key, or a value a
conversion does not take, as ``"%d"`` a str), kept as its format and its arguments'
repr.

A ``logging`` call that only BlogHandlers take makes no LogRecord at all
(``blog.stdlibcalls``): it writes what its record would.
"""

from __future__ import annotations

import logging
import math
import os
import warnings as _warnings
from collections.abc import Mapping
from decimal import Decimal
from types import MethodType
from typing import Any, NamedTuple

from blogformat.guard import owned_by_value
from blogformat.placeholders import (STYLE_BRACES, STYLE_LITERAL, STYLE_PRINTF, FormatError,
                                     parse_printf, parse_style)
from blogformat.severity import LOGGING_LEVELS
from blogformat.severity import from_logging as severity_of
from blogformat.tracebacks import NO_EXCEPTION
from blogformat.values import type_name

from . import process
from .contextfields import fields_now
from .contextfields import state as _context_state
from .contextfields import with_context
from .default import basic_config, default_session
from .errors import ConfigurationError
from .pipeline.session import Session
from .pipeline.source import DYNAMIC_FORMAT, TooManySources
from .stdlibcalls import CallRecord, RecordHandler, install

#: ``logging`` levels and the severity each maps to. Any other level maps to the
#: nearest of these (a tie to the lower one): 5 and below to trace, 15 to debug,
#: 25 to info, 60 to critical (``severity_of``, as every severity argument maps a
#: ``logging`` level: ``log.log(logging.ERROR, ...)``).
LEVELS = LOGGING_LEVELS

#: The attributes every LogRecord has; any other one came from ``extra`` (or a filter).
#: (``taskName`` is one on Python 3.12+; on 3.11, where logging has none, an ``extra``
#: taskName is a field as any other.)
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_BASE = len(logging.makeLogRecord({}).__dict__)
#: The attributes of a CallRecord without extra.
_CALL = len(CallRecord("", 0, "", 0, "", "", (), None, None, None).__dict__)

#: The fields of a record's ``exc_info`` and ``stack_info``: no field of ``extra`` has
#: their names (``_extra_name``).
_OWN_FIELDS = ("exception", "stack")
#: Keys a handler remembers; past them, records take the slower path (their sources stay).
MAX_SITES = 1 << 16
#: The longest message without arguments that may be its site's format; a longer one is
#: kept as text (a source's text counts against what a stream holds: MAX_SOURCE_TEXT).
MAX_LITERAL = 1 << 10


class RecordSite(NamedTuple):
    """A BlogHandler's entry for one call site and format. The C ``RecordHandler`` reads it
    by position: ``_stdlib.c``'s RSITE_* indices name these fields in this order
    (tests/test_c_sources.py checks)."""
    source_id: int
    template: Any
    severity: int
    conversions: str | None   # the conversion each value must fit (``_conversions``), or None


def level_number(level: int | str) -> int:
    """A ``logging`` level given as a number or a name (``"INFO"``, ``"warning"``)."""
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise TypeError(f"level must be a logging level name or number, not {level!r}")
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        known = ", ".join(n for _, n in sorted(
            (v, k) for k, v in logging.getLevelNamesMapping().items() if k != "WARN"))
        raise ConfigurationError(
            f"unknown logging level {level!r}: use one of {known}, or a number")
    return number


class BlogHandler(logging.Handler):
    """A ``logging.Handler`` that logs each record as a blog event into ``session``
    (by default the default session, which ``blog.basic_config`` sends to a file).

    ``filename`` and ``options`` (any of ``blog.basic_config``'s: ``rotate_bytes``,
    ``min_severity``...) configure the default session first, as
    ``basic_config(filename, **options)``: a ``logging.config.dictConfig`` alone then
    configures blog. ``level`` is the handler's ``logging`` level, as any handler's.

    It takes no lock of its own (a session's writers are per thread) and formats
    nothing: its ``formatter``, if set, is not used. ``handle`` has a C fast path
    (``blog.stdlibcalls.RecordHandler``) for the common record; this class is its
    reference.
    """

    def __init__(self, level: int | str = logging.NOTSET, session: Session | None = None,
                 filename: str | os.PathLike[str] | None = None, **options: Any) -> None:
        if session is not None and not isinstance(session, Session):
            raise TypeError(f"BlogHandler needs a blog.Session, not {type(session).__name__} "
                            f"({session!r}); leave session out to use the default session")
        if session is not None and (filename is not None or options):
            raise TypeError("BlogHandler: filename and basic_config's options configure the "
                            "default session; give them or a session, not both")
        super().__init__(level_number(level))
        if filename is not None or options:
            basic_config(filename, **options)
        self._session = session if session is not None else default_session()
        self._sites: dict[tuple, RecordSite] = {}
        self._formats: dict[tuple, str] = {}      # call site -> its first format
        self._severities: dict[int, int] = {lv: sev for lv, sev in LEVELS}
        self._standard_levels = frozenset(lv for lv, _ in LEVELS)
        self._records = 0     # records handled in Python (RecordHandler counts its own)
        self._calls = 0       # logging calls without a record, in Python (and in C: its own)
        self._counted = self._session.stats.count_logging(self)
        install(BlogHandler)
        cls = type(self)
        if (RecordHandler is not None and cls.handle is BlogHandler.handle
                and cls.emit is BlogHandler.emit and cls.filter is logging.Filterer.filter):
            # The common record without a Python frame (not for a subclass that overrides
            # what it would skip).
            self.handle = RecordHandler(  # type: ignore[method-assign]
                self._sites, self._session.writers.local, self._session.registry, self,
                MethodType(BlogHandler.handle, self), _BASE)

    @property
    def session(self) -> Session:
        """The session the records go to (fixed: its sources are this handler's)."""
        return self._session

    def __repr__(self) -> str:
        return f"<BlogHandler {logging.getLevelName(self.level)} {self.session!r}>"

    def __del__(self) -> None:
        # What it took stays in session.stats once it is gone.
        try:
            self._counted.final = self.paths
        except Exception:        # (made in part, or at the interpreter's exit)
            pass

    @property
    def paths(self) -> tuple[int, int]:
        """(``logging`` calls taken without a record, records taken): what
        ``session.stats.logging_fast_path`` and ``logging_record_path`` add up."""
        calls, records = self._calls, self._records
        c: Any = self.__dict__.get("handle")
        if RecordHandler is not None and type(c) is RecordHandler:
            calls, records = calls + c.calls, records + c.records
        return calls, records

    def handle(self, record: logging.LogRecord) -> bool:
        """Filter, then emit: without ``logging``'s per-handler lock, which blog needs not."""
        self._records += 1
        if self.filters:
            rv = self.filter(record)
            if not rv:
                return False
            if isinstance(rv, logging.LogRecord):
                record = rv
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """Log ``record`` as an event (errors go to ``handleError``, as any handler's)."""
        try:
            msg, args = record.msg, record.args
            if not (type(msg) is str and type(args) is tuple and _no_extra(record.__dict__)
                    and record.exc_info is None and record.stack_info is None
                    and self._push_known(msg, args, record.pathname, record.lineno,
                                         record.funcName, record.levelno, record.name,
                                         int(record.created * 1e9))):
                self._emit(record)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def handle_call(self, call: CallRecord) -> None:
        """Log a ``logging`` call that made no record (``blog.stdlibcalls``) as ``emit``
        logs its record (errors go to ``handleError``)."""
        self._calls += 1
        try:
            msg, args = call.msg, call.args
            if not (type(msg) is str and type(args) is tuple and len(call.__dict__) == _CALL
                    and call.exc_info is None and call.stack_info is None
                    and self._push_known(msg, args, call.pathname, call.lineno, call.funcName,
                                         call.levelno, call.name, int(call.created * 1e9))):
                self._emit(call)
        except RecursionError:
            raise
        except Exception:
            self.handleError(call)   # type: ignore[arg-type]

    def _push_known(self, msg: str, args: tuple, pathname: str, lineno: int, func: Any,
                    level: int, name: str, clock: int) -> bool:
        """The event of a call site seen before, pushed (or below the minimum): True; False
        if the site is new (with these fields in context: ``blog.context``'s, a span's
        ids) or a value does not fit its conversion. Its C twin is ``_stdlib.c``'s
        site_push."""
        c = fields_now() if _context_state.in_use else None
        in_context = (c.names,) if c is not None else ()
        site = self._sites.get((msg, pathname, lineno, func, level, name, len(args)) + in_context)
        if site is None and not args:   # a new text: the site's source "{}"
            args = (msg,)
            site = self._sites.get((None, pathname, lineno, func, level, name, 1) + in_context)
        if site is None or (site.conversions is not None
                            and not _all_fit(site.conversions, args)):
            return False
        names: tuple[str, ...] = ()
        if c is not None:
            args, names = args + c.values, c.names   # the context's after the record's
        session = self.session
        if site.severity < session.registry.min_severity:
            return True
        try:
            ch = session.writers.local.c
        except AttributeError:
            ch = session.writers.new_writer().channel
        if not ch.push_values(site.source_id, clock, args):
            ch.on_overflow(site.source_id, clock, site.template, args, names)
        return True

    def _emit(self, record: logging.LogRecord | CallRecord) -> None:
        """Every record but the common case: extra fields, exceptions, mapping arguments,
        messages that are not str, formats not the site's first, and a site's first record."""
        session = self.session
        level = record.levelno
        severity = self._severities.get(level)
        if severity is None:
            severity = self._severities[level] = severity_of(level)
        if severity < session.registry.min_severity:
            return
        style, fmt, positional, fields = _split(record)
        extra = _extra(record)
        if fields and not (extra.keys().isdisjoint(fields)
                           and self._own_names(record).isdisjoint(fields)):
            # A mapping argument's key that the record also has as an attribute (extra, its
            # exception): logging keeps them apart (args, and record.__dict__); the event
            # keeps the attribute as the field, the message as the text logging makes.
            style, fmt, positional, fields = STYLE_LITERAL, _message(record), (), {}
        # A call site: two functions at one file and line (exec'd or generated code) are two.
        place = (record.pathname, record.lineno, record.funcName, level, record.name)
        # A format of the record's own (a message without arguments: its text) may be the
        # site's, if it is the site's first.
        own = style == STYLE_PRINTF or (fmt is record.msg and len(fmt) <= MAX_LITERAL)
        if own:
            first = self._formats.get(place)
            if first is None and len(self._formats) < MAX_SITES:
                first = self._formats[place] = fmt
            own = first is None or first == fmt
        if not own:
            # Another text (f"user {u}", new at each call), or the text logging makes of
            # the record: the value of the site's one source "{}".
            text = fmt if style == STYLE_LITERAL else _message(record)
            style, fmt, positional, fields = STYLE_BRACES, DYNAMIC_FORMAT, (text,), {}
        fields.update(extra)
        if level not in self._standard_levels:
            fields.setdefault("levelname", record.levelname)
        if record.exc_info:
            exc = record.exc_info[1]
            # (None outside an except block: logging prints "NoneType: None" there)
            fields.setdefault("exception", NO_EXCEPTION if exc is None else exc)
            if exc is not None:
                process.exception_logged(exc)   # asyncio's hook: logged once
        if record.stack_info:
            fields.setdefault("stack", record.stack_info)
        own_fields = bool(fields)
        fields = with_context(fields)     # the fields in context, after the record's
        names = tuple(fields)
        values = tuple(positional) + tuple(fields.values())
        clock = int(record.created * 1e9)
        key = (fmt, style, names, len(positional)) + place
        site = self._sites.get(key)
        if site is None:
            tpl = parse_style(fmt, style)
            try:
                src = session.registry.add_source(
                    key=("logging",) + key, severity=severity, category=record.name,
                    function=record.funcName or "", file=record.pathname or "",
                    line=record.lineno or 0, format=fmt,
                    arg_tags=",".join(type_name(type(v)) for v in values),
                    field_names=names, positional=len(positional), template=tpl, style=style)
            except TooManySources:
                src = session.registry.overflow_source(severity)
                text = f"[{record.name}] {record.pathname}:{record.lineno}: {_message(record)}"
                session.writers.writer().push_event(src.id, clock, None, (text,), ())
                return
            site = RecordSite(src.id, tpl, severity,
                              _conversions(tpl) if style == STYLE_PRINTF else None)
            if len(self._sites) < MAX_SITES:
                self._sites[key] = site
                if not own_fields and type(record.args) is tuple and type(record.msg) is str:
                    # the key the common case looks up: the record's own attributes (and
                    # the names of the fields in context, its only fields)
                    in_context = (names,) if names else ()
                    if fmt is record.msg:
                        self._sites[(fmt,) + place + (len(positional),) + in_context] = site
                    elif not record.args and positional[0] is record.msg:
                        self._sites[(None,) + place + (1,) + in_context] = site
        session.writers.writer().push_event(site.source_id, clock, site.template, values, names)

    def _own_names(self, record: logging.LogRecord | CallRecord) -> set[str]:
        """The fields a record's own attributes take: ``levelname`` (a custom level's),
        ``exception`` (``exc_info``) and ``stack`` (``stack_info``), where it has them."""
        return {name for name, has in (("levelname", record.levelno not in self._standard_levels),
                                       ("exception", record.exc_info),
                                       ("stack", record.stack_info)) if has}


def _extra(record: logging.LogRecord | CallRecord) -> dict[str, Any]:
    """A record's attributes that are not a LogRecord's own (``extra={...}``, or a
    filter's), by field name (``_extra_name``)."""
    d = record.__dict__
    fields: dict[str, Any] = {}
    if len(d) != _BASE:
        for k, v in list(d.items()):
            if k not in _STANDARD:
                fields.setdefault(_extra_name(k), v)
    return fields


def _extra_name(key: Any) -> str:
    """The field of an ``extra`` key: its name (``_field_name``), with one more ``_`` where
    it is the name of the record's exception or stack field or one of them followed by
    ``_`` (``exception`` is ``exception_``): a user's field never poses as either, and no
    two keys share a field."""
    name = key if type(key) is str else _field_name(key)
    # (str's own methods: a str subclass's may be hostile)
    return str.__str__(name) + "_" if str.rstrip(name, "_") in _OWN_FIELDS else name


def _split(record: logging.LogRecord | CallRecord) -> tuple[str, str, tuple, dict[str, Any]]:
    """(style, format, positional values, keyed values) of a record's message, as
    ``logging`` would apply ``msg % args``: a message that is not a str, or whose
    arguments do not fit it (their number, a key, a value a conversion does not take), is
    kept as the text ``logging`` makes of it."""
    msg, args = record.msg, record.args
    if type(msg) is not str:
        return STYLE_LITERAL, _message(record), (), {}
    if not args:
        return STYLE_LITERAL, msg, (), {}    # logging applies no % without arguments
    tpl = _printf(msg)
    if isinstance(args, Mapping):
        if tpl is not None and tpl.positional == 1 and _fits(tpl.placeholders[0].spec[-1],
                                                             args):
            return STYLE_PRINTF, msg, (args,), {}    # "%s" % {...}: the mapping is the value
        if tpl is not None and not tpl.positional:
            try:
                fields = {k: args[k] for k in _ordered(tpl)}
            except Exception:
                pass
            else:
                if all(_fits(ph.spec[-1], fields[ph.key]) for ph in tpl.placeholders):
                    return STYLE_PRINTF, msg, (), fields
        return STYLE_LITERAL, _message(record), (), {}
    # A tuple's subclass is a tuple to %; anything else is the one argument.
    args = tuple(args) if isinstance(args, tuple) else (args,)
    if (tpl is None or tpl.names or tpl.positional != len(args)
            or not all(_fits(ph.spec[-1], args[ph.key]) for ph in tpl.placeholders)):
        return STYLE_LITERAL, _message(record), (), {}
    return STYLE_PRINTF, msg, args, {}


def _conversions(tpl: Any) -> str | None:
    """The conversion of each argument of a printf template without keys, for the common
    case's check (``_all_fit``); None if each is ``%s``, ``%r`` or ``%a`` (any value fits)."""
    if tpl.names:
        return None
    convs = "".join(ph.spec[-1] for ph in tpl.placeholders)
    return None if all(c in "sra" for c in convs) else convs


def _all_fit(convs: str, args: tuple) -> bool:
    """True if each conversion of ``convs`` takes its argument in ``args``."""
    for conv, value in zip(convs, args):
        if not _fits(conv, value):
            return False
    return True


def _fits(conv: str, value: Any) -> bool:
    """True if the printf conversion ``conv`` takes ``value`` as ``%`` does: any value for
    ``s``, ``r`` and ``a``; a number for ``d i u e E f F g G`` (a finite one for ``d i u``),
    an integer for ``x X o``, a code point or one character for ``c``. A value whose own
    text cannot be made (an int of more than 4,300 digits, a ``__str__`` that raises) fits:
    it is marked in its place, as in any event. The C twin is ``printf_takes``."""
    if conv in "sra":
        return True
    t = type(value)
    if t is int or t is bool:
        if conv == "c":
            return 0 <= value < 0x110000
        if conv in "diuxXo":
            return True
    elif t is float:
        return conv in "eEfFgG" or (conv in "diu" and math.isfinite(value))
    elif t is str:
        return conv == "c" and len(value) == 1
    elif t is type(None) or t is bytes:
        return False
    elif t is Decimal and conv in "diu":
        return value.is_finite()     # not made into its int here: it may have 10⁸ digits
    try:
        ("%" + conv) % (value,)      # a number beyond a float's range, another type
        return True
    except Exception as exc:
        if not owned_by_value(exc):
            raise
        return False


def _field_name(key: Any) -> str:
    """A key of ``extra`` that is not a str as a field name: its ``str``; a str subclass's
    own text, or its type's name in brackets, where that raises or gives no str (a
    hostile ``__str__`` never costs the record)."""
    try:
        name = str(key)
    except Exception:
        name = None
    if isinstance(name, str):
        return name
    return str.__str__(key) if isinstance(key, str) else f"<{type_name(type(key))}>"


def _no_extra(d: dict) -> bool:
    """True if a record's attributes are a LogRecord's own (and what formatters add)."""
    n = len(d)
    return n == _BASE or (n <= _BASE + 2
                          and n == _BASE + ("message" in d) + ("asctime" in d))


def _printf(msg: str) -> Any:
    try:
        return parse_printf(msg)
    except FormatError:
        return None


def _ordered(tpl: Any) -> list[str]:
    """A printf template's keys, each once, in the order they appear."""
    return list(dict.fromkeys(ph.key for ph in tpl.placeholders))


def _message(record: logging.LogRecord | CallRecord) -> str:
    """The record's message as ``logging`` renders it; if that fails, its format and the
    arguments' reprs (where ``logging`` would print an error and drop the record)."""
    try:
        return record.getMessage()
    except Exception:
        try:
            return f"{record.msg} {record.args!r}"
        except Exception:
            return f"<{type(record.msg).__name__} message that cannot be shown>"


def capture(min_severity: int | str | None = None, *, session: Session | None = None,
            replace: bool = False, warnings: bool = False,
            level: int | str | None = None) -> BlogHandler:
    """Route every ``logging`` record at ``min_severity`` (a ``logging`` level name or
    number, default ``"INFO"``) or above (the application's and its libraries') into blog:
    a BlogHandler on the root logger, whose level is set to it. ``level`` is the old name
    of ``min_severity``, still taken. ``replace`` removes the root's other handlers;
    ``warnings`` captures ``warnings.warn`` too (``capture_warnings``). Calling it again
    updates the handler it added. Returns the handler (``logging.root.removeHandler``
    undoes it).
    """
    if level is not None:
        if min_severity is not None:
            raise TypeError("capture takes min_severity or its old name level, not both")
        min_severity = level
    number = level_number("INFO" if min_severity is None else min_severity)
    root = logging.getLogger()
    target = session if session is not None else default_session()
    handler = next((h for h in root.handlers   # (not a test capture's: it ends with it)
                    if isinstance(h, BlogHandler) and h.session is target
                    and not getattr(h, "capture_only", False)), None)
    if handler is None:
        handler = BlogHandler(number, session=target)
    handler.setLevel(number)
    if replace:
        for h in list(root.handlers):
            if h is not handler:
                root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(number)
    if warnings:
        capture_warnings(session=target)
    return handler


_showwarning_before: Any = None


def capture_warnings(enable: bool = True, *, session: Session | None = None) -> None:
    """Log each warning that ``warnings`` would show as an event of category
    ``py.warnings`` at severity warning, whose call site is where the warning points
    (its file and line), format ``"%s: %s"`` (the warning's class and message);
    ``capture_warnings(False)`` restores what showed them before. The warning filters
    still decide which are shown (``"default"``: once per place).
    """
    global _showwarning_before
    if not enable:
        if _showwarning_before is not None:
            _warnings.showwarning = _showwarning_before
            _showwarning_before = None
        return
    handler = BlogHandler(session=session)
    before = _showwarning_before or _warnings.showwarning

    def showwarning(message: Any, category: type, filename: str, lineno: int,
                    file: Any = None, line: str | None = None) -> None:
        if file is not None:     # shown on a stream of the caller's choice: as before
            before(message, category, filename, lineno, file, line)
            return
        handler.handle(logging.LogRecord(
            "py.warnings", logging.WARNING, str(filename), int(lineno), "%s: %s",
            (getattr(category, "__name__", str(category)), str(message)), None, "<warning>"))

    _showwarning_before = before
    _warnings.showwarning = showwarning


__all__ = ["BlogHandler", "LEVELS", "capture", "capture_warnings", "level_number",
           "severity_of"]
