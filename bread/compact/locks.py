"""Each original's own lock, held by the compaction from before it is read until it is
deleted (or the compaction is undone): the exclusive ``flock`` a writer keeps on the file
it writes, a compression (``blog.files.housekeeping.compress``) and a crash buffer's
recovery (``blogstore.recoverytarget``) take too. While the compaction holds it, none of
them changes the file; a file one of them holds is left for the next compaction."""

from __future__ import annotations

import os
import stat
import time

from blogstore.posix import fcntl

from .files import Warn, shown

_TRIES = 20          # a housekeeper's probe (fileset.is_locked) holds a lock for an instant
_PAUSE = 0.005


def hold(directory: str, names: list[str], warn: Warn) -> dict[str, int]:
    """The originals of ``names`` locked, each with the descriptor that holds its lock (close
    it to release: ``release``). One another process holds (a writer, a compression, a
    recovery) or that is gone since planning (compressed, removed) is said to ``warn`` and
    left out: the next compaction takes it."""
    held: dict[str, int] = {}
    room = _room()
    for k, n in enumerate(names):
        if len(held) >= room:     # each lock is an open file: the rest wait their turn
            more = len(names) - k - 1
            warn(f"{shown(directory, n)}{f' and {more} more' if more else ''}: more "
                 "originals than this process may hold open at once: left for the next "
                 "compaction")
            break
        fd = _lock(os.path.join(directory, n))
        if isinstance(fd, int):
            held[n] = fd
        else:
            warn(f"{shown(directory, n)}: {fd}: left for the next compaction")
    return held


def release(held: dict[str, int]) -> None:
    """Close the descriptors ``hold`` gave, releasing the locks."""
    for fd in held.values():
        os.close(fd)
    held.clear()


def _room() -> int:
    """How many originals may be held at once: half the descriptors this process may still
    open (the rest for the compaction's own files: its output, its sorted runs)."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        used = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 16
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(1, (soft - used) // 2)


def _lock(path: str) -> int | str:
    """A descriptor of ``path`` holding its exclusive lock, or why there is none."""
    try:     # never through a link, never waiting on a FIFO
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "gone since it was planned (compressed or removed by another process)"
    except OSError as exc:
        return f"cannot open it ({exc.strerror})"
    try:
        for _ in range(_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(_PAUSE)
        else:
            os.close(fd)
            return ("locked by another process (being written, compressed or recovered "
                    "into)")
        st = os.fstat(fd)
        try:   # the lock came once the holder was done: is the name still this file?
            now = os.lstat(path)
        except FileNotFoundError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) \
                or not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return "gone since it was planned (compressed or removed by another process)"
        return fd
    except BaseException:
        try:
            os.close(fd)
        except OSError:
            pass
        raise
