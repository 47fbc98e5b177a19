"""OutputStreams: where a Consumer writes. Anything with ``write(bytes)`` is one."""

from __future__ import annotations

import io
import os
import stat
import time

from blogformat.typinglite import TYPE_CHECKING, Protocol
from blogstore import posix
from blogstore.fileset import pid_path

from .. import process
from ..files.durability import FLUSH, NEVER, fsync_fd, stream_policy, sync_directory
from ..errors import ConfigurationError, NotAFile
from ..report import report

if TYPE_CHECKING:
    from typing import BinaryIO


class OutputStream(Protocol):
    """What a Session consumes into: ``write`` (and optionally ``flush``)."""

    def write(self, data: bytes, /) -> object: ...


class FileOutputStream:
    """Appends to a file, unbuffered: each consume is handed to the OS at once.

    A process killed after a consume loses nothing that consume wrote. For
    power loss, ``fsync`` (``blog.files.durability``): ``True`` or ``"flush"`` puts it
    on disk at every flush, ``"rotation"`` when the file is closed; ``sync()``
    does it now. The file's name is synced (its directory) once per file opened:
    when it is opened if ``fsync`` is on, else by the first ``sync()``.

    The file is one writer's: the stream holds an exclusive ``flock`` on it
    (never released while the file is open, inherited by no other open). If
    another process or session holds ``path``, the stream writes its own file
    beside it, ``app.pid<N>.blog``, and says so on stderr: two streams never
    interleave in one file (their events would take each other's call sites).
    ``path`` keeps what was asked; ``self.path`` is the file written.

    Before each consume it checks the path still names its file, as the
    stdlib's ``WatchedFileHandler`` does: if the file was deleted or replaced
    (a user's ``rm``, a cleanup job) it opens the path again, and if it was
    truncated under it (``copytruncate``) it goes on in it; either way the
    session starts a new stream there, header and all metadata first, so that
    every later event reads.

    The path names a regular file (made if missing): a link, a FIFO, a device, a
    socket or a directory there is refused (``NotAFile``), never followed nor waited
    on (``open_log``), when the stream is made and when it opens the path again.
    Refused again, the writes fail (the session counts them lost, or holds them in
    its crash buffer) until the path is free or a regular file, saying why.
    """

    #: A switch of this stream is to a file the old one knows nothing of: no Summary.
    rotate_finishes = False

    def __init__(self, path: str | os.PathLike, *, mode: str = "ab",
                 fsync: bool | str = False) -> None:
        if mode not in ("ab", "wb", "xb"):
            raise ConfigurationError(f"mode must be 'ab', 'wb' or 'xb', not {mode!r}")
        self.fsync = stream_policy(fsync)
        self.requested = os.fspath(path)
        self._file, self.path = _open_own(self.requested, mode)
        self._refused: OSError | None = None   # why the path could not be opened again
        process.track(process.STREAM, self)
        self._size = 0                 # the file's size after our writes
        self.reopened = 0              # times the path was opened again
        self._writes = self._synced = 0    # writes, and writes synced
        self._opens = self._named = 0      # files opened, and those whose name is synced
        self._opened()

    def write(self, data: bytes) -> int:
        refused = self._refused
        if refused is not None:    # no file: why the path was refused (the session says it)
            raise refused.with_traceback(None)   # (raised again and again: no growing trace)
        n = self._file.write(data)
        self._size += n or 0
        self._writes += 1          # after the bytes: a sync that saw it covers them
        return n

    def position(self) -> tuple[int, int, int]:
        """(device, inode, size) of the file written (the crash buffer's record of a write)."""
        st = os.fstat(self._file.fileno())
        return st.st_dev, st.st_ino, st.st_size

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (recovery: a write a killed process left torn)."""
        os.ftruncate(self._file.fileno(), size)
        self._size = size

    def rotate_due(self, nbytes: int) -> bool:
        """True if the path no longer names the file we write, or it was truncated."""
        try:
            st = os.stat(self.path)
            mine = os.fstat(self._file.fileno())
        except (OSError, ValueError):   # gone, or closed (a forked child's inherited one,
            return True                 # or the path refused when it was opened again)
        return (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev) or mine.st_size < self._size

    def rotate(self) -> None:
        """Write to what the path names now (made again if it is gone). If it cannot be
        opened (``NotAFile``: a link or a FIFO put there), that error is raised, and again
        by each write, until a later ``rotate`` opens it."""
        try:
            self._close()
        finally:
            try:
                self._file, self.path = _open_own(self.path, "ab")
            except OSError as exc:   # a link or FIFO put there, the directory gone...
                self._refused = exc  # the writes fail until the next rotate opens it
                raise
            self._refused = None
            self.reopened += 1
            self._opened()

    def _opened(self) -> None:
        """A file was just opened: note its size, and sync its name if ``fsync`` is on."""
        st = os.fstat(self._file.fileno())
        self._size = st.st_size
        self._directory = os.path.dirname(os.path.abspath(self.path))
        self._opens += 1
        if self.fsync != NEVER:
            try:
                self._sync_name()
            except OSError:                # told by the next sync(), which tries again
                pass

    def _sync_name(self) -> None:
        """Sync the directory, unless the name of the file open now is durable already."""
        opens = self._opens
        if self._named != opens:
            sync_directory(self._directory)
            self._named = opens

    def flush(self) -> None:
        if self.fsync == FLUSH:
            self.sync()

    def sync(self) -> None:
        """Put what was written on stable storage (fsync), and the file's name if it is not
        yet; OSError if the device fails. Nothing to do if nothing was written since the
        last sync."""
        writes = self._writes
        if writes != self._synced:
            fsync_fd(self._file.fileno())
            self._synced = writes  # a write during the fsync is left to the next sync
        self._sync_name()

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._file.closed:
            return
        try:
            if self.fsync != NEVER:
                self.sync()
        except OSError as exc:    # closing never raises into the application
            report(f"blog: {self.path}: fsync at close failed: {exc}")
        finally:
            self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def _forked(self) -> None:
        """In a forked child (``blog.process``): close the file inherited. Its lock is shared
        with the parent (flock belongs to the open file), so an fd kept here would hold the
        parent's file locked after the parent let go of it (a copytruncate, basic_config
        again). The stream writes nowhere from now on (counted as lost); the default
        session gives the child a file of its own."""
        try:
            self._file.close()     # close, never unlock: the parent holds the lock still
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"FileOutputStream({self.path!r})"


#: How long a writer waits for a lock before it takes a file of its own: a child just
#: forked holds the parent's lock until its at-fork hook closes what it inherited.
LOCK_WAIT = 0.25


def _lock(fd: int, wait: float) -> None:
    """Take the exclusive flock of ``fd``, waiting up to ``wait`` seconds; BlockingIOError
    if another holds it. A file system without flock (some network mounts) is written
    unlocked, as is every file where there are no file locks (Windows: blogstore.posix)."""
    if not posix.LOCKS:
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            posix.fcntl.flock(fd, posix.fcntl.LOCK_EX | posix.fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
        except OSError:          # ENOLCK, EOPNOTSUPP...: no locks here
            return


def _open_free(path: str, mode: str) -> tuple[BinaryIO, str]:
    """This process's own file beside ``path``: ``app.pid<N>.blog``, or if another session
    of this process (or a process of the same pid, in another container) holds that,
    ``app.pid<N>-2.blog`` and on."""
    own = pid_path(path, os.getpid())
    root, ext = os.path.splitext(own)
    for k in range(1, 100):
        try:
            return _open_own(own if k == 1 else f"{root}-{k}{ext}", mode, fallback=False)
        except BlockingIOError:
            continue
    raise OSError(f"{path}: it and 99 files of this process beside it are being written")


#: What a file that is no regular file is, by its mode (``NotAFile`` says it).
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _not_a_file(path: str, mode: int) -> NotAFile:
    kind = next((what for test, what in _KINDS if test(mode)), "no regular file")
    return NotAFile(f"{path} is {kind}, not a regular file: refused as a log file (a link "
                    "is never followed, nothing is waited on; to write to anything else, "
                    "give an open stream as the output)")


def check_log_path(path: str) -> None:
    """NotAFile if something other than a regular file is at ``path`` (a link, not
    followed: ``lstat``); nothing if a regular file or nothing is there."""
    try:
        st = os.lstat(path)
    except OSError:            # nothing there (made by the open), or the open will say
        return
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(path, st.st_mode)


#: A log file is opened to append, made if missing, never through a link (a link put at
#: its name, dangling or not, is refused) and never waiting (a FIFO without a reader).
_LOG_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_APPEND | posix.O_NOFOLLOW | posix.O_NONBLOCK)


def open_log(path: str, exclusive: bool = False) -> int:
    """A descriptor of the regular file at ``path``, opened to append (made if missing;
    ``exclusive``: made now, else FileExistsError), blocking as any file's. Whatever else
    is there (a link, a FIFO, a device, a socket, a directory) is NotAFile, never followed,
    waited on, nor written: its kind is checked before the open and on what was opened."""
    check_log_path(path)       # a device is not even opened (opening some acts)
    try:
        fd = os.open(path, _LOG_FLAGS | (os.O_EXCL if exclusive else 0), 0o666)
    except OSError:            # ELOOP, ENXIO, EISDIR...: one put there since the check
        check_log_path(path)
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_file(path, st.st_mode)
        if posix.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_own(path: str, mode: str, fallback: bool = True) -> tuple[BinaryIO, str]:
    """Open ``path`` for appending (``open_log``) and lock it; if another writer holds it,
    this process's own file beside it (``fallback``), else BlockingIOError. Truncated
    ("wb") only once locked."""
    fd = open_log(path, exclusive=mode == "xb")
    try:
        try:   # only the asked-for path is worth a wait (a just-forked child's lock)
            _lock(fd, LOCK_WAIT if fallback else 0)
        except BlockingIOError:
            if not fallback:
                raise
            os.close(fd)
            fd = -1
            own = _open_free(path, mode)
            report(f"blog: {path} is being written by another process or session; "
                   f"this one writes {own[1]}")
            return own
        if mode == "wb":
            os.ftruncate(fd, 0)
        return open(fd, "ab", buffering=0), path
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


class MemoryOutputStream(io.BytesIO):
    """Keeps the log in memory; ``getvalue()`` gives the bytes (for tests and in-process
    readers)."""
