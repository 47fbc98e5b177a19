"""Columnar events frames (docs/format.md 5.5): every event comes back byte for byte, as
ordinary events payloads every reader reads, and damaged frames are refused, never
trusted."""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from blogformat import columnframes as cf
from blogformat.eventframes import decode_events
from blogformat.valuedecoding import unpackb
from blogformat.values import PACK_OPTIONS
from blogformat.valuetypes import BadEntry


def packed(v) -> bytes:
    return msgpack.packb(v, **PACK_OPTIONS)


scalars = st.one_of(
    st.integers(-2**63, 2**64 - 1), st.floats(), st.text(max_size=8),
    st.sampled_from(["AAPL", "MSFT", "GOOG"]), st.booleans(), st.none(), st.binary(max_size=4),
    st.floats(0, 200).map(lambda f: round(f, 2)),
    st.builds(msgpack.ExtType, st.integers(0, 20), st.binary(max_size=6)))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@st.composite
def frames(draw):
    # Up to three sources, each with its own number of values; a column often holds one
    # kind of value (the typed codings), sometimes a mix.
    shapes = {}
    for sid in draw(st.lists(st.integers(1, 70000), min_size=1, max_size=3, unique=True)):
        shapes[sid] = [draw(st.sampled_from([scalars, values, st.integers(-10**6, 10**6),
                                             st.floats(0, 1e4).map(lambda f: round(f, 3)),
                                             st.sampled_from(["a", "b", "c"])]))
                       for _ in range(draw(st.integers(0, 4)))]
    n = draw(st.integers(1, 40))
    clock = draw(st.integers(-2**62, 2**62))
    events = []
    for _ in range(n):
        clock += draw(st.integers(0, 10**9))
        sid = draw(st.sampled_from(sorted(shapes)))
        texts = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=2), st.text(max_size=3),
                                                          min_size=1, max_size=2)))
        events.append(cf.Event(sid, draw(st.integers(1, 4)), clock,
                               [packed(draw(k)) for k in shapes[sid]],
                               None if texts is None else packed(texts)))
    return events


@settings(max_examples=80, deadline=None)
@given(frames())
def test_events_come_back_byte_for_byte_in_order(events):
    assert cf.decode(cf.encode(events)) == events


@settings(max_examples=50, deadline=None)
@given(frames())
def test_as_events_payloads_every_reader_reads_them_in_writer_order(events):
    got = []
    for payload in cf.events_payloads(cf.encode(events)):
        got += [(e.writer_id, e.source_id, e.clock, e.args, e.texts)
                for e in decode_events(payload, 0)]
    want = [(e[1], e[0], e[2], [unpackb(v) for v in e[3]], {} if e[4] is None else unpackb(e[4]))
            for w in dict.fromkeys(e[1] for e in events) for e in events if e[1] == w]
    assert _same(got, want)


def _same(a, b) -> bool:
    # NaN equals itself here (a float column keeps its bits).
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


def test_typed_columns_are_chosen_and_smaller_than_packed_values():
    events = [cf.Event(7, 1, 1000 + 300 * i + i % 7,
                       [packed(i), packed(round(100 + i * 0.25, 2)),
                        packed(["AAPL", "MSFT"][i % 2])])
              for i in range(1000)]
    head = msgpack.unpackb(cf.encode(events), strict_map_key=False)
    [(sid, width, columns)] = head[1]
    assert (sid, width, [c[0] for c in columns]) == (7, 3, [cf.INTS, cf.DECIMALS, cf.STRINGS])
    assert columns[1][1] == 2                                   # two decimals
    assert len(cf.encode(events)) < 6 * len(events)             # rows take about 25 bytes
    assert cf.decode(cf.encode(events)) == events


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0, 0.1 + 0.2, 1e300,
                                   2.0**-1074])
def test_floats_no_decimal_gives_exactly_are_kept_as_doubles(value):
    events = [cf.Event(1, 1, i, [packed(value), packed(1.5)]) for i in range(3)]
    assert cf.decode(cf.encode(events)) == events


@settings(max_examples=80, deadline=None)
@given(frames(), st.data())
def test_a_damaged_frame_is_refused_or_reads_within_its_bounds(events, data):
    # Proves: whatever a byte is changed to, decoding raises BadEntry or gives at most the
    # frame's count of events, each with at most MAX_VALUES values: never anything else.
    payload = bytearray(cf.encode(events))
    at = data.draw(st.integers(0, len(payload) - 1))
    payload[at] = data.draw(st.integers(0, 255))
    try:
        got = cf.decode(bytes(payload))
    except BadEntry:
        return
    assert len(got) <= cf.MAX_EVENTS and all(len(e[3]) <= cf.MAX_VALUES for e in got)


def test_counts_beyond_the_bytes_are_refused_without_allocating_them():
    forged = packed([[cf.INTS, b"\x00"], [], cf.MAX_EVENTS, 0, 0, [cf.INTS, b"\x00"],
                     [cf.CLOCKS, b"\x00"], None])
    with pytest.raises(BadEntry, match="not bytes enough"):
        cf.decode(forged)
    with pytest.raises(BadEntry, match="out of range"):
        cf.decode(packed([[0, b""], [], cf.MAX_EVENTS + 1, 0, 0, [0, b""], [1, b""], None]))


def test_no_column_makes_values_without_the_bytes_that_back_them():
    # Proves (a review's finding): a value column cannot be "same" (a count's values from
    # one int), nor the clocks: a few hundred bytes can no longer make a million events
    # of 256 values each; the source and writer columns may (one value per event).
    same, ints = [cf.SAME, 7], [cf.INTS, b"\x00" * 4]
    clocks = [cf.CLOCKS, b"\x00" * 4]
    cases = [
        [same, [[1, 2, [[cf.INTS, b"\x00" * 4], same]]], 4, 0, 0, same, clocks, None],
        [same, [[1, 0, []]], cf.MAX_EVENTS, 0, 0, same, [cf.SAME, 0], None],
        [same, [[1, 1, [[cf.DECIMALS, 2, same]]]], 4, 0, 0, same, clocks, None],
        [same, [[1, 0, []]], 4, 0, 0, same, clocks, [cf.STRINGS, ["a"], b"\x00" * 4]]]
    for head in cases:
        with pytest.raises(BadEntry):
            cf.decode(packed(head))
    assert len(cf.decode(packed([same, [[7, 1, [ints]]], 4, 0, 0, same, clocks, None]))) == 4


def test_clocks_a_writer_cannot_take_as_deltas_are_damage_not_a_crash(monkeypatch):
    # Proves (a review's finding): clocks at the two ends of the 64-bit range, one after the
    # other for one writer, are refused as damage (BadEntry), never an OverflowError: as
    # "plain" ints (not a clocks column: refused) and through events_payloads' own check.
    ends = [(1 << 63) - 1, -(1 << 63)]
    plain = [cf.PLAIN, -(1 << 63), bytes(cf._put_varints([(1 << 63) - 1, 0]))]
    with pytest.raises(BadEntry):
        cf.decode(packed([[cf.SAME, 1], [[1, 0, []]], 2, 0, 0, [cf.SAME, 1], plain, None]))
    monkeypatch.setattr(cf, "decode", lambda payload: [cf.Event(1, 1, c, []) for c in ends])
    with pytest.raises(BadEntry, match="beyond 64 bits"):
        list(cf.events_payloads(b""))


def test_values_msgpack_cannot_make_objects_of_are_packed_as_they_are():
    # Proves (a review's finding): a map with an array key, which bread reads as an
    # opaque value, goes into a packed column byte for byte instead of failing the encode.
    odd = b"\x81\x91\x01\x02"          # {[1]: 2}
    events = [cf.Event(1, 1, i, [odd, packed(i)]) for i in range(3)]
    assert cf.decode(cf.encode(events)) == events


def _clock_deltas(clocks: list[int]) -> list[int]:
    return [c - p for p, c in zip([0] + clocks, clocks)]


def test_the_clocks_are_written_as_deltas_less_their_median_and_dod_still_reads():
    # Proves: the clocks column is DELTAS (each clock's difference from the one before,
    # less the frame's median difference: jittering clocks compress better so than as
    # deltas of deltas), and a frame written before, its clocks in coding 1 (delta of
    # delta), reads as the same events.
    events = [cf.Event(1, 1, 10**15 + 800 * i + (37 * i) % 11, [packed(i)]) for i in range(50)]
    head = msgpack.unpackb(cf.encode(events), strict_map_key=False)
    clocks = [e[2] for e in events]
    d = _clock_deltas(clocks)
    base = sorted(d)[25]
    assert head[6] == [cf.DELTAS, base, cf._put_varints([x - base for x in d])]
    assert 795 <= base <= 811 and len(head[6][2]) < 60      # a byte per event, the first's 8
    head[6] = [cf.CLOCKS, cf._put_varints(_clock_deltas(d))]
    assert cf.decode(packed(head)) == cf.decode(cf.encode(events)) == events


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=12))
def test_clocks_anywhere_in_64_bits_come_back_or_are_refused_whole(clocks):
    # Proves: clocks that jump about the whole 64-bit range come back exactly, or, where a
    # difference less the median is beyond 64 bits, the frame is not written (ValueError:
    # the compactor writes those events in row frames instead).
    events = [cf.Event(1, 1, c, [packed(i)]) for i, c in enumerate(clocks)]
    d = _clock_deltas(clocks)
    base = sorted(d)[len(d) // 2]
    if all(-(1 << 63) <= x < (1 << 63) for x in [base] + [x - base for x in d]):
        assert cf.decode(cf.encode(events)) == events
    else:
        with pytest.raises(ValueError, match="beyond 64 bits"):
            cf.encode(events)


_MAX = (1 << 63) - 1


@pytest.mark.parametrize("clocks, why", [
    ([cf.DELTAS, 5, b"\x00" * 3], "not bytes enough"),                # 3 varints for 4 events
    ([cf.DELTAS, 5, b"\x00" * 5], "holds 5 values, not 4"),           # one more than its count
    ([cf.DELTAS, 5, b"\x80" * 4], "holds 0 values"),                  # a varint left open
    ([cf.DELTAS, 5, b"\xff" * 9 + b"\x02" + b"\x00" * 3], "beyond 64 bits"),   # 65 bits
    ([cf.DELTAS, 1, bytes(cf._put_varints([_MAX - 1, 0, 0, 0]))], "a clock beyond 64 bits"),
    ([cf.DELTAS, _MAX, bytes(cf._put_varints([0, 1, 0, 0]))], "a clock beyond 64 bits"),
    ([cf.DELTAS, -(1 << 63), bytes(cf._put_varints([0, -1, 0, 0]))], "a clock beyond 64 bits"),
    ([cf.DELTAS, 5], "not \\[8, base, varints\\]"),
    ([cf.DELTAS, 1.5, b"\x00" * 4], "not \\[8, base, varints\\]"),
    ([cf.INTS, b"\x00" * 4], "not of a coding its place takes"),
    ([cf.PLAIN, 0, b"\x00" * 4], "not of a coding its place takes"),
    ([cf.SAME, 0], "not of a coding its place takes"),
    ([cf.DECIMALS, 0, [cf.INTS, b"\x00" * 4]], "not of a coding its place takes")])
def test_a_clocks_column_beyond_its_bytes_or_64_bits_is_damage(clocks, why):
    same = [cf.SAME, 1]
    with pytest.raises(BadEntry, match=why):
        cf.decode(packed([same, [[1, 0, []]], 4, 0, 0, same, clocks, None]))


def test_a_value_column_is_never_deltas():
    # Proves: coding 8 is the clocks' only: a value column of it is damage.
    same = [cf.SAME, 1]
    with pytest.raises(BadEntry, match="unknown column coding 8"):
        cf.decode(packed([same, [[1, 1, [[cf.DELTAS, 0, b"\x00" * 4]]]], 4, 0, 0, same,
                          [cf.DELTAS, 0, b"\x00" * 4], None]))
