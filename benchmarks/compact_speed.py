"""Compaction speed: events/s of ``bread compact`` (row frames and ``--columnar``) and its
peak memory, C fast path against pure Python, interleaved on the same files.

    python benchmarks/compact_speed.py [--events N] [--rounds R]

The events are those of ``compressed_size.py`` (``log.info("order {} filled at {} qty
{}", i, px, sym)`` and a warning every 50th), written by one process into a size-rotated
file set (``rotate_bytes`` 8 MiB, the files left uncompressed). Each run compacts a fresh
copy of the set in a child process: the events/s is the events over the wall time of
``bread.compact.compact`` (reading, sorting in bounded runs, encoding, gzip, the
catalog's steps), and over its CPU time (the process's, which a machine shared with
other work disturbs less), the peak RSS the child's (its Python and imports included).
The cases run interleaved, ``--rounds`` times each, and the best of each is shown: the
machine is shared, so compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

CHILD = r"""
import json, resource, sys, time
from bread.compact import compact
t, cpu = time.perf_counter(), time.process_time()
done = compact(sys.argv[1], 0, columnar=sys.argv[2] == "1", warn=lambda s: None)
dt, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"events": sum(d["events"] for d in done), "seconds": dt, "cpu": cpu,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def write_set(d: str, n: int) -> None:
    """``n`` events (and a warning every 50th) into the rotated set ``d``/app.blog."""
    import blog
    blog.basic_config(os.path.join(d, "app.blog"), rotate_bytes=8 << 20)
    log = blog.get_logger("orders")
    rng = random.Random(7)
    syms = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA"]
    for i in range(n):
        px = round(100 + rng.random() * 50, 2)
        log.info("order {} filled at {} qty {}", i, px, rng.choice(syms))
        if i % 50 == 0:
            log.warning("order {} slow fill {}", i, px)
    blog.shutdown()


def run(src: str, work: str, columnar: bool, pure: bool) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    env = dict(os.environ, PYTHONPATH=ROOT)
    if pure:
        env.update(BREAD_PURE_PYTHON="1", BLOG_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", CHILD, work, "1" if columnar else "0"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    d = tempfile.mkdtemp()
    src, work = os.path.join(d, "set"), os.path.join(d, "work")
    os.mkdir(src)
    write_set(src, args.events)
    files = len(os.listdir(src))
    cases = [(c, pure) for pure in (False, True) for c in (False, True)]
    best: dict[tuple[bool, bool], dict] = {}
    for _ in range(args.rounds):
        for case in cases:
            got = run(src, work, *case)
            if case not in best or got["seconds"] < best[case]["seconds"]:
                best[case] = got
    shutil.rmtree(d)
    n = best[cases[0]]["events"]
    print(f"{n:,} events in {files} files; best of {args.rounds} interleaved runs")
    print(f"{'compaction':<14}{'path':<14}{'events/s':>12}{'per CPU s':>12}{'seconds':>10}"
          f"{'peak RSS MiB':>14}")
    for (columnar, pure), got in best.items():
        print(f"{'--columnar' if columnar else 'row frames':<14}"
              f"{'pure Python' if pure else 'C fast path':<14}"
              f"{got['events'] / got['seconds']:>12,.0f}{got['events'] / got['cpu']:>12,.0f}"
              f"{got['seconds']:>10.2f}{got['rss_kib'] / 1024:>14.1f}")
    for columnar in (False, True):
        print(f"C / pure Python, {'--columnar' if columnar else 'row frames'}: "
              f"{best[(columnar, True)]['seconds'] / best[(columnar, False)]['seconds']:.2f}x")


if __name__ == "__main__":
    main()
