"""OutputStreams: where a Consumer writes. Anything with ``write(bytes)`` is one."""

from __future__ import annotations

import io
import os
import stat
from typing import Any, Protocol


class OutputStream(Protocol):
    """What a Session consumes into: ``write`` (and optionally ``flush``)."""

    def write(self, data: bytes, /) -> Any: ...


class FileOutputStream:
    """Appends to a file, unbuffered: each consume is handed to the OS at once.

    A process killed after a consume loses nothing that consume wrote.
    ``fsync=True`` also asks the OS to put it on disk at every flush.

    Before each consume it checks the path still names its file, as the
    stdlib's ``WatchedFileHandler`` does: if the file was deleted or replaced
    (a user's ``rm``, a cleanup job) it opens the path again, and if it was
    truncated under it (``copytruncate``) it goes on in it; either way the
    session starts a new stream there, header and all metadata first, so that
    every later event reads.
    """

    #: A switch of this stream is to a file the old one knows nothing of: no Summary.
    rotate_finishes = False

    def __init__(self, path: str | os.PathLike, *, mode: str = "ab", fsync: bool = False) -> None:
        if mode not in ("ab", "wb", "xb"):
            raise ValueError(f"mode must be 'ab', 'wb' or 'xb', not {mode!r}")
        self.path = os.fspath(path)
        self.fsync = fsync
        self._file = open(self.path, mode, buffering=0)
        self._size = os.fstat(self._file.fileno()).st_size   # the file's size after our writes
        self.reopened = 0                                      # times the path was opened again

    def write(self, data: bytes) -> int:
        n = self._file.write(data)
        self._size += n or 0
        return n

    def rotate_due(self, nbytes: int) -> bool:
        """True if the path no longer names the file we write, or it was truncated."""
        try:
            st = os.stat(self.path)
            mine = os.fstat(self._file.fileno())
        except OSError:
            return True
        if not stat.S_ISREG(mine.st_mode):
            return False           # a pipe, a terminal, /dev/null: nothing to watch
        return (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev) or mine.st_size < self._size

    def rotate(self) -> None:
        """Write to what the path names now (made again if it is gone)."""
        try:
            self._file.close()
        finally:
            self._file = open(self.path, "ab", buffering=0)
            self._size = os.fstat(self._file.fileno()).st_size
            self.reopened += 1

    def flush(self) -> None:
        if self.fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __repr__(self) -> str:
        return f"FileOutputStream({self.path!r})"


class MemoryOutputStream(io.BytesIO):
    """Keeps the log in memory; ``getvalue()`` gives the bytes (for tests and in-process readers)."""
