"""Compaction of crafted originals (bread/compact/_compact.c against the Python reference in
bread/compact/): golden files with bytes of one frame changed (its checksum made right
again) compact to the same bytes and the same damage on both paths, rows and columnar."""

from __future__ import annotations

import contextlib
import io
import pathlib
import random

import pytest

from blogformat.frames import frame_bytes
from bread import accel
from bread.compact import compactor
from bread.compact.compactor import Compactor
from bread.frames import iter_frames

GOLDEN = sorted((pathlib.Path(__file__).parent / "data" / "v1").glob("*.blog"))
#: Bytes that make msgpack lie: 0, the largest ints' and nil's markers, sign bits.
HOSTILE = (0, 0xFF, 0x7F, 0x80, 0xCF, 0xD3, 0xC0, 0xDD)


def _crafted(rng: random.Random) -> bytes:
    frames = list(iter_frames(io.BytesIO(rng.choice(GOLDEN).read_bytes())))
    k = rng.randrange(len(frames))
    out = io.BytesIO()
    for i, f in enumerate(frames):
        p = bytearray(f.payload)
        for _ in range(rng.randint(1, 3) if i == k and p else 0):
            p[rng.randrange(len(p))] = rng.choice(HOSTILE + (rng.randrange(256),))
        out.write(frame_bytes(f.kind, bytes(p)))
    return out.getvalue()


def test_crafted_originals_compact_alike_on_both_paths(tmp_path, monkeypatch):
    # Proves: whatever one frame of an original says (counts, clocks, ids, values that
    # lie), the C compactor writes the reference's bytes and reports its damage, never an
    # exception (a fixed seed: 40 crafted files, about a second). Tried with 400: alike.
    if accel.compact is None:
        pytest.skip("the C compactor is not built (or turned off)")
    monkeypatch.setattr(compactor.time, "time_ns", lambda: 1)
    fast, rng = accel.compact, random.Random(3)
    for _ in range(40):
        (tmp_path / "x.blog").write_bytes(_crafted(rng))
        for columnar in (False, True):
            got = []
            for ctx in (contextlib.nullcontext(), _pure(monkeypatch, fast)):
                with ctx:
                    c = Compactor(str(tmp_path))
                    c.add_file(str(tmp_path / "x.blog"))
                    out = io.BytesIO()
                    c.write(out, ["x.blog"], columnar)
                    got.append((out.getvalue(), [str(d) for d in c.damage]))
            assert got[0] == got[1]


@contextlib.contextmanager
def _pure(monkeypatch, fast):
    monkeypatch.setattr(accel, "compact", None)
    try:
        yield
    finally:
        monkeypatch.setattr(accel, "compact", fast)
