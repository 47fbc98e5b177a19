"""Sorted reading (bread.read(..., sort=True), bread -s): exact, stable, in bounded memory."""

from __future__ import annotations

import io
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

import bread
from blogformat import frames as fmt
from blogformat.entries import (BatchHeader, ClockSync, EventSource, WriterProp, encode_metadata,
                                header_payload)
from blogformat.values import packb
from bread import cli

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
    import sys
    data = a_file([(1, [10, 30]), (2, [20, 40])])
    cut = data[:-3]
    r = subprocess.run([sys.executable, "-m", "bread", "-s", "-f", "%r", "-"], input=cut,
                       capture_output=True, timeout=60)
    assert r.returncode == cli.EXIT_DAMAGED
    assert r.stdout.decode().splitlines() == ["10", "30"]   # the torn last frame is lost
    assert b"truncated" in r.stderr
