"""SessionStats: what a session wrote and what it lost, for monitoring."""

from __future__ import annotations

import threading
import weakref

from blogformat.typinglite import TYPE_CHECKING
from blogformat.plainclass import Plain, field

if TYPE_CHECKING:
    from typing import Any


class SessionStats(Plain):
    """Counts since the session began. The session counts drops; its Output the rest."""

    events_written: int = 0
    bytes_written: int = 0
    events_dropped: int = 0     # channel full (overflow="drop") or event too large
    events_lost: int = 0        # in writes that the output stream refused
    bytes_lost: int = 0
    events_held: int = 0        # refused by the output, kept in the crash buffer to write later
    write_errors: int = 0
    callable_errors: int = 0    # calls of callable outputs (add_output(func)) that raised
    last_error: str | None = None
    #: What counts the ``logging`` calls into this session: a ``CounterRef`` to each
    #: blog.stdlib.BlogHandler (its ``paths``), and the counts of those gone, summed.
    logging_counters: list = field(default_factory=list, hidden=True)

    @property
    def logging_fast_path(self) -> int:
        """``logging`` calls its BlogHandlers took without a LogRecord (docs/logging-bridge.md)."""
        return sum(c.paths()[0] for c in self.logging_counters[:])

    @property
    def logging_record_path(self) -> int:
        """``logging`` records its BlogHandlers took (any other configuration's calls)."""
        return sum(c.paths()[1] for c in self.logging_counters[:])

    def count_logging(self, counter: Any) -> CounterRef:
        """Count the ``logging`` calls of ``counter`` (a BlogHandler: its ``paths``) in
        this session's, also once it is gone (it sets the reference's ``final``)."""
        ref = CounterRef(counter)
        refs = self.logging_counters
        n = len(refs)
        if n & (n - 1) == 0 and n > 1 and _PRUNING.acquire(blocking=False):
            try:    # (at each power of two: the references of those gone, as one)
                _merge_gone(refs, n)
            finally:
                _PRUNING.release()
        refs.append(ref)
        return ref


#: Held while one thread merges a session's references of handlers gone (another skips it).
_PRUNING = threading.Lock()


def _merge_gone(refs: list, n: int) -> None:
    """Put the first ``n`` references' handlers that are gone (their ``final`` set) as one
    ``Gone`` of their sums: each reader's copy of the list counts each handler once."""
    calls = records = 0
    kept = []
    for r in refs[:n]:
        if r() is None and r.final is not None:
            calls, records = calls + r.final[0], records + r.final[1]
        else:
            kept.append(r)
    if len(kept) < n:
        refs[:n] = [Gone((calls, records)), *kept]


class CounterRef(weakref.ref):
    """A weak reference to a BlogHandler that keeps its ``logging`` counts: those last read
    through it, and those it had when it went (``final``, set by the handler)."""

    __slots__ = ("last", "final")

    def __init__(self, counter: Any) -> None:     # (weakref.ref.__new__ takes counter)
        self.last: tuple[int, int] = (0, 0)
        self.final: tuple[int, int] | None = None

    def paths(self) -> tuple[int, int]:
        """(calls without a record, records): the handler's, or what it had when it went."""
        c = self()
        if c is not None:
            self.last = c.paths
        elif self.final is not None:
            return self.final
        return self.last


class Gone:
    """The counts of BlogHandlers gone, summed: a ``CounterRef`` to nothing."""

    __slots__ = ("final",)

    def __init__(self, final: tuple[int, int]) -> None:
        self.final = final

    def __call__(self) -> None:
        return None

    def paths(self) -> tuple[int, int]:
        return self.final
