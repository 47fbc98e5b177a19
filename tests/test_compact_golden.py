"""Compaction of the golden files: every golden file of v1, compacted into row frames and
into columnar frames, reads back as the same events (types, messages, order within a
writer) as the original; the columnar files committed in tests/data/compacted, one set
per encoding (the clocks by delta of delta, then as deltas less a base), still read so, as
events and as batches (C and Python alike)."""

from __future__ import annotations

import math
import pathlib

import msgpack
import pyarrow as pa
import pytest

import bread
from blogformat.frames import FRAME_COLUMNS
from blogformat.values import UNPACK_OPTIONS
from bread import accel
from bread.compact.compactor import Compactor
from bread.frames import iter_frames

DATA = pathlib.Path(__file__).parent / "data"
GOLDEN = sorted((DATA / "v1").glob("*.blog"))
#: Each encoding's golden files, with the coding of their clocks column (format.md 5.5).
CLOCK_CODING = {"columnar": 1, "columnar-deltas": 8}
COMPACTED = sorted((DATA / "compacted").glob("*.columnar*.blog"))


def typed(v):
    """``v`` with the type of every value in it, so that 1, 1.0, True and "1" differ."""
    if isinstance(v, float) and math.isnan(v):
        return ("float", "nan")
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [typed(x) for x in v])
    if isinstance(v, dict):
        return ("dict", [(typed(k), typed(x)) for k, x in v.items()])
    return (type(v).__name__, repr(v))


def by_writer(path) -> dict:
    """Each writer's events (as seen by a reader) in the order it reads them."""
    out: dict = {}
    for e in bread.read(str(path)):
        out.setdefault((e.pid, e.writer), []).append(
            (e.severity, e.category, e.format, e.file, e.line, e.message, typed(e.args),
             typed(e.fields), e.ns))
    return out


@pytest.mark.parametrize("columnar", [False, True], ids=["rows", "columnar"])
@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.stem)
def test_a_compacted_golden_file_reads_back_as_its_original(tmp_path, golden, columnar):
    c = Compactor(str(tmp_path))
    assert not c.add_file(str(golden))
    out = tmp_path / "compacted.blog"
    with open(out, "wb") as f:
        n = c.write(f, [golden.name], columnar)
    want = by_writer(golden)
    assert n == sum(map(len, want.values()))
    assert by_writer(out) == want
    kinds = {fr.kind for fr in iter_frames(open(out, "rb"), str(out))}
    assert (FRAME_COLUMNS in kinds) == columnar


@pytest.mark.parametrize("path", COMPACTED, ids=lambda p: p.name.rsplit(".", 1)[0])
def test_columnar_golden_files_of_every_encoding_still_read(path):
    name, encoding, _ = path.name.split(".")
    heads = [msgpack.unpackb(fr.payload, **UNPACK_OPTIONS)
             for fr in iter_frames(open(path, "rb"), str(path)) if fr.kind == FRAME_COLUMNS]
    assert heads and {h[6][0] for h in heads} == {CLOCK_CODING[encoding]}
    want = by_writer(DATA / "v1" / f"{name}.blog")
    assert by_writer(path) == want
    got = batches(path)   # on the C path, the columns built by bread/decode/_decode.c
    saved = accel.speedups
    accel.speedups = None
    try:
        assert batches(path) == got and len(got) == sum(map(len, want.values()))
    finally:
        accel.speedups = saved


def batches(path) -> list:
    """read_batches' rows (their time as an int: pyarrow's datetime has microseconds)."""
    rows = []
    for b in bread.read_batches(str(path)):
        t = pa.Table.from_batches([b])
        rows += t.set_column(0, "time", t["time"].cast(pa.int64())).to_pylist()
    return [typed(r) for r in rows]
