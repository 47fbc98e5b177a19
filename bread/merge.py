"""Time order: the events of many writers and inputs merged by wall time, in bounded memory.

Every events frame's batch header carries the least clock of its events
(docs/format.md 5.1). A first pass over an input reads only frame headers,
metadata and those batch headers, and notes, per block of ``BLOCK`` frames,
the least time (converted with the clock sync in force) of that block and of
all frames after it. The second pass reads the events in file order and holds
back only those that a frame not read yet might still precede: an event is
given out once its time is below the least time of every frame after the
current block. So memory is bounded by how far the frames of an input overlap
in time (for blog's files: the frames of one consume of all writers, that is
one flush interval's events, more if the consumer fell behind), plus a block
(at most ``BLOCK`` frames or ``BLOCK_EVENTS`` events, more if one frame holds
more), plus 16 bytes per block for the index. A frame without a least time (the format lets a writer
omit it) holds everything before it back until it is read: such files sort
right, with more memory.

Inputs are merged by their events' times; an input is opened only when the
merge reaches the least time of its frames, so a rotated set is read one file
at a time. Ties: input order, then writer id, then position in the input.
"""

from __future__ import annotations

import array
import bisect
import heapq
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator

import msgpack

from blogformat.entries import ClockSync, FileHeader
from blogformat.values import UNPACK_OPTIONS

from .entries import iter_entries
from .frames import Frame, iter_frames

#: A block of the index ends after this many events frames, or once its frames hold
#: BLOCK_EVENTS events: what the merge may hold back beyond the frames that overlap in time.
BLOCK = 16
BLOCK_EVENTS = 1024
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
_DEFAULT_SYNC = ClockSync(0, 1_000_000_000, 0, 0, "UTC")


@dataclass
class FrameIndex:
    """Per block of events frames: its first frame's offset, and the least time of all
    frames from that block on."""

    offsets: array.array
    floors: array.array

    @property
    def first(self) -> int:
        """The least time of any frame of the input (``_HIGH`` if it has none)."""
        return self.floors[0] if self.floors else _HIGH

    def limit(self, offset: int) -> int:
        """No frame from the block holding ``offset`` on has an event before this time."""
        b = bisect.bisect_right(self.offsets, offset) - 1
        return self.floors[max(b, 0)] if self.floors else _HIGH


def _least_time(payload: bytes, sync: ClockSync) -> tuple[int, int]:
    """The time of a frame's least clock (5.1), or _LOW if it does not say; its event count."""
    u = msgpack.Unpacker(**UNPACK_OPTIONS)
    u.feed(payload[:64])    # a batch header of five ints takes at most 46 bytes
    try:
        head = u.unpack()
    except Exception:
        return _LOW, 0
    if type(head) is not list or len(head) < 3:
        return _LOW, 0
    count = head[2] if type(head[2]) is int else 0
    if len(head) < 4 or type(head[3]) is not int:
        return _LOW, count
    ns = sync.ns_since_epoch + (head[3] - sync.clock_value) * 1_000_000_000 // sync.frequency
    return min(max(ns, _LOW), _HIGH), count


def index(f: BinaryIO, name: str) -> FrameIndex:
    """The first pass over an input."""
    offsets, mins = array.array("q"), array.array("q")
    sync = _DEFAULT_SYNC
    frames = events = BLOCK   # so that the first frame begins a block
    for e in iter_entries(iter_frames(f, name), name, raw_events=True):
        t = type(e)
        if t is Frame:
            floor, count = _least_time(e.payload, sync)
            if frames >= BLOCK or events >= BLOCK_EVENTS:
                offsets.append(e.offset)
                mins.append(floor)
                frames = events = 0
            elif floor < mins[-1]:
                mins[-1] = floor
            frames += 1
            events += max(count, 0)
        elif t is ClockSync:
            sync = e
        elif t is FileHeader:
            sync = _DEFAULT_SYNC
    for b in range(len(mins) - 2, -1, -1):   # the least time from each block on
        if mins[b + 1] < mins[b]:
            mins[b] = mins[b + 1]
    return FrameIndex(offsets, mins)


def sorted_input(items: Iterator[tuple], idx: FrameIndex, position: int) -> Iterator[tuple]:
    """One input's ``(frame offset, time, writer id, item)`` in time order, as
    ``(time, position, writer id, seq, item)``; the item is an Event or a rendered line."""
    heap: list[tuple] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    current = None
    for offset, ns, wid, item in items:
        if offset != current:
            current = offset
            limit = idx.limit(current)
            # _LOW stands for "no bound" (or a bound below 64 bits): nothing can go yet.
            while heap and limit != _LOW and heap[0][0] < limit:
                yield pop(heap)
        push(heap, (ns, position, wid, seq, item))
        seq += 1
    while heap:
        yield pop(heap)


def merge(inputs: list[tuple[FrameIndex, Callable[[], Iterator[tuple]]]]) -> Iterator[Any]:
    """Merge sorted inputs; each is opened (its callable called) only when needed."""
    order = sorted(range(len(inputs)), key=lambda i: (inputs[i][0].first, i))
    heap: list[tuple[tuple, Iterator[tuple]]] = []
    k = 0
    while True:
        while k < len(order) and (not heap or inputs[order[k]][0].first <= heap[0][0][0]):
            it = inputs[order[k]][1]()
            first = next(it, None)
            if first is not None:
                heapq.heappush(heap, (first, it))
            k += 1
        if not heap:
            return
        item, it = heap[0]
        yield item[-1]
        nxt = next(it, None)
        if nxt is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (nxt, it))
