"""The crash buffer: each channel mirrored in file-backed shared memory, so that a process
killed at any moment (kill -9, the OOM killer, a crash in C code) loses no event whose log
call returned.

The kernel keeps what a process wrote into a shared file mapping when the process dies, so
a channel whose bytes are also in such a mapping outlives it. Per process, in a buffer
directory next to the log: a control file ``<pid>.meta`` (locked while the process lives:
a lock that can be taken marks an abandoned buffer) holding the consume record and the
metadata (call sites, writers), and per writer a channel file ``<pid>-<writer>.chan``
with two halves: the one the thread appends to, and the one the consumer took and is
writing. ``blogformat.crashfiles`` has their layout (docs/format.md 15) and reads what a
dead process left.

Power loss is another matter: only what was fsynced survives it (``blog.durability``).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
import weakref
from typing import Any, Iterable

from blogformat.crashfiles import (CHAN, CHAN_MAGIC, CTL, CTL_MAGIC, HALF, HALF_AT, MAX_PATH,
                                   PAGE, PATH_AT, SLACK, VERSION, buffer_directory)
from blogformat.entries import Metadata, header_payload, metadata_frames
from blogformat.frames import FRAME_HEADER, frame_bytes

__all__ = ["CrashBuffer", "Slot", "buffer_directory", "file_position"]


class Slot:
    """One channel's file: two halves of ``half`` bytes, mapped shared."""

    def __init__(self, path: str, writer_id: int, half: int, base: int) -> None:
        self.path = path
        self.half = half
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, PAGE + 2 * half)
            self.map = mmap.mmap(fd, PAGE + 2 * half)
        finally:
            os.close(fd)
        HALF.pack_into(self.map, HALF_AT, 0, base, 0)
        HALF.pack_into(self.map, HALF_AT + HALF.size, 0, base, 0)
        CHAN.pack_into(self.map, 0, CHAN_MAGIC, writer_id, half, 0)
        self.active = 0
        self.len = 0

    # The Python channel's mirror (the C channel writes the same bytes itself).

    def append(self, data: bytes) -> None:
        """Append encoded events to the active half; its length is stored after the bytes."""
        end = self.len + len(data)
        if end > self.half:
            return                  # beyond the slack (a forced push): not mirrored
        at = PAGE + self.active * self.half + self.len
        self.map[at:at + len(data)] = data
        self.len = end
        struct.pack_into("<Q", self.map, HALF_AT + HALF.size * self.active, end)

    def load(self, data: bytes, base: int) -> None:
        """Start the active half afresh with ``data`` (what a channel held when it got its slot)."""
        struct.pack_into("<Q", self.map, HALF_AT + HALF.size * self.active, 0)
        struct.pack_into("<q", self.map, HALF_AT + HALF.size * self.active + 8, base)
        self.len = 0
        self.append(data)

    def take(self, seq: int, base: int) -> None:
        """The active half is taken by consume ``seq``; the thread goes on in the other one,
        its events' deltas relative to ``base``. Each step leaves a state recovery reads right."""
        old, new = self.active, 1 - self.active
        struct.pack_into("<Q", self.map, HALF_AT + HALF.size * old + 16, seq)
        HALF.pack_into(self.map, HALF_AT + HALF.size * new, 0, base, 0)
        struct.pack_into("<I", self.map, 24, new)
        self.active = new
        self.len = 0

    def close(self, unlink: bool = True) -> None:
        try:
            self.map.close()
        except (BufferError, ValueError):   # the C channel still holds a view: it goes with it
            pass
        if unlink:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class CrashBuffer:
    """A process's crash buffer in ``directory`` for the log at ``log_path``."""

    def __init__(self, directory: str, log_path: str, descriptor: dict) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.pid = os.getpid()
        self.path = os.path.join(directory, f"{self.pid}.meta")
        self._lock = threading.Lock()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a dead one of our pid: ours now
            os.ftruncate(fd, 0)
            os.ftruncate(fd, PAGE)
            self._ctl = mmap.mmap(fd, PAGE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        raw = os.path.abspath(log_path).encode("utf-8", "surrogateescape")[:MAX_PATH]
        struct.pack_into("<H", self._ctl, PATH_AT, len(raw))
        self._ctl[PATH_AT + 2:PATH_AT + 2 + len(raw)] = raw
        CTL.pack_into(self._ctl, 0, CTL_MAGIC, VERSION, self.pid, 0, 0, 0, 0, 0, 0)
        self._end = PAGE
        self._append(frame_bytes(FRAME_HEADER, header_payload(descriptor)))
        self._seq = 0
        self._slots: dict[int, Slot] = {}
        self.closed = False
        _BUFFERS.add(self)

    def _append(self, data: bytes) -> None:
        os.pwrite(self._fd, data, self._end)
        self._end += len(data)

    def describe(self, entries: Iterable[Metadata]) -> None:
        """Metadata the buffered events may need (call sites, writers, clock sync)."""
        data = b"".join(metadata_frames(list(entries)))
        if data:
            with self._lock:
                if not self.closed:
                    self._append(data)

    def slot(self, writer_id: int, capacity: int, base: int) -> Slot:
        """A channel file for writer ``writer_id`` (halves of ``capacity`` bytes and some slack)."""
        s = Slot(os.path.join(self.directory, f"{self.pid}-{writer_id}.chan"), writer_id,
                 capacity + SLACK, base)
        with self._lock:
            self._slots[writer_id] = s
        return s

    def next_seq(self) -> int:
        """The number of the next consume (its takes mark the halves they take)."""
        self._seq += 1
        return self._seq

    def writing(self, seq: int, where: tuple[int, int, int] | None, length: int) -> None:
        """Consume ``seq`` is about to write ``length`` bytes at ``where`` (dev, inode, offset)."""
        dev, ino, offset = where or (0, 0, 0)
        struct.pack_into("<QQQQQ", self._ctl, 24, seq, dev, ino, offset, length)

    def written(self, seq: int) -> None:
        """Consume ``seq`` is written (or its loss counted): its halves are free."""
        struct.pack_into("<QQ", self._ctl, 16, seq, 0)

    def retire(self, writer_id: int) -> None:
        """Writer ``writer_id`` ended and its events are written: its file goes."""
        with self._lock:
            s = self._slots.pop(writer_id, None)
        if s is not None:
            s.close()

    def close(self) -> None:
        """Everything was written (a clean shutdown): the buffer goes."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            slots, self._slots = list(self._slots.values()), {}
        for s in slots:
            s.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        try:
            self._ctl.close()
        finally:
            os.close(self._fd)

    def _forked(self) -> None:
        """In a forked child: the parent's buffer is not ours; let go of our copies (never
        unlocking: the lock belongs to the parent's open file too)."""
        self.closed = True
        for s in self._slots.values():
            s.close(unlink=False)
        self._slots = {}
        try:
            self._ctl.close()
        except (BufferError, ValueError):
            pass
        try:
            os.close(self._fd)
        except OSError:
            pass


_BUFFERS: "weakref.WeakSet[CrashBuffer]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for b in list(_BUFFERS):
        if not b.closed:
            b._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def file_position(stream: Any) -> tuple[int, int, int] | None:
    """(device, inode, size) of the file a stream writes, or None if it is not a file."""
    where = getattr(stream, "position", None)
    return where() if where is not None else None
