"""@blog.traced: calls, arguments, results, exceptions and durations, in the file."""

from __future__ import annotations

import asyncio

import pytest

import blog
from helpers import without_span


def _events(logged):
    return [(ev.severity.name, ev.message) for ev in logged.read()]


def test_a_sync_call_logs_its_arguments_and_result(logged):
    @blog.traced(session=logged.session)
    def add(a: int, b: int = 2) -> int:
        return a + b

    assert add(1) == 3
    events = logged.read()
    assert [(ev.severity.name, ev.message) for ev in events[:1]] == [
        ("DEBUG", "call test_a_sync_call_logs_its_arguments_and_result.<locals>.add(a=1, b=2)")]
    assert without_span(events[0].fields) == {"a": 1, "b": 2}
    assert events[1].fields["result"] == 3 and events[1].fields["duration_ms"] >= 0
    assert events[1].message.startswith("test_a_sync_call_logs_its_arguments_and_result"
                                        ".<locals>.add returned 3 in ")
    assert (events[0].source.file, events[0].source.line) == (
        __file__, add.__wrapped__.__code__.co_firstlineno)


def test_a_traced_async_function_raising(logged):
    # Proves: the exception reaches the caller unchanged, and the file has the call, the
    # exception with its traceback, at the error severity, and the duration.
    @blog.traced(session=logged.session, severity="info", category="http")
    async def fetch(url: str) -> bytes:
        await asyncio.sleep(0.01)
        raise ConnectionError(f"refused: {url}")

    with pytest.raises(ConnectionError, match="refused: /a"):
        asyncio.run(fetch("/a"))
    call, raised = logged.read()
    assert (call.severity.name, call.category, without_span(call.fields)) == (
        "INFO", "http", {"url": "/a"})
    assert raised.severity.name == "ERROR"
    assert "fetch raised ConnectionError('refused: /a') in " in raised.message
    exc = raised.fields["exception"]
    assert exc.type == "ConnectionError" and "raise ConnectionError" in exc.traceback
    assert raised.fields["duration_ms"] >= 10


def test_excluded_arguments_never_reach_the_file(logged):
    @blog.traced(session=logged.session, exclude=["password", "token"])
    def login(user: str, password: str, token: str = "t0k3n") -> bool:
        return True

    login("bob", "hunter2")
    logged.consume()
    assert b"hunter2" not in logged.out.getvalue() and b"t0k3n" not in logged.out.getvalue()
    assert without_span(logged.read()[0].fields) == {"user": "bob"}


def test_generators_are_traced_from_first_item_to_last(logged):
    @blog.traced(session=logged.session)
    def count(n):
        yield from range(n)
        return "done"

    @blog.traced(session=logged.session)
    async def acount(n):
        for i in range(n):
            yield i

    async def take():
        return [i async for i in acount(2)]

    assert list(count(3)) == [0, 1, 2]
    assert asyncio.run(take()) == [0, 1]
    for _ in count(10):
        break                      # left early: logged as returned, not as an error
    msgs = [m for _, m in _events(logged)]
    assert [m.split(" in ")[0].rsplit(".", 1)[-1] for m in msgs] == [
        "count(n=3)", "count returned 'done'", "acount(n=2)", "acount returned None",
        "count(n=10)", "count returned None"]


def test_traced_events_carry_context_fields_and_follow_the_minimum(logged):
    @blog.traced(session=logged.session, result=False)
    def step(i):
        return i

    with blog.context(job="j1"):
        step(1)
    logged.session.set_min_severity("info")
    step(2)                         # debug: below the minimum, nothing logged
    events = logged.read()
    assert [without_span(ev.fields) for ev in events] == [{"i": 1, "job": "j1"},
                                            {"duration_ms": events[1].fields["duration_ms"],
                                             "job": "j1"}]


def test_bad_options_raise_clear_errors():
    with pytest.raises(ValueError, match="takes no argument named pasword"):
        @blog.traced(exclude=["pasword"])
        def login(user, password): ...
    with pytest.raises(TypeError, match="list of argument names"):
        blog.traced(exclude="password")
    with pytest.raises(ValueError):
        blog.traced(severity="loud")


def test_two_wrappers_of_one_function_keep_their_own_settings(logged):
    # A review found: the source was keyed by the function, so the second wrapper's
    # events took the first's severity and category.
    def work(x):
        return x

    quiet = blog.traced(work, severity="debug", category="quiet", session=logged.session)
    loud = blog.traced(work, severity="warning", category="audit", session=logged.session)
    quiet(1)
    loud(2)
    got = [(ev.category, ev.severity.name) for ev in logged.read()]
    assert got == [("quiet", "DEBUG")] * 2 + [("audit", "WARNING")] * 2


def test_an_unhashable_callable_and_kwargs_secrets(logged):
    import dataclasses

    @dataclasses.dataclass
    class Adder:
        n: int

        def __call__(self, x):
            return x + self.n

    assert blog.traced(Adder(1), session=logged.session)(2) == 3

    @blog.traced(session=logged.session, exclude=["password"])
    def connect(host, **opts):
        return host

    connect("db", user="u", password="s3cret")
    events = logged.read()
    assert without_span(events[2].fields) == {"host": "db", "opts": {"user": "u"}}
    assert not any("s3cret" in repr(ev.args) + repr(ev.fields) for ev in events)


def test_a_traced_async_generator_passes_sent_values_and_thrown_exceptions(logged):
    @blog.traced(session=logged.session)
    async def echo():
        got = None
        while True:
            try:
                got = yield got
            except ValueError:
                got = "handled"

    async def drive():
        g = echo()
        assert await g.asend(None) is None
        assert await g.asend("hello") == "hello"
        assert await g.athrow(ValueError("x")) == "handled"
        await g.aclose()

    asyncio.run(drive())
    msgs = [ev.message.split(" in ")[0].rsplit(".", 1)[-1] for ev in logged.read()]
    assert msgs == ["echo()", "echo returned None"]


def test_the_call_event_above_the_minimum_with_a_backtrace_floor_above_it(make_logged):
    logged = make_logged(min_severity="debug")
    logged.session.use_backtrace(5, least="info")

    @blog.traced(session=logged.session)
    def f(x):
        return 2 * x

    f(21)
    assert [ev.message.split(" in ")[0].rsplit(".", 1)[-1] for ev in logged.read()] == [
        "f(x=21)", "f returned 42"]
