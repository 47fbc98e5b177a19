"""``@blog.traced``: log a function's calls, with their arguments, result or exception,
and duration.

    @blog.traced(exclude=["password"])
    async def login(user: str, password: str) -> bool: ...

logs, for each call, ``call login(user='bob')`` when it starts and ``login returned
True in 1.234 ms`` (or ``login raised ValueError('...') in 0.5 ms``, with the exception
and its traceback as the field ``exception``) when it ends. The arguments and the
result are keyword fields of the events; an excluded argument never reaches the file.
Sync and async functions, generators and async generators (from the first item to
the last, or to where the loop left them) all work; fields in context
(``blog.context``) are added as everywhere.

Where correlation with OpenTelemetry is on (``blog.correlation``), each logged call is a
span: its events carry ``trace_id`` and ``span_id``, its call event ``parent_span_id``
too (None: a root span), and the events logged inside a plain or async function's call
carry its ids (docs/opentelemetry.md).

A call binds its arguments without ``inspect.Signature.bind`` where it can
(``_Tracer.bind_plain``). A plain sync function gets a C wrapper in front
(``_traced.c`` beside this module, ``TracedCall``): its calls go from C into the thread's
channel, and it hands this module's wrapper the rest (the first call, a context, a backtrace, values
to capture, a full channel, the exception event).
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
import types
from typing import Any, Callable, Iterable, NamedTuple, Sequence, TypeVar

from blogformat.severity import Severity, to_severity

from ..accel import speedups
from ..contextfields import state as context_state
from ..correlation import IDS, PARENT, Span, enter_span, leave_span, new_span
from ..contextfields import with_context
from ..default import default_session
from ..pipeline.session import Session
from ..pipeline.source import TooManySources, check_template

F = TypeVar("F", bound=Callable[..., Any])

_CALL, _RETURN, _RAISE = "call", "return", "raise"

#: A parameter without a default, in ``_Tracer.defaults``.
_REQUIRED = inspect.Parameter.empty


def _simple(params: Iterable[inspect.Parameter]) -> bool:
    """True if a call's arguments bind to ``params`` by ``_Tracer.bind_plain``: no
    ``*args``, no ``**kwargs``, and at most 64 (the C twin's limit)."""
    ps = list(params)
    return len(ps) <= 64 and all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ps)


class FastSources(NamedTuple):
    """The sources of a call without context (a tracer's ``fast_sids``), -1 where not
    registered yet. The C ``TracedCall`` reads it by position: ``_traced.c``'s SIDS_*
    indices name these fields in this order."""
    call: int            # the call event's source id
    returned: int        # the return event's
    call_span: int       # the same, with the span's fields (correlation on)
    returned_span: int


class FastPlan(NamedTuple):
    """What the C ``TracedCall`` reads of a tracer, by position: ``_traced.c``'s PLAN_*
    indices name these fields in this order (tests/test_c_sources.py checks)."""
    tracer: _Tracer           # fast_sids; returned and raised, for what C hands back
    logger: Any               # its threshold is the minimum severity in force
    registry: Any             # its backtrace: while one is kept, the Python path
    local: Any                # the session's threading.local (the thread's channel)
    severity: int
    names: tuple[str, ...]    # the parameters, in order
    defaults: tuple           # each one's default, or ``required`` (where ``live`` is None)
    required: Any
    live: Any                 # the function whose defaults a call takes, as they are then
    positional: int           # how many may be passed by position
    posonly: int              # how many only by position
    shown_at: tuple[int, ...]  # the indices of the parameters logged
    result: bool              # the return event holds the result
    spans: bool               # its calls are spans where correlation is on


class _Tracer:
    """The sources and the logging of one traced function."""

    def __init__(self, fn: Callable[..., Any], session: Session, severity: int,
                 error_severity: int, category: str, exclude: frozenset[str],
                 result: bool) -> None:
        self.fn = fn
        self.session = session
        self.logger = session.get_logger(category)
        self.registry = session.registry
        self.local = session.writers.local     # the thread's channel (.c), as the loggers'
        self.category = category
        self.severity = severity
        self.error_severity = error_severity
        self.signature = inspect.signature(fn)
        params = self.signature.parameters
        self.shown = tuple(n for n in params if n not in exclude)
        # Excluded names the function does not take are keys of its **kwargs, left out too.
        self.var_keyword = next((n for n, p in params.items() if p.kind is p.VAR_KEYWORD), None)
        self.hidden_keys = frozenset(exclude - set(params))
        self.result = result
        code = getattr(fn, "__code__", None)
        self.file = code.co_filename if code is not None else "<unknown>"
        self.line = code.co_firstlineno if code is not None else 0
        self.name = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
        args = ", ".join(f"{n}={{{n}!r}}" for n in self.shown)
        self.formats = {_CALL: f"call {self.name}({args})",
                        _RETURN: (f"{self.name} returned {{result!r}} in {{duration_ms:.3f}} ms"
                                  if result else f"{self.name} returned in {{duration_ms:.3f}} ms"),
                        _RAISE: f"{self.name} raised {{exception!r}} in {{duration_ms:.3f}} ms"}
        self._sources: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        # The plain binding of a call (no *args or **kwargs): each parameter's index, its
        # default (or _REQUIRED), how many may be passed by position, and by position only.
        self.simple = _simple(params.values())
        self.index = {n: i for i, n in enumerate(params)}
        self.defaults = tuple(_REQUIRED if p.default is p.empty else p.default
                              for p in params.values())
        self.positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                              for p in params.values())
        self.posonly = sum(p.kind is p.POSITIONAL_ONLY for p in params.values())
        self.shown_at = tuple(self.index[n] for n in self.shown)
        # A call takes the defaults its function has then (``__defaults__`` and
        # ``__kwdefaults__`` may be set after decoration): ``defaults_now``.
        self.live = _defaults_owner(fn)
        self.kwonly = tuple((i, n) for i, (n, p) in enumerate(params.items())
                            if p.kind is p.KEYWORD_ONLY)
        self._seen = (getattr(self.live, "__defaults__", None), self.defaults)
        self._signature = (self.defaults, self.signature)
        self.result_names = ("result", "duration_ms") if result else ("duration_ms",)
        # A call is a span where correlation is on, unless an argument logged takes a name
        # of the span's fields.
        self.spans = not set(self.shown) & {*IDS, PARENT}
        self.span_names = (self.shown + IDS + (PARENT,), self.result_names + IDS)
        #: The sources of a call and its return once both are registered for calls without
        #: context: the C fast path (TracedCall) reads it until it is set.
        self.fast_sids: FastSources | None = None

    def _source(self, kind: str, names: tuple[str, ...]) -> Any:
        src = self._sources.get((kind, names))
        if src is None:
            fmt = self.formats[kind]
            where = f"{self.file}:{self.line} ({self.name})"
            sev = self.error_severity if kind == _RAISE else self.severity
            try:
                src = self.registry.add_source(   # keyed by this tracer (kept alive by it)
                    key=("traced", self, kind, names), severity=sev, category=self.category,
                    function=self.name, file=self.file, line=self.line, format=fmt,
                    arg_tags="", field_names=names, positional=0,
                    template=check_template(fmt, 0, names, where))
            except TooManySources:
                src = self.registry.overflow_source(sev)
            with self._lock:
                if len(self._sources) < 256:
                    self._sources[(kind, names)] = src
                self._ready()
        return src

    def _ready(self) -> None:
        """Set ``fast_sids`` once the sources of a call without context are registered,
        with the span's fields or without."""
        def sid(kind: str, names: tuple[str, ...]) -> int:
            src = self._sources.get((kind, names))
            return -1 if src is None or self.registry.is_overflow(src) else src.id
        call, ret = sid(_CALL, self.shown), sid(_RETURN, self.result_names)
        span_call, span_ret = (sid(_CALL, self.span_names[0]), sid(_RETURN, self.span_names[1]))
        if min(call, ret) >= 0 or min(span_call, span_ret) >= 0:
            self.fast_sids = FastSources(call, ret, span_call, span_ret)

    def log(self, kind: str, fields: dict[str, Any]) -> None:
        sev = self.error_severity if kind == _RAISE else self.severity
        bt = self.registry.backtrace
        keep = sev < self.logger.threshold      # below the minimum: the backtrace's, if any
        if keep and (bt is None or sev < bt.least):
            return
        clock = time.time_ns()
        if context_state.in_use:
            fields = with_context(fields)
        names = tuple(fields)
        src = self._sources.get((kind, names)) or self._source(kind, names)
        values = tuple(fields.values())
        if self.registry.is_overflow(src):
            values, names = (self.formats[kind] + " " + repr(fields),), ()
        if bt is None and not keep:     # as a logger's fast path: into the thread's channel
            try:
                ch = self.local.c
            except AttributeError:
                ch = self.session.writers.new_writer().channel
            if not ch.push_values(src.id, clock, values):   # values to capture, or full
                ch.on_overflow(src.id, clock, src.template, values, names)
            return
        writer = self.session.writers.writer()
        if keep:
            writer.keep(src.id, clock, src.template, values, names)
            return
        if bt is not None and sev >= bt.trigger:
            writer.write_backtrace()
        writer.push_event(src.id, clock, src.template, values, names)

    def enter(self, args: tuple, kwargs: dict) -> tuple[int, Span | None]:
        """Log a call's start: its start time, and its span (None: not logged, or
        correlation off)."""
        bt = self.registry.backtrace
        least = self.logger.threshold
        if bt is not None:
            least = min(least, bt.least)
        span = None
        if self.severity >= least:
            fields = self.fields(args, kwargs)
            span = new_span() if self.spans else None
            if span is not None:
                fields.update(zip(IDS, span.ids.values))
                fields[PARENT] = span.parent
            self.log(_CALL, fields)
        return time.perf_counter_ns(), span

    def fields(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """The logged arguments of a call, by name: as ``inspect.Signature.bind`` with the
        defaults applied would give them (it does, where the call is not a plain one)."""
        values = self.bind_plain(args, kwargs) if self.simple else None
        if values is None:
            return self.bound(args, kwargs)
        return {n: values[i] for n, i in zip(self.shown, self.shown_at)}

    def bound(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """``fields`` of any call, by ``inspect.Signature.bind``."""
        try:
            bound = self.signature_now().bind(*args, **kwargs)
            bound.apply_defaults()
            fields = {n: bound.arguments[n] for n in self.shown}
        except TypeError:   # the call itself fails the same way, and is logged so
            return {n: "<not bound>" for n in self.shown}
        if self.var_keyword in fields and self.hidden_keys:
            fields[self.var_keyword] = {k: v for k, v in fields[self.var_keyword].items()
                                        if k not in self.hidden_keys}
        return fields

    def bind_plain(self, args: tuple, kwargs: dict) -> list | None:
        """Every parameter's value of a call to a function without ``*args`` or
        ``**kwargs``, in order; None where binding would fail (the slow path says how).
        ``_traced.c``'s bind is its C twin."""
        n = len(args)
        if n > self.positional:
            return None
        values = [*args, *self.defaults_now()[n:]]
        for k, v in kwargs.items():
            i = self.index.get(k, -1)
            if i < n or i < self.posonly:
                return None    # unknown, given by position too, or positional only
            values[i] = v
        return None if any(v is _REQUIRED for v in values) else values

    def defaults_now(self) -> Sequence:
        """Each parameter's default as a call takes it now, or ``_REQUIRED``: from the
        function's ``__defaults__`` (the last positional parameters', as Python aligns them)
        and ``__kwdefaults__`` as they are at the call, where it is a plain function
        (``live``); else those of its signature at decoration. ``_traced.c``'s default_of is
        its C twin."""
        f = self.live
        if f is None:
            return self.defaults
        pos, kw = f.__defaults__, f.__kwdefaults__
        seen_pos, defaults = self._seen
        if pos is not seen_pos:
            tail = pos[-self.positional:] if pos and self.positional else ()
            first = self.positional - len(tail)
            defaults = tuple(tail[i - first] if first <= i < self.positional else _REQUIRED
                             for i in range(len(self.defaults)))
            self._seen = (pos, defaults)
        if not self.kwonly:
            return defaults
        out = list(defaults)    # (a dict changed in place: read at each call)
        for i, n in self.kwonly:
            out[i] = kw.get(n, _REQUIRED) if kw else _REQUIRED
        return out

    def signature_now(self) -> inspect.Signature:
        """The function's signature with the defaults a call takes now (``defaults_now``)."""
        defaults = self.defaults_now()
        seen, sig = self._signature
        if any(a is not b for a, b in zip(seen, defaults)):
            sig = self.signature.replace(parameters=[
                p.replace(default=p.empty if d is _REQUIRED else d)
                for p, d in zip(self.signature.parameters.values(), defaults)])
            self._signature = (tuple(defaults), sig)
        return sig

    def plan(self) -> FastPlan:
        """What the C fast path reads of this tracer."""
        return FastPlan(self, self.logger, self.registry, self.local,
                        self.severity, tuple(self.index), self.defaults, _REQUIRED,
                        self.live, self.positional, self.posonly, self.shown_at, self.result,
                        self.spans)

    def returned(self, start: int, value: Any, span: Span | None = None) -> Any:
        """Log the return of ``value`` (the end of ``span``); ``value``, for the wrapper to
        return."""
        ms = (time.perf_counter_ns() - start) / 1e6
        fields: dict[str, Any] = ({"result": value, "duration_ms": ms} if self.result
                                  else {"duration_ms": ms})
        if span is not None:
            fields.update(zip(IDS, span.ids.values))
        self.log(_RETURN, fields)
        return value

    def raised(self, start: int, exc: BaseException, span: Span | None = None) -> None:
        """Log the exception a call raised (the end of ``span``, in error)."""
        fields: dict[str, Any] = {"exception": exc,
                                  "duration_ms": (time.perf_counter_ns() - start) / 1e6}
        if span is not None:
            fields.update(zip(IDS, span.ids.values))
        self.log(_RAISE, fields)


def _defaults_owner(fn: Callable[..., Any]) -> types.FunctionType | None:
    """The function whose ``__defaults__`` and ``__kwdefaults__`` a call of ``fn`` takes
    and ``inspect.signature(fn)`` shows: ``fn``, or the function it wraps
    (``functools.wraps``); None where the signature is not a plain function's (a method,
    a partial, a ``__signature__`` set: its defaults at decoration stand)."""
    target = inspect.unwrap(fn, stop=lambda f: (hasattr(f, "__signature__")
                                                or isinstance(f, types.MethodType)))
    if type(target) is not types.FunctionType or hasattr(target, "__signature__"):
        return None
    return target


def traced(fn: F | None = None, *, severity: Severity | int | str = Severity.DEBUG,
           error_severity: Severity | int | str = Severity.ERROR, category: str | None = None,
           exclude: Iterable[str] = (), result: bool = True,
           session: Session | None = None) -> Any:
    """Decorate a function (sync or async, or a generator) so that each call is logged.

    ``severity`` is that of the call and return events, ``error_severity`` that of an
    exception's; ``category`` defaults to the function's module. ``exclude`` names
    arguments never logged (passwords, tokens), or keys of its ``**kwargs``; a name a
    function without ``**kwargs`` does not take raises ValueError. ``result=False``
    leaves the return value out.
    """
    sev = to_severity(severity)
    err = to_severity(error_severity)
    if isinstance(exclude, str):
        raise TypeError("exclude takes a list of argument names, not a str")
    leave_out = frozenset(exclude)

    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@blog.traced decorates a function, not {type(f).__name__}")
        params = inspect.signature(f).parameters
        unknown = sorted(leave_out - set(params))
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise ValueError(f"@blog.traced(exclude=...): {getattr(f, '__qualname__', f)} "
                             f"takes no argument named {', '.join(unknown)}")
        s = session if session is not None else default_session()
        t = _Tracer(f, s, sev, err, category or getattr(f, "__module__", None) or "main",
                    leave_out, result)
        if inspect.isasyncgenfunction(f):
            return _async_generator(f, t)
        if inspect.iscoroutinefunction(f):
            return _coroutine(f, t)
        if inspect.isgeneratorfunction(f):
            return _generator(f, t)
        return _function(f, t)

    if fn is not None:
        return decorate(fn)
    return decorate


def _async_generator(f: Any, t: _Tracer) -> Any:
    """The wrapper of an async generator function: what ``yield from`` does for a
    generator, by hand (values sent and exceptions thrown in reach the inner one)."""
    @functools.wraps(f)
    async def agen(*args: Any, **kwargs: Any) -> Any:
        start, span = t.enter(args, kwargs)
        inner = f(*args, **kwargs)
        try:
            item = await inner.__anext__()
            while True:
                try:
                    sent = yield item
                except GeneratorExit:   # closed before its end (a loop left early)
                    await inner.aclose()
                    t.returned(start, None, span)
                    raise
                except BaseException as exc:
                    item = await inner.athrow(exc)
                else:
                    item = await (inner.asend(sent) if sent is not None
                                  else inner.__anext__())
        except StopAsyncIteration:
            t.returned(start, None, span)
        except GeneratorExit:
            raise
        except BaseException as exc:
            t.raised(start, exc, span)
            raise
    return agen


def _coroutine(f: Any, t: _Tracer) -> Any:
    """The wrapper of an async function."""
    @functools.wraps(f)
    async def coro(*args: Any, **kwargs: Any) -> Any:
        start, span = t.enter(args, kwargs)
        token = enter_span(span)    # the current span of what it logs, and of its tasks
        try:
            try:
                value = await f(*args, **kwargs)
            finally:
                leave_span(token)
        except BaseException as exc:
            t.raised(start, exc, span)
            raise
        return t.returned(start, value, span)
    return coro


def _generator(f: Any, t: _Tracer) -> Any:
    """The wrapper of a generator function: from the first item to the last, or to where
    the loop left it. (Its span is not the current one of what it logs: a generator runs
    in its caller's context, between its items too.)"""
    @functools.wraps(f)
    def gen(*args: Any, **kwargs: Any) -> Any:
        start, span = t.enter(args, kwargs)
        try:
            value = yield from f(*args, **kwargs)
        except GeneratorExit:       # closed before its end (a loop left early)
            t.returned(start, None, span)
            raise
        except BaseException as exc:
            t.raised(start, exc, span)
            raise
        return t.returned(start, value, span)
    return gen


def _function(f: Any, t: _Tracer) -> Any:
    """The wrapper of a plain function; with the C extension, the C ``TracedCall`` in
    front of it where the arguments bind plainly (``_Tracer.simple``)."""
    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        start, span = t.enter(args, kwargs)
        token = enter_span(span)    # the current span of what it logs
        try:
            try:
                value = f(*args, **kwargs)
            finally:
                leave_span(token)
        except BaseException as exc:
            # From the traced function on, without this frame: as from the C
            # wrapper, in the file and for the caller.
            exc.__traceback__ = exc.__traceback__ and exc.__traceback__.tb_next
            t.raised(start, exc, span)
            raise
        return t.returned(start, value, span)
    if not t.simple:
        return call
    # The C fast path in front, where built: arguments bound as bind_plain binds them, no
    # backtrace kept, no fields in context (but the span's own), the channel below its limit.
    wrapper = TracedCall(t.plan(), f, call)
    return wrapper if wrapper is call else functools.update_wrapper(wrapper, f)


def _python_alone(plan: FastPlan, f: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    """The pure-Python path's ``TracedCall``: the Python wrapper, with nothing in front."""
    return call


#: A plain function's wrapper in front of the Python one (which it calls for anything but
#: the common case): the C ``TracedCall`` (``_traced.c`` beside this module) where the C
#: fast path is built (and not chosen away), else the Python one alone.
TracedCall: Callable[[FastPlan, Any, Callable[..., Any]], Callable[..., Any]] = (
    _python_alone if speedups is None else speedups.TracedCall)


__all__ = ["traced"]
