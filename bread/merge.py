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

What is held back is held as runs: the items of one events frame (its
rendered lines as one bytes object, or its Events) with a key per item, its
time. A ``Merger`` (``bread/_merge.c``, or the Python reference here) merges
them: the cost per item is a comparison or two in C, not a Python heap. A frame may
come as several runs (C leaves the rest of it to Python, its text fills a block):
none is given out before all are in, so a frame's events come out in order among
themselves even where its batch header's least clock is wrong.
Times beyond 64 bits (absurd clocks) sort as the least or greatest 64-bit
time.
"""

from __future__ import annotations

import array
import bisect
import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Iterator

import msgpack

from blogformat.entries import ClockSync, FileHeader
from blogformat.values import UNPACK_OPTIONS

from . import accel
from .entries import iter_entries
from .frames import BATCH_HEAD, Frame, Skim, iter_frames

if TYPE_CHECKING:
    from . import _merge

#: A block of the index ends after this many events frames, or once its frames hold
#: BLOCK_EVENTS events: what the merge may hold back beyond the frames that overlap in time.
BLOCK = 16
BLOCK_EVENTS = 1024
#: What a text merge (``bread -s``) holds back at most, in bytes of rendered lines, beyond
#: the runs of the frame just read. Past it, the least lines held are given out early, and
#: the lines that follow may then not be in order (``merge``'s ``early`` tells). A file of
#: blog's reaches it only if one consume's frames overlap by that much text; a crafted one
#: (events of the greatest message, all at one time) would otherwise hold gigabytes.
MAX_HELD = 256 << 20
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
_DEFAULT_SYNC = ClockSync(0, 1_000_000_000, 0, 0, "UTC")


class Merger:
    """Runs of items, each sorted by time (or sorted here, stably), merged by
    (time, input position, writer id, run, place in the run).

    The pure-Python reference of ``bread._merge.Merger``: the same calls, the
    same results. ``text``: the items of a run are one bytes object, cut at
    the ends its keys give; otherwise a list, one item per key.
    """

    def __init__(self, text: bool, max_out: int = 1 << 20) -> None:
        if max_out < 1:
            raise ValueError("max_out must be positive")
        self.text = text
        self.max_out = max_out
        self.held = 0
        #: text: the size of the runs held (a run is freed once wholly emitted); 0 for items.
        self.held_bytes = 0
        self._heap: list[list] = []
        self._seq = 0

    def add(self, items: Any, keys: Any, position: int, wid: int) -> None:
        """A run: its items and their keys, native int64 pairs (time, end of the line in
        ``items``; for a list, anything)."""
        k = array.array("q")
        k.frombytes(memoryview(keys).cast("B"))
        if len(k) % 2:
            raise ValueError("keys must be int64 pairs")
        n = len(k) // 2
        if self.text and not isinstance(items, bytes):
            raise TypeError("a text merger's items are bytes")
        if not self.text and not isinstance(items, list):
            raise TypeError("an items merger's items are a list")
        if not self.text and len(items) != n:
            raise ValueError("one key per item")
        if n == 0:
            return
        entries = []
        prev = 0
        for i in range(n):
            if self.text:
                end = k[2 * i + 1]
                if end < prev or end > len(items):
                    raise ValueError("line ends must grow within the text")
                entries.append((k[2 * i], prev, end))
                prev = end
            else:
                entries.append((k[2 * i], i, i))
        entries.sort(key=lambda e: (e[0], e[1]))
        run = [entries[0][0], position, wid, self._seq, 0, entries, items]
        self._seq += 1
        heapq.heappush(self._heap, run)
        self.held += n
        if self.text:
            self.held_bytes += len(items)

    def emit(self, limit: int | None = None) -> Any:
        """The items held whose time is below ``limit`` (all with None), in order, as one
        bytes object or a list: at most about ``max_out`` per call; call again until empty."""
        heap = self._heap
        out: list = []
        size = 0
        while heap and size < self.max_out:
            run = heap[0]
            if limit is not None and run[0] >= limit:
                break
            at, entries, items = run[4], run[5], run[6]
            _, a, b = entries[at]
            if self.text:
                out.append(items[a:b])
                size += b - a
            else:
                out.append(items[a])
                size += 1
            self.held -= 1
            if at + 1 == len(entries):
                heapq.heappop(heap)
                if self.text:
                    self.held_bytes -= len(items)
            else:
                run[4] = at + 1
                run[0] = entries[at + 1][0]
                heapq.heapreplace(heap, run)
        return b"".join(out) if self.text else out


def merger(text: bool, max_out: int = 1 << 20) -> Merger | _merge.Merger:
    """A Merger: the C one if built (and not turned off), else the Python reference."""
    if accel.merge is not None:
        return accel.merge.Merger(text, max_out)
    return Merger(text, max_out)


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


def clamp64(ns: int) -> int:
    """A time as a merge key: beyond 64 bits, the least or greatest 64-bit time."""
    return _LOW if ns < _LOW else _HIGH if ns > _HIGH else ns


def event_run(events: Iterable[Any]) -> Iterator[tuple]:
    """Events of one writer as a run ``(writer id, events, keys)``, if there are any."""
    evs = list(events)
    if evs:
        keys = array.array("q")
        for ev in evs:
            keys.append(clamp64(ev.ns))
            keys.append(0)
        yield evs[0].writer_prop.id, evs, keys.tobytes()


class SortedInput:
    """One input of the merge: its index, and its runs, read only as far as the merge needs.

    ``start()`` opens the input and gives, in file order, each events frame's
    offset (before its runs), then its runs ``(writer id, items, keys)``.
    """

    def __init__(self, idx: FrameIndex, position: int, start: Callable[[], Iterator[Any]],
                 name: str = "") -> None:
        self.idx = idx
        self.position = position
        self.name = name
        #: The offset of the events frame read last.
        self.offset = 0
        self._start = start
        self._runs: Iterator[Any] | None = None
        #: No event of this input not yet added to the merger has a time below this.
        self.limit = idx.first

    def advance(self, m: Any) -> bool:
        """Read on: the next frame's offset (its limit), or add its next run to ``m``; False
        once the input is read."""
        if self._runs is None:
            self._runs = self._start()
        for item in self._runs:
            if type(item) is int:
                self.offset = item
                self.limit = self.idx.limit(item)
            else:
                wid, items, keys = item
                m.add(items, keys, self.position, clamp64(wid))
                # Nothing is given out before the frame's other runs are in (C leaves the
                # rest of it to Python, its text fills a block): a frame's events come out
                # in time order among themselves, even those below its min_clock.
                self.limit = _LOW
            return True
        return False


def merge(inputs: list[SortedInput], m: Merger | _merge.Merger, max_held: int | None = None,
          early: Callable[[SortedInput, int], None] | None = None) -> Iterator[Any]:
    """What the inputs give, merged by ``m`` (a Merger): blocks of lines or lists of items.

    The input whose limit is least is read on, a frame at a time; what the
    merger holds below that limit is given out (nothing can precede it). With
    ``max_held`` (a text merger), once the runs held pass that many bytes the
    least lines are given out until they do not, and ``early(input, lines)`` is
    told: the input read last and how many lines went out before their time.
    """
    heap = [(inp.limit, inp.position) for inp in inputs]
    heapq.heapify(heap)
    while heap:
        limit, position = heap[0]
        out = m.emit(limit)
        while out:
            yield out
            out = m.emit(limit)
        inp = inputs[position]
        if inp.advance(m):
            heapq.heapreplace(heap, (inp.limit, position))
        else:
            heapq.heappop(heap)
        if max_held is not None and m.held_bytes > max_held:
            held = m.held
            while m.held_bytes > max_held:   # each call frees the least lines: it ends
                yield m.emit()
            if early is not None:
                early(inp, held - m.held)
    out = m.emit()
    while out:
        yield out
        out = m.emit()
