"""The stdlib ``logging`` bridge: records of ``logging`` and ``warnings`` read back from
the file as ``logging`` itself would have shown them."""

from __future__ import annotations

import decimal
import enum
import io
import json
import logging
import logging.config
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blog
import blog.stdlib
import bread
from blogformat.placeholders import FormatError, parse_printf, render
from blogformat.pretty import PrettyPrinter
from bread.entries import iter_entries
from bread.frames import iter_frames

from helpers import Count, Ratio, Text, count_slow_records, python_child, run_python


class Bridge:
    """A private session, a BlogHandler on a private logger, and a way to read back."""

    def __init__(self, name: str = "lib.db", level: int = logging.DEBUG) -> None:
        self.session = blog.Session()
        self.out = blog.MemoryOutputStream()
        self.handler = blog.stdlib.BlogHandler(session=self.session)
        self.logger = logging.Logger(name, level)   # apart from the hierarchy (and pytest's)
        self.logger.addHandler(self.handler)

    def read(self) -> list[bread.Event]:
        self.session.consume(self.out)
        reader = bread.read(io.BytesIO(self.out.getvalue()))
        events = list(reader)
        assert reader.damage == []
        return events


@pytest.fixture
def bridge(hot_path):
    b = Bridge()
    yield b
    b.logger.handlers[:] = []


class Records(logging.Handler):
    """A plain handler: the records ``logging`` itself makes, kept as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def through(path: str, calls: Callable[[logging.Logger], None]
            ) -> tuple[list[bread.Event], list[logging.LogRecord]]:
    """The events ``calls(logger)`` logs through a BlogHandler by ``path``, "fast" (the
    handler alone: no LogRecord, blog.stdlibcalls) or "record" (beside a plain handler),
    and the records ``logging`` makes of the same calls (of the plain handler beside it, or
    of a logger of the same name that has only it)."""
    bridge, records = Bridge(), Records()
    if path == "record":
        bridge.logger.addHandler(records)
    else:
        plain = logging.Logger(bridge.logger.name, logging.DEBUG)
        plain.addHandler(records)
        calls(plain)
    calls(bridge.logger)
    stats = bridge.session.stats
    taken = stats.logging_fast_path if path == "fast" else stats.logging_record_path
    assert (taken, stats.logging_fast_path + stats.logging_record_path) == (
        len(records.records), len(records.records))
    return bridge.read(), records.records


# --- printf-style formats: rendered as % renders them ------------------------


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


class Color(enum.Enum):
    RED = "r"


class Tone(enum.StrEnum):
    LOW = "low"


_flags = st.text(alphabet="#0- +", max_size=3)
_width = st.one_of(st.just(""), st.integers(0, 30).map(str))
_prec = st.one_of(st.just(""), st.integers(0, 12).map(lambda n: f".{n}"), st.just("."))
#: Tuples in lists in tuples: a tuple shows as one, however deep.
_nested = st.recursive(st.one_of(st.integers(-5, 5), st.text(max_size=3)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3).map(tuple),
                                               st.lists(inner, max_size=3)), max_leaves=6)
#: Values of a subclass of int, float or str, and enum members: shown by their own class.
_subclassed = st.one_of(st.text(max_size=4).map(Text), st.integers(-10**6, 10**6).map(Count),
                        st.floats(-1e6, 1e6).map(Ratio), st.sampled_from([*Level, *Color, *Tone]))
_numbers = st.one_of(st.integers(-10**6, 10**6).map(Count), st.floats(-1e6, 1e6).map(Ratio),
                     st.sampled_from(list(Level)))
#: Values a number conversion may not take (logging then prints an error): the record
#: is kept as its format and its arguments' repr.
_misfits = st.one_of(st.text(max_size=3), st.none(), st.binary(max_size=2),
                     st.sampled_from([float("nan"), float("inf"), 2.5, 0x110000, -1]),
                     st.sampled_from([Color.RED, Text("x"), Text("")]))
_conv_values = {
    "s": st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.none(), st.booleans(),
                   st.binary(max_size=4), st.lists(st.integers(), max_size=3), _nested,
                   _subclassed),
    "r": st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.none(), _nested,
                   _subclassed),
    "a": st.one_of(st.text(max_size=8), _subclassed),
    "d": st.one_of(st.integers(-10**20, 10**20), st.floats(-1e15, 1e15), st.booleans(),
                   _numbers, _misfits),
    "i": st.integers(-10**6, 10**6),
    "u": st.integers(-10**6, 10**6),
    "x": st.one_of(st.integers(-10**12, 10**12), st.sampled_from(list(Level)), _misfits),
    "X": st.integers(0, 10**12),
    "o": st.integers(-10**6, 10**6),
    "e": st.one_of(st.floats(), st.integers(-10**6, 10**6), _numbers, _misfits),
    "E": st.floats(allow_nan=False),
    "f": st.one_of(st.floats(-1e30, 1e30), st.integers(-10**6, 10**6)),
    "F": st.floats(allow_infinity=True),
    "g": st.floats(),
    "G": st.floats(),
    "c": st.one_of(st.integers(0, 0x10FFFF), st.characters(), _misfits),
}


@st.composite
def printf_formats(draw):
    """A printf format of literal text, %% and conversions, and its conversions."""
    parts, convs = [], []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "percent", "conv"]))
        if kind == "text":
            parts.append(draw(st.text(alphabet=st.characters(blacklist_characters="%"),
                                      max_size=6)))
        elif kind == "percent":
            parts.append("%%")
        else:
            conv = draw(st.sampled_from(sorted(_conv_values)))
            parts.append("%" + draw(_flags) + draw(_width) + draw(_prec) + conv)
            convs.append(conv)
    return "".join(parts), convs


@st.composite
def printf_calls(draw):
    """A printf format and values for it (a number conversion's may not fit it)."""
    fmt, convs = draw(printf_formats())
    return fmt, tuple(draw(_conv_values[c]) for c in convs)


@st.composite
def printf_sites(draw):
    """A printf format and the values of two or three records of one call site (values of
    other types from one record to the next; a number conversion's may not fit it)."""
    fmt, convs = draw(printf_formats())
    n = draw(st.integers(2, 3))
    return fmt, [tuple(draw(_conv_values[c]) for c in convs) for _ in range(n)]


@settings(max_examples=300, deadline=None)
@given(printf_calls())
def test_a_printf_format_renders_as_the_percent_operator(call):
    # Proves: the reader's printf renderer is Python's % for every conversion, flag,
    # width and precision a format may hold, and the values a file holds.
    fmt, values = call
    try:
        expected = fmt % values
    except (TypeError, ValueError, OverflowError):
        return   # logging itself would fail to render: not the case compared here
    assert render(parse_printf(fmt), values, {}) == expected


@pytest.mark.parametrize("fmt", ["50%", "%", "%*d", "%.*f", "%(a)s %s", "%5%", "%(a)%",
                                 "%z", "%(a(b))s"])
def test_formats_that_percent_rejects_or_that_need_more_are_refused(fmt):
    with pytest.raises(FormatError):
        parse_printf(fmt)


@settings(max_examples=150, deadline=None)
@given(printf_sites())
def test_bread_shows_each_record_as_logging_renders_it(site):
    # Proves: a record's message and arguments, written as format + values and read back
    # from the file, render exactly as logging's own getMessage() (both hot paths), on a
    # call site's first record and on the ones after it (the common case): tuples
    # (nested too), subclasses of int, float and str with their own str and repr, enum
    # members; and a record whose argument a conversion does not take (where logging
    # prints an error) as its format and its arguments' repr, as the guide says.
    fmt, records = site
    b = Bridge()
    try:
        expected = []
        for values in records:
            record = b.logger.makeRecord(b.logger.name, logging.INFO, "app.py", 7, fmt, values,
                                         None, "handler")
            try:
                expected.append(record.getMessage())
            except (TypeError, ValueError, OverflowError):
                expected.append(f"{fmt} {values!r}")   # logging prints an error; blog this
            b.handler.handle(record)
        events = b.read()
        assert [ev.message for ev in events] == expected
    finally:
        b.logger.handlers[:] = []


def test_tuples_and_values_of_their_own_class_show_as_logging_shows_them(bridge):
    # Proves, on each record of a call site (the pure-Python writer once showed a tuple as
    # a list, and a subclass or enum member as its base value, from a site's second
    # record on): the message is logging's.
    calls = [("%s", ((1, 2),)), ("Col %r", (("id", ("a", "b")),)), ("%r", ([(1,), [2]],)),
             ("%s %r", (Text("v"), Text("v"))), ("%s %r %d", (Level.ONE,) * 3),
             ("%s %r %d", (Count(3),) * 3), ("%s %r %.1f", (Ratio(1.5),) * 3),
             ("%s %r", (Color.RED, Tone.LOW))]
    expected = []
    for fmt, args in calls:
        for _ in range(3):
            bridge.logger.info(fmt, *args)
            expected.append(fmt % args)
    assert [ev.message for ev in bridge.read()] == expected
    assert expected[:4] == ["(1, 2)"] * 3 + ["Col ('id', ('a', 'b'))"]
    assert expected[9:13] == ["custom-str custom-repr"] * 3 + ["1 <Level.ONE: 1> 1"]


def test_a_record_whose_argument_does_not_fit_its_conversion_keeps_format_and_reprs(bridge):
    # Proves: where logging itself fails (logging.info("%d items", "abc") prints "--- Logging
    # error ---"), the event shows the format and the arguments' repr (as the guide says),
    # on a site's first record and on the ones after it; the records that fit keep their
    # format and values. (Before, bread showed a {!TypeError ...} marker instead.)
    for arg in (3, "abc", 4, None, float("nan"), Color.RED, 2.5, Text("x"), Level.TWO):
        bridge.logger.info("%d items", arg)
    bridge.logger.info("%x then %c", 1.5, 65)    # a site whose first record does not fit
    bridge.logger.info("%c and %c", "ab", 0x110000)
    bridge.logger.info("%(n)d of %(n)s", {"n": "x"})
    bridge.logger.info("%e", 10**400)
    events = bridge.read()
    assert [ev.message for ev in events] == [
        "3 items", "%d items ('abc',)", "4 items", "%d items (None,)", "%d items (nan,)",
        "%d items (<Color.RED: 'r'>,)", "2 items", "%d items (custom-repr,)", "2 items",
        "%x then %c (1.5, 65)", "%c and %c ('ab', 1114112)", "%(n)d of %(n)s {'n': 'x'}",
        f"%e ({10**400},)"]
    fit = [events[i] for i in (0, 2, 6, 8)]
    assert {(ev.source.style, ev.source.format) for ev in fit} == {("%", "%d items")}
    assert [ev.args for ev in fit[:3]] == [(3,), (4,), (2.5,)]


def test_format_and_arguments_are_kept_not_the_text(bridge):
    # Proves: the bridge stores logging's format once (source) and the values per record.
    for i in range(3):
        bridge.logger.info("query %s took %.2f ms (%d%%)", "select", 1.5 * i, 50)
    events = bridge.read()
    assert [ev.message for ev in events] == [
        "query select took 0.00 ms (50%)", "query select took 1.50 ms (50%)",
        "query select took 3.00 ms (50%)"]
    src = events[0].source
    assert {ev.source.id for ev in events} == {src.id}
    assert (src.format, src.style, src.category) == ("query %s took %.2f ms (%d%%)", "%", "lib.db")
    assert (src.file, src.function) == (__file__, "test_format_and_arguments_are_kept_not_the_text")
    assert events[2].args == ("select", 3.0, 50)


def test_one_source_per_call_site(bridge):
    for _ in range(2):
        bridge.logger.info("a %s", 1)
        bridge.logger.info("a %s", 1)
    events = bridge.read()
    assert [ev.source.line for ev in events] == [events[0].source.line,
                                                 events[0].source.line + 1] * 2
    assert len({ev.source.id for ev in events}) == 2


def _functions_at_one_line(*names: str) -> list[Callable]:
    """Functions of these names, each compiled from a source of its own under one file
    name, each logging at its line 2 (as exec'd or generated code)."""
    made: dict = {}
    for name in names:
        exec(compile(f"def {name}(lg, v):\n    lg.info('v %s', v)\n", "<generated>", "exec"),
             made)
    return [made[name] for name in names]


@pytest.mark.parametrize("path", ["fast", "record"])
def test_two_functions_at_one_file_and_line_are_two_call_sites(hot_path, path):
    # Proves: the call site of a record is its function too, as logging names it
    # (record.funcName): the second function's events are not the first's, from their
    # first record on and once each site is known (the common case, in C where built).
    first, second = _functions_at_one_line("first", "second")

    def calls(lg: logging.Logger) -> None:
        for i in range(3):
            first(lg, i)
            second(lg, i)
    events, records = through(path, calls)
    assert [(ev.source.function, ev.source.file, ev.source.line, ev.message)
            for ev in events] == [(r.funcName, r.pathname, r.lineno, r.getMessage())
                                  for r in records]
    assert [ev.source.function for ev in events] == ["first", "second"] * 3


def test_mapping_arguments_become_fields_and_a_lone_mapping_stays_one_value(bridge):
    bridge.logger.warning("%(user)s did %(n)05d things", {"user": "bob", "n": 42, "x": 1})
    bridge.logger.info("state %s", {"a": 1})
    bridge.logger.info("%(missing)s", {"a": 1})
    a, b, c = bridge.read()
    assert (a.message, a.fields) == ("bob did 00042 things", {"user": "bob", "n": 42})
    assert (b.message, b.args) == ("state {'a': 1}", ({"a": 1},))
    assert c.message == "%(missing)s {'a': 1}"   # where logging reports a KeyError


def test_messages_without_arguments_are_kept_verbatim(bridge):
    # logging applies % only when there are arguments: "100%" and "%%" stay as they are.
    bridge.logger.info("disk 100% full, %% and {braces} kept")
    bridge.logger.info(ValueError("an object as the message"))
    a, b = bridge.read()
    assert a.message == "disk 100% full, %% and {braces} kept"
    assert a.source.format == a.message
    assert b.message == "an object as the message"


def test_extra_exc_info_and_stack_info_become_fields(bridge):
    bridge.logger.error("payment %s failed", "p1", extra={"request_id": "r-9", "amount": 3.5})
    try:
        {}["key"]
    except KeyError:
        bridge.logger.exception("lookup failed")
    bridge.logger.info("here", stack_info=True)
    a, b, c = bridge.read()
    assert (a.message, a.fields) == ("payment p1 failed", {"request_id": "r-9", "amount": 3.5})
    exc = b.fields["exception"]
    assert exc.type == "KeyError" and "{}[\"key\"]" in exc.traceback
    assert b.message == "lookup failed"
    assert c.fields["stack"].startswith("Stack (most recent call last):")


@pytest.mark.parametrize("path", ["fast", "record"])
def test_extra_named_exception_or_stack_stays_a_plain_field_beside_the_record_s_own(
        hot_path, path):
    # Proves: an extra key named as the record's exception or stack field keeps its value
    # as a plain field of its own (one more "_"), never in their place: the record's own
    # exception and stack, as logging has them, are kept beside it; the text never shows
    # the user's value as a traceback.
    def calls(lg: logging.Logger) -> None:
        lg.info("plain", extra={"exception": "Traceback (most recent call last):",
                                "stack": "not a stack"})
        try:
            {}["key"]
        except KeyError:
            lg.exception("failed", extra={"exception": "user text", "exception_": 1},
                         stack_info=True)
    events, records = through(path, calls)
    (a, b), (ra, rb) = events, records
    assert a.fields == {"exception_": ra.exception, "stack_": ra.stack}
    shown = PrettyPrinter(traceback=True).line(a, False)   # bread's text, tracebacks shown
    assert "\n" not in shown and "exception_='Traceback (most recent call last):'" in shown
    assert (b.fields["exception_"], b.fields["exception__"]) == (rb.exception, 1)
    assert b.fields["exception"].type == rb.exc_info[0].__name__ == "KeyError"
    # (the frames below it are through's: the plain logger's calls come from another line)
    assert b.fields["stack"].splitlines()[-2:] == rb.stack_info.splitlines()[-2:]
    assert b.fields["stack"].startswith("Stack (most recent call last):")
    assert b.message == rb.getMessage()


@pytest.mark.parametrize("path", ["fast", "record"])
def test_context_fields_never_replace_the_record_s_exception_or_stack(hot_path, path):
    # Proves: blog.context's fields come after the record's own (as after a call's own
    # fields): one named exception or stack does not take their place.
    def calls(lg: logging.Logger) -> None:
        with blog.context(exception="ctx", stack="ctx", job="j1"):
            lg.error("failed", exc_info=KeyError("k"), stack_info=True)
    events, records = through(path, calls)
    (ev,), (rec,) = events, records
    assert ev.fields["exception"].type == rec.exc_info[0].__name__ == "KeyError"
    assert ev.fields["stack"].startswith("Stack (most recent call last):")
    assert ev.fields["job"] == "j1"


@pytest.mark.parametrize("path", ["fast", "record"])
def test_a_mapping_argument_and_extra_of_one_key_keep_both_as_logging_does(hot_path, path):
    # Proves: where a mapping argument and extra (or the record's exception) name one key,
    # the message is the mapping's (logging's getMessage) and the field the record's
    # attribute, at a site's first record and after.
    def calls(lg: logging.Logger) -> None:
        for _ in range(2):
            lg.info("%(a)s and %(b)s", {"a": 1, "b": "x"}, extra={"a": 2})
            lg.error("%(exception)s", {"exception": "text"}, exc_info=ValueError("v"))
    events, records = through(path, calls)
    assert [(ev.message, ev.fields.get("a")) for ev in events] == [
        (r.getMessage(), getattr(r, "a", None)) for r in records]
    assert [ev.message for ev in events] == ["1 and x", "text"] * 2
    assert [ev.fields["exception"].type for ev in events[1::2]] == [
        r.exc_info[0].__name__ for r in records[1::2]]


@pytest.mark.parametrize("path", ["fast", "record"])
def test_an_extra_task_name_is_kept_where_logging_keeps_it(hot_path, path):
    # Proves: extra={"taskName": ...}, which logging takes on Python 3.11 (it has no
    # taskName of its own), is a field as any extra (it was dropped); on 3.12+ logging
    # refuses it, on both paths, and its own taskName is no field (as threadName).
    def calls(lg: logging.Logger) -> None:
        if sys.version_info >= (3, 12):
            with pytest.raises(KeyError):
                lg.info("in %s", "w", extra={"taskName": "w-1"})
        else:
            lg.info("in %s", "w", extra={"taskName": "w-1"})
        lg.info("outside")
    events, records = through(path, calls)
    own = sys.version_info >= (3, 12)
    assert [ev.fields for ev in events] == [
        {} if own or "taskName" not in vars(r) else {"taskName": r.taskName} for r in records]


def test_levels_map_to_the_nearest_severity():
    sev = blog.stdlib.severity_of
    assert [sev(n) for n in (0, 5, 7, 8, 10, 15, 20, 25, 26, 30, 40, 45, 50, 60, 100)] == [
        blog.Severity.TRACE, blog.Severity.TRACE, blog.Severity.TRACE, blog.Severity.DEBUG,
        blog.Severity.DEBUG, blog.Severity.DEBUG, blog.Severity.INFO, blog.Severity.INFO,
        blog.Severity.WARNING, blog.Severity.WARNING, blog.Severity.ERROR, blog.Severity.ERROR,
        blog.Severity.CRITICAL, blog.Severity.CRITICAL, blog.Severity.CRITICAL]


def test_a_custom_level_keeps_its_name(bridge):
    logging.addLevelName(25, "NOTICE")
    try:
        bridge.logger.log(25, "note %d", 1)
        (ev,) = bridge.read()
    finally:
        logging.addLevelName(25, "Level 25")
    assert (ev.severity, ev.message, ev.fields) == (blog.Severity.INFO, "note 1",
                                                    {"levelname": "NOTICE"})


def test_the_session_minimum_applies_to_records(bridge):
    bridge.logger.debug("first %d", 1)
    bridge.session.set_min_severity("info")
    bridge.logger.debug("first %d", 2)       # a known site: the common case checks too
    bridge.logger.debug("other %d", 3)
    bridge.logger.info("kept %d", 4)
    assert [ev.message for ev in bridge.read()] == ["first 1", "kept 4"]


def sources_written(bridge: Bridge) -> list[blog.EventSource]:
    """The EventSources the file's metadata describes."""
    entries = iter_entries(iter_frames(io.BytesIO(bridge.out.getvalue())))
    return [e for e in entries if isinstance(e, blog.EventSource)]


def test_a_message_that_changes_every_call_costs_one_source_per_call_site(bridge):
    # Proves (issue 26): logger.info(f"...") through the bridge, a new text at each call,
    # costs two sources per call site (its first text as format; then format {}, the text
    # its value), not one per text: before, each distinct text was a format (16 per site)
    # until the session's budget of source text filled. A message that never changes
    # stays one source whose events hold no value. The texts read back exactly, bread -g
    # finds them, and a site's records after its first take the fast path (C, or its
    # Python twin).
    slow = count_slow_records(bridge.handler)
    for i in range(10_000):
        bridge.logger.info(f"user {i} logged in"); text_line = sys._getframe().f_lineno
    for i in range(40):    # an f-string with arguments: its first format, then {}
        bridge.logger.info(f"item {i} at %s", "x"); args_line = sys._getframe().f_lineno
    for _ in range(3):
        bridge.logger.info("the same"); same_line = sys._getframe().f_lineno
    long = "x" * (blog.stdlib.MAX_LITERAL + 1)      # too long to be a format: as text
    bridge.logger.info(long); long_line = sys._getframe().f_lineno
    events = bridge.read()
    assert [ev.message for ev in events] == ([f"user {i} logged in" for i in range(10_000)]
                                             + [f"item {i} at x" for i in range(40)]
                                             + ["the same"] * 3 + [long])
    assert [(s.line, s.format) for s in sources_written(bridge)] == [
        (text_line, "user 0 logged in"), (text_line, "{}"), (args_line, "item 0 at %s"),
        (args_line, "{}"), (same_line, "the same"), (long_line, "{}")]
    assert [ev.args for ev in events[:2]] == [(), ("user 1 logged in",)]
    assert events[-2].args == ()
    assert len(slow) == 2 + 40 + 1 + 1
    hits = bread.read(io.BytesIO(bridge.out.getvalue()), grep=r"user 4242 ")
    assert [ev.message for ev in hits] == ["user 4242 logged in"]


def test_records_from_many_threads_all_arrive(bridge):
    # Proves: the handler takes no lock yet loses nothing: every thread logs through
    # its own writer.
    def work(t: int) -> None:
        for i in range(500):
            bridge.logger.info("t%d %d", t, i)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = sorted(ev.args for ev in bridge.read())
    assert got == sorted((t, i) for t in range(8) for i in range(500))


def test_bad_configuration_raises_clear_errors():
    with pytest.raises(ValueError, match="unknown logging level 'LOUD'.*WARNING"):
        blog.stdlib.capture(level="LOUD")
    with pytest.raises(ValueError, match="unknown logging level"):
        blog.stdlib.BlogHandler(level="LOUD")
    with pytest.raises(TypeError, match="needs a blog.Session, not StringIO"):
        blog.stdlib.BlogHandler(session=io.StringIO())
    with pytest.raises(TypeError, match="level must be"):
        blog.stdlib.capture(level=1.5)
    for options, cause in (({"level": "LOUD"}, "nknown level: 'LOUD'"),   # logging's check
                           ({"session": "ext://sys.stderr"}, "needs a blog.Session")):
        with pytest.raises(ValueError, match="Unable to configure handler 'b'") as e:
            logging.config.dictConfig({"version": 1, "handlers": {"b": {
                "class": "blog.stdlib.BlogHandler", **options}}})
        assert cause in str(e.value.__cause__)


def test_capture_warnings_logs_where_the_warning_points(hot_path):
    s = blog.Session()
    out = blog.MemoryOutputStream()
    blog.stdlib.capture_warnings(session=s)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("careful", DeprecationWarning, 1); line = sys._getframe().f_lineno
    finally:
        blog.stdlib.capture_warnings(False)
    s.consume(out)
    (ev,) = bread.read(io.BytesIO(out.getvalue()))
    assert (ev.category, ev.severity, ev.message) == ("py.warnings", blog.Severity.WARNING,
                                                      "DeprecationWarning: careful")
    assert (ev.source.file, ev.source.line) == (__file__, line)
    assert warnings.showwarning is not None and "blog" not in warnings.showwarning.__module__


_APP = '''
import json, logging.config, warnings
import blog, blog.stdlib
blog.basic_config("app.blog")
with open("logging.json") as f:
    logging.config.dictConfig(json.load(f))
import vendorlib
vendorlib.connect("db1", 3)
logging.getLogger("app").info("started %s", "ok")
logging.getLogger("app").debug("dropped: below the handler's level")
warnings.warn("old api")
blog.shutdown()
'''

_VENDOR = '''
import logging
log = logging.getLogger(__name__)

def connect(host, tries):
    log.warning("connecting to %s, %d tries left", host, tries)
'''


def test_dictconfig_routes_a_third_party_module_into_the_file(tmp_path):
    # Proves: a user's dictConfig naming blog.stdlib.BlogHandler sends the records of a
    # library that only knows logging to the blog file, each with its own call site.
    (tmp_path / "logging.json").write_text(json.dumps({
        "version": 1,
        "handlers": {"blog": {"class": "blog.stdlib.BlogHandler", "level": "INFO"}},
        "root": {"handlers": ["blog"], "level": "DEBUG"},
    }))
    (tmp_path / "vendorlib.py").write_text(textwrap.dedent(_VENDOR))
    (tmp_path / "app.py").write_text(textwrap.dedent(_APP).replace(
        "import vendorlib", "import vendorlib\nlogging.captureWarnings(True)"))
    r = subprocess.run(python_child("app.py"), cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    events = list(bread.read(str(tmp_path / "app.blog")))
    got = [(ev.category, ev.severity.name, ev.message) for ev in events]
    assert got[:2] == [("vendorlib", "WARNING", "connecting to db1, 3 tries left"),
                       ("app", "INFO", "started ok")]
    assert got[2][0] == "py.warnings" and "UserWarning: old api" in got[2][2]
    assert len(got) == 3
    src = events[0].source
    assert (src.file, src.line, src.function) == (str(tmp_path / "vendorlib.py"), 6, "connect")
    text = subprocess.run(python_child("-m", "bread", "-f", "%C %S %m", "app.blog"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60).stdout
    assert text.splitlines()[:2] == ["vendorlib WARN connecting to db1, 3 tries left",
                                     "app INFO started ok"]


def test_a_dictconfig_alone_configures_blog(tmp_path):
    # Proves (issue 26): BlogHandler takes a filename and basic_config's options, so a
    # dictConfig with no blog call configures the default session: a rotated set with its
    # minimum severity, which blog's own loggers write to too. The handler's "level" stays
    # logging's. A session given with them, or an option basic_config lacks, is refused.
    (tmp_path / "logs").mkdir()
    r = run_python('''
        import logging, logging.config
        logging.config.dictConfig({"version": 1, "handlers": {"blog": {
            "class": "blog.stdlib.BlogHandler", "filename": "logs/app.blog",
            "rotate_bytes": 1_000_000, "min_severity": "info", "level": "DEBUG"}},
            "root": {"handlers": ["blog"], "level": "DEBUG"}})
        log = logging.getLogger("app")
        log.debug("below the session's minimum %d", 1)
        log.info("started %s", "ok")
        import blog
        blog.get_logger("own").warning("blog's own call {}", 2)
    ''', tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    (path,) = (tmp_path / "logs").glob("app.*.blog")      # a file of the rotated set
    assert [(ev.category, ev.message) for ev in bread.read(str(path))] == [
        ("app", "started ok"), ("own", "blog's own call 2")]
    with pytest.raises(TypeError, match="filename and basic_config's options"):
        blog.stdlib.BlogHandler(session=blog.Session(), filename=str(tmp_path / "x.blog"))
    with pytest.raises(TypeError, match="rotate_byte"):
        blog.stdlib.BlogHandler(filename=str(tmp_path / "x.blog"), rotate_byte=1)
    assert not (tmp_path / "x.blog").exists()


def test_capture_routes_every_logger_and_is_idempotent(tmp_path):
    r = run_python('''
        import logging, blog, blog.stdlib
        blog.basic_config("x.blog")
        h1 = blog.stdlib.capture("INFO", replace=True)
        h2 = blog.stdlib.capture("DEBUG")
        assert h1 is h2 and logging.getLogger().handlers == [h1], logging.getLogger().handlers
        logging.getLogger("a.b").debug("d %s", 1)
        logging.getLogger("c").info("i %s", 2)
        logging.getLogger().removeHandler(h1)
        logging.getLogger("c").info("not captured")
        blog.shutdown()
    ''', tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    got = [(ev.category, ev.message) for ev in bread.read(str(tmp_path / "x.blog"))]
    assert got == [("a.b", "d 1"), ("c", "i 2")]


def test_decimal_and_rich_values_render_as_at_call_time(bridge):
    bridge.logger.info("%d %.3f %s %r", decimal.Decimal("7.9"), decimal.Decimal("1.23456"),
                       {1, 2}, [1, "a"])
    bridge.logger.info("%d", decimal.Decimal("1E+99999999"))
    a, b = bridge.read()
    assert a.message == "7 1.235 {1, 2} [1, 'a']"
    assert b.message.startswith("{!")     # logging's own % would build a 10⁸-digit int


def test_the_common_record_takes_the_fast_path_and_writes_what_the_slow_one_would(bridge):
    # Proves: after a call site's first record, a record of plain scalars goes through
    # the handler's fast path (C, or its Python twin) without the slow path, and reads
    # back the same as the first.
    slow = count_slow_records(bridge.handler)
    for i in range(50):
        bridge.logger.info("n=%d x=%s", i, "y" * (i % 3))
    events = bridge.read()
    assert len(slow) == 1
    assert [ev.message for ev in events] == [f"n={i} x={'y' * (i % 3)}" for i in range(50)]
    assert {ev.source.id for ev in events} == {events[0].source.id}
    assert all(ev.time.timestamp() > 1e9 for ev in events)   # the records' own times


def test_records_whose_values_fit_number_conversions_stay_on_the_c_path(bridge, hot_path):
    # Proves: the check that each value fits its conversion (%d, %x, %c...) costs the C
    # handler no Python frame for a record that fits; one that does not leaves it.
    if hot_path != "c":
        pytest.skip("the C fast path is not built or not in use")
    emitted = []
    emit = bridge.handler.emit
    for i in range(4):
        if i == 1:   # the site is known: from here, the Python handler counts what it gets
            bridge.handler.emit = lambda record: (emitted.append(record.args), emit(record))
        bridge.logger.info("%d %i %x %c %e %s %r", i, True, 255, 65 + i, 2, "s", None)
    bridge.logger.info("%d %i %x %c %e %s %r", 1.5, 1, 2, "c", 1.5, b"", ())
    bridge.logger.info("%d %i %x %c %e %s %r", "x", 1, 2, 3, 4, 5, 6)
    assert emitted == [(1.5, 1, 2, "c", 1.5, b"", ()), ("x", 1, 2, 3, 4, 5, 6)]
    assert bridge.read()[-1].message == "%d %i %x %c %e %s %r ('x', 1, 2, 3, 4, 5, 6)"


def test_messages_without_arguments_stay_on_the_c_path(bridge, hot_path):
    # Proves: a site's records without arguments, a new text each time, cost the C handler
    # no Python frame once the site's {} source is made (its second text), nor do those
    # of its first text.
    if hot_path != "c":
        pytest.skip("the C fast path is not built or not in use")

    def login(user: int) -> None:
        bridge.logger.info(f"user {user} logged in")

    login(0)
    login(1)
    in_python, emit = [], bridge.handler.emit
    bridge.handler.emit = lambda record: (in_python.append(record.msg), emit(record))
    for i in [*range(2, 50), 0]:
        login(i)
    assert in_python == []
    assert [ev.message for ev in bridge.read()] == [
        f"user {i} logged in" for i in [*range(50), 0]]


def test_a_filter_added_later_is_applied(bridge):
    bridge.logger.info("a %d", 1)
    bridge.handler.addFilter(lambda record: record.args[0] != 2)
    bridge.logger.info("a %d", 2)
    bridge.logger.info("a %d", 3)
    assert [ev.message for ev in bridge.read()] == ["a 1", "a 3"]


def test_a_subclass_s_emit_and_filters_set_later_always_apply(hot_path):
    # A review found: the C fast path skipped a subclass's emit (a redaction!) and read
    # the filters list the handler had when it was made.
    class Redacting(blog.stdlib.BlogHandler):
        def emit(self, record):
            record.args = tuple("***" if a == "secret" else a for a in record.args)
            super().emit(record)

    s = blog.Session()
    lg = logging.Logger("x", logging.INFO)
    lg.addHandler(Redacting(session=s))
    plain = blog.stdlib.BlogHandler(session=s)
    lg2 = logging.Logger("y", logging.INFO)
    lg2.addHandler(plain)
    for i in range(3):
        lg.info("password %s", "secret")
        lg2.info("n %d", i)
    plain.filters = [lambda r: r.args[0] != 1]     # a new list, not addFilter
    for i in range(3):
        lg2.info("n %d", i)
    out = blog.MemoryOutputStream()
    s.consume(out)
    events = list(bread.read(io.BytesIO(out.getvalue())))
    got = [ev.message for ev in events]
    # (the metadata may hold other tests' value types: the events are what is checked)
    assert got.count("password ***") == 3 and not any("secret" in repr(ev.args) for ev in events)
    assert [m for m in got if m.startswith("n ")] == ["n 0", "n 1", "n 2", "n 0", "n 2"]
    with pytest.raises(AttributeError):
        plain.session = blog.Session()


def test_records_other_handlers_formatted_first_still_take_the_fast_path(bridge):
    console = logging.StreamHandler(io.StringIO())
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    bridge.logger.handlers.insert(0, console)
    slow = count_slow_records(bridge.handler)
    for i in range(20):
        bridge.logger.info("n %d", i)
    assert len(slow) == 1
    assert [ev.message for ev in bridge.read()] == [f"n {i}" for i in range(20)]


def test_extra_with_keys_that_are_not_str(bridge):
    bridge.logger.info("int key", extra={1: "a"})
    (ev,) = bridge.read()
    assert ev.fields == {"1": "a"}


def test_an_error_inside_the_handler_goes_to_handle_error(bridge, capsys):
    class Odd(logging.Filter):
        def filter(self, record):
            record.lineno = [1]        # unhashable: the site key cannot be made
            return True

    bridge.logger.info("warm %s", 1)
    bridge.handler.addFilter(Odd())
    errors = []
    bridge.handler.handleError = lambda record: errors.append(record)
    bridge.logger.info("hi %s", 2)     # never raises into the caller
    assert len(errors) == 1


def test_a_record_whose_attributes_change_it_while_hashed_never_crashes(tmp_path):
    # Proves (a review's finding): the C handler holds the record's message, path, line,
    # level and name while it looks up their site: a str subclass whose hash replaces
    # the record's message (and reuses the freed memory) leaves the event the message it
    # had, and the process alive (run in a child: a crash would be a signal).
    r = run_python("""
        import io, logging
        import blog, blog.stdlib, bread
        s = blog.Session()
        out = blog.MemoryOutputStream()
        h = blog.stdlib.BlogHandler(session=s)
        def rec(msg):
            return logging.LogRecord("app", logging.INFO, "/p.py", 7, msg, (), None, "f")
        h.handle(rec("first " + str(1)))
        h.handle(rec("second " + str(2)))        # the site's "{}" source
        keep = []
        class Evil(str):
            step = 0
            record = None
            def __hash__(self):
                Evil.step += 1
                if Evil.step == 1:
                    Evil.record.msg = "replaced " + str(3)
                elif Evil.step == 2:
                    keep.extend("NEVER LOGGED " + "Z" * 47 + str(j % 10) for j in range(2000))
                return str.__hash__(self)
            __eq__ = str.__eq__
        r = rec("".join(["victim message ", "x" * 45]))
        r.pathname = Evil("/p.py")
        Evil.record = r
        h.handle(r)
        s.consume(out)
        print([e.message for e in bread.read(io.BytesIO(out.getvalue()))][-1])
    """, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in ("victim message " + "x" * 45, "replaced 3")
