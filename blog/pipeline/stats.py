"""SessionStats: what a session wrote and what it lost, for monitoring."""

from __future__ import annotations

from typing import Any

from blogformat.plainclass import Plain, field


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
    #: Weak references to what counts the ``logging`` calls into this session: each
    #: blog.stdlib.BlogHandler's ``paths`` (the calls taken without a record, the records).
    logging_counters: list = field(default_factory=list, hidden=True)

    @property
    def logging_fast_path(self) -> int:
        """``logging`` calls its BlogHandlers took without a LogRecord (docs/guide.md)."""
        return sum(c.paths[0] for c in self._counters())

    @property
    def logging_record_path(self) -> int:
        """``logging`` records its BlogHandlers took (any other configuration's calls)."""
        return sum(c.paths[1] for c in self._counters())

    def _counters(self) -> list[Any]:
        live = [c for c in (r() for r in self.logging_counters) if c is not None]
        if len(live) < len(self.logging_counters):
            self.logging_counters[:] = [r for r in self.logging_counters if r() is not None]
        return live
