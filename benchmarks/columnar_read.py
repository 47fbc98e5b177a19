#!/usr/bin/env python3
"""read_batches on columnar frames against the same events in row frames (issue 30).

The benchmark's events (``bread_throughput.write_log``: ``log.info("order {} filled at
{} qty {}", ...)`` from 4 threads) are compacted twice by ``bread compact``'s Compactor,
into row frames and into columnar frames (docs/format.md 5.5), uncompressed. Each case
reads one file with ``bread.read_batches`` (Arrow) in a fresh process; the cases are
interleaved, repeat by repeat, so that both files see the same machine. Each figure is
events per second of the process's CPU time (``time.process_time``: on a shared machine
the wall time counts other work too), the median of the repeats, and the best.

    python benchmarks/columnar_read.py                  # 1M events, 5 repeats
    python benchmarks/columnar_read.py --events 200000 --repeats 3
    python benchmarks/columnar_read.py --compare-root /tmp/old   # another checkout, by turns

``--compare-root`` reads the same files with another checkout's bread too (its children
run in that directory), old and new interleaved case by case: compare them by ratios
within one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bread_throughput import CHILD_ENV, FIXED, write_log  # noqa: E402
from bread.sinks.batches import COLUMNS as COLUMN_NAMES  # noqa: E402

TEXT = ("message", "args", "fields")
#: The cases: all 19 columns, the benchmark's fixed ones with and without the message, and
#: all but the three text columns (what both kinds of frames share: the bound of a ratio).
COLUMNS = {"all columns": None, "fixed columns + message": FIXED,
           "fixed columns, no message": [c for c in FIXED if c != "message"],
           "all but the text columns": [c for c in COLUMN_NAMES if c not in TEXT]}
CHILD = """
import sys, time, bread, pyarrow
path, cols = sys.argv[1], eval(sys.argv[2])
t0 = time.process_time()
n = sum(b.num_rows for b in bread.read_batches(path, cols))
print(n, time.process_time() - t0)
"""


def compacted(src: str, out: str, columnar: bool) -> None:
    from bread.compact.compactor import Compactor
    c = Compactor(os.path.dirname(out))
    c.add_file(src)
    with open(out, "wb") as f:
        c.write(f, [], columnar)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--compare-root", help="another checkout whose children run by turns")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="columnar-read-") as tmp:
        src = os.path.join(tmp, "orders.blog")
        write_log(src, a.events)
        files = {"rows": os.path.join(tmp, "rows.blog"), "columnar": os.path.join(tmp, "cols.blog")}
        for kind, path in files.items():
            compacted(src, path, kind == "columnar")
        roots = {"": ROOT} | ({"old:": a.compare_root} if a.compare_root else {})
        env = {k: v for k, v in CHILD_ENV.items() if k != "PYTHONPATH"}   # the root's bread
        rates: dict[tuple[str, str], list[float]] = {}
        for _ in range(a.repeats):
            for label, cols in COLUMNS.items():
                for kind, path in files.items():
                    for tag, root in roots.items():
                        r = subprocess.run([sys.executable, "-c", CHILD, path, repr(cols)],
                                           capture_output=True, text=True, env=env,
                                           cwd=root, check=True)
                        n, t = r.stdout.split()
                        rates.setdefault((label, tag + kind), []).append(int(n) / float(t))
        print(f"read_batches: {a.events:,} events, row frames {os.path.getsize(files['rows']):,} "
              f"bytes, columnar {os.path.getsize(files['columnar']):,} bytes; CPython "
              f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"{'columns':28} {'frames':>9} {'events/s':>12} {'best':>12}")
        for (label, kind), rs in rates.items():
            print(f"{label:28} {kind:>9} {statistics.median(rs):12,.0f} {max(rs):12,.0f}")
        for label in COLUMNS:
            for tag in roots:
                cols, rows = rates[(label, tag + "columnar")], rates[(label, tag + "rows")]
                pairs = [c / r for c, r in zip(cols, rows)]
                print(f"{tag}{label}: columnar / rows {statistics.median(pairs):.2f}x (median "
                      f"of the repeats' ratios; of the bests {max(cols) / max(rows):.2f}x)")
            for kind in files if a.compare_root else ():
                new, old = rates[(label, kind)], rates[(label, "old:" + kind)]
                pairs = [x / y for x, y in zip(new, old)]
                print(f"{label}, {kind}: new / old {statistics.median(pairs):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
