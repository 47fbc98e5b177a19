#!/usr/bin/env python3
"""Shipping a backlog: a set started with ``on_close`` over N closed files none shipped yet.

The state after a storage outage (or a service that never got to ship): N compressed
closed files of ``app``, all in the directory's manifest, none shipped. Each case is a
fresh process that opens the set with a hook that only counts (an upload's own time left
out), timed from before ``RotatingFile(..., on_close=hook)`` to the first call of the
hook and to the Nth; it reports too how many times the manifest was rewritten meanwhile.

    python benchmarks/ship_backlog.py                  # N = 300, 1000, 3000
    python benchmarks/ship_backlog.py --files 300 1000 --json ship.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

#: The child: opens the set with a counting hook; prints first, all (s) and rewrites.
CHILD = """
import json, sys, threading, time
import blog
from blogstore import manifest

directory, n = sys.argv[1], int(sys.argv[2])
rewrites = 0
write = manifest.write
def counted(d, m):
    global rewrites
    rewrites += 1
    write(d, m)
manifest.write = counted
times = []
done = threading.Event()
def hook(path):
    times.append(time.perf_counter())
    if len(times) == n:
        done.set()
start = time.perf_counter()
rf = blog.RotatingFile(directory + "/app.blog", rotate_bytes=1 << 30, compress=True,
                       on_close=hook)
if not done.wait(3600):
    sys.exit("not all shipped within an hour")
print(json.dumps({"first": times[0] - start, "all": times[-1] - start,
                  "rewrites": rewrites, "calls": len(times)}))
rf.close()
"""


def backlog(directory: str, n: int) -> None:
    """``n`` compressed closed files of ``app`` in ``directory``, in its manifest, none shipped."""
    import blog
    from blogstore import manifest
    from blogstore.fileset import file_name

    one = os.path.join(directory, "one")
    os.mkdir(one)
    rf = blog.RotatingFile(os.path.join(one, "app.blog"), rotate_bytes=1 << 30, compress=True)
    s = blog.Session()
    c = blog.Consumer(s, rf, interval=3600).start()
    s.get_logger().info("one event {}", 1)
    c.stop()
    rf.close()
    src = [os.path.join(one, n) for n in os.listdir(one) if n.endswith(".blog.gz")][0]
    t0 = 1_764_151_200_000_000_000
    for i in range(n):
        shutil.copy(src, os.path.join(directory, file_name("app", t0 + i * 1_000_000_000, 4242)
                                      + ".gz"))
    shutil.rmtree(one)
    manifest.update(directory, lambda m: None, lambda path: True)   # rebuilt: every file


def run(n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ship-backlog-") as directory:
        backlog(directory, n)
        env = dict(os.environ, PYTHONPATH=ROOT)
        r = subprocess.run([sys.executable, "-c", CHILD, directory, str(n)], env=env,
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise SystemExit(f"N={n}: {r.stderr}")
        out = json.loads(r.stdout)
        out["files"] = n
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, nargs="+", default=[300, 1000, 3000])
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    results = []
    print(f"{'files':>6} {'first hook (s)':>15} {'all shipped (s)':>16} {'rewrites':>9}")
    for n in args.files:
        r = run(n)
        results.append(r)
        print(f"{n:>6} {r['first']:>15.3f} {r['all']:>16.3f} {r['rewrites']:>9}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
