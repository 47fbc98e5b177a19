"""Bytes -> entries of a C++ binlog stream: each a ``u32`` size, then its payload.

A payload starts with a ``u64`` tag: ``-1`` an EventSource, ``-2`` a WriterProp, ``-3`` a
ClockSync, another with its top bit set metadata of a later version (ignored), anything
else the source id of an event (then its ``u64`` clock and its arguments). Extra bytes
after the fields an entry defines are ignored; several sessions may follow each other in
one stream (their definitions replace the earlier ones: ``bread.cxx.events``). Numbers are
little-endian (the producing host's order; the files read so far are from x86_64).

Damage ends the stream with a ``BinlogError`` whose text is the C++ bread's, after every
entry before it was given. A declared size is never allocated beyond ``MAX_ENTRY``.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator, NamedTuple, Union

from blogformat.entries import ClockSync, EventSource, WriterProp

#: The largest entry read (the C++ library writes entries of a few hundred bytes).
MAX_ENTRY = 1 << 26
#: Bytes read at once while an entry's payload arrives.
_PIECE = 1 << 20
TAG_EVENT_SOURCE = (1 << 64) - 1
TAG_WRITER_PROP = (1 << 64) - 2
TAG_CLOCK_SYNC = (1 << 64) - 3
_TOP_BIT = 1 << 63

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_HEAD = struct.Struct("<IQ")


class BinlogError(ValueError):
    """A C++ binlog stream that does not read on: its text is the C++ bread's message."""


class RawEvent(NamedTuple):
    """An event as its entry holds it: arguments not yet decoded."""

    offset: int       # of its entry in the stream
    source_id: int
    clock: int
    args: bytes


Entry = Union[EventSource, WriterProp, ClockSync, RawEvent]


def is_binlog(head: bytes) -> bool:
    """True if ``head`` (at least 12 bytes) begins a C++ binlog stream: a size within
    ``MAX_ENTRY`` that holds a tag, and the tag of one of the three metadata entries (the
    library writes metadata before the events that need it). A blog file begins with its
    frame marker, whose bytes read as a size of over a gigabyte."""
    if len(head) < _HEAD.size:
        return False
    size, tag = _HEAD.unpack_from(head)
    return 8 <= size <= MAX_ENTRY and tag in (TAG_EVENT_SOURCE, TAG_WRITER_PROP, TAG_CLOCK_SYNC)


class Payload:
    """A payload read field by field; reading past its end raises the C++ message."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise BinlogError(f"Range overflow {n} > {len(self.data) - self.pos}")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, fmt: struct.Struct) -> int:
        v: int = fmt.unpack(self.take(fmt.size))[0]
        return v

    def string(self) -> str:
        return text(self.take(self.unpack(_U32)))


def text(data: bytes) -> str:
    """Bytes as str, each byte that is not UTF-8 kept as a lone surrogate
    (``surrogateescape``): the text written back out is the bytes read."""
    return data.decode("utf-8", "surrogateescape")


_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")


def entry(payload: bytes, offset: int) -> Entry | None:
    """The entry of one payload (None: metadata of an unknown kind)."""
    p = Payload(payload)
    tag = p.unpack(_U64)
    if not tag & _TOP_BIT:
        return RawEvent(offset, tag, p.unpack(_U64), payload[16:])
    if tag == TAG_EVENT_SOURCE:
        sid, sev = p.unpack(_U64), p.unpack(_U16)
        category, function, file = p.string(), p.string(), p.string()
        line = p.unpack(_U64)
        return EventSource(sid, sev, category, function, file, line, p.string(), p.string(),
                           offset=offset)
    if tag == TAG_WRITER_PROP:
        wid, name = p.unpack(_U64), p.string()
        p.unpack(_U64)   # the batch size: how the writer's queue was sized
        return WriterProp(wid, name, offset=offset)
    if tag == TAG_CLOCK_SYNC:
        value, frequency, ns = p.unpack(_U64), p.unpack(_U64), p.unpack(_U64)
        return ClockSync(value, frequency, ns, p.unpack(_I32), p.string())
    return None


def check_size(size: int, offset: int) -> None:
    """BinlogError for a declared size beyond ``MAX_ENTRY``."""
    if size > MAX_ENTRY:
        raise BinlogError(f"Entry size {size} at offset {offset} is over the bound of "
                          f"{MAX_ENTRY} bytes")


def payloads(f: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of each entry of ``f``; a size or payload cut short raises
    BinlogError (the C++ bread's words) after the entries before it."""
    offset = 0
    while True:
        head = f.read(4)
        if not head:
            return
        if len(head) < 4:
            head += _read(f, 4 - len(head))
            if len(head) < 4:
                raise BinlogError(f"Failed to read entry size from istream, only got "
                                  f"{len(head)} bytes, expected 4")
        size = _U32.unpack(head)[0]
        check_size(size, offset)
        payload = _read(f, size)
        if len(payload) < size:
            raise BinlogError(f"Failed to read entry payload from istream, only got "
                              f"{len(payload)} bytes, expected {size}")
        yield offset, payload
        offset += 4 + size


def _read(f: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes (fewer only at the end), read in pieces: a size that the file
    does not hold allocates no more than what it holds."""
    data = f.read(min(n, _PIECE))
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        piece = f.read(min(n - got, _PIECE))
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def iter_entries(f: BinaryIO) -> Iterator[Entry]:
    """The entries of a C++ binlog stream, in order (unknown metadata left out)."""
    for offset, payload in payloads(f):
        if len(payload) < 8:
            raise BinlogError(f"Range overflow 8 > {len(payload)}")
        e = entry(payload, offset)
        if e is not None:
            yield e
