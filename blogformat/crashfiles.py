"""The crash buffer's files (docs/format.md 15): their layout, and recovery, which appends
the events a killed process left in its crash buffer to the log.

The writer (``blog.crashbuf``) makes the files; ``basic_config`` and ``bread --recover``
recover them. Recovery:

A buffer is abandoned when its control file's lock can be taken (its process is
gone). Its events are those of each channel file's halves that no finished write
covers: a half taken by a consume whose write did not complete, and the half the
thread was appending to. They are appended to the log as a stream of their own:
the dead process's header and metadata, its events writer by writer in order, and a
Recovered entry saying how many (docs/format.md 15). A write the process was in the
middle of is cut off the log first (its events are among those recovered), so every
event is in the log once. Recovery records what it appends before it does, so that a
recovery killed midway is finished or redone by the next, never done twice.

Nothing a buffer holds is an instruction (docs/guide.md, "Security"). A buffer directory
is used only if it is a real directory owned by this process's user and not writable by
group or others (``check_directory``). The log path, device, inode, offsets and lengths a
control file records are only compared with what the caller names: recovery appends to,
or cuts, only the caller's log or a file of that log (its base name, a process's own
``.pid<N>`` file, or the set's pattern) in the log's own directory, a regular file owned
by this user, opened without following a link, whose device and inode are the recorded
ones. Every length read from a buffer is checked against its file's real size. A buffer
that cannot be read whole is reported; what could be read is recovered and its files are
moved aside (``<name>.damaged``), so that it never stops the next start.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import hashlib
import mmap
import os
import re
import stat
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable

import msgpack

from .errors import UnsafeBufferDirectory
from .entries import (BatchHeader, ClockSync, EnumMember, EventSource, FileHeader, Metadata,
                      RecordType, Recovered, WriterProp, decode_header,
                      decode_metadata_frame, header_payload, metadata_frames)
from .fileset import parse, split_base
from .frames import (FRAME_EVENTS, FRAME_HEADER, FRAME_METADATA, HEADER_SIZE, MAGIC,
                     MAX_PAYLOAD, check_crc, frame_bytes, parse_header, unescape)
from .values import UNPACK_OPTIONS

PAGE = 4096
CTL_MAGIC = b"BLOGBUF1"
CHAN_MAGIC = b"BLOGCHN1"
VERSION = 1
#: Control page: magic, version, pid, written, writing, dev, ino, offset, length, then the
#: recovery record (state, dev, ino, offset, length), then the log path (u16 length, UTF-8).
CTL = struct.Struct("<8sIIQQQQQQ")           # 64 bytes at 0
REC = struct.Struct("<QQQQQ")                # 40 bytes at 64
PATH_AT = 128
MAX_PATH = PAGE - PATH_AT - 2
#: Channel file header: magic, writer id, half size, active half; each half: len, base, seq.
CHAN = struct.Struct("<8sQQI4x")             # 32 bytes at 0
HALF = struct.Struct("<QqQ")                 # 24 bytes at 32 + 24 * half
HALF_AT = 32
#: Room beyond the channel capacity in each half: an event a full channel takes anyway.
SLACK = 64 << 10


def buffer_directory(log_path: str, crash_dir: str | None = None) -> str:
    """Where the crash buffers of ``log_path``'s writers live: ``.<name>.buffers`` beside it
    (a process's own ``app.pid<N>.blog`` shares ``app.blog``'s: the next start of
    ``app.blog`` recovers it), or under ``crash_dir`` with a hash of the log's path in the
    name (two logs of one name in different directories never share one)."""
    log_path = os.path.abspath(log_path)
    base = _PID_FILE.sub("", os.path.basename(log_path))
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


#: A process's own file beside a plain output (blogformat.fileset.pid_path): its part.
_PID_FILE = re.compile(r"\.pid\d+(?:-\d+)?(?=\.[^.]*$|$)")

#: Events per recovered frame at most (a half holds a channel's worth).
_FRAME_EVENTS = 65536


@dataclass(frozen=True)
class Recovery:
    """What one abandoned buffer gave: its process, and how many events were appended."""

    pid: int
    events: int
    path: str = ""        # the file they were appended to


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


def _stderr(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode("utf-8", "backslashreplace"))
    except OSError:
        pass


def recover(directory: str, stream: Any, log_path: str | None = None,
            warn: Callable[[str], None] = _stderr) -> list[Recovery]:
    """Append the events of every abandoned buffer in ``directory`` to the file its process
    was writing when it died (it is no longer locked: a file of a rotated set, say), or
    else to ``stream``; then remove the buffer. ``stream`` is the log, locked by the
    caller and not yet written by its session: ``write(bytes)``, ``position()`` (device,
    inode, size), ``truncate(size)`` and ``sync()``, as ``blog.FileOutputStream``; a
    callable gives such a stream when it is first needed (and is not called otherwise).

    ``log_path`` is the log the caller configured (by default the stream's): the only
    directory and names recovery writes to, whatever a buffer records. A buffer directory
    that is not this user's own raises UnsafeBufferDirectory before anything is read; a
    damaged buffer is reported through ``warn``, what it held readable recovered, and its
    files moved aside."""
    if log_path is None:
        log_path = getattr(stream, "requested", None) or getattr(stream, "path")
    log_path = os.path.abspath(os.fspath(log_path))
    dfd = open_directory(directory)
    if dfd is None:
        return []
    d = _BufferDir(directory, dfd)
    done: list[Recovery] = []
    given: list[Any] = []

    def fallback() -> Any:
        if not given:
            given.append(stream() if callable(stream) else stream)
        return given[0]
    try:
        for meta in d.names(".meta"):
            try:
                fd = d.open(meta, os.O_RDWR)
            except OSError:
                continue          # a link, say: never followed
            try:
                r = _recover_locked(d, meta, fd, log_path, fallback, warn)
            finally:
                os.close(fd)
            if r is not None:
                done.append(r)
        _sweep(d)
    finally:
        os.close(dfd)
    return done


class _BufferDir:
    """The buffer directory's descriptor (``open_directory``), through which recovery
    lists, opens, renames and removes its files; ``path`` only names them in messages."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    def names(self, suffix: str) -> list[str]:
        return sorted(n for n in os.listdir(self.fd) if n.endswith(suffix))

    def open(self, name: str, flags: int) -> int:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                       dir_fd=self.fd)

    def remove(self, names: list[str]) -> None:
        for n in names:
            try:
                os.unlink(n, dir_fd=self.fd)
            except OSError:
                pass

    def show(self, name: str) -> str:
        return os.path.join(self.path, name)


def _recover_locked(d: _BufferDir, meta: str, fd: int, log_path: str,
                    fallback: Callable[[], Any],
                    warn: Callable[[str], None]) -> Recovery | None:
    """Recover the buffer whose control file ``meta`` is open as ``fd``, if its lock can be
    taken (its process is gone) and it is this user's regular file."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None               # its process lives (or another recovers it now)
    st = os.fstat(fd)
    if st.st_nlink == 0:
        return None               # removed meanwhile by whoever held it
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        warn(f"blog: crash buffer {d.show(meta)} is not a regular file of this user: left "
             "alone")
        return None
    damage: list[str] = []
    own = _own_file(fd, log_path)
    r = None
    try:
        r = _recover_one(d, meta, fd, own if own is not None else fallback(), log_path,
                         damage)
    except _LeaveAlone as exc:
        warn(str(exc))
        return None
    except (ValueError, TypeError, struct.error, OverflowError, MemoryError,
            IndexError, KeyError, msgpack.UnpackException) as exc:
        damage.append(f"{type(exc).__name__}: {exc}")
    finally:
        if own is not None:
            own.close()
    if damage:
        _set_aside(d, meta, warn, damage, r)
    return r


class _LeaveAlone(Exception):
    """A buffer recovery must not judge (a newer format): reported, its files untouched."""


def _set_aside(d: _BufferDir, meta: str, warn: Callable[[str], None], damage: list[str],
               r: Recovery | None) -> None:
    """A damaged buffer: its files (what is left of them) renamed ``<name>.damaged``, never
    read again by a recovery, and the damage reported."""
    moved = []
    for n in _chans(d, meta) + [meta]:     # the control file last
        try:
            os.rename(n, n + ".damaged", src_dir_fd=d.fd, dst_dir_fd=d.fd)
            moved.append(n + ".damaged")
        except OSError:
            pass
    got = f"{r.events} readable event(s) recovered into {r.path}" if r is not None else \
        "no readable event recovered"
    kept = f"; kept as {', '.join(moved)}" if moved else ""
    warn(f"blog: crash buffer {d.show(meta)} is damaged ({'; '.join(damage)[:500]}): "
         f"{got}{kept}")


def _chans(d: _BufferDir, meta: str) -> list[str]:
    """The channel files of the buffer whose control file is ``meta``."""
    prefix = meta[:-len(".meta")] + "-"
    return [n for n in d.names(".chan") if n.startswith(prefix)]


def _own_file(fd: int, log_path: str) -> LockedFile | None:
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
        except BlockingIOError:   # a live writer has it, or a housekeeper's probe of its
            time.sleep(0.005)     # lock (is_locked) holds it for an instant: tried again
        except OSError:
            return None
    else:
        return None               # a live writer has it (this caller's stream, say)
    st = os.fstat(f.fd)
    if (st.st_dev, st.st_ino) != (dev, ino):
        f.close()                 # renamed over meanwhile
        return None
    return f


def _log_file(log_path: str, name: str, pid: int | None) -> bool:
    """True if ``name`` (in ``log_path``'s directory) is a file of that log: its base name
    (``log_path`` without a process's ``.pid<N>`` part), a process's own
    ``NAME.pid<N>[-k].blog`` beside it, or a file of its set; of process ``pid`` if given
    (never a compressed one). An inode number alone is not enough: a file system gives a
    freed one to the next new file."""
    base = _PID_FILE.sub("", os.path.basename(log_path))
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


def _settle_elsewhere(log_path: str, dev: int, ino: int, offset: int, length: int) -> int:
    """A recovery that died appending ``length`` bytes at ``offset`` of file (dev, ino),
    not the stream recovery writes now: 2 if that append is whole there, else 0 once its
    part is cut off there (or the file is gone: nothing of it is left to read twice)."""
    f = _open_member(log_path, dev, ino, None)
    if f is None:
        return 0                  # gone, not the log's, or a live writer has it
    try:
        size = os.fstat(f.fd).st_size
        if size >= offset + length:
            f.sync()
            return 2
        if size > offset and _frame_at(f.fd, offset):
            f.truncate(offset)
        return 0
    finally:
        f.close()


def _frame_at(fd: int, offset: int) -> bool:
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


def pending_pids(directory: str) -> set[int]:
    """The processes whose buffers in ``directory`` may wait for recovery: their process is
    gone. Their files must be left as they are (not compressed) until recovery has cut
    and appended them. A pid that is alive (or taken again) counts as live. No lock is
    probed: a probe could make a recovery that runs at this moment take the buffer for a
    live one."""
    out: set[int] = set()
    for meta in glob.glob(os.path.join(glob.escape(directory), "*.meta")):
        m = re.fullmatch(r"(\d+)-\d+\.meta", os.path.basename(meta))
        if m is not None and not alive(int(m[1])):
            out.add(int(m[1]))
    return out


def alive(pid: int) -> bool:
    """True if process ``pid`` exists (or may: one not ours to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True     # exists, not ours to signal
    return True


def _sweep(d: _BufferDir) -> None:
    """What no recovery will read: a control file whose process died while making it
    (``.new``, unlocked), and channel files whose control file is gone."""
    for n in d.names(".new"):
        try:
            fd = d.open(n, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            d.remove([n])
        except OSError:
            pass
        finally:
            os.close(fd)
    present = set(os.listdir(d.fd))
    for n in d.names(".chan"):
        prefix = n[:-len(".chan")].rsplit("-", 1)[0]
        if prefix + ".meta" not in present and prefix + ".new" not in present:
            d.remove([n])


def _recover_one(d: _BufferDir, meta: str, fd: int, stream: Any, log_path: str,
                 damage: list[str]) -> Recovery | None:
    size = os.fstat(fd).st_size
    if size < PAGE:               # it is made whole (allocated) before it is named
        damage.append("shorter than its control page")
        return None
    with mmap.mmap(fd, PAGE) as ctl:
        magic, version, pid, written, writing, dev, ino, offset, length = CTL.unpack_from(ctl, 0)
        if magic != CTL_MAGIC:
            damage.append("not a crash buffer control file")
            return None
        if version != VERSION:
            raise _LeaveAlone(f"blog: crash buffer {d.show(meta)} has format version "
                              f"{version}, this blog reads {VERSION}: left alone")
        rstate, rdev, rino, roffset, rlength = REC.unpack_from(ctl, 64)
        chans = _chans(d, meta)
        channels = [_channel(d, n, damage) for n in chans]
        # What one consume could write at most: the events the channel files hold, the
        # metadata, and its frames' headers. A recorded write longer than that is not cut.
        limit = size + sum(c.size for c in channels if c is not None) + (1 << 20)
        here = stream.position()
        if rstate == 1 and here[:2] != (rdev, rino):
            # The recovery that died appended elsewhere (a new file of a set): finished
            # there, or its part cut off there, before it is redone here.
            rstate = _settle_elsewhere(log_path, rdev, rino, roffset, rlength)
        if rstate == 2 or (rstate == 1 and here[:2] == (rdev, rino)
                           and here[2] >= roffset + rlength):
            d.remove(chans + [meta])  # appended before; only the removal was left undone
            return None
        if (rstate == 1 and here[:2] == (rdev, rino) and here[2] > roffset
                and rlength <= limit
                and _on_stream_file(stream, rdev, rino, lambda fd: _frame_at(fd, roffset))):
            stream.truncate(roffset)  # a recovery killed midway: its part goes, redone below
        if writing > written and length > limit:
            damage.append(f"a write of {length} bytes recorded, more than the buffer holds: "
                          "not cut")
            writing = 0
        _cut_partial_write(stream, log_path, writing, written, dev, ino, offset, length, pid)
        complete = _write_complete(stream, log_path, writing, written, dev, ino, offset, length)
        header, entries = _metadata(fd, size, damage)
        batches: list[bytes] = []
        writers: set[int] = set()
        events = 0
        for c in channels:
            if c is None:
                continue
            try:
                for base, at, n in c.runs(written, writing if complete else 0, damage):
                    got, frames = _frames(c, base, at, n, damage)
                    if got:
                        writers.add(c.writer)
                        events += got
                        batches.extend(frames)
            finally:
                c.close()
        if events:
            names = {}
            sources = []
            sync = None
            for e in entries:
                if type(e) is EventSource or type(e) is RecordType or type(e) is EnumMember:
                    sources.append(e)     # call sites, and the value types events hold
                elif type(e) is WriterProp and e.id in writers:
                    names[e.id] = e
                elif type(e) is ClockSync:
                    sync = e
            meta_entries = ([sync] if sync is not None else []) + sources + list(names.values())
            descriptor = dict(header.descriptor if header is not None else {}, recovered=True)
            data = (frame_bytes(FRAME_HEADER, header_payload(descriptor))
                    + b"".join(metadata_frames(meta_entries)) + b"".join(batches)
                    + b"".join(metadata_frames([Recovered(events, pid, time.time_ns())])))
            here = stream.position()
            words = memoryview(ctl).cast("Q")     # single stores: never a zeroed field
            try:
                words[9], words[10], words[11], words[12] = here[0], here[1], here[2], len(data)
                words[8] = 1
                try:
                    _write_all(stream, data)
                    if hasattr(stream, "sync"):
                        stream.sync()
                except OSError:
                    # A full disk, say: what was appended goes (the buffer stays, for a
                    # later recovery), so that no later write follows a torn part of it.
                    try:
                        stream.truncate(here[2])
                        words[8] = 0
                    except OSError:
                        pass
                    raise
                words[8] = 2
            finally:
                words.release()
        if not damage:
            d.remove(chans + [meta])  # else they are moved aside whole (the caller)
    path = getattr(stream, "current", None) or getattr(stream, "path", "")
    return Recovery(pid, events, str(path)) if events else None


def _write_all(stream: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = stream.write(view)
        if n is None:
            break
        if n <= 0:      # never spin on a stream that takes nothing: the buffer stays
            raise OSError("the log accepted no bytes")
        view = view[n:]


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


def _write_complete(stream: Any, path: str, writing: int, written: int, dev: int, ino: int,
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


def _cut_partial_write(stream: Any, path: str, writing: int, written: int, dev: int, ino: int,
                       offset: int, length: int, pid: int) -> None:
    """A write cut short by the kill: its bytes go (its events are recovered whole)."""
    if writing == 0 or writing <= written:
        return
    here = stream.position()
    if here[:2] == (dev, ino):
        if offset < here[2] < offset + length and _on_stream_file(
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
    return pos > offset or _frame_at(fd, offset)


def _on_stream_file(stream: Any, dev: int, ino: int, check: Callable[[int], bool]) -> bool:
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


def _metadata(fd: int, size: int,
              damage: list[str]) -> tuple[FileHeader | None, list[Metadata]]:
    """The header and the metadata entries the dead process recorded (whole frames only,
    each read by itself: a length is believed only as far as the file goes)."""
    pos, header = PAGE, None
    entries: list[Metadata] = []
    while pos + HEADER_SIZE <= size:
        fields = parse_header(os.pread(fd, HEADER_SIZE, pos))
        if fields is None or fields[2] > MAX_PAYLOAD or pos + HEADER_SIZE + fields[2] > size:
            break             # killed mid-append: what follows was never described
        kind, flags, n, crc = fields
        payload = os.pread(fd, n, pos + HEADER_SIZE)
        if len(payload) != n or not check_crc(payload, crc):
            break
        flags, payload = unescape(flags, payload)
        try:
            if kind == FRAME_HEADER and header is None:
                header = decode_header(payload, pos)
            elif kind == FRAME_METADATA:
                entries.extend(decode_metadata_frame(payload, pos))
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            damage.append(f"metadata at {pos}: {type(exc).__name__}: {exc}")
            break
        pos += HEADER_SIZE + n
    return header, entries


class _Channel:
    """A channel file, open: its writer, its halves (``runs``), its size on disk."""

    def __init__(self, name: str, fd: int, size: int, writer: int, half: int, active: int,
                 halves: list[tuple[int, int, int]]) -> None:
        self.name, self.fd, self.size = name, fd, size
        self.writer, self.half, self.active, self.halves = writer, half, active, halves

    def runs(self, written: int, skip: int, damage: list[str]) -> list[tuple[int, int, int]]:
        """What must be recovered: (base, offset, length) per half, the taken one (unless
        consume ``skip`` wrote it whole) before the active one. A length is believed only
        as far as the file goes (else: damage)."""
        taken = sorted((seq, h) for h, (_, _, seq) in enumerate(self.halves)
                       if seq > written and seq != skip)
        order = [h for _, h in taken]
        if self.halves[self.active][2] == 0:
            order.append(self.active)
        out = []
        for h in order:
            n, base, _ = self.halves[h]
            if n == 0:
                continue
            if n > self.half or PAGE + h * self.half + n > self.size:
                damage.append(f"{self.name}: half {h} says {n} bytes, its file holds fewer")
                continue
            out.append((base, PAGE + h * self.half, n))
        return out

    def close(self) -> None:
        os.close(self.fd)


def _channel(d: _BufferDir, name: str, damage: list[str]) -> _Channel | None:
    """The channel file ``name``, open, if it is this user's regular file with a channel
    header (else: damage); None also for one whose process died while making it."""
    try:
        fd = d.open(name, os.O_RDONLY)
    except OSError as exc:
        damage.append(f"{name}: {exc.strerror or exc}")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            damage.append(f"{name}: not a regular file of this user")
        else:
            head = os.pread(fd, PAGE, 0)
            if len(head) < PAGE or head[:len(CHAN_MAGIC)] == bytes(len(CHAN_MAGIC)):
                pass          # killed while it was made: nothing was ever mirrored there
            else:
                magic, wid, half, active = CHAN.unpack_from(head, 0)
                if magic != CHAN_MAGIC or active not in (0, 1) or not 0 < half <= st.st_size:
                    damage.append(f"{name}: not a channel file (its header)")
                else:
                    halves = [HALF.unpack_from(head, HALF_AT + HALF.size * h) for h in (0, 1)]
                    c = _Channel(name, fd, st.st_size, wid, half, active, halves)
                    fd = -1
                    return c
    except (OSError, struct.error) as exc:
        damage.append(f"{name}: {exc}")
    finally:
        if fd >= 0:
            os.close(fd)
    return None


#: Bytes of a half read at once: a half is read in pieces, so that what recovery holds is
#: what it could decode (a sparse file's claimed gigabytes of zeros end it at once).
_CHUNK = 1 << 20
#: The clocks a batch header holds (u64; deltas may make a crafted one leave it).
_CLOCK_MIN, _CLOCK_END = -(1 << 63), 1 << 64


def _frames(c: _Channel, base: int, at: int, length: int,
            damage: list[str]) -> tuple[int, list[bytes]]:
    """Events frames of the whole events in ``length`` bytes at ``at`` of channel ``c``
    (deltas from ``base``): (count, frames). Bytes after the last whole event are damage
    (a half's length covers whole events)."""
    u = msgpack.Unpacker(None, max_buffer_size=max(length, 1), **UNPACK_OPTIONS)
    frames: list[bytes] = []
    pending = bytearray()     # the raw bytes of the frame being gathered, and beyond
    total = fed = 0
    start = end = 0
    clock = first = base
    lo = hi = 0       # of the events counted (count > 0)
    count = 0
    while True:
        try:
            ev = u.unpack()
        except msgpack.OutOfData:
            if fed < length:
                chunk = os.pread(c.fd, min(_CHUNK, length - fed), at + fed)
                if chunk:
                    fed += len(chunk)
                    u.feed(chunk)
                    pending += chunk
                    continue
            ev = None
        except Exception:     # the length is stored after the bytes: never a torn event
            ev = None
        if (type(ev) is not list or len(ev) < 3 or type(ev[1]) is not int
                or not _CLOCK_MIN <= clock + ev[1] < _CLOCK_END):
            if end < length:
                damage.append(f"{c.name}: {length - end} byte(s) after event "
                              f"{total + count} unreadable")
            break
        clock += ev[1]
        lo = clock if count == 0 or clock < lo else lo
        hi = clock if count == 0 or clock > hi else hi
        count += 1
        end = u.tell()
        if count == _FRAME_EVENTS:
            frames.append(frame_bytes(FRAME_EVENTS, BatchHeader(c.writer, first, count, lo,
                                                                hi).encode()
                                      + bytes(pending[:end - start])))
            del pending[:end - start]
            total += count
            start, first, count, lo, hi = end, clock, 0, 0, 0
    if count:
        frames.append(frame_bytes(FRAME_EVENTS, BatchHeader(c.writer, first, count, lo,
                                                            hi).encode()
                                  + bytes(pending[:end - start])))
        total += count
    return total, frames
