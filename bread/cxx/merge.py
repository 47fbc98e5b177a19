"""A C++ binlog file in bread's time-ordered merge (``bread.merge``), in bounded memory.

A C++ file's entries say no least time, so a first pass reads each event's clock (not its
arguments) and notes, per block of ``BLOCK_EVENTS`` events, the least time of that block
and of all after it: the index the merge needs. The second pass gives each block's offset,
then its events (those the filter keeps) sorted by time as one run; the merge then holds
back only what a later block might still precede, as for a blog file.
"""

from __future__ import annotations

import array
import struct
from typing import Any, BinaryIO, Callable, Iterable, Iterator

from blogformat.entries import ClockSync

from ..events import Event, clamp64
from ..merge.index import BLOCK_EVENTS, FrameIndex
from .entries import TAG_CLOCK_SYNC, BinlogError, entry, payloads
from .events import event_ns
from .printer import NO_SYNC

_TAG_CLOCK = struct.Struct("<QQ")
_TOP_BIT = 1 << 63


def index(f: BinaryIO) -> FrameIndex:
    """The merge's index of a C++ binlog file (up to its first damage)."""
    offsets, mins = array.array("q"), array.array("q")
    sync: ClockSync = NO_SYNC
    count = BLOCK_EVENTS    # so that the first event begins a block
    try:
        for offset, payload in payloads(f):
            if len(payload) < 16:
                if len(payload) >= 8 and payload[7] & 0x80:
                    continue   # (short metadata: what it is does not matter here)
                break
            tag, clock = _TAG_CLOCK.unpack_from(payload)
            if tag & _TOP_BIT:
                if tag == TAG_CLOCK_SYNC:
                    e = entry(payload, offset)
                    sync = e if isinstance(e, ClockSync) else sync
                continue
            ns = clamp64(event_ns(sync, clock))
            if count >= BLOCK_EVENTS:
                offsets.append(offset)
                mins.append(ns)
                count = 0
            elif ns < mins[-1]:
                mins[-1] = ns
            count += 1
    except BinlogError:
        pass    # the second pass reports it
    for b in range(len(mins) - 2, -1, -1):   # the least time from each block on
        if mins[b + 1] < mins[b]:
            mins[b] = mins[b + 1]
    return FrameIndex(offsets, mins)


def runs(events: Iterable[Event], keeps: Callable[[Event], bool],
         sink_runs: Callable[[Iterator[Event]], Iterable[Any]]) -> Iterator[Any]:
    """Each block's offset, then its kept events in time order as the sink's runs."""
    block: list[Event] = []
    count = BLOCK_EVENTS
    for ev in events:
        if count >= BLOCK_EVENTS:
            if block:
                yield from sink_runs(iter(sorted(block, key=_ns)))
                block = []
            yield ev.offset
            count = 0
        count += 1
        if keeps(ev):
            block.append(ev)
    if block:
        yield from sink_runs(iter(sorted(block, key=_ns)))


def _ns(ev: Event) -> int:
    return ev.ns
