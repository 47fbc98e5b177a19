"""Parts: a consume cut between the files of a size-rotated stream, at event boundaries.

A stream with a size limit (``RotatingFile`` with ``rotate_bytes``) tells how many bytes
its current file may still take (``room()``). A consume that fits is written whole, in
one write, as into any stream. One that does not is written in parts, one per file:
each writer's events frames while they fit, then the first that does not is cut after
the last event that fits, and the rest goes to the next file, which starts with the
header and all metadata in force, as after any switch. A file that is empty takes at
least one event, so an event larger than ``rotate_bytes`` has a file of its own. So a
file holds at most ``rotate_bytes`` bytes before the Summary frame that closes it.

Finding where to cut walks the events of the one take that is cut (their ends and
clocks: a msgpack array each: ``event_bounds``, in C where it is built), once
however many files it spans; a consume that fits costs the sum of its frames' lengths
and nothing more.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import msgpack

from blogformat.entries import Dropped, Metadata
from blogformat.frames import HEADER_SIZE
from blogformat.typinglite import TYPE_CHECKING

from ..accel import speedups
from .channel import Mark, Taken
from .output import Output
from .streams import OutputStream

if TYPE_CHECKING:
    from typing import Any, Callable, Union

    from .channel import AnyTaken
    from .writer import SessionWriter

    #: Frames one writer's take: appends them to the list, returns its events (the
    #: Session's).
    Frames = Callable[[SessionWriter, Any, list[bytes]], int]


def room(stream: OutputStream) -> int | None:
    """Bytes the stream's current file may still take, or None if it has no size limit."""
    left = getattr(stream, "room", None)
    return left() if left is not None else None


def fits(out: Output, descriptor: dict, meta: list[Metadata], batches: list[bytes],
         left: int) -> bool:
    """True if a write of ``meta`` and ``batches`` takes at most ``left`` bytes."""
    size = sum(map(len, batches))
    return size <= left and size + out.head_size(descriptor, meta) <= left


def py_event_bounds(data: bytes, count: int, base: int) -> tuple[list[int], list[int]]:
    """Where each of the ``count`` events of a channel's ``data`` ends, and its clock (the
    deltas from ``base``)."""
    ends: list[int] = []
    clocks: list[int] = []
    u = msgpack.Unpacker(max_buffer_size=max(len(data), 1))
    u.feed(data)
    clock = base
    for _ in range(count):       # [source, clock delta, values(, texts)]
        n = u.read_array_header()
        u.skip()
        clock += u.unpack()
        for _ in range(n - 2):
            u.skip()
        ends.append(u.tell())
        clocks.append(clock)
    return ends, clocks


#: ``py_event_bounds``, in C (``_parts.c`` beside this module) where it is built.
event_bounds: Callable[[bytes, int, int], tuple[list[int], list[int]]] = (
    py_event_bounds if speedups is None else speedups.event_bounds)


class _Rest:
    """A take cut between files: its events from ``i`` on are still to write."""

    def __init__(self, t: AnyTaken) -> None:
        self.t = t
        self.i = 0
        # Where each event ends in t.data, and its clock.
        self.ends, self.clocks = event_bounds(t.data, t.count, t.base)

    def piece(self, j: int) -> Taken:
        """Events ``i`` to ``j`` (excluded) as a take of their own, with the marks among them."""
        i, t, n = self.i, self.t, self.t.count
        start = self.ends[i - 1] if i else 0
        clocks = self.clocks[i:j]
        marks = [Mark(off - start, at - i, prev, entry) for off, at, prev, entry in t.marks
                 if i <= at < j or at == j == n]
        return Taken(t.data[start:self.ends[j - 1]], j - i,
                     self.clocks[i - 1] if i else t.base, min(clocks), max(clocks), marks)

    def head(self, w: SessionWriter, budget: int, force: bool,
             frames: Frames) -> tuple[Taken, list[bytes]] | None:
        """The most events from ``i`` on whose frames fit ``budget`` bytes (one at least with
        ``force``), and their frames; None if none fits."""
        start = self.ends[self.i - 1] if self.i else 0
        j = bisect_right(self.ends, start + budget - HEADER_SIZE - 48)
        named = w.stream_name      # framing a rename sets it: only the piece kept may
        while True:
            if j <= self.i:
                if not force:
                    w.stream_name = named
                    return None
                j = self.i + 1
            piece = self.piece(j)
            out: list[bytes] = []
            w.stream_name = named
            frames(w, piece, out)
            size = sum(map(len, out))
            if size <= budget or j == self.i + 1 and force:
                return piece, out
            j = min(j - 1, bisect_right(self.ends, self.ends[j - 1] - (size - budget)))


if TYPE_CHECKING:
    Pending = list[tuple[SessionWriter, Union[Any, _Rest]]]
    #: Each writer with the piece of its take that one part holds.
    Pieces = list[tuple[SessionWriter, AnyTaken]]
    #: Writes one part (metadata, frames, events, pieces): the bytes written, or None if
    #: the part was refused and held (``blog.pipeline.heldwrites``): no part follows it.
    WritePart = Callable[[list[Metadata], list[bytes], int, Pieces], Union[int, None]]


def remainder(t: AnyTaken, start: int) -> AnyTaken:
    """The events of take ``t`` from byte ``start`` on (an event boundary) as a take of
    their own, with their marks."""
    if not start:
        return t
    cut = _Rest(t)
    cut.i = bisect_left(cut.ends, start) + 1
    return cut.piece(t.count)


def _fill(rest: Pending, budget: int, force: bool,
          frames: Frames) -> tuple[Pieces, list[bytes], int]:
    """Take from the front of ``rest`` what fits ``budget`` bytes: (each writer with its
    piece, frames, events)."""
    takes: Pieces = []
    batches: list[bytes] = []
    n_events = 0
    while rest:
        w, t = rest[0]
        whole = t.piece(t.t.count) if isinstance(t, _Rest) else t
        out: list[bytes] = []
        named = w.stream_name      # (what a new file's WriterProp says: see _Rest.head)
        if len(whole.data) <= budget or not whole.count:   # else its frames cannot fit
            frames(w, whole, out)
            size = sum(map(len, out))
        else:
            size = budget + 1
        if size > budget and whole.count:     # (a rename alone is never cut)
            cut = t if isinstance(t, _Rest) else _Rest(t)
            w.stream_name = named
            got = cut.head(w, budget, force and not takes, frames)
            if got is not None:
                takes.append((w, got[0]))
                batches += got[1]
                n_events += got[0].count
                cut.i += got[0].count
                if got[0].count < whole.count:
                    rest[0] = (w, cut)
                else:                            # all of it, forced into an empty file
                    del rest[0]
            break
        takes.append((w, whole))
        batches += out
        n_events += whole.count
        budget -= size
        del rest[0]
    return takes, batches, n_events


def write_parts(out: Output, stream: Any, descriptor: dict, meta: list[Metadata],
                taken: list[tuple[SessionWriter, Any]], everything: Callable[[], list[Metadata]],
                frames: Frames, write: WritePart | None = None,
                switch: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Write ``taken`` (each writer with its take) and ``meta`` into ``stream``'s files, in
    parts as the module docstring says; ``everything()`` is the metadata a new file
    starts with; ``write`` writes a part (by default ``out.write``), ``switch(length)`` is
    told the length of the Summary that closes a full file before it is written. Returns
    (bytes written, bytes of the first part: its write holds ``meta``)."""
    if write is None:
        def write(meta: list[Metadata], batches: list[bytes], n: int, pieces: Pieces) -> int:
            return out.write(descriptor, meta, batches, n, [t for _, t in pieces])
    rest: Pending = [(w, t) for w, t in taken if t.count or t.marks]
    total, first = 0, -1
    while True:
        left = stream.room()
        fresh = left >= stream.rotate_bytes      # the file is empty: one event at least
        takes, batches, n_events = _fill(rest, left - out.head_size(descriptor, meta), fresh,
                                         frames)
        if takes or not rest or fresh:
            written = write(meta, batches, n_events, takes)
            if written is None:     # refused and held: the parts from this one on wait
                return total, max(first, 0)
            total += written
            first = written if first < 0 else first
            meta = []
        if not rest:
            return total, first
        out.rotate_if_due(stream.rotate_bytes + 1, switch)   # the file is full: the next one
        if not out.started:     # and the drops of a first part that went nowhere yet
            meta = everything() + [m for m in meta if type(m) is Dropped]
