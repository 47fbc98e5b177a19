"""SessionStats: what a session wrote and what it lost, for monitoring."""

from __future__ import annotations

from blogformat.plainclass import Plain


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
