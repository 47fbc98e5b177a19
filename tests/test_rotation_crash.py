"""SIGKILL at random points of rotation, compression and retention leaves only readable files."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

import bread
import blog
from blogstore.fileset import members

from helpers import python_child

TRIALS = 52
ZYGOTES = 2

# A zygote imports blog once and forks one writer per trial, which it kills with SIGKILL
# after a random moment: two threads log numbered events through a set that switches
# files every few kilobytes and compresses each closed file at once, so that a kill
# lands during a write, a switch, a compression (copy, rename, delete) or between them.
# The random moment is counted from when the writer says it is ready (its set made, its
# threads started): a kill before that would test nothing and find no directory.
ZYGOTE = textwrap.dedent("""
    import os, random, signal, sys, threading, time
    import blog
    signal.signal(signal.SIGINT, signal.SIG_DFL)     # whatever the test runner's were
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    rng = random.Random(int(sys.argv[1]))
    for d, keep in zip(sys.argv[2::2], sys.argv[3::2]):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.chdir(d)
            blog.basic_config("logs/app.blog", flush_interval=0.001, rotate_bytes=20000,
                              compress=True, keep_files=int(keep) or None)
            log = blog.get_logger()
            def work(k):
                i = 0
                while True:
                    log.info("t{} {}", k, i, pad="x" * (i % 40))
                    i += 1
            for k in range(2):
                threading.Thread(target=work, args=(k,), daemon=True).start()
            os.write(ready_w, b"r")
            threading.Event().wait()
        os.close(ready_w)
        assert os.read(ready_r, 1) == b"r", "the writer died before it was ready"
        os.close(ready_r)
        time.sleep(rng.uniform(0.02, 0.2))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(d, pid, flush=True)
""")


STATES: dict[str, int] = {}


def _check(d: str, killed_pid: int, retention: bool) -> None:
    before = os.listdir(d)
    plain_before = {n for n in before if n.endswith(".blog")}
    state = ("tmp" if any(n.endswith(".tmp") for n in before) else
             "twin" if any(n[:-3] in plain_before for n in before if n.endswith(".gz")) else
             "plain" if len(plain_before) > 1 else "clean")
    STATES[state] = STATES.get(state, 0) + 1
    # The next start finishes or undoes what the kill cut (and compresses what is closed).
    rf = blog.RotatingFile(os.path.join(d, "app.blog"), compress=True)
    rf.wait()
    rf.close()
    names = os.listdir(d)
    assert not any(n.endswith(".tmp") for n in names), names
    files = members(d, "app")
    plain = {f.plain_name for f in files if f.compressed}
    assert not any(f.name in plain for f in files if not f.compressed)  # no twin left
    seen: dict[int, list[int]] = {0: [], 1: []}
    torn = 0
    for f in files:
        r = bread.read(os.path.join(d, f.name))
        for ev in r:
            seen[ev.args[0]].append(ev.args[1])
        if f.pid != killed_pid:
            assert r.damage == [] and r.summaries   # the check's own, empty file
            continue
        if not r.summaries:           # the file being written at the kill
            torn += 1
            size = r.damage[0].offset + r.damage[0].length if r.damage else 0
            assert len(r.damage) <= 1 and (not r.damage or size >= r.damage[0].offset)
            assert all(d_.reason.startswith(("truncated", "frame cut short"))
                       for d_ in r.damage), r.damage
        else:
            assert r.damage == [], (f.name, r.damage)
    assert torn <= 1
    for seq in seen.values():
        if seq:
            start = seq[0] if retention else 0
            assert seq == list(range(start, start + len(seq))), "gap or repeat"


@pytest.mark.slow
def test_sigkill_anywhere_in_rotation_compression_and_retention(tmp_path):
    # Proves: after a SIGKILL at a random moment (>= 50 trials), and the next start's
    # recovery, every file reads with no damage except the torn tail of the one being
    # written; no temporary file or half-done compression is left; each thread's events
    # run without gap or repeat across the files (from the oldest one kept).
    trials = []
    for k in range(TRIALS):
        (tmp_path / f"t{k}").mkdir()
        trials.append((str(tmp_path / f"t{k}"), "3" if k % 3 == 0 else "0"))
    zygotes = [subprocess.Popen(python_child("-c", ZYGOTE, str(20261126 + z),
                                             *[x for t in trials[z::ZYGOTES] for x in t]),
                                stdout=subprocess.PIPE, text=True)
               for z in range(ZYGOTES)]
    done = []
    for z in zygotes:
        out, _ = z.communicate(timeout=600)   # bounds a hang: loaded, trials take minutes
        assert z.returncode == 0
        done += [line.split() for line in out.splitlines()]
    assert len(done) == TRIALS
    keep = dict(trials)
    for d, pid in done:
        _check(os.path.join(d, "logs"), int(pid), keep[d] != "0")
    print(STATES)
