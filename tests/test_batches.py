"""bread.read_batches: every column equals what bread.read gives, in Arrow and without it,
on the C path and the Python path, for files blog writes and files built by hand."""

from __future__ import annotations

import array
import dataclasses
import datetime as dt
import io
import os
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blog
import bread
from blogformat.severity import Severity
from bread import accel
from bread.sinks import batches
from bread.sinks.batches import COLUMNS
from bread.sinks.json import json_text, json_value
from helpers import in_threads

pa = pytest.importorskip("pyarrow", reason="the Arrow form needs pyarrow (make test installs it)")


def expected(data: bytes, columns=COLUMNS) -> dict[str, list]:
    """The columns built from bread.read's events: what every batch must agree with."""
    out: dict[str, list] = {c: [] for c in columns}
    reader = bread.read(io.BytesIO(data))
    for ev in reader:
        head = reader.headers[-1].descriptor if reader.headers else {}
        row = {
            "time": ev.ns, "clock": ev.clock,
            "severity": ev.severity.name if isinstance(ev.severity, Severity) else str(ev.severity),
            "severity_value": ev.source.severity, "category": ev.category, "writer": ev.writer,
            "writer_id": ev.writer_id, "source_id": ev.source.id, "function": ev.function,
            "file": ev.file, "line": ev.line, "format": ev.format,
            "message": ev.message.encode("utf-8", "backslashreplace").decode(),
            "args": json_text(list(ev.args)), "fields": json_text(ev.fields),
            "host": head.get("host"), "pid": head.get("pid"), "program": head.get("program"),
            "path": "<stream>",
        }
        for c in columns:
            v = row[c]
            if c in ("category", "writer", "function", "file", "format") and v is not None:
                v = v.encode("utf-8", "backslashreplace").decode()   # as the message
            if type(v) is int and not -2**63 <= v < 2**63:
                v = None   # beyond int64: a missing value in a column
            out[c].append(v)
    return out


def collect(data: bytes, columns=None, batch_size=65536, arrow=True, use_c=True) -> dict:
    with pytest.MonkeyPatch.context() as m:
        if not use_c:
            m.setattr(accel, "speedups", None)
        got: dict[str, list] = {c: [] for c in (columns or COLUMNS)}
        sizes = []
        for b in bread.read_batches(io.BytesIO(data), columns, batch_size, arrow=arrow):
            if arrow:
                assert isinstance(b, pa.RecordBatch)
                sizes.append(b.num_rows)
                cols = {}
                for name in b.schema.names:
                    col = b.column(name)
                    if name == "time":
                        assert col.type == pa.timestamp("ns", tz="UTC")
                        col = col.cast(pa.int64())
                    cols[name] = col.to_pylist()
            else:
                assert isinstance(b, dict)
                for name, col in b.items():
                    if name in ("time", "clock", "writer_id", "source_id", "line",
                                "severity_value"):
                        assert isinstance(col, (array.array, list))
                sizes.append(len(next(iter(b.values()))) if b else 0)
                cols = {k: list(v) for k, v in b.items()}
            for k, v in cols.items():
                got.setdefault(k, []).extend(v)
        assert all(0 < s <= batch_size for s in sizes)
        return got


@dataclasses.dataclass
class Leg:
    qty: int
    px: float


def a_log() -> bytes:
    """Two threads, a rename, keyword fields, rich values, several call sites and levels."""
    s = blog.Session(channel_capacity=1 << 16)
    log = s.get_logger("orders")
    db = s.get_logger("db")
    out = blog.MemoryOutputStream()

    def worker(k: int) -> None:
        for i in range(300):
            log.info("order {} filled at {} qty {}", i, 101.25 + i, "AAPL")
            if i == 150:
                s.writer().name = f"renamed-{k}"
            if i % 50 == 0:
                db.warning("slow query {q} took {ms:.1f} ms", q="SELECT 1", ms=12.5 * i, host="h")
                log.error("legs {} at {}", [Leg(1, 2.0)], dt.datetime(2026, 1, 2, 3, 4, 5))
                log.debug("{!r} {}", "quoted\x00", Decimal("1.10"))
                log.info("fields only", oid=i, px=None, ok=True, sym="\ud800x")
            if i % 100 == 0:
                s.consume(out)

    in_threads(worker, 2)
    s.consume(out)
    return out.getvalue()


DATA = a_log()


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "lists"])
@pytest.mark.parametrize("batch_size", [1, 7, 65536])
def test_every_column_equals_what_bread_read_gives(arrow, batch_size):
    want = expected(DATA)
    assert len(want["clock"]) == 2 * (300 + 4 * 6)
    assert collect(DATA, batch_size=batch_size, arrow=arrow) == want


def test_c_and_python_paths_give_the_same_batches():
    if accel.speedups is None:
        pytest.skip("compares the C reader with Python: it is off (BREAD_PURE_PYTHON=1)")
    for arrow in (True, False):
        assert collect(DATA, arrow=arrow, use_c=True) == collect(DATA, arrow=arrow, use_c=False)


def test_only_the_columns_asked_for_in_their_order():
    cols = ["message", "time", "writer"]
    b = next(iter(bread.read_batches(io.BytesIO(DATA), cols)))
    assert b.schema.names == cols
    assert collect(DATA, cols) == expected(DATA, cols)
    b = next(iter(bread.read_batches(io.BytesIO(DATA), ["clock"], arrow=False)))
    assert list(b) == ["clock"] and isinstance(b["clock"], array.array)


def test_bad_arguments_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown column.*'when'.*the columns are time"):
        list(bread.read_batches(io.BytesIO(DATA), ["time", "when"]))
    with pytest.raises(TypeError, match="sequence of column names"):
        list(bread.read_batches(io.BytesIO(DATA), "time"))
    with pytest.raises(ValueError, match="batch_size"):
        list(bread.read_batches(io.BytesIO(DATA), batch_size=0))
    monkeypatch.setattr(batches, "has_arrow", lambda: False)
    with pytest.raises(ImportError, match="pyarrow"):
        list(bread.read_batches(io.BytesIO(DATA), arrow=True))
    assert isinstance(next(iter(bread.read_batches(io.BytesIO(DATA)))), dict)   # the default


def test_damage_and_unknown_sources_are_reported_as_by_read():
    cut = DATA[:len(DATA) // 2] + b"\x00" * 50 + DATA[len(DATA) // 2:]
    r1, r2 = bread.read(io.BytesIO(cut)), bread.read(io.BytesIO(cut))
    list(r1)
    got = {}
    for b in r2.batches(arrow=False):
        for k, v in b.items():
            got.setdefault(k, []).extend(v)
    assert got == expected(cut)
    assert r2.damage == r1.damage and r2.damage
    assert r2.unknown_sources == r1.unknown_sources


def test_numeric_columns_are_not_python_objects_per_row():
    b = next(iter(bread.read_batches(io.BytesIO(DATA), ["clock", "source_id"], arrow=False)))
    assert all(isinstance(v, array.array) and v.typecode == "q" for v in b.values())


from test_render_parity import a_file  # noqa: E402  (the same random files)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=a_file())
def test_random_files_give_the_columns_of_read(data):
    want = expected(data)
    assert collect(data, arrow=False) == want
    if accel.speedups is not None:
        assert collect(data, arrow=False, use_c=False) == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=a_file())
def test_random_files_give_the_columns_of_read_in_arrow(data):
    assert collect(data) == expected(data)


def sites_file() -> bytes:
    """Call sites whose columns are odd: a line beyond int64, an id nobody described, a
    writer without a name, many sites interleaved (more than gather's cache holds)."""
    from blogformat.entries import EventSource, WriterProp
    from test_render_parity import build
    sources = [EventSource(1, 0x20, "f", "cat", "/p/a.py", 2**64 - 1, "x {}", "i", (), 0),
               EventSource(2, 0x400, "g", "", "/p/b.py", 7, "y", "", (), 0)]
    sources += [EventSource(k, 0x80, f"h{k}", f"c{k}", "/p/c.py", k, "z", "", (), 0)
                for k in range(3, 300)]
    events = [[1, 5, [1]], [9999, 1, []], [2, 1, []], [1, 1, [2]]]
    events += [[3 + (k * 7919) % 297, 1, []] for k in range(600)]
    return build(sources, events, writers=(WriterProp(1, "main"), WriterProp(2, "")))


def test_source_and_writer_columns_keep_nulls_unknown_ids_and_many_sites():
    data = sites_file()
    want = expected(data)
    assert want["line"][0] is None and want["function"][1] == "?"
    for size in (3, 65536):
        assert collect(data, batch_size=size) == want
        assert collect(data, batch_size=size, arrow=False) == want


def test_arrow_take_is_the_way_when_gather_declines(monkeypatch):
    # gather returns None for more text than one Arrow string array holds (2 GiB).
    if accel.speedups is None:
        pytest.skip("gather is the C reader's: it is off (BREAD_PURE_PYTHON=1)")
    data = sites_file()
    monkeypatch.setattr(accel.speedups, "gather", lambda *a: None)
    assert collect(data, batch_size=100) == expected(data)


def test_gather_checks_its_arguments():
    if accel.speedups is None:
        pytest.skip("gather is the C reader's: it is off (BREAD_PURE_PYTHON=1)")
    gather = accel.speedups.gather
    ids = array.array("q", [1, 2, 3, 1]).tobytes()
    # (each a Block: a buffer, as pyarrow.py_buffer takes it, not bytes)
    values, offsets, valid = map(bytes, gather(ids, {1: b"ab", 2: None}, b"?", True))
    assert values == b"ab?ab"
    assert array.array("i", offsets).tolist() == [0, 2, 2, 3, 5]
    assert valid[0] & 0b1111 == 0b1101
    values, offsets, valid = gather(ids, {1: 5, 3: -1}, 0, False)
    assert array.array("q", bytes(values)).tolist() == [5, 0, -1, 5]
    assert offsets is None and valid is None
    with pytest.raises(TypeError):
        gather(ids, {1: "not bytes"}, b"", True)
    with pytest.raises(TypeError):
        gather(ids, [], b"", True)
    with pytest.raises(OverflowError):
        gather(ids, {1: 2**64}, 0, False)


def test_gather_fills_runs_of_one_id():
    # A stretch of rows of one call site (a columnar frame's, or one site's events) is
    # filled at once: its bytes copied, then doubled; nulls and ints by run too.
    if accel.speedups is None:
        pytest.skip("gather is the C reader's: it is off (BREAD_PURE_PYTHON=1)")
    gather = accel.speedups.gather
    runs = [1] * 37 + [2] * 5 + [3] * 9 + [1] + [4] * 1000
    ids = array.array("q", runs).tobytes()
    table = {1: b"abc", 2: None, 3: b"", 4: b"INFO"}
    values, offsets, valid = map(bytes, gather(ids, table, b"?", True))
    texts = [table[i] or b"" for i in runs]
    assert values == b"".join(texts)
    ends = array.array("i", offsets).tolist()
    assert ends[0] == 0 and [ends[k + 1] - ends[k] for k in range(len(runs))] == \
        [len(t) for t in texts]
    assert [bool(valid[k >> 3] >> (k & 7) & 1) for k in range(len(runs))] == \
        [i != 2 for i in runs]
    values, offsets, valid = gather(ids, {1: -5, 2: None, 4: 2**62}, 7, False)
    assert array.array("q", bytes(values)).tolist() == \
        [{1: -5, 2: 0, 3: 7, 4: 2**62}[i] for i in runs] and offsets is None


def test_columns_are_handed_to_arrow_without_a_copy():
    # take_columns() gives the memory the C renderer wrote the rows into (a read-only
    # buffer, not a copy into bytes); released, it is where a later batch's rows go.
    pa = pytest.importorskip("pyarrow")
    if accel.speedups is None:
        pytest.skip("the column buffers are the C reader's: it is off (BREAD_PURE_PYTHON=1)")
    data = sites_file()
    seen: set[int] = set()
    reused = 0
    for batch in bread.read_batches(io.BytesIO(data), ["clock", "message"], batch_size=50):
        addr = batch.column("clock").buffers()[1].address
        reused += addr in seen
        seen.add(addr)
        del batch
    assert reused > 0
    # a batch_size far beyond the file's events is not allocated up front
    big = list(bread.read_batches(io.BytesIO(data), ["clock"], batch_size=1 << 40))
    assert sum(b.num_rows for b in big) == len(expected(data, ["clock"])["clock"])
    c = accel.speedups.Renderer([], lambda *a: None, False)
    blocks = c.take_columns()[1:]
    assert not any(isinstance(b, bytes) for b in blocks)
    assert all(memoryview(b).readonly for b in blocks)
    assert [len(memoryview(b)) for b in blocks] == [0, 0, 0, 0, 0, 8, 0, 8, 0, 8]
    assert pa.py_buffer(blocks[5]).to_pybytes() == bytes(8)


def test_args_and_fields_are_json_that_reads_back_typed():
    # What Spark SQL and pandas parse: the values' JSON (bread.sinks.json.json_value), in UTF-8;
    # strings escaped as json escapes them, big ints and non-finite floats as $-objects.
    import json
    s = blog.Session()
    log = s.get_logger("j")
    out = blog.MemoryOutputStream()
    odd = ['q"uote', "back\\slash", "ctl\x00\x1f\n\t\x7f", "ünï 💡", "\ud800lone", ""]
    for v in odd + [2**53, 2**53 + 1, -2**63, 2**64 - 1, 1.5, float("nan"), float("-inf"),
                    -0.0, 1e300, True, None]:
        log.info("v {}", v, k=v, other=[v])
    s.consume(out)
    data = out.getvalue()
    for use_c in (True, False):
        got = collect(data, ["args", "fields"], arrow=True, use_c=use_c)
        evs = list(bread.read(io.BytesIO(data)))
        assert len(got["args"]) == len(evs) == 17
        for a, f, ev in zip(got["args"], got["fields"], evs):
            assert json.loads(a) == json_value(list(ev.args))
            assert json.loads(f) == json_value(ev.fields)
            a.encode("utf-8")   # valid UTF-8 (a lone surrogate is escaped)
    assert json.loads(got["args"][3]) == ["ünï 💡"] and "ünï 💡" in got["args"][3]


def _span_rows(path: str, cuts: list[int], use_c: bool = True) -> tuple[list, list]:
    """The rows of each part [cuts[k], cuts[k+1]) of a file, and the damage they report."""
    rows, damage = [], []
    with pytest.MonkeyPatch.context() as m:
        if not use_c:
            m.setattr(accel, "speedups", None)
        for a, b in zip(cuts, cuts[1:]):
            r = bread.reader.Reader(path, span=(a, b))
            for batch in r.batches(["clock", "writer", "message", "args", "host"], arrow=False):
                rows += list(zip(*batch.values()))
            damage += [(d.offset, d.reason) for d in r.damage]
    return rows, damage



def _span_file(tmp_path_factory) -> tuple[str, bytes]:
    p = tmp_path_factory.mktemp("span") / "x.blog"
    p.write_bytes(DATA + DATA)     # two streams: a second header mid-file
    return str(p), p.read_bytes()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.floats(0, 1), max_size=6), damaged=st.booleans())
def test_spans_that_tile_a_file_give_each_event_once(tmp_path_factory, cuts, damaged):
    # Parts cut at any byte (mid-frame too) read the frames that begin in them, with the
    # metadata before them: together, every event once, in order; damage reported once.
    path, data = _span_file(tmp_path_factory)
    if damaged:
        bad = bytearray(data)
        for at in (len(data) // 3, len(data) // 3 + 1, 2 * len(data) // 3):
            bad[at] ^= 0x55
        with open(path, "wb") as f:
            f.write(bad)
    whole, whole_damage = _span_rows(path, [0, len(data)])
    r = bread.reader.Reader(path)
    want = []
    for batch in r.batches(["clock", "writer", "message", "args", "host"], arrow=False):
        want += list(zip(*batch.values()))
    assert whole == want and whole_damage == [(d.offset, d.reason) for d in r.damage]
    points = sorted({0, len(data), *(int(c * len(data)) for c in cuts)})
    for use_c in ([True, False] if accel.speedups is not None else [False]):
        assert _span_rows(path, points, use_c) == (want, whole_damage)


def test_a_span_is_checked():
    with pytest.raises(ValueError, match="span"):
        bread.read_batches(io.BytesIO(DATA), span=(0, 10))
    with pytest.raises(ValueError, match="span"):
        bread.reader.Reader("x.blog", span=(5,))
    with pytest.raises(ValueError, match="sort"):
        bread.reader.Reader("x.blog", span=(0, 5), sort=True)


def test_sorted_batches_are_the_sorted_events(tmp_path):
    # Sorted batches (what the Spark data source's `sorted` option reads): the columns of
    # bread.read(..., sort=True), rows in its order, each with its own input's path.
    a, b = tmp_path / "a.blog", tmp_path / "b.blog"
    a.write_bytes(DATA)
    b.write_bytes(a_log())
    paths = [str(a), str(b)]
    want = [(e.ns, e.path, e.writer_id, e.message.encode("utf-8", "backslashreplace").decode())
            for e in bread.read(paths, sort=True)]
    got = []
    for batch in bread.reader.Reader(paths, sort=True).batches(
            ["time", "path", "writer_id", "message"], batch_size=100, arrow=False):
        got += list(zip(*batch.values()))
    assert got == want and len({p for _, p, _, _ in got}) == 2


def test_a_source_described_before_each_frame_costs_one_lookup_not_a_rebuild(monkeypatch):
    # A stream may describe a new source before each events frame: the columns of the
    # sources are updated per description (they were remade whole: O(sources**2)).
    from blogformat.entries import EventSource
    from test_render_parity import build
    calls = []
    get = batches.SOURCE_COLUMNS["category"]
    monkeypatch.setitem(batches.SOURCE_COLUMNS, "category", lambda s: calls.append(1) or get(s))
    n = 300
    parts = [build([EventSource(k, 0x20, f"c{k}", "f", "/p/a.py", k, "x", "", (), 0)],
                   [[k, 1, []]]) for k in range(1, n + 1)]
    data = parts[0] + b"".join(p[p.index(b"\x9eBLG\x02"):] for p in parts[1:])
    got = collect(data, ["category", "source_id"], batch_size=7)
    want = [f"c{k}" for k in range(1, n + 1)]
    assert got["category"] == want == expected(data, ["category"])["category"]
    assert len(calls) < 4 * n, len(calls)


def _hostile_names_log() -> bytes:
    """A log whose file header names a host and a program with lone surrogates."""
    from blogformat import frames as fmt
    from blogformat.entries import (ClockSync, EventSource, WriterProp, encode_metadata,
                                    header_payload)
    from blogformat.eventframes import BatchHeader
    from blogformat.valueencoding import packb
    meta = [ClockSync(0, 10**9, 0, 0, "UTC"), EventSource(1, 0x80, "c", "f", "x.py", 1, "{}",
                                                          "int"), WriterProp(1, "main")]
    return (fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({"host": "h\udcff",
                                                             "program": "p\ud800"}))
            + fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))
            + fmt.frame_bytes(fmt.FRAME_EVENTS, BatchHeader(1, 0, 2, 5, 6).encode()
                              + packb([1, 5, [1]]) + packb([1, 1, [2]])))


def test_a_file_whose_name_is_not_utf8_is_read_in_every_form(tmp_path):
    # Proves: a log named in bytes that are not UTF-8 (b"bad\xff.blog", which Python names
    # "bad\udcff.blog") is read, alone or in its directory, as Arrow or lists, on both paths:
    # its path column and ev.path are os.fsdecode(name) with each lone surrogate U+FFFD
    # (Arrow raised UnicodeEncodeError, and a Spark job failed). A header's host and
    # program holding lone surrogates are \udXXX, as in the message column.
    raw = os.path.join(os.fsencode(tmp_path), b"bad\xff.blog")
    try:
        with open(raw, "wb") as f:
            f.write(_hostile_names_log())
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    name = os.fsdecode(raw)
    shown = os.fsdecode(tmp_path) + "/bad\ufffd.blog"
    assert [ev.path for ev in bread.read(name)] == [shown, shown]
    for use_c in (True, False):
        for arrow in (True, False):
            for source in (name, str(tmp_path)):
                with pytest.MonkeyPatch.context() as m:
                    if not use_c:
                        m.setattr(accel, "speedups", None)
                    got = [b.to_pydict() if arrow else b for b in
                           bread.read_batches(source, ["path", "host", "program", "line"],
                                              arrow=arrow)]
                assert [list(b["path"]) for b in got] == [[shown, shown]], (use_c, arrow)
                assert [list(b["host"]) + list(b["program"]) for b in got] == [
                    ["h\\udcff"] * 2 + ["p\\ud800"] * 2]
