"""A call site's typed table as the reader makes it (bread.sinks.typed): the same
rows, columns and types as the reference made from bread.read's Events (tables.infer,
tables.batch), whatever C or Python made of each event; other sites' events skipped."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

import blog
import bread
from bread import accel
from bread.sinks import tables
from bread.sinks.typed import TypedTable, find_kinds
from bread.events import EventStream
from bread.decode.filters import Filter, names_source
from bread.reader import Reader

from helpers import in_threads

pa = pytest.importorskip("pyarrow")

#: Sites and what each logs: every kind of column a typed table has.
SITES = ("GET {} took {} ms", "flags {} {} {}", "user {} in {}", "when {} on {}",
         "odd {} {}", "levels {}", "blob {}", "text {}", "big {}", "huge {}")


def write(path, tag: str, n: int, big: bool = False) -> None:
    s = blog.Session()
    log = s.get_logger("web")
    out = blog.FileOutputStream(str(path), mode="wb")

    def work(k: int) -> None:
        s.writer().name = f"{tag}-w{k}"
        for i in range(n):
            log.info("GET {} took {} ms", f"/r{i % 5}", i * 0.5 + k)
            log.info("flags {} {} {}", i % 2 == 0, i, None if i % 7 == 0 else i - 3)
            log.warning("user {} in {}", "ü" if i % 3 else "u", i % 4, ms=i, ok=i % 2 == 1)
            log.info("when {} on {}", dt.datetime(2026, 1, 1, 0, 0, i % 60, tzinfo=dt.timezone.utc),
                     dt.date(2026, 1, 1 + i % 28))
            # kinds that widen: an int then a float (float64), an int then a str (JSON)
            log.info("odd {} {}", i if i % 2 else i + 0.25, i if i % 3 else "s")
            log.log(("info", "warning", "error")[i % 3], "levels {}", i)
            log.info("big {}", ((1 << 53) + 1, 0.5, -(1 << 63))[i % 3])   # rounded as Python
            log.info("huge {}", (1 << 64) - 1 - i)                          # beyond int64: JSON
            log.info("text {}", "lone \udc80" if i % 25 == 3 else f"t{i}")   # C leaves it
            if big and i % 10 == 0:
                log.info("blob {}", [i, {"k": decimal.Decimal("1.5")}, 1 << 70])
            if i % 40 == 39:
                s.consume(out)

    in_threads(work, 2)
    s.consume(out)
    out.close()


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("typed")
    write(d / "a.blog", "a", 120)
    write(d / "b.blog", "b", 90, big=True)
    return [str(d / "a.blog"), str(d / "b.blog")]


def reference(paths, which, sort=False):
    """The typed table made by the Python reference from bread.read's Events."""
    typer = tables.infer(bread.read(paths, sort=sort), which)
    rows = [tables.common_values(ev) + typer.row(ev) for ev in bread.read(paths, sort=sort)
            if names_source(ev.source, which)]
    return typer, tables.batch(typer.names, typer.kinds, rows)


def typed(paths, which, sort=False, typer=None):
    flt = Filter.make(source=which)
    found = find_kinds(Reader(paths, filter=flt), which)
    typer = typer or found
    table = TypedTable(Reader(paths, filter=flt, sort=sort), typer, typer.names, 50)
    batches = list(table)
    assert all(b.num_rows <= 50 for b in batches)
    return found, pa.Table.from_batches(batches, schema=batches[0].schema), table.late


@pytest.mark.parametrize("which", SITES)
def test_a_typed_table_is_what_bread_read_gives(paths, which):
    want_typer, want = reference(paths, which)
    typer, got, late = typed(paths, which)
    assert (typer.positional, typer.kinds, typer.fields, typer.names) == \
        (want_typer.positional, want_typer.kinds, want_typer.fields, want_typer.names)
    assert typer.source == want_typer.source
    assert got.schema == want.schema
    assert got.to_pylist() == pa.Table.from_batches([want]).to_pylist()
    assert late == 0


def test_the_columns_every_event_table_has(paths):
    # Proves: time, severity, writer, writer_id, host, pid, path are each event's.
    _, got, _ = typed(paths, "levels {}")
    events = [e for e in bread.read(paths) if e.format == "levels {}"]
    assert got.column_names[:7] == list(tables.COMMON)
    assert got.column("time").to_pylist() == [
        dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=e.ns // 1000)
        for e in events]
    assert got.column("severity").to_pylist() == [e.severity.name for e in events]
    assert set(got.column("severity").to_pylist()) == {"INFO", "WARNING", "ERROR"}
    assert got.column("writer").to_pylist() == [e.writer for e in events]
    assert got.column("writer_id").to_pylist() == [e.writer_id for e in events]
    assert got.column("path").to_pylist() == [e.path for e in events]
    assert got.column("pid").to_pylist() == [e.pid for e in events]
    assert dict(zip(got.column_names, map(str, got.schema.types))) == {
        "time": "timestamp[us, tz=UTC]", "severity": "string", "writer": "string",
        "writer_id": "int64", "host": "string", "pid": "int64", "path": "string",
        "arg0": "int64"}


def test_the_kinds_found_are_each_site_s_widest(paths):
    kinds = {w: typed(paths, w)[0].kinds for w in SITES}
    assert kinds == {
        "GET {} took {} ms": ["string", "float64"],
        "flags {} {} {}": ["bool", "int64", "int64"],
        "user {} in {}": ["string", "int64", "int64", "bool"],
        "when {} on {}": ["timestamp", "date"],
        "odd {} {}": ["float64", "json"],
        "levels {}": ["int64"],
        "blob {}": ["json"],
        "text {}": ["string"],
        "big {}": ["float64"],
        "huge {}": ["json"],
    }


def test_sorted_reading_gives_the_rows_in_time_order(paths):
    _, want = reference(paths, "GET {} took {} ms", sort=True)
    _, got, _ = typed(paths, "GET {} took {} ms", sort=True)
    assert got.to_pylist() == pa.Table.from_batches([want]).to_pylist()


def test_events_that_do_not_fit_the_kinds_are_left_out_and_counted(paths):
    # Kinds found before a file grew: a float where an int64 column was found.
    narrow = tables.Typer(next(e.source for e in bread.read(paths) if e.format == "odd {} {}"),
                          2, ["int64", "json"])
    _, got, late = typed(paths, "odd {} {}", typer=narrow)
    events = [e for e in bread.read(paths) if e.format == "odd {} {}"]
    assert late == sum(1 for e in events if type(e.args[0]) is float) > 0
    assert got.column("arg0").to_pylist() == [e.args[0] for e in events if type(e.args[0]) is int]


def test_the_filter_names_one_kind_of_event(paths):
    got = {e.format for e in Reader(paths, filter=Filter.make(source="user {} in {}"))}
    assert got == {"user {} in {}"}
    assert {e.format for e in Reader(paths, filter=Filter.make(source="work"))} == set(SITES)


@pytest.mark.skipif(accel.speedups is None, reason="the C path's own work")
def test_c_makes_the_rows_of_simple_kinds_without_python_events(paths, monkeypatch):
    # Proves: other sites' events are skipped in C and the site's rows made there: no
    # frame goes to the Python path, no Event is made.
    frames = []
    real = EventStream.frame
    monkeypatch.setattr(EventStream, "frame",
                        lambda self, *a, **k: frames.append(1) or real(self, *a, **k))
    for which in ("GET {} took {} ms", "flags {} {} {}", "user {} in {}", "levels {}", "big {}"):
        _, got, _ = typed(paths, which)
        assert got.num_rows > 0
    assert frames == []


def test_a_field_named_as_another_column_but_for_case_gets_a_suffix(tmp_path):
    # Proves: column names are unique whatever their case (Spark's are case-insensitive: a
    # field `Time` beside `time` made every query naming `time` fail as ambiguous), on
    # both paths; the values stay in their columns.
    s = blog.Session()
    log = s.get_logger("web")
    out = blog.FileOutputStream(str(tmp_path / "c.blog"), mode="wb")
    for i in range(3):
        log.info("case {}", i, Time=i, PATH="p", Arg0=1.5, arg0_1="x")
    s.consume(out)
    out.close()
    _, got, _ = typed([str(tmp_path / "c.blog")], "case {}")
    names = got.column_names
    assert names[7:] == ["arg0", "Time_1", "PATH_1", "Arg0_1", "arg0_1_1"]
    assert len({n.casefold() for n in names}) == len(names)
    assert got.select(names[7:]).to_pylist()[2] == dict(zip(names[7:], [2, 2, "p", 1.5, "x"]))
