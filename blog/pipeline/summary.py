"""Tally: what one output stream has been given, for the Summary entry that closes it.

The output adds what each successful write held (the events taken from a
channel, the Dropped and Lost entries); ``summary()`` is the entry written
last when the stream is closed cleanly (docs/format.md 4.6). Events are
counted per source from the channel's bytes: in C (``_speedups.tally``, ``_summary.c``
beside this module), or by the pure-Python reference below, which gives the same counts;
``tally`` is the one chosen here.
"""

from __future__ import annotations

import time

import msgpack

from blogformat.entries import Dropped, Lost, Summary
from blogformat.typinglite import TYPE_CHECKING

from ..accel import speedups

if TYPE_CHECKING:
    from typing import Callable

    from .channel import AnyTaken

_NO_LO, _NO_HI = (1 << 63) - 1, -(1 << 63)


def py_tally(data: bytes, count: int, counts: dict[int, int]) -> None:
    """Add the source id of each of the ``count`` events in ``data`` to ``counts``."""
    u = msgpack.Unpacker(max_buffer_size=max(len(data), 1))
    u.feed(data)
    for _ in range(count):
        n = u.read_array_header()
        sid = u.unpack()
        for _ in range(n - 1):
            u.skip()
        counts[sid] = counts.get(sid, 0) + 1


#: ``py_tally``, in C where the C fast path is built (and not chosen away).
tally: Callable[[bytes, int, dict[int, int]], None] = (
    py_tally if speedups is None else speedups.tally)


class Tally:
    """Counts for one stream (from its header on): events per source, clock bounds, losses."""

    def __init__(self) -> None:
        self.events = 0
        self.sources: dict[int, int] = {}
        self.lo = _NO_LO
        self.hi = _NO_HI
        self.dropped = 0
        self.lost = 0

    def add_events(self, taken: AnyTaken) -> None:
        """Count a channel's ``take()`` (data, count, lo, hi) that was written."""
        if not taken.count:
            return
        tally(taken.data, taken.count, self.sources)
        self.events += taken.count
        self.lo = min(self.lo, taken.lo)
        self.hi = max(self.hi, taken.hi)

    def add_metadata(self, entries: list) -> None:
        """Count the Dropped and Lost entries among written metadata."""
        for e in entries:
            if isinstance(e, Dropped):
                self.dropped += e.count
            elif isinstance(e, Lost):
                self.lost += e.events

    def summary(self) -> Summary:
        """The Summary entry of what was counted."""
        first, last = (self.lo, self.hi) if self.events else (0, 0)
        return Summary(self.events, first, last, self.dropped, self.lost, dict(self.sources),
                       time.time_ns())
