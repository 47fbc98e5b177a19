"""Timed loops with the measured call written out, made from one template (as ``timeit`` does).

A loop that took the call as a function would add a call of its own to every measured
call, so each loop is compiled from the template with its statement in the loop's body.
It runs in the globals of the module that made it: the same lookups (``perf_ns``, the
module's constants) as a loop written out there.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

#: ``n`` calls; the wall time in ns.
_WALL = """\
def {name}(n, {arg}):
{before}    t0 = perf_ns()
    for _ in range(n):
{body}
    return perf_ns() - t0
"""

#: ``n`` calls; the wall time and the calling thread's CPU time in ns.
_WALL_AND_CPU = """\
def {name}(n, {arg}):
{before}    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
{body}
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0
"""


def timed_loop(scope: dict[str, Any], name: str, stmt: str, *, arg: str = "log",
               before: str = "", thread_cpu: bool = False) -> Callable[[int, Any], Any]:
    """``name(n, arg)``: run ``stmt`` ``n`` times and return the time it took.

    ``scope`` is the calling module's ``globals()`` (it must hold ``perf_ns``, and
    ``thread_ns`` with ``thread_cpu``); ``before`` runs once before the clock starts
    (``v = CONSTANT``, to log a value bound to a local); ``thread_cpu`` returns
    ``(wall ns, thread CPU ns)`` rather than the wall ns alone.
    """
    template = _WALL_AND_CPU if thread_cpu else _WALL
    source = template.format(name=name, arg=arg,
                             before=textwrap.indent(before + "\n", "    ") if before else "",
                             body=textwrap.indent(textwrap.dedent(stmt).strip(), " " * 8))
    made: dict[str, Any] = {}
    exec(compile(source, f"<timed loop {name}>", "exec"), scope, made)
    loop: Callable[[int, Any], Any] = made[name]
    loop.__module__ = scope["__name__"]
    return loop
