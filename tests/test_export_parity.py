"""``bread -o jsonl`` and ``-o csv`` give the same bytes by their C path
(bread/sinks/_lines.c), by their Python path (bread/sinks/rows.py) and as
``bread.sinks.json`` writes each Event.

Events come from the writer (every argument type it takes, keyword fields, strings of
control characters, non-ASCII and lone surrogates, huge ints, nan and inf, exceptions)
and from files built here (any format, value, clock and damage: tests/test_render_parity).
Randomized tests print their seed: EXPORT_SEED=<seed> replays one.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import io
import json
import os
import time
import uuid
import zoneinfo

import pytest
import pytz
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import blog
import bread
from blogformat.entries import ClockSync, EventSource, WriterProp
from bread import accel, cli
from bread.sinks import json as sink_json
from bread.sinks import rows as row_sink
from bread.sinks.json import MAX_JSON, csv_rows, jsonl
from helpers import count_reader_fallbacks
from test_render_parity import a_file, build

C = accel.speedups
needs_c = pytest.mark.skipif(C is None, reason="compares the C writer with Python: it is off "
                                               "(BREAD_PURE_PYTHON=1) or not built")
SEED = int(os.environ.get("EXPORT_SEED", time.time_ns() % (1 << 32)))
ZONES = [None, pytz.timezone("Europe/Paris"), pytz.timezone("America/St_Johns"),
         pytz.timezone("UTC")]


def rows(data: bytes, form: str, use_c: bool, *, sort: bool = False, zone=None,
         escape: bool = True, quote_formulas: bool = True) -> tuple:
    """What ``bread -o FORM`` prints of ``data`` by one path: its bytes, the damage, the
    events of unknown sources."""
    with pytest.MonkeyPatch.context() as m:
        if not use_c:
            m.setattr(accel, "speedups", None)
        r = bread.read(io.BytesIO(data), sort=sort)
        try:
            out = b"".join(r.rows(form, zone, escape=escape, quote_formulas=quote_formulas))
        except bread.NotABlogFile as exc:   # damage at the very start can make one
            return b"", [str(exc)], 0
        return out, [(d.offset, d.length, d.reason) for d in r.damage], r.unknown_sources


def written(data: bytes, form: str, *, sort: bool = False, zone=None, escape: bool = True,
            quote_formulas: bool = True) -> tuple:
    """The same as ``bread.sinks.json`` writes the Events (what ``bread -o FORM`` printed
    before it had a C path)."""
    r = bread.read(io.BytesIO(data), sort=sort)
    try:
        text = "".join(jsonl(r, zone) if form == "jsonl" else
                       csv_rows(r, zone, escape=escape, quote_formulas=quote_formulas))
    except bread.NotABlogFile as exc:
        return b"", [str(exc)], 0
    return (text.encode("utf-8", "backslashreplace"),
            [(d.offset, d.length, d.reason) for d in r.damage], r.unknown_sources)


def all_same(data: bytes, form: str, **options) -> bytes:
    """The bytes of both paths, checked equal to each other and to ``bread.sinks.json``'s."""
    want = written(data, form, **options)
    if C is not None:
        assert rows(data, form, True, **options) == want
    assert rows(data, form, False, **options) == want
    return want[0]


# --- events from the writer ----------------------------------------------------------------

class Color(enum.Enum):
    RED = 1
    GREEN = "g"


@dataclasses.dataclass
class Point:
    x: int
    y: float


Pair = collections.namedtuple("Pair", "left right")


class Opaque:
    def __repr__(self) -> str:
        return "<opaque \x1b[31m>"


def _raised() -> Exception:
    try:
        raise KeyError("k\n\u202e")
    except KeyError as exc:
        return exc


#: Texts that C and Python might see differently: controls, DEL, C1, bidi formats, non-BMP,
#: lone surrogates, JSON's and CSV's specials, formula starts, a format's braces.
_texts = st.sampled_from(
    ["", "AAPL", "\x00\x07\n\r\t\x1b[31m", "\x7f\x85\x9f\xa0", "ü€𝄞", "\ud800", "a\udfffb",
     "\ud83d\ude00", "\u202ea\u2066\u2069\u061c\u200e", 'say "hi", then', "=1+1", "-5",
     "+x", "@SUM(A1)", "\t=1", "\r=1", "{}", "back\\slash", "\u2028\u2029"])
_text = _texts | st.text(st.characters(exclude_categories=()), max_size=8)
_scalar = (st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.integers()
           | st.sampled_from([2**64, -2**63 - 1, 10**30]) | st.floats()
           | st.sampled_from([0.0, -0.0, 101.25, 1e16, 1e-5, float("nan"), float("inf"),
                              float("-inf")])
           | _text)
_rich = st.sampled_from([
    b"\x00\xffbytes", bytearray(b"ba"), dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
    dt.date(1999, 12, 31), dt.time(1, 2, 3, 4), dt.timedelta(days=-1, seconds=5),
    decimal.Decimal("1.10"), decimal.Decimal("NaN"), uuid.UUID(int=7), Color.RED, Color.GREEN,
    Point(1, 2.5), Pair(1, "x"), frozenset({"x"}), {1, 2}, (1, (2, "t")), {"a": 1, 2: "b"},
    ValueError("boom\x1b"), _raised(), Opaque()])
_value = st.recursive(_scalar | _rich, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_FIELD_NAMES = ["a", "host", "px", "é", "err"]


@st.composite
def a_log(draw) -> bytes:
    """A session's events of several call sites (formats of plain and special text, with
    conversions and specs sometimes), mostly plain values, sometimes any value, keyword
    fields, categories and a writer name of any text."""
    s = blog.Session()
    out = blog.MemoryOutputStream()
    s.writer().name = draw(_text)
    sites = []
    for _ in range(draw(st.integers(1, 3))):
        lit = draw(_text).replace("{", "{{").replace("}", "}}")
        holes = draw(st.lists(st.sampled_from(["{}", "{}", "{}", "{!r}", "{:>6}"]), max_size=3))
        names = tuple(draw(st.lists(st.sampled_from(_FIELD_NAMES), max_size=2, unique=True)))
        log = s.get_logger(draw(_text) or "main")
        sites.append((getattr(log, draw(st.sampled_from(["debug", "info", "warning", "error"]))),
                      lit + " ".join(holes) + lit, len(holes), names))
    for _ in range(draw(st.integers(1, 12))):
        call, fmt, n, names = draw(st.sampled_from(sites))
        plain = draw(st.integers(0, 3)) > 0
        v = _scalar if plain else _value
        args = draw(st.lists(v, min_size=n, max_size=n))
        fields = {name: draw(v) for name in names}
        call(fmt, *args, **fields)
        s.consume(out)   # (a frame per event, sometimes several)
    return out.getvalue()


_options = dict(form=st.sampled_from(["jsonl", "csv"]), sort=st.booleans(),
                zone=st.sampled_from(ZONES), escape=st.booleans(), quote_formulas=st.booleans())


def test_events_of_every_type_are_written_the_same_by_c_and_python():
    # Proves: for anything the writer logs, -o jsonl and -o csv (sorted or not, in a --tz
    # zone or the writer's, escaped or not, formulas quoted or not) are the same bytes by
    # the C path and the Python path, and the same as bread.sinks.json writes the Events.
    print(f"random seed: replay with EXPORT_SEED={SEED}")

    @seed(SEED)
    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=a_log(), **_options)
    def check(data, form, sort, zone, escape, quote_formulas):
        all_same(data, form, sort=sort, zone=zone, escape=escape, quote_formulas=quote_formulas)

    check()


def test_crafted_and_damaged_files_are_written_the_same_by_c_and_python():
    # Proves: the same for files of any format, value and clock (sources without writers,
    # events of unknown sources, captured texts, a clock sync in another zone), with bytes
    # garbled or cut: the same rows, damage and unknown sources by either path.
    print(f"random seed: replay with EXPORT_SEED={SEED}")

    @seed(SEED)
    @settings(max_examples=80, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=a_file(), cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                         max_size=3),
           truncate=st.integers(0, 10**6), **_options)
    def check(data, cuts, truncate, form, sort, zone, escape, quote_formulas):
        b = bytearray(data)
        for pos, byte in cuts:
            b[pos % len(b)] = byte
        if cuts:
            b = b[:max(1, truncate % (len(b) + 1))]
        all_same(bytes(b), form, sort=sort, zone=zone, escape=escape,
                 quote_formulas=quote_formulas)

    check()


def test_any_clock_sync_and_zone_give_the_same_times():
    # Proves: the ISO time of each row (C writes it from the sync's offset, whole minutes
    # taken as Python floors them, or asks Python per second for a --tz zone) is the same
    # for any clock, frequency and offset; times past 64-bit ns are Python's.
    print(f"random seed: replay with EXPORT_SEED={SEED}")
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {}", "int")

    @seed(SEED)
    @settings(max_examples=60, deadline=None, database=None)
    @given(clock0=st.integers(-2**63, 2**63 - 1), freq=st.integers(1, 2**40),
           ns=st.integers(-2**63, 2**63 - 1),
           tzo=st.integers(-86400, 86400) | st.sampled_from([-3601, -3599, -60, -1, 1, 59, 61]),
           deltas=st.lists(st.integers(-2**62, 2**62) | st.integers(-10**10, 10**10),
                           max_size=5),
           form=st.sampled_from(["jsonl", "csv"]), zone=st.sampled_from(ZONES))
    def check(clock0, freq, ns, tzo, deltas, form, zone):
        data = build([src], [[1, d, [d]] for d in deltas], clock0=clock0,
                     sync=ClockSync(clock0, freq, ns, tzo, "Z"))
        all_same(data, form, zone=zone)

    check()


# --- what C writes itself ------------------------------------------------------------------

#: The benchmark's call sites (benchmarks/reader_outputs.py): ints, floats, str of ASCII,
#: non-ASCII, quotes and a comma, bools and None, a keyword field.
BENCHMARK = [EventSource(1, 0x80, "orders", "work", "/p/bench.py", 47,
                         "order {} filled at {} qty {}", "", (), 0),
             EventSource(2, 0x100, "orders", "work", "/p/bench.py", 49, "disk {} at {}%", "",
                         ("host",), 0),
             EventSource(3, 0x40, "orders", "work", "/p/bench.py", 51, "flags {} {} {}", "",
                         (), 0),
             EventSource(4, 0x80, "orders", "work", "/p/bench.py", 53, "user {} said {}", "",
                         (), 0)]
BENCHMARK_EVENTS = [[1, 1000, [7, 108.25, "AAPL"]], [2, 1000, ["/var", 93.5, "db1"]],
                    [3, 1000, [True, None, -7]], [4, 1000, ["zoë", 'hi, "there"']]] * 50


@needs_c
@pytest.mark.parametrize("form", ["jsonl", "csv"])
@pytest.mark.parametrize("options", [[], ["-s"], ["--tz", "Europe/Paris"]])
def test_c_writes_the_benchmark_events_itself(tmp_path, capsysbinary, monkeypatch, form,
                                              options):
    # Proves: bread -o jsonl / -o csv writes the benchmark's events
    # (benchmarks/reader_outputs.py) without Python per event, or the fast path is not
    # fast: bread.sinks.json makes its parts once per call site (iso_time, once each), none is
    # left to Python, and in a --tz zone Python gives the time's text once per second.
    # Before, bread.export (now bread.sinks.json) wrote every Event (iso_time once per event).
    p = tmp_path / "bench.blog"
    p.write_bytes(build(BENCHMARK, BENCHMARK_EVENTS, events_per_frame=64,
                        writers=(WriterProp(1, "w0"), WriterProp(2, "w1"))))
    calls = count_reader_fallbacks(monkeypatch)
    times: list[int] = []
    monkeypatch.setattr(sink_json, "iso_time",
                        lambda ns, tz, f=sink_json.iso_time: times.append(ns) or f(ns, tz))
    seconds: list[int] = []
    monkeypatch.setattr(row_sink, "iso_parts",
                        lambda s, tz, f=sink_json.iso_parts: seconds.append(s) or f(s, tz))
    assert cli.main(["-o", form, *options, str(p)]) == 0
    out = capsysbinary.readouterr().out
    assert out.count(b"\n") == len(BENCHMARK_EVENTS) + (form == "csv")
    assert calls == [] and len(times) <= len(BENCHMARK) and len(seconds) <= 2, (
        len(calls), len(times), len(seconds))
    monkeypatch.undo()
    assert out == all_same(p.read_bytes(), form, sort="-s" in options,
                           zone=ZONES[1] if "--tz" in options else None)


@needs_c
def test_what_c_leaves_to_python_is_written_as_python_writes_it(monkeypatch):
    # Proves: each kind of event C leaves to Python (a list, a big int, an exception, a lone
    # surrogate, a conversion, a name given twice, values whose JSON might pass MAX_JSON)
    # comes back one at a time and is written the same, the events around it by C.
    srcs = [EventSource(1, 0x80, "c", "f", "x.py", 1, "{} {}", "", (), 0),
            EventSource(2, 0x80, "c", "f", "x.py", 2, "{!r}", "", (), 0),
            EventSource(3, 0x80, "c", "f", "x.py", 3, "{}", "", ("k", "k"), 0),
            EventSource(4, 0x80, "c", "f", "x.py", 4, "\ud800 {}", "", (), 0)]
    plain = [1, 1, [1, "x"]]
    events = [plain, [1, 1, [[1, 2], "x"]], plain, [1, 1, [1, "\ud800"]], plain,
              [2, 1, ["r"]], plain, [3, 1, [1, 2, 3]], plain, [4, 1, ["x"]], plain,
              [1, 1, [float("nan"), -float("inf")]]]
    data = build(srcs, events)
    calls = count_reader_fallbacks(monkeypatch)
    for form, python in (("jsonl", 5), ("csv", 4)):
        all_same(data, form)
        del calls[:]
        rows(data, form, True)
        # the list, the surrogate, the conversion, the name twice; jsonl: the format's
        # surrogate too (csv writes it itself, as its bytes show it: \ud800)
        assert len(calls) == python, (form, calls)


def test_values_whose_json_might_pass_the_limit_are_cut_as_python_cuts_them(monkeypatch):
    # Proves: strs whose JSON, counted as bread.sinks.json counts it (12 characters a non-ASCII
    # one), would pass MAX_JSON together are written by Python: the last cut, as before.
    assert C is None or C.MAX_JSON == MAX_JSON
    big = "é" * (MAX_JSON // 36)   # three of them: 36 characters a character in all
    data = build([EventSource(1, 0x80, "c", "f", "x.py", 1, "x {}", "", ("a", "b", "c"), 0)],
                 [[1, 1, [1, big, big, big]]])
    calls = count_reader_fallbacks(monkeypatch)
    line = json.loads(all_same(data, "jsonl"))
    assert line["fields"]["c"] == {"$cut": "str", "limit": MAX_JSON}
    assert line["args"] == [1] and line["fields"]["a"] == line["fields"]["b"] == big
    assert len(calls) == (C is not None)   # (the C path's, in all_same)


#: A text of each kind a CSV cell or JSON string treats apart.
SPECIAL = ["", "plain", "a,b", 'say "hi"', "two\nlines", "cr\r", "\r", "\t=1", "=1", "+1",
           "-1", "@x", "'q", "\x00nul", "\x1b[2J", "\x7f", "\x85", "\xa0", "\u202e", "\u2066",
           "\u061c", "é", "\U0001d11e", "\ud800", "back\\slash", "{}"]


@pytest.mark.parametrize("text", SPECIAL, ids=ascii)
def test_each_special_text_is_written_the_same_in_every_cell(text):
    # Proves: a text of each kind, as a category, a writer's name, a message, a value and a
    # field, is written the same by both paths in -o jsonl and in -o csv with every
    # escaping and formula option (quoting, escapes of C0, DEL, C1 and bidi formats in
    # the text cells and in the JSON cells, the leading quote, surrogates).
    src = EventSource(1, 0x80, text or "c", "f", "x.py", 1, "{} " + text.replace("{", "{{")
                      .replace("}", "}}"), "", ("k",), 0)
    data = build([src], [[1, 1, [text, text]], [1, 1, [7, "x" + text]]],
                 writers=(WriterProp(1, text),))
    all_same(data, "jsonl")
    for escape in (True, False):
        for quote_formulas in (True, False):
            all_same(data, "csv", escape=escape, quote_formulas=quote_formulas)


# --- the command ---------------------------------------------------------------------------

def run_both(argv: list[str], capsysbinary, monkeypatch) -> tuple:
    """``bread ARGV``'s exit status, output and errors by the C path (where built) and the
    Python path: checked the same."""
    got = []
    for use_c in ([True, False] if C is not None else [False]):
        with monkeypatch.context() as m:
            if not use_c:
                m.setattr(accel, "speedups", None)
            code = cli.main(argv)
        out, err = capsysbinary.readouterr()
        got.append((code, out, err))
    assert all(g == got[0] for g in got)
    return got[0]


def test_the_command_writes_files_sorted_zoned_and_damaged_as_the_events_are_written(
        tmp_path, capsysbinary, monkeypatch):
    # Proves: bread -o jsonl / -o csv over several files written by blog (one with every
    # type, one a second process's, one damaged), sorted or not, in --tz's zone or not,
    # prints what bread.sinks.json writes of the Events, with the same errors and exit status
    # on both paths: 3 and the damage for the damaged file.
    a, b, bad = tmp_path / "a.blog", tmp_path / "b.blog", tmp_path / "bad.blog"
    for path, tag in ((a, "a"), (b, "b")):
        s = blog.Session()
        out = blog.MemoryOutputStream()
        log = s.get_logger("cat," + tag)
        for i in range(40):
            log.info("{} of {} {}", i, tag, [i] if i % 7 == 0 else "=x", px=1.5 * i)
            if i % 10 == 0:
                log.error("{}", float("nan"), err=_raised())
                s.consume(out)
        s.consume(out)
        path.write_bytes(out.getvalue())
    damaged = bytearray(a.read_bytes())
    damaged[len(damaged) // 2] ^= 0xff
    bad.write_bytes(bytes(damaged))
    for form in ("jsonl", "csv"):
        for opts, sort, zone in (([], False, None), (["-s"], True, None),
                                 (["--tz", "Asia/Kolkata", "-s"], True, "Asia/Kolkata")):
            files = [str(a), str(b), str(bad)]
            code, out, err = run_both(["-o", form, *opts, *files], capsysbinary, monkeypatch)
            r = bread.read(files, sort=sort)
            tz = pytz.timezone(zone) if zone else None
            text = "".join(jsonl(r, tz) if form == "jsonl" else csv_rows(r, tz))
            assert out == text.encode("utf-8", "backslashreplace")
            assert code == cli.EXIT_DAMAGED and r.damage
            assert all(f"bread: {d}\n".encode() in err for d in r.damage)
            assert out.count(b"\n") == sum(1 for _ in bread.read(files)) + (form == "csv")


def test_the_command_writes_csv_options_and_grep_as_before(tmp_path, capsysbinary, monkeypatch):
    # Proves: --escape never, --csv-formulas raw and -g (Events by their messages) print
    # what bread.sinks.json writes, on both paths.
    p = tmp_path / "x.blog"
    s = blog.Session()
    out = blog.MemoryOutputStream()
    log = s.get_logger("=cat")
    for i, t in enumerate(["=1", "\x1b[2J", "a,\"b\"\nc", "\u202ex", "-5", "plain"]):
        log.warning("{} {}", t, i, **{"k": t})
    s.consume(out)
    p.write_bytes(out.getvalue())
    for opts, escape, quote in ((["--escape", "never"], False, True),
                                (["--csv-formulas", "raw"], True, False),
                                (["--escape", "never", "--csv-formulas", "raw"], False, False)):
        code, got, err = run_both(["-o", "csv", *opts, str(p)], capsysbinary, monkeypatch)
        want = "".join(csv_rows(bread.read(str(p)), escape=escape, quote_formulas=quote))
        assert (code, got, err) == (0, want.encode("utf-8", "backslashreplace"), b"")
    code, got, _ = run_both(["-o", "jsonl", "-g", "[0-9]$", str(p)], capsysbinary, monkeypatch)
    want = "".join(jsonl(e for e in bread.read(str(p)) if e.message[-1:].isdigit()))
    assert code == 0 and got == want.encode() and got.count(b"\n") == 6
