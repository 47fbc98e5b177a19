"""TextStream: an output stream that shows events as text lines, as ``bread`` would.

    blog.basic_config("app.blog")
    blog.add_output(blog.TextStream(sys.stderr, format="%S %C %m", min_severity="warning"))

The session writes its binary stream to it as to any output (header, metadata,
events frames); it decodes them (``blog.pipeline.liveevents``: the writer never imports
the reader) and writes a line per event at or above ``min_severity``, with bread's
``-f`` and ``-d`` placeholders (``blogformat.pretty``, which bread prints with): one
session writes the whole binary file and shows warnings on the console (the C++
binlog's TextOutputStream). Lines are coloured by severity on a terminal.
"""

from __future__ import annotations

import threading
from typing import TextIO

from blogformat.pretty import DEFAULT_DATE_FORMAT, DEFAULT_FORMAT, PrettyPrinter
from blogformat.severity import Severity, to_severity

from ..pipeline.liveevents import LiveDecoder


class TextStream:
    """Renders the events written to it as text lines on ``file`` (a text stream).

    ``format`` and ``date_format`` take bread's placeholders (``bread --help``);
    ``min_severity`` leaves out the events below it; ``color`` (default: when
    ``file`` is a terminal) colours lines by severity; ``traceback=False`` leaves out the
    tracebacks shown under events that have an exception among their fields
    (``log.exception``). Control characters and the bidirectional format characters in
    the events' text are escaped, as bread escapes them (``bread.render.escape_controls``),
    tracebacks included.
    """

    def __init__(self, file: TextIO, *, format: str = DEFAULT_FORMAT,
                 date_format: str = DEFAULT_DATE_FORMAT,
                 min_severity: Severity | int | str = Severity.TRACE,
                 color: bool | None = None, traceback: bool = True) -> None:
        if not callable(getattr(file, "write", None)):
            raise TypeError(f"TextStream needs a text file to write to, not "
                            f"{type(file).__name__}")
        if not isinstance(format, str) or not isinstance(date_format, str):
            raise TypeError("format and date_format must be str")
        self.file = file
        self.min_severity = to_severity(min_severity)
        if color is None:
            isatty = getattr(file, "isatty", None)
            try:
                color = bool(isatty()) if isatty is not None else False
            except (OSError, ValueError):
                color = False
        self.printer = PrettyPrinter(format, date_format, color=color,
                                     traceback=None if traceback else False)
        self._lock = threading.Lock()
        self._decoder = LiveDecoder()

    def write(self, data: bytes) -> int:
        """Take whole frames (a session writes nothing else) and show their events."""
        with self._lock:
            line = self.printer.line
            lines = [line(ev, escape=True)
                     for ev in self._decoder.events(bytes(data), self.min_severity)]
            if lines:
                self.file.write("\n".join(lines) + "\n")
        return len(data)

    def flush(self) -> None:
        flush = getattr(self.file, "flush", None)
        if flush is not None:
            flush()

    def __repr__(self) -> str:
        return f"<blog.TextStream to {getattr(self.file, 'name', self.file)!r}>"


__all__ = ["TextStream"]
