"""Edges of the C reader found by a review: each case once went wrong, on one path or both."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import tracemalloc
import zlib

import pytest

import bread
from blogformat import frames as fmt
from blogformat.entries import ClockSync, EventSource, WriterProp, encode_metadata, header_payload
from blogformat.eventframes import BatchHeader
from blogformat.valueencoding import packb
from bread import accel
from bread.frames import iter_frames
from bread.render import PrettyPrinter

from helpers import python_child, run_cli, write_log


def frames(*parts: bytes) -> bytes:
    return fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({})) + b"".join(parts)


def meta(*entries) -> bytes:
    return fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in entries))


def events(wid: int, evs: list[list], base: int = 0) -> bytes:
    clocks, c = [], base
    for e in evs:
        c += e[1]
        clocks.append(c)
    head = BatchHeader(wid, base, len(evs), min(clocks), max(clocks)).encode()
    return fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(packb(e) for e in evs))


def both_paths(fn):
    """fn() on the C path and on the Python path; the same result."""
    got = fn()
    if accel.speedups is not None:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(accel, "speedups", None)
            m.setattr(accel, "merge", None)
            assert fn() == got
    return got


SRC = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {}", "int")


def test_metadata_described_again_and_again_does_not_grow_memory():
    # Thousands of renames of one writer: the C tables once held every old name until
    # the next header, so memory grew with the file.
    def data(n: int) -> bytes:
        return frames(meta(SRC), *[meta(WriterProp(1, f"name {i} " * 20)) for i in range(n)],
                      events(1, [[1, 1, [5]]]))

    def peak(n: int) -> int:
        d = data(n)
        tracemalloc.start()
        try:
            assert [e.writer for e in bread.read(io.BytesIO(d))] == [f"name {n - 1} " * 20]
            printer = bread.render.PrettyPrinter("%m")
            assert b"".join(bread.read(io.BytesIO(d)).text(printer)) == b"v 5\n"
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(2_000), peak(20_000)
    assert large < small * 2 + (1 << 20), (small, large)


def test_a_gzip_damaged_early_keeps_what_came_before():
    data = write_log(None, 2000)
    want = [f"event {i} of a" for i in range(2000)]
    # The damage goes halfway through the events, whatever comes before them: a new
    # session's metadata also describes every value type this process has registered, so
    # in a suite its size depends on the tests run before. A full flush there ends the
    # compressed bytes of the first half on a byte of their own.
    first = next(fr.offset for fr in iter_frames(io.BytesIO(data))
                 if fr.kind == fmt.FRAME_EVENTS)
    mid = first + (len(data) - first) // 2
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = z.compress(data[:mid]) + z.flush(zlib.Z_FULL_FLUSH)
    packed = bytearray(head + z.compress(data[mid:]) + z.flush())
    packed[len(head) + 16] ^= 0xFF
    r = bread.read(io.BytesIO(bytes(packed)))
    got = [e.message for e in r]
    # What came before the damage is there (zlib may also give garbage for a while, which
    # the frames' checksums reject); nothing is invented; the damage is reported.
    assert len(got) > 900 and got[:900] == want[:900] and set(got) <= set(want), \
        (first, len(data), len(packed), len(got), r.damage)
    assert r.damage


def test_gzip_on_a_pipe_that_gives_two_bytes_first():
    class Trickle(io.RawIOBase):   # a pipe: a read gives what has arrived, not what was asked
        def __init__(self, data: bytes) -> None:
            self.parts = [data[:2], data[2:]]

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            if not self.parts:
                return 0
            part = self.parts.pop(0)
            n = min(len(b), len(part))
            b[:n] = part[:n]
            if n < len(part):
                self.parts.insert(0, part[n:])
            return n

    data = write_log(None, 30)
    r = bread.read(io.BufferedReader(Trickle(gzip.compress(data)), 16))
    assert [e.message for e in r] == [f"event {i} of a" for i in range(30)]


def test_batches_of_rows_before_their_metadata_match_read():
    late = EventSource(5, 0x400, "latecat", "f", "x.py", 1, "late {}", "int")
    data = frames(meta(SRC, WriterProp(1, "w")), events(1, [[5, 1, [1]], [1, 1, [2]]]),
                  meta(late, WriterProp(9, "late-writer")), events(9, [[5, 1, [3]]], 10))
    want = [(e.category, e.writer, e.message) for e in bread.read(io.BytesIO(data))]

    def rows():
        out = []
        for b in bread.read(io.BytesIO(data)).batches(["category", "writer", "message"],
                                                       arrow=False):
            out += list(zip(b["category"], b["writer"], b["message"]))
        return out
    assert both_paths(rows) == want
    assert want[0][0] == "?" and want[2] == ("latecat", "late-writer", "late 3")


def test_a_field_named_twice_renders_as_the_fields_dict_holds_it():
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "a={a} b={b}", "", ("a", "b", "a"), 0)
    data = frames(meta(src, WriterProp(1, "w")), events(1, [[1, 1, [1, 2, 3]]]))
    printer = bread.render.PrettyPrinter("%m")
    text = both_paths(lambda: b"".join(bread.read(io.BytesIO(data)).text(printer)))
    assert text == b"a=3 b=2\n"
    assert [e.message for e in bread.read(io.BytesIO(data))] == ["a=3 b=2"]


def test_unknown_sources_are_counted_whatever_the_filter():
    data = frames(meta(SRC, WriterProp(1, "w")), events(1, [[7, 1, [1]], [1, 1, [2]]]))

    def count(**kw):
        r = bread.read(io.BytesIO(data), **kw)
        list(r)
        return r.unknown_sources
    for kw in (dict(writers="other"), dict(until=0), dict(since=2**70), {}):
        assert both_paths(lambda: count(**kw)) == 1


def test_a_float_time_bound_is_taken():
    data = frames(meta(SRC, WriterProp(1, "w")), events(1, [[1, 10, [1]], [1, 10, [2]]]))
    assert both_paths(lambda: [e.clock for e in bread.read(io.BytesIO(data), since=15.0)]) == [20]


def test_the_message_getter_checks_its_object():
    with pytest.raises((AttributeError, TypeError)):
        bread.Event.message.fget(3)


def test_sorted_times_below_64_bits_sort_first_in_file_order_and_none_is_lost():
    # bread.merge: a time beyond 64 bits sorts as the least (or greatest) 64-bit time.
    sync = ClockSync(0, 1, 0, 0, "UTC")        # one tick a second: clocks far below -2**63 ns
    data = frames(meta(sync, SRC, WriterProp(1, "w")), events(1, [[1, 0, [3]]], 0),
                  events(1, [[1, 0, [1]]], -10**11), events(1, [[1, 0, [2]]], -10**12))
    got = both_paths(lambda: [e.args[0] for e in bread.read(io.BytesIO(data), sort=True)])
    assert got == [1, 2, 3]
    text = both_paths(lambda: b"".join(bread.read(io.BytesIO(data), sort=True).text(
        PrettyPrinter("%m"))))
    assert text == b"v 1\nv 2\nv 3\n"


def test_relative_times_are_exact():
    from bread.decode.filters import parse_time
    assert parse_time("2.3h", 10**19) == 10**19 - 8_280_000_000_000


def test_each_event_knows_its_input_and_the_process_that_wrote_it(tmp_path):
    # ev.origin: the input's name and the host, pid and program of its stream's header,
    # sorted or not; a header with values of the wrong type gives None, not an error.
    import os
    import socket
    import sys
    a, b = tmp_path / "a.blog", tmp_path / "b.blog"
    write_log(a, 5, "a")
    forged = frames(fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({"host": 7, "pid": "x"})),
                    meta(SRC, WriterProp(1, "w")), events(1, [[1, 0, [1]]]))
    b.write_bytes(forged)
    for sort in (False, True):
        got = both_paths(lambda: [(e.path, e.host, e.pid, e.program)
                                  for e in bread.read([str(a), str(b)], sort=sort)])
        program = os.path.basename(sys.argv[0])
        assert set(got) == {(str(a), socket.gethostname(), os.getpid(), program),
                            (str(b), None, None, None)}
        assert len(got) == 6


def test_fields_of_an_event_without_any_are_an_empty_dict_of_its_own():
    # The dict is made when first asked for (most events have none): it must behave as one.
    data = frames(meta(SRC, WriterProp(1, "w")), events(1, [[1, 0, [1]], [1, 1, [2]]]))

    def check():
        a, b = list(bread.read(io.BytesIO(data)))
        a.fields["x"] = 1
        return a.fields, b.fields, a.message
    assert both_paths(check) == ({"x": 1}, {}, "v 1")


def test_extreme_clocks_and_clock_syncs_never_raise(tmp_path, capsys):
    # Proves: a file with valid CRCs whose clock, ClockSync or frequency puts an event far
    # beyond what a datetime holds reads without an exception: ev.time is the first or
    # last datetime, ev.ns the exact value, and the README's loop runs to the end. The
    # clamping is reported as damage, once per stream (two such events here), never for a
    # time that fits; the CLI prints it and exits 3.
    import msgpack
    from blogformat.entries import header_payload, metadata_frames
    from blogformat.frames import FRAME_EVENTS, FRAME_HEADER, frame_bytes

    def make(sync, base):
        data = frame_bytes(FRAME_HEADER, header_payload({}))
        data += b"".join(metadata_frames([sync, EventSource(1, 0x80, "c", "f", "p", 1, "m {}",
                                                            "int"), WriterProp(1, "w")]))
        return data + frame_bytes(FRAME_EVENTS, BatchHeader(1, base, 2, base, base).encode()
                                  + msgpack.packb([1, 0, [5]]) + msgpack.packb([1, 0, [5]]))

    utc = dt.timezone.utc
    cases = [(ClockSync(0, 1, 0, 0, "UTC"), 2**62, dt.datetime.max.replace(tzinfo=utc)),
             (ClockSync(0, 1, 0, 0, "UTC"), -2**62, dt.datetime.min.replace(tzinfo=utc)),
             (ClockSync(0, 10**9, 2**63 - 1, 0, "UTC"), 2**63, None),
             (ClockSync(0, 10**9, 0, 0, "UTC"), 2**64 - 1, None),
             (ClockSync(0, 10**9, 0, 0, "UTC"), 2**63 - 1, "fits")]
    for sync, base, want in cases:
        for sort in (False, True):
            def read():
                r = bread.read(io.BytesIO(make(sync, base)), sort=sort)
                evs = list(r)
                return ([ev.message for ev in evs], [ev.ns for ev in evs], evs[0].time,
                        repr(evs[0]), [d.reason for d in r.damage])
            messages, nss, time, _, reasons = both_paths(read)
            assert messages == ["m 5", "m 5"] and all(isinstance(ns, int) for ns in nss)
            assert want in (None, "fits") or time == want
            if want == "fits":
                assert reasons == [] and nss[0] == 2**63 - 1
            else:
                assert len(reasons) == 1 and "beyond 64-bit ns" in reasons[0], reasons
        path = tmp_path / "x.blog"
        path.write_bytes(make(sync, base))
        for args in ([], ["-s"], ["-f", "%d %m"]):
            code, out, err = run_cli(args + [str(path)], capsys)
            assert out.count("m 5") == 2
            assert code == (0 if want == "fits" else 3), (args, err)


def test_one_event_never_renders_more_than_max_message():
    # Proves: output amplification is bounded per event. A format of 6,000 `{:10000}`
    # placeholders (60 MB of text per zero-argument event: 60 GB from a 52 KB file) renders
    # MAX_MESSAGE characters and the cut mark, on both paths; ev.args stay whole.
    from blogformat.placeholders import CUT_MARK, MAX_MESSAGE
    wide = EventSource(1, 0x80, "c", "f", "x.py", 1, "{:10000}" * 6000, "")
    data = frames(meta(wide, WriterProp(1, "w")), events(1, [[1, 1, []]] * 50))
    assert len(data) < 60_000

    def read():
        msgs = [ev.message for ev in bread.read(io.BytesIO(data))]
        return len(msgs), {len(m) for m in msgs}, {m[-len(CUT_MARK):] for m in msgs}
    assert both_paths(read) == (50, {MAX_MESSAGE + len(CUT_MARK)}, {CUT_MARK})


@pytest.mark.parametrize("extra", [-1, 0, 1, 5000])
@pytest.mark.parametrize("char", ["a", "é"])
def test_messages_at_the_limit_are_cut_alike_by_c_and_python(extra, char):
    # Proves: at the edge of MAX_MESSAGE, plain values rendered by C (for the CLI line and for
    # ev.message) and by Python give the same text, cut at the same character.
    from blogformat.placeholders import CUT_MARK, MAX_MESSAGE
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "<{}>{}{}", "")
    half = MAX_MESSAGE // 2
    v = char * (half - 1)
    data = frames(meta(src, WriterProp(1, "w")),
                  events(1, [[1, 1, [v, "z" * (extra + 1), v]]]))
    text = f"<{v}>" + "z" * (extra + 1) + v
    want = text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + CUT_MARK

    def read():
        (ev,) = bread.read(io.BytesIO(data))
        out = io.BytesIO()
        out.write(b"".join(bread.read(io.BytesIO(data)).text(PrettyPrinter("%m", "%Y"))))
        return ev.message, out.getvalue().decode()
    msg, line = both_paths(read)
    assert msg == want and line == want + "\n"


def test_the_cli_prints_an_amplifying_file_in_bounded_memory(tmp_path):
    # Proves: bread never buffers more than a bounded amount of output: 100 events of a
    # 6,000-placeholder format (each cut at MAX_MESSAGE) print 100 cut lines with the
    # process staying far below their total size (it once buffered them and died with
    # MemoryError), on both paths.
    from blogformat.placeholders import CUT_MARK, MAX_MESSAGE
    wide = EventSource(1, 0x80, "c", "f", "x.py", 1, "{:10000}" * 6000, "")
    path = tmp_path / "wide.blog"
    path.write_bytes(frames(meta(wide, WriterProp(1, "w")), events(1, [[1, 1, []]] * 100)))
    for pure in (False, True):
        lines, err, _, peak_kib = cli_peak(["-f", "%m", str(path)], pure)
        assert len(lines) == 101 and lines[-1] == b"", err[-500:]
        assert all(len(ln) == MAX_MESSAGE + len(CUT_MARK) for ln in lines[:-1])
        assert peak_kib < 40 * 1024 + MAX_MESSAGE * 12 // 1024, (pure, peak_kib)


def cli_peak(argv: list[str], pure: bool, setup: str = "") -> tuple[list[bytes], bytes, int, int]:
    """``bread argv`` in a process of its own (after ``setup``, Python code), on the C or the
    Python reader: (its output lines, stderr, exit status, peak memory in KiB). The peak is
    VmHWM (ru_maxrss would count the forked pytest process's memory too)."""
    import os
    import subprocess
    code = (f"import sys\n{setup}\nfrom bread.cli import main\n"
            "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
            "sys.stdout.flush()\n"
            "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0]\n"
            "print(code, hwm.split()[1], file=sys.stderr)")
    env = dict(os.environ, BREAD_PURE_PYTHON="1") if pure else dict(os.environ)
    r = subprocess.run(python_child("-c", code, *argv), env=env, timeout=120,
                       capture_output=True)
    status, peak = r.stderr.split()[-2:]
    return r.stdout.split(b"\n"), r.stderr, int(status), int(peak)


def test_metadata_beyond_the_limits_of_a_stream_is_damage(monkeypatch):
    # Proves (docs/format.md 9.1): a reader keeps at most MAX_SOURCE_ID sources, MAX_WRITERS
    # writers and MAX_METADATA_TEXT characters of metadata per stream (3 million call sites
    # once took 1.27 GiB): an entry beyond them is one Damage naming the limit, its events
    # read as of an unknown source or writer, and a new header starts a stream afresh.
    import bread.events as events_mod
    from blogformat.entries import MAX_METADATA_TEXT, MAX_SOURCE_ID
    monkeypatch.setattr(events_mod, "MAX_WRITERS", 2)
    big = "x" * (3 << 19)      # 1.5 Mi: under MAX_FORMAT_TEXT, 43 of them pass the total
    srcs = [EventSource(i, 0x80, "c", "f", "x.py", 1, "s{} " + big, "int")
            for i in range(1, MAX_METADATA_TEXT // len(big) + 2)]
    data = frames(meta(EventSource(MAX_SOURCE_ID + 1, 0x80, "c", "f", "x.py", 1, "far {}", ""),
                       EventSource(0, 0x80, "c", "f", "x.py", 1, "zero {}", ""),
                       SRC, WriterProp(1, "a"), WriterProp(2, "b"), WriterProp(3, "c"),
                       WriterProp(1, "a2"), WriterProp(2, "n" * (200 << 10))),
                  events(1, [[MAX_SOURCE_ID + 1, 1, [1]], [1, 1, [2]]]),
                  events(3, [[1, 1, [3]]]))
    data += b"".join(meta(s) for s in srcs) + events(2, [[srcs[-1].id, 1, [4]]])
    data += fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({})) + meta(SRC, WriterProp(3, "c")) \
        + events(3, [[1, 1, [5]]])

    def read():
        r = bread.read(io.BytesIO(data))
        got = [(e.writer, e.message) for e in r]
        return got, sorted(d.reason for d in r.damage), r.unknown_sources
    got, reasons, unknown = both_paths(read)
    assert got[:3] == [("a2", ""), ("a2", "v 2"), ("", "v 3")]
    assert got[3] == ("b", "") and got[4] == ("c", "v 5")
    assert unknown == 2
    assert any(f"source id {MAX_SOURCE_ID + 1} out of range" in x for x in reasons)
    assert any("source id 0 out of range" in x for x in reasons)
    assert any("more than 2 writers" in x for x in reasons)
    assert any(f"more than {MAX_METADATA_TEXT} characters" in x for x in reasons)
    assert any("WriterProp 2: name longer than its limit" in x for x in reasons)


def test_a_captured_text_that_is_not_a_str_renders_safely():
    # Proves: a crafted texts map whose value is an int too big to print (10**5000, past
    # Python's digit limit) renders as a marker: iterating bread.read and the CLI's line
    # rendering never raise.
    from blogformat.valueencoding import pack_args
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {}", "int")
    ev = b"\x94\x01\x01" + pack_args((1,)) + packb({0: 10**5000})
    head = BatchHeader(1, 0, 1, 1, 1).encode()
    data = frames(meta(src, WriterProp(1, "w")), fmt.frame_bytes(fmt.FRAME_EVENTS, head + ev))

    def read():
        (e,) = bread.read(io.BytesIO(data))
        lines = b"".join(bread.read(io.BytesIO(data)).text(PrettyPrinter("%m", "%Y")))
        return e.message, lines
    msg, lines = both_paths(read)
    assert msg.startswith("v {!ValueError") and lines.decode() == msg + "\n"


def test_sorting_holds_a_bounded_amount_of_lines(tmp_path):
    # Proves: `bread -s` never holds back more than MAX_HELD bytes of rendered lines (made
    # 16 MiB here). 60 events of the greatest message (about 1 MiB each), all at one time,
    # of writer 2, come before writer 1's one event at that time, which sorts first: all 60
    # would be held (60 MiB; with crafted files gigabytes) until the end. Past the bound the
    # least lines are printed early, every line is printed once, the damage says so (exit 3)
    # and the process stays below the bound plus a baseline, on both paths.
    from blogformat.placeholders import MAX_MESSAGE
    wide = EventSource(1, 0x80, "c", "f", "x.py", 1, "{} " + "{:10000}" * 6000, "")
    path = tmp_path / "wide.blog"
    path.write_bytes(frames(meta(wide, WriterProp(1, "one"), WriterProp(2, "two")),
                            *[events(2, [[1, 0, [f"a{k}"]] for k in range(6)], base=7)
                              for _ in range(10)],
                            events(1, [[1, 0, ["first"]]], base=7)))
    for pure in (False, True):
        lines, err_, code_, peak_kib = cli_peak(["-s", "-f", "%t %m", str(path)], pure,
                                                "import bread.merge\n"
                                                "bread.merge.MAX_HELD = 16 << 20")
        assert len(lines) == 62 and lines[-1] == b"", err_[-500:]
        assert sorted(ln.split()[:2] for ln in lines[:-1]) == (
            [[b"1", b"first"]] + [[b"2", f"a{k}".encode()] for k in range(6) for _ in range(10)])
        err = err_.decode()
        assert "sorting held more than 16 MiB of lines" in err, err[-500:]
        assert code_ == 3
        assert peak_kib < 40 * 1024 + 16 * 1024 + MAX_MESSAGE * 12 // 1024, (pure, peak_kib)
