"""Reading a dead process's crash buffer (docs/format.md 15): its directory's files, the
header and metadata it recorded, and its channels' halves as events frames.

Every length read from a buffer is checked against its file's real size; what does not
hold is said in the caller's ``damage`` list, and what could be read is returned.
"""

from __future__ import annotations

import os
import stat
import struct

import msgpack

from blogformat.entries import FileHeader, Metadata, decode_header, decode_metadata_frame
from blogformat.eventframes import BatchHeader
from blogformat.frames import (FRAME_EVENTS, FRAME_HEADER, FRAME_METADATA, HEADER_SIZE,
                               MAX_PAYLOAD, check_crc, frame_bytes, parse_header, unescape)
from blogformat.values import UNPACK_OPTIONS

from .crashlayout import CHAN, CHAN_MAGIC, HALF, HALF_AT, PAGE, SPLIT, SPLIT_AT


#: Events per recovered frame at most (a half holds a channel's worth).
_FRAME_EVENTS = 65536


class BufferDir:
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


def channel_names(d: BufferDir, meta: str) -> list[str]:
    """The channel files of the buffer whose control file is ``meta``."""
    prefix = meta[:-len(".meta")] + "-"
    return [n for n in d.names(".chan") if n.startswith(prefix)]


def read_metadata(fd: int, size: int,
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


class Channel:
    """A channel file, open: its writer, its halves (``runs``), its size on disk."""

    def __init__(self, name: str, fd: int, size: int, writer: int, half: int, active: int,
                 halves: list[tuple[int, int, int]], splits: list[tuple[int, int]]) -> None:
        self.name, self.fd, self.size = name, fd, size
        self.writer, self.half, self.active, self.halves = writer, half, active, halves
        self.splits = splits      # each half's (from, rest): a consume cut between files

    def runs(self, written: int, ended: int,
             damage: list[str]) -> list[tuple[int, int, int, int]]:
        """What must be recovered: (base, offset, length, skip) per half, the taken one
        before the active one; the first ``skip`` bytes' events are in files already (their
        clocks still count). Of a half taken by consume ``ended``, whose write in
        progress reached its file whole, what that write left out (``rest``); of another
        taken half, what is not in a file yet (from ``from`` on). A length is believed
        only as far as the file goes (else: damage)."""
        taken = sorted((seq, h) for h, (_, _, seq) in enumerate(self.halves) if seq > written)
        order = [h for _, h in taken]
        if self.halves[self.active][2] == 0:
            order.append(self.active)
        out = []
        for h in order:
            n, base, seq = self.halves[h]
            done, rest = self.splits[h] if seq else (0, 0)
            ending = seq and seq == ended     # its write in progress ended: rest counts
            overlap = ending and done + rest > n   # (that write would end before it began)
            if done > n or rest > n or overlap:
                damage.append(f"{self.name}: half {h} says {done} bytes written and {rest} "
                              f"left of {n}" + (" (they overlap)" if overlap else "")
                              + ": recovered whole")
                skip = 0
            else:
                skip = n - rest if ending else done
            if skip >= n:
                continue
            if n > self.half or PAGE + h * self.half + n > self.size:
                damage.append(f"{self.name}: half {h} says {n} bytes, its file holds fewer")
                continue
            out.append((base, PAGE + h * self.half, n, skip))
        return out

    def close(self) -> None:
        os.close(self.fd)


def open_channel(d: BufferDir, name: str, damage: list[str]) -> Channel | None:
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
                    splits = [SPLIT.unpack_from(head, SPLIT_AT + SPLIT.size * h) for h in (0, 1)]
                    c = Channel(name, fd, st.st_size, wid, half, active, halves, splits)
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


def events_frames(c: Channel, base: int, at: int, length: int, damage: list[str],
                  skip: int = 0, drop: int = 0,
                  max_bytes: int | None = None) -> tuple[int, list[tuple[int, bytes]]]:
    """Events frames of the whole events in ``length`` bytes at ``at`` of channel ``c``
    (deltas from ``base``) but those within the first ``skip`` bytes and the ``drop``
    events after them (their clocks count): (events dropped, [(events, frame)]). A frame
    holds at most ``max_bytes`` of events (at least one). Bytes after the last whole event
    are damage (a half's length covers whole events), and so is a ``skip`` within an
    event (which is then recovered)."""
    u = msgpack.Unpacker(None, max_buffer_size=max(length, 1), **UNPACK_OPTIONS)
    frames: list[tuple[int, bytes]] = []
    pending = bytearray()     # the raw bytes of the frame being gathered, and beyond
    total = fed = dropped = 0
    start = end = 0
    clock = first = base
    lo = hi = 0       # of the events counted (count > 0)
    count = 0

    def frame() -> None:
        frames.append((count, frame_bytes(FRAME_EVENTS, BatchHeader(c.writer, first, count, lo,
                                                                    hi).encode()
                                          + bytes(pending[:end - start]))))
        del pending[:end - start]
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
                              f"{total + count + dropped} unreadable")
            break
        clock += ev[1]
        if u.tell() <= skip or (dropped < drop and start >= skip):
            # in a file already: its clock counts, the event does not
            dropped += u.tell() > skip
            del pending[:u.tell() - start]
            start = end = u.tell()
            first = clock
            continue
        if start < skip:
            damage.append(f"{c.name}: {skip} byte(s) written said, within an event")
            skip = 0
        if count and max_bytes is not None and u.tell() - start > max_bytes:
            frame()           # full: this event starts the next frame
            total += count
            start, first, count = end, clock - ev[1], 0
        lo = clock if count == 0 or clock < lo else lo
        hi = clock if count == 0 or clock > hi else hi
        count += 1
        end = u.tell()
        if count == _FRAME_EVENTS:
            frame()
            total += count
            start, first, count, lo, hi = end, clock, 0, 0, 0
    if count:
        frame()
    return dropped, frames
