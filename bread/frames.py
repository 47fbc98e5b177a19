"""Bytes -> frames: checksum every frame, skip damage, resynchronize at the next good frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator, Union

from blogformat.frames import HEADER_SIZE, MAGIC, MAX_PAYLOAD, check_crc, parse_header

CHUNK = 1 << 16


@dataclass(frozen=True)
class Frame:
    """A frame whose checksum matched: where it starts, its kind and its payload."""

    offset: int
    kind: int
    payload: bytes
    flags: int = 0


@dataclass(frozen=True)
class Damage:
    """A byte range that was skipped: ``offset`` and ``length`` in the input, and why."""

    offset: int
    length: int
    reason: str
    source: str = ""

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return (f"{where}skipped {self.length} damaged byte(s) at offset {self.offset} "
                f"({self.reason})")


def iter_frames(f: BinaryIO, source: str = "") -> Iterator[Union[Frame, Damage]]:
    """Yield the good frames of ``f`` in order, and a Damage for each skipped range.

    Memory stays bounded by the largest frame accepted (``MAX_PAYLOAD``); a
    truncated tail (the writer died mid-write) comes out as a final Damage.
    """
    buf = bytearray()
    base = 0            # input offset of buf[0]
    pos = 0             # parse position in buf
    eof = False
    bad_at: int | None = None   # input offset where the current damaged range began
    reason = ""

    def fill(need: int) -> bool:
        """Make buf[pos:] hold at least ``need`` bytes; False at end of input."""
        nonlocal eof
        while len(buf) - pos < need and not eof:
            data = f.read(max(CHUNK, need - (len(buf) - pos)))
            if not data:
                eof = True
            else:
                buf.extend(data)
        return len(buf) - pos >= need

    while True:
        if pos > CHUNK:        # drop what was parsed; keep memory bounded
            del buf[:pos]
            base += pos
            pos = 0
        if not fill(HEADER_SIZE):
            break
        if buf[pos:pos + 4] != MAGIC:
            if bad_at is None:
                bad_at, reason = base + pos, "no frame marker"
            j = buf.find(MAGIC, pos + 1)
            if j < 0:
                keep = max(pos, len(buf) - 3)   # a marker may straddle the next read
                pos = keep
                if eof:
                    break
                fill(len(buf) - pos + 1)
                continue
            pos = j
            continue
        head = bytes(buf[pos:pos + HEADER_SIZE])
        fields = parse_header(head)
        if fields is None:
            # A false marker (or a damaged header): the header CRC says so at once.
            if bad_at is None:
                bad_at, reason = base + pos, "bad frame header"
            pos += 1
            continue
        kind, flags, length, crc = fields
        if length > MAX_PAYLOAD:
            if bad_at is None:
                bad_at, reason = base + pos, f"frame length {length} out of range"
            pos += 1
            continue
        if not fill(HEADER_SIZE + length):
            # A genuine header whose payload is cut short: the writer died mid-write.
            if bad_at is None:
                bad_at, reason = base + pos, "truncated frame at end of input"
            pos += 1
            continue
        payload = bytes(buf[pos + HEADER_SIZE:pos + HEADER_SIZE + length])
        if not check_crc(payload, crc):
            if bad_at is None:
                bad_at, reason = base + pos, "checksum mismatch"
            pos += 1
            continue
        if bad_at is not None:
            yield Damage(bad_at, base + pos - bad_at, reason, source)
            bad_at = None
        yield Frame(base + pos, kind, payload, flags)
        pos += HEADER_SIZE + length
    end = base + len(buf)
    if bad_at is None and pos < len(buf):
        bad_at, reason = base + pos, "truncated frame at end of input"
    if bad_at is not None:
        yield Damage(bad_at, end - bad_at, reason, source)
