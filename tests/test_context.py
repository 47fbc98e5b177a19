"""Context fields (``blog.context``, ``blog.bind``): on every event logged in the context,
by every call path, per thread and per asyncio task."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import subprocess
import threading

import pytest

import blog
import blog.stdlib

from helpers import c_path_handbacks, python_child, run_python


@pytest.fixture(autouse=True)
def empty_context():
    # Each test starts and ends with no fields in context (bind sets them in the test's
    # own context, which pytest shares between tests run in one thread).
    blog.contextfields.clear()
    yield
    blog.contextfields.clear()


def test_every_event_in_a_context_holds_its_fields(logged):
    log = logged.log

    @blog.event("handled {}", session=logged.session)
    def handled(path: str): ...

    lg = logging.Logger("lib")
    lg.addHandler(blog.stdlib.BlogHandler(session=logged.session))
    log.info("before {}", 0)
    with blog.context(request_id="r1", user="bob") as fields:
        assert fields == {"request_id": "r1", "user": "bob"}
        for i in range(3):             # the same site again: each event has the fields
            log.info("in {}", i)
        log.info("call wins {}", 9, user="alice")
        handled("/a")
        lg.warning("lib %s", "x")
        with blog.context(user="carol", span=2):
            log.info("nested {}", 1)
        log.info("back {}", 2)
    log.info("after {}", 3)
    handled("/b")
    got = [(ev.message, ev.fields) for ev in logged.read()]
    r1 = {"request_id": "r1", "user": "bob"}
    assert got == [
        ("before 0", {}),
        ("in 0", r1), ("in 1", r1), ("in 2", r1),
        ("call wins 9", {"user": "alice", "request_id": "r1"}),
        ("handled /a", r1),
        ("lib x", r1),
        ("nested 1", {"request_id": "r1", "user": "carol", "span": 2}),
        ("back 2", r1),
        ("after 3", {}),
        ("handled /b", {}),
    ]


def test_a_format_may_show_a_context_field(logged):
    with blog.context(request_id="r7"):
        logged.log.info("request {request_id}: {} bytes", 512)
    (ev,) = logged.read()
    assert ev.message == "request r7: 512 bytes"


def test_bind_and_unbind(logged):
    blog.bind(user="bob", tenant=3)
    logged.log.info("a")
    blog.unbind("tenant", "absent")
    logged.log.info("b")
    with blog.context(request_id="r"):
        blog.bind(step=1)              # bound inside a block: gone at its end
        logged.log.info("c")
    logged.log.info("d")
    blog.contextfields.clear()
    logged.log.info("e")
    assert [ev.fields for ev in logged.read()] == [
        {"user": "bob", "tenant": 3}, {"user": "bob"},
        {"user": "bob", "request_id": "r", "step": 1}, {"user": "bob"}, {}]


def test_asyncio_tasks_each_keep_their_own_context(logged):
    # Proves: contexts of concurrent tasks never mix, although the tasks interleave.
    log = logged.log

    async def handle(rid: str) -> None:
        with blog.context(request_id=rid):
            for step in range(3):
                await asyncio.sleep(0)
                log.info("step {}", step)

    async def main() -> None:
        await asyncio.gather(*(handle(f"r{i}") for i in range(5)))

    asyncio.run(main())
    events = logged.read()
    assert len(events) == 15
    by_request: dict = {}
    for ev in events:
        by_request.setdefault(ev.fields["request_id"], []).append(ev.args[0])
    assert by_request == {f"r{i}": [0, 1, 2] for i in range(5)}
    order = [ev.fields["request_id"] for ev in events]
    assert order != sorted(order)      # they did interleave


def test_threads_start_without_the_context_unless_given_it(logged):
    log = logged.log
    with blog.context(request_id="main"):
        plain = threading.Thread(target=log.info, args=("plain thread",))
        ctx = contextvars.copy_context()
        given = threading.Thread(target=ctx.run, args=(log.info, "given thread"))
        plain.start()
        given.start()
        plain.join()
        given.join()
    got = {ev.message: ev.fields for ev in logged.read()}
    assert got == {"plain thread": {}, "given thread": {"request_id": "main"}}


def test_context_as_a_decorator(logged):
    @blog.context(job="nightly")
    def run(n):
        logged.log.info("run {}", n)

    @blog.context(job="async")
    async def arun(n):
        logged.log.info("arun {}", n)

    run(1)
    asyncio.run(arun(2))
    logged.log.info("outside")
    assert [ev.fields for ev in logged.read()] == [{"job": "nightly"}, {"job": "async"}, {}]


def test_bad_field_names_are_refused():
    with pytest.raises(ValueError, match="not an identifier"):
        blog.bind(**{"a b": 1})


def test_bread_shows_context_fields_in_text_and_json(tmp_path):
    s = blog.Session()
    out = blog.MemoryOutputStream()
    log = s.get_logger("web")
    with blog.context(request_id="r 1", user="bob", n=3):
        log.info("served {}", "/a")
    s.consume(out)
    path = tmp_path / "x.blog"
    path.write_bytes(out.getvalue())
    text = subprocess.run(python_child("-m", "bread", "-f", "%m %k", str(path)),
                          capture_output=True, text=True, timeout=60).stdout
    assert text == "served /a request_id='r 1' user=bob n=3\n"
    js = subprocess.run(python_child("-m", "bread", "-o", "jsonl", str(path)),
                        capture_output=True, text=True, timeout=60).stdout
    assert json.loads(js)["fields"] == {"request_id": "r 1", "user": "bob", "n": 3}


def test_a_process_that_never_uses_context_never_looks_at_it(tmp_path):
    # Proves the "pays nothing" rule where it is decided: until context or bind is first
    # called, the call paths do not read the context variable (blog.contextfields.state;
    # on the C path the static the level methods test is NULL). Correlation with
    # OpenTelemetry off: installed, it is a context of its own (tests/test_correlation.py).
    r = run_python("""
        import os; os.environ["BLOG_OTEL"] = "0"
        import io, blog, blog.contextfields as c
        s = blog.Session(); log = s.get_logger()
        for i in range(3): log.info("x {}", i)
        assert not c.state.in_use
        with blog.context(a=1): log.info("y")
        assert c.state.in_use
        print("ok")
    """, timeout=60)
    assert r.stdout == "ok\n", r.stderr


def test_context_values_of_every_kind_round_trip(logged):
    import dataclasses
    import decimal

    @dataclasses.dataclass
    class User:
        id: int
        name: str

    with blog.context(user=User(1, "bob"), amount=decimal.Decimal("1.50"), tags=["a", "b"]):
        logged.log.info("paid {amount}")
    (ev,) = logged.read()
    assert ev.message == "paid 1.50"
    assert ev.fields["amount"] == decimal.Decimal("1.50") and ev.fields["tags"] == ["a", "b"]
    assert ev.fields["user"].fields == {"id": 1, "name": "bob"}


def test_tuples_and_subclassed_values_in_context_read_back_on_every_call(logged):
    # The pure-Python path once wrote a tuple as a list, and a str subclass as its base
    # value, from a call site's second call in a context on (its cache of the site).
    import enum

    class Level(enum.IntEnum):
        ONE = 1

    class Text(str):
        def __str__(self) -> str:
            return "custom"

    with blog.context(req=(1, ("a",)), level=Level.ONE):
        for _ in range(3):
            logged.log.info("{} {!r} {level!r}", Text("v"), (1, (2,)))
    events = logged.read()
    assert [ev.message for ev in events] == ["custom (1, (2,)) <Level.ONE: 1>"] * 3
    assert [ev.fields["req"] for ev in events] == [(1, ("a",))] * 3


def test_many_distinct_contexts_stay_within_one_source_per_name_set(logged):
    for i in range(200):
        with blog.context(request_id=f"r{i}"):
            logged.log.info("hit")
    events = logged.read()
    assert len({ev.source.id for ev in events}) == 1
    assert [ev.fields["request_id"] for ev in events] == [f"r{i}" for i in range(200)]


def test_calls_in_a_new_context_per_request_stay_on_the_c_path(monkeypatch, make_logged,
                                                               hot_path):
    # Proves: after a site's first call under a set of context names, its calls under
    # any context with those names (a new one per request, its names built at run time
    # or not, with keyword fields too) are pushed by C, with the context's values.
    python_calls = c_path_handbacks(monkeypatch, hot_path)
    logged = make_logged()
    for i in range(20):
        names = {"request" + "_id": f"r{i}", "user": "bob"}   # a str built at run time
        with blog.context(**names):
            logged.log.info("order {} filled at {}", i, 1.5)
            logged.log.info("order {} at {px}", i, px=2.5)
    assert len(python_calls) == 2        # each site's first call
    events = logged.read()
    assert [ev.fields for ev in events[-2:]] == [
        {"request_id": "r19", "user": "bob"}, {"px": 2.5, "request_id": "r19", "user": "bob"}]
    assert [ev.message for ev in events[-2:]] == ["order 19 filled at 1.5", "order 19 at 2.5"]
    assert len({ev.source.id for ev in events}) == 2


def test_one_call_site_under_changing_contexts(logged):
    # Proves: the per-context cache of a call site never gives one context's source (its
    # field names) to another's events, whatever the order, values or call fields.
    expected = []
    for i in range(4):
        for ctx, kw in (({"a": i}, {}), ({"b": [i]}, {}), ({"a": i, "b": "x"}, {"k": i}),
                        ({"a": i}, {"a": -i})):
            with blog.context(**ctx):
                logged.log.info("v {}", i, **kw)
            expected.append({**kw, **{n: v for n, v in ctx.items() if n not in kw}})
        logged.log.info("v {}", i)
        expected.append({})
    assert [ev.fields for ev in logged.read()] == expected


def test_one_context_object_shared_by_tasks_that_end_in_any_order(logged):
    # A review found: the tokens of one object's blocks were kept on the object, so two
    # tasks sharing it raised ValueError when the first to enter left first.
    db = blog.context(component="db")

    async def task(name: str, wait: float) -> None:
        with db:
            await asyncio.sleep(wait)
            logged.log.info("task {}", name)
        logged.log.info("after {}", name)

    async def main() -> None:
        await asyncio.gather(task("a", 0.01), task("b", 0.03))

    asyncio.run(main())
    assert {(ev.message, tuple(ev.fields.items())) for ev in logged.read()} == {
        ("task a", (("component", "db"),)), ("task b", (("component", "db"),)),
        ("after a", ()), ("after b", ())}


def test_generators_cannot_be_decorated_with_a_context():
    with pytest.raises(TypeError, match="cannot decorate the generator"):
        @blog.context(job="x")
        def rows():
            yield 1


def test_event_functions_made_by_one_factory_keep_their_own_sources_in_context(logged):
    # A review found: closures share a code object, and the per-context source was keyed
    # by it: the second closure's events took the first's format and severity.
    def make(verb: str, severity: str):
        @blog.event("handled " + verb + " {}", severity=severity, session=logged.session)
        def handled(n: int): ...
        return handled

    get, put = make("GET", "info"), make("PUT", "error")
    with blog.context(rid="r1"):
        get(1)
        put(2)
    assert [(ev.severity.name, ev.message) for ev in logged.read()] == [
        ("INFO", "handled GET 1"), ("ERROR", "handled PUT 2")]
