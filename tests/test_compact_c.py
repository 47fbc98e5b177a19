"""bread compact's C fast path (bread/compact/_compact.c) against its pure-Python reference: the
same records from an events frame, the same columnar and row frames from a stretch of
records, byte for byte, whatever the events hold (random streams: hypothesis), and the
same compacted files of the golden files. Skipped where the C path is not built or not
chosen (BREAD_PURE_PYTHON=1: the reference is what runs)."""

from __future__ import annotations

import contextlib
import io
import pathlib

import msgpack
import pytest
from hypothesis import example, given, settings, strategies as st

from blogformat import columnframes
from blogformat.eventframes import BatchHeader, event_prefix
from blogformat.frames import FRAME_EVENTS
from blogformat.valuetypes import TypeTable
from bread import accel
from bread.compact import compactor
from bread.compact.compactor import Compactor, _columns
from bread.frames import Frame

from test_columnframes import frames, packed, values

fast = accel.compact
pytestmark = pytest.mark.skipif(fast is None, reason="the C fast path is not built or chosen")
GOLDEN = sorted((pathlib.Path(__file__).parent / "data" / "v1").glob("*.blog"))


@contextlib.contextmanager
def pure():
    """The pure-Python reference inside the block."""
    accel.compact = None
    try:
        yield
    finally:
        accel.compact = fast


def records(events, shapes) -> list[tuple]:
    """Compactor records of columnframes Events; ``shapes`` bends some out of the common
    shape (more elements, a raw that is not an array)."""
    out = []
    for seq, (e, shape) in enumerate(zip(events, shapes)):
        head = packed([0] * len(e[3]))[:-len(e[3]) or None]   # an array header of that many
        raw = head + b"".join(e[3]) + (e[4] or b"")
        n = 3 if e[4] is None else 4
        if shape == 1:
            raw, n = raw + packed(7), n + 1
        elif shape == 2:
            raw = packed("not an array") + raw[1:]
        out.append((e[2], e[1], seq + 1, e[0], n, raw))
    return out


def both(fn, *args) -> tuple[bytes, dict, bytes, dict]:
    """What ``fn(out, chunk, counts)`` writes and counts, in C and in Python."""
    got = []
    for ctx in (contextlib.nullcontext(), pure()):
        with ctx:
            out, counts = io.BytesIO(), {}
            fn(out, *args, counts)
            got += [out.getvalue(), counts]
    return tuple(got)  # type: ignore[return-value]


@settings(max_examples=150, deadline=None)
@given(frames(), st.lists(st.sampled_from([0] * 30 + [1, 2]), min_size=40, max_size=40))
def test_columnar_and_row_frames_are_those_of_the_reference_byte_for_byte(events, shapes):
    chunk = records(events, shapes)
    c_bytes, c_counts, py_bytes, py_counts = both(_columns, chunk)
    assert c_bytes == py_bytes and list(c_counts.items()) == list(py_counts.items())
    c_bytes, c_counts, py_bytes, py_counts = both(Compactor._events, chunk)
    assert c_bytes == py_bytes and list(c_counts.items()) == list(py_counts.items())


@settings(max_examples=30, deadline=None)
@given(st.integers(256, 1500), st.sampled_from(["ints", "jumps", "decimals", "words", "mixed"]),
       st.randoms(use_true_random=False))
def test_long_columns_choose_their_coding_as_the_reference(n, kind, rng):
    # Columns of 256 values or more choose between their int codings by what zlib makes of
    # them; strings past the dictionary's limit are packed.
    make = {"ints": lambda i: i * 3 + rng.randint(0, 2),
            "jumps": lambda i: rng.randint(-2**40, 2**40),
            "decimals": lambda i: round(rng.uniform(0, 500), rng.randint(0, 3)),
            "words": lambda i: rng.choice(["a", "bb", "c" * 40, str(rng.randint(0, n))]),
            "mixed": lambda i: rng.choice([i, 1.5, "x", None, [i]])}[kind]
    events = [(1 + i % 2, 1 + i % 3, 1000 + 7 * i + rng.randint(0, 5) ** 3,
               [packed(make(i)), packed(i)], None) for i in range(n)]
    chunk = records(events, [0] * n)
    c_bytes, c_counts, py_bytes, py_counts = both(_columns, chunk)
    assert c_bytes == py_bytes and c_counts == py_counts


@settings(max_examples=120, deadline=None)
@given(st.one_of(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=12),
                 st.lists(st.integers(-300, 300), min_size=1, max_size=600)))
def test_clocks_anywhere_in_64_bits_are_framed_as_the_reference_frames_them(clocks):
    # The clocks as deltas less their median (DELTAS; the median found by quickselect in
    # C, by sorting in Python; many equal deltas too) as the reference writes them, and no
    # columnar frame where the median or a difference less it is beyond 64 bits.
    events = [columnframes.Event(1, 1, c, [packed(i)]) for i, c in enumerate(clocks)]
    try:
        want: bytes | None = columnframes.encode(events)
    except ValueError:
        want = None
    assert fast.columns(records(events, [0] * len(events)), {}) == want


@st.composite
def events_frames(draw):
    """An events frame's payload of random events: values of every kind (extension values
    that look like described ones too), clocks that step back, the odd damaged byte."""
    n = draw(st.integers(1, 30))
    ext = st.builds(msgpack.ExtType, st.sampled_from([1, 15, 16]), st.binary(max_size=5))
    base = draw(st.one_of(st.integers(-2**62, 2**62), st.integers(2**63, 2**64 - 1)))
    parts = [BatchHeader(draw(st.integers(1, 3)), base, n, 0, 0).encode()]
    for _ in range(n):
        args = draw(st.lists(st.one_of(values, ext), max_size=3))
        texts = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=2), st.integers(-9, 9),
                                                          max_size=2)))
        body = packed(args) + (b"" if texts is None else packed(texts))
        parts.append(event_prefix(3 if texts is None else 4, draw(st.integers(0, 5)),
                                  draw(st.integers(-10**12, 10**12))) + body)
    payload = bytearray(b"".join(parts))
    if draw(st.booleans()):
        payload[draw(st.integers(0, len(payload) - 1))] = draw(st.integers(0, 255))
    return bytes(payload)


def take(payload: bytes, sync: tuple) -> tuple:
    c = Compactor("/nonexistent")
    c._frame(Frame(0, FRAME_EVENTS, payload), {}, {}, {}, TypeTable(), sync, {}, "x")
    return c.runs.buf, [str(d) for d in c.damage], list(c.sources.values()), c.types


@settings(max_examples=200, deadline=None)
@given(events_frames(), st.sampled_from([(0, 10**9, 0), (5, 3, -7), (2**40, 10**6, 2**61),
                                         (2**63, 10**9, 0)]))
@example(BatchHeader(1, 2**63 + 5, 2, 0, 0).encode() + event_prefix(3, 1, 0) + packed([1])
         + event_prefix(3, 1, 4) + packed([2]), (2**63, 10**9, 0))
def test_an_events_frame_gives_the_records_of_the_reference(payload, sync):
    # Walking in C, with Python taking the events C leaves (a described value, maybe, to
    # renumber; damage from where it starts; a base clock beyond 64 bits, whose times may
    # fit: C hands back the clock as it came), gives the reference's records and damage.
    got = take(payload, sync)
    with pure():
        assert got == take(payload, sync)


@pytest.mark.parametrize("columnar", [False, True], ids=["rows", "columnar"])
def test_golden_files_compact_to_the_same_bytes_on_both_paths(tmp_path, monkeypatch, columnar):
    monkeypatch.setattr(compactor.time, "time_ns", lambda: 1)
    for golden in GOLDEN:
        got = []
        for ctx in (contextlib.nullcontext(), pure()):
            with ctx:
                c = Compactor(str(tmp_path))
                c.add_file(str(golden))
                out = io.BytesIO()
                c.write(out, [golden.name], columnar)
                got.append(out.getvalue())
        assert got[0] == got[1], golden.name


@pytest.mark.parametrize("count", [-3, 0, 2**40])
def test_a_batch_header_count_beyond_its_events_is_the_reference_s_too(count):
    # A count below zero is no event (never a loop that waits for it to reach zero); one
    # beyond the payload is the damage of the events that are not there.
    events = b"".join(event_prefix(3, 1, 5) + packed([i]) for i in range(4))
    payload = BatchHeader(1, 0, count, 0, 0).encode() + events
    got = take(payload, (0, 10**9, 0))
    with pure():
        assert got == take(payload, (0, 10**9, 0))
    assert len(got[0]) == (0 if count <= 0 else 4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(0, 2**63 - 1),
                          st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1),
                          st.integers(0, 2**31 - 1), st.binary(max_size=20)), max_size=30))
def test_a_run_block_in_the_c_layout_reads_back_as_it_was(records):
    assert fast.unpack_run(fast.pack_run(records)) == records


@pytest.mark.parametrize("odd", [(2**63, 1, 1, 1, 3, b""), (1, 1, 1, 1, 2**31, b""),
                                 (1, 1, 1, 1, 3, "str"), (1, 1, 1, 1, 3), [1, 1, 1, 1, 3, b""],
                                 (True, 1, 1, 1, 3, b"")])
def test_a_record_the_c_layout_does_not_hold_leaves_the_block_to_msgpack(odd):
    assert fast.pack_run([(1, 1, 1, 1, 3, b"x"), odd]) is None


@pytest.mark.parametrize("shape", ["rising", "falling", "organ", "equal", "saw", "random"])
def test_the_median_clock_delta_of_ordered_and_hostile_orders_is_the_reference_s(shape):
    # The median of a frame's clock deltas, whatever their order (those that make a
    # quickselect take many rounds included), is the one Python's sort gives.
    import random
    n, rng = 20_000, random.Random(3)
    deltas = {"rising": list(range(n)), "falling": list(range(n, 0, -1)),
              "organ": list(range(n // 2)) + list(range(n // 2, 0, -1)), "equal": [5] * n,
              "saw": [i % 97 for i in range(n)],
              "random": [rng.randint(-9, 9) for _ in range(n)]}[shape]
    clocks, c = [], 0
    for d in deltas:
        c += d
        clocks.append(c)
    events = [columnframes.Event(1, 1, c, [packed(0)]) for c in clocks]
    assert fast.columns(records(events, [0] * n), {}) == columnframes.encode(events)
