"""Events sorted in bounded memory: runs of ``RUN_EVENTS`` spilled to temporary files,
merged at the end.

An event is a record ``(ns, writer id, seq, source id, n, raw)`` whose ``seq`` (its place
in the input) is unique: records sort as plain tuples, by time, writer and place, and no
comparison ever reaches the fields after ``seq``. A run file holds its sorted records in
blocks of ``BLOCK`` (one msgpack array each); the merge keeps one block per run in memory
and moves records a stretch at a time: from the run whose next record is least, every
record up to the next record of any other run (one ``bisect``), so that runs which follow
each other in time (a process's files, one after the other) cost a step per block, not
per record."""

from __future__ import annotations

import bisect
import tempfile
from typing import BinaryIO, Iterator, Sequence

import msgpack

from .. import accel

#: Events sorted in memory at once before they are spilled to a run file.
RUN_EVENTS = 200_000
#: Records per block of a run file (what the merge holds of each run).
BLOCK = 1024


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

    def extend(self, recs: list[tuple]) -> None:
        self.buf += recs
        if len(self.buf) >= RUN_EVENTS:
            self._spill()

    def _spill(self) -> None:
        self.buf.sort()
        f = tempfile.TemporaryFile(dir=self.tmpdir)
        fast = accel.compact
        for at in range(0, len(self.buf), BLOCK):
            block = self.buf[at:at + BLOCK]
            data = None if fast is None else fast.pack_run(block)
            kind = _C if data is not None else _MSGPACK
            if data is None:
                data = msgpack.packb(block, use_bin_type=True)
            f.write(bytes([kind]) + len(data).to_bytes(4, "little") + data)
        f.seek(0)
        self.files.append(f)
        self.buf = []

    def merged(self, size: int) -> Iterator[list[tuple]]:
        """Every event in order, in lists of ``size`` (the last one shorter)."""
        if not self.files:
            self.buf.sort()
            for at in range(0, len(self.buf), size):
                yield self.buf[at:at + size]
            return
        if self.buf:
            self._spill()
        blocks = [_blocks(f) for f in self.files]
        runs: list[list] = [[b, next(b), 0] for b in blocks]   # [its blocks, its block, at]
        out: list[tuple] = []
        while runs:
            least = min(runs, key=lambda r: r[1][r[2]])
            block, at = least[1], least[2]
            others = [r[1][r[2]] for r in runs if r is not least]
            end = bisect.bisect_left(block, min(others), at) if others else len(block)
            out += block[at:end]
            if end < len(block):
                least[2] = end
            else:
                nxt = next(least[0], None)
                if nxt is None:
                    runs.remove(least)
                else:
                    least[1], least[2] = nxt, 0
            while len(out) >= size:
                yield out[:size]
                del out[:size]
        if out:
            yield out

    def close(self) -> None:
        for f in self.files:
            f.close()


_MSGPACK, _C = 0, 1   # a block of a run file: msgpack, or bread/compact/_compact.c's own layout


def _blocks(f: BinaryIO) -> Iterator[Sequence[tuple]]:
    """The blocks of a run file (each a kind byte, its size in 4 bytes, its records)."""
    while head := f.read(5):
        data = f.read(int.from_bytes(head[1:], "little"))
        fast = accel.compact
        if head[0] == _C and fast is not None:   # (written only where C is)
            yield fast.unpack_run(data)
        else:
            yield msgpack.unpackb(data, raw=False, use_list=False)
