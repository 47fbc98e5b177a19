"""The C call paths encode rich values (lists, tuples, dicts, datetimes, Decimal, UUID...)
byte for byte as the Python reference (blog/pipeline/richvalues.py, blogformat/valueencoding.py)
does: a property test over random nested values, and the values it leaves to Python."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import io
import logging
import os
import typing
import uuid
import zoneinfo
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blog
import blog.stdlib
import bread
from blog import accel
from blog.pipeline.richvalues import encode_with_texts
from blogformat.valueencoding import enum_type, record_type

from helpers import Count, Ratio, Text, python_path

#: The tests that compare the C encoder itself with the Python one (the others run on both
#: paths: on the pure-Python one they hold the reference to the same promises).
c_only = pytest.mark.skipif(accel.speedups is None, reason="the C fast path is not built")

UTC = dt.timezone.utc
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1),
                    st.floats(allow_nan=True), st.text(max_size=40), st.binary(max_size=40))
class Shade(enum.Enum):
    DARK = 1
    LIGHT = "light"


class Size(enum.IntEnum):
    S = 1
    L = 3


class Tone(enum.StrEnum):
    LOW = "low"


@dataclasses.dataclass
class Fill:
    oid: int
    px: float
    tag: str = dataclasses.field(default="t", repr=False)


class Leg(typing.NamedTuple):
    sym: str
    qty: int


MEMBERS = [*Shade, *Size, *Tone]
for _cls in (Shade, Size, Tone):
    enum_type(_cls)                       # as the Python path records a class it meets
for _cls in (Fill, Leg):
    record_type(_cls)
encode_with_texts(None, tuple(MEMBERS), ())         # and describes each member it meets

atoms = st.one_of(
    scalars, st.sampled_from(MEMBERS), st.datetimes(timezones=st.sampled_from([None, UTC])),
    st.dates(), st.times(timezones=st.sampled_from([None, UTC])), st.timedeltas(),
    st.decimals(allow_nan=True, allow_infinity=True), st.uuids())
keys = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.text(max_size=10),
                 st.dates(), st.uuids(), st.sampled_from([Shade.DARK, Size.L]))
values = st.recursive(atoms, lambda inner: st.one_of(
    st.builds(Fill, st.integers(0, 10**6), st.floats(allow_nan=False), st.text(max_size=5)),
    st.builds(Leg, st.text(max_size=5), st.integers(-5, 5)),
    st.lists(inner, max_size=20), st.lists(inner, max_size=20).map(tuple),
    st.dictionaries(keys, inner, max_size=10), st.sets(keys, max_size=10),
    st.frozensets(keys, max_size=10)), max_leaves=60)
ZONES = [zoneinfo.ZoneInfo(k) for k in ("Europe/Paris", "America/New_York", "Asia/Kolkata",
                                         "Australia/Lord_Howe", "UTC")]
#: An argument's top may also be a datetime in a zoneinfo zone (folds and gaps included).
arguments = st.one_of(values, st.datetimes(timezones=st.sampled_from(ZONES)))


#: Subclasses of int, float and str with their own text (which the C encoder leaves to
#: Python), at the top of an argument or in a container.
subclassed = st.one_of(st.text(max_size=5).map(Text), st.integers(-2**63, 2**63).map(Count),
                       st.floats().map(Ratio))
own_text = st.one_of(subclassed, st.lists(subclassed, max_size=3),
                     st.lists(subclassed, max_size=3).map(tuple))


def _c(values: tuple) -> bytes | None:
    return accel.speedups.encode_values(values)


def _python(values: tuple) -> bytes:
    n, body = encode_with_texts(None, values, ())
    assert n == 3           # no texts: every one of these values renders from the file
    return body


@c_only
@settings(max_examples=400, deadline=None)
@given(st.lists(arguments, max_size=5).map(tuple))
def test_the_c_encoding_of_rich_values_is_the_python_one(vals):
    got = _c(vals)
    assert got is not None, vals        # every value of these types is encoded in C
    assert got == _python(vals)


@c_only
def test_a_zoned_datetime_shown_by_repr_or_nested_is_left_to_python():
    # Its repr names the zone's tzinfo, which a reader may not have: its text is kept,
    # by the Python path. At the top of a value shown by {} or {:spec}, C encodes it.
    when = dt.datetime(2026, 3, 29, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    assert _c((1, when)) == _python((1, when))
    assert accel.speedups.encode_values((1, when), 0b10) is None
    assert accel.speedups.encode_values((1, when), 0b01) == _python((1, when))
    assert _c(([when],)) is None and _c(((when,),)) is None


class Color(enum.Enum):         # never met by the Python path: not known to C
    RED = 1


class Flagged(enum.Flag):
    A = 1


class MyList(list):
    pass


@c_only
@pytest.mark.parametrize("value", [
    Color.RED, Flagged.A, 2**64, -2**63 - 1, "lone \ud800", MyList([1]),
    bytearray(b"x"), dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    dt.time(1, tzinfo=dt.timezone(dt.timedelta(hours=-3))), [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]],
    [1, {2.5j}], ({"a": Color.RED},), object(), {Color.RED}, type("S", (set,), {})()])
def test_values_the_c_path_leaves_to_python(value):
    # A set, an enum, an int beyond 64 bits, a subclass, a zoned datetime, a nesting
    # deeper than 16... : the whole event goes to the Python path (which keeps texts
    # where the reader needs them), never a partial C encoding.
    assert _c((1, value)) is None


def test_the_fast_path_logs_rich_values_as_the_reader_reads_them(logged, hot_path):
    # Proves, end to end on this run's hot path: values encoded by the call path read
    # back equal, messages exact, captured at the call (a mutation afterwards is not seen).
    legs = [1, (2, "b"), {"k": Decimal("1.10")}]
    when = dt.datetime(2026, 11, 26, 14, 30, 5, 123, tzinfo=UTC)
    uid = uuid.UUID(int=2**127 + 5)
    for _ in range(3):
        logged.log.info("legs {} at {} id {} took {}", legs, when, uid, dt.timedelta(seconds=3))
    legs.append("later")
    evs = logged.read()
    assert [e.args for e in evs] == [([1, (2, "b"), {"k": Decimal("1.10")}], when, uid,
                                      dt.timedelta(seconds=3))] * 3
    assert evs[0].message == ("legs [1, (2, 'b'), {'k': Decimal('1.10')}] at "
                              "2026-11-26 14:30:05.000123+00:00 id "
                              "80000000-0000-0000-0000-000000000005 took 0:00:03")


@settings(max_examples=int(os.environ.get("PARITY_EXAMPLES", 150)), deadline=None)
@given(st.lists(st.one_of(arguments, own_text), min_size=1, max_size=3).map(tuple),
       st.lists(st.sampled_from(["{}", "{!r}", "{!s}", "{!a}"]), min_size=3, max_size=3),
       st.booleans())
def test_messages_read_back_as_str_format_gave_them(vals, forms, in_context):
    # Proves, for random nested values of every type the C path encodes (enum members,
    # dataclasses, named tuples, sets, zoned datetimes...) and subclasses of int, float
    # and str with their own text: the message bread reads is exactly what str.format
    # gave at the call, texts stored or derived; in a context (blog.context) too.
    fmt = " | ".join(forms[:len(vals)]) + (" | {ctx!r}" if in_context else "")
    s = blog.Session()
    out = blog.MemoryOutputStream()
    log = s.get_logger()
    with blog.context(ctx=vals) if in_context else contextlib.nullcontext():
        for _ in range(3):              # the first call registers, the others take the cache
            log.info(fmt, *vals)
    s.consume(out)
    want = fmt.format(*vals, ctx=vals)
    assert [e.message for e in bread.read(io.BytesIO(out.getvalue()))] == [want] * 3


@c_only
def test_the_c_and_the_python_bridge_write_the_same_events(monkeypatch):
    # Proves: a logging record through the C handler and channel is the event the pure-
    # Python ones write, on each record of a call site (the Python channel once wrote a
    # tuple as a list, a subclass or an IntEnum member as its base value, from the second
    # on): tuples, nested too, subclasses with their own text, enum members, values a
    # conversion does not take.
    calls = [("%s", ((1, 2),)), ("Col %r", (("id", ("a", "b")),)), ("%r", ([(1,), [2]],)),
             ("%s %r %d", (Count(3),) * 3), ("%s %r %.1f", (Ratio(1.5),) * 3),
             ("%s %r %c", (Text("v"), Text("v"), Text("v"))), ("%s %r %d", (Size.L,) * 3),
             ("%s %r", (Shade.LIGHT, Tone.LOW)), ("%d items", ("abc",)), ("%x %s", (2.5, 1))]

    def written() -> list[tuple]:
        s = blog.Session()
        out = blog.MemoryOutputStream()
        lg = logging.Logger("parity", logging.INFO)
        lg.addHandler(blog.stdlib.BlogHandler(session=s))
        for fmt, args in calls:
            for _ in range(3):
                lg.info(fmt, *args)
        s.consume(out)
        return [(e.source.format, e.source.style, repr(e.args), e.message)
                for e in bread.read(io.BytesIO(out.getvalue()))]
    c = written()
    python_path(monkeypatch)
    assert written() == c
    assert [m for *_, m in c[:6:3]] == ["(1, 2)", "Col ('id', ('a', 'b'))"]


@c_only
def test_the_c_and_the_python_paths_write_the_same_exceptions(monkeypatch):
    # Proves: an exception group, a SyntaxError, exc_info=True outside an except block and
    # an exception never raised read back the same through the C handler, logger and
    # channel as through the pure-Python ones (extension 13 is always encoded by
    # blogformat.valueencoding: C leaves it to Python).
    def written() -> list[tuple]:
        s = blog.Session()
        out = blog.MemoryOutputStream()
        lg = logging.Logger("parity", logging.INFO)
        lg.addHandler(blog.stdlib.BlogHandler(session=s))
        log = s.get_logger()
        lg.error("outside", exc_info=True)
        log.exception("outside")
        lg.error("never", exc_info=ValueError("boom"))
        for source in ("x = = 1\n", "def f():\nreturn 1\n"):
            try:
                try:
                    compile(source, "m.py", "exec")
                except SyntaxError as e:
                    raise ExceptionGroup("g", [e, ExceptionGroup("h", [KeyError(1)])])
            except ExceptionGroup as eg:
                lg.error("group", exc_info=True)
                log.error("group", err=eg)
        s.consume(out)
        return [(e.message, e.fields) for e in bread.read(io.BytesIO(out.getvalue()))]
    c = written()
    python_path(monkeypatch)
    assert written() == c


# --- What a review found (each failed before its fix) ---------------------------------


def test_code_that_changes_a_value_while_it_is_encoded_never_crashes(logged):
    # A dataclass field read through a property that empties a list being logged: the
    # C path leaves such classes to Python (no code of the application runs while C
    # encodes), and holds every item it encodes.
    victim = [object() for _ in range(50)] + [1]

    @dataclasses.dataclass
    class Base:
        x: int

    class Sneaky(Base):
        @property
        def x(self):
            victim.clear()
            return 1

        @x.setter
        def x(self, v):
            pass
    for _ in range(3):
        victim[:] = [[i] for i in range(50)]
        logged.log.info("v {} {}", victim, Sneaky(1))
    assert len(logged.read()) == 3


def test_an_int_enum_whose_value_is_not_its_int_keeps_its_text(logged):
    class Code(enum.IntEnum):
        def __new__(cls, num, label):
            obj = int.__new__(cls, num)
            obj._value_ = label
            return obj
        OK = (200, "ok")
    for _ in range(2):
        logged.log.info("{} {:>5}", Code.OK, Code.OK)
    assert [e.message for e in logged.read()] == ["200   200"] * 2


def test_an_enum_member_of_a_mutable_value_is_encoded_at_each_call(logged):
    class E(enum.Enum):
        A = [1]
    enum_type(E)
    for i in range(3):
        E.A.value.append(i)
        logged.log.info("{!r}", E.A)
    assert [e.message for e in logged.read()] == [
        "<E.A: [1, 0]>", "<E.A: [1, 0, 1]>", "<E.A: [1, 0, 1, 2]>"]


def test_records_and_enums_as_set_members_or_keys_read_back_as_logged(logged):
    p = Leg("A", 1)
    for _ in range(2):
        logged.log.info("{} {} {}", {p}, frozenset({(p, 3)}), {Shade.DARK: 1, p: 2})
    want = "{} {} {}".format({p}, frozenset({(p, 3)}), {Shade.DARK: 1, p: 2})
    assert [e.message for e in logged.read()] == [want] * 2


def test_a_dict_changed_by_another_thread_while_logged_never_corrupts_the_log(logged):
    # The Python path packs through a hook (Python code: the GIL passes); another thread
    # changing a dict meanwhile could make its bytes inconsistent. They are checked.
    import threading
    d = {i: (i,) for i in range(200)}
    stop = threading.Event()

    def mutate():
        k = 1000
        while not stop.is_set():
            d[k] = (k,)
            d.pop(k - 100, None)
            k += 1
    t = threading.Thread(target=mutate)
    t.start()
    try:
        for i in range(300):
            logged.log.info("d {} {}", i, d)
    finally:
        stop.set()
        t.join()
    evs = logged.read()
    assert [e.args[0] for e in evs] == list(range(300))


def test_records_of_their_own_repr_keep_their_text_on_every_call(logged):
    # From a site's second call on (the C path's): a dataclass with repr=False, a named
    # tuple or a dataclass subclass with its own __repr__, in a container or not.
    @dataclasses.dataclass(repr=False)
    class NoRepr:
        a: int

    class NT(typing.NamedTuple):
        a: int

        def __repr__(self) -> str:
            return "custom"

    @dataclasses.dataclass
    class B:
        x: int

    class B2(B):
        def __repr__(self) -> str:
            return "B!"

    @dataclasses.dataclass(frozen=True)
    class DP:
        size: str

    class Creature(DP, enum.Enum):
        DOG = "medium"
    vals = (NoRepr(1), [NT(1)], (B2(1),), [Creature.DOG])
    for _ in range(3):
        logged.log.info("{} {} {} {}", *vals)
    want = "{} {} {} {}".format(*vals)
    assert [e.message for e in logged.read()] == [want] * 3
