#!/usr/bin/env python3
"""Sorted reading at scale: ``bread -s`` beside ``bread`` on many writers in many files.

The issue's target: 10 million events from 8 writers in 4 files (4 processes
logging at once, 2 threads each, as fast as they can) sorted with under 100 MB
peak RSS, at no less than 0.8x the unsorted rendering speed of the same files.
Each figure is a child process (wall time including interpreter start-up, its
own peak RSS), output to /dev/null; sorted and unsorted runs alternate so that
both see the same machine.

    python benchmarks/sorted_scale.py                  # 10M events: ~2 minutes on 2 cores
    python benchmarks/sorted_scale.py --events 1000000 --repeats 1
    python benchmarks/sorted_scale.py --dir /tmp/scale --keep   # reuse the files next time
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bread_throughput import BREAD, run_child  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: One writing process: argv path, events, threads.
WRITER = """
import sys, threading
sys.path.insert(0, {root!r})
import blog
path, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
blog.basic_config(path, mode="wb")
log = blog.get_logger("main")
def work(k):
    blog.set_writer_name(f"p{{path[-6]}}w{{k}}")
    for i in range(k, n, threads):
        log.info("order {{}} filled at {{}} qty {{}}", i, 101.25 + i, "AAPL")
ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
blog.shutdown()
"""


def write_files(directory: str, events: int, files: int, writers: int) -> list[str]:
    """``files`` processes writing at once, ``writers // files`` threads each."""
    code = WRITER.format(root=os.path.abspath(ROOT))
    paths = [os.path.join(directory, f"app{k}.blog") for k in range(files)]
    procs = [subprocess.Popen([sys.executable, "-c", code, p, str(events // files),
                               str(writers // files)]) for p in paths]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a writing process failed")
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--writers", type=int, default=8, help="threads in all, spread over files")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", help="where the files are (reused if they are there)")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    if a.files < 1 or a.writers < a.files or a.events < a.writers:
        ap.error("need events >= writers >= files >= 1")
    directory = a.dir or tempfile.mkdtemp(prefix="bread-scale-")
    os.makedirs(directory, exist_ok=True)
    paths = sorted(glob.glob(os.path.join(directory, "app*.blog")))
    if len(paths) != a.files:
        paths = write_files(directory, a.events, a.files, a.writers)
    size = sum(os.path.getsize(p) for p in paths)
    runs: dict[str, list[tuple[float, int | None, float]]] = {"unsorted": [], "sorted": []}
    try:
        for _ in range(a.repeats):
            runs["unsorted"].append(run_child(BREAD + paths))
            runs["sorted"].append(run_child(BREAD + ["-s"] + paths))
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(directory, ignore_errors=True)
    print(f"sorted scale: {a.events:,} events, {a.writers} writers in {a.files} files "
          f"({size:,} bytes); CPython {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    out = {}
    for case, rs in runs.items():
        wall = statistics.median(r[0] for r in rs)
        rss = max((r[1] or 0) for r in rs) / 1024
        out[case] = {"events_per_s": a.events / wall, "seconds": wall, "peak_rss_mib": rss}
        print(f"bread {'-s ' if case == 'sorted' else '   '}{a.files} files   "
              f"{a.events / wall:12,.0f} events/s  {wall:6.2f} s  peak RSS {rss:6.1f} MiB")
    ratio = out["sorted"]["events_per_s"] / out["unsorted"]["events_per_s"]
    print(f"sorted / unsorted: {ratio:.2f}x (target >= 0.8x); "
          f"sorted peak RSS {out['sorted']['peak_rss_mib']:.1f} MiB (target < 100 MB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"events": a.events, "files": a.files, "writers": a.writers,
                       "bytes": size, "cases": out, "ratio": ratio}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
