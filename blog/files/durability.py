"""Durability: when what was written is put on stable storage (fsync), and durable flushes.

A consume hands events to the OS (``write``): from then on they survive the
process (a crash, kill -9), not the machine (power loss, a kernel panic). Only
what was fsynced survives that. The policy, ``fsync=`` of ``basic_config``:

- ``False`` or ``"never"``: the OS writes back when it likes (the default);
- ``"rotation"``: each file is fsynced when it is closed (rotation, shutdown);
- ``True`` or ``"flush"``: after every consume (every ``flush_interval``);
- a number of seconds: group commit, at most that often while there are new
  writes, and at each close.

Whatever the policy, ``blog.flush(durable=True)`` returns, and the future of
``blog.flush_async(durable=True)`` completes, once everything logged before
it is on stable storage. Concurrent durable flushes share one fsync
(``GroupSync``), as a database's group commit does.

A file's data is found after a power loss only if its name is on disk too: a
new file's directory is synced once, when the file is made if the policy is
not "never", else by the first durable flush that covers it (``sync_directory``);
never again for that file, so a flush costs no more than the data's fsync.
"""

from __future__ import annotations

import errno
import math
import os
import threading

from blogformat.typinglite import TYPE_CHECKING
from blogstore import posix

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from typing import Any, Callable

NEVER, ROTATION, FLUSH = "never", "rotation", "flush"


def fsync_policy(value: Any) -> tuple[str, float | None]:
    """``fsync=`` as (what a stream does: NEVER, ROTATION or FLUSH, the group-commit interval
    in seconds or None); ValueError for anything else."""
    if value is False or value == NEVER:
        return NEVER, None
    if value is True or value == FLUSH:
        return FLUSH, None
    if value == ROTATION:
        return ROTATION, None
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0):
        return ROTATION, float(value)
    raise ConfigurationError(f"fsync must be False, 'never', 'rotation', True, 'flush' or a "
                             f"positive number of seconds, not {value!r}")


def stream_policy(value: Any) -> str:
    """A stream's ``fsync=``: NEVER, ROTATION or FLUSH (True is FLUSH, False NEVER)."""
    policy, interval = fsync_policy(value)
    if interval is not None:
        raise ConfigurationError("a stream's fsync is False, 'never', 'rotation', True or 'flush'; "
                                 "an interval is the consumer's (basic_config(fsync=seconds))")
    return policy


def sync_stream(stream: Any) -> None:
    """Put what was written to ``stream`` on stable storage: its ``sync()``, else an fsync of
    its ``fileno()``. A stream with neither (memory), or one that cannot be synced (a pipe,
    a terminal), has nothing more to do. Raises OSError if the device fails."""
    sync = getattr(stream, "sync", None)
    if sync is not None:
        sync()
        return
    fileno = getattr(stream, "fileno", None)
    if fileno is None:
        return
    try:
        fd = fileno()
    except (OSError, ValueError, AttributeError):   # io.BytesIO: no descriptor
        return
    fsync_fd(fd)


def fsync_fd(fd: int) -> None:
    """fsync ``fd``; a descriptor that cannot be synced (EINVAL: a pipe, a terminal) is fine."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):
            raise


def sync_directory(directory: str) -> None:
    """fsync ``directory``: the names made, linked or removed in it are on stable storage.
    A file system whose directories cannot be synced (EINVAL) is fine; OSError if the
    directory cannot be opened or the device fails. Nothing to do where a directory cannot
    be opened (Windows: no ``O_DIRECTORY``)."""
    if not posix.O_DIRECTORY:
        return
    fd = os.open(directory, os.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


class GroupSync:
    """Calls ``sync`` so that each caller returns once a sync that began after its call has
    ended, and callers that arrive while one runs share the next one (group commit).

    Once a sync has failed, every later call raises too: after a failed fsync, a later
    one may succeed though the data it should have written is gone (Linux drops dirty
    pages on a write-back error), so nothing written before is known to be durable. A
    new output (``basic_config`` again) starts a new GroupSync.
    """

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._cv = threading.Condition(threading.Lock())
        self._started = 0          # syncs begun
        self._done = 0             # the number of the last sync ended
        self._failed = 0           # the number of the last sync that failed
        self._error: BaseException | None = None
        self._running = False

    @property
    def failed(self) -> bool:
        """True once a sync has failed (every later call raises)."""
        return self._failed > 0

    def sync(self) -> None:
        """Return once a sync begun after this call has ended; OSError if any sync failed."""
        with self._cv:
            want = self._started + 1
            while self._done < want:
                if self._running:
                    self._cv.wait()
                    continue
                self._running = True
                self._started += 1
                mine = self._started
                self._cv.release()
                error: BaseException | None = None
                try:
                    self._sync()
                except Exception as exc:
                    error = exc
                finally:
                    self._cv.acquire()
                    self._running = False
                    self._done = mine
                    if error is not None:
                        self._failed, self._error = mine, error
                    self._cv.notify_all()
            if self._failed:
                raise OSError(f"blog: the output could not be synced: {self._error}") \
                    from self._error
