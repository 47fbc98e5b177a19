"""Frames: the 20-byte checked header every part of a file starts with (docs/format.md section 2).

A file is a sequence of *frames*. Each frame is a 20-byte little-endian
header followed by a payload::

    magic       4 bytes  b"\\x9eBLG"
    kind        u8       FRAME_HEADER, FRAME_METADATA, FRAME_EVENTS or FRAME_COLUMNS
    flags       u8       0 (reserved)
    spare       u16      0 (reserved)
    length      u32      payload length in bytes
    payload_crc u32      CRC-32 of the payload
    header_crc  u32      CRC-32 of bytes 4..15 of this header

The header CRC lets a reader that resynchronizes after damage reject a false
frame marker at once, without reading the length it claims.

No payload holds the magic: one that would (a logged ``bytes`` value holding
a blog file, say) is escaped and flagged ``FLAG_ESCAPED``. So the magic marks
frame starts only, and a reader resynchronizing after damage can never take
a frame inside a payload for a real one (section 2.3).

Payloads are msgpack; ``entries`` defines what each kind of frame holds.
"""

from __future__ import annotations

import struct
import zlib

MAGIC = b"\x9eBLG"
FORMAT_VERSION = 1

FRAME_HEADER = 1
FRAME_METADATA = 2
FRAME_EVENTS = 3
FRAME_COLUMNS = 4   # the events of one call site as columns (blogformat.columnframes)
#: The kinds of frame that hold events, each payload starting as a batch header does
#: (its count, least and greatest clock at positions 2, 3 and 4: docs/format.md 5.1, 5.5).
EVENT_FRAMES = (FRAME_EVENTS, FRAME_COLUMNS)

#: Largest payload a writer produces and a reader accepts; a larger length is damage.
MAX_PAYLOAD = 64 * 1024 * 1024

#: flags bit: the payload is escaped (every 9e byte written as 9e 01), so it holds no magic.
FLAG_ESCAPED = 0x01
_ESC = b"\x9e"
_ESCAPED = b"\x9e\x01"

_HEAD = struct.Struct("<4sBBHIII")
HEADER_SIZE = _HEAD.size  # 20
_FIELDS = struct.Struct("<BBHII")


def frame(kind: int, payload: bytes, flags: int = 0) -> bytes:
    """The 20-byte header of a frame of ``kind`` holding ``payload`` (as stored)."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    fields = _FIELDS.pack(kind, flags, 0, len(payload), zlib.crc32(payload))
    return MAGIC + fields + struct.pack("<I", zlib.crc32(fields))


def frame_bytes(kind: int, payload: bytes) -> bytes:
    """A whole frame: header and payload, the payload escaped if it holds the magic."""
    if holds_magic(payload):
        payload = payload.replace(_ESC, _ESCAPED)
        return frame(kind, payload, FLAG_ESCAPED) + payload
    return frame(kind, payload) + payload


def holds_magic(payload: bytes) -> bool:
    """True if the magic occurs in ``payload`` (memchr for its first byte, which is rare
    in what blog writes; a general search where it is not)."""
    find = payload.find
    i = find(_ESC)
    budget = 16 + (len(payload) >> 8)
    while i >= 0:
        if payload[i + 1:i + 4] == b"BLG":
            return True
        budget -= 1
        if not budget:
            return MAGIC in payload
        i = find(_ESC, i + 1)
    return False


def unescape(flags: int, payload: bytes) -> tuple[int, bytes]:
    """(the flags left, the payload as written) of a stored payload: undoes FLAG_ESCAPED."""
    if flags & FLAG_ESCAPED:
        return flags & ~FLAG_ESCAPED, payload.replace(_ESCAPED, _ESC)
    return flags, payload


def parse_header(head: bytes) -> tuple[int, int, int, int] | None:
    """(kind, flags, length, payload crc) of a 20-byte frame header; None unless both
    the magic and the header CRC are right."""
    magic, kind, flags, _spare, length, payload_crc, header_crc = _HEAD.unpack(head)
    if magic != MAGIC or zlib.crc32(head[4:16]) != header_crc:
        return None
    return kind, flags, length, payload_crc


def check_crc(payload: bytes, crc: int) -> bool:
    """True if ``crc`` is the payload's CRC-32."""
    return zlib.crc32(payload) == crc
