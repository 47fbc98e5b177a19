"""OutputStreams: where a Consumer writes. Anything with ``write(bytes)`` is one."""

from __future__ import annotations

import io
import os
from typing import Any, Protocol


class OutputStream(Protocol):
    """What a Session consumes into: ``write`` (and optionally ``flush``)."""

    def write(self, data: bytes, /) -> Any: ...


class FileOutputStream:
    """Appends to a file, unbuffered: each consume is handed to the OS at once.

    A process killed after a consume loses nothing that consume wrote.
    ``fsync=True`` also asks the OS to put it on disk at every flush.
    """

    def __init__(self, path: str | os.PathLike, *, mode: str = "ab", fsync: bool = False) -> None:
        if mode not in ("ab", "wb", "xb"):
            raise ValueError(f"mode must be 'ab', 'wb' or 'xb', not {mode!r}")
        self.path = os.fspath(path)
        self.fsync = fsync
        self._file = open(self.path, mode, buffering=0)

    def write(self, data: bytes) -> int:
        return self._file.write(data)

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
