"""Correlation with OpenTelemetry: the trace and span a log call is in, as its fields
``trace_id`` (32 lowercase hex digits) and ``span_id`` (16), as W3C trace context writes
them (docs/opentelemetry.md).

Where ``opentelemetry-api`` is installed (the ``otel`` extra), every event logged inside a
valid span carries them, through every call path; outside a span, neither. The span is the
innermost of two: the current OpenTelemetry span, and the current ``@blog.traced`` call,
which is a span of its own (``new_span``: a random span id, its parent the span current
when it began, its trace that span's, or a new one). blog never imports OpenTelemetry:
until the application has imported ``opentelemetry.trace`` (``WATCHED``) no span can be
current, and a call looks for it in ``sys.modules``; once it has, a call reads
OpenTelemetry's context variable itself (``ARMED``), or, where that is not the one it
knows (another runtime context, other internals), calls ``get_current_span()``
(``PUBLIC``). The span of a span object is read once, by the public API (``ids_of``), and
kept while it is current.

``basic_config(otel=False)`` or ``BLOG_OTEL=0`` turns it off (``use``). The C call paths
(``_correlation.c`` beside this module) are handed the same state (``speedups.use_otel``).
"""

from __future__ import annotations

import os
import sys
from contextvars import ContextVar, Token
from blogformat.typinglite import TYPE_CHECKING, Any, NamedTuple

from .accel import speedups
from .envconfig import otel_from_env
from .report import report

if TYPE_CHECKING:
    from typing import Callable

__all__ = ["IDS", "PARENT", "Ids", "Span", "enter_span", "ids_now", "leave_span", "new_span",
           "use"]

#: The fields a call in a span carries, in this order.
IDS = ("trace_id", "span_id")
#: The field of a traced call's first event naming its parent span (None: a root span).
PARENT = "parent_span_id"
#: The module whose import makes an OpenTelemetry span possible (it sets them in context).
WATCHED = "opentelemetry.trace.propagation"

#: What correlation does now: nothing (turned off, or OpenTelemetry not installed); look
#: for OpenTelemetry's import at each call (installed, not imported yet); read its context
#: variable; call its ``get_current_span``. (_correlation.c's CORR_* are these numbers.)
OFF, WAITING, ARMED, PUBLIC = range(4)


class Ids(NamedTuple):
    """A call's trace and span ids as fields in context: ``contextfields.ContextFields``'s
    shape, which the C call paths read by position (_correlation.c's IDS_*)."""
    names: tuple[str, ...]    # IDS
    values: tuple[str, str]   # 32 and 16 lowercase hex digits


class Span(NamedTuple):
    """A ``@blog.traced`` call's span while it runs (in ``SPAN``). C reads it by position
    (_correlation.c's SPAN_*)."""
    ids: Ids
    parent: str | None   # the parent's span id; None: a root span
    otel: Any            # the OpenTelemetry span current when it began, or None: one
    #                      current now that is another began inside it, and is the innermost


#: The ``@blog.traced`` call running now in this context, or None.
SPAN: ContextVar[Span | None] = ContextVar("blog.span", default=None)


class _State:
    """Correlation's state: its mode, and what a call reads of OpenTelemetry in it."""

    mode = OFF
    wanted = True                # not turned off (BLOG_OTEL, basic_config(otel=...))
    installed = False            # opentelemetry-api is importable
    var: ContextVar | None = None         # ARMED: OpenTelemetry's context variable
    key: str | None = None                # ARMED: its key of the current span
    current_span: Callable[[], Any] | None = None   # PUBLIC: get_current_span
    span_type: type | None = None          # opentelemetry.trace.Span
    last: tuple[Any, Ids | None] = (None, None)   # the last span read, and its ids
    reported = False             # a span's API failed: said once on stderr
    spans_used = False           # new_span was called (the C paths read SPAN then)


state = _State()


#: Called when correlation is turned on: ``blog.contextfields`` registers, whose Python call
#: paths then look at the fields in context (it imports this module: not the other way).
on_use: list[Callable[[], None]] = []


def use(on: bool) -> None:
    """Turn correlation on (where OpenTelemetry is installed) or off, for the process."""
    _use(on)
    if state.mode != OFF:
        for told in on_use:
            told()


def _use(on: bool) -> None:
    state.wanted = on
    _set_mode(WAITING if on and state.installed else OFF)
    if state.mode == WAITING:
        arm()


def _set_mode(mode: int, var: ContextVar | None = None, key: str | None = None,
              current_span: Callable[[], Any] | None = None) -> None:
    state.mode, state.var, state.key, state.current_span = mode, var, key, current_span
    state.last = (None, None)
    use_otel(mode, var, key, current_span)


def arm() -> None:
    """Once OpenTelemetry's ``WATCHED`` module is imported whole: read its context
    variable from now on, or call its ``get_current_span`` where that is not the
    ``ContextVarsRuntimeContext`` this knows. Called by a call that finds it imported."""
    prop = sys.modules.get(WATCHED)
    ctx = sys.modules.get("opentelemetry.context")
    span_mod = sys.modules.get("opentelemetry.trace.span")
    current_span = getattr(prop, "get_current_span", None)   # (defined last: imported whole)
    if state.mode != WAITING or current_span is None or ctx is None or span_mod is None:
        return
    state.span_type = getattr(span_mod, "Span", None)
    runtime = getattr(ctx, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    key = getattr(prop, "_SPAN_KEY", None)
    if (type(runtime).__name__ == "ContextVarsRuntimeContext" and type(var) is ContextVar
            and type(key) is str and isinstance(var.get(), dict)):
        _set_mode(ARMED, var, key)
    else:
        _set_mode(PUBLIC, current_span=current_span)


def _otel_span() -> Any:
    """The current OpenTelemetry span object, or None (none can be, or none is set)."""
    mode = state.mode
    if mode == ARMED:
        c = state.var.get()   # type: ignore[union-attr]
        return c.get(state.key) if c else None
    if mode == PUBLIC:
        return state.current_span()   # type: ignore[misc]
    if mode == WAITING and WATCHED in sys.modules:
        arm()
        if state.mode != WAITING:
            return _otel_span()
    return None


def ids_of(span: Any) -> Ids | None:
    """The ids of an OpenTelemetry span object, by its public API; None if it is not a
    valid span (``INVALID_SPAN``, an object that is no span, one whose API fails)."""
    try:
        if state.span_type is not None and not isinstance(span, state.span_type):
            return None
        c = span.get_span_context()
        if not c.is_valid:
            return None
        return Ids(IDS, (format(c.trace_id, "032x"), format(c.span_id, "016x")))
    except Exception as exc:
        if not state.reported:
            state.reported = True
            report(f"blog: reading the current OpenTelemetry span failed ({exc!r}): events "
                   "in such a span carry no trace_id")
        return None


def _ids(span: Any) -> Ids | None:
    last, ids = state.last
    if last is not span:
        ids = ids_of(span)
        state.last = (span, ids)
    return ids


def _current() -> tuple[Ids | None, Any]:
    """The ids of the innermost span now (or None), and the OpenTelemetry span object."""
    t = SPAN.get()
    o = _otel_span()
    if t is not None and t.otel is o:
        return t.ids, o
    ids = _ids(o) if o is not None else None
    return (ids if ids is not None else t.ids if t is not None else None), o


def ids_now() -> Ids | None:
    """The ids a call made now carries: the innermost span's, or None outside a span."""
    return _current()[0] if state.mode != OFF else None


def new_span() -> Span | None:
    """A span for a ``@blog.traced`` call beginning now, a child of the innermost span (or
    a root of a new trace); None while correlation is off."""
    if state.mode == OFF:
        return None
    if not state.spans_used:
        state.spans_used = True
        use_spans()      # the C paths read SPAN from now on
    ids, o = _current()
    trace, parent = ids.values if ids is not None else (_new_id(16), None)
    return Span(Ids(IDS, (trace, _new_id(8))), parent, o)


def enter_span(span: Span | None) -> Token | None:
    """Make ``span`` the current traced call (None: nothing to do); the token
    ``leave_span`` takes."""
    return SPAN.set(span) if span is not None else None


def leave_span(token: Token | None) -> None:
    """The traced call that ``enter_span`` made current ends."""
    if token is not None:
        try:
            SPAN.reset(token)
        except ValueError:     # (a coroutine driven from another context than it began in)
            old = token.old_value
            SPAN.set(None if old is Token.MISSING else old)


def _new_id(size: int) -> str:
    """``size`` random bytes as lowercase hex, never all zero (W3C: an invalid id)."""
    while True:
        b = os.urandom(size)
        if any(b):
            return b.hex()


def reset_after_fork() -> None:
    """In a forked child (``blog.process``): the C path's ids from a seed of its own."""
    seed_ids(os.urandom(8))


def _installed() -> bool:
    """opentelemetry-api can be imported (found, not imported): asked of the import
    system's finders as ``importlib.util.find_spec`` asks them, without importing
    ``importlib`` (with ``warnings`` and ``contextlib``: a first event's start-up)."""
    if "opentelemetry" in sys.modules:
        return True
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        try:
            if find is not None and find("opentelemetry", None) is not None:
                return True
        except (ImportError, ValueError):    # a package hidden or broken: as not installed
            return False
    return False


# --- the C path's state (speedups), or nothing to hand on the pure-Python path -----------

def _python_reads_it(*args: Any) -> None:
    """The pure-Python path's ``use_correlation``, ``use_otel``, ``seed_ids`` and
    ``use_spans``: it reads this module's state itself."""


use_correlation: Callable[..., None] = (
    _python_reads_it if speedups is None else speedups.use_correlation)
use_otel: Callable[..., None] = _python_reads_it if speedups is None else speedups.use_otel
seed_ids: Callable[[bytes], None] = _python_reads_it if speedups is None else speedups.seed_ids
use_spans: Callable[[], None] = _python_reads_it if speedups is None else speedups.use_spans


def _start() -> None:
    """At import: find whether OpenTelemetry is installed (without importing it), and
    apply ``BLOG_OTEL``."""
    state.installed = _installed()
    use_correlation(SPAN, Span, Ids, IDS, ids_of, arm, os.urandom(8))
    try:
        on = otel_from_env()
    except ValueError as exc:
        report(f"blog: {exc}; correlation with OpenTelemetry stays on")
        on = True
    _use(on)     # (blog.contextfields, which imports this module, reads the mode after)


_start()
