"""LateWriter: writes what is logged after the session's output was closed as the process
ended.

Exit handlers run in the reverse order of their registration: a library that registered
its own before blog's (at its import) runs after blog closed its output, and so does
multiprocessing's exit handler. What they log is not dropped: the LateWriter stands in as
the session's drainer (``blog.pipeline.backpressure.Drainer``), with a wake-up length of
0, so that every log call leaves the fast path and wakes it once its event is queued
(``Backpressure.overflow``); it then writes at once, in the calling thread (nothing else
would: the interpreter stops the consumer's thread after the exit handlers), into the
output opened again (``reopen``, on the first late event), a consume and its Summary each
time, so that the file ends cleanly after each. What cannot be written (the output cannot
be opened, the write fails) stays queued, and ``tell`` says so on stderr.

A log call from inside blog's own work (a finalizer during a registration or a consume)
is written with the next log call, or told.
"""

from __future__ import annotations

import threading

from ..files.durability import sync_stream
from ..report import report
from blogformat.typinglite import TYPE_CHECKING
from .session import Session

if TYPE_CHECKING:
    from typing import Any, Callable

#: Consumes a late write makes at most: events logged during one (by an output beside the
#: file, or a finalizer) are written by the next.
_ROUNDS = 3


class LateWriter:
    """Writes each event logged from now on at once into ``reopen()``'s stream (opened once,
    kept open; synced after each write with ``durable``; ``close`` closes it if the session
    is given an output again); ``tell()`` reports what is left."""

    def __init__(self, session: Session, reopen: Callable[[], Any], tell: Callable[[], None],
                 *, close: Callable[[Any], None], durable: bool = False) -> None:
        self.session = session
        self._reopen = reopen
        self._close = close
        self._tell = tell
        self._durable = durable
        self._stream: Any = None
        self._failed = False           # the output could not be opened again: told once
        self._lock = threading.RLock()
        self._writing = threading.local()

    def start(self) -> "LateWriter":
        """Stand in as the session's drainer: from now on every log call wakes it."""
        s = self.session
        s.attach(self, wake_bytes=0)
        with s.registry.lock:
            for w in s.writers.all:
                w.channel.limit = 0    # at once, not from the channel's next take
        return self

    def stop(self) -> None:
        """The session is given an output again: stand down, the stream opened closed
        (``close``)."""
        self.session.detach(self)
        with self._lock:
            if self._stream is not None:
                self._close(self._stream)
                self._stream = None

    def wake(self) -> None:
        """An event was queued: write it now (not from inside blog's own work)."""
        s = self.session
        if (getattr(self._writing, "on", False) or s.consuming_here()
                or s.registry.registering_here()):
            return
        self._writing.on = True
        try:
            with self._lock:
                self._write()
        finally:
            self._writing.on = False
        self._tell()

    def _write(self) -> None:
        s = self.session
        if self._stream is None:
            if self._failed:
                return
            try:
                self._stream = self._reopen()
            except Exception as exc:   # told (with what stays queued) by tell()
                self._failed = True
                report(f"blog: the output cannot be opened again for the events logged after "
                       f"it was closed at exit: {type(exc).__name__}: {exc}")
                return
        for _ in range(_ROUNDS):
            s.consume(self._stream)
            s.finish(self._stream)
            if not s.pending():
                break
        if self._durable:
            try:
                sync_stream(self._stream)
            except OSError as exc:
                report(f"blog: fsync of the events logged after exit failed: {exc}")

    def can_wait(self) -> bool:
        """Never: a channel that fills (the output failing) drops and counts, told."""
        return False
