"""The bytes on disk: frames, entry kinds and the file header.

One definition shared by the writer (``blog``) and the reader (``bread``);
``docs/format.md`` is the specification this module implements.

A file is a sequence of *frames*. Each frame is a 16-byte little-endian
header followed by a payload::

    magic   4 bytes  b"\\x9eBLG"
    kind    u8       FRAME_HEADER, FRAME_METADATA or FRAME_EVENTS
    flags   u8       0 (reserved)
    spare   u16      0 (reserved)
    length  u32      payload length in bytes
    crc     u32      CRC-32 of bytes 4..11 of this header, then the payload

Payloads are msgpack: the header frame holds ``[version, descriptor]``,
a metadata frame a sequence of entry arrays ``[tag, field...]``, an events
frame a batch header array followed by one array per event.
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

# Metadata entry tags: the first element of each entry array.
ENTRY_EVENT_SOURCE = 1
ENTRY_WRITER_PROP = 2
ENTRY_CLOCK_SYNC = 3
ENTRY_DROPPED = 4
ENTRY_LOST = 5

_HEAD = struct.Struct("<4sBBHII")
HEADER_SIZE = _HEAD.size  # 16
_CRC_PART = struct.Struct("<BBHI")


def frame(kind: int, payload: bytes) -> bytes:
    """Wrap ``payload`` in a frame of ``kind``."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    head = _CRC_PART.pack(kind, 0, 0, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return MAGIC + head + struct.pack("<I", crc)


def frame_bytes(kind: int, payload: bytes) -> bytes:
    """A whole frame: header and payload."""
    return frame(kind, payload) + payload


def parse_header(head: bytes) -> tuple[int, int, int, int] | None:
    """Split a 16-byte frame header into (kind, flags, length, crc); None if the magic is wrong."""
    magic, kind, flags, _spare, length, crc = _HEAD.unpack(head)
    if magic != MAGIC:
        return None
    return kind, flags, length, crc


def check_crc(head: bytes, payload: bytes, crc: int) -> bool:
    """True if ``crc`` matches the header fields and payload."""
    return zlib.crc32(payload, zlib.crc32(head[4:12])) == crc
