"""Bytes -> frames: checksum every frame, skip damage, resynchronize at the next good frame."""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING, final
from blogformat.frames import (EVENT_FRAMES, FLAG_ESCAPED, FRAME_EVENTS, HEADER_SIZE, MAGIC,
                               MAX_PAYLOAD, check_crc, parse_header, unescape)
from blogformat.eventframes import complete_events
from blogformat.plainclass import Frozen

from .errors import NotABlogFile

if TYPE_CHECKING:
    from typing import BinaryIO, Iterator, Union

__all__ = ["Damage", "Frame", "iter_frames", "span_frames"]

CHUNK = 1 << 16
#: Bytes of an events payload that hold its batch header (five ints take at most 46).
BATCH_HEAD = 64


@final
class Frame(Frozen):
    """A frame whose checksum matched: where it starts, its kind and its payload (unescaped,
    docs/format.md 2.3); ``size`` is the frame's length in the input, header included.

    Not ``verified``: an events frame cut short by the end of the input, its checksum
    unchecked; its payload is the events wholly present (``complete_events``, 5.4)."""

    offset: int
    kind: int
    payload: bytes
    flags: int = 0
    size: int = 0
    verified: bool = True

    def __init__(self, offset: int, kind: int, payload: bytes, flags: int = 0, size: int = 0,
                 verified: bool = True) -> None:   # (one per frame: not the generic one)
        self.__dict__.update(offset=offset, kind=kind, payload=payload, flags=flags, size=size,
                             verified=verified)


@final
class Damage(Frozen):
    """A byte range that was skipped: ``offset`` and ``length`` in the input, and why. A
    ``length`` of 0 marks a wrong entry or value inside a frame that was read."""

    offset: int
    length: int
    reason: str
    source: str = ""
    #: The events read, unverified, from the frame at ``offset`` (cut short by the end of
    #: the input, docs/format.md 5.4): its Events have ``verified`` False.
    unverified: int = 0

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        if not self.length:   # nothing skipped: something in a frame read was wrong
            return f"{where}damage at offset {self.offset} ({self.reason})"
        return (f"{where}skipped {self.length} damaged byte(s) at offset {self.offset} "
                f"({self.reason})")


def check_begins(head: bytes, source: str) -> None:
    """Raise NotABlogFile if ``head``, the first bytes of an input (up to ``CHUNK``), is not
    how a blog file begins: neither a frame marker (or the start of one: an input empty so
    far is not refused) nor, after damage, a good frame header. A blog file damaged later,
    or at its very start, is read and its damage reported: only another kind is refused."""
    if not head or MAGIC.startswith(head[:len(MAGIC)]):
        return
    i = head.find(MAGIC)
    while 0 <= i <= len(head) - HEADER_SIZE:
        if parse_header(head[i:i + HEADER_SIZE]) is not None:
            return
        i = head.find(MAGIC, i + 1)
    raise NotABlogFile(f"{source}: not a blog log file (its first {len(head):,} bytes hold no "
                       "blog frame)")


def iter_frames(f: BinaryIO, source: str = "", verified_only: bool = False,
                blog_only: bool = False) -> Iterator[Union[Frame, Damage]]:
    """Yield the good frames of ``f`` in order, and a Damage for each skipped range.

    Memory stays bounded by the largest frame accepted (``MAX_PAYLOAD``). An
    events frame cut short by the end of the input (the writer died mid-write)
    gives its complete events as a Frame not ``verified``, and a Damage (length
    0) that says how many; with ``verified_only``, it is a Damage only.

    Time is linear in the input, whatever it holds (docs/format.md section 10):
    a claimed payload that holds no frame marker is checksummed, and a failed one
    is then passed over by the scan for the next marker; one that holds a marker
    (writers escape every payload that would) is checksummed only while the
    checks that failed on such claims have cost less than twice the input so far.

    ``blog_only``: an input that does not begin as a blog file raises NotABlogFile
    (``check_begins``) instead of being one damaged range.
    """
    return _Scan(f, source, verified_only).frames(blog_only)


class _Scan:
    """One scan of an input: a window on it (``buf``, ``base`` the input offset of
    ``buf[0]``, ``pos`` the parse position) and the damaged range open, if any
    (``bad_at``, ``reason``). Each step looks at the claim at ``pos``: a frame, or one
    byte more of damage (``bad``)."""

    def __init__(self, f: BinaryIO, source: str, verified_only: bool) -> None:
        self.f = f
        self.source = source
        self.verified_only = verified_only
        self.buf = bytearray()
        self.base = 0
        self.pos = 0
        self.eof = False
        self.bad_at: int | None = None
        self.reason = ""
        self.wasted = 0     # payload bytes checksummed in vain over claims holding a marker

    def frames(self, blog_only: bool) -> Iterator[Union[Frame, Damage]]:
        if blog_only:
            self.check_begins()
        while True:
            if self.pos > CHUNK:        # drop what was parsed; keep memory bounded
                del self.buf[:self.pos]
                self.base += self.pos
                self.pos = 0
            if not self.fill(HEADER_SIZE):
                break
            buf, pos = self.buf, self.pos
            if buf[pos:pos + 4] != MAGIC:
                if not self.resync():
                    break
                continue
            fields = parse_header(bytes(buf[pos:pos + HEADER_SIZE]))
            if fields is None:
                # A false marker (or a damaged header): the header CRC says so at once.
                self.bad("bad frame header")
                continue
            kind, flags, length, crc = fields
            if length > MAX_PAYLOAD:
                self.bad(f"frame length {length} out of range")
                continue
            if not self.fill(HEADER_SIZE + length):
                torn = self.torn(kind, flags)
                if torn is None:
                    self.bad("truncated frame at end of input")
                    continue
                damage = self.closed()
                if damage is not None:
                    yield damage
                yield from torn
                self.pos = len(self.buf)
                continue
            payload = self.payload(length, crc)
            if payload is None:
                continue
            damage = self.closed()
            if damage is not None:
                yield damage
            if flags & FLAG_ESCAPED:
                flags, payload = unescape(flags, payload)
            yield Frame(self.base + pos, kind, payload, flags, HEADER_SIZE + length)
            self.pos = pos + HEADER_SIZE + length
        buf, pos = self.buf, self.pos
        if self.bad_at is None and pos < len(buf):
            self.bad_at, self.reason = self.base + pos, "truncated frame at end of input"
        if self.bad_at is not None:
            end = self.base + len(buf)
            yield Damage(self.bad_at, end - self.bad_at, self.reason, self.source)

    def fill(self, need: int) -> bool:
        """Make ``buf[pos:]`` hold at least ``need`` bytes; False at the end of the input."""
        buf = self.buf
        while len(buf) - self.pos < need and not self.eof:
            data = self.f.read(max(CHUNK, need - (len(buf) - self.pos)))
            if not data:
                self.eof = True
            else:
                buf.extend(data)
        return len(buf) - self.pos >= need

    def check_begins(self) -> None:
        """NotABlogFile unless the input begins as a blog file does: its first bytes, then
        (not a marker: rare) up to ``CHUNK`` bytes (``check_begins``)."""
        if self.fill(len(MAGIC)) and not MAGIC.startswith(bytes(self.buf[:len(MAGIC)])):
            self.fill(CHUNK)
        check_begins(bytes(self.buf[:CHUNK]), self.source)

    def bad(self, reason: str) -> None:
        """The claim at ``pos`` is no frame: damage from there (unless a damaged range is
        open already), and the scan goes on one byte further."""
        if self.bad_at is None:
            self.bad_at, self.reason = self.base + self.pos, reason
        self.pos += 1

    def closed(self) -> Damage | None:
        """The damaged range open, ended by a good frame at ``pos``; None if none is."""
        if self.bad_at is None:
            return None
        damage = Damage(self.bad_at, self.base + self.pos - self.bad_at, self.reason,
                        self.source)
        self.bad_at = None
        return damage

    def resync(self) -> bool:
        """No frame marker at ``pos``: damage from there to the next marker, ``pos`` at it,
        or at the window's last 3 bytes (a marker may straddle the next read) with more
        read; False at the end of the input."""
        if self.bad_at is None:
            self.bad_at, self.reason = self.base + self.pos, "no frame marker"
        buf = self.buf
        j = buf.find(MAGIC, self.pos + 1)
        if j >= 0:
            self.pos = j
            return True
        self.pos = max(self.pos, len(buf) - 3)
        if self.eof:
            return False
        self.fill(len(buf) - self.pos + 1)
        return True

    def torn(self, kind: int, flags: int) -> tuple[Damage, Frame] | None:
        """A genuine header at ``pos`` whose payload the input cuts short (the writer died
        mid-write, or the input is a copy taken meanwhile): an events frame gives the events
        wholly present, unverified (5.4), up to a marker, should another frame begin there;
        None for any other (or with ``verified_only``, or a compressed input that failed)."""
        if kind != FRAME_EVENTS or self.verified_only or not clean_end(self.f):
            return None
        return torn_frame(self.base + self.pos, kind, flags,
                          self.buf[self.pos + HEADER_SIZE:], self.source)

    def payload(self, length: int, crc: int) -> bytes | None:
        """The payload of the claim at ``pos`` (its header good, its ``length`` bytes in the
        window) if its checksum matches; else None, and the claim is damage (``bad``).

        A claim that holds no frame marker is checksummed; one that holds a marker (writers
        escape every payload that would; only an older writer's payload with a logged marker
        in it can) only while the checks that failed on such claims have cost less than twice
        the input so far (time linear in the input, docs/format.md section 10). A clean file
        never needs to know: the marker is looked for after damage only."""
        buf, start = self.buf, self.pos + HEADER_SIZE
        marked = None
        if self.bad_at is not None or self.wasted:
            marked = buf.find(MAGIC, start, start + length) >= 0
        if marked and self.wasted + length > 2 * (self.base + start + length):
            self.bad("marker inside the claimed payload")
            return None
        payload = bytes(buf[start:start + length])
        if check_crc(payload, crc):
            return payload
        if marked is None:
            marked = buf.find(MAGIC, start, start + length) >= 0
        if marked:
            self.wasted += length
        self.bad("checksum mismatch")
        return None


def torn_frame(offset: int, kind: int, flags: int, stored: bytes | bytearray, source: str
               ) -> tuple[Damage, Frame] | None:
    """An events frame whose payload the input cuts short after ``stored`` bytes: the Damage
    that reports it, then its complete events as a Frame not ``verified``; None if not even
    one event is whole, or if a frame marker follows in those bytes (a torn frame with
    another stream after it is damage as a whole, however long the other stream)."""
    if MAGIC in stored:
        return None
    stored = bytes(stored)
    flags, payload = unescape(flags, stored)
    got = complete_events(payload)
    if got is None or got[1] == 0:
        return None
    payload, count = got
    return (Damage(offset, 0, f"frame cut short by the end of input: {count} complete "
                              "event(s) read unverified, the rest lost", source, count),
            Frame(offset, kind, payload, flags, HEADER_SIZE + len(stored), verified=False))


def clean_end(f: BinaryIO) -> bool:
    """True unless the input says its end is not the end of its data: a compressed input
    whose decompression failed gives out bytes nothing has checked, so a frame it cuts
    short is damage, never unverified events."""
    return getattr(f, "error", None) is None


class Skim:
    """The frames of a seekable input, read as an index needs them: metadata and header
    frames whole and checked, events frames only the first bytes of their payload (the
    batch header), the rest seeked over. Frame boundaries are trusted by each header's own
    CRC; an events payload is checked by the second pass (a damaged one's events are
    skipped there, so a wrong least time from it can only hold more back). Anything
    amiss ends the skim with ``clean`` False: the caller reads the input through
    ``iter_frames`` instead."""

    def __init__(self, f: BinaryIO, start: int) -> None:
        self.f = f
        self.start = start
        self.clean = True

    def frames(self) -> Iterator[Frame]:
        f, start = self.f, self.start
        end = f.seek(0, 2)
        pos = f.seek(start)
        while pos < end:
            head = f.read(HEADER_SIZE) if end - pos >= HEADER_SIZE else b""
            fields = parse_header(head) if len(head) == HEADER_SIZE else None   # (a failed read)
            if fields is None or fields[2] > MAX_PAYLOAD or pos + HEADER_SIZE + fields[2] > end:
                self.clean = False
                return
            kind, flags, length, crc = fields
            if kind == FRAME_EVENTS:   # an escaped head may take twice the bytes
                most = 2 * BATCH_HEAD if flags & FLAG_ESCAPED else BATCH_HEAD
                payload = f.read(min(length, most))
                f.seek(pos + HEADER_SIZE + length)
            else:
                payload = f.read(length)
                if len(payload) != length or not check_crc(payload, crc):
                    self.clean = False
                    return
            if flags & FLAG_ESCAPED:
                flags, payload = unescape(flags, payload)
            yield Frame(pos - start, kind, payload, flags, HEADER_SIZE + length)
            pos += HEADER_SIZE + length


def span_frames(f: BinaryIO, start: int, end: int, source: str = "",
                verified_only: bool = False) -> Iterator[Union[Frame, Damage]]:
    """The frames of one part of a seekable input: the header and metadata frames before
    ``start`` (what its events may refer to), then every frame, and every damaged range,
    that begins in ``[start, end)``. Parts that tile a file give each of its events
    once: a frame belongs to the part where it begins, wherever it ends. Offsets are
    from the start of the input (``f`` at 0). Reading stops with the last frame that
    begins in the range (the next one's header is not read); an input that plans its
    reads (``bread.inputs.objectstore.RangedFile``) is told the range, to fetch it in large
    blocks and nothing ahead past its end."""
    plan = getattr(f, "read_range", None)
    if plan is not None:
        plan(start, end)
    skim = Skim(f, 0)
    before: list[Frame] = []
    first: int | None = None
    for fr in skim.frames():
        if fr.offset >= start:
            first = fr.offset
            break
        if fr.kind not in EVENT_FRAMES:
            before.append(fr)
    if skim.clean:
        yield from before
        if first is None:
            return
        f.seek(first)
        for x in iter_frames(f, source, verified_only):
            at = x.offset + first
            if at >= end:
                return
            yield x._replace(offset=at)
            if at + (x.size if type(x) is Frame else x.length) >= end:
                return    # what follows begins at or past the end: not read
        return
    f.seek(0)    # damage before start: every frame read and checked from the beginning
    for x in iter_frames(f, source, verified_only):
        if x.offset >= end:
            return
        if x.offset >= start or (type(x) is Frame and x.kind not in EVENT_FRAMES):
            yield x
