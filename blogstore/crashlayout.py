"""The crash buffer's files (docs/format.md 15): their layout, where they live, and the
checks of their directory.

The writer (``blog.files.crashbuf``) makes the files; recovery (``blogstore.recovery``) reads
what a killed process left in them. A buffer directory is used only if it is a real
directory owned by this process's user and not writable by group or others
(``open_directory``): nothing a buffer holds is an instruction (docs/security.md).
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
import stat
import struct
from typing import Iterable

from .errors import UnsafeBufferDirectory
from .fileset import parse

PAGE = 4096
CTL_MAGIC = b"BLOGBUF1"
CHAN_MAGIC = b"BLOGCHN1"
VERSION = 1
#: Control page: magic, version, pid, written, writing, dev, ino, offset, length, then the
#: recovery record (state, dev, ino, offset, length), then the log path (u16 length, UTF-8).
CTL = struct.Struct("<8sIIQQQQQQ")           # 64 bytes at 0
REC = struct.Struct("<QQQQQ")                # 40 bytes at 64
REC_AT = 64
PATH_AT = 128
MAX_PATH = PAGE - PATH_AT - 2
#: Channel file header: magic, writer id, half size, active half; each half: len, base, seq.
CHAN = struct.Struct("<8sQQI4x")             # 32 bytes at 0
HALF = struct.Struct("<QqQ")                 # 24 bytes at 32 + 24 * half
HALF_AT = 32
#: A consume cut between files (blog.pipeline.parts): per half, u64 ``from`` (its bytes in a
#: file already) and u64 ``rest`` (its bytes at the end the write in progress leaves out).
SPLIT = struct.Struct("<QQ")                 # 16 bytes at 80 + 16 * half
SPLIT_AT = 80
#: Room beyond the channel capacity in each half: an event a full channel takes anyway.
SLACK = 64 << 10
#: A process's own file beside a plain output (blogstore.fileset.pid_path): its part.
PID_PART = re.compile(r"\.pid\d+(?:-\d+)?(?=\.[^.]*$|$)")


def buffer_directory(log_path: str, crash_dir: str | None = None) -> str:
    """Where the crash buffers of ``log_path``'s writers live: ``.<name>.buffers`` beside it
    (a process's own ``app.pid<N>.blog`` shares ``app.blog``'s: the next start of
    ``app.blog`` recovers it), or under ``crash_dir`` with a hash of the log's path in the
    name (two logs of one name in different directories never share one)."""
    log_path = os.path.abspath(log_path)
    base = PID_PART.sub("", os.path.basename(log_path))
    if crash_dir is None:
        return os.path.join(os.path.dirname(log_path), f".{base}.buffers")
    where = os.path.join(os.path.dirname(log_path), base).encode("utf-8", "surrogateescape")
    return os.path.join(crash_dir, f".{base}-{hashlib.sha1(where).hexdigest()[:12]}.buffers")


def open_directory(directory: str) -> int | None:
    """A descriptor of the crash buffer directory, opened without following a link and
    checked (a real directory, owned by this process's effective user, not writable by
    group or others); None if it does not exist. UnsafeBufferDirectory says why it may
    not be used. Recovery reaches every file through it: a directory renamed, or replaced
    by a link, after the check changes nothing."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeBufferDirectory(f"{directory} is not a directory (a link or a file): "
                                        "refused as a crash buffer directory") from None
        raise
    st = os.fstat(fd)
    why = None
    if st.st_uid != os.geteuid():
        why = (f"is owned by uid {st.st_uid}, not by this process's user (uid "
               f"{os.geteuid()})")
    elif st.st_mode & 0o022:
        why = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    if why is not None:
        os.close(fd)
        raise UnsafeBufferDirectory(f"{directory} {why}: refused as a crash buffer directory"
                                    + (" (chmod go-w to use it)" if "writable" in why else ""))
    return fd


def check_directory(directory: str) -> bool:
    """True if ``directory`` exists and may be used as a crash buffer directory
    (``open_directory``); False if it does not exist."""
    fd = open_directory(directory)
    if fd is None:
        return False
    os.close(fd)
    return True


def make_directory(directory: str) -> None:
    """Make the crash buffer directory (mode 0700) if it is not there, and check it
    (``check_directory``): one made by someone else is never taken over."""
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    if not check_directory(directory):
        raise FileNotFoundError(f"{directory} vanished as it was made")


def pending_pids(directory: str) -> set[int]:
    """The processes whose buffers in ``directory`` may wait for recovery: their process is
    gone. Their files must be left as they are (not compressed) until recovery has cut
    and appended them. A pid that is alive (or taken again) counts as live. No lock is
    probed: a probe could make a recovery that runs at this moment take the buffer for a
    live one."""
    return pending(directory)[0]


def pending(directory: str) -> tuple[set[int], set[tuple[int, int]]]:
    """``pending_pids``, and the files (device, inode) that a recovery of a buffer in
    ``directory`` was appending to when it died (its record's state 1): a part of its
    append may be all they end with, which the next recovery finishes or cuts off first.
    Until then such a file is not final: never compressed, shipped or compacted."""
    pids: set[int] = set()
    files: set[tuple[int, int]] = set()
    for meta in glob.glob(os.path.join(glob.escape(directory), "*.meta")):
        m = re.fullmatch(r"(\d+)-\d+\.meta", os.path.basename(meta))
        if m is None:
            continue
        if not alive(int(m[1])):
            pids.add(int(m[1]))
        try:      # never through a link, never waiting on a FIFO
            fd = os.open(meta, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            state, dev, ino, _, _ = REC.unpack(os.pread(fd, REC.size, REC_AT))
        except (OSError, struct.error):
            continue
        finally:
            os.close(fd)
        if state == 1:
            files.add((dev, ino))
    return pids, files


def pending_in(buffers: Iterable[str]) -> tuple[set[int], set[tuple[int, int]]]:
    """``pending`` of every directory of ``buffers``, together: read once for a pass over
    many files (``waits_for_recovery``'s ``found``)."""
    pids: set[int] = set()
    files: set[tuple[int, int]] = set()
    for d in buffers:
        p, f = pending(d)
        pids |= p
        files |= f
    return pids, files


def waits_for_recovery(buffers: Iterable[str], path: str,
                       found: tuple[set[int], set[tuple[int, int]]] | None = None) -> bool:
    """True if the set file ``path`` must be left as it is until a crash buffer in one of
    the ``buffers`` directories is recovered: its writer died with events in its buffer
    (recovery cuts and appends to it first), or a recovery died appending to it (it
    holds a part of that append, finished or cut off by the next recovery). ``found``:
    ``pending_in(buffers)`` already read."""
    pids, files = pending_in(buffers) if found is None else found
    f = parse(os.path.basename(path))
    if f is not None and f.pid in pids:
        return True
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in files


def set_buffers(directory: str, stem: str) -> list[str]:
    """The crash buffer directories beside the set ``stem`` in ``directory`` (those of its
    base names ``STEM.blog`` and ``STEM``; one under a ``crash_dir`` is not found here)."""
    return [buffer_directory(os.path.join(directory, base))
            for base in (stem + ".blog", stem)]


def last_written(directory: str, dev: int, ino: int) -> bool:
    """True if a buffer in ``directory`` records the file (``dev``, ``ino``) as the one its
    process last wrote to. Of a file nobody holds (its writer dead, a zombie not yet reaped
    included, whose pid still looks alive), that is where recovery appends what the buffer
    kept: the file is not finished before. Only the control pages' device and inode are
    read (regular files, never through a link); no lock is probed (``pending_pids``)."""
    for meta in glob.glob(os.path.join(glob.escape(directory), "*.meta")):
        try:
            fd = os.open(meta, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            head = os.pread(fd, CTL.size, 0) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            continue
        finally:
            os.close(fd)
        if len(head) == CTL.size:
            magic, _, _, _, _, wdev, wino, _, _ = CTL.unpack(head)
            if magic == CTL_MAGIC and (wdev, wino) == (dev, ino):
                return True
    return False


def alive(pid: int) -> bool:
    """True if process ``pid`` exists (or may: one not ours to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True     # exists, not ours to signal
    return True
