"""@blog.traced's fast path (plain calls: no inspect.Signature.bind, and on the C path no
Python call of blog's) writes the events the reference path writes."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import re
import weakref

import pytest

import blog
from blog import accel
from helpers import count_tracer_calls, span_shape, traced_by_reference, without_span


def test_a_plain_traced_call_takes_the_fast_path(logged, monkeypatch):
    python = count_tracer_calls(monkeypatch, "enter")
    binds = count_tracer_calls(monkeypatch, "bound")

    @blog.traced(session=logged.session)
    def add(a, b=2, *, c=0):
        return a + b + c

    for i in range(5):
        assert add(i) == i + 2
        assert add(i, c=1) == i + 3
        assert add(b=1, a=i) == i + 1
    assert binds == []
    # C: only the first call takes the Python path (it registers the call's sources).
    assert len(python) == (15 if accel.speedups is None else 1)
    assert len(logged.read()) == 30


def doubled(x):
    return 2 * x


def test_a_traced_function_pickles_by_name_and_has_weak_references(logged, monkeypatch):
    # As a plain function does (multiprocessing sends functions so): the C wrapper too.
    traced = blog.traced(doubled, session=logged.session)
    monkeypatch.setitem(globals(), "doubled", traced)     # as the decorator would leave it
    assert pickle.loads(pickle.dumps(traced)) is traced
    assert weakref.ref(traced)() is traced           # and is weakly referenced as it is


@dataclasses.dataclass
class Point:
    x: int
    y: float


def simple(a, b):
    return a + b


def defaults(a, b=2, *, c=None):
    return a


def var_args(a, *rest, **opts):
    return len(rest)


def login(user, password, token="t0k3n"):
    return True


def raising(x):
    if isinstance(x, str):
        raise ValueError(f"bad {x}")
    return x


def positional_only(a, /, b):
    return a


#: A call of each function that returns (it registers the sources of the fast path).
WARM = {simple: (1, 2), defaults: (1,), var_args: (1,), login: ("u", "p"), raising: (1,),
        positional_only: (1, 2)}
#: (case, function, decorator options, arguments, keyword arguments, taken by C)
CASES = [
    ("simple call", simple, {}, (1, 2), {}, True),
    ("defaults used", defaults, {}, (1,), {}, True),
    ("keywords", defaults, {}, (1,), {"c": "x", "b": 3}, True),
    ("*args and **kwargs", var_args, {"exclude": ["secret"]}, (1, 2, 3), {"k": 4, "secret": 5},
     False),
    ("excluded argument", login, {"exclude": ["password"]}, ("bob",), {"password": "pw"}, True),
    ("exception", raising, {"severity": "info"}, ("x",), {}, True),
    ("result=False", simple, {"result": False}, (1.5, 2.25), {}, True),
    ("rich values", simple, {}, ([1, 2], ["a"]), {}, True),
    ("a dataclass: its text kept, by Python", defaults, {}, (Point(1, 2.0),), {}, False),
    ("not bound: a missing argument", simple, {}, (1,), {}, False),
    ("not bound: positional only by keyword", positional_only, {}, (), {"a": 1, "b": 2}, False),
]


def _shown(ev) -> tuple:
    """What bread reads of a traced event, its duration left out, its span's ids by shape."""
    fields = span_shape(ev.fields)
    fields.pop("duration_ms", None)
    exc = fields.get("exception")
    if exc is not None:
        fields["exception"] = (exc.type, exc.message, exc.frames, exc.traceback)
    src = ev.source
    return (ev.severity, ev.category, src.function, src.file, src.line, src.format,
            src.field_names, re.sub(r" in [0-9.]+ ms$", "", ev.message), fields)


@pytest.mark.parametrize(("fn", "options", "args", "kwargs", "in_c"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_fast_path_writes_what_the_reference_path_writes(logged, monkeypatch, fn, options,
                                                              args, kwargs, in_c):
    fast = blog.traced(fn, session=logged.session, **options)
    reference = traced_by_reference(fn, session=logged.session, **options)
    fast(*WARM[fn])
    python = count_tracer_calls(monkeypatch, "enter")
    outcomes = []
    for f in (reference, fast):
        try:
            outcomes.append(("returned", f(*args, **kwargs)))
        except (TypeError, ValueError) as exc:
            outcomes.append(("raised", repr(exc)))
    assert outcomes[0] == outcomes[1]
    assert len(python) == (1 if in_c and accel.speedups is not None else 2)
    events = [_shown(ev) for ev in logged.read()]
    assert len(events) == 6      # each call: its call event, then its return or exception
    assert events[2:4] == events[4:6]


def test_the_callers_traceback_has_no_frame_of_the_wrapper(logged):
    # Both wrappers: the C one has no Python frame, the Python one leaves its own out.
    def fails(x):
        if x:
            raise ValueError(x)

    for f in (blog.traced(fails, session=logged.session),
              traced_by_reference(fails, session=logged.session)):
        f(0)                                # the C path's sources registered
        with pytest.raises(ValueError) as info:
            f(1)
        assert [e.name for e in info.traceback] == [
            "test_the_callers_traceback_has_no_frame_of_the_wrapper", "fails"]


def test_in_a_context_or_with_a_backtrace_the_python_path_decides(make_logged):
    logged = make_logged(min_severity="info")
    s = logged.session

    @blog.traced(session=s, severity="info")
    def f(x):
        return x

    @blog.traced(session=s, severity="debug")
    def g(x):
        return x

    f(1)                            # its sources registered: the fast path from now on
    g(1)                            # below the minimum: nothing
    with blog.context(job="j1"):
        f(2)
    s.use_backtrace(5, least="debug")
    g(3)                            # kept in the backtrace, written before the error
    s.get_logger("main").error("boom")
    got = [(ev.message.split(" in ")[0].rsplit(".", 1)[-1], ev.fields.get("job"),
            ev.backtrace) for ev in logged.read()]
    assert got == [("f(x=1)", None, False), ("f returned 1", None, False),
                   ("f(x=2)", "j1", False), ("f returned 2", "j1", False),
                   ("g(x=3)", None, True), ("g returned 3", None, True),
                   ("boom", None, False)]


def test_below_the_minimum_an_exception_is_still_logged_at_its_own_severity(make_logged):
    logged = make_logged(min_severity="info")

    @blog.traced(session=logged.session)      # calls at debug: not logged
    def f(x):
        if x:
            raise ValueError(x)
        return x

    f(0)
    with pytest.raises(ValueError):
        f(1)
    assert [(ev.severity.name, ev.message.split(" in ")[0].rsplit(".", 1)[-1])
            for ev in logged.read()] == [("ERROR", "f raised ValueError(1)")]


def _defaults_changed(wrap) -> list[tuple]:
    """Calls of a fresh function wrapped by ``wrap`` while its ``__defaults__`` and
    ``__kwdefaults__`` change: (what the call took, as the function returned it)."""
    def f(a, b=1, *, c=2):
        return (a, b, c)

    w = wrap(f)
    took = [w(0), w(0)]               # (the C path's sources registered by the first)
    f.__defaults__, f.__kwdefaults__ = (10,), {"c": 20}
    took.append(w(0))
    f.__kwdefaults__["c"] = 30        # changed in place
    took.append(w(0))
    f.__defaults__ = (5, 6)           # Python takes a=5 too
    took.append(w())
    f.__defaults__ = (7, 8, 9)        # more than its positional parameters: the last two
    took.append(w())
    f.__kwdefaults__ = None
    with pytest.raises(TypeError):    # c is required now: the call fails, logged as not bound
        w(0)
    return took


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_a_call_logs_the_defaults_it_took_after_they_changed(logged, path):
    # Proves: a traced call logs the defaults the call took, the function's __defaults__
    # and __kwdefaults__ as they are at the call (replaced or changed in place), not those
    # of its decoration: on the fast path (C where built, else bind_plain) and by
    # inspect.Signature.bind, as for a function that functools.wraps wraps.
    wrap = blog.traced if path == "fast" else traced_by_reference
    took = _defaults_changed(lambda f: wrap(f, session=logged.session))
    assert took == [(0, 1, 2), (0, 1, 2), (0, 10, 20), (0, 10, 30), (5, 6, 30), (8, 9, 30)]
    calls = [without_span(ev.fields) for ev in logged.read() if "duration_ms" not in ev.fields]
    assert calls == [dict(zip("abc", t)) for t in took] + [
        {"a": "<not bound>", "b": "<not bound>", "c": "<not bound>"}]


def test_a_wrapped_function_s_defaults_are_those_it_takes_at_the_call(logged):
    def inner(a, b=1):
        return (a, b)

    @blog.traced(session=logged.session)
    @functools.wraps(inner)
    def outer(*args, **kwargs):
        return inner(*args, **kwargs)

    outer(0)
    inner.__defaults__ = (2,)
    assert outer(0) == (0, 2)
    assert [without_span(ev.fields) for ev in logged.read()
            if "duration_ms" not in ev.fields] == [{"a": 0, "b": 1}, {"a": 0, "b": 2}]
