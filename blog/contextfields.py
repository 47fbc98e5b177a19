"""Context fields: ``with blog.context(request_id=rid):`` and ``blog.bind(user=u)``.

Fields in context are added as keyword fields to every event logged in that
context, by any logger or ``@blog.event`` function of any session. They live in
a ``contextvars.ContextVar``, so each thread and each asyncio task sees its own
(a task starts with a copy of its creator's context, a thread with none). A
keyword field of the call wins over a context field of the same name.

An application that never uses context pays nothing for it: the level methods
look at the context variable only once ``context`` or ``bind`` was first called
(``in_use``); the C call paths (``_contextfields.c`` beside this module) are handed the
context variable then (``use_context``, chosen at the end of this module).
"""

from __future__ import annotations

import functools
from contextvars import ContextVar

from blogformat.typinglite import TYPE_CHECKING, NamedTuple

from . import correlation
from .accel import speedups

if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["bind", "clear", "context", "current", "unbind"]


class ContextFields(NamedTuple):
    """The fields in context, in order. The C call paths read it by position: _logger.c's
    CFIELDS_* indices name these fields in this order (tests/test_c_sources.py checks)."""
    names: tuple[str, ...]
    values: tuple


#: The fields in context, or None for none.
FIELDS: ContextVar[ContextFields | None] = ContextVar("blog.context", default=None)
#: What FIELDS held when each ``with blog.context(...)`` block now open in this context
#: began, innermost last: its end puts it back (whichever task or thread shares the
#: ``context`` object, and whatever ``bind`` did inside).
_OUTER: ContextVar[tuple] = ContextVar("blog.context.outer", default=())


class _State:
    """Whether context was ever used in this process, or correlation is on: the Python call
    paths look at ``fields_now`` only then."""

    in_use = correlation.state.mode != correlation.OFF
    started = False     # blog.context or blog.bind was used: the C paths read FIELDS


state = _State()


def _start() -> None:
    if not state.started:
        state.started = state.in_use = True
        use_context(FIELDS, merged_with)


def _ids_in_use() -> None:
    """Correlation was turned on: the span's ids may be in context from now on."""
    state.in_use = True


correlation.on_use.append(_ids_in_use)


def _merged(fields: dict[str, Any]) -> ContextFields:
    for name in fields:
        if not name.isidentifier():
            raise ValueError(f"context field name {name!r} is not an identifier")
    now = current()
    now.update(fields)
    return ContextFields(tuple(now), tuple(now.values()))


def current() -> dict[str, Any]:
    """The fields in context now, as a new dict."""
    c = FIELDS.get()
    return dict(zip(*c)) if c is not None else {}


def fields_now() -> ContextFields | correlation.Ids | None:
    """The fields in context now: ``blog.context``'s, then the ids of the span the call is
    in (``blog.correlation``) that they do not name; None for none."""
    c = FIELDS.get()
    ids = correlation.ids_now()
    if ids is None:
        return c
    return ids if c is None else merged_with(c, ids)


def merged_with(c: ContextFields, ids: correlation.Ids) -> ContextFields:
    """Context fields ``c`` followed by the span's ``ids`` that they do not name."""
    names, values = c.names, c.values
    for name, value in zip(ids.names, ids.values):
        if name not in names:
            names, values = names + (name,), values + (value,)
    return ContextFields(names, values)


def with_context(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` (a call's keyword fields) followed by the context's fields it does not
    name (``fields_now``): what an event logged now holds."""
    c = fields_now() if state.in_use else None
    if c is None:
        return fields
    out = dict(fields)
    for name, value in zip(*c):
        if name not in out:
            out[name] = value
    return out


class context:
    """``with blog.context(request_id=rid, user=u):`` adds these fields to every event
    logged inside the block (and in the tasks it starts); the outer fields come back at
    its end. Also a decorator of functions and coroutine functions: each call runs in
    that context. One object may be used by many tasks and threads at once."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __enter__(self) -> dict[str, Any]:
        _start()
        merged = _merged(self.fields)
        _OUTER.set(_OUTER.get() + (FIELDS.get(),))
        FIELDS.set(merged if merged.names else None)
        return dict(zip(*merged))

    def __exit__(self, *exc: Any) -> None:
        outer = _OUTER.get()
        if outer:
            FIELDS.set(outer[-1])
            _OUTER.set(outer[:-1])

    def __call__(self, fn: Any) -> Any:
        import inspect   # (here: a decorator's first use, not every import blog, pays it)
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"blog.context cannot decorate the generator {fn.__qualname__}: "
                            "its items run in its caller's context; use a with block "
                            "around each step instead")
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with context(**self.fields):
                    return await fn(*args, **kwargs)
            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with context(**self.fields):
                return fn(*args, **kwargs)
        return run


def bind(**fields: Any) -> None:
    """Add fields to the current context until ``unbind``, ``clear`` or the end of the
    context (the asyncio task, or a ``with blog.context()`` block) they were bound in."""
    _start()
    merged = _merged(fields)
    FIELDS.set(merged if merged.names else None)


def unbind(*names: str) -> None:
    """Remove fields from the current context (names not in it are ignored)."""
    now = current()
    for n in names:
        now.pop(n, None)
    FIELDS.set(ContextFields(tuple(now), tuple(now.values())) if now else None)


def clear() -> None:
    """Remove every field from the current context."""
    FIELDS.set(None)


def _python_reads_it(var: ContextVar[ContextFields | None],
                     merge: Callable[[ContextFields, correlation.Ids], ContextFields]) -> None:
    """The pure-Python path's ``use_context``: the level methods read ``FIELDS`` themselves."""


#: Hands the call paths the context variable (and how the span's ids join its fields), on
#: first use: to C where the C fast path is built (and not chosen away).
use_context: Callable[[ContextVar[ContextFields | None],
                       Callable[[ContextFields, correlation.Ids], ContextFields]], None] = (
    _python_reads_it if speedups is None else speedups.use_context)
