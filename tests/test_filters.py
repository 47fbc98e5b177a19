"""Filters: severity, categories, time range, writers, call sites, a regex over the message;
in bread.read, read_batches, the CLI, sorted or not, on the C and the Python path."""

from __future__ import annotations

import datetime as dt
import io

import pytest

import blog
import bread
from bread import accel, cli
from bread.decode.filters import Filter, parse_time
from helpers import in_threads


def a_log() -> bytes:
    s = blog.Session()
    out = blog.MemoryOutputStream()
    orders, db = s.get_logger("orders"), s.get_logger("db")
    pool, dbx = s.get_logger("db.pool"), s.get_logger("dbx")    # below db; beside it

    def work(k: int) -> None:
        s.writer().name = f"w{k}"
        for i in range(200):
            orders.info("order {} filled at {}", i, 1.5 * i)
            if i % 10 == 0:
                db.warning("slow query {} took {ms} ms", i, ms=i * 3)
            if i % 25 == 0:
                pool.info("pool at {}", i)
                dbx.info("dbx {}", i)
            if i % 50 == 0:
                orders.error("rejected {}", [i, "list"])    # a value the C path leaves to Python
            if i % 40 == 0:
                s.consume(out)

    in_threads(work, 2)
    s.consume(out)
    return out.getvalue()


DATA = a_log()
ALL = list(bread.read(io.BytesIO(DATA)))
MID = sorted(e.ns for e in ALL)[len(ALL) // 2]


def rows(events) -> list[tuple]:
    return [(e.clock, e.writer_id, e.message) for e in events]


CASES = [
    (dict(min_severity="warning"), lambda e: e.severity >= blog.Severity.WARNING),
    (dict(min_severity=0x200), lambda e: e.severity >= 0x200),
    (dict(categories="db"), lambda e: e.category in ("db", "db.pool")),   # a tree, as names
    (dict(categories="=db"), lambda e: e.category == "db"),               # that one alone
    (dict(categories="db.pool,dbx"), lambda e: e.category in ("db.pool", "dbx")),
    (dict(categories="d"), lambda e: False),
    (dict(categories=["db", "orders"]), lambda e: e.category != "dbx"),
    (dict(since=MID), lambda e: e.ns >= MID),
    (dict(until=MID), lambda e: e.ns < MID),
    (dict(since=MID, until=MID + 1), lambda e: e.ns == MID),
    (dict(writers="w1"), lambda e: e.writer == "w1"),
    (dict(sites="work"), lambda e: True),
    (dict(sites="nowhere"), lambda e: False),
    (dict(grep=r"took \d+5 ms"), lambda e: e.category == "db" and e.fields["ms"] % 10 == 5),
    (dict(min_severity="info", categories="orders", writers="w0", grep="rejected"),
     lambda e: e.writer == "w0" and e.message.startswith("rejected")),
]


@pytest.mark.parametrize("kw,want", CASES)
def test_read_filters_as_a_comprehension_would(kw, want):
    expected = rows(e for e in ALL if want(e))
    assert rows(bread.read(io.BytesIO(DATA), **kw)) == expected
    assert [r for r in rows(bread.read(io.BytesIO(DATA), sort=True, **kw))] == \
        sorted(expected, key=lambda r: (next(e.ns for e in ALL if (e.clock, e.writer_id,
                                                                 e.message) == r), r[1]))
    if accel.speedups is not None:   # the C path leaves out what Python leaves out
        with pytest.MonkeyPatch.context() as m:
            m.setattr(accel, "speedups", None)
            assert rows(bread.read(io.BytesIO(DATA), **kw)) == expected


@pytest.mark.parametrize("kw,want", [c for c in CASES if "grep" not in c[0]])
def test_batches_and_text_filter_the_same(kw, want):
    expected = [e for e in ALL if want(e)]
    got = []
    for b in bread.read(io.BytesIO(DATA), **kw).batches(["clock", "message"], arrow=False):
        got += list(zip(b["clock"], b["message"]))
    assert got == [(e.clock, e.message) for e in expected]
    printer = bread.render.PrettyPrinter("%m")
    text = b"".join(bread.read(io.BytesIO(DATA), **kw).text(printer)).decode().splitlines()
    assert text == [e.message for e in expected]


def test_the_cli_options(tmp_path, capsys):
    p = tmp_path / "x.blog"
    p.write_bytes(DATA)
    assert cli.main(["-l", "warning", "-c", "db", "-w", "w0", "-f", "%m", str(p)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [e.message for e in ALL if e.category == "db" and e.writer == "w0"]
    assert cli.main(["-c", "db", "-w", "w0", "-f", "%m", str(p)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        e.message for e in ALL if e.category in ("db", "db.pool") and e.writer == "w0"]
    assert cli.main(["-c", "=db", "-f", "%m", str(p)]) == 0
    assert capsys.readouterr().out.splitlines() == [e.message for e in ALL if e.category == "db"]
    assert cli.main(["-g", "^rejected", "-s", "-f", "%m", str(p)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 8
    when = (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            + dt.timedelta(microseconds=MID // 1000)).isoformat()   # MID to the µs below
    assert cli.main(["--since", when, "-f", "%m", str(p)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == \
        len([e for e in ALL if e.ns >= MID // 1000 * 1000])


@pytest.mark.parametrize("argv,option", [
    (["-l", "loud"], "-l/--level"), (["--since", "yesterday-ish"], "--since"),
    (["--until", "2026-13-40"], "--until"), (["-g", "("], "-g/--grep")])
def test_a_bad_value_names_its_option(argv, option, tmp_path, capsys):
    p = tmp_path / "x.blog"
    p.write_bytes(DATA)
    assert cli.main(argv + [str(p)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"bread: error: {option}:" in err and "Traceback" not in err


def test_times_absolute_and_relative():
    now = 1_800_000_000 * 10**9
    assert parse_time("15m", now) == now - 15 * 60 * 10**9
    assert parse_time("2h", now) == now - 7200 * 10**9
    assert parse_time("500ms", now) == now - 500 * 10**6
    assert parse_time("2026-11-26T10:00:00Z") == parse_time("2026-11-26T11:00:00+01:00") == \
        int(dt.datetime(2026, 11, 26, 10, tzinfo=dt.timezone.utc).timestamp()) * 10**9
    naive = dt.datetime(2026, 11, 26, 10).astimezone()   # this machine's zone
    assert parse_time("2026-11-26 10:00:00") == int(naive.timestamp()) * 10**9
    with pytest.raises(ValueError, match="not a time"):
        parse_time("soon")


def test_filter_make_checks_its_parts():
    with pytest.raises(ValueError, match="unknown severity"):
        Filter.make(min_severity="loud")
    assert not Filter().active and Filter.make(categories="a,b").categories == {"a", "b"}
