"""``@blog.event``: a function whose call logs an event registered at decoration time."""

from __future__ import annotations

import dis
import functools
import inspect
import time
from typing import Any, Callable, TypeVar

from blogformat.placeholders import FormatError, parse
from blogformat.severity import Severity, to_severity
from blogformat.values import type_name

from ..accel import speedups
from ..contextfields import fields_now
from ..contextfields import state as context_state
from ..default import default_session
from ..pipeline.session import Session
from ..pipeline.source import CallSiteError, TooManySources, check_template

F = TypeVar("F", bound=Callable[..., Any])

_GENERATORS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


_NOTHING = {"RESUME", "NOP", "CACHE"}


def _has_empty_body(fn: Callable[..., Any]) -> bool:
    """True if ``fn``'s body does nothing (``...``, ``pass`` or a docstring): then it is not called.

    Such a body returns the constant None and does nothing else; ``return 42``
    has the same shape of bytecode, so the constant is checked too.
    """
    code = getattr(fn, "__code__", None)
    if code is None or code.co_flags & _GENERATORS:
        return False
    for ins in dis.get_instructions(code):
        if ins.opname in _NOTHING or ins.opname == "RETURN_VALUE":
            continue
        if ins.opname in ("LOAD_CONST", "RETURN_CONST") and ins.argval is None:
            continue
        return False
    return True


def _tag(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "object"
    if isinstance(annotation, type):
        return type_name(annotation)
    return str(annotation)


def event(fmt: str, *, severity: Severity | int | str = Severity.INFO, category: str = "main",
          session: Session | None = None) -> Callable[[F], F]:
    """Decorate a function so that calling it logs an event.

    The format's ``{}`` placeholders take the function's parameters in order;
    the parameters left over are keyword fields, which ``{name}`` may show.
    The EventSource (file and line of the ``def``, argument tags from the
    annotations) is registered when the decorator runs, and a format that
    does not fit the parameters raises ``CallSiteError`` then. A body other
    than ``...``/``pass``/docstring runs after the event is logged, and its
    result is returned.
    """
    sev = to_severity(severity)

    def decorate(fn: F) -> F:
        site = _EventSite(session if session is not None else default_session(), fn, fmt,
                          sev, category)
        wrapper = _python_wrapper(fn, site)
        # The C fast path in front, where built: plain arguments, enabled, channel below
        # its limit, fields in context whose source the Python wrapper registered.
        fast = EventCall(site.logger, sev, site.source.id, len(site.names),
                         site.session.writers.local, fn if site.run_body else None, wrapper,
                         site.context_sids)
        if fast is not wrapper:
            functools.update_wrapper(fast, fn)
            fast.source = site.source  # type: ignore[attr-defined]
        return fast  # type: ignore[return-value]

    return decorate


#: Sets of context field names whose sources an event function keeps for the C path.
MAX_CONTEXT_SIDS = 256


class _EventSite:
    """An event function as a call site: its parameters checked against the format, its
    EventSource registered, and one more per set of field names in context."""

    def __init__(self, session: Session, fn: Callable[..., Any], fmt: str, severity: int,
                 category: str) -> None:
        self.session = session
        self.logger = session.get_logger(category)
        self.severity = severity
        code = fn.__code__
        where = f"{code.co_filename}:{code.co_firstlineno} ({code.co_qualname})"
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise CallSiteError(f"{where}: an event function cannot take *{p.name}")
        self.names = names = tuple(p.name for p in params)
        try:
            k = parse(fmt).positional
        except FormatError as exc:
            raise CallSiteError(f"{where}: {exc}") from None
        if k > len(names):
            raise CallSiteError(f"{where}: format {fmt!r} has {k} {{}} placeholder(s) but "
                                f"{fn.__name__} takes {len(names)} parameter(s)")
        self.field_names = names[k:]
        self.template = check_template(fmt, k, self.field_names, where)
        self._add_source = functools.partial(
            session.registry.add_source, severity=severity, category=category,
            function=code.co_qualname, file=code.co_filename, line=code.co_firstlineno,
            format=fmt, arg_tags=",".join(_tag(p.annotation) for p in params), positional=k,
            template=self.template, arg_names=names[:k])
        self.source = self._add_source(key=None, field_names=self.field_names)
        self.run_body = not _has_empty_body(fn)
        #: The source of a call per set of context field names none of its parameters
        #: takes (read by the C EventCall too): its values are the call's, then the
        #: context's.
        self.context_sids: dict[tuple[str, ...], int] = {}

    def in_context(self, values: tuple, names: tuple[str, ...],
                   context_values: tuple) -> tuple[int, tuple, tuple]:
        """(source id, values, field names) of a call with fields ``names`` in context: a
        source of its own per set of context field names (a parameter wins over a context
        field of its name)."""
        sid = self.context_sids.get(names)
        if sid is not None:
            return sid, values + context_values, self.field_names + names
        fields = {n: v for n, v in zip(names, context_values) if n not in self.names}
        if not fields:
            return self.source.id, values, self.field_names
        names_now = self.field_names + tuple(fields)
        try:
            src = self._add_source(key=("event", self.source.id, names_now),
                                   field_names=names_now)
        except TooManySources:      # the stream is full of sources: without context
            return self.source.id, values, self.field_names
        if len(fields) == len(names) and len(self.context_sids) < MAX_CONTEXT_SIDS:
            self.context_sids[names] = src.id
        return src.id, values + tuple(fields.values()), names_now


def _python_wrapper(fn: Callable[..., Any], site: _EventSite) -> Callable[..., Any]:
    """The Python wrapper of an event function (the reference, and what the C one calls
    for anything but the common call): the event logged if its level is enabled, then the
    body run, if it does anything."""
    lg, sev = site.logger, site.severity
    sig, names, nparams = site.signature, site.names, len(site.names)
    sid, tpl, field_names = site.source.id, site.template, site.field_names
    in_context, run_body = site.in_context, site.run_body
    writer_of = site.session.writers.writer
    ctx = context_state
    clock_ns = time.time_ns

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if lg.threshold <= sev:
            if kwargs or len(args) != nparams:
                bound = sig.bind(*args, **kwargs)   # TypeError as for a plain call
                bound.apply_defaults()
                values = tuple(bound.arguments[n] for n in names)
            else:
                values = args
            c = fields_now() if ctx.in_use else None
            if c is not None:
                src_id, values, names_now = in_context(values, c.names, c.values)
                writer_of().push_event(src_id, clock_ns(), tpl, values, names_now)
            else:
                writer_of().push_event(sid, clock_ns(), tpl, values, field_names)
        if run_body:
            return fn(*args, **kwargs)
        return None

    wrapper.source = site.source  # type: ignore[attr-defined]
    return wrapper


def _python_alone(logger: Any, severity: int, source_id: int, nparams: int, local: Any,
                  body: Callable[..., Any] | None, wrapper: Callable[..., Any],
                  context_sids: dict[tuple[str, ...], int]) -> Callable[..., Any]:
    """The pure-Python path's ``EventCall``: the Python wrapper, with nothing in front."""
    return wrapper


#: An event function's wrapper in front of the Python one (which it calls for anything but
#: the common case): the C ``EventCall`` (``_event.c`` beside this module) where the C fast
#: path is built (and not chosen away), else the Python one alone.
EventCall: Callable[..., Callable[..., Any]] = (
    _python_alone if speedups is None else speedups.EventCall)
