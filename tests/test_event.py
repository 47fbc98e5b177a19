"""``@blog.event``: registered at decoration time, logs on every call."""

from __future__ import annotations

import pytest

import blog


def test_event_function_logs_and_is_registered_at_decoration(logged):
    @blog.event("order {} filled at {}", severity="warning", category="orders",
                session=logged.session)
    def order_filled(order_id: int, price: float): ...

    src = order_filled.source
    assert (src.format, src.category, src.arg_tags) == ("order {} filled at {}", "orders",
                                                        "int,float")
    assert src.line == order_filled.__wrapped__.__code__.co_firstlineno
    order_filled(43, 99.5)
    order_filled(price=1.5, order_id=44)
    evs = logged.read()
    assert [e.message for e in evs] == ["order 43 filled at 99.5", "order 44 filled at 1.5"]
    assert evs[0].severity == blog.Severity.WARNING and evs[0].category == "orders"
    assert evs[0].function.endswith("order_filled")


def test_leftover_parameters_are_fields_and_defaults_apply(logged):
    @blog.event("user {} logged in from {ip}", session=logged.session)
    def login(user: str, ip: str = "127.0.0.1", attempts: int = 1): ...

    login("ann")
    login("bob", "10.0.0.1", attempts=3)
    evs = logged.read()
    assert evs[0].message == "user ann logged in from 127.0.0.1"
    assert evs[1].fields == {"ip": "10.0.0.1", "attempts": 3}


def test_a_body_runs_and_its_result_is_returned(logged):
    @blog.event("adding {} and {}", session=logged.session)
    def add(a, b):
        return a + b

    assert add(2, 3) == 5
    assert logged.read()[0].message == "adding 2 and 3"


def test_arguments_are_captured_at_call_time(logged):
    @blog.event("items {}", session=logged.session)
    def items(xs: list): ...

    xs = [1]
    items(xs)
    xs.append(2)
    assert logged.read()[0].args == ([1],)


def test_bad_formats_fail_at_decoration_time(logged):
    with pytest.raises(blog.CallSiteError, match="3 {} placeholder"):
        @blog.event("{} {} {}", session=logged.session)
        def two(a, b): ...
    with pytest.raises(blog.CallSiteError, match="names field"):
        @blog.event("{} {nope}", session=logged.session)
        def one(a): ...
    with pytest.raises(blog.CallSiteError, match=r"\*args"):
        @blog.event("{}", session=logged.session)
        def var(*args): ...
    with pytest.raises(blog.CallSiteError, match="lookup"):
        @blog.event("{a.b}", session=logged.session)
        def attr(a): ...


def test_wrong_call_raises_like_a_plain_function(logged):
    @blog.event("{}", session=logged.session)
    def f(a): ...

    with pytest.raises(TypeError):
        f(1, 2, 3)


def test_disabled_event_does_not_log_but_body_runs(logged):
    calls = []

    @blog.event("dbg {}", severity="debug", session=logged.session)
    def dbg(x):
        calls.append(x)

    logged.session.get_logger("main").set_min_severity("info")
    dbg(1)
    assert calls == [1] and logged.read() == []


def test_event_methods_bind_like_functions(logged):
    class Book:
        @blog.event("book {} got {}", session=logged.session)
        def got(self, qty: int): ...

    b = Book()
    b.got(5)
    Book.got(b, 6)
    evs = logged.read()
    assert [e.args[1] for e in evs] == [5, 6]
    assert Book.got.__name__ == "got" and Book.got.__wrapped__ is not None


def test_wraps_keeps_name_and_doc(logged):
    @blog.event("x {}", session=logged.session)
    def documented(x):
        """Docs."""

    assert documented.__name__ == "documented" and documented.__doc__ == "Docs."


def test_a_body_returning_a_constant_is_run(logged):
    @blog.event("answer {}", session=logged.session)
    def answer(x):
        return 42

    @blog.event("ok {}", session=logged.session)
    def ok(x):
        return "ok"

    assert answer(1) == 42 and ok(2) == "ok"
    assert len(logged.read()) == 2
