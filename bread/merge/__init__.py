"""Time order: the events of many writers and inputs merged by wall time, in bounded memory.

In files: ``index`` (the first pass over an input), ``keyed`` (any sink's runs), ``merger``
(the Merger, and its C twin ``bread/merge/_merge.c``); the merge itself here.

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
time. ``keyed.Keyed`` wraps any sink that has an item per event (``Sink.item``: a text
line, an Event) so that its outputs are such runs, made in C (``Renderer.keyed``) or
from the Events Python makes. A ``Merger`` (``bread/merge/_merge.c``, or the Python
reference here) merges them: the cost per item is a comparison or two in C, not a
Python heap. A frame may come as several runs (C leaves the rest of it to Python, its
text fills a block): none is given out before all are in, so a frame's events come out
in order among themselves even where its batch header's least clock is wrong. Times
beyond 64 bits (absurd clocks) sort as the least or greatest 64-bit time.
"""

from __future__ import annotations

import heapq

from blogformat.typinglite import TYPE_CHECKING

from ..events import clamp64
from ..frames import Damage
from ..inputs import CXX, sniff
from .index import FrameIndex, index as frame_index
from .merger import merger as make_merger

if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable, Iterator

    from .. import _merge
    from .merger import Merger

#: What a text merge (``bread -s``) holds back at most, in bytes of rendered lines, beyond
#: the runs of the frame just read. Past it, the least lines held are given out early, and
#: the lines that follow may then not be in order (``merge``'s ``early`` tells). A file of
#: blog's reaches it only if one consume's frames overlap by that much text; a crafted one
#: (events of the greatest message, all at one time) would otherwise hold gigabytes.
MAX_HELD = 256 << 20
#: Items per list the merge gives: few, as the Events sink's chunks (the events a caller
#: has dropped are freed before the cyclic collector counts them).
ITEMS_OUT = 32
_LOW = -(1 << 63)   # the least 64-bit time


def index_of(f: BinaryIO, name: str, blog_only: bool = False) -> FrameIndex:
    """The first pass over an input of either kind (``bread.inputs.sniff``): a blog file's
    (``index.index``), or a C++ binlog file's (``bread.cxx.merge.index``)."""
    kind, f = sniff(f)
    if kind == CXX:
        from ..cxx.merge import index as binlog_index   # (C++ files only)
        return binlog_index(f)
    return frame_index(f, name, blog_only)


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


def merged(inputs: list[SortedInput], text: bool, damage: list[Damage]) -> Iterator[Any]:
    """What the inputs' runs give, merged by time: lists of at most ``ITEMS_OUT`` items, or
    with ``text`` blocks of lines, at most ``MAX_HELD`` bytes of them held (past it, the
    least go out early: a Damage per input in ``damage`` says so)."""
    if not text:
        yield from merge(inputs, make_merger(text=False, max_out=ITEMS_OUT))
        return
    told: set[int] = set()

    def early(inp: SortedInput, lines: int) -> None:   # once per input
        if inp.position not in told:
            told.add(inp.position)
            damage.append(Damage(
                inp.offset, 0, f"sorting held more than {MAX_HELD >> 20} MiB of lines: "
                f"{lines} line(s) printed early, the order may be broken from here on",
                inp.name))
    yield from merge(inputs, make_merger(text=True), MAX_HELD, early)
