"""Files read as they grow (``bread -F``): ``Tail`` follows a path, ``Growing`` one file.

Each is a file object whose ``read`` waits for the writer instead of ending,
so that the frame reader above it renders each frame as the writer's consumer
writes it.

``Tail`` follows whatever file is at a path, as ``tail -F`` does: when the
file there is replaced (a rotation: another inode) or cut short
(truncation), reading goes on from the start of what is at the path now; its
header frame starts a new stream. A frame that the switch cut in two is
reported as damage, as it is. Only a regular file is read there: a FIFO or
a link to a device put at the path is waited past, as a missing file is.

``Growing`` reads one file, by its descriptor: renamed, compressed or deleted
under it, it reads on. It ends once the file is finished: a set's file
(``blogstore.fileset``) when its writer has closed it (a writer holds an
exclusive ``flock`` on the file it writes, released when it closes it or
dies) and no crash buffer of a dead writer waits to be recovered into it (the
next start, or ``bread --recover``, appends its events there), any other once
nothing holds it and its last name is gone.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
import time
from typing import BinaryIO

from blogstore.crashlayout import last_written
from blogstore.posix import O_CLOEXEC, O_NONBLOCK

#: Seconds between two looks at a file that has no new byte.
INTERVAL = 0.2


class Tail:
    """The bytes of the file at ``path``, now and as they come."""

    def __init__(self, path: str, interval: float = INTERVAL, *, from_start: bool = True) -> None:
        self.path = path
        self.name = path
        self.interval = interval
        self._f: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._open(from_start)

    def _open(self, from_start: bool = True) -> bool:
        """True if a regular file is at the path now (then read from it); a FIFO, device
        or directory put there is not opened for long nor waited on (``O_NONBLOCK``)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        except OSError:
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return False
        f = open(fd, "rb")
        if self._f is not None:
            self._f.close()
        self._f, self._ino = f, (st.st_dev, st.st_ino)
        if not from_start:
            f.seek(0, os.SEEK_END)
        return True

    def _switched(self) -> bool:
        """True (and reopened) if the path now names another file, or this one was cut."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False                      # gone for now: wait for it to come back
        if (st.st_dev, st.st_ino) != self._ino:
            return stat.S_ISREG(st.st_mode) and self._open()
        if self._f is not None and st.st_size < self._f.tell():
            self._f.seek(0)                   # truncated (copytruncate): from its start
            return True
        return False

    def read(self, n: int = -1) -> bytes:
        """At least one byte: waits (polling every ``interval`` seconds) until there is one."""
        while True:
            if self._f is not None:
                data = self._f.read(n if n >= 0 else 1 << 20)
                if data:
                    return data
            if not self._switched():
                time.sleep(self.interval)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


class Stopped(Exception):
    """Raised by ``Growing.read`` once its ``stop`` is set: the reading ends where it is,
    with no end of input (nor a frame cut short by it) seen."""


class Growing:
    """The bytes of the open file ``f`` as they come, until it is finished (the module's
    docstring): then ``read`` gives ``b""``. ``in_set``: a file of a set, finished when
    its writer lets it go and, with ``buffers`` (the set's crash buffer directory), no
    buffer there records it as the last file its process wrote (that process died:
    recovery appends there what the buffer kept). Once ``stop`` is set, ``read`` raises
    Stopped."""

    def __init__(self, f: BinaryIO, name: str, *, in_set: bool, buffers: str | None = None,
                 stop: threading.Event | None = None, interval: float = INTERVAL) -> None:
        self._f = f
        self.name = name
        self.in_set = in_set
        self.buffers = buffers
        self.interval = interval
        self._stop = stop if stop is not None else threading.Event()
        self._last = False       # finished: what is there now is all there will be

    def read(self, n: int = -1) -> bytes:
        """At least one byte, waiting for it; ``b""`` once the file is finished."""
        if self._stop.is_set():
            raise Stopped
        while True:
            data = self._f.read(n if n >= 0 else 1 << 20)
            if data or self._last:
                return data
            if self.finished():
                self._last = True     # read once more: written before its writer let go
            elif self._cut():
                self._f.seek(0)       # truncated in place (copytruncate): from its start
            elif self._stop.wait(self.interval):
                raise Stopped

    def finished(self) -> bool:
        """True if no writer will add to the file."""
        fd = self._f.fileno()
        if not self.in_set and os.fstat(fd).st_nlink:
            return False         # a plain file that has a name may be appended to again
        try:    # shared: never in the way of a writer; refused while one holds it
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:          # no locks on this file system: cannot tell, read on
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        if self.buffers is not None:    # after the lock: recovery appends, then lets go
            st = os.fstat(fd)
            return not last_written(self.buffers, st.st_dev, st.st_ino)
        return True

    def _cut(self) -> bool:
        return os.fstat(self._f.fileno()).st_size < self._f.tell()

    def close(self) -> None:
        self._f.close()
