"""gzip read as the bytes it holds, recognized by its first bytes, not its name.

A compressed stream cut short ends the input and is reported as damage (``GzipInput.error``);
bytes that only looked like gzip's header are read as they are.
"""

from __future__ import annotations

import os
import zlib

from blogformat.typinglite import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
_PIECE = 4096   # compressed bytes per zlib call


class GzipInput:
    """A gzip stream (one member or several) read as the bytes it holds.

    Damage or a stream cut short ends it, with everything decompressed
    before it given out, and is kept in ``error``. If it does not decode
    from its very start (bytes that only looked like gzip's header) and the
    file can go back, it is read as it is instead.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._start = raw.tell() if seekable(raw) else None
        self._d = zlib.decompressobj(31)      # 31: a gzip header and trailer
        self._fed = False                      # the current member has begun
        self._fed_any = False                  # any compressed byte has been given to zlib
        self._first_piece = True
        self._buf = bytearray()
        self._eof = False
        self._plain = False
        self.error: str | None = None
        self.pos = 0           # bytes given out so far (offsets in bread are of these)
        self.name = getattr(raw, "name", "<gzip>")

    def read(self, n: int = -1) -> bytes:
        if self._plain:
            return self._raw.read(n)
        want = n if n >= 0 else 1 << 62
        while len(self._buf) < want and not self._eof:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                self._eof = True
                # (a stream that failed, an object whose store failed: its own reason)
                self.error = getattr(self._raw, "error", None) or (
                    "compressed data cut short" if self._fed else None)
                break
            # In pieces: zlib gives nothing of a call that fails, so the piece with the
            # damage is inflated again, in small steps, from a copy of the state before it
            # (a copy costs about 2% of inflating the piece).
            for k in range(0, len(chunk), _PIECE):
                piece = chunk[k:k + _PIECE]
                before, held = self._d.copy(), len(self._buf)
                try:
                    self._inflate(piece)
                except zlib.error as exc:
                    self._eof = True
                    if len(self._buf) == held:   # (else a member ended in it: kept that)
                        self._salvage(before, piece)
                    # Nothing came out of the first piece: it was never gzip (bytes that
                    # only looked like its header), if the file can go back.
                    if (self.pos == 0 and not self._buf and self._start is not None
                            and self._first_piece):
                        self._raw.seek(self._start)    # not gzip after all
                        self._plain = True
                        return self._raw.read(n)
                    self.error = f"compressed data damaged ({exc})"
                    break
        out = bytes(self._buf[:want])
        del self._buf[:want]
        self.pos += len(out)
        return out

    def _salvage(self, d: Any, piece: bytes) -> None:
        """A piece failed: inflate it again with ``d`` (the state before it) in small steps,
        keeping what came out before the damage (zlib gives nothing of a call that fails)."""
        try:
            for j in range(0, len(piece), 64):
                self._buf += d.decompress(piece[j:j + 64])
                if d.eof:
                    break
        except zlib.error:
            pass

    def _inflate(self, chunk: bytes) -> None:
        self._first_piece = not self._fed_any
        self._fed_any = True
        self._fed = True
        self._buf += self._d.decompress(chunk)
        while self._d.eof:                     # a member ended; another may follow
            rest = self._d.unused_data
            self._d = zlib.decompressobj(31)
            self._fed = bool(rest)
            if not rest:
                return
            self._buf += self._d.decompress(rest)

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def seekable(f: BinaryIO) -> bool:
    try:
        return bool(f.seekable())
    except Exception:
        return False


class _Prefixed:
    """The bytes already read from a stream that cannot go back, then the rest of it."""

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head = head
        self._raw = raw
        self.name = getattr(raw, "name", "<stream>")

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0:
                data, self._head = self._head + self._raw.read(), b""
                return data
            data, self._head = self._head[:n], self._head[n:]
            if len(data) < n:
                data += self._raw.read(n - len(data))
            return data
        return self._raw.read(n)

    @property
    def error(self) -> str | None:
        """What ended the stream early (a GzipInput's damage), None if nothing did."""
        return getattr(self._raw, "error", None)

    @property
    def pos(self) -> int:
        """Bytes given out so far, where the stream counts them (a GzipInput)."""
        return getattr(self._raw, "pos", 0) - len(self._head)

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def peek(f: BinaryIO, n: int) -> tuple[bytes, BinaryIO]:
    """The first ``n`` bytes of ``f`` (fewer at its end), and ``f`` to read from its start
    again: ``f`` itself gone back if it can seek, else the bytes read then the rest of it."""
    head = f.read(n)   # read, not peek: a pipe may have fewer bytes buffered so far
    if seekable(f):
        f.seek(-len(head), os.SEEK_CUR)
        return head, f
    return head, _Prefixed(head, f)  # type: ignore[return-value]


def decompressing(f: BinaryIO) -> BinaryIO:
    """``f``, or a GzipInput over it if it starts with gzip's magic bytes."""
    head, f = peek(f, 4)
    # gzip's magic, the deflate method, and no reserved flag bit set
    gz = len(head) == 4 and head[:3] == GZIP_MAGIC + b"\x08" and not head[3] & 0xE0
    return GzipInput(f) if gz else f   # type: ignore[return-value]
