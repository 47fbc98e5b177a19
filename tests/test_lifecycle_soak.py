"""The whole life of a file set under faults (tests/lifecycle_soak.py): services with
forked workers writing one set that rotates, compresses, compacts, ships and ages out its
files, killed at random moments and restarted; every event whose log call returned is
shipped exactly once. A short run here, on each hot path; ``make soak`` runs it for
minutes."""

from __future__ import annotations

import os
import random

import pytest

import lifecycle_soak


@pytest.mark.slow
def test_a_set_killed_at_random_moments_ships_every_returned_event_once(tmp_path):
    # Proves, over a few seconds of a seeded run (SOAK_SEED replays its choices): with
    # crash_buffer=True, rotation, compression, compaction (compact=, and bread compact
    # --shipped from cron), an on_close hook and retention, SIGKILLs of services, of their
    # workers, of starts (during their recovery), of hooks shipping, of bread --recover and
    # of compactions, and SIGTERMs, lose no event a log call returned from and repeat none:
    # once a last start has recovered and shipped what was left, what was shipped holds
    # each once, and what the directory holds is a part of it, with nothing twice.
    seed = int(os.environ.get("SOAK_SEED", 0)) or random.randrange(1, 1 << 32)
    seconds = float(os.environ.get("SOAK_TEST_SECONDS", 4))
    soak = lifecycle_soak.Soak(str(tmp_path), seed, seconds)
    try:
        stats = soak.run()
    except lifecycle_soak.Failed as exc:
        pytest.fail(f"SOAK_SEED={seed} replays this run's choices "
                    f"(python tests/lifecycle_soak.py --seconds {seconds:g} --seed {seed} "
                    f"--dir DIR keeps its files): {exc}\nstats: {soak.stats}", pytrace=False)
    print(f"\nlifecycle soak, seed {seed}: {stats}")
    assert stats["events"] > 0
