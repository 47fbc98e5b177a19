"""Events sorted in bounded memory: runs of ``RUN_EVENTS`` spilled to temporary files,
merged at the end."""

from __future__ import annotations

import heapq
import tempfile
from typing import BinaryIO, Iterator

import msgpack

#: Events sorted in memory at once before they are spilled to a run file.
RUN_EVENTS = 200_000


class Runs:
    """Events sorted in bounded memory: runs spilled to temporary files, merged at the end."""

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir
        self.buf: list[tuple] = []
        self.files: list[BinaryIO] = []

    def add(self, rec: tuple) -> None:
        self.buf.append(rec)
        if len(self.buf) >= RUN_EVENTS:
            self._spill()

    def _spill(self) -> None:
        self.buf.sort(key=lambda r: r[:3])
        f = tempfile.TemporaryFile(dir=self.tmpdir)
        pack = msgpack.Packer(use_bin_type=True).pack
        for r in self.buf:
            f.write(pack(r))
        f.seek(0)
        self.files.append(f)
        self.buf = []

    def merged(self) -> Iterator[tuple]:
        if not self.files:
            self.buf.sort(key=lambda r: r[:3])
            yield from self.buf
            return
        if self.buf:
            self._spill()
        its = [iter(msgpack.Unpacker(f, raw=False, use_list=False, max_buffer_size=1 << 30))
               for f in self.files]
        yield from heapq.merge(*its, key=lambda r: r[:3])

    def close(self) -> None:
        for f in self.files:
            f.close()
