"""The merge's first pass over a blog file: per block of events frames, the least time of
that block and of all frames after it (the package's docstring says why)."""

from __future__ import annotations

import array
import bisect

import msgpack

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import ClockSync, FileHeader
from blogformat.plainclass import Plain
from blogformat.values import UNPACK_OPTIONS

from ..entries import iter_entries
from ..frames import BATCH_HEAD, Frame, Skim, iter_frames

if TYPE_CHECKING:
    from typing import Any, BinaryIO, Iterable

#: A block of the index ends after this many events frames, or once its frames hold
#: BLOCK_EVENTS events: what the merge may hold back beyond the frames that overlap in time.
BLOCK = 16
BLOCK_EVENTS = 1024
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
_DEFAULT_SYNC = ClockSync(0, 1_000_000_000, 0, 0, "UTC")


class FrameIndex(Plain):
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
    u.feed(payload[:BATCH_HEAD])
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


def index(f: BinaryIO, name: str, blog_only: bool = False) -> FrameIndex:
    """The first pass over an input. A file that can seek is skimmed (``frames.Skim``); one
    that cannot, or whose skim meets damage, is read through its checked frames
    (``blog_only``: NotABlogFile if it does not begin as a blog file)."""
    try:
        start = f.tell() if f.seekable() else None
    except (AttributeError, OSError, ValueError):
        start = None
    if start is not None:
        skim = Skim(f, start)
        idx = _index(iter_entries(skim.frames(), name, raw_events=True))
        if skim.clean:
            return idx
        f.seek(start)
    return _index(iter_entries(iter_frames(f, name, blog_only=blog_only), name,
                               raw_events=True))


def _index(entries: Iterable[Any]) -> FrameIndex:
    offsets, mins = array.array("q"), array.array("q")
    sync = _DEFAULT_SYNC
    frames = events = BLOCK   # so that the first frame begins a block
    for e in entries:
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
