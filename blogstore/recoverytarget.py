"""The log files a crash-buffer recovery writes to, and the write the kill tore.

The log path, device, inode, offsets and lengths a control file records are only
compared with what the caller names: recovery appends to, or cuts, only the caller's log
or a file of that log (its base name, a process's own ``.pid<N>`` file, or the set's
pattern) in the log's own directory, a regular file owned by this user, opened without
following a link, whose device and inode are the recorded ones (``LockedFile``,
``own_file``). A write the dead process was in the middle of is cut off the log
(``cut_partial_write``) unless it reached the file whole (``write_complete``).
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
from typing import Any, Callable

import msgpack

from blogformat.entries import decode_header
from blogformat.frames import (FRAME_HEADER, HEADER_SIZE, MAGIC, MAX_PAYLOAD, check_crc,
                               parse_header, unescape)

from .crashlayout import CTL, PAGE, PID_PART
from .fileset import parse, split_base
from .posix import fcntl


class LockedFile:
    """A log file opened for appending under its writer's lock (``flock``, as blog's
    writers take it): what recovery writes through when it is not the caller's own
    stream. BlockingIOError if a live writer holds it; ``create`` makes it (exclusively).
    ``found`` (a file recovery found, not one the caller named): never through a link, a
    regular file of this process's user, else PermissionError."""

    def __init__(self, path: str, create: bool = False, found: bool = False) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if found:     # read too: recovery checks a frame begins where it would cut
            flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        self.fd = os.open(path, flags | (os.O_CREAT | os.O_EXCL if create else 0), 0o644)
        try:
            if found:
                st = os.fstat(self.fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    raise PermissionError(f"{path} is not a regular file of this user")
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(self.fd)
            raise

    def write(self, data: bytes) -> int:
        return os.write(self.fd, data)

    def position(self) -> tuple[int, int, int]:
        st = os.fstat(self.fd)
        return st.st_dev, st.st_ino, st.st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def own_file(fd: int, log_path: str) -> LockedFile | None:
    """The file the buffer's process last wrote (the control page's device and inode, found
    among ``log_path``'s files in its directory), opened and locked, if it is there and
    nobody writes it."""
    try:
        head = os.pread(fd, PAGE, 0)
        _, _, pid, _, _, dev, ino, _, _ = CTL.unpack_from(head, 0)
    except (OSError, struct.error):
        return None
    if ino == 0:
        return None               # it never wrote
    return _open_member(log_path, dev, ino, pid)


def _open_member(log_path: str, dev: int, ino: int, pid: int | None) -> LockedFile | None:
    """The file (dev, ino) if it is one of ``log_path``'s (of process ``pid`` if given) in
    its directory: opened without following a link, this user's, locked; else None."""
    path = _find(os.path.dirname(log_path) or ".", dev, ino)
    if path is None or not _log_file(log_path, os.path.basename(path), pid):
        return None               # gone (its inode may be another file's now)
    for _ in range(20):
        try:
            f = LockedFile(path, found=True)
            break
        except BlockingIOError:   # a live writer, a compression or a compaction has it, or
            time.sleep(0.005)     # a housekeeper's probe of its lock (is_locked) holds it
                                  # for an instant: tried again
        except OSError:
            return None
    else:
        return None               # a live writer has it (this caller's stream, say)
    st = os.fstat(f.fd)
    if (st.st_dev, st.st_ino) != (dev, ino) or st.st_nlink == 0:
        f.close()                 # renamed over, or deleted (compacted) by the lock's holder
        return None
    return f


def _log_file(log_path: str, name: str, pid: int | None) -> bool:
    """True if ``name`` (in ``log_path``'s directory) is a file of that log: its base name
    (``log_path`` without a process's ``.pid<N>`` part), a process's own
    ``NAME.pid<N>[-k].blog`` beside it, or a file of its set; of process ``pid`` if given
    (never a compressed one). An inode number alone is not enough: a file system gives a
    freed one to the next new file."""
    base = PID_PART.sub("", os.path.basename(log_path))
    if name == base:
        return True
    root, ext = os.path.splitext(base)
    own = re.fullmatch(re.escape(root) + r"\.pid(\d+)(?:-\d+)?" + re.escape(ext or ".blog"),
                       name)
    if own is not None:
        return pid is None or int(own[1]) == pid
    f = parse(name)
    return (f is not None and not f.compressed and f.stem == split_base(base)[1]
            and (pid is None or f.pid == pid))


def settle_elsewhere(log_path: str, dev: int, ino: int, offset: int, length: int) -> int:
    """A recovery that died appending ``length`` bytes at ``offset`` of file (dev, ino),
    not the stream recovery writes now: 2 if that append is whole there, else 0 once its
    part is cut off there (or the file is gone: nothing of it is left to read twice). A
    file the cut leaves empty (the recovery had made it) goes: a set has no empty files.
    (Housekeeping leaves such a file as it is meanwhile: ``crashlayout.waits_for_recovery``.)"""
    f = _open_member(log_path, dev, ino, None)
    if f is None:
        return 0                  # gone, not the log's, or a live writer has it
    try:
        size = os.fstat(f.fd).st_size
        if size >= offset + length:
            f.sync()
            return 2
        if size > offset and frame_at(f.fd, offset):
            f.truncate(offset)
            if offset == 0:       # (under its lock: the name is still this file)
                os.unlink(f.path)
        return 0
    finally:
        f.close()


def frame_at(fd: int, offset: int) -> bool:
    """True if a frame begins at ``offset`` (what a write or an append begins with)."""
    try:
        return os.pread(fd, len(MAGIC), offset) == MAGIC
    except OSError:
        return False


def _find(directory: str, dev: int, ino: int) -> str | None:
    """The path of the regular file ``(dev, ino)`` in ``directory``, if it is there."""
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.inode() == ino:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if st.st_dev == dev and stat.S_ISREG(st.st_mode):
                        return e.path
    except OSError:
        pass
    return None


def _file_size(path: str, dev: int, ino: int, stream: Any) -> int | None:
    """The size of the file the dead process was writing, if it is still the one there."""
    here = stream.position()
    if here[:2] == (dev, ino):
        return here[2]
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if (st.st_dev, st.st_ino) == (dev, ino) else None


def write_complete(stream: Any, path: str, writing: int, written: int, dev: int, ino: int,
                    offset: int, length: int) -> bool:
    """Did the write of consume ``writing`` (in progress at the kill) reach the file whole:
    do its ``length`` bytes at ``offset`` hold whole frames whose checksums hold?"""
    if writing == 0 or writing <= written or length == 0:
        return False
    size = _file_size(path, dev, ino, stream)
    if size is None or size < offset + length:
        return False
    for name in (getattr(stream, "path", None), path):
        try:
            fd = os.open(name,  # type: ignore[arg-type]  # None: the TypeError below
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (OSError, TypeError, ValueError):
            continue
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (dev, ino) or st.st_size < offset + length:
                continue
            return _whole_frames(os.pread(fd, length, offset))
        except OSError:
            continue
        finally:
            os.close(fd)
    return False


def _whole_frames(data: bytes) -> bool:
    """True if ``data`` is frames, back to back, each with its checksums right."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            return False
        fields = parse_header(data[pos:pos + HEADER_SIZE])
        if fields is None or pos + HEADER_SIZE + fields[2] > len(data):
            return False
        if not check_crc(data[pos + HEADER_SIZE:pos + HEADER_SIZE + fields[2]], fields[3]):
            return False
        pos += HEADER_SIZE + fields[2]
    return True


def cut_partial_write(stream: Any, path: str, writing: int, written: int, dev: int, ino: int,
                       offset: int, length: int, pid: int) -> None:
    """A write cut short by the kill: its bytes go (its events are recovered whole)."""
    if writing == 0 or writing <= written:
        return
    here = stream.position()
    if here[:2] == (dev, ino):
        if offset < here[2] < offset + length and on_stream_file(
                stream, dev, ino, lambda fd: _cut_is_ours(fd, offset, here[2], pid)):
            stream.truncate(offset)
        return
    f = _open_member(path, dev, ino, None)
    if f is None:
        return        # gone, not the log's, or another writer has it: left as it is
    try:
        size = os.fstat(f.fd).st_size
        if offset < size < offset + length and _cut_is_ours(f.fd, offset, size, pid):
            f.truncate(offset)
    finally:
        f.close()


def _cut_is_ours(fd: int, offset: int, size: int, pid: int) -> bool:
    """True if the bytes of the file from ``offset`` to ``size`` can be what process
    ``pid``'s cut write left: frames from ``offset`` on, whole but perhaps the last, and no
    header frame of another process among them (a stream's start is never cut)."""
    pos = offset
    while pos + HEADER_SIZE <= size:
        try:
            fields = parse_header(os.pread(fd, HEADER_SIZE, pos))
        except OSError:
            return False
        if fields is None:
            return pos > offset       # not a frame: a torn tail, unless it is the first
        kind, flags, n, crc = fields
        if pos + HEADER_SIZE + n > size:
            return True               # the torn last frame
        if kind == FRAME_HEADER:
            try:
                _, payload = unescape(flags, os.pread(fd, min(n, MAX_PAYLOAD), pos + HEADER_SIZE))
                if decode_header(payload, pos).descriptor.get("pid") != pid:
                    return False
            except (OSError, ValueError, TypeError, msgpack.UnpackException):
                return False
        pos += HEADER_SIZE + n
    return pos > offset or frame_at(fd, offset)


def on_stream_file(stream: Any, dev: int, ino: int, check: Callable[[int], bool]) -> bool:
    """``check(fd)`` of the file that ``stream`` writes, opened read-only without following
    a link, if it is the file (dev, ino); else False."""
    name = getattr(stream, "current", None) or getattr(stream, "path", None)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)   # type: ignore
    except (OSError, TypeError, ValueError):
        return False
    try:
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (dev, ino) and check(fd)
    finally:
        os.close(fd)
