"""Frames: the 20-byte checked header every part of a file starts with (docs/format.md section 2).

A file is a sequence of *frames*. Each frame is a 20-byte little-endian
header followed by a payload::

    magic       4 bytes  b"\\x9eBLG"
    kind        u8       FRAME_HEADER, FRAME_METADATA or FRAME_EVENTS
    flags       u8       0 (reserved)
    spare       u16      0 (reserved)
    length      u32      payload length in bytes
    payload_crc u32      CRC-32 of the payload
    header_crc  u32      CRC-32 of bytes 4..15 of this header

The header CRC lets a reader that resynchronizes after damage reject a false
frame marker at once, without reading the length it claims.

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

#: Largest payload a writer produces and a reader accepts; a larger length is damage.
MAX_PAYLOAD = 64 * 1024 * 1024

_HEAD = struct.Struct("<4sBBHIII")
HEADER_SIZE = _HEAD.size  # 20
_FIELDS = struct.Struct("<BBHII")


def frame(kind: int, payload: bytes) -> bytes:
    """The 20-byte header of a frame of ``kind`` holding ``payload``."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    fields = _FIELDS.pack(kind, 0, 0, len(payload), zlib.crc32(payload))
    return MAGIC + fields + struct.pack("<I", zlib.crc32(fields))


def frame_bytes(kind: int, payload: bytes) -> bytes:
    """A whole frame: header and payload."""
    return frame(kind, payload) + payload


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
