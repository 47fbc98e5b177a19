"""Every argument type goes writer -> bytes -> reader and comes back equal, with the exact
message."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import math
import typing
import uuid
import zoneinfo
from decimal import Decimal

import pytest
import pytz

import bread

from bread import (DataclassValue, EnumValue, ExceptionValue, FrozenSetValue, OpaqueValue,
                   SetValue)

from helpers import c_path_handbacks, count_slow_calls, python_child, reader_zones, texts_kept


class Color(enum.Enum):
    RED = 1
    GREEN = "g"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: list


class Custom:
    def __str__(self) -> str:
        return "custom!"

    def __format__(self, spec: str) -> str:
        return f"<{spec}>"


UTC = dt.timezone.utc
PLAIN_VALUES = [
    None, True, False, 0, -1, 2**63 - 1, -2**63, 2**64 - 1, 2**200, -2**200,
    0.0, -0.0, 1.5, 1e308, float("inf"), float("-inf"),
    "", "hello", "ünïcödé ✓", "nul\x00inside", "\ud800 lone surrogate",
    b"", b"\x00\xffbytes",
    [], [1, "a", [2.5, None]], (), (1,), (1, (2, 3)), {}, {"a": 1, 2: "b", (1, 2): [3]},
    {1, 2, 3}, frozenset({"x"}), set(),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 1, 12, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
    dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1), "CET")),
    dt.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    pytz.timezone("America/New_York").localize(dt.datetime(2024, 3, 10, 1, 30)),
    dt.date(1999, 12, 31), dt.time(1, 2, 3, 4), dt.time(1, 2, tzinfo=UTC),
    dt.timedelta(days=-1, seconds=5, microseconds=7),
    Decimal("1.10"), Decimal("-0"), Decimal("NaN"), Decimal("1E+3"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, Decimal) and a.is_nan():
        return isinstance(b, Decimal) and b.is_nan()
    # Sets read back as bread.SetValue / FrozenSetValue: equal, shown in the logged order.
    base = {SetValue: set, FrozenSetValue: frozenset}.get(type(a), type(a))
    return base is type(b) and a == b


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=repr)
def test_builtin_and_stdlib_values_round_trip(logged, value):
    logged.log.info("v={} r={!r}", value, value)
    [ev] = logged.read()
    assert _same(ev.args[0], value), (ev.args[0], value)
    assert ev.message == "v={} r={!r}".format(value, value)


def test_datetime_keeps_its_zone(logged):
    paris = dt.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    fixed = dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=3), "MSK"))
    logged.log.info("{} {}", paris, fixed)
    [ev] = logged.read()
    assert ev.args[0].utcoffset() == dt.timedelta(hours=2)
    assert ev.args[0].tzname() == "CEST"
    assert ev.args[1].tzname() == "MSK" and ev.args[1] == fixed


def test_nan_round_trips(logged):
    logged.log.info("{} {:.3f}", math.nan, math.nan)
    [ev] = logged.read()
    assert math.isnan(ev.args[0]) and ev.message == "nan nan"


def test_float_specs_render_exactly(logged):
    logged.log.info("{:.2f} {:>10} {:e} {:,}", 101.256, 3.5, 12345.678, 10**9)
    [ev] = logged.read()
    assert ev.message == "{:.2f} {:>10} {:e} {:,}".format(101.256, 3.5, 12345.678, 10**9)


def test_enums_are_structured_and_render_as_at_call_time(logged):
    logged.log.info("{} {} {!r} {:>6}", Color.RED, Level.HIGH, Color.GREEN, Level.LOW)
    [ev] = logged.read()
    assert ev.args[0] == EnumValue(f"{__name__}.Color", "RED", 1)
    assert ev.args[1] == EnumValue(f"{__name__}.Level", "HIGH", 2)
    assert ev.message == "{} {} {!r} {:>6}".format(Color.RED, Level.HIGH, Color.GREEN, Level.LOW)


def test_dataclasses_are_structured(logged):
    p = Point(1, 2.5, ["a"])
    logged.log.info("at {}", p)
    [ev] = logged.read()
    assert ev.args[0] == DataclassValue(f"{__name__}.Point", {"x": 1, "y": 2.5, "tags": ["a"]})
    assert ev.message == f"at {p}"


def test_exceptions_keep_type_message_and_traceback(logged):
    try:
        raise KeyError("missing")
    except KeyError as exc:
        logged.log.error("failed: {}", exc)
    [ev] = logged.read()
    value = ev.args[0]
    assert isinstance(value, ExceptionValue)
    assert value.type == "KeyError" and value.message == "'missing'"
    assert "raise KeyError" in value.traceback
    assert ev.message == "failed: 'missing'"


def test_log_exception_attaches_current_traceback(logged):
    try:
        1 / 0
    except ZeroDivisionError:
        logged.log.exception("ratio {}", "x")
    [ev] = logged.read()
    assert ev.severity.name == "ERROR"
    assert ev.message == "ratio x"
    exc = ev.fields["exception"]
    assert exc.type == "ZeroDivisionError" and "1 / 0" in exc.traceback


def test_unknown_types_are_captured_as_text_never_pickled(logged):
    c = Custom()
    logged.log.info("{} {:abc} {!s}", c, c, c)
    [ev] = logged.read()
    assert ev.args[0] == OpaqueValue(f"{__name__}.Custom", "custom!")
    assert ev.message == "<> <abc> custom!"


def test_broken_str_does_not_break_the_call(logged):
    class Broken:
        def __str__(self):
            raise RuntimeError("no")

        __format__ = object.__format__

    logged.log.info("{!r}", [1])  # a sibling event still arrives
    logged.log.info("{}", Broken())
    evs = logged.read()
    assert len(evs) == 2
    assert "unprintable" in evs[1].args[0].text


def test_self_referencing_list_is_captured_as_text(logged):
    a = [1]
    a.append(a)
    logged.log.info("{}", a)
    [ev] = logged.read()
    assert ev.message == "[1, [...]]"


def test_values_are_captured_at_call_time(logged):
    items = [1, 2]
    d = {"k": [1]}
    logged.log.info("{} {}", items, d)
    items.append(3)
    d["k"].append(2)
    [ev] = logged.read()
    assert ev.args == ([1, 2], {"k": [1]})
    assert ev.message == "[1, 2] {'k': [1]}"


def test_str_and_int_subclasses_keep_message(logged):
    class Name(str):
        def __format__(self, spec):
            return "N:" + str.__format__(self, spec)

    logged.log.info("{} {}", Name("bob"), Level.LOW)
    [ev] = logged.read()
    assert ev.args[0] == "bob" and ev.message == "N:bob 1"


def test_keyword_fields(logged):
    logged.log.warning("disk {} at {}% on {host}", "/", 93.5, host="db1", dc="eu")
    [ev] = logged.read()
    assert ev.args == ("/", 93.5)
    assert ev.fields == {"host": "db1", "dc": "eu"}
    assert ev.message == "disk / at 93.5% on db1"


def test_the_c_call_path_keeps_each_site_after_its_first_call(monkeypatch, make_logged,
                                                              hot_path):
    # Proves the C Method reads the site entries the Python code makes (blog's SiteEntry):
    # after a site's first call, its plain and keyword calls stay in C, and read back.
    python_calls = c_path_handbacks(monkeypatch, hot_path)
    logged = make_logged()
    for i in range(5):
        logged.log.info("order {} filled at {}", i, 1.5)
        logged.log.info("order {oid} at {px!r}", oid=i, px=2.5)
    assert len(python_calls) == 2     # each site's first call: it makes the site's entry
    assert [e.message for e in logged.read()][-2:] == ["order 4 filled at 1.5",
                                                       "order 4 at 2.5"]


def test_keyword_calls_after_the_first_take_the_fast_path(monkeypatch, make_logged):
    # Proves: a call site with keyword fields registers once; its later calls (plain
    # values) never reach the slow path, on the C path and the Python one, and each is
    # read back with its own values. A call with other keywords, or the same ones in
    # another order, is another source.
    slow_calls = count_slow_calls(monkeypatch)
    logged = make_logged()        # its level methods are made with the counting _slow
    for i in range(5):
        logged.log.info("order {oid} filled", oid=i, px=1.5 * i, venue="X")
        logged.log.info("order filled", oid=i, venue="X", px=1.5 * i)
    assert slow_calls == ["order {oid} filled", "order filled"]
    d = {"b": 2, "a": 1}
    logged.log.info("kw {a} {b}", **d)
    logged.log.info("kw {a} {b}", **dict(reversed(d.items())))
    evs = logged.read()
    assert [(e.fields["oid"], e.fields["px"], e.fields["venue"]) for e in evs[:10]] == [
        (i, 1.5 * i, "X") for i in range(5) for _ in range(2)]
    assert [e.message for e in evs[:2]] == ["order 0 filled", "order filled"]
    assert [list(e.fields) for e in evs[10:]] == [["b", "a"], ["a", "b"]]
    assert [e.message for e in evs[10:]] == ["kw 1 2", "kw 1 2"]
    assert evs[10].source.id != evs[11].source.id


def test_literal_braces_and_conversions(logged):
    logged.log.info("{{literal}} {!r} {!a} {name!r:>8}", "x", "é", name="n")
    [ev] = logged.read()
    assert ev.message == "{literal} 'x' '\\xe9'      'n'"


def test_sets_read_back_in_the_order_they_were_logged_under_any_hash_seed(tmp_path):
    # Proves: a set's text is not stored (it costs nothing per call) yet the message is
    # exactly str(set) at call time, read by a process whose string hashes differ (the
    # order of a set of strs depends on the hash seed).
    import subprocess
    import textwrap
    path = tmp_path / "s.blog"
    code = textwrap.dedent(f"""
        import blog
        blog.basic_config({str(path)!r})
        log = blog.get_logger()
        for k in range(20):
            s = {{f"w{{i}}" for i in range(k)}}
            log.info("set {{}} frozen {{!r}} in {{}}", s, frozenset(s), [s])
            print(f"set {{s}} frozen {{frozenset(s)!r}} in {{[s]}}")
    """)
    want = []
    for seed in ("1", "2"):
        r = subprocess.run(python_child("-c", code), capture_output=True, text=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        want += r.stdout.splitlines()
    import bread
    evs = list(bread.read(str(path)))
    assert [e.message for e in evs] == want
    assert evs[5].args[0] == {f"w{i}" for i in range(5)}
    assert len(set(want[:20]) ^ set(want[20:])) > 0    # the seeds did order them apart


def test_zoned_datetimes_render_as_logged_even_where_the_zone_rules_differ(logged,
                                                                          monkeypatch):
    # Proves: a datetime in a zoneinfo zone needs no stored text under {} and {:spec}
    # (its str and strftime come from the file); under !r its text is kept. A reader
    # whose zone rules give another offset keeps the logged (fixed) form, so the message
    # stays exact.
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    when = dt.datetime(2026, 11, 26, 14, 30, 5, 123456, tzinfo=paris)
    logged.log.info("at {} {:%H:%M %Z} {!r}", when, when, when)
    logged.log.info("at {}", when)
    want = "at {} {:%H:%M %Z} {!r}".format(when, when, when)
    a, b = logged.read()
    assert a.message == want and b.message == f"at {when}"
    assert a.args[0] == when and a.args[0].tzinfo is paris
    reader_zones(monkeypatch, lambda tz: zoneinfo.ZoneInfo("Asia/Tokyo"))
    import bread
    import io
    [_, b2] = bread.read(io.BytesIO(logged.out.getvalue()))
    assert b2.message == f"at {when}" and b2.args[0] == when
    assert b2.args[0].utcoffset() == when.utcoffset()


class Plain(enum.Enum):
    ONE = 1
    TWO = "two"


class Named(str, enum.Enum):
    A = "a"


class Num(enum.IntEnum):
    N = 7


class Word(enum.StrEnum):
    W = "w"


class Perm(enum.Flag):
    R = 1
    W = 2


class Loud(enum.Enum):
    X = 1

    def __str__(self) -> str:
        return "LOUD"


ENUM_CASES = [Plain.ONE, Plain.TWO, Named.A, Num.N, Word.W, Perm.R, Perm.R | Perm.W, Loud.X]


@pytest.mark.parametrize("member", ENUM_CASES, ids=repr)
def test_enum_members_show_as_logged(logged, member):
    # Proves: every way of showing an enum member reads back as the writer showed it;
    # for Enum, IntEnum and StrEnum members without any text stored per call (the
    # value's style says how its class shows it), for a Flag or an overriding class
    # with the text kept.
    fmt = "{} {!r} {!s} {!a} {:>12} [{}]"
    logged.log.info(fmt, member, member, member, member, member, [member])
    [ev] = logged.read()
    assert ev.message == fmt.format(member, member, member, member, member, [member])
    assert ev.args[0] == bread.EnumValue(f"{__name__}.{type(member).__name__}",
                                         member.name, member.value)
    derived = not isinstance(member, (Perm, Loud))
    assert (not texts_kept(ev)) == derived, texts_kept(ev)   # no text per call where derived


@dataclasses.dataclass
class Order:
    oid: int
    px: float
    secret: str = dataclasses.field(default="s3", repr=False)
    legs: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Custom_repr:
    a: int

    def __repr__(self) -> str:
        return f"CR<{self.a}>"


@dataclasses.dataclass
class Custom_str:
    a: int

    def __str__(self) -> str:
        return "CS"


class Leg(typing.NamedTuple):
    sym: str
    qty: int


Pair = collections.namedtuple("Pair", "left right")


class LegR(typing.NamedTuple):
    sym: str

    def __repr__(self) -> str:
        return "LEG!"


RECORD_CASES = [Order(7, 101.25, legs=[Leg("A", 1)]), Custom_repr(1), Custom_str(2),
                Leg("AAPL", 100), Pair(Order(1, 2.0), {3}), LegR("X")]


@pytest.mark.parametrize("value", RECORD_CASES, ids=lambda v: type(v).__name__)
def test_dataclasses_and_named_tuples_show_as_logged(logged, value):
    # Proves: a dataclass or named tuple shown by its generated repr needs no text per
    # call (the value carries the name its repr shows and which fields); one whose
    # class overrides __repr__ or __str__ keeps its text; all read back as their fields.
    fmt = "{} {!r} {!s} [{}]"
    logged.log.info(fmt, value, value, value, [value])
    evs = logged.read()
    assert evs[0].message == fmt.format(value, value, value, [value])
    v = evs[0].args[0]
    assert isinstance(v, bread.DataclassValue)
    assert v.type == f"{__name__}.{type(value).__qualname__}"
    derived = type(value) not in (Custom_repr, Custom_str, LegR)
    assert (not texts_kept(evs[0])) == derived, texts_kept(evs[0])


def test_the_structured_example_runs_and_reads_back(tmp_path):
    # examples/structured.py, as a user runs it: fields, a dataclass, named tuples, a
    # set, a zoned datetime and an exception, each read back with its exact message.
    import os
    import subprocess
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(python_child(os.path.join(here, "examples", "structured.py"),
                        str(tmp_path / "s.blog")), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "fill Fill(order_id=12345, px=Decimal('101.25'), qty=150, side=<Side.BUY: 'buy'>)" \
        " legs [Leg(symbol='AAPL', qty=100), Leg(symbol='MSFT', qty=50)]" in out
    assert "'account': 'acct-7'" in out and " at 14:30 CET" in out
    assert "ValueError: order 12345: qty 150 over the limit" in out and \
        "frames: ['main', 'settle']" in out
