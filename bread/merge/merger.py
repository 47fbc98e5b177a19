"""The Merger: runs of items, each sorted by time, merged in order. The pure-Python
reference of ``bread._merge.Merger`` (``bread/merge/_merge.c``), and the choice between them."""

from __future__ import annotations

import array
import heapq

from blogformat.typinglite import TYPE_CHECKING

from .. import accel

if TYPE_CHECKING:
    from typing import Any

    from .. import _merge


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
