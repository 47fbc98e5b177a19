"""bread keeps reading the files of every format version: the committed golden files.

``tests/data/vN/*.blog`` were written once by the blog of format version N
(``tests/data/make_golden.py``) and are never regenerated. For each one, the
committed ``NAME.txt`` (default format), ``NAME.m.txt`` (``-f "%S %C %n %m"``),
``NAME.stderr`` and ``NAME.json`` (``{"exit": N}``) are what bread printed
then (``NAME.py313.txt`` what it printed on 3.13, where that differs: its ``traceback``
draws more position markers), into a file (as ``--escape never`` prints now);
bread must print exactly that, forever. The library tests below also check
decoded values, so that a change that renders the same but decodes differently
fails too.

These tests read only the committed files. bread renders ``%d`` in the
writer's zone recorded in the file (Asia/Kolkata, UTC+05:30, for v1), so the
output does not depend on the zone of the machine that runs them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

import bread
from bread import cli

DATA = Path(__file__).parent / "data"
GOLDEN = sorted(DATA.glob("v*/*.blog"))
V1 = DATA / "v1"
MINIMAL_FORMAT = ["-f", "%S %C %n %m"]
# The outputs were made into a file, when bread escaped only on a terminal: as logged (the
# default escapes since, wherever the output goes; every_type has a BEL in a message).
RAW = ["--escape", "never"]
EXPECTED = {".txt": RAW, ".m.txt": [*RAW, *MINIMAL_FORMAT]}   # stdout file -> bread options
UTC = dt.timezone.utc
IST = dt.timedelta(hours=5, minutes=30)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def companion(blog_file: Path, suffix: str) -> Path:
    return blog_file.with_name(blog_file.name[: -len(".blog")] + suffix)


def expected_text(blog_file: Path, suffix: str) -> Path:
    """The text bread printed then: ``NAME.pyXY.txt`` where one was made on this Python
    (the position markers under a source line are drawn by the reading Python's
    ``traceback``, and 3.13 marks calls that 3.11 left bare), else ``NAME.txt``."""
    own = companion(blog_file, f".py{sys.version_info[0]}{sys.version_info[1]}{suffix}")
    return own if own.is_file() else companion(blog_file, suffix)


# --- the golden set itself ---------------------------------------------------------------

def test_golden_files_are_all_there():
    """A golden file is never deleted, and each has all its expected outputs."""
    assert {p.name for p in V1.glob("*.blog")} >= {
        "every_type.blog", "two_writers.blog", "dropped.blog"}
    for path in GOLDEN:
        for suffix in (*EXPECTED, ".stderr", ".json"):
            assert companion(path, suffix).is_file(), f"{_id(path)} has no {suffix} file"


# --- bread's output, byte for byte -------------------------------------------------------

@pytest.mark.parametrize("suffix", list(EXPECTED))
@pytest.mark.parametrize("path", GOLDEN, ids=_id)
def test_bread_prints_what_it_printed_then(path, suffix, capsysbinary, monkeypatch):
    monkeypatch.chdir(path.parent)   # the file is named as it was when the output was made
    status = cli.main([*EXPECTED[suffix], path.name])
    out, err = capsysbinary.readouterr()
    assert out == expected_text(path, suffix).read_bytes()
    assert err == companion(path, ".stderr").read_bytes()
    assert status == json.loads(companion(path, ".json").read_text("ascii"))["exit"]


# --- decoded values of v1 ----------------------------------------------------------------

@pytest.fixture(scope="module")
def every_type():
    """(reader, {format string: [events]}) of v1/every_type.blog."""
    reader = bread.read(V1 / "every_type.blog")
    by_format: dict[str, list[bread.Event]] = {}
    for ev in reader:
        by_format.setdefault(ev.format, []).append(ev)
    assert reader.damage == [] and reader.notices == [] and reader.unknown_sources == 0
    return reader, by_format


def one(every_type, fmt: str) -> bread.Event:
    (ev,) = every_type[1][fmt]
    return ev


def args(every_type, fmt: str) -> tuple:
    return one(every_type, fmt).args


def test_v1_header_and_clock(every_type):
    reader, by_format = every_type
    (head,) = reader.headers
    assert head.version == 1
    assert head.descriptor["library"] == "blog"
    assert head.descriptor["session"] == "golden-every-type"
    events = [ev for evs in by_format.values() for ev in evs]
    assert len(events) == 32
    for ev in events:   # the writer's zone, recorded in the file
        assert ev.time.utcoffset() == IST
        assert ev.time.tzname() == "IST"
        assert ev.ns == ev.clock   # blog's clock is ns since the epoch
        assert ev.time == EPOCH + dt.timedelta(microseconds=ev.ns // 1000)
        assert ev.writer == "MainThread"
    ticks = by_format["tick {}"]
    assert [ev.args for ev in ticks] == [(0,), (1,), (2,)]
    assert ticks[0].clock <= ticks[1].clock <= ticks[2].clock


def test_v1_severities_and_categories(every_type):
    ev = one(every_type, "none {} bools {} {} as number {:d}")
    assert ev.severity is bread.Severity.TRACE and ev.category == "values"
    assert one(every_type, "small ints {} {} {} {:+05d}").severity is bread.Severity.DEBUG
    assert one(every_type, "enums {} {!r} int enum {}").severity is bread.Severity.WARNING
    ev = one(every_type, "nested {} and {}")
    assert ev.severity is bread.Severity.CRITICAL
    ev = one(every_type, "every value type of format version {}")
    assert ev.severity is bread.Severity.INFO and ev.category == "app"
    assert ev.function == "every_type" and Path(ev.file).name == "make_golden.py"


def test_v1_none_bool_int(every_type):
    n, t, f, t2 = args(every_type, "none {} bools {} {} as number {:d}")
    assert n is None and t is True and f is False and t2 is True
    small = args(every_type, "small ints {} {} {} {:+05d}")
    assert small == (0, 1, -1, -42) and all(type(v) is int for v in small)
    edges = args(every_type, "64-bit edges {} {} {} {:#x}")
    assert edges == (2**63 - 1, -2**63, 2**64 - 1, 2**64 - 1)
    big = args(every_type, "beyond 64 bits {} {} {:,} {}")
    assert big == (2**64, -2**63 - 1, 10**30, -(2**200))
    assert all(type(v) is int for v in edges + big)


def test_v1_floats(every_type):
    a = args(every_type, "floats {} {} {:>8.2f} {:e}")
    assert a == (0.1, 1.5, 3.14159, 6.02e23) and all(type(v) is float for v in a)
    inf, ninf, nan, nzero, nan2 = args(every_type, "special floats {} {} {} {} {:>8.2f}")
    assert inf == math.inf and ninf == -math.inf
    assert math.isnan(nan) and math.isnan(nan2)
    assert nzero == 0.0 and math.copysign(1.0, nzero) == -1.0


def test_v1_str_and_bytes(every_type):
    assert args(every_type, "strings {!r} {} {!r} raw {} {!a}") == (
        "", "héllo wörld ✓ 😀", "bell\x07tab\there", "bell\x07tab\there", "snow ☃")
    assert args(every_type, "lone surrogates {!r} raw {}") == ("\udc80", "x\ud800y")
    a = args(every_type, "bytes {} {!r} empty {}")
    assert a == (b"\x00\x01\xffbin", b"abc", b"") and all(type(v) is bytes for v in a)


def test_v1_containers(every_type):
    lst, tup, one_tuple, empty = args(every_type, "list {} tuple {} one {} empty {}")
    assert type(lst) is list and lst == [1, "a", None, [2.5]]
    assert type(tup) is tuple and tup == (1, "b")
    assert one_tuple == (7,) and empty == () and type(empty) is tuple
    d, empty_d = args(every_type, "dict {} empty {}")
    assert d == {"k": 1, 2: [3], None: (4,), (1, 2): "t"} and list(d) == ["k", 2, None, (1, 2)]
    assert type(d[None]) is tuple and empty_d == {}
    # Sets decode to bread.SetValue / FrozenSetValue since 2026-11-26: subclasses of set
    # and frozenset, equal to them, shown in the order their elements were logged in.
    s, fs, empty_s = args(every_type, "set {} frozenset {} empty {}")
    assert type(s) is bread.SetValue and s == {1, 2, 3} and list(s) == [1, 2, 3]
    assert type(fs) is bread.FrozenSetValue and fs == frozenset({"x"})
    assert type(empty_s) is bread.SetValue and empty_s == set() and str(empty_s) == "set()"
    none, nested = args(every_type, "nested {} and {}")
    assert none is None and nested == {"deep": [1, (2, {3}), frozenset()]}
    assert isinstance(nested["deep"][1][1], set) and isinstance(nested["deep"][2], frozenset)


def test_v1_datetimes(every_type):
    naive, utc, fixed, named = args(
        every_type, "datetimes naive {} utc {} fixed {} named fixed {}")
    assert naive == dt.datetime(2024, 2, 29, 23, 59, 59, 999999) and naive.tzinfo is None
    assert utc == dt.datetime(2024, 1, 1, 12, 0, tzinfo=UTC) and utc.utcoffset() == dt.timedelta(0)
    assert fixed == dt.datetime(2024, 1, 1, 17, 30, tzinfo=UTC)
    assert fixed.utcoffset() == -dt.timedelta(hours=5, minutes=30) and fixed.hour == 12
    assert named == dt.datetime(2024, 1, 1, 15, 0, tzinfo=UTC)
    assert named.tzname() == "BRT" and named.utcoffset() == dt.timedelta(hours=-3)

    paris, paris2, new_york = args(every_type, "zoned {} {!r} pytz {}")
    # The second 02:30 of the night summer time ended: 01:30 UTC, fold 1, in the named zone.
    for v in (paris, paris2):
        assert v.astimezone(UTC) == dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC)
        assert (v.hour, v.minute, v.fold) == (2, 30, 1)
        assert v.utcoffset() == dt.timedelta(hours=1)
        assert (getattr(v.tzinfo, "key", None) or getattr(v.tzinfo, "zone", None)) == "Europe/Paris"
    assert new_york.astimezone(UTC) == dt.datetime(2024, 7, 4, 13, 15, tzinfo=UTC)
    assert new_york.utcoffset() == dt.timedelta(hours=-4)
    assert (getattr(new_york.tzinfo, "key", None)
            or getattr(new_york.tzinfo, "zone", None)) == "America/New_York"

    date, time, aware_time, delta, negative = args(
        every_type, "date {} time {} aware time {} timedelta {} negative {}")
    assert type(date) is dt.date and date == dt.date(1999, 12, 31)
    assert time == dt.time(23, 59, 59, 999999) and time.tzinfo is None
    assert aware_time.replace(tzinfo=None) == dt.time(8, 0)
    assert aware_time.utcoffset() == dt.timedelta(hours=2)
    assert delta == dt.timedelta(days=2, hours=3, microseconds=4)
    assert negative == dt.timedelta(seconds=-1)


def test_v1_decimal_and_uuid(every_type):
    a = args(every_type, "decimals {} {:>8.2f} {} {} {}")
    assert all(type(v) is Decimal for v in a)
    assert a[0] == Decimal("3.14159") and str(a[0]) == "3.14159"
    assert a[1] == Decimal("2.5")
    assert str(a[2]) == "-0" and a[2].is_signed()
    assert a[3].is_nan() and str(a[4]) == "1E+3"
    u, u2 = args(every_type, "uuid {} {!r}")
    assert type(u) is uuid.UUID and u == u2 == uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_v1_enum_dataclass_exception_opaque(every_type):
    red, green, high = args(every_type, "enums {} {!r} int enum {}")
    assert isinstance(red, bread.EnumValue)
    assert red == bread.EnumValue("__main__.Color", "RED", 1) and str(red) == "Color.RED"
    assert green == bread.EnumValue("__main__.Color", "GREEN", "g")
    assert high == bread.EnumValue("__main__.Level", "HIGH", 2)

    point, segment = args(every_type, "dataclasses {} {}")
    assert point == bread.DataclassValue("__main__.Point", {"x": 1, "y": 2.5, "tags": ["a"]})
    assert isinstance(segment, bread.DataclassValue) and segment.type == "__main__.Segment"
    assert list(segment.fields) == ["start", "end", "label"]
    assert segment.fields["end"] == bread.DataclassValue("__main__.Point",
                                                         {"x": 3, "y": 4.0, "tags": [1]})

    bare, caught = args(every_type, "exceptions {!r} without traceback, {} with")
    # (read since issue 38 with the text Python prints for it, as bread's text showed it)
    assert bare == bread.ExceptionValue("KeyError", "'k'", "KeyError: 'k'\n")
    assert isinstance(caught, bread.ExceptionValue) and caught.type == "ValueError"
    assert caught.message == "invalid literal for int() with base 10: 'forty-two'"
    assert caught.traceback.startswith("Traceback (most recent call last):\n")
    assert caught.traceback.endswith(
        "ValueError: invalid literal for int() with base 10: 'forty-two'\n")

    w7, w8 = args(every_type, "opaque {} {!r}")
    assert w7 == bread.OpaqueValue("__main__.Widget", "Widget #7")
    assert w8 == bread.OpaqueValue("__main__.Widget", "Widget #8")


def test_v1_fields_event_function_and_exception(every_type):
    ev = one(every_type, "user {user} paid {amount:>8.2f} at {when}")
    assert ev.args == ()
    assert ev.fields == {"user": "ann", "amount": Decimal("12.5"),
                         "when": dt.datetime(2024, 2, 29, 23, 59, 59, 999999), "extra": [1, 2]}
    assert type(ev.fields["amount"]) is Decimal
    ev = one(every_type, "order {} for {user!r}")
    assert (ev.args, ev.fields) == ((42,), {"user": "bob"})

    ev = one(every_type, "shipped order {} to {city}")          # @blog.event
    assert ev.severity is bread.Severity.WARNING and ev.category == "app"
    assert ev.function == "every_type.<locals>.shipped"
    assert (ev.args, ev.fields) == ((42,), {"city": "Zürich", "weight": 2.5})
    assert ev.source.arg_tags == "int,str,float"

    ev = one(every_type, "request {} failed: {exception}")       # log.exception
    assert ev.severity is bread.Severity.ERROR and ev.args == (7,)
    exc = ev.fields["exception"]
    assert isinstance(exc, bread.ExceptionValue)
    assert (exc.type, exc.message) == ("RuntimeError", "lookup failed")
    assert "KeyError: 'missing'" in exc.traceback
    assert "The above exception was the direct cause of the following exception" in exc.traceback
    assert exc.traceback.endswith("RuntimeError: lookup failed\n")


def test_v1_two_writers():
    reader = bread.read(V1 / "two_writers.blog")
    events = list(reader)
    assert reader.damage == [] and reader.notices == []
    # File order: writer by writer within each consume, not by time.
    assert [(ev.writer_id, ev.writer, ev.category, ev.args) for ev in events] == [
        (1, "alpha", "ingest", (1, 4)),
        (1, "alpha", "ingest", (2, 4)),
        (2, "beta", "store", (1, 10)),
        (1, "alpha", "ingest", (3, 4)),
        (2, "beta", "store", (2, 20)),
        (2, "beta-renamed", "store", (3, 30)),        # renamed in band, between two events
        (1, "alpha", "ingest", (4, 4)),
        (2, "beta-renamed", "store", (4, 40)),
    ]
    for wid in (1, 2):
        clocks = [ev.clock for ev in events if ev.writer_id == wid]
        assert clocks == sorted(clocks)
    assert events[0].clock < events[2].clock < events[1].clock   # beta logged between


def test_v1_dropped():
    reader = bread.read(V1 / "dropped.blog")
    events = list(reader)
    assert reader.damage == []
    assert [ev.args[0] for ev in events] == [0, 1, 2, 5, 6]
    assert all(ev.args[1] == "x" * 64 for ev in events)
    assert [(type(n), n.writer_id, n.count) for n in reader.notices] == [
        (bread.Dropped, 1, 2), (bread.Dropped, 1, 1)]
    first, second = reader.notices
    assert events[2].clock < first.clock < events[3].clock < second.clock


def test_v1_summary_entries_close_each_stream():
    # The Summary entry (tag 6) of each cleanly closed stream, as first written.
    r = bread.read(V1 / "summary.blog")
    assert len(list(r)) == 8 and len(r.headers) == 2
    assert [(x.events, x.sources, x.dropped, x.lost) for x in r.summaries] == \
        [(4, {1: 1, 2: 3}, 0, 0)] * 2
    assert all(x.first_clock <= x.last_clock for x in r.summaries)


def test_v1_exceptions_kept_as_frames():
    # Extension 13 with frames, notes and chain (written since 2026-11-26). The paths in
    # the file are those of the machine that wrote it: source lines come from the file
    # only where they were kept, so the text checked here does not depend on this machine.
    a, b, c = bread.read(V1 / "exceptions.blog")
    exc = a.fields["exception"]
    assert (a.message, exc.type, exc.message) == ("order 7 failed", "RuntimeError",
                                                   "order failed")
    assert [f[2] for f in exc.frames] == ["exceptions"]
    assert [(t, m, link) for t, m, _, _, link in exc.chain] == [
        ("KeyError", "'k'", 2), ("ValueError", "bad fill", 1)]
    inner = exc.chain[1]
    assert [f[2] for f in inner[2]] == ["exceptions"] + ["_nested"] * 6
    assert inner[3] == ("order 7",)
    text = exc.traceback
    assert text.startswith("Traceback (most recent call last):\n  File ")
    assert "KeyError: 'k'\n\nDuring handling of the above exception" in text
    assert "[Previous line repeated 2 more times]\n" in text
    assert "ValueError: bad fill\norder 7\n\nThe above exception was the direct cause" in text
    assert text.endswith("RuntimeError: order failed\n")
    kept = b.fields["exception"]
    assert [f[3] for f in kept.frames] == ['raise RuntimeError("order failed") from exc']
    assert kept.chain[1][2][-1][3] == "raise err"
    assert "    raise RuntimeError(\"order failed\") from exc\n" in kept.traceback
    bare = c.args[0]
    assert (bare.type, bare.message, bare.frames, bare.traceback) == (   # (text: issue 38)
        "KeyError", "'never raised'", (), "KeyError: 'never raised'\n")
    assert c.message == "bare KeyError('never raised')"


def test_v1_groups_and_syntax_errors():
    # Extension 13's group and syntax (elements 6 and 7, written since 2026-12-07): the
    # members of an except* group, of a group in a group, a SyntaxError's place, and
    # exc_info=True outside an except block. Source lines kept in the file.
    split, nested, syntax, outside = bread.read(V1 / "groups.blog")
    exc = split.fields["exception"]
    assert [(m.type, m.message) for m in exc.exceptions] == [
        ("KeyError", "'while handling'"), ("ExceptionGroup", "batch (1 sub-exception)")]
    assert exc.exceptions[0].chain[0][:2] == ("ExceptionGroup", "batch (1 sub-exception)")
    assert [m.traceback for m in exc.exceptions[1].exceptions] == ["TypeError: t2\n"]
    assert "  +-+---------------- 1 ----------------\n" in exc.traceback
    inner, beside = nested.fields["exception"].exceptions
    assert (inner.notes, beside.traceback) == (("a note",), "RuntimeError: beside\n")
    got = syntax.fields["exception"]
    assert got.syntax == ("invalid syntax", "golden.py", 2, 9, "    x = = 1\n", 2, 10)
    assert got.traceback.endswith('  File "golden.py", line 2\n    x = = 1\n        ^\n'
                                  "SyntaxError: invalid syntax\n")
    assert outside.fields["exception"].traceback == "NoneType: None\n"


def test_v1_described_types():
    # RecordType and EnumMember entries (tags 8, 9) and the values that refer to them
    # (extensions 15, 16), written since 2026-11-26; a member whose value is a tuple
    # still describes itself (extension 11).
    color, fill, nested, again, planet = bread.read(V1 / "described.blog")
    assert [repr(a) for a in color.args] == [
        "<Color.RED: 1>", "<Level.HIGH: 2>", "<Side.SELL: 'sell'>",
        "EnumValue(type='__main__.Perm', name='R|W', value=3)"]
    assert [str(a) for a in color.args[:3]] == ["Color.RED", "2", "sell"]
    f, leg = fill.args
    assert (f.type, f.fields, f.shown) == ("__main__.Fill",
                                           {"oid": 7, "px": 101.25, "venue": "X"},
                                           ("oid", "px"))
    assert (leg.type, leg.fields) == ("__main__.Leg", {"sym": "AAPL", "qty": 100})
    assert [a.fields for a in nested.args[0]] == [{"oid": 8, "px": 1.5, "venue": "X"},
                                                  {"sym": "MSFT", "qty": -5}]
    (key, value), = nested.args[1].items()
    assert (key.name, key.value, value.name, value.value) == ("BUY", "buy", "GREEN", "g")
    assert again.fields["side"].name == "BUY" and again.args[0].fields["venue"] == "Y"
    assert planet.args[0].value == (5.97, 6.37) and str(planet.args[0]) == "Planet.EARTH"
