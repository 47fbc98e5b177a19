"""bread compact's runs (bread/compact/runs.py): records sorted in bounded memory, spilled
in runs and merged a stretch at a time, come back in order, whatever their times (runs
that follow each other, runs that interleave), on both paths."""

from __future__ import annotations

import random

import pytest

from bread.compact import runs as runs_module
from bread.compact.runs import Runs


@pytest.mark.parametrize("seed", range(12))
def test_spilled_runs_merge_into_every_record_in_order(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(runs_module, "RUN_EVENTS", rng.choice([1, 7, 500, 1000]))
    monkeypatch.setattr(runs_module, "BLOCK", rng.choice([1, 3, 64]))
    spread = rng.choice([10, 10**6, 2**62])
    r = Runs(str(tmp_path))
    recs = []
    for seq in range(rng.randint(0, 3000)):
        ns = seq * 1000 + rng.randint(-spread, spread) if rng.random() < 0.9 else -2**63
        rec = (ns, rng.randint(1, 3), seq + 1, rng.randint(1, 5), rng.choice([3, 4, 70000]),
               rng.randbytes(rng.randint(0, 9)))
        recs.append(rec)
        if rng.random() < 0.5:
            r.add(rec)
        else:
            r.extend([rec])
    size = rng.randint(1, 700)
    chunks = list(r.merged(size))
    r.close()
    assert all(len(c) == size for c in chunks[:-1]) and all(chunks)
    assert [tuple(x) for c in chunks for x in c] == sorted(recs)
