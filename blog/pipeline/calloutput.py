"""CallOutput: a callable output (``blog.add_output(func, min_severity=...)``): the session's
binary stream decoded back into events (``blog.pipeline.liveevents``), and ``func`` called
with each one at or above ``min_severity``, so that alerts and metrics need no file.

It is a side output as any other (``blog.pipeline.sideoutputs``): written by the thread
that consumes (the consumer's, or one calling ``flush``), after the main output. A call
that raises costs that call only: it is counted (the session's
``stats.callable_errors``, and ``errors`` here) and the first is reported on stderr; the
other events still reach ``func``, and the file and the other outputs get everything. A
slow ``func`` delays the consumer, and with it every output's next write; as the process
ends, one that has not returned within ``Session.exit_timeout`` is left behind. What
``func`` logs is never fed back to it (``skip``: ``Writers.writing_outputs``). A child
``func`` forks off a thread other than the main one ends when ``func`` returns there
(``blog.process.end_child``).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Collection

from blogformat.severity import Severity, to_severity

from .. import process
from ..report import report
from .liveevents import LiveDecoder, LiveEvent
from .stats import SessionStats


class CallOutput:
    """Calls ``func(event)`` with each event at or above ``min_severity`` written to it
    (whole frames: what a session writes)."""

    def __init__(self, func: Callable[[LiveEvent], Any], stats: SessionStats,
                 min_severity: Severity | int | str = Severity.TRACE,
                 skip: Collection[int] = ()) -> None:
        self.func = func
        self._skip = skip                # writer ids of what outputs logged: not fed back
        self._pid = os.getpid()
        self.min_severity = to_severity(min_severity)
        self.errors = 0                  # calls that raised
        self._stats = stats              # the session's: its callable_errors
        self._decoder = LiveDecoder()

    def write(self, data: bytes) -> int:
        func = self.func
        skip = self._skip
        # In a child forked by ``func`` off a thread other than the main one (the
        # consumer's), nothing is left to return to: the child ends once ``func`` does.
        ends_child = threading.current_thread() is not threading.main_thread()
        for ev in self._decoder.events(bytes(data), self.min_severity):
            if ev.writer_prop.id in skip:
                continue
            try:
                func(ev)
            except SystemExit as exc:
                if os.getpid() != self._pid and ends_child:
                    process.end_child(exc.code if isinstance(exc.code, int) else 1)
                raise
            except Exception as exc:     # that call only: the next event is called again
                self.errors += 1
                self._stats.callable_errors += 1
                if self.errors == 1:
                    report(f"blog: the output {self!r} raised {type(exc).__name__}: {exc}; "
                           "its errors are counted in stats.callable_errors, not reported "
                           "again")
            if os.getpid() != self._pid and ends_child:
                process.end_child(0)
        return len(data)

    def __repr__(self) -> str:
        return getattr(self.func, "__qualname__", None) or repr(self.func)
