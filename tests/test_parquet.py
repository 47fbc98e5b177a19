"""bread export --parquet: the events table and typed tables per call site round-trip."""

from __future__ import annotations

import io
import json
import time

import pytest

import blog
import bread
from bread import cli
from bread.export import parquet

pq = pytest.importorskip("pyarrow.parquet", reason="Parquet export needs pyarrow")


def a_log(path) -> None:
    s = blog.Session()
    api = s.get_logger("api")
    out = blog.FileOutputStream(str(path), mode="wb")
    for i in range(300):
        api.info("request {} took {} ms", i, 0.5 * i, route="/orders")
        if i % 30 == 0:
            api.warning("odd {}", [i, "x"] if i % 60 else i)     # a list, then an int
            s.consume(out)
    s.consume(out)
    out.close()


def test_export_round_trips(tmp_path):
    a_log(tmp_path / "a.blog")
    out = tmp_path / "out"
    assert cli.main(["export", "--parquet", str(out), str(tmp_path / "a.blog")]) == 0
    events = list(bread.read(str(tmp_path / "a.blog")))
    t = pq.read_table(out / "events.parquet")
    assert t.num_rows == len(events) == 310
    assert t.column("message").to_pylist() == [e.message for e in events]
    assert t.column("clock").to_pylist() == [e.clock for e in events]
    assert str(t.schema.field("time").type) == "timestamp[us, tz=UTC]"
    index = json.loads((out / "sources.json").read_text())
    assert sorted(s["format"] for s in index) == ["odd {}", "request {} took {} ms"]
    req = next(s for s in index if s["format"].startswith("request"))
    assert req["columns"] == {"arg0": "int64", "arg1": "float64", "route": "string"}
    rt = pq.read_table(out / req["file"])
    assert rt.column_names == ["time", "severity", "writer", "writer_id", "host", "pid",
                               "path", "arg0", "arg1", "route"]
    assert rt.column("arg1").to_pylist() == [0.5 * i for i in range(300)]
    odd = next(s for s in index if s["format"] == "odd {}")
    assert odd["columns"] == {"arg0": "json"}     # mixed kinds: each value's JSON
    assert pq.read_table(out / odd["file"]).column("arg0").to_pylist() == \
        ['0', '[30,"x"]', '60', '[90,"x"]', '120', '[150,"x"]', '180', '[210,"x"]', '240',
         '[270,"x"]']


def test_a_site_logging_at_several_severities_tells_them_apart(tmp_path):
    # Proves: the typed table of a log.log(level, ...) site keeps each event's severity.
    s = blog.Session()
    log = s.get_logger("api")
    out = blog.FileOutputStream(str(tmp_path / "a.blog"), mode="wb")
    levels = ["info", "warning", "error"] * 3
    for i, level in enumerate(levels):
        log.log(level, "status {}", i)
    s.consume(out)
    out.close()
    assert cli.main(["export", "--parquet", str(tmp_path / "out"), str(tmp_path / "a.blog")]) == 0
    [src] = json.loads((tmp_path / "out" / "sources.json").read_text())
    t = pq.read_table(tmp_path / "out" / src["file"])
    assert t.column("severity").to_pylist() == [lv.upper() for lv in levels]
    assert t.column("arg0").to_pylist() == list(range(9))


def test_progress_shows_events_rate_and_eta(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    out = io.StringIO()
    p = parquet.Progress(1000, out, passes=1)
    now[0] += 1                # a second on: time for a line
    p.add(500, "events table")
    assert "500 events" in out.getvalue() and "/s" in out.getvalue() and "ETA" in out.getvalue()
    quiet = parquet.Progress(1000, None)
    quiet.add(10, "x")         # not a terminal: nothing written, nothing raised
    quiet.end()


def test_progress_counts_each_event_once_per_pass():
    # Proves (issue 26): the three passes over the same events show each pass's count (of
    # the total), not a sum of them (2,966,080 for a file of 1,000,000 events).
    out = io.StringIO()
    p = parquet.Progress(1000, out, passes=3, every=0)
    for what in ("events table", "column types", "typed tables"):
        p.add(600, what)
        p.add(400, what)
    lines = out.getvalue().split("\r")[1:]
    assert len(lines) == 6 and all(line.startswith(f"export: {what} ({i}/3): {n} events of "
                                                   "1,000, ")
                                   for line, (i, what, n) in zip(lines, [
                                       (1, "events table", 600), (1, "events table", "1,000"),
                                       (2, "column types", 600), (2, "column types", "1,000"),
                                       (3, "typed tables", 600), (3, "typed tables", "1,000")]))
    assert "ETA 0:00" in lines[-1]


def test_export_counts_events_for_the_eta(tmp_path):
    a_log(tmp_path / "a.blog")
    assert parquet.count([str(tmp_path / "a.blog")]) == 310


def test_bad_export_arguments(tmp_path, capsys):
    assert cli.main(["export", str(tmp_path)]) == 1                      # no --parquet
    assert cli.main(["export", "--parquet", str(tmp_path / "o"), "-"]) == 1
    assert "standard input" in capsys.readouterr().err
    assert cli.main(["export", "--parquet", str(tmp_path / "o"),
                     str(tmp_path / "missing.blog")]) == 2


def test_typed_tables_of_crafted_values_do_not_break_the_export(tmp_path):
    # A writer id, a time and an int beyond int64, a lone surrogate:
    # each row is written, what no column type holds as a null or as JSON.
    from blogformat import frames as fmt
    from blogformat.entries import (ClockSync, EventSource, WriterProp, encode_metadata,
                                    header_payload)
    from blogformat.eventframes import BatchHeader
    from blogformat.valueencoding import packb
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {} {}", "int,str")
    meta = [ClockSync(0, 1, 0, 0, "UTC"), src, WriterProp(2**64 - 1, "w")]
    data = (fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({}))
            + fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))
            + fmt.frame_bytes(fmt.FRAME_EVENTS, BatchHeader(2**64 - 1, 0, 2, 0, 10**12).encode()
                              + packb([1, 0, [2**64 - 1, "\ud800"]])
                              + packb([1, 10**12, [1, "a"]])))
    (tmp_path / "x.blog").write_bytes(data)
    out = tmp_path / "out"
    parquet.export([str(tmp_path / "x.blog")], str(out))
    index = json.loads((out / "sources.json").read_text())
    assert index[0]["columns"] == {"arg0": "json", "arg1": "string"}
    t = pq.read_table(out / index[0]["file"])
    assert t.num_rows == 2 and t.column("arg0").to_pylist() == ["18446744073709551615", "1"]
    assert t.column("writer_id").to_pylist() == [None, None]
    assert t.column("time").to_pylist()[1] is None   # 10**21 ns: year 33,658, past datetime
    assert t.column("arg1").to_pylist() == ["\\ud800", "a"]
    ev = pq.read_table(out / "events.parquet")
    assert ev.column("time").to_pylist()[1] is None and ev.num_rows == 2


def test_an_event_functions_parameters_name_its_columns(tmp_path):
    s = blog.Session()

    @blog.event("fill {} at {}", category="orders", session=s)
    def fill(order_id: int, px: float, venue: str): ...

    for i in range(5):
        fill(i, 100.5 + i, venue="X")
    out = blog.MemoryOutputStream()
    s.consume(out)
    (tmp_path / "f.blog").write_bytes(out.getvalue())
    ev = next(iter(bread.read(str(tmp_path / "f.blog")))).source
    assert ev.arg_names == ("order_id", "px") and ev.field_names == ("venue",)
    parquet.export([str(tmp_path / "f.blog")], str(tmp_path / "o"))
    (site,) = json.loads((tmp_path / "o" / "sources.json").read_text())
    assert site["columns"] == {"order_id": "int64", "px": "float64", "venue": "string"}


def test_a_typer_says_which_events_fit_its_columns(tmp_path):
    from bread.sinks import tables
    s = blog.Session()
    log = s.get_logger("t")
    for v in (1, 2.5, None):
        log.info("v {}", v)
    log.info("v {}", "text")
    out = blog.MemoryOutputStream()
    s.consume(out)
    evs = list(bread.read(io.BytesIO(out.getvalue())))
    t = tables.Typer(evs[0].source)
    for ev in evs[:3]:
        t.add(ev)
    assert t.kinds == ["float64"]
    assert [t.fits(ev) for ev in evs] == [True, True, True, False]
