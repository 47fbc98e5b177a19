"""The crash buffer: each channel mirrored in file-backed shared memory, so that a process
killed at any moment (kill -9, the OOM killer, a crash in C code) loses no event whose log
call returned.

The kernel keeps what a process wrote into a shared file mapping when the process dies, so
a channel whose bytes are also in such a mapping outlives it. Per process, in a buffer
directory next to the log: a control file ``<pid>.meta`` (locked while the process lives:
a lock that can be taken marks an abandoned buffer) holding the consume record and the
metadata (call sites, writers), and per writer a channel file ``<pid>-<writer>.chan``
with two halves: the one the thread appends to, and the one the consumer took and is
writing. ``blogstore.crashlayout`` has their layout (docs/format.md 15); ``blogstore.recovery``
reads what a dead process left.

Power loss is another matter: only what was fsynced survives it (``blog.files.durability``).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from typing import Any, Iterable

from blogformat.entries import Metadata, header_payload, metadata_frames
from blogformat.frames import FRAME_HEADER, frame_bytes
from blogstore.crashlayout import (CHAN, CHAN_MAGIC, CTL, CTL_MAGIC, HALF, HALF_AT, MAX_PATH,
                                   PAGE, PATH_AT, SLACK, SPLIT_AT, VERSION, buffer_directory,
                                   make_directory)
from blogstore.posix import fcntl

from .. import process
from ..report import report

__all__ = ["CrashBuffer", "Slot", "buffer_directory", "file_position"]


_MASK = (1 << 64) - 1


class Slot:
    """One channel's file: two halves of ``half`` bytes, mapped shared. Its header fields are
    stored one aligned 8-byte word at a time (``struct.pack_into`` zeroes a field before it
    writes it: a kill in between would read as an empty half)."""

    def __init__(self, path: str, writer_id: int, half: int, base: int) -> None:
        self.path = path
        self.half = half
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Blocks allocated now: a shared mapping of a sparse file whose file system
            # fills would kill the process with SIGBUS at a store (ENOSPC here instead).
            os.posix_fallocate(fd, 0, PAGE + 2 * half)
            self.map = mmap.mmap(fd, PAGE + 2 * half)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        os.close(fd)
        self.words = memoryview(self.map).cast("Q")
        CHAN.pack_into(self.map, 0, CHAN_MAGIC, writer_id, half, 0)   # not yet found by anyone
        for h in (0, 1):
            HALF.pack_into(self.map, HALF_AT + HALF.size * h, 0, base, 0)
        self.active = 0
        self.len = 0

    def _word(self, h: int, field: int, value: int) -> None:
        """Half ``h``'s field (0 len, 1 base, 2 seq) in one store."""
        self.words[(HALF_AT + HALF.size * h) // 8 + field] = value & _MASK

    # The Python channel's mirror (the C channel writes the same bytes itself).

    def append(self, data: bytes) -> None:
        """Append encoded events to the active half; its length is stored after the bytes."""
        end = self.len + len(data)
        if end > self.half:
            return                  # beyond the slack (a forced push): not mirrored
        at = PAGE + self.active * self.half + self.len
        self.map[at:at + len(data)] = data
        self.len = end
        self._word(self.active, 0, end)

    def load(self, data: bytes, base: int) -> None:
        """Start the active half afresh with ``data`` (what a channel held when it got its slot)."""
        self._word(self.active, 0, 0)
        self._word(self.active, 1, base)
        self.len = 0
        self.append(data)

    def take(self, seq: int, base: int) -> None:
        """The active half is taken by consume ``seq``; the thread goes on in the other one,
        its events' deltas relative to ``base``. Each store leaves a state recovery reads
        right (docs/format.md 15)."""
        old, new = self.active, 1 - self.active
        self._word(old, 2, seq)
        self._word(new, 0, 0)
        self._word(new, 1, base)
        self._word(new, 2, 0)
        self.words[3] = new          # the active half: a u32 and its padding, one word
        self.active = new
        self.len = 0

    def hold(self, data: bytes, base: int, seq: int) -> bool:
        """Put ``data`` (events whose write the output refused) in the idle half, as taken by
        consume ``seq``: recovery reads it before the active half. The bytes first, ``seq``
        last: until then the half is one recovery skips. False if it does not fit."""
        h = 1 - self.active
        if len(data) > self.half:
            return False            # larger than a half of this buffer: not mirrored
        self.map[PAGE + h * self.half:PAGE + h * self.half + len(data)] = data
        self._split(h, 0, 0)
        self._split(h, 1, 0)
        self._word(h, 1, base)
        self._word(h, 0, len(data))
        self._word(h, 2, seq)
        return True

    # A consume cut between files (blog.pipeline.parts): each half's ``from`` and ``rest``.

    def _split(self, h: int, field: int, value: int) -> None:
        """Half ``h``'s ``from`` (field 0) or ``rest`` (1) in one store."""
        self.words[(SPLIT_AT + 16 * h) // 8 + field] = value

    def _taken(self, seq: int) -> tuple[int, int] | None:
        """(half, its length) of the half consume ``seq`` took, if one did."""
        for h in (0, 1):
            at = (HALF_AT + HALF.size * h) // 8
            if seq and self.words[at + 2] == seq:
                return h, self.words[at]
        return None

    def split(self, seq: int, end: int, done: bool) -> None:
        """Consume ``seq``'s write in progress ends ``end`` bytes into its half: stored as
        ``rest``, what that write leaves out; with ``done`` the write ended and ``end`` is
        stored as ``from``, the bytes of the half in files now."""
        taken = self._taken(seq)
        if taken is not None:
            h, n = taken
            self._split(h, 0 if done else 1, min(end, n) if done else max(n - end, 0))

    def unsplit(self, seq: int) -> None:
        """Consume ``seq`` is written whole: its half's ``from`` and ``rest`` back to 0 (the
        half is taken again only after it was active)."""
        taken = self._taken(seq)
        if taken is not None:
            self._split(taken[0], 0, 0)
            self._split(taken[0], 1, 0)

    def forget(self) -> None:
        """Both halves emptied: another buffer holds what they held (a move)."""
        for h in (0, 1):
            self._word(h, 0, 0)

    def keep(self, data: bytes) -> bool:
        """After the channel stopped mirroring into this file: make its active half hold all
        of ``data``, the channel's events since its last take (the half holds a prefix of
        them). False if they do not fit."""
        h = self.words[3] & 0xFFFFFFFF
        at = self.words[(HALF_AT + HALF.size * h) // 8]
        if h not in (0, 1) or at > len(data) or len(data) > self.half:
            return False
        self.map[PAGE + h * self.half + at:PAGE + h * self.half + len(data)] = data[at:]
        self._word(h, 0, len(data))
        return True

    def close(self, unlink: bool = True) -> None:
        try:
            self.words.release()
            self.map.close()
        except (BufferError, ValueError):   # the C channel still holds a view: it goes with it
            pass
        if unlink:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class CrashBuffer:
    """A process's crash buffer in ``directory`` for the log at ``log_path``.

    Its files are named after the process and its start (``<pid>-<ns>``), so that
    neither a process that reuses a dead one's pid nor one of another pid namespace
    ever takes over (or truncates) a buffer still to be recovered. The directory is made
    0700 if it is not there; one that is not this user's own, or that others may write,
    is refused (``blogformat.errors.UnsafeBufferDirectory``, an OSError).
    """

    def __init__(self, directory: str, log_path: str, descriptor: dict,
                 rotate_bytes: int | None = None) -> None:
        make_directory(directory)
        self.directory = directory
        self.log_path = log_path
        #: The set's ``rotate_bytes`` (its stream's): recorded in the buffer's header, so
        #: that any recovery cuts what it appends into files of that size at most.
        self.rotate_bytes = rotate_bytes
        if rotate_bytes is not None:
            descriptor = dict(descriptor, rotate_bytes=rotate_bytes)
        self.pid = os.getpid()
        self.prefix = f"{self.pid}-{time.time_ns()}"
        self.path = os.path.join(directory, f"{self.prefix}.meta")
        self._lock = threading.Lock()
        # Made under a temporary name and locked before it is named: a recovery never
        # sees a control file of a live process unlocked.
        tmp = os.path.join(directory, f"{self.prefix}.new")
        fd = self._fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.posix_fallocate(fd, 0, PAGE)
            self._ctl = mmap.mmap(fd, PAGE)
            self._words = memoryview(self._ctl).cast("Q")
            raw = os.path.abspath(log_path).encode("utf-8", "surrogateescape")[:MAX_PATH]
            struct.pack_into("<H", self._ctl, PATH_AT, len(raw))
            self._ctl[PATH_AT + 2:PATH_AT + 2 + len(raw)] = raw
            CTL.pack_into(self._ctl, 0, CTL_MAGIC, VERSION, self.pid, 0, 0, 0, 0, 0, 0)
            self._end = PAGE
            self._append(frame_bytes(FRAME_HEADER, header_payload(descriptor)))
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._seq = 0
        self._slots: dict[int, Slot] = {}
        self._failed = False         # reported a file that could not be made or written
        self.closed = False
        process.track(process.CRASH_BUFFER, self)

    def _append(self, data: bytes) -> None:
        os.pwrite(self._fd, data, self._end)
        self._end += len(data)

    def _report_once(self, what: str, exc: OSError) -> None:
        if not self._failed:
            self._failed = True
            report(f"blog: crash buffer {self.directory}: {what}: {exc}; events it cannot "
                   "hold are not protected from a kill")

    def describe(self, entries: Iterable[Metadata]) -> None:
        """Metadata the buffered events may need (call sites, writers, clock sync)."""
        data = b"".join(metadata_frames(list(entries)))
        if data:
            with self._lock:
                if not self.closed:
                    try:
                        self._append(data)
                    except OSError as exc:      # a full disk: never into a log call
                        self._report_once("metadata not recorded", exc)

    def slot(self, writer_id: int, capacity: int, base: int) -> Slot | None:
        """A channel file for writer ``writer_id`` (halves of ``capacity`` bytes and some
        slack); None (reported once) if it cannot be made: the channel is then not mirrored."""
        try:
            s = Slot(os.path.join(self.directory, f"{self.prefix}-{writer_id}.chan"), writer_id,
                     capacity + SLACK, base)
        except OSError as exc:            # EMFILE, ENOSPC, the directory removed...
            self._report_once("a channel file could not be made", exc)
            return None
        with self._lock:
            self._slots[writer_id] = s
        return s

    def next_seq(self) -> int:
        """The number of the next consume (its takes mark the halves they take)."""
        self._seq += 1
        return self._seq

    def writing(self, seq: int, where: tuple[int, int, int] | None, length: int) -> None:
        """Consume ``seq`` is about to write ``length`` bytes at ``where`` (dev, inode, offset).
        The place first, ``writing`` last: each a single store."""
        dev, ino, offset = where or (0, 0, 0)
        w = self._words
        w[4], w[5], w[6], w[7] = dev, ino, offset, length
        w[3] = seq

    def written(self, seq: int) -> None:
        """Consume ``seq`` is written (or its loss counted): its halves are free. ``written``
        first, then ``writing`` cleared."""
        self._words[2] = seq
        self._words[3] = 0

    def leaves(self, seq: int, ends: dict[int, int]) -> None:
        """A part of consume ``seq`` is about to be written, ending ``ends[w]`` bytes into
        writer ``w``'s half: each half's ``rest``, stored while no write is in progress
        (docs/format.md 15)."""
        for wid, end in ends.items():
            s = self._slots.get(wid)
            if s is not None:
                s.split(seq, end, False)

    def covered(self, seq: int, ends: dict[int, int]) -> None:
        """A part of consume ``seq`` is written, ending ``ends[w]`` bytes into writer ``w``'s
        half: each half's ``from`` first, then ``writing`` cleared. Recovery skips those
        bytes from then on, whatever it finds in the files."""
        for wid, end in ends.items():
            s = self._slots.get(wid)
            if s is not None:
                s.split(seq, end, True)
        self._words[3] = 0

    def unsplit(self, seq: int) -> None:
        """After ``written(seq)`` of a consume written in parts: its halves' ``from`` and
        ``rest`` cleared (``Slot.unsplit``)."""
        with self._lock:
            slots = list(self._slots.values())
        for s in slots:
            s.unsplit(seq)

    def failed(self, seq: int) -> None:
        """Consume ``seq``'s write was refused and its events are held: its halves stay taken
        (recovery appends them), and no write is in progress."""
        self._words[3] = 0

    def retire(self, writer_id: int) -> None:
        """Writer ``writer_id`` ended and its events are written: its file goes."""
        with self._lock:
            s = self._slots.pop(writer_id, None)
        if s is not None:
            s.close()

    def close(self) -> None:
        """Everything was written (a clean shutdown): the buffer goes."""
        self._let_go(remove=True)

    def _let_go(self, remove: bool) -> None:
        """Close the files, and with ``remove`` remove them (else they stay, unlocked)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            slots, self._slots = list(self._slots.values()), {}
        for s in slots:
            s.close(unlink=remove)
        if remove:
            for remove_it, what in ((os.unlink, self.path), (os.rmdir, self.directory)):
                try:
                    remove_it(what)   # the directory: if no other process's buffer is in it
                except OSError:
                    pass
        try:
            self._words.release()
            self._ctl.close()
        finally:
            os.close(self._fd)

    def keep(self, writer_id: int, data: bytes) -> bool:
        """Writer ``writer_id``'s channel events since its last take, kept whole in its file
        (``Slot.keep``); False if it has no file or they do not fit."""
        s = self._slots.get(writer_id)
        return s is not None and not self.closed and s.keep(data)

    def has_slot(self, writer_id: int) -> bool:
        """True if writer ``writer_id``'s channel is mirrored here."""
        return writer_id in self._slots

    def release(self) -> None:
        """Claim nothing any more: another buffer took over every channel (a move). Until
        its files are removed, a recovery of this one appends nothing."""
        with self._lock:
            slots = list(self._slots.values()) if not self.closed else []
        for s in slots:
            s.forget()
        if not self.closed:
            self._words[3] = 0

    def leave(self) -> None:
        """Let go of the buffer but leave its files (events the output refused): unlocked, it
        is an abandoned buffer that the next start of the log recovers."""
        self._let_go(remove=False)

    def _forked(self) -> None:
        """In a forked child: the parent's buffer is not ours; let go of our copies (never
        unlocking: the lock belongs to the parent's open file too)."""
        if self.closed:
            return
        self.closed = True
        for s in self._slots.values():
            s.close(unlink=False)
        self._slots = {}
        try:
            self._words.release()
            self._ctl.close()
        except (BufferError, ValueError):
            pass
        try:
            os.close(self._fd)
        except OSError:
            pass


def file_position(stream: Any) -> tuple[int, int, int] | None:
    """(device, inode, size) of the file a stream writes, or None if it is not a file (or
    is closed: the write then fails, and is counted, where writes are)."""
    where = getattr(stream, "position", None)
    try:
        return where() if where is not None else None
    except (OSError, ValueError):
        return None
