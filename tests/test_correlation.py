"""Correlation with OpenTelemetry (``blog.correlation``, docs/opentelemetry.md): every event
logged inside a valid span carries its ``trace_id`` and ``span_id``, by every call path;
``@blog.traced`` calls are spans of their own. Spans are made by the OpenTelemetry SDK and
read back from the file by bread; the suite runs once per writer path (C, and
BLOG_PURE_PYTHON=1)."""

from __future__ import annotations

import asyncio
import logging
import re
import textwrap
import threading

import pytest

import blog
import blog.stdlib
from blog import correlation
from helpers import c_path_handbacks, count_slow_records, run_python

trace = pytest.importorskip("opentelemetry.trace", reason="opentelemetry-api is not "
                            "installed (the otel extra; the test extra installs the SDK)")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not "
                                "installed (the test extra)")


@pytest.fixture(autouse=True)
def correlation_on():
    # On, and armed (OpenTelemetry is imported here), whatever a test before turned off.
    correlation.use(True)
    yield
    correlation.use(True)


@pytest.fixture(scope="module")
def tracer():
    """An SDK tracer (its own provider: the global one is the process's, set once)."""
    return sdk_trace.TracerProvider().get_tracer("tests")


def ids(span) -> dict:
    """The fields an event logged inside ``span`` carries."""
    c = span.get_span_context()
    return {"trace_id": format(c.trace_id, "032x"), "span_id": format(c.span_id, "016x")}


def test_every_call_path_inside_a_span_carries_its_ids(logged, tracer):
    # Proves (issue 41): a native call (positional, keyword fields, a format that names a
    # field), an @blog.event call and a logging call through the bridge, inside an SDK
    # span, carry its ids as fields, read back by bread; nested spans their own; outside
    # a span, none. Each call site logs more than once (its cached paths too).
    log = logged.log

    @blog.event("handled {}", session=logged.session)
    def handled(path: str): ...

    lg = logging.Logger("lib")
    lg.addHandler(blog.stdlib.BlogHandler(session=logged.session))
    expected = []

    def calls(want: dict) -> None:
        for i in range(3):
            log.info("order {} filled", i)
            log.info("order {} at {px}", i, px=1.5)
            handled(f"/{i}")
            lg.warning("lib %s", i)
            expected.extend([want, {"px": 1.5, **want}, want, want])

    calls({})
    with tracer.start_as_current_span("outer") as outer:
        calls(ids(outer))
        with tracer.start_as_current_span("inner") as inner:
            calls(ids(inner))
        calls(ids(outer))
    calls({})
    events = logged.read()
    assert [ev.fields for ev in events] == expected
    assert events[12].message == "order 0 filled"


def test_the_ids_are_w3c_trace_context_hex(logged, tracer):
    with tracer.start_as_current_span("s"):
        logged.log.info("x")
    (ev,) = logged.read()
    assert re.fullmatch(r"[0-9a-f]{32}", ev.fields["trace_id"])
    assert re.fullmatch(r"[0-9a-f]{16}", ev.fields["span_id"])


def test_a_call_s_field_and_a_context_field_win_over_the_span_s(logged, tracer):
    with tracer.start_as_current_span("s") as span:
        logged.log.info("mine", trace_id="t-1")
        with blog.context(span_id="s-1", request_id="r"):
            logged.log.info("context")
    got = [ev.fields for ev in logged.read()]
    assert got == [{"trace_id": "t-1", "span_id": ids(span)["span_id"]},
                   {"span_id": "s-1", "request_id": "r", "trace_id": ids(span)["trace_id"]}]


def test_a_format_may_show_the_ids(logged, tracer):
    with tracer.start_as_current_span("s") as span:
        logged.log.info("in trace {trace_id}")
    (ev,) = logged.read()
    assert ev.message == f"in trace {ids(span)['trace_id']}"


def test_a_span_that_is_not_valid_or_not_a_span_gives_no_ids(logged):
    # trace.INVALID_SPAN is what OpenTelemetry makes current when it is not configured.
    with trace.use_span(trace.INVALID_SPAN):
        logged.log.info("invalid")
    logged.log.info("after")
    assert [ev.fields for ev in logged.read()] == [{}, {}]


def test_many_spans_one_after_another_each_their_own_ids(logged, tracer):
    # The C path keeps the ids of the last spans it read, by the span object: a span ended
    # and freed, its address taken by the next, must not give the next its ids.
    want = []
    for i in range(200):
        with tracer.start_as_current_span(f"s{i}") as span:
            logged.log.info("in {}", i)
            want.append(ids(span))
    assert [ev.fields for ev in logged.read()] == want


def test_turned_off_no_call_carries_ids(logged, tracer):
    @blog.traced(session=logged.session)
    def step(x):
        logged.log.info("in step")
        return x

    correlation.use(False)      # what basic_config(otel=False) does (below, in a child)
    with tracer.start_as_current_span("s"):
        logged.log.info("off")
        step(1)
    assert [sorted(ev.fields) for ev in logged.read()] == [
        [], ["x"], [], ["duration_ms", "result"]]


def test_blog_otel_0_turns_it_off_and_blog_never_imports_opentelemetry():
    # Proves: BLOG_OTEL=0 leaves every call as without OpenTelemetry; and with it on,
    # blog itself imports nothing of OpenTelemetry (a traced call is a root span of its
    # own), until the application imports it, after which a call in its span (taking the
    # C path's look at sys.modules) carries its ids.
    code = textwrap.dedent("""
        import io, os, sys, blog, bread
        s = blog.Session(); log = s.get_logger()
        @blog.traced(session=s)
        def f(x): return x
        for i in range(3):
            log.info("before {}", i); f(i)
        assert "opentelemetry" not in sys.modules, "imported by blog"
        from opentelemetry.sdk.trace import TracerProvider
        tracer = TracerProvider().get_tracer("t")
        with tracer.start_as_current_span("s") as span:
            for i in range(3):
                log.info("in {}", i)
            c = span.get_span_context()
        out = blog.MemoryOutputStream(); s.consume(out)
        evs = list(bread.read(io.BytesIO(out.getvalue())))
        traced = {ev.fields.get("span_id") for ev in evs if "x" in ev.fields}
        print(sorted({tuple(sorted(ev.fields)) for ev in evs if "x" in ev.fields}))
        print(len(traced - {None}))
        print([ev.fields.get("span_id") == format(c.span_id, "016x") for ev in evs
               if ev.message.startswith("in")])
    """)
    on = run_python(code, timeout=60)
    assert on.returncode == 0, on.stderr
    assert on.stdout.splitlines() == [
        "[('parent_span_id', 'span_id', 'trace_id', 'x')]", "3", "[True, True, True]"]
    off = run_python("import os; os.environ['BLOG_OTEL'] = '0'\n" + code, timeout=60)
    assert off.returncode == 0, off.stderr
    assert off.stdout.splitlines() == ["[('x',)]", "0", "[False, False, False]"]
    configured = run_python(code.replace("s = blog.Session()", "blog.basic_config("
                                         "blog.MemoryOutputStream(), otel=False); "
                                         "s = blog.Session()"), timeout=60)
    assert configured.returncode == 0, configured.stderr
    assert configured.stdout.splitlines() == off.stdout.splitlines()


def test_without_opentelemetry_nothing_is_looked_for():
    # Proves: where opentelemetry cannot be imported (a finder hides it), correlation is
    # off: no field, no attempt to import it, a traced call as before.
    r = run_python("""
        import sys
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "opentelemetry":
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Hide())
        import io, blog, bread
        from blog import correlation
        s = blog.Session(); log = s.get_logger()
        @blog.traced(session=s)
        def f(x): return x
        log.info("a"); f(1)
        out = blog.MemoryOutputStream(); s.consume(out)
        print([ev.fields for ev in bread.read(io.BytesIO(out.getvalue()))][:2])
        print(correlation.state.mode == correlation.OFF, "opentelemetry" in sys.modules)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[{}, {'x': 1}]", "True False"]


def test_a_bad_blog_otel_is_said_once_and_leaves_it_on():
    r = run_python("""
        import os; os.environ["BLOG_OTEL"] = "maybe"
        import blog
        from blog import correlation
        blog.get_logger().info("x")
        print(correlation.state.mode != correlation.OFF)
    """, timeout=60)
    assert r.stdout.splitlines() == ["True"]
    assert r.stderr.count("BLOG_OTEL='maybe'") == 1


def _traced_events(logged) -> tuple[list, dict]:
    events = logged.read()
    return events, {ev.fields["span_id"]: ev for ev in events if "parent_span_id" in ev.fields}


def test_traced_calls_are_spans_their_parent_the_enclosing_one(logged, tracer):
    # Proves: each traced call has its own span id; its parent is the enclosing traced
    # call, else the current OpenTelemetry span (whose trace it joins), else none (a new
    # trace); what is logged inside carries its ids; its end event its ids too.
    log = logged.log

    @blog.traced(session=logged.session)
    def inner(x):
        log.info("in inner {}", x)
        return x

    @blog.traced(session=logged.session)
    def outer(x):
        log.info("in outer {}", x)
        inner(x)
        log.info("back in outer {}", x)
        return x

    outer(1)                                   # a root: a trace of its own
    with tracer.start_as_current_span("request") as request:
        outer(2)
        log.info("in the request")
    events, starts = _traced_events(logged)
    logged_inside = {ev.message: ev.fields for ev in events
                     if "parent_span_id" not in ev.fields and "duration_ms" not in ev.fields}
    ends = {ev.fields["span_id"]: ev for ev in events if "duration_ms" in ev.fields}
    spans = {}
    for ev in starts.values():
        spans[(ev.function.rsplit(".", 1)[-1], ev.fields["x"])] = ev.fields
        assert ends[ev.fields["span_id"]].fields["trace_id"] == ev.fields["trace_id"]
        assert ends[ev.fields["span_id"]].function == ev.function
    assert len(spans) == 4 and len(starts) == 4 and len(ends) == 4
    for x in (1, 2):
        o, i = spans[("outer", x)], spans[("inner", x)]
        assert (i["parent_span_id"], i["trace_id"]) == (o["span_id"], o["trace_id"])
        assert logged_inside[f"in outer {x}"] == {"trace_id": o["trace_id"],
                                                  "span_id": o["span_id"]}
        assert logged_inside[f"back in outer {x}"] == logged_inside[f"in outer {x}"]
        assert logged_inside[f"in inner {x}"] == {"trace_id": i["trace_id"],
                                                  "span_id": i["span_id"]}
    assert spans[("outer", 1)]["parent_span_id"] is None
    assert (spans[("outer", 2)]["parent_span_id"], spans[("outer", 2)]["trace_id"]) == (
        ids(request)["span_id"], ids(request)["trace_id"])
    assert spans[("outer", 1)]["trace_id"] != spans[("outer", 2)]["trace_id"]
    assert logged_inside["in the request"] == ids(request)   # after it: the request's


def test_an_otel_span_begun_inside_a_traced_call_is_the_innermost(logged, tracer):
    # Blog's traced call is not OpenTelemetry's current span (docs/opentelemetry.md says
    # why); a span the application starts inside it is the innermost all the same.
    log = logged.log

    @blog.traced(session=logged.session)
    def leaf():
        log.info("in leaf")

    @blog.traced(session=logged.session)
    def handler():
        with tracer.start_as_current_span("db") as db:
            log.info("in db")
            leaf()
        log.info("after db")
        return ids(db)

    db = handler()
    events, starts = _traced_events(logged)
    h = next(ev for ev in starts.values() if ev.function.endswith("handler"))
    lf = next(ev for ev in starts.values() if ev.function.endswith("leaf"))
    msgs = {ev.message: ev.fields for ev in events}
    assert msgs["in db"] == db
    assert lf.fields["parent_span_id"] == db["span_id"] and lf.fields["trace_id"] == db[
        "trace_id"]
    assert msgs["in leaf"] == {"trace_id": lf.fields["trace_id"],
                               "span_id": lf.fields["span_id"]}
    assert msgs["after db"] == {"trace_id": h.fields["trace_id"], "span_id": h.fields["span_id"]}


def test_an_exception_ends_the_span_in_error(logged, tracer):
    @blog.traced(session=logged.session)
    def fails(x):
        raise ValueError(x)

    for _ in range(2):                         # the C path's sources registered by the first
        with pytest.raises(ValueError):
            fails(1)
    events, starts = _traced_events(logged)
    call, end = events[2:]
    assert end.fields["exception"].type == "ValueError"
    assert (end.fields["span_id"], end.fields["trace_id"]) == (call.fields["span_id"],
                                                               call.fields["trace_id"])
    assert (end.function, end.file, end.line) == (call.function, call.file, call.line)
    assert end.severity.name == "ERROR"


def test_traced_calls_stay_on_the_c_path_as_spans(monkeypatch, make_logged, hot_path, tracer):
    # Proves: a plain traced call is a span without the Python wrapper once its sources
    # are registered, and a log call inside a span without the Python method.
    python_calls = c_path_handbacks(monkeypatch, hot_path)
    logged = make_logged()

    @blog.traced(session=logged.session)
    def f(x):
        logged.log.info("in f {}", x)
        return x

    with tracer.start_as_current_span("s"):
        for i in range(10):
            f(i)
            logged.log.info("in s {}", i)
    assert len(python_calls) == 2       # each log site's first call
    events = logged.read()
    assert len(events) == 40 and all("span_id" in ev.fields for ev in events)


def test_generators_and_coroutines_are_spans(logged, tracer):
    @blog.traced(session=logged.session)
    def rows(n):
        yield from range(n)

    @blog.traced(session=logged.session)
    async def fetch(x):
        logged.log.info("fetching {}", x)
        await asyncio.sleep(0)
        return x

    with tracer.start_as_current_span("s") as s:
        assert list(rows(2)) == [0, 1]
        asyncio.run(fetch(1))
    events, starts = _traced_events(logged)
    assert {ev.fields["parent_span_id"] for ev in starts.values()} == {ids(s)["span_id"]}
    f = next(ev for ev in starts.values() if ev.function.endswith("fetch"))
    fetching = next(ev for ev in events if ev.message == "fetching 1")
    assert fetching.fields == {"trace_id": f.fields["trace_id"], "span_id": f.fields["span_id"]}


def test_threads_and_tasks_each_see_their_own_span(logged, tracer):
    # Each thread starts with no span; a task with a copy of its creator's context (a
    # traced coroutine's span too).
    barrier = threading.Barrier(4)
    want: dict[str, dict] = {}

    def work(name: str) -> None:
        barrier.wait()
        logged.log.info("{} outside", name)
        with tracer.start_as_current_span(name) as span:
            want[name] = ids(span)
            for i in range(50):
                logged.log.info("{} {}", name, i)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def task(name: str) -> None:
        with tracer.start_as_current_span(name) as span:
            want[name] = ids(span)
            for i in range(20):
                logged.log.info("{} {}", name, i)
                await asyncio.sleep(0)

    @blog.traced(session=logged.session)
    async def main() -> None:
        await asyncio.gather(task("a"), task("b"), child())

    async def child() -> None:
        logged.log.info("child")

    asyncio.run(main())
    events = logged.read()
    for ev in events:
        name = ev.message.split()[0]
        if ev.message.endswith("outside"):
            assert ev.fields == {}
        elif name in want:
            assert ev.fields == want[name], ev.message
    m = next(ev for ev in events if "parent_span_id" in ev.fields)   # main's span
    assert next(ev for ev in events if ev.message == "child").fields == {
        "trace_id": m.fields["trace_id"], "span_id": m.fields["span_id"]}


def test_through_the_public_api_where_the_context_is_another(logged, tracer, monkeypatch):
    # Proves: where OpenTelemetry's runtime context is not the ContextVarsRuntimeContext
    # read directly (another one, configured by OTEL_PYTHON_CONTEXT, or other internals),
    # each call asks trace.get_current_span(), and carries the same ids.
    import opentelemetry.context as otel_context

    real = otel_context._RUNTIME_CONTEXT

    class Wrapped(type(real).__bases__[0]):     # a _RuntimeContext of another class
        def attach(self, context):
            return real.attach(context)

        def get_current(self):
            return real.get_current()

        def detach(self, token):
            real.detach(token)

    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", Wrapped())
    correlation.use(True)
    assert correlation.state.mode == correlation.PUBLIC

    @blog.traced(session=logged.session)
    def f():
        logged.log.info("in f")

    with tracer.start_as_current_span("s") as s:
        for _ in range(2):
            logged.log.info("in s")
        f()
    logged.log.info("after")
    events = logged.read()
    assert [ev.fields for ev in events[:2]] == [ids(s)] * 2
    assert events[2].fields["parent_span_id"] == ids(s)["span_id"]
    assert events[3].fields["span_id"] == events[2].fields["span_id"]
    assert events[-1].fields == {}


def test_a_forked_child_makes_ids_of_its_own():
    # The C path's random ids are seeded again in a forked child (blog.process).
    r = run_python("""
        import io, os, blog, bread
        s = blog.Session()
        @blog.traced(session=s)
        def f(): pass
        f()
        pid = os.fork()
        for _ in range(3):     # (the first call after a fork takes the Python path)
            f()
        out = blog.MemoryOutputStream(); s.consume(out)
        ids = [ev.fields["span_id"] for ev in bread.read(io.BytesIO(out.getvalue()))
               if "parent_span_id" in ev.fields]
        os.write(1, ids[-1].encode() + b"\\n")   # one write: the two processes share the pipe
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert len(lines) == 2 and lines[0] != lines[1]


def test_event_functions_in_a_span_or_a_context_stay_on_the_c_path(monkeypatch, logged,
                                                                    hot_path, tracer):
    # Proves: after an event function's first call under a set of context names (a span's
    # ids, blog.context's fields, both), C pushes its calls with the context's values; a
    # parameter of a context field's name still wins, by the Python wrapper.
    if hot_path != "c":
        pytest.skip("the C call path is not in use")
    import blog.integrations.event as event
    handed: list = []
    make = event._python_wrapper

    def counting(fn, site):
        wrapper = make(fn, site)

        def counted(*args, **kwargs):
            handed.append(args)
            return wrapper(*args, **kwargs)
        return counted

    monkeypatch.setattr(event, "_python_wrapper", counting)

    @blog.event("handled {}", session=logged.session)
    def handled(n: int): ...

    @blog.event("as {}", session=logged.session)
    def named(span_id: str): ...

    with tracer.start_as_current_span("s") as s:
        for i in range(5):
            handled(i)
        with blog.context(rid="r"):
            for i in range(5, 10):
                handled(i)
        named("mine")
    assert [a for a in handed] == [(0,), (5,), ("mine",)]
    events = logged.read()
    assert [ev.fields for ev in events] == [ids(s)] * 5 + [{"rid": "r", **ids(s)}] * 5 + [
        {"trace_id": ids(s)["trace_id"]}]
    assert events[-1].message == "as mine"


@pytest.mark.parametrize("record", [False, True], ids=["no record", "a LogRecord"])
def test_logging_calls_in_a_span_or_a_context_take_the_fast_path(logged, tracer, record):
    # Proves: through the bridge, a call site's records in a span (its ids in context), in
    # blog.context, or both, are pushed by the fast path after its first under those
    # names (before: every one went down the record's slow path, 30x a plain call), with
    # every value; with a filter on the logger, each call makes its LogRecord.
    lg = logging.Logger("lib")
    handler = blog.stdlib.BlogHandler(session=logged.session)
    lg.addHandler(handler)
    if record:
        lg.addFilter(lambda r: True)
    slow = count_slow_records(handler)
    want = []
    with tracer.start_as_current_span("s") as s:
        for i in range(5):
            lg.warning("lib %s of %d", "x", i)
            want.append(ids(s))
        with blog.context(rid="r", tags=["a"]):      # a value the C path leaves to Python
            for i in range(5):
                lg.warning("lib %s of %d", "x", i)
                want.append({"rid": "r", "tags": ["a"], **ids(s)})
    with blog.context(rid="q"):
        for i in range(5):
            lg.warning("lib %s of %d", "x", i)
            want.append({"rid": "q"})
    assert len(slow) == 3      # the first under each set of names
    events = logged.read()
    assert [ev.fields for ev in events] == want
    assert {ev.message for ev in events} == {f"lib x of {i}" for i in range(5)}


def test_turned_on_again_by_basic_config():
    # BLOG_OTEL=0, then basic_config(otel=True): on from then on, on either path.
    r = run_python("""
        import io, os; os.environ["BLOG_OTEL"] = "0"
        import blog, bread
        from opentelemetry.sdk.trace import TracerProvider
        tracer = TracerProvider().get_tracer("t")
        s = blog.Session(); log = s.get_logger()
        with tracer.start_as_current_span("s"):
            log.info("off")
            blog.basic_config(blog.MemoryOutputStream(), otel=True)
            log.info("on")
        out = blog.MemoryOutputStream(); s.consume(out)
        print([sorted(ev.fields) for ev in bread.read(io.BytesIO(out.getvalue()))])
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[[], ['span_id', 'trace_id']]"]
