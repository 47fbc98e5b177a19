"""Channel: the bounded queue between one SessionWriter and the Consumer."""

from __future__ import annotations

import collections
from typing import Any

from . import accel

#: When the channel is full: wait for the consumer, or drop the event and count it.
BLOCK = "block"
DROP = "drop"


class Channel:
    """A single-producer, single-consumer queue of ``(source id, clock, args)`` items.

    ``collections.deque`` append and popleft are atomic under the GIL, so the
    producer never takes a lock. ``limit`` is the length at which the producer
    leaves its fast path: either the capacity, or earlier, the length at which
    the consumer asked to be woken.
    """

    __slots__ = ("queue", "capacity", "limit", "dropped", "woken", "writer")

    def __init__(self, capacity: int, writer: Any = None) -> None:
        self.writer = writer  # the SessionWriter that owns this channel
        self.queue: collections.deque[tuple[int, int, Any]] = collections.deque()
        self.capacity = capacity
        self.limit = capacity
        self.dropped = 0      # events dropped since the channel was made; only the producer writes it
        self.woken = False    # the consumer was already woken for the current backlog

    def drain(self) -> list[tuple[int, int, Any]]:
        """Take everything queued so far (called by the consumer only)."""
        q = self.queue
        if accel.speedups is not None:
            items = accel.speedups.drain(q)
        else:
            popleft = q.popleft  # atomic under the GIL: a concurrent append is never lost
            items = [popleft() for _ in range(len(q))]
        self.woken = False
        return items
