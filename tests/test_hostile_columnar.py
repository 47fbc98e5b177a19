"""Crafted columnar frames (docs/format.md 5.5) against every reader, both paths: what a
frame states of its events must hold, or the frame is damage (reported, none of it read)."""

from __future__ import annotations

import io

import msgpack
import pytest

import bread
from bread import accel
from bread.frames import iter_frames
from blogformat.frames import FRAME_COLUMNS
from test_columnar_batches import _crafted, small_columnar, table  # noqa: F401  (a fixture)


def _head(cols: bytes) -> list:
    [payload] = [f.payload for f in iter_frames(io.BytesIO(cols)) if f.kind == FRAME_COLUMNS]
    return msgpack.unpackb(payload, strict_map_key=False)


def _events(data: bytes, pure: bool) -> tuple[int, list[str]]:
    saved = accel.speedups
    if pure:
        accel.speedups = None
    try:
        r = bread.read(io.BytesIO(data))
        n = sum(1 for _ in r)
    finally:
        accel.speedups = saved
    return n, [d.reason for d in r.damage]


@pytest.mark.parametrize("bounds", [
    lambda lo, hi: (lo + 1, hi),              # the first event before the stated least
    lambda lo, hi: (lo, hi - 1),              # the last after the stated greatest
    lambda lo, hi: (hi + 10**12, hi + 10**13),   # every event before the frame's window
    lambda lo, hi: (lo - 10**13, lo - 10**12),   # every event after it
    lambda lo, hi: (hi, lo),                  # least and greatest swapped
    lambda lo, hi: (float(lo), hi),           # not ints
    lambda lo, hi: (lo, None)],
    ids=["min", "max", "later", "earlier", "swapped", "float", "nil"])
def test_a_columnar_frame_whose_events_are_outside_its_stated_clocks_is_damage(small_columnar,
                                                                              bounds):
    # Proves: a columnar frame's min_clock and max_clock (what a reader skipping frames by
    # time trusts) bound its events, else the frame is damage on both paths, in events and
    # in batches: a crafted frame cannot hide its events from a time-filtered read.
    head = _head(small_columnar)
    head[3], head[4] = bounds(head[3], head[4])
    crafted = _crafted(small_columnar, msgpack.packb(head, use_bin_type=True))
    for pure in (False, True):
        t, damage = table(crafted, pure=pure)
        assert t.num_rows == 0 and len(damage) == 1 and "undecodable frame" in damage[0][1]
        n, reasons = _events(crafted, pure)
        assert n == 0 and len(reasons) == 1 and "outside" in reasons[0]


def test_a_columnar_frame_whose_bounds_are_wider_than_its_events_reads(small_columnar):
    # Proves: bounds that hold the events without being attained read as they are.
    head = _head(small_columnar)
    head[3], head[4] = head[3] - 5, head[4] + 5
    crafted = _crafted(small_columnar, msgpack.packb(head, use_bin_type=True))
    want, _ = table(small_columnar, pure=True)
    for pure in (False, True):
        t, damage = table(crafted, pure=pure)
        assert damage == [] and t.equals(want)
        assert _events(crafted, pure) == (40, [])
