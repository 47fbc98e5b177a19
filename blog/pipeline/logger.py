"""Logger: ``log.info("order {} filled at {}", oid, px)`` and friends. The hot path lives here."""

from __future__ import annotations

import sys
import time
from types import CodeType, FrameType, SimpleNamespace

from blogformat.typinglite import TYPE_CHECKING, Any, NamedTuple, cast
from blogformat.placeholders import FormatError, parse, render
from blogformat.severity import Severity, to_severity
from blogformat.values import PLAIN_TYPES, safe_str, type_name

from ..accel import speedups
from ..contextfields import fields_now
from ..contextfields import state as _context_state
from ..contextfields import with_context
from ..report import report
from .source import (DYNAMIC_FORMAT, CallSiteError, TooManySources, check_template, describe,
                     unfit)

if TYPE_CHECKING:
    from typing import Callable
    from .registry import Registry
    from .writer import Writers

_getframe = sys._getframe
_time_ns = time.time_ns

#: A call site that logs more distinct format strings than this (an f-string
#: passed as the format, say) gets one source with format "{}" and its
#: message rendered at call time, instead of a source per message.
MAX_FORMATS_PER_SITE = 16
#: Entries a logger keeps for calls in a context (per site and set of context names).
MAX_CONTEXT_SITES = 4096

_LEVELS = (("trace", Severity.TRACE), ("debug", Severity.DEBUG), ("info", Severity.INFO),
           ("warning", Severity.WARNING), ("error", Severity.ERROR),
           ("critical", Severity.CRITICAL))


def site_key(code: CodeType, lasti: int) -> int:
    """The key of a call site in a level method's cache: its code object's id and offset mixed.

    The C ``Method`` (``_logger.c``, method_vectorcall) computes the same.
    The cached entry then confirms the code object itself.
    """
    return (id(code) >> 4) ^ lasti


class SiteEntry(NamedTuple):
    """A level method's cache entry for one call site (calls outside a context). The C
    ``Method`` reads it by position: ``_logger.c``'s SITE_* indices name these fields in
    this order (tests/test_c_sources.py checks)."""
    code: CodeType
    format: str              # the format object itself: a call with another misses
    source_id: int
    nargs: int               # positional values
    names: tuple[str, ...]   # keyword fields' names, in call order
    shown: int               # bit i: value i is shown by !r, !a or a spec (_shown_by_repr)


class ContextEntry(NamedTuple):
    """A logger's cache entry for a call site inside a context, keyed by (level, site key,
    format, argument count, keyword names, context names): the values are the call's, then
    the context's. The C ``Method`` reads it by position too (``_logger.c``'s CONTEXT_*)."""
    code: CodeType
    source_id: int
    names: tuple[str, ...]   # the keyword fields' names, then the context's
    template: Any
    shown: int               # as SiteEntry's, over all the values


def _disabled(*args: Any, **kwargs: Any) -> None:
    """A level method below the minimum severity: returns at once."""


def _disabled_call(fmt, /, *args, **fields):
    """What ``inspect`` and ``help()`` show of ``_disabled`` (which takes anything): a
    level method's call, as the C ``noop`` shows it."""


_disabled.__wrapped__ = _disabled_call   # type: ignore[attr-defined]


def _method(lg: Logger, level: int) -> Callable[..., None]:
    """A level method: the C fast path in front of the Python one, where available."""
    sites: dict[int, SiteEntry] = {}
    return Method(sites, lg.writers.local, _make_method(lg, level, sites), lg._context_sites,
                  int(level))


def _make_method(lg: Logger, level: int, sites: dict[int, SiteEntry],
                 with_exception: bool = False) -> Callable[..., None]:
    """Build one level method of ``lg`` as a closure (closure cells are the fastest lookups).

    ``sites`` maps ``site_key(code, f_lasti)`` of the caller to its SiteEntry; an entry
    is used only if the code object and the format object are the same, as many arguments are
    passed and the same keywords in the same order. The event's values are the
    arguments, then the keywords' values. This is the reference for the C
    ``Method``, which calls it for anything but the common case.
    """
    local = lg.writers.local
    new_writer = lg.writers.new_writer
    slow = lg._slow
    plain = PLAIN_TYPES
    getframe = _getframe
    clock_ns = _time_ns
    key_of = site_key
    ctx = _context_state
    ctx_get = fields_now
    ctx_sites = lg._context_sites

    def method(fmt: str, /, *args: Any, **fields: Any) -> None:
        if with_exception:
            fields["exception"] = _current_exception()
        try:
            f = getframe(1)
        except ValueError:       # called with no Python frame (from C, at shutdown)
            return slow(level, None, _NO_FRAME, fmt, args, fields)
        if ctx.in_use:
            c = ctx_get()
            if c is not None and type(fmt) is str:   # a cache of its own, keyed by names
                hit = ctx_sites.get((level, key_of(code := f.f_code, f.f_lasti), fmt, len(args),
                                     tuple(fields), c.names))
                if hit is None or hit.code is not code:
                    return slow(level, sites, f, fmt, args, fields)   # fills ctx_sites
                clock = clock_ns()
                values = (args + tuple(fields.values()) if fields else args) + c.values
                try:
                    ch = local.c
                except AttributeError:
                    ch = new_writer().channel
                if not ch.push_values(hit.source_id, clock, values):
                    ch.on_overflow(hit.source_id, clock, hit.template, values, hit.names)
                return
        # The call site is (code object, instruction offset): exact even for two
        # calls on one line. The code and the format object confirm the entry.
        code = f.f_code
        site = sites.get(key_of(code, f.f_lasti))
        if (site is None or site.code is not code or site.format is not fmt
                or site.nargs != len(args)
                or (site.names != tuple(fields) if fields else site.names)):
            return slow(level, sites, f, fmt, args, fields)
        clock = clock_ns()
        values = args + tuple(fields.values()) if fields else args
        for a in values:
            if type(a) not in plain:   # mutable or rich: capture now, off the fast path
                return slow(level, sites, f, fmt, args, fields, clock)
        try:
            ch = local.c
        except AttributeError:
            ch = new_writer().channel
        if not ch.push_values(site.source_id, clock, values):   # at the limit, or not in C
            ch.on_overflow(site.source_id, clock, None, values, ())

    method.__name__ = "exception" if with_exception else Severity(level).name.lower()
    method.__qualname__ = f"Logger.{method.__name__}"
    method.__doc__ = _level_doc(method.__name__, level)
    return method


def _current_exception() -> Any:
    """What ``log.exception`` logs: the exception being handled; outside an ``except``
    block, NO_EXCEPTION (read back as ``logging`` prints it there: ``NoneType: None``)."""
    exc = sys.exc_info()[1]
    if exc is not None:
        return exc
    from blogformat.tracebacks import NO_EXCEPTION   # (a first call imports none of it)
    return NO_EXCEPTION


def _level_doc(name: str, level: int) -> str:
    """The docstring of the level method ``name`` (the C ``Method`` shows it too)."""
    what = "with the exception being handled as field ``exception``, at ERROR" \
        if name == "exception" else f"at {Severity(level).name}"
    return (f"Log an event {what}: the positional arguments fill ``fmt``'s ``{{}}`` "
            "placeholders, the keyword fields its ``{name}`` ones; every field is kept.")


class Logger:
    """Logs events of one category into a Session. Get one with ``blog.get_logger(category)``.

    Its level methods ``trace``, ``debug``, ``info``, ``warning``, ``error``, ``critical``
    and ``exception`` (ERROR, with the exception being handled) are called as
    ``log.info(fmt, /, *args, **fields)``: a format string with ``{}`` and ``{name}``
    placeholders, the positional arguments and keyword fields: ``log.info("disk {} at
    {}%", "/", 93.5, host="db1")``.
    """

    if TYPE_CHECKING:   # (typing's names, which get_type_hints resolves, exist only there)
        trace: Callable[..., None]
        debug: Callable[..., None]
        info: Callable[..., None]
        warning: Callable[..., None]
        error: Callable[..., None]
        critical: Callable[..., None]
        exception: Callable[..., None]

    def __init__(self, registry: Registry, writers: Writers, category: str) -> None:
        self.registry = registry   # the session's sources and settings
        self.writers = writers     # and its threads' writers
        self.category = category
        self.threshold: int = Severity.TRACE   # the least severity logged now (read by C too)
        self._formats: dict[tuple, set[str]] = {}
        self._warned: set[str] = set()
        # (level, site key, format, argument count, keyword names, context names) ->
        # (code, source id, field names, template): calls in a context (blog.context).
        self._context_sites: dict[tuple, ContextEntry] = {}
        self._live = {name: _method(self, sev) for name, sev in _LEVELS}
        self._live["exception"] = _make_method(self, Severity.ERROR, {}, with_exception=True)
        self._off = noop
        self.refresh()

    def __repr__(self) -> str:
        return f"<blog.Logger {self.category!r} min={self.threshold:#x}>"

    @property
    def min_severity(self) -> int:
        """This category's minimum severity: its own, or else its nearest parent's (``db``'s
        for ``db.pool``), or TRACE; the session's minimum applies too."""
        return self.registry.min_of(self.category)

    def set_min_severity(self, severity: Severity | int | str | None) -> None:
        """Disable events below ``severity`` for this category and the categories under it
        that have no minimum of their own (``db.pool`` under ``db``), at runtime; None: this
        category's parent's minimum applies again."""
        self.registry.set_category_min(
            self.category, None if severity is None else to_severity(severity))

    def enabled(self, severity: Severity | int | str) -> bool:
        """True if an event of ``severity`` would be logged."""
        return to_severity(severity) >= self.threshold

    def refresh(self) -> None:
        """Apply the minimum severities in force (the session calls it when its own changes)."""
        # A disabled level is an instance attribute bound to a no-op function:
        # the call costs no more than calling an empty function.
        self.threshold = max(self.registry.min_of(self.category), self.registry.min_severity)
        bt = self.registry.backtrace
        resort = self.registry.last_resort
        for name, sev in _LEVELS + (("exception", Severity.ERROR),):
            triggers = bt is not None and sev >= bt.trigger
            show = resort and sev >= Severity.WARNING
            if sev >= self.threshold:
                method = self._live[name] if not (triggers or show) \
                    else self._python_method(name, sev, False, triggers, show)
            elif bt is not None and sev >= bt.least:
                method = self._python_method(name, sev, True, False, False)
            else:
                method = self._off
            setattr(self, name, method)

    def _python_method(self, name: str, level: int, keep: bool, triggers: bool,
                       show: bool) -> Callable[..., None]:
        """A level method that takes the Python path: while the session keeps a backtrace
        (``Session.use_backtrace``), below the minimum it keeps the event in the thread's
        backtrace (``keep``), at the trigger severity or above it writes the backtrace
        first (``triggers``); with ``show`` (the last resort, ``Registry.use_last_resort``)
        it shows the event on stderr too."""
        writers, slow, category = self.writers, self._slow, self.category
        with_exception = name == "exception"

        def method(fmt: str, /, *args: Any, **fields: Any) -> None:
            if with_exception:
                fields["exception"] = _current_exception()
            try:
                f = _getframe(1)
            except ValueError:
                f = _NO_FRAME
            if triggers:
                writers.writer().write_backtrace()
            slow(level, None, f, fmt, args, fields, keep=keep)
            if show:
                last_resort(level, category, fmt, args, fields)

        method.__name__, method.__qualname__ = name, f"Logger.{name}"
        method.__doc__ = _level_doc(name, level)
        return method

    def log(self, severity: Severity | int | str, fmt: str, /, *args: Any, **fields: Any) -> None:
        """Log at a severity chosen at runtime (slower than the level methods)."""
        level = to_severity(severity)
        bt = self.registry.backtrace
        keep = level < self.threshold
        if not keep or (bt is not None and level >= bt.least):
            try:
                f = _getframe(1)
            except ValueError:
                f = _NO_FRAME
            if bt is not None and level >= bt.trigger and not keep:
                self.writers.writer().write_backtrace()
            self._slow(level, None, f, fmt, args, fields, keep=keep)
            if self.registry.last_resort and level >= Severity.WARNING and not keep:
                last_resort(level, self.category, fmt, args, fields)

    # --- slow path: first call of a site, keyword fields, rich arguments -----

    def _slow(self, level: int, sites: dict[int, SiteEntry] | None, f: Any, fmt: str,
              args: tuple, fields: dict, clock: int | None = None, keep: bool = False) -> None:
        if clock is None:
            clock = _time_ns()
        context_key = None
        if _context_state.in_use:
            merged = with_context(fields)
            if merged is not fields:   # the site's cache entry is for calls without context
                c = fields_now()
                if (sites is not None and c is not None and f is not _NO_FRAME
                        and type(fmt) is str    # (a computed format is never cached)
                        and not any(n in fields for n in c.names)):   # a level method's
                    context_key = (level, site_key(f.f_code, f.f_lasti), fmt, len(args),
                                   tuple(fields), c.names)
                fields, sites = merged, None
        code, lasti = f.f_code, f.f_lasti
        names = tuple(fields)
        if type(fmt) is not str:   # logged as its text (a computed format); strict: raised
            where = describe(code, f.f_lineno)
            if self.registry.strict:
                raise TypeError(f"{where}: format must be a str, not {type(fmt).__name__}")
            if where not in self._warned:
                self._warned.add(where)
                report(f"blog: {where}: format must be a str, not {type(fmt).__name__}; "
                       "its text is logged (strict=True raises)")
            fmt = safe_str(fmt)
        registry = self.registry
        values = args + tuple(fields.values()) if fields else args
        # id(code), not code: hashing a code object hashes its whole contents. The
        # registered source keeps its code object alive, so the id stays its own.
        # The argument count is part of the key: a call site that passes another number
        # of arguments (``log.info("{} {}", *a)``) is checked again, and raises.
        key = (id(code), lasti, level, self.category, fmt, names, len(args))
        source = registry.site(key)
        if source is None:
            source = self._register(key, level, f, fmt, args, values, names)
        tpl = source.template
        if source.format is DYNAMIC_FORMAT:
            message = _render_dynamic(fmt, args, fields)
            if registry.is_overflow(source):   # past the session's sources: all of it as text
                extra = [f"{k}={v!r}" for k, v in fields.items() if "{" + k not in fmt]
                values = (f"[{self.category}] {describe(code, f.f_lineno)}: {message}"
                          + (" " + " ".join(extra) if extra else ""),)
                names = ()
            else:
                values = (message,) + tuple(fields.values())
            tpl = None
        elif sites is not None:
            sites[site_key(code, lasti)] = SiteEntry(code, fmt, source.id, len(args), names,
                                                      _shown_by_repr(tpl, len(args), names))
        elif context_key is not None and len(self._context_sites) < MAX_CONTEXT_SITES:
            self._context_sites[context_key] = ContextEntry(
                code, source.id, names, tpl, _shown_by_repr(tpl, len(args), names))
        if keep:     # below the minimum: into the thread's backtrace
            self.writers.writer().keep(source.id, clock, tpl, values, names)
        else:
            self.writers.writer().push_event(source.id, clock, tpl, values, names)

    def _register(self, key: tuple, level: int, f: Any, fmt: str, args: tuple,
                  values: tuple, names: tuple[str, ...]) -> Any:
        code = f.f_code
        where = describe(code, f.f_lineno)
        seen = self._formats.setdefault(key[:4] + (names,), set())
        if fmt not in seen and len(seen) >= MAX_FORMATS_PER_SITE:
            return self._dynamic(key, level, f, names)
        try:
            tpl = check_template(fmt, len(args), names, where)
        except CallSiteError as exc:
            # A format that does not fit its call is logged as text, said once per call
            # site on stderr; a strict session raises for a literal one (a bug to fix).
            # A computed one (an f-string whose text holds braces) never raises.
            literal = _is_literal(fmt, code) or f is _NO_FRAME
            if literal and self.registry.strict:
                raise
            if where not in self._warned:
                self._warned.add(where)
                report(f"blog: {exc}; " + ("logged as text (strict=True raises)" if literal
                                           else "a computed format string is logged as text"))
            seen.add(fmt)   # counts toward the site's limit, which bounds the keys kept
            text = unfit(fmt, len(args)) if literal else None
            if text is None:
                return self.registry.add_site(key, self._dynamic(key, level, f, names), code)
            return self._add(key, level, f, text, values, names, len(args), parse(text))
        seen.add(fmt)
        source = self._add(key, level, f, fmt, values, names, len(args), tpl)
        if self.registry.is_overflow(source):
            seen.discard(fmt)   # nothing kept for it: the limit bounds what is kept
        return source

    def _add(self, key: tuple, level: int, f: Any, fmt: str, values: tuple,
             names: tuple[str, ...], positional: int, tpl: Any) -> Any:
        """Register the call site's source of format ``fmt``, or an overflow source."""
        code = f.f_code
        tags = ",".join(type_name(type(v)) for v in values)
        try:
            return self.registry.add_source(
                key=key, severity=level, category=self.category, function=code.co_qualname,
                file=code.co_filename, line=f.f_lineno, format=fmt, arg_tags=tags,
                field_names=names, positional=positional, template=tpl, code=code)
        except TooManySources:
            return self.registry.overflow_source(level)

    def _dynamic(self, key: tuple, level: int, f: Any, names: tuple[str, ...]) -> Any:
        """The site's source for messages rendered at call time (format ``{}``)."""
        code = f.f_code
        dyn_key = key[:4] + (DYNAMIC_FORMAT, names)
        try:
            return self.registry.site(dyn_key) or self.registry.add_source(
                key=dyn_key, severity=level, category=self.category, function=code.co_qualname,
                file=code.co_filename, line=f.f_lineno, format=DYNAMIC_FORMAT, arg_tags="str",
                field_names=names, positional=1, template=parse(DYNAMIC_FORMAT), code=code)
        except TooManySources:
            return self.registry.overflow_source(level)


def _shown_by_repr(tpl: Any, positional: int, names: tuple[str, ...]) -> int:
    """Bit i set: a ``!r`` or ``!a`` placeholder, or one with a spec, shows value i (the C
    path leaves a zoned datetime or a dataclass there to the Python one, which keeps its
    text where the reader could not derive it: values.reproducible)."""
    mask = 0
    for ph in tpl.placeholders if tpl is not None else ():
        if ph.conversion in ("r", "a") or ph.spec:
            key = ph.key
            i = key if isinstance(key, int) else positional + names.index(key)
            mask |= 1 << i
    return mask


def _render_dynamic(fmt: str, args: tuple, fields: dict) -> str:
    """The message of a computed format: rendered if it is a template that fits, else as is."""
    try:
        tpl = parse(fmt)
        if tpl.positional == len(args) and tpl.names <= fields.keys():
            return render(tpl, args, fields)
    except FormatError:
        pass
    return fmt if not args else f"{fmt} {args!r}"


def last_resort(level: int, category: str, fmt: Any, args: tuple, fields: dict) -> None:
    """Show an event on stderr as text, ``WARN category message`` and the traceback of its
    exception (a session not yet given an output: ``Registry.use_last_resort``); never
    raises."""
    from blogformat.pretty import escape_controls, severity_text
    try:
        lines = [f"{severity_text(level)} {category} {_render_dynamic(fmt, args, fields)}"]
        exc = fields.get("exception")
        if isinstance(exc, BaseException):
            import traceback
            lines += "".join(traceback.format_exception(exc)).splitlines()
    except Exception as e:   # a value whose str or format raised
        lines = [f"{severity_text(level)} {category} {safe_str(fmt)} ({type(e).__name__} "
                 "while showing it)"]
    report("\n".join(escape_controls(line) for line in lines))


def _is_literal(fmt: str, code: Any) -> bool:
    """True if ``fmt`` is a constant of ``code`` (a literal, or one of a literal tuple)."""
    for c in code.co_consts:
        if c is fmt or (type(c) in (tuple, frozenset) and any(x is fmt for x in c)):
            return True
    return False


def _no_code() -> None:
    pass


# What the slow path reads of a frame, where there is none (a call from C code): the code of
# an empty module named <unknown> (an empty function's, renamed: compile("") at import would
# cost a tenth of a first log call).
_NO_FRAME = cast(FrameType, SimpleNamespace(
    f_code=_no_code.__code__.replace(co_filename="<unknown>", co_name="<module>",
                                     co_qualname="<module>", co_firstlineno=1),
    f_lasti=-1, f_lineno=0))
del _no_code


def _python_alone(sites: dict[int, SiteEntry], local: Any, method: Callable[..., None],
                  context_sites: dict[tuple, ContextEntry], level: int) -> Callable[..., None]:
    """The pure-Python path's ``Method``: the level method ``_make_method`` made, with
    nothing in front of it."""
    return method


#: A level method in front of its Python one (``_make_method``'s, which it calls for
#: anything but the common case): the C ``Method`` (``_logger.c`` beside this module)
#: where the C fast path is built (and not chosen away), else the Python one alone.
Method: Callable[..., Callable[..., None]] = (
    _python_alone if speedups is None else speedups.Method)
#: A disabled level method: returns at once (C's ``noop``, or ``_disabled``).
noop: Callable[..., None] = _disabled if speedups is None else speedups.noop
