#!/usr/bin/env python3
"""bread's outputs side by side: text, ``-o jsonl`` and ``-o csv`` of one file, as ratios.

The file: 400,000 events from 4 threads, the call sites taking turns: ints, floats and
str (ASCII; non-ASCII, quotes and a comma, which CSV quotes), bools and None, and a
keyword field. Each output is a child ``bread`` process (wall time including the
interpreter's start-up, output to /dev/null), unsorted and sorted (``-s``), the cases
interleaved in each repeat so that all see the same machine; the best of the repeats
is the figure to judge by on a shared machine (other work only ever adds time), the
median is shown too.

    python benchmarks/reader_outputs.py                    # 400k events, 5 repeats
    python benchmarks/reader_outputs.py --events 100000 --repeats 1
    python benchmarks/reader_outputs.py --file x.blog      # a file written before
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import blog  # noqa: E402
import bread  # noqa: E402
from bread import accel  # noqa: E402
from bread_throughput import BREAD, run_child, warm_up  # noqa: E402


def write_log(path: str, n: int) -> None:
    """n events from 4 threads named w0..w3, four call sites in turn."""
    s = blog.Session()
    log = s.get_logger("orders")
    stream = blog.FileOutputStream(path, mode="wb")
    c = blog.Consumer(s, stream).start()

    def work(k: int) -> None:
        s.writer().name = f"w{k}"
        for i in range(k, n, 4):
            m = i % 16
            if m < 8:
                log.info("order {} filled at {} qty {}", i, 101.25 + i, "AAPL")
            elif m < 11:
                log.warning("disk {} at {}%", "/var", 93.5, host="db1")
            elif m < 14:
                log.debug("flags {} {} {}", True, None, -i)
            else:
                log.info("user {} said {}", "zoë", 'hi, "there"')

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c.stop()
    stream.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--file", help="read this blog file instead of writing one")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bread-outputs-")
    path = args.file or os.path.join(tmp, "mixed.blog")
    if not args.file:
        write_log(path, args.events)
    n = sum(1 for _ in bread.read(path))
    cases = {f"{out}{' -s' if s else ''}": BREAD + (["-s"] if s else []) + ["-o", out, path]
             for s in (False, True) for out in ("text", "jsonl", "csv")}
    warm_up()
    walls: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, cmd in cases.items():
            walls[name].append(run_child(cmd)[0])
    print(f"bread outputs: {n:,} events ({os.path.getsize(path):,} bytes); C reader: "
          f"{'yes' if accel.speedups else 'no'}; {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'case':12} {'events/s best':>14} {'median':>12} {'/ text best':>12} {'median':>8}")
    for name, ws in walls.items():
        text = walls["text -s" if name.endswith("-s") else "text"]
        best, median = min(text) / min(ws), statistics.median(text) / statistics.median(ws)
        print(f"{name:12} {n / min(ws):>14,.0f} {n / statistics.median(ws):>12,.0f} "
              f"{best:>11.2f}x {median:>7.2f}x")
    if not args.file:
        os.unlink(path)
        os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
