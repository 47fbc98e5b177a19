"""Crash-buffer recovery (docs/format.md 15): it appends the events a killed process left
in its crash buffer to the log. ``basic_config`` and ``bread --recover`` run it.

A buffer is abandoned when its control file's lock can be taken (its process is
gone). Its events are those of each channel file's halves that no finished write
covers: a half taken by a consume whose write did not complete, and the half the
thread was appending to. They are appended to the log as a stream of their own:
the dead process's header and metadata, its events writer by writer in order, and a
Recovered entry saying how many (docs/format.md 15). A write the process was in the
middle of is cut off the log first (its events are among those recovered), so every
event is in the log once. Recovery records what it appends before it does, so that a
recovery killed midway is finished or redone by the next, never done twice.

Nothing a buffer holds is an instruction (docs/security.md): its directory is
checked first (``blogstore.crashlayout.open_directory``), the files recovery writes
are only the log's (``blogstore.recoverytarget``), every length read from a buffer is
checked against its file's real size (``blogstore.bufferread``). A buffer that cannot be
read whole is reported; what could be read is recovered and its files are moved aside
(``<name>.damaged``), so that it never stops the next start.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import msgpack

from blogformat.entries import (ClockSync, EnumMember, EventSource, RecordType, Recovered,
                                WriterProp, header_payload, metadata_frames)
from blogformat.frames import FRAME_HEADER, frame_bytes

from .bufferread import BufferDir, channel_names, events_frames, open_channel, read_metadata
from .crashlayout import CTL, CTL_MAGIC, PAGE, REC, VERSION, alive, open_directory
from .posix import fcntl
from .recoverytarget import (cut_partial_write, frame_at, on_stream_file, own_file,
                             settle_elsewhere, write_complete)


@dataclass(frozen=True)
class Recovery:
    """What one abandoned buffer gave: its process, and how many events were appended."""

    pid: int
    events: int
    path: str = ""        # the file they were appended to


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
    d = BufferDir(directory, dfd)
    done: list[Recovery] = []
    given: list[Any] = []

    def fallback(further: bool = False) -> Any:
        """The log; with ``further``, its next file (a set's), where it has one."""
        if not given:
            given.append(stream() if callable(stream) else stream)
        elif further and callable(stream):
            given[0] = stream()
        elif further and hasattr(given[0], "rotate"):
            given[0].rotate()     # (a RotatingFile: the next write opens its next file)
        return given[0]
    try:
        for meta in d.names(".meta"):
            try:
                fd = d.open(meta, os.O_RDWR)
            except OSError:
                continue          # a link, say: never followed
            try:
                r = _recover_locked(d, meta, fd, log_path, fallback,
                                    None if callable(stream) else getattr(stream, "rotate_bytes",
                                                                          None), warn)
            finally:
                os.close(fd)
            if r is not None:
                done.append(r)
        _sweep(d)
    finally:
        os.close(dfd)
    return done


def _recover_locked(d: BufferDir, meta: str, fd: int, log_path: str,
                    fallback: Callable[[bool], Any], rotate_bytes: Any,
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
    own = own_file(fd, log_path)
    r = None
    try:
        r = _recover_one(d, meta, fd, _Target(own, fallback, rotate_bytes), log_path, damage)
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


def _set_aside(d: BufferDir, meta: str, warn: Callable[[str], None], damage: list[str],
               r: Recovery | None) -> None:
    """A damaged buffer: its files (what is left of them) renamed ``<name>.damaged``, never
    read again by a recovery, and the damage reported."""
    moved = []
    for n in channel_names(d, meta) + [meta]:     # the control file last
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


def _sweep(d: BufferDir) -> None:
    """What no recovery will read: a control file whose process died while making it
    (``.new``, unlocked), and channel files whose control file is gone. A ``.new`` of a
    process that is alive is its writer's between making it and locking it: left alone
    (taking its lock first would not tell; deleted, the writer went on unprotected)."""
    for n in d.names(".new"):
        m = re.fullmatch(r"(\d+)-\d+\.new", n)
        if m is not None and alive(int(m[1])):
            continue
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


#: The recovery record's words after REC (docs/format.md 15): ``first``, ``count`` (the
#: events before the append in progress, and its own), ``done`` (events appended whole,
#: with DECIDED and WHOLE: what the first recovery found of the write the death tore).
FIRST, COUNT, DONE = 13, 14, 15
DECIDED, WHOLE = 1 << 63, 1 << 62
_EVENTS = WHOLE - 1


class _Control(NamedTuple):
    """What a buffer's control page records (docs/format.md 15): the writer's process, its
    write to the log (``written``, ``writing``: consumes; where: ``dev``, ``ino``, ``offset``,
    ``length``), and the recovery record (``rstate`` ... ``rlength``; ``first``, ``count``,
    ``done``)."""
    pid: int
    written: int
    writing: int
    dev: int
    ino: int
    offset: int
    length: int
    rstate: int
    rdev: int
    rino: int
    roffset: int
    rlength: int
    first: int
    count: int            # type: ignore[assignment]  # a field, hiding tuple.count
    done: int


class _Heading(NamedTuple):
    """What each stream recovery appends starts with: the header frame (``head``), then
    the clock sync and sources (``described``) and the names of the writers it holds."""
    head: bytes
    described: list[Any]
    names: dict[int, WriterProp]
    rotate: int | None      # the size past which a further file of the set takes the rest
    cap: int | None         # the most bytes of an events frame (None: no limit)


def _recover_one(d: BufferDir, meta: str, fd: int, target: "_Target", log_path: str,
                 damage: list[str]) -> Recovery | None:
    """Append what the buffer of control file ``meta`` (open as ``fd``) holds to the log:
    its control page read; a recovery that died before finished; the write its process
    died in cut off the log; then its events, after its metadata. Its files are removed
    where nothing was ``damage``d."""
    size = os.fstat(fd).st_size
    if size < PAGE:               # it is made whole (allocated) before it is named
        damage.append("shorter than its control page")
        return None
    events = 0
    with mmap.mmap(fd, PAGE) as ctl:
        c = _control(d, meta, ctl, damage)
        if c is None:
            return None
        chans = channel_names(d, meta)
        channels = [open_channel(d, n, damage) for n in chans]
        # What one consume could write at most: the events the channel files hold, the
        # metadata, and its frames' headers. A recorded write longer than that is not cut.
        limit = size + sum(ch.size for ch in channels if ch is not None) + (1 << 20)
        rstate, done = _finish_last_recovery(c, target.stream, log_path, limit)
        if rstate == 2:
            d.remove(chans + [meta])  # appended before; only the removal was left undone
            for ch in channels:
                if ch is not None:
                    ch.close()
            return None
        complete, writing = _cut_torn_write(c, done, target.stream, log_path, limit, damage)
        heading = _heading(fd, size, damage, target.rotate_bytes)
        drop = done & _EVENTS
        frames, writers = _read_events(channels, c.written, writing if complete else 0,
                                       drop, heading.cap, damage)
        events = sum(n for n, _ in frames)
        if frames:
            _append_recovered(target, ctl, heading, frames, writers, drop, complete, c.pid)
        if not damage:
            d.remove(chans + [meta])  # else they are moved aside whole (the caller)
    stream = target.stream
    path = getattr(stream, "current", None) or getattr(stream, "path", "")
    return Recovery(c.pid, events, str(path)) if events else None


def _control(d: BufferDir, meta: str, ctl: mmap.mmap, damage: list[str]) -> _Control | None:
    """The control page's record; None if it is not a crash buffer's (``damage`` says
    so). A buffer of another format version is left alone (``_LeaveAlone``)."""
    magic, version, pid, written, writing, dev, ino, offset, length = CTL.unpack_from(ctl, 0)
    if magic != CTL_MAGIC:
        damage.append("not a crash buffer control file")
        return None
    if version != VERSION:
        raise _LeaveAlone(f"blog: crash buffer {d.show(meta)} has format version "
                          f"{version}, this blog reads {VERSION}: left alone")
    rstate, rdev, rino, roffset, rlength = REC.unpack_from(ctl, 64)
    first, count, done = struct.unpack_from("<QQQ", ctl, 8 * FIRST)
    return _Control(pid, written, writing, dev, ino, offset, length, rstate, rdev, rino,
                    roffset, rlength, first, count, done)


def _finish_last_recovery(c: _Control, stream: Any, log_path: str,
                          limit: int) -> tuple[int, int]:
    """The recovery record's state and ``done`` word once a recovery that died appending
    (state 1) is settled: its append found whole, or its part cut off the log (state 2: all
    was appended, only the removal is left; else ``done`` counts the events appended)."""
    if c.rstate != 1:
        return c.rstate, c.done
    here = stream.position()
    if here[:2] == (c.rdev, c.rino):
        whole = here[2] >= c.roffset + c.rlength
        if (not whole and here[2] > c.roffset and c.rlength <= limit and on_stream_file(
                stream, c.rdev, c.rino, lambda fd: frame_at(fd, c.roffset))):
            stream.truncate(c.roffset)
    else:                 # appended elsewhere (a file of a set): settled there
        whole = settle_elsewhere(log_path, c.rdev, c.rino, c.roffset, c.rlength) == 2
    if c.count == 0:      # one append of all (a recovery before pieces): redone
        return (2 if whole else 0), c.done      # whole, as then, if cut off
    return c.rstate, (c.done & ~_EVENTS) | (c.first + c.count if whole else c.first)


def _cut_torn_write(c: _Control, done: int, stream: Any, log_path: str, limit: int,
                    damage: list[str]) -> tuple[bool, int]:
    """Whether the write the process died in is whole in the log (a torn one is cut off
    first), and the consume it was writing (0 if its record is not believed). A recovery
    that decided it before holds (the file has its appends now)."""
    if done & DECIDED:
        return bool(done & WHOLE), c.writing
    writing = c.writing
    if writing > c.written and c.length > limit:
        damage.append(f"a write of {c.length} bytes recorded, more than the buffer "
                      "holds: not cut")
        writing = 0
    cut_partial_write(stream, log_path, writing, c.written, c.dev, c.ino, c.offset, c.length,
                      c.pid)
    return write_complete(stream, log_path, writing, c.written, c.dev, c.ino, c.offset,
                          c.length), writing


def _heading(fd: int, size: int, damage: list[str], configured: Any) -> _Heading:
    """The buffer's metadata, as the stream recovery appends starts: its header (marked
    recovered), sources and writers' names; ``configured``: the ``rotate_bytes`` of the
    set recovery writes to."""
    header, entries = read_metadata(fd, size, damage)
    descriptor = dict(header.descriptor if header is not None else {})
    rotate = _rotate_bytes(descriptor.pop("rotate_bytes", None), configured)
    descriptor["recovered"] = True
    head = frame_bytes(FRAME_HEADER, header_payload(descriptor))
    names = {}
    sources = []
    sync = None
    for e in entries:
        if type(e) is EventSource or type(e) is RecordType or type(e) is EnumMember:
            sources.append(e)     # call sites, and the value types events hold
        elif type(e) is WriterProp:
            names[e.id] = e
        elif type(e) is ClockSync:
            sync = e
    described = ([sync] if sync is not None else []) + sources
    # Events frames that fit a file of the set beside what precedes them (at least one
    # event each): their size is the writers' too, at most.
    cap = None if rotate is None else max(1, rotate - len(head) - 128 - sum(
        map(len, metadata_frames(described + list(names.values())))))
    return _Heading(head, described, names, rotate, cap)


def _read_events(channels: list[Any], written: int, writing: int, drop: int, cap: int | None,
            damage: list[str]) -> tuple[list[tuple[int, bytes]], set[int]]:
    """The events frames of the channel files (each closed once read) that no finished
    write covers, after the first ``drop`` (recovered before), at most ``cap`` bytes each:
    (events, frame) each, and the writers they are of."""
    frames: list[tuple[int, bytes]] = []
    writers: set[int] = set()
    dropped = 0
    for c in channels:
        if c is None:
            continue
        try:
            for base, at, n, skip in c.runs(written, writing, damage):
                gone, got = events_frames(c, base, at, n, damage, skip, drop - dropped, cap)
                dropped += gone
                if got:
                    writers.add(c.writer)
                    frames.extend(got)
        finally:
            c.close()
    if dropped < drop:
        damage.append(f"{drop} event(s) recorded as recovered, the buffer holds {dropped}")
    return frames, writers


def _append_recovered(target: "_Target", ctl: mmap.mmap, heading: _Heading,
            frames: list[tuple[int, bytes]], writers: set[int], drop: int, complete: bool,
            pid: int) -> None:
    """Append ``frames`` after the heading (the names of ``writers`` only), the decision on
    the torn write recorded in the control page first."""
    head = heading.head + b"".join(metadata_frames(
        heading.described + [e for w, e in heading.names.items() if w in writers]))
    words = memoryview(ctl).cast("Q")     # single stores: never a zeroed field
    try:
        words[DONE] = drop | DECIDED | (WHOLE if complete else 0)
        words[8] = 0
        _append_pieces(target, words, head, frames, drop, pid, heading.rotate)
    finally:
        words.release()


def _rotate_bytes(recorded: Any, configured: Any) -> int | None:
    """The size past which recovery goes on in a further file of a set: the smaller of what
    the dead writer recorded in its buffer (its set's ``rotate_bytes``: input, believed
    from 4 KiB on) and the ``rotate_bytes`` of the set recovery writes to; None: no limit."""
    given = [max(n, PAGE) for n in (recorded, configured) if type(n) is int and n > 0]
    return min(given) if given else None


def _append_pieces(target: "_Target", words: memoryview, head: bytes,
                   frames: list[tuple[int, bytes]], done: int, pid: int,
                   rotate: int | None) -> None:
    """Append ``frames`` (events after the first ``done`` recovered) as streams of their own,
    each ``head`` (header, metadata), frames and a Recovered entry: one, or with ``rotate``
    as many as keep each file of the set within it, each in a further file. Each append is
    recorded before it is made and counted once it is whole (docs/format.md 15)."""
    k = 0
    while k < len(frames):
        end, size = k + 1, len(head) + len(frames[k][1]) + 64
        while rotate is not None and end < len(frames) and size + len(frames[end][1]) <= rotate:
            size += len(frames[end][1])
            end += 1
        if rotate is None:
            end = len(frames)
        n = sum(c for c, _ in frames[k:end])
        data = (head + b"".join(f for _, f in frames[k:end])
                + b"".join(metadata_frames([Recovered(n, pid, time.time_ns())])))
        stream = target.room(len(data), rotate)
        here = stream.position()
        words[FIRST], words[COUNT] = done, n
        words[9], words[10], words[11], words[12] = here[0], here[1], here[2], len(data)
        words[8] = 1
        try:
            _write_all(stream, data)
            if hasattr(stream, "sync"):
                stream.sync()
        except OSError:
            # A full disk, say: what was appended goes (the buffer stays, for a later
            # recovery), so that no later write follows a torn part of it.
            try:
                stream.truncate(here[2])
                words[8] = 0
            except OSError:
                pass
            raise
        done += n
        words[DONE] = (words[DONE] & ~_EVENTS) | done
        words[8] = 2 if end == len(frames) else 0
        k = end


class _Target:
    """Where one buffer's events go: the file its dead writer last wrote (``own``) if found,
    else the log (``log(False)``); ``room`` moves on to a further file of the set
    (``log(True)``) when a piece would take the current one beyond ``rotate_bytes``."""

    def __init__(self, own: Any, log: Callable[[bool], Any], configured: Any) -> None:
        self.own = own
        self._log = log
        self.stream = own if own is not None else log(False)
        self.rotate_bytes = configured

    def room(self, n: int, rotate: int | None) -> Any:
        """The stream to append ``n`` bytes to: the current one, unless it holds something
        already and would grow beyond ``rotate`` (a file holds at least one piece)."""
        seen = set()
        while rotate is not None:
            dev, ino, size = self.stream.position()
            if size == 0 or size + n <= rotate or (dev, ino) in seen:
                break             # (a log that has no further file: it takes the rest)
            seen.add((dev, ino))
            self.stream = self._log(self.stream is not self.own)
        return self.stream


def _write_all(stream: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = stream.write(view)
        if n is None:
            break
        if n <= 0:      # never spin on a stream that takes nothing: the buffer stays
            raise OSError("the log accepted no bytes")
        view = view[n:]
