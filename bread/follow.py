"""Following a live file (``bread -F``), as ``tail -F`` does.

``Tail`` is a file object whose ``read`` waits for the writer instead of
ending: the frame reader above it never sees an end, and renders each frame
as the writer's consumer writes it. When the file at the path is replaced (a
rotation: another inode) or cut short (truncation), reading goes on from the
start of what is at the path now; its header frame starts a new stream. A
frame that the switch cut in two is reported as damage, as it is.
"""

from __future__ import annotations

import os
import time
from typing import BinaryIO


class Tail:
    """The bytes of the file at ``path``, now and as they come."""

    def __init__(self, path: str, interval: float = 0.2, *, from_start: bool = True) -> None:
        self.path = path
        self.name = path
        self.interval = interval
        self._f: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._open(from_start)

    def _open(self, from_start: bool = True) -> bool:
        try:
            f = open(self.path, "rb")
        except OSError:
            return False
        if self._f is not None:
            self._f.close()
        st = os.fstat(f.fileno())
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
            return self._open()
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
