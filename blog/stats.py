"""SessionStats: what a session wrote and what it lost, for monitoring."""

from __future__ import annotations

from blogformat.plainclass import Plain


class SessionStats(Plain):
    """Counts since the session began. The session counts drops; its Output the rest."""

    _FIELDS = ("events_written", "bytes_written", "events_dropped", "events_lost", "bytes_lost",
               "events_held", "write_errors", "last_error")

    def __init__(self, events_written: int = 0, bytes_written: int = 0, events_dropped: int = 0,
                 events_lost: int = 0, bytes_lost: int = 0, events_held: int = 0,
                 write_errors: int = 0, last_error: str | None = None) -> None:
        self.events_written = events_written
        self.bytes_written = bytes_written
        #: Channel full (overflow="drop") or event too large.
        self.events_dropped = events_dropped
        #: In writes that the output stream refused.
        self.events_lost = events_lost
        self.bytes_lost = bytes_lost
        #: Refused by the output, kept in the crash buffer to write later.
        self.events_held = events_held
        self.write_errors = write_errors
        self.last_error = last_error
