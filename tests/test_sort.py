"""Sorted reading (bread.read(..., sort=True), bread -s): exact, stable, in bounded memory."""

from __future__ import annotations

import io
import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bread
import bread.merge.merger
from blogformat import frames as fmt
from blogformat.entries import ClockSync, EventSource, WriterProp, encode_metadata, header_payload
from blogformat.eventframes import BatchHeader
from blogformat.valueencoding import packb
from bread import cli

from helpers import Trickle, python_child

SRC = EventSource(1, 0x80, "c", "f", "x.py", 1, "{} {}", "int,int")


def a_file(frames: list[tuple[int, list[int]]], syncs: dict[int, ClockSync] | None = None,
           hints: bool = True, tag: int = 0) -> bytes:
    """Events frames [(writer id, [clocks...])], each event logging (tag, its index); a
    ClockSync before frame k for k in ``syncs``; batch headers with exact least and
    greatest clocks (``hints``) or without them."""
    meta = [SRC, WriterProp(1, "a"), WriterProp(2, "b"), WriterProp(3, "c")]
    out = [fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({})),
           fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))]
    n = 0
    for k, (wid, clocks) in enumerate(frames):
        if syncs and k in syncs:
            out.append(fmt.frame_bytes(fmt.FRAME_METADATA, encode_metadata(syncs[k])))
        if not clocks:
            continue
        base = clocks[0] - 5
        head = (BatchHeader(wid, base, len(clocks), min(clocks), max(clocks)).encode() if hints
                else packb([wid, base, len(clocks)]))
        body, prev = [], base
        for c in clocks:
            body.append(packb([1, c - prev, [tag, n]]))
            prev = c
            n += 1
        out.append(fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(body)))
    return b"".join(out)


def full_sort(files: list[bytes]) -> list[tuple]:
    """Every event in memory, sorted by time, then input, writer, position: the reference."""
    rows = []
    for i, data in enumerate(files):
        for pos, e in enumerate(bread.read(io.BytesIO(data))):
            rows.append((e.ns, i, e.writer_id, pos, e.args))
    rows.sort(key=lambda r: r[:4])
    return [(r[0], r[2], r[4]) for r in rows]


def merged(files: list[bytes]) -> list[tuple]:
    return [(e.ns, e.writer_id, e.args)
            for e in bread.read([io.BytesIO(d) for d in files], sort=True)]


_clock = st.integers(1_000_000, 1_000_200)     # a narrow range: many equal clocks
_frame = st.tuples(st.integers(1, 3), st.lists(_clock, max_size=6))
_sync = st.builds(ClockSync, st.integers(0, 10**6), st.sampled_from([10**9, 10**6, 7]),
                  st.integers(-10**6, 10**12), st.just(0), st.just("UTC"))


@settings(max_examples=200, deadline=None)
@given(files=st.lists(st.tuples(st.lists(_frame, max_size=8),
                                st.dictionaries(st.integers(0, 7), _sync, max_size=2),
                                st.booleans()), min_size=1, max_size=4))
def test_sorted_equals_a_full_sort_in_memory(files):
    # Writers' frames interleave in any way, clocks repeat and go back within a writer,
    # files have their own clock syncs (changing mid-file), with and without hints.
    data = [a_file(frames, syncs, hints, tag=i) for i, (frames, syncs, hints) in enumerate(files)]
    assert merged(data) == full_sort(data)
    # bread -s renders each input's lines first (in C where it can), then merges them:
    # the same lines as the sorted events rendered one by one.
    printer = bread.render.PrettyPrinter("%r %t %m %d")
    text = b"".join(bread.read([io.BytesIO(d) for d in data], sort=True).text(printer))
    assert text == b"".join(printer.line(e, False).encode() + b"\n"
                            for e in bread.read([io.BytesIO(d) for d in data], sort=True))


def test_writers_of_one_file_come_out_in_time_order():
    data = a_file([(1, [10, 20, 30]), (2, [5, 15, 25]), (1, [40, 50]), (2, [35, 45])])
    assert [e.clock for e in bread.read(io.BytesIO(data), sort=True)] == \
        [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]


def test_ties_go_by_input_then_writer_then_position():
    a = a_file([(2, [7, 7]), (1, [7])], tag=0)
    b = a_file([(1, [7])], tag=1)
    got = [(e.args[0], e.writer_id, e.args[1]) for e in bread.read([io.BytesIO(a), io.BytesIO(b)],
                                                                 sort=True)]
    assert got == [(0, 1, 2), (0, 2, 0), (0, 2, 1), (1, 1, 0)]


def test_files_of_different_processes_align_by_wall_time():
    # The same wall time, from clocks that differ: process A's clock counts from 0 in ms,
    # process B's is ns since the epoch.
    a = a_file([(1, [1000, 3000])], {0: ClockSync(0, 1000, 10**12, 0, "UTC")}, tag=0)
    b = a_file([(1, [10**12 + 2 * 10**9])], {0: ClockSync(0, 10**9, 0, 0, "UTC")}, tag=1)
    assert [e.args[0] for e in bread.read([io.BytesIO(a), io.BytesIO(b)], sort=True)] == [0, 1, 0]


def _peak_sorted(rounds: int) -> tuple[int, int]:
    """Peak memory (tracemalloc) of a sorted read of 2 inputs of 2 writers, events in
    frames of 100 as a consumer writes them, and how many events came out in order."""
    files = []
    for i in range(2):
        frames, t = [], 0
        for _ in range(rounds):
            for w in (1, 2):
                frames.append((w, [t + w + 2 * j for j in range(100)]))
            t += 200
        files.append(a_file(frames, tag=i))
    tracemalloc.start()
    try:
        n, last = 0, None
        for e in bread.read([io.BytesIO(d) for d in files], sort=True):
            assert last is None or e.ns >= last
            last = e.ns
            n += 1
        return tracemalloc.get_traced_memory()[1], n
    finally:
        tracemalloc.stop()


def test_memory_stays_bounded_however_large_the_input():
    small, n1 = _peak_sorted(50)      # 20,000 events
    large, n2 = _peak_sorted(200)     # 80,000 events: holding them all would take ~40 MB
    assert (n1, n2) == (20_000, 80_000)
    assert large < small * 1.3 + (256 << 10), (small, large)   # 4x the events
    assert large < 16 << 20, large   # all 80,000 events held would be about 40 MB


def test_the_cli_sorts_with_s(tmp_path, capsys):
    p = tmp_path / "x.blog"
    p.write_bytes(a_file([(1, [10, 30]), (2, [20, 40])]))
    assert cli.main(["-s", "-f", "%r %t", str(p)]) == 0
    assert capsys.readouterr().out.splitlines() == ["10 1", "20 2", "30 1", "40 2"]
    assert cli.main(["--sort", "-f", "%r", str(p), str(p)]) == 0
    assert capsys.readouterr().out.splitlines() == ["10", "10", "20", "20", "30", "30", "40", "40"]


def test_sorted_stdin_and_damage(tmp_path):
    import subprocess
    data = a_file([(1, [10, 30]), (2, [20, 40])])
    cut = data[:-3]
    r = subprocess.run(python_child("-m", "bread", "-s", "-f", "%r", "-"), input=cut,
                       capture_output=True, timeout=60)
    assert r.returncode == cli.EXIT_DAMAGED
    # the torn last frame gives its complete event, unverified, in its place
    assert r.stdout.decode().splitlines() == ["10", "20", "30"]
    assert b"cut short" in r.stderr and b"1 complete event(s)" in r.stderr


def _misplaced() -> bytes:
    """A 1 Hz clock's file (seconds): a frame whose batch header says min_clock 1000, above
    two of its events (999 and 998), one of them at -10**10 s, beyond 64-bit ns; then a
    frame whose header is exact. Each event logs its index."""
    meta = [ClockSync(0, 1, 0, 0, "UTC"), EventSource(1, 0x80, "c", "f", "x.py", 1, "{}", "int"),
            WriterProp(1, "a")]
    out = [fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({})),
           fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))]
    n = 0
    for least, clocks in ((1000, [999, -10**10, 1001, 998]), (1002, [1002, 1003])):
        body, prev = [], least
        for c in clocks:
            body.append(packb([1, c - prev, [n]]))
            prev, n = c, n + 1
        head = BatchHeader(1, least, len(clocks), least, max(clocks)).encode()
        out.append(fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(body)))
    return b"".join(out)


@pytest.mark.parametrize("block", [None, 1])
@pytest.mark.parametrize("use_c", [True, False] if bread.accel.speedups else [False])
def test_a_frames_events_come_out_in_time_order_whatever_its_min_clock_says(monkeypatch, use_c,
                                                                              block):
    # Proves: the events of one frame come out in time order among themselves (a time
    # beyond 64-bit ns as the least 64-bit time), as Events, by bread -s and by bread -s
    # -o jsonl and -o csv, on the C path and the Python path, though its batch header's
    # min_clock is above two of them, one's time is beyond 64-bit ns (C leaves it and the
    # rest of the frame to Python) and (``block``) each line or row fills a block: the
    # merge gives out nothing of a frame before all of it is in. Before, what came before
    # the split came out first: on the C path 999 before -10**10
    # (tests/test_export_parity.py, EXPORT_SEED=15851), on both with blocks of one line.
    import csv
    import json

    from bread.merge import keyed
    from bread.sinks import lines, rows
    if not use_c:
        monkeypatch.setattr(bread.accel, "speedups", None)
    if block is not None:   # (C's blocks, the Python path's blocks and runs)
        monkeypatch.setattr(lines, "MAX_BLOCK", block)
        monkeypatch.setattr(rows, "MAX_BLOCK", block)
        monkeypatch.setattr(keyed, "RUN_BYTES", block)
    data = _misplaced()

    def read():
        return bread.read(io.BytesIO(data), sort=True)
    want = [1, 3, 0, 2, 4, 5]   # -10**10 s, 998, 999, 1001, 1002, 1003
    assert [e.args[0] for e in read()] == want
    text = b"".join(read().text(bread.render.PrettyPrinter("%m"))).decode()
    assert text.splitlines() == [str(k) for k in want]
    jsonl = b"".join(read().rows("jsonl")).decode()
    assert [json.loads(line)["message"] for line in jsonl.splitlines()] == [str(k) for k in want]
    table = b"".join(read().rows("csv")).decode()
    assert [r["message"] for r in csv.DictReader(io.StringIO(table))] == [str(k) for k in want]


# --- the Merger: C (bread/merge/_merge.c) and the Python reference, item for item ------

_MERGERS = [bread.merge.merger.Merger] + ([bread.accel.merge.Merger] if bread.accel.merge else [])
_run = st.tuples(st.integers(0, 2), st.integers(0, 3),     # input position, writer id
                 st.lists(st.tuples(st.integers(-3, 3), st.binary(max_size=3)), max_size=6))


def _keys(pairs) -> bytes:
    import array
    return array.array("q", [v for p in pairs for v in p]).tobytes()


def _drive(cls, text: bool, steps) -> list:
    """Runs added and limits emitted in turn; everything given out, in order."""
    m = cls(text, max_out=4)      # a small max_out: emit() is called again and again
    out = []
    for run, limit in steps:
        position, wid, items = run
        if text:
            ends, end = [], 0
            for _, line in items:
                end += len(line)
                ends.append(end)
            m.add(b"".join(line for _, line in items), _keys(zip([t for t, _ in items], ends)),
                  position, wid)
        else:
            m.add([line for _, line in items], _keys((t, 0) for t, _ in items), position, wid)
        while True:
            got = m.emit(limit)
            if not got:
                break
            out.append(got)
        out.append((m.held, m.held_bytes))
    while got := m.emit():
        out.append(got)
    out.append((m.held, m.held_bytes))
    return out


@settings(max_examples=300, deadline=None)
@given(text=st.booleans(),
       steps=st.lists(st.tuples(_run, st.one_of(st.none(), st.integers(-4, 4))), max_size=8))
def test_the_c_merger_gives_what_the_python_reference_gives(text, steps):
    # Runs in and out of order (sorted stably), equal times (input, writer, run, place),
    # limits up and down, empty runs, empty lines.
    results = [_drive(cls, text, steps) for cls in _MERGERS]
    assert all(r == results[0] for r in results)
    assert results[0][-1] == (0, 0)            # nothing held at the end


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(_run, max_size=8), limit=st.one_of(st.none(), st.integers(-4, 4)))
def test_the_merger_gives_each_item_once_in_key_order(runs, limit):
    # Items that are their own sort keys: (time, input, writer, run, place in the run).
    for cls in _MERGERS:
        m = cls(False, max_out=3)
        every = []
        for seq, (position, wid, items) in enumerate(runs):
            keyed = [(t, position, wid, seq, k) for k, (t, _) in enumerate(items)]
            order = sorted(range(len(keyed)), key=lambda k: keyed[k][0])   # stable
            keyed = [keyed[k][:4] + (order.index(k),) for k in range(len(keyed))]
            every += keyed
            m.add(keyed, _keys((k[0], 0) for k in keyed), position, wid)
        first = []
        while got := m.emit(limit):
            first += got
        rest = []
        while got := m.emit():
            rest += got
        assert first == sorted(k for k in every if limit is None or k[0] < limit)
        assert first + rest == sorted(every)


@pytest.mark.parametrize("cls", _MERGERS)
def test_the_merger_refuses_bad_runs(cls):
    m = cls(True)
    with pytest.raises(ValueError):
        m.add(b"ab", b"\0" * 15, 0, 0)                      # not int64 pairs
    with pytest.raises(ValueError):
        m.add(b"ab", _keys([(1, 3)]), 0, 0)                # a line beyond the text
    with pytest.raises(ValueError):
        m.add(b"ab", _keys([(1, 2), (2, 1)]), 0, 0)        # ends going back
    with pytest.raises(TypeError):
        m.add(["ab"], _keys([(1, 2)]), 0, 0)               # a text merger takes bytes
    with pytest.raises(TypeError):
        cls(False).add(b"ab", _keys([(1, 2)]), 0, 0)
    with pytest.raises(ValueError):
        cls(False).add([1, 2], _keys([(1, 0)]), 0, 0)      # one key per item
    with pytest.raises(ValueError):
        cls(True, max_out=0)
    assert m.held == 0 and m.emit() == b""


def test_the_skimmed_index_is_the_checked_one_and_damage_still_sorts():
    # The first pass skims a seekable input (frame headers, metadata, batch headers);
    # it must give what reading every checked frame gives, and damage anywhere (a frame
    # header, an events payload, a cut tail) must still sort every readable event.
    from bread.frames import Skim
    from bread.merge.index import index

    def checked(b: bytes):
        return index(Trickle(b, len(b) + 1), "x")      # a pipe: its checked frames are read

    def skimmed(b: bytes) -> bool:
        skim = Skim(io.BytesIO(b), 0)
        for _ in skim.frames():
            pass
        return skim.clean

    data = a_file([(1, [10, 30, 50]), (2, [20, 40]), (3, [5, 60]), (1, [70, 80])],
                  {2: ClockSync(0, 10**9, 10**12, 0, "UTC")})
    assert skimmed(data) and index(io.BytesIO(data), "x") == checked(data)
    third = [m.start() for m in re.finditer(re.escape(fmt.MAGIC), data)][3]
    for at, clean in ((third + 6, False), (third + 25, True), (len(data) - 3, False)):
        bad = bytearray(data)
        bad[at] ^= 0xFF                          # a frame header, an events payload
        if at == len(data) - 3:
            bad = bad[:at]                       # a cut tail
        bad = bytes(bad)
        assert skimmed(bad) == clean
        if not clean:                            # read through the checked frames instead
            assert index(io.BytesIO(bad), "x") == checked(bad)
        expect = full_sort([bad])
        assert merged([bad]) == expect and 0 < len(expect) < 11
