"""RotatingFile: an OutputStream that writes a file set, switching files by size and time.

``RotatingFile("logs/app.blog", rotate_bytes=64 << 20, rotate_every="1h")``
writes ``logs/app.<UTC time>.pid<N>.blog`` files (``blogstore.fileset``).
The session fills a file up to ``rotate_bytes`` (``room``) and switches
(``rotate_due``/``rotate``), cutting a consume between files at event boundaries
(``blog.pipeline.parts``); no event is ever split across files. Each new file
starts with a header and all metadata, and each file closed cleanly ends with a
Summary entry. Closed
files are compressed and aged out by a ``Housekeeper`` on its own thread.

A file is opened by the first write after a switch (no empty files). The
file being written is held under an exclusive ``flock``: that is how
housekeeping (of this process or any other) knows not to touch it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Sequence

from blogstore.crashlayout import buffer_directory
from blogstore.fileset import file_name, open_regular, split_base
from blogstore.posix import fcntl

from .. import process
from .durability import FLUSH, NEVER, fsync_fd, stream_policy, sync_directory
from ..errors import ConfigurationError
from .compaction import Compaction, compaction_option
from .housekeeping import NEW, Housekeeper, Retention
from .shipping import OnClose
from ..report import report
from .schedule import Interval, Schedule, TimesOfDay


def _positive_int(value: Any, option: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{option} must be a positive int, not {value!r}")
    return value


def _positive_number(value: Any, option: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"{option} must be a positive number, not {value!r}")
    return float(value)


class RotatingFile:
    """Writes the file set of ``path``, one file at a time (docs/file-sets.md: rotation).

    Options (any combination; None is off):

    - ``rotate_bytes``: no file grows beyond this many bytes but by the Summary frame
      that closes it (a file holds at least one event, however large);
    - ``rotate_every``, ``rotate_at``, ``tz``: switch by time (``blog.files.schedule``);
    - ``keep_files``, ``keep_days``, ``keep_bytes``: retention of closed files;
    - ``compress``: gzip closed files in the background;
    - ``fsync``: ``True`` or ``"flush"``: fsync the file at every flush and when it is
      closed; ``"rotation"``: when it is closed (``blog.files.durability``); either way each
      file's name (the directory) once it is made; ``"never"``: a durable flush does both;
    - ``crash_dirs``: where crash buffers of the set are kept besides the default
      (``basic_config``'s ``crash_dir``): see ``blog.files.crashbuf``;
    - ``on_close``: called with the path of each closed file of the set once it is final
      (compressed, if it compresses), on the housekeeping thread, at least once
      (``blog.files.shipping``): to ship it elsewhere;
    - ``compact``: run ``bread compact`` on the directory as a child process, at most every
      hour, for closed files older than an age (``"1d"``) or as a ``Compaction`` says
      (``blog.files.compaction``); a forked child leaves it to its parent (its retention
      still waits while a compaction runs: ``Compaction.for_workers``).

    Bad options raise ValueError naming the option, before any file is
    opened; a directory that cannot be created or written raises OSError.
    """

    def __init__(self, path: str | os.PathLike, *, rotate_bytes: int | None = None,
                 rotate_every: Interval | None = None, rotate_at: TimesOfDay | None = None,
                 tz: str | None = None, keep_files: int | None = None,
                 keep_days: float | None = None,
                 keep_bytes: int | None = None, compress: bool = False,
                 fsync: bool | str = False, crash_dirs: Sequence[str] = (),
                 on_close: OnClose | None = None,
                 compact: Compaction | str | int | bool | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))   # a later chdir changes nothing
        self.directory, self.stem = split_base(self.path)
        self.rotate_bytes = _positive_int(rotate_bytes, "rotate_bytes")
        self.schedule = Schedule(rotate_every, rotate_at, tz)
        if tz is not None and not self.schedule.active:
            raise ConfigurationError(
                "tz is the zone of rotate_every and rotate_at: give one of them")
        self.retention = Retention(_positive_int(keep_files, "keep_files"),
                                   _positive_number(keep_days, "keep_days"),
                                   _positive_int(keep_bytes, "keep_bytes"))
        if not isinstance(compress, bool):
            raise ConfigurationError(f"compress must be True or False, not {compress!r}")
        self.compress = compress
        if on_close is not None and not callable(on_close):
            raise ConfigurationError(f"on_close must be a function of a path, not {on_close!r}")
        self.on_close = on_close
        self.compaction = compaction_option(compact)
        self.fsync = stream_policy(fsync)
        self.options: dict[str, Any] = dict(rotate_bytes=rotate_bytes, rotate_every=rotate_every,
                                            rotate_at=rotate_at, tz=tz, keep_files=keep_files,
                                            keep_days=keep_days, keep_bytes=keep_bytes,
                                            compress=compress, fsync=fsync,
                                            crash_dirs=tuple(crash_dirs), on_close=on_close,
                                            compact=None if self.compaction is None
                                            else self.compaction.for_workers())
        # Crash buffers of the set (beside its base name, and crash_dirs): housekeeping
        # leaves the files of a dead writer whose buffer waits for recovery as they are.
        self.crash_dirs = [buffer_directory(self.path), *crash_dirs]
        os.makedirs(self.directory, exist_ok=True)
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot write in the log directory {self.directory!r}")
        process.track(process.ROTATING, self)
        self.housekeeper = Housekeeper(self.directory, self.stem, compress=compress,
                                       retention=self.retention, buffers=self.crash_dirs,
                                       on_close=on_close, compaction=self.compaction)
        self.pid = os.getpid()
        self.current: str | None = None      # path of the file being written
        self.size = 0                        # bytes in it
        self.files = 0                       # files opened so far
        self._fd: int | None = None
        self._writes = self._synced = 0    # writes to the current file, and writes synced
        self._made = self._named = 0       # files made, and made before the last directory sync
        self._closed_unsynced: list[str] = []   # files closed unsynced (fsync "never")
        self._close_error: OSError | None = None   # an fsync at close that failed
        self._last_ms = 0
        self._switch_at: int | None = None
        self._closed = False
        self.housekeeper.sweep()             # what earlier runs left: retention at start

    # --- the OutputStream -------------------------------------------------

    def write(self, data: bytes) -> int:
        if self._fd is None:
            if self._closed:
                raise ValueError("write to a closed RotatingFile")
            self._open()     # files are opened by their first write: no empty files
        assert self._fd is not None
        n = os.write(self._fd, data)
        self._writes += 1          # after the bytes: a sync that saw it covers them
        self.size += n
        return n

    def position(self) -> tuple[int, int, int]:
        """(device, inode, size) of the file the next write goes to (opened now if none is:
        the crash buffer records where a write begins, and recovery appends here)."""
        if self._fd is None:
            if self._closed:
                raise ValueError("position of a closed RotatingFile")
            self._open()
        assert self._fd is not None
        st = os.fstat(self._fd)
        return st.st_dev, st.st_ino, st.st_size

    def truncate(self, size: int) -> None:
        """Cut the current file to ``size`` bytes (what a refused or killed write left)."""
        if self._fd is None:
            raise ValueError("no file is open")
        os.ftruncate(self._fd, size)
        self.size = size

    def flush(self) -> None:
        if self.fsync == FLUSH:
            self.sync()

    def sync(self) -> None:
        """Put what was written to the current file on stable storage (fsync); nothing to
        do if nothing was written since the last sync (a file closed is synced then)."""
        error, self._close_error = self._close_error, None
        if error is not None:      # a file closed unsynced: its data may be gone
            raise OSError(f"fsync of a file closed earlier failed: {error}")
        closed, self._closed_unsynced = self._closed_unsynced, []
        for path in closed:        # files closed since the last sync (rotation, "never")
            try:           # never through a link nor waiting on a FIFO put at its name
                f = open_regular(path)
            except OSError:        # compressed or removed by housekeeping meanwhile
                continue
            if f is not None:
                with f:
                    fsync_fd(f.fileno())
        writes = self._writes
        if self._fd is not None and writes != self._synced:
            fsync_fd(self._fd)
            self._synced = writes  # a write during the fsync is left to the next sync
        self._sync_names()

    def _sync_names(self) -> None:
        """Sync the directory if a file was made since the last time: their names are durable."""
        made = self._made
        if self._named != made:
            sync_directory(self.directory)
            self._named = made

    def close(self) -> None:
        """Close the current file (the session has written its Summary), then finish
        housekeeping."""
        if self._closed:
            return
        self._closed = True
        self._close_current()
        self.housekeeper.stop()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- switching (the session calls these between consumes) -------------

    def rotate_due(self, nbytes: int) -> bool:
        """True if the next ``nbytes`` should go to a new file (never while the current one
        is empty: a file holds at least one write, and a refused write that was cut off
        is tried again in the same file)."""
        if self._fd is None or self.size == 0:
            return False
        if self.rotate_bytes is not None and self.size + nbytes > self.rotate_bytes:
            return True
        return self._switch_at is not None and time.time_ns() >= self._switch_at

    def room(self) -> int | None:
        """Bytes the current file may still take before ``rotate_bytes`` (None: no size
        limit). The session fills a file up to it, cutting a consume between files at
        event boundaries (``blog.pipeline.parts``)."""
        if self.rotate_bytes is None:
            return None
        return self.rotate_bytes - (self.size if self._fd is not None else 0)

    def rotate(self) -> None:
        """Close the current file; the next write opens the next one.

        If it cannot be opened, that write raises (the session counts what it
        could not write) and the one after tries again.
        """
        self._close_current()

    def for_child(self) -> "RotatingFile":
        """The same options for a forked child: its own file set (its pid), never the parent's
        file."""
        self._closed = True   # the parent's file was let go of by _forked()
        return RotatingFile(self.path, **self.options)   # (compact: the parent's to run)

    def wait(self) -> None:
        """Return once the housekeeping handed over so far (compression, retention) is done."""
        self.housekeeper.wait()

    # --- files ---------------------------------------------------------------

    def _open(self) -> None:
        """Open the next file: made as ``NAME.new`` (not a name of the set), locked, then
        renamed, so that no housekeeper ever sees it unlocked."""
        os.makedirs(self.directory, exist_ok=True)   # made again if removed while running
        now = time.time_ns()
        ms = max(now // 1_000_000, self._last_ms + 1)   # names of one process never repeat
        while True:
            path = os.path.join(self.directory, file_name(self.stem, ms * 1_000_000, self.pid))
            if os.path.exists(path):
                ms += 1
                continue
            try:
                fd = os.open(path + NEW, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                             | getattr(os, "O_CLOEXEC", 0), 0o644)
            except FileExistsError:
                ms += 1
                continue
            break
        try:
            # Blocking: a housekeeper may be probing the lock this very moment (briefly).
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                os.link(path + NEW, path)   # never over another's file (a rename would be)
            except FileExistsError:         # the same pid in another pid namespace, say
                os.unlink(path + NEW)
                os.close(fd)
                self._last_ms = ms
                return self._open()
            os.unlink(path + NEW)
        except OSError:
            os.close(fd)
            raise
        self._last_ms = ms
        self._fd = fd
        self.current = path
        self.size = 0
        self.files += 1
        self._made += 1
        self._switch_at = self.schedule.next_after(now) if self.schedule.active else None
        if self.fsync != NEVER:    # its name (and NAME.new gone) on disk from the start
            try:
                self._sync_names()
            except OSError:        # told by the next sync() or at close, which try again
                pass

    def _close_current(self) -> None:
        fd, path = self._fd, self.current
        if fd is None or path is None:
            return
        self._fd = None
        try:
            if self.fsync != NEVER:
                if self._writes != self._synced:
                    fsync_fd(fd)
                self._sync_names()     # done when it was made, unless that failed
            elif self._writes != self._synced:   # a durable flush may still need it
                self._closed_unsynced = [*self._closed_unsynced[-63:], path]
        except OSError as exc:    # closing never raises into the application; sync() will
            report(f"blog: {path}: fsync at close failed: {exc}")
            self._close_error = exc
        finally:
            self._writes = self._synced = 0
            os.close(fd)    # releases the lock: the file is closed for housekeeping
        self.housekeeper.closed(os.path.basename(path))

    def _forked(self) -> None:
        """In a forked child: the parent's file is not ours (nor its lock); a write opens
        a file of the child's own (its pid), with housekeeping of its own (compaction
        left to the parent: its children would compact the same set)."""
        if self._fd is not None:
            os.close(self._fd)    # our copy only: the parent keeps its file and its lock
            self._fd = None
        self.pid = os.getpid()
        self.housekeeper = Housekeeper(self.directory, self.stem, compress=self.compress,
                                       retention=self.retention, buffers=self.crash_dirs,
                                       on_close=self.on_close,
                                       compaction=self.options["compact"])

    def __repr__(self) -> str:
        return f"RotatingFile({self.path!r}, current={self.current!r})"
