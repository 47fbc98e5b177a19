"""File sets: the names of the files one configuration writes (docs/format.md section 13).

A rotating output ``logs/app.blog`` writes ``logs/app.<UTC time>.pid<N>.blog``::

    app.2026-11-26T10-00-00.123.pid4242.blog      being written, or closed
    app.2026-11-26T10-00-00.123.pid4242.blog.gz   closed and compressed

The time is when the file was opened, UTC, to the millisecond; one process
never gives two of its files the same time, so names sort in the order the
files were written, and files of several processes interleave by time.
``blog`` writes these names and ``bread`` and ``blog``'s retention parse them;
a name that does not parse is never touched by retention.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import stat

from blogformat.lazy import pattern
from blogformat.typinglite import TYPE_CHECKING, NamedTuple

from . import posix

if TYPE_CHECKING:
    from typing import BinaryIO

SUFFIX = ".blog"
#: The names of log files a reader takes from a directory: a set's files, compressed or not.
LOG_SUFFIXES = (SUFFIX, SUFFIX + ".gz")
COMPRESSED = ".gz"
#: A set's file being made (``NAME.blog.new``): linked to its name once its maker locked it.
NEW = ".new"

#: A set's file name (compiled on first use: a plain file's output never parses one).
_NAME = (r"^(?P<stem>.+)\.(?P<t>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3})"
         r"\.pid(?P<pid>\d+)(?P<suffix>\.blog)(?P<gz>\.gz)?$")


class SetFile(NamedTuple):
    """One file of a set, as its name says."""

    name: str          # the base name
    stem: str          # "app"
    time_ns: int       # when it was opened (ms resolution), ns since the epoch
    pid: int
    compressed: bool

    @property
    def plain_name(self) -> str:
        """The name of the uncompressed file."""
        return self.name[:-len(COMPRESSED)] if self.compressed else self.name


def split_base(path: str | os.PathLike) -> tuple[str, str]:
    """``logs/app.blog`` -> (``logs``, ``app``): the directory and the stem of a set."""
    path = os.fspath(path)
    directory, base = os.path.split(path)
    if base.endswith(SUFFIX):
        base = base[:-len(SUFFIX)]
    if not base:
        raise ValueError(f"{path!r} names no file")
    return directory or ".", base


def file_name(stem: str, time_ns: int, pid: int) -> str:
    """The name of a set's file opened at ``time_ns`` by process ``pid``."""
    ms = time_ns // 1_000_000
    t = _dt.datetime.fromtimestamp(ms // 1000, _dt.timezone.utc)
    return f"{stem}.{t:%Y-%m-%dT%H-%M-%S}.{ms % 1000:03d}.pid{pid}{SUFFIX}"


def pid_path(path: str, pid: int) -> str:
    """One process's own file beside a plain output: ``app.blog`` -> ``app.pid<N>.blog``.

    Used by a forked child, and by a process that finds ``path`` being written
    by another (each process writes its own file; streams never interleave).
    """
    root, ext = os.path.splitext(path)
    return f"{root}.pid{pid}{ext or SUFFIX}"


def parse(name: str) -> SetFile | None:
    """A file name of a set, or None if it is not one."""
    m = pattern(_NAME).match(name)
    if m is None:
        return None
    seconds = name_seconds(m["t"])
    if seconds is None:
        return None
    ns = (seconds * 1000 + int(m["t"][20:])) * 1_000_000
    return SetFile(name, m["stem"], ns, int(m["pid"]), m["gz"] is not None)


def name_seconds(t: str) -> int | None:
    """The UTC time ``YYYY-MM-DDTHH-MM-SS`` that starts ``t`` (a name's), in seconds since
    the epoch; None if it is no date."""
    try:     # no strptime: it imports a module lazily, which can deadlock after fork
        d = _dt.datetime(int(t[0:4]), int(t[5:7]), int(t[8:10]), int(t[11:13]),
                         int(t[14:16]), int(t[17:19]), tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return int(d.timestamp())


def members(directory: str, stem: str) -> list[SetFile]:
    """The files of the set ``stem`` in ``directory``, in time order (plain before compressed)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [f for f in map(parse, names) if f is not None and f.stem == stem]
    return sorted(found, key=lambda f: (f.time_ns, f.pid, f.compressed))


def is_locked(path: str) -> bool:
    """True if a process holds the exclusive ``flock`` a writer keeps on the file it writes
    (or the file cannot be opened to check); False if it is not there."""
    try:   # never through a link, never waiting on a FIFO: not a regular file is "held"
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        posix.fcntl.flock(fd, posix.fcntl.LOCK_EX | posix.fcntl.LOCK_NB)   # NeedsPosix: none
    except OSError:
        return True
    finally:
        os.close(fd)   # closing our descriptor releases what we took
    return False


def unlink_unheld(path: str) -> bool:
    """Delete ``path`` if no process holds its lock (a writer, a compression, a compaction,
    a recovery), holding it while the name goes so that none takes the file meanwhile; True
    if deleted. A link, a FIFO or another file put at the name since it was listed is left."""
    try:
        fd = os.open(path, os.O_RDONLY | posix.O_CLOEXEC | posix.O_NOFOLLOW | posix.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        posix.fcntl.flock(fd, posix.fcntl.LOCK_EX | posix.fcntl.LOCK_NB)   # NeedsPosix: none
        now = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def is_bare_name(name: object) -> bool:
    """True if ``name`` can only name an entry of the directory itself: a non-empty str with
    no ``/`` and no NUL, neither ``.`` nor ``..`` (a name read from a file is input)."""
    return (type(name) is str and name not in ("", ".", "..") and "/" not in name
            and "\0" not in name)


def is_regular(directory: str, name: str) -> bool:
    """True if ``directory/name`` is a regular file, not through a link (``lstat``)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(directory, name)).st_mode)
    except OSError:
        return False


def open_regular(path: str) -> BinaryIO | None:
    """The file at ``path`` opened to read if it is a regular file; None if something else
    is there (a link, never followed; a FIFO, never waited on: ``O_NOFOLLOW |
    O_NONBLOCK``); FileNotFoundError if nothing is."""
    try:
        fd = os.open(path, os.O_RDONLY | posix.O_CLOEXEC | posix.O_NOFOLLOW | posix.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):   # a link (EMLINK: the BSDs)
            return None
        raise
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | posix.O_NOFOLLOW | posix.O_CLOEXEC


def create_new(path: str, mode: int = 0o666) -> int:
    """``path`` made anew and opened for writing (``O_EXCL | O_NOFOLLOW``): never a link
    followed, never a file truncated. Whatever had the name (a stale temporary file, a
    planted link) is unlinked first: unlinking a link removes the link, never its target."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.open(path, _NEW_FILE, mode)


def create_temp(path: str, mode: int = 0o666) -> tuple[int, str]:
    """A new temporary file beside ``path``, ``<path>.<random>.tmp``, made (``O_EXCL |
    O_NOFOLLOW``) and opened for writing: its descriptor and path. A name already taken (a
    stale file, a planted link or directory) is passed over, never followed nor blocking."""
    while True:
        tmp = f"{path}.{os.urandom(4).hex()}.tmp"
        try:
            return os.open(tmp, _NEW_FILE, mode), tmp
        except FileExistsError:
            continue


def replace_durably(directory: str, name: str, data: bytes) -> None:
    """Replace ``directory/name`` by ``data`` crash-safely: a new temporary file
    (``create_temp``: never through a link planted at its name), fsync, rename, fsync the
    directory. A reader sees the old file or the new one, whole."""
    path = os.path.join(directory, name)
    fd, tmp = create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def open_lock(path: str) -> int:
    """A lock file of the directory opened (made if missing) for ``flock``/``lockf``, never
    through a link: a link planted at its name is removed (it is no lock of ours)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    os.unlink(path)
    return os.open(path, flags, 0o644)


def fsync_dir(directory: str) -> None:
    """Make the directory's entries (a rename, an unlink) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: str, removed: list[str]) -> None:
    """Delete a file if it is there, noting it in ``removed`` (recovery's steps)."""
    try:
        os.unlink(path)
        removed.append(path)
    except FileNotFoundError:
        pass
