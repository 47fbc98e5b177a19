"""``logging`` calls without a LogRecord (blog.stdlibcalls): when only BlogHandlers take a
call, it writes what its record would, and any other configuration takes the record path,
from the very next call."""

from __future__ import annotations

import asyncio
import enum
import gc
import logging
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blog
import blog.stdlib
from blog import stdlibcalls

from test_stdlib import Bridge, bridge  # noqa: F401  (the fixture: a private session and logger)


class Small(enum.IntEnum):
    ONE = 1


class Name(str):
    pass


def _call(lg, level, msg, args, kw, raised):
    # The call site every example shares (stacklevel 1 names a line here).
    if raised:
        try:
            raise ValueError(f"bad {len(args)}")
        except ValueError:
            lg.log(level, msg, *args, exc_info=True, **kw)
    else:
        lg.log(level, msg, *args, **kw)


def _via(lg, level, msg, args, kw, raised):
    _call(lg, level, msg, args, kw, raised)         # what stacklevel=2 names


def _via_via(lg, level, msg, args, kw, raised):
    _via(lg, level, msg, args, kw, raised)          # what stacklevel=3 names


def read_back(bridge: Bridge) -> list[tuple]:
    """Every event as bread reads it, but its clock and ids."""
    return [(ev.severity, ev.category, ev.source.function, ev.source.file, ev.source.line,
             ev.source.format, ev.message, repr(ev.args), repr(ev.fields), ev.writer)
            for ev in bridge.read()]


def took(bridge: Bridge) -> tuple[int, int]:
    """(calls the fast path took, records the record path took) in the bridge's session."""
    st_ = bridge.session.stats
    return st_.logging_fast_path, st_.logging_record_path


_value = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=False), st.text(max_size=4),
                   st.none(), st.booleans(), st.just(Small.ONE), st.text(max_size=3).map(Name),
                   st.tuples(st.integers(), st.text(max_size=2)),
                   st.dictionaries(st.sampled_from(["k", "j"]), st.integers(), max_size=2))
_format = st.lists(st.sampled_from(["a", " ", "%s", "%d", "%r", "%x", "%%", "%(k)s", "%.2f"]),
                   max_size=4).map("".join)
_calls = st.lists(st.tuples(
    st.sampled_from([logging.DEBUG, logging.INFO, 25, logging.WARNING, logging.ERROR]),
    _format, st.lists(_value, max_size=3),
    st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["user", "n", "taskName", "k", "exception", "stack"]), _value,
        max_size=2)),
    st.booleans(), st.booleans(), st.integers(1, 3)), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(calls=_calls)
def test_a_call_only_blog_takes_writes_what_its_record_would(calls):
    # Proves: random calls (formats, arguments of every kind, extra, exceptions, stack_info,
    # stacklevel) read back the same through the fast path as through the record path (the
    # same calls with a filter doing nothing on the logger), each twice (a site's first
    # call and a later one); and that the fast path took every call of the first. A call
    # that logging refuses (3.12+: ``extra`` naming ``taskName``, a LogRecord attribute)
    # raises the same error on both paths and writes nothing.
    got, refused = {}, {}
    for filtered in (False, True):
        bridge = Bridge()
        if filtered:
            bridge.logger.addFilter(lambda record: True)
        errors = []
        for _ in range(2):
            for level, msg, args, extra, raised, stack_info, stacklevel in calls:
                kw = {"extra": extra, "stack_info": stack_info, "stacklevel": stacklevel}
                try:
                    _via_via(bridge.logger, level, msg, args, kw, raised)
                except KeyError as exc:
                    errors.append(str(exc))
        got[filtered], refused[filtered] = read_back(bridge), errors
        taken = 2 * len(calls) - len(errors)
        assert took(bridge) == ((0, taken) if filtered else (taken, 0))
    assert got[False] == got[True]
    assert refused[False] == refused[True]
    if sys.version_info < (3, 12):
        assert refused[False] == []


def test_the_fast_path_makes_no_log_record(bridge, monkeypatch):
    made = []
    init = logging.LogRecord.__init__
    monkeypatch.setattr(logging.LogRecord, "__init__",
                        lambda self, *a, **k: (made.append(a), init(self, *a, **k))[1])
    for i in range(3):
        bridge.logger.info("n %d", i)
        bridge.logger.warning("w %s", i, extra={"user": "bob"})
    assert made == []
    assert took(bridge) == (6, 0)
    assert [e[6] for e in read_back(bridge)] == ["n 0", "w 0", "n 1", "w 1", "n 2", "w 2"]


def test_a_known_call_site_s_calls_stay_in_c(bridge, hot_path):
    # Proves: once a site's first call made its source, a call of plain values costs the C
    # path no Python frame (nor the handler's Python method).
    if hot_path != "c":
        pytest.skip("the C fast path is not built or not in use")
    in_python: list = []
    handle_call = bridge.handler.handle_call
    for i, value in [*enumerate(["x"] * 20), (1, ["not", "plain"])]:
        if i == 1:   # the site is known: from here, the Python method counts what it gets
            bridge.handler.handle_call = lambda call: (in_python.append(call.args),
                                                       handle_call(call))
        bridge.logger.info("n %d at %s", i, value)
    assert in_python == [(1, ["not", "plain"])]
    assert took(bridge) == (21, 0)
    assert [e[6] for e in read_back(bridge)][-2:] == ["n 19 at x", "n 1 at ['not', 'plain']"]


def test_a_record_factory_of_the_application_takes_every_record(bridge):
    made = []
    factory = logging.getLogRecordFactory()

    def counting(*a, **k):
        made.append(a[4])
        return factory(*a, **k)
    logging.setLogRecordFactory(counting)
    try:
        bridge.logger.info("a %d", 1)
    finally:
        logging.setLogRecordFactory(factory)
    bridge.logger.info("a %d", 2)
    assert made == ["a %d"]
    assert took(bridge) == (1, 1)


class OwnRecords(logging.Logger):
    def makeRecord(self, *a, **k):
        record = super().makeRecord(*a, **k)
        record.mine = True
        return record


class OwnLog(logging.Logger):
    def _log(self, level, msg, args, **kw):
        super()._log(level, "own " + msg, args, **kw)


@pytest.mark.parametrize("cls", [OwnRecords, OwnLog])
def test_a_logger_class_of_its_own_takes_the_record_path(cls):
    bridge = Bridge()
    bridge.logger = cls("lib.own", logging.DEBUG)
    bridge.logger.addHandler(bridge.handler)
    bridge.logger.info("x %d", 1)
    ev = read_back(bridge)[0]
    assert took(bridge) == (0, 1)
    assert ev[6] == ("own x 1" if cls is OwnLog else "x 1")
    assert ev[8] == ("{'mine': True}" if cls is OwnRecords else "{}")


def test_a_method_of_logger_replaced_at_run_time_takes_the_record_path(bridge, monkeypatch):
    bridge.logger.info("x %d", 1)
    made = []
    make = logging.Logger.makeRecord
    monkeypatch.setattr(logging.Logger, "makeRecord",
                        lambda self, *a, **k: (made.append(a[4]), make(self, *a, **k))[1])
    bridge.logger.info("x %d", 2)
    monkeypatch.undo()
    bridge.logger.info("x %d", 3)
    assert made == ["x %d"]
    assert took(bridge) == (2, 1)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


class Tree:
    """A logging tree of its own (its root and manager, apart from pytest's handlers): the
    bridge's handler on its root, the logger "app.db" below it."""

    def __init__(self) -> None:
        self.bridge = Bridge()
        self.root = logging.RootLogger(logging.DEBUG)
        self.manager = logging.Manager(self.root)
        self.logger = self.manager.getLogger("app.db")
        self.root.addHandler(self.bridge.handler)

    def disable(self, level: int) -> None:
        """``logging.disable(level)``, in this tree."""
        self.manager.disable = level
        self.manager._clear_cache()


def test_each_change_on_the_way_steps_aside_at_the_next_call_and_back_after(hot_path):
    tree = Tree()
    lg, bridge = tree.logger, tree.bridge
    other = Kept()
    stop = logging.Filter("elsewhere")     # rejects records of app.db
    changes = [
        ("a filter on the logger", lambda: lg.addFilter(stop), lambda: lg.removeFilter(stop)),
        ("a filter on the handler", lambda: bridge.handler.addFilter(stop),
         lambda: bridge.handler.removeFilter(stop)),
        ("another handler", lambda: lg.addHandler(other), lambda: lg.removeHandler(other)),
        ("propagate off", lambda: setattr(lg, "propagate", False),
         lambda: setattr(lg, "propagate", True)),
        ("the logger disabled", lambda: setattr(lg, "disabled", True),
         lambda: setattr(lg, "disabled", False)),
        ("logging.disable", lambda: tree.disable(logging.INFO),
         lambda: tree.disable(logging.NOTSET)),
        ("the logger's level", lambda: lg.setLevel(logging.WARNING),
         lambda: lg.setLevel(logging.NOTSET)),
        ("the handler's level", lambda: bridge.handler.setLevel(logging.WARNING),
         lambda: bridge.handler.setLevel(logging.NOTSET)),
    ]
    expected = []
    for what, change, undo in changes:
        lg.info("before %s", what)
        fast = took(bridge)[0]
        change()
        try:
            lg.info("during %s", what)
            assert took(bridge)[0] == fast, what
        finally:
            undo()
        lg.info("after %s", what)
        assert took(bridge)[0] == fast + 1, what
        expected += [f"before {what}"] + (
            [f"during {what}"] if what == "another handler" else []) + [f"after {what}"]
    assert other.records == ["during another handler"]
    assert [e[6] for e in read_back(bridge)] == expected


def test_a_call_that_reaches_no_handler_goes_to_logging_s_last_resort(hot_path, capsys):
    tree = Tree()
    lg, bridge = tree.logger, tree.bridge
    tree.root.removeHandler(bridge.handler)
    lg.warning("nobody %s", "listens")
    assert "nobody listens" in capsys.readouterr().err
    assert took(bridge) == (0, 0)


def test_two_blog_handlers_on_the_way_each_take_the_call(hot_path):
    tree = Tree()
    lg, bridge = tree.logger, tree.bridge
    second = blog.stdlib.BlogHandler(session=bridge.session)
    lg.addHandler(second)
    for i in range(2):
        lg.info("twice %d", i)
    assert [e[6] for e in read_back(bridge)] == ["twice 0"] * 2 + ["twice 1"] * 2
    assert took(bridge) == (4, 0)


def test_extra_that_would_replace_a_record_attribute_raises_as_logging_does(bridge):
    for filtered in (False, True):
        if filtered:
            bridge.logger.addFilter(lambda record: True)
        with pytest.raises(KeyError, match="Attempt to overwrite 'msg' in LogRecord"):
            bridge.logger.info("x", extra={"msg": 1})


def test_stack_info_and_exc_info_of_an_exception_object(bridge):
    def fail():
        raise KeyError("k")
    try:
        fail()
    except KeyError as e:
        exc = e
    bridge.logger.error("failed", exc_info=exc, stack_info=True)
    ev = bridge.read()[0]
    assert type(ev.fields["exception"]).__name__ != "NoneType"
    assert ev.fields["stack"].startswith("Stack (most recent call last):\n")
    assert ev.fields["stack"].endswith(
        '    bridge.logger.error("failed", exc_info=exc, stack_info=True)')
    assert ev.source.function == sys._getframe().f_code.co_name


def test_uninstall_gives_logging_its_own_log_back(bridge):
    bridge.logger.info("a %d", 1)
    stdlibcalls.uninstall()
    try:
        assert not stdlibcalls.installed()
        bridge.logger.info("a %d", 2)
    finally:
        stdlibcalls.install(blog.stdlib.BlogHandler)
    assert stdlibcalls.installed()
    bridge.logger.info("a %d", 3)
    assert took(bridge) == (2, 1)
    assert [e[6] for e in read_back(bridge)] == ["a 1", "a 2", "a 3"]


def test_threads_tasks_and_context_fields_read_back_as_the_record_path_s(hot_path):
    # Proves: calls from named threads, from asyncio tasks and inside blog.context write
    # what the record path writes (the writer, the context's fields), on the fast path.
    def calls(lg: logging.Logger) -> None:
        def work(i: int) -> None:
            lg.info("from %s", i)
        threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}")
                   for i in range(3)]
        for t in threads:
            t.start()
            t.join()

        async def task() -> None:
            lg.warning("in a task %d", 1)
        asyncio.run(task())
        with blog.context(request_id="r-1"):
            lg.info("in context %s", "a")
            lg.info("in context %s", "b")
    got = {}
    for filtered in (False, True):
        bridge = Bridge()
        if filtered:
            bridge.logger.addFilter(lambda record: True)
        calls(bridge.logger)
        got[filtered] = read_back(bridge)
        assert took(bridge) == ((0, 6) if filtered else (6, 0))
    assert got[False] == got[True]
    assert [e[9] for e in got[False]][:3] == ["worker-0", "worker-1", "worker-2"]
    assert got[False][-1][8] == "{'request_id': 'r-1'}"


def _audited(log, seen: list):
    """A ``Logger._log`` that notes each call's msg, then calls ``log`` (an APM's, say)."""
    def audited(self, level, msg, args, **kw):
        seen.append(msg)
        return log(self, level, msg, args, **kw)
    return audited


def test_a_log_wrapped_before_blog_s_handler_is_made_keeps_every_call(hot_path):
    # Proves: blog puts its fast path only over logging's own _log; a wrapper already there
    # sees every call, and the record path writes them.
    stdlibcalls.uninstall()
    own = logging.Logger._log
    seen: list = []
    logging.Logger._log = _audited(own, seen)
    try:
        bridge = Bridge()
        assert not stdlibcalls.installed()
        bridge.logger.info("a %d", 1)
    finally:
        logging.Logger._log = own
        stdlibcalls.install(blog.stdlib.BlogHandler)
    assert seen == ["a %d"]
    assert took(bridge) == (0, 1)
    assert [e[6] for e in read_back(bridge)] == ["a 1"]


def test_uninstall_leaves_a_wrapper_made_after_blog_s_and_steps_aside(bridge):
    stdlibcalls.uninstall()
    own = logging.Logger._log
    stdlibcalls.install(blog.stdlib.BlogHandler)
    seen: list = []
    wrapper = _audited(logging.Logger._log, seen)
    logging.Logger._log = wrapper
    try:
        bridge.logger.info("a %d", 1)       # the wrapper, then blog's fast path
        stdlibcalls.uninstall()
        assert logging.Logger.__dict__["_log"] is wrapper
        assert not stdlibcalls.installed()
        bridge.logger.info("a %d", 2)       # the wrapper, then the record path
    finally:
        logging.Logger._log = own
        stdlibcalls.install(blog.stdlib.BlogHandler)
    bridge.logger.info("a %d", 3)
    assert seen == ["a %d"] * 2
    assert took(bridge) == (2, 1)
    assert [e[6] for e in read_back(bridge)] == ["a 1", "a 2", "a 3"]


class Where(logging.Handler):
    """Where each record says it was made: (function, line)."""

    def __init__(self) -> None:
        super().__init__()
        self.where: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.where.append((record.funcName, record.lineno))


def _at(lg, stacklevel):
    lg.info("at %s", stacklevel, stacklevel=stacklevel)


def _at_via(lg, stacklevel):
    _at(lg, stacklevel)             # what stacklevel=2 names


def test_a_stacklevel_of_another_number_type_names_the_frame_logging_names(hot_path):
    # Proves: a float or bool stacklevel (which findCaller counts down as a number) names
    # the frame logging itself names, through a logger without a BlogHandler and one with.
    levels = [2.0, True, 1.5, 0.5, 0, 2, 1]

    def where(installed: bool) -> tuple[list, list]:
        kept = Where()
        plain = logging.Logger("plain", logging.DEBUG)
        plain.addHandler(kept)
        bridge = Bridge()
        if not installed:
            stdlibcalls.uninstall()
        try:
            for s in levels:
                _at_via(plain, s)
                _at_via(bridge.logger, s)
        finally:
            stdlibcalls.install(blog.stdlib.BlogHandler)
        return kept.where, [(e[2], e[4]) for e in read_back(bridge)]
    own = where(installed=False)
    assert own[0] == own[1]
    assert own[0][:2] == [("_at_via", _at_via.__code__.co_firstlineno + 1),
                          ("_at", _at.__code__.co_firstlineno + 1)]
    assert where(installed=True) == own


def _own_methods(lg: logging.Logger, seen: list) -> list:
    """Methods set on ``lg`` itself, as logging looks them up first: (name, undo)."""
    make, handle, call = lg.makeRecord, lg.handle, lg.callHandlers

    def makeRecord(*a, **k):
        record = make(*a, **k)
        record.request_id = "r-42"
        return record
    return [
        ("makeRecord", makeRecord),
        ("findCaller", lambda stack_info=False, stacklevel=1: ("wrapped.py", 7, "fn", None)),
        ("handle", lambda record: (seen.append("handle"), handle(record))[1]),
        ("callHandlers", lambda record: (seen.append("callHandlers"), call(record))[1]),
        ("filter", lambda record: False),
    ]


def test_a_method_set_on_the_logger_itself_takes_the_record_path(bridge):
    # Proves: a Logger's own findCaller, makeRecord, handle, callHandlers or filter (set on
    # the instance, which logging looks up first) is called, as logging calls it.
    lg, seen = bridge.logger, []
    expected = []
    for name, method in _own_methods(lg, seen):
        lg.info("before %s", name)
        setattr(lg, name, method)
        try:
            lg.info("with %s", name)
        finally:
            delattr(lg, name)
        lg.info("after %s", name)
        expected += [("before", name, "{}")] + (
            [] if name == "filter" else
            [("with", name, "{'request_id': 'r-42'}" if name == "makeRecord" else "{}")]) + [
            ("after", name, "{}")]
    events = read_back(bridge)
    assert [(e[6].split()[0], e[6].split()[1], e[8]) for e in events] == expected
    assert [e[3:5] for e in events if e[6] == "with findCaller"] == [("wrapped.py", 7)]
    assert seen == ["handle", "callHandlers"]
    assert took(bridge) == (10, 4)


@pytest.mark.parametrize("cls", [logging.Logger, logging.Filterer])
def test_a_filter_patched_on_logger_s_class_or_its_base_takes_the_record_path(bridge, cls,
                                                                               monkeypatch):
    bridge.logger.info("a %d", 1)
    monkeypatch.setattr(cls, "filter", lambda self, record: record.args != (2,))
    bridge.logger.info("a %d", 2)
    bridge.logger.info("a %d", 3)
    monkeypatch.undo()
    bridge.logger.info("a %d", 4)
    assert [e[6] for e in read_back(bridge)] == ["a 1", "a 3", "a 4"]
    assert took(bridge) == (2, 1)


def test_the_session_s_logging_counts_keep_the_calls_of_handlers_gone(hot_path):
    # Proves: session.stats.logging_fast_path and logging_record_path never go down when a
    # BlogHandler goes (dictConfig run again replaces them), and the session keeps no
    # reference per handler gone.
    bridge = Bridge()
    lg, stats = bridge.logger, bridge.session.stats
    seen = []
    for k in range(3):
        for i in range(3):
            lg.info("n %d", i)
        lg.addFilter(lambda record: True)
        lg.info("record %d", k)
        lg.filters[:] = []
        seen.append(took(bridge))
        lg.removeHandler(bridge.handler)
        bridge.handler.close()
        bridge.handler = blog.stdlib.BlogHandler(session=bridge.session)
        lg.addHandler(bridge.handler)
        gc.collect()
        seen.append(took(bridge))
    assert seen == [(3, 1), (3, 1), (6, 2), (6, 2), (9, 3), (9, 3)]
    for i in range(1000):    # (a BlogHandler of the C path goes at a collection: a cycle)
        blog.stdlib.BlogHandler(session=bridge.session).close()
        if i % 50 == 49:
            gc.collect()
    assert len(stats.logging_counters) <= 128
    assert took(bridge) == (9, 3)


# --- a library's NullHandler -------------------------------------------------


def _library_calls(lg: logging.Logger) -> None:
    """What a library logs: plain calls, extra, an exception, stack_info, stacklevel."""
    for i in range(2):
        lg.info("fetched %s in %d ms", "/a", i)
        lg.debug("pool %d", i, extra={"host": "example.org"})
        try:
            raise OSError(f"reset {i}")
        except OSError:
            lg.warning("retrying", exc_info=True)
        lg.error("gave up", stack_info=True)
        _via(lg, logging.INFO, "via %d", (i,), {"stacklevel": 2}, False)


def test_a_library_s_null_handler_leaves_its_calls_on_the_fast_path(hot_path):
    # Proves: a NullHandler on a library's top logger (as the logging HOWTO asks of every
    # library) does not send its calls to the record path, and they read back the same as
    # the record path's (a filter doing nothing on the logger).
    got = {}
    for filtered in (False, True):
        tree = Tree()
        tree.manager.getLogger("app").addHandler(logging.NullHandler())
        tree.logger.addHandler(logging.NullHandler(logging.ERROR))
        if filtered:
            tree.logger.addFilter(lambda record: True)
        _library_calls(tree.logger)
        got[filtered] = read_back(tree.bridge)
        assert took(tree.bridge) == ((0, 10) if filtered else (10, 0))
    assert got[False] == got[True]
    assert len(got[False]) == 10


class Counting(logging.NullHandler):
    pass


def _null_handlers(seen: list) -> list:
    """NullHandlers that do something with a record: (what, make the handler)."""
    def filtered() -> logging.Handler:
        h = logging.NullHandler()
        h.addFilter(lambda record: seen.append("filter") or True)
        return h

    def own_handle() -> logging.Handler:
        h = logging.NullHandler()
        h.handle = lambda record: seen.append("handle")   # type: ignore[method-assign]
        return h
    return [("a subclass", Counting), ("a filter", filtered), ("handle set on it", own_handle)]


def test_a_null_handler_that_does_something_takes_the_record_path(hot_path, monkeypatch):
    seen: list = []
    for what, make in _null_handlers(seen):
        tree = Tree()
        tree.logger.addHandler(make())
        tree.logger.info("x %d", 1)
        assert took(tree.bridge) == (0, 1), what
    assert seen == ["handle"]          # (NullHandler.handle calls no filter)
    tree = Tree()
    tree.logger.addHandler(logging.NullHandler())
    tree.logger.info("x %d", 1)
    monkeypatch.setattr(logging.NullHandler, "handle", lambda self, record: seen.append(
        record.getMessage()))
    tree.logger.info("x %d", 2)
    monkeypatch.undo()
    tree.logger.info("x %d", 3)
    assert seen == ["handle", "x 2"]
    assert took(tree.bridge) == (2, 1)
    assert [e[6] for e in read_back(tree.bridge)] == ["x 1", "x 2", "x 3"]


def test_a_call_that_reaches_only_null_handlers_does_nothing_and_no_last_resort(
        hot_path, capsys, monkeypatch):
    # Proves: a NullHandler counts as a handler found, as in Logger.callHandlers: a call
    # that reaches only NullHandlers (at any level) writes nothing, not even through
    # logging's lastResort; and it makes no LogRecord (the fast path's).
    made = []
    init = logging.LogRecord.__init__
    monkeypatch.setattr(logging.LogRecord, "__init__",
                        lambda self, *a, **k: (made.append(a[4]), init(self, *a, **k))[1])
    tree = Tree()
    lg = tree.logger
    lg.propagate = False
    for null in (logging.NullHandler(), logging.NullHandler(logging.CRITICAL)):
        lg.handlers[:] = [null]
        lg.warning("quiet %s", "please")
        lg.error("quiet", extra={"user": "bob"})
        with pytest.raises(KeyError, match="Attempt to overwrite 'msg' in LogRecord"):
            lg.error("quiet", extra={"msg": "x"})
    assert capsys.readouterr().err == ""
    assert made == []
    lg.handlers[:] = []
    lg.warning("heard %s", "now")
    assert "heard now" in capsys.readouterr().err
    assert made == ["heard %s"]
    assert took(tree.bridge) == (0, 0)


# --- frame walkers: blog's frame is invisible, on both paths --------------------


def _skips_logging_by_module() -> tuple[str, int]:
    """structlog's walk (``_find_first_app_frame_and_name(["logging"])``, its
    ``LoggerFactory``'s findCaller), from findCaller's caller: the first frame whose module
    is not logging's."""
    f = sys._getframe(2)
    while f.f_globals.get("__name__", "?").startswith("logging") and f.f_back is not None:
        f = f.f_back
    return f.f_code.co_name, f.f_lineno


class ByModule(logging.Logger):
    def findCaller(self, stack_info=False, stacklevel=1):
        name, line = _skips_logging_by_module()
        return __file__, line, name, None


class ByFile(Where):
    """loguru's ``InterceptHandler`` recipe: the first frame past logging's file."""

    def emit(self, record: logging.LogRecord) -> None:
        frame, depth = sys._getframe(), 0
        while frame:
            filename = frame.f_code.co_filename
            is_logging = filename == logging.__file__
            is_frozen = "importlib" in filename and "_bootstrap" in filename
            if depth > 0 and not (is_logging or is_frozen):
                break
            frame = frame.f_back
            depth += 1
        self.where.append((frame.f_code.co_name, frame.f_lineno))


def _application(lg: logging.Logger) -> int:
    lg.warning("from the application %s", "code")
    return sys._getframe().f_lineno - 1


def test_frame_walkers_that_skip_logging_s_frames_find_the_application(hot_path):
    # Proves: once a BlogHandler exists, a walk of the stack that skips logging's frames
    # (by module name: structlog's; by file: loguru's recipe) finds the application's
    # frame on the record path, as without blog (in pure Python, blog's _log sits there).
    Bridge()
    assert stdlibcalls.installed()
    by_module = ByModule("walked.by_module", logging.DEBUG)
    kept = Where()
    by_module.addHandler(kept)
    by_file = ByFile()
    plain = logging.Logger("walked.by_file", logging.DEBUG)
    plain.addHandler(by_file)
    lines = [_application(by_module), _application(plain)]
    assert kept.where == [("_application", lines[0])]
    assert by_file.where == [("_application", lines[1])]


def test_structlog_s_logger_factory_names_the_application(hot_path):
    structlog = pytest.importorskip("structlog")
    Bridge()
    lg = structlog.stdlib.LoggerFactory()("walked.structlog")
    kept = Where()
    lg.addHandler(kept)
    lg.propagate = False
    try:
        line = _application(lg)
    finally:
        lg.removeHandler(kept)
    assert kept.where == [("_application", line)]


def test_loguru_s_intercept_handler_recipe_names_the_application(hot_path):
    loguru = pytest.importorskip("loguru")
    import inspect
    logger = loguru.logger

    class InterceptHandler(logging.Handler):   # loguru's README, as it is
        def emit(self, record: logging.LogRecord) -> None:
            try:
                level: str | int = logger.level(record.levelname).name
            except ValueError:
                level = record.levelno
            frame, depth = inspect.currentframe(), 0
            while frame:
                filename = frame.f_code.co_filename
                is_logging = filename == logging.__file__
                is_frozen = "importlib" in filename and "_bootstrap" in filename
                if depth > 0 and not (is_logging or is_frozen):
                    break
                frame = frame.f_back
                depth += 1
            logger.opt(depth=depth, exception=record.exc_info).log(level,
                                                                   record.getMessage())
    Bridge()
    records: list = []
    sink = logger.add(lambda m: records.append(m.record), level=0)
    lg = logging.Logger("walked.loguru", logging.DEBUG)
    lg.addHandler(InterceptHandler())
    try:
        line = _application(lg)
    finally:
        logger.remove(sink)
    assert [(r["function"], r["line"], r["message"]) for r in records] == [
        ("_application", line, "from the application code")]
