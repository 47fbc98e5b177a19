#!/usr/bin/env python3
"""Reader benchmark: bread (CLI and library) on 1 million events, beside the C++ bread.

One run measures, side by side, events per second and peak RSS of:

- the ``bread`` command, default format and ``-f "%m"``, gzip input, sorted
  (``-s``), filtered, ``-o jsonl`` and ``-o csv``, output to /dev/null (a child
  process each; wall time and the child's own peak RSS);
- ``bread.read`` decode only, and with ``ev.message`` touched (in this process);
- with ``BREAD_CXX`` (a C++ bread binary) and ``BREAD_CXX_FILE`` (a C++ binlog
  file of the same event shape), the C++ bread on it, default, ``-f %m`` and ``-s``,
  and our ``bread`` on that same C++ file (issue 28's target: at least as fast),
  interleaved with ours so that both see the same machine; the ratios compare.

The events: ``log.info("order {} filled at {} qty {}", i, 101.25 + i, "AAPL")``
from 4 threads, written once by blog into a temporary file (``--file`` reuses
one). ``benchmarks/README.md`` says how to get the C++ bread and its file.

    python benchmarks/bread_throughput.py               # ~1 minute on 2 cores
    python benchmarks/bread_throughput.py --quick       # 100k events, 1 repeat
    BREAD_CXX=../shared/cxx-binlog/bread BREAD_CXX_FILE=/tmp/cxx1m.blog \\
        python benchmarks/bread_throughput.py --json out.json
    BREAD_CXX=... BREAD_CXX_FILE=... python benchmarks/bread_throughput.py --cxx-only

``--cxx-only`` times only the C++ bread and ours on its file, each case of ours right
after the C++ bread's same case, and gives the children's CPU time beside their wall time
(on a loaded machine the CPU time moves less).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import blog  # noqa: E402
import bread  # noqa: E402
import bread.sinks.batches  # noqa: E402
from bread import accel  # noqa: E402

BREAD = [sys.executable, "-m", "bread"]


def write_log(path: str, n: int) -> None:
    """n events of the benchmark's shape from 4 threads named w0..w3."""
    s = blog.Session()
    log = s.get_logger("main")
    stream = blog.FileOutputStream(path, mode="wb")
    c = blog.Consumer(s, stream).start()

    def work(k: int) -> None:
        s.writer().name = f"w{k}"
        for i in range(k, n, 4):
            log.info("order {} filled at {} qty {}", i, 101.25 + i, "AAPL")

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c.stop()
    stream.close()


TIME = "/usr/bin/time"   # GNU time: forks the child after its own exec, so the child's
                         # peak RSS does not count this process's memory (a fork would)


#: The children's environment: as an installed package runs, from compiled bytecode. With
#: PYTHONDONTWRITEBYTECODE set (some sandboxes and containers set it), every child would
#: compile bread's modules from source first, about 0.2 s of a 0.5 s run; ``warm_up``
#: writes the caches once before any timing.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def warm_up() -> None:
    """Compile bread's modules (and pyarrow's) to bytecode, as installing them does."""
    subprocess.run([sys.executable, "-c", "import bread.cli, bread.merge, bread.sinks.batches\n"
                    "try:\n    import pyarrow\nexcept ImportError:\n    pass"],
                   check=True, env=CHILD_ENV)


def run_child(cmd: list[str], env: dict | None = None) -> tuple[float, int | None, float]:
    """Wall seconds, peak RSS (KiB, None if unknown) and CPU seconds (user and system,
    the wall time if unknown) of one command, output to /dev/null."""
    env = CHILD_ENV if env is None else {k: v for k, v in env.items()
                                         if k != "PYTHONDONTWRITEBYTECODE"}
    timed = os.path.exists(TIME)
    full = [TIME, "-f", "%M %U %S"] + cmd if timed else cmd
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        p = subprocess.run(full, stdout=null, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t0
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err[-500:]}")
    if not timed:
        return wall, None, wall
    rss, user, system = err.split()[-3:]
    return wall, int(rss), float(user) + float(system)


FIXED = ["time", "clock", "severity", "category", "writer", "writer_id", "source_id", "message"]

#: Library cases run in a fresh process each (the figure is the loop's own time): this
#: process, which wrote the log, holds far more objects, and the collector would see them.
_LIBRARY = {
    "decode": "for ev in bread.read(path): pass",
    "message": "for ev in bread.read(path): ev.message",
    "batches-fixed": f"for b in bread.read_batches(path, {FIXED!r}): pass",
    "batches-all": "for b in bread.read_batches(path): pass",
}


def time_library(path: str, case: str) -> float:
    # The batch cases import pyarrow before the clock starts: a fixed cost of about 0.08 s
    # per process, not a cost per row (the table in docs/performance.md says so).
    arrow = case.startswith("batches") and bread.sinks.batches.has_arrow()
    pre = "import pyarrow\n" if arrow else ""
    code = ("import sys, time, bread\n" + pre + "path = sys.argv[1]\nt0 = time.perf_counter()\n"
            + _LIBRARY[case] + "\nprint(time.perf_counter() - t0)\n")
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                       env=CHILD_ENV)
    if r.returncode != 0:
        raise SystemExit(f"library case {case} failed: {r.stderr[-500:]}")
    return float(r.stdout.split()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="100k events, 1 repeat")
    ap.add_argument("--file", help="read this blog file (of the benchmark's shape) instead")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--cxx-only", action="store_true",
                    help="only the C++ bread and bread on its file (BREAD_CXX, BREAD_CXX_FILE)")
    args = ap.parse_args()
    if args.cxx_only:
        return cxx_only(args.repeats)
    if args.quick:
        args.events, args.repeats = 100_000, 1
    cxx, cxx_file = os.environ.get("BREAD_CXX"), os.environ.get("BREAD_CXX_FILE")
    tmp = tempfile.mkdtemp(prefix="bread-bench-")
    path = args.file or os.path.join(tmp, "orders.blog")
    if not args.file:
        write_log(path, args.events)
    n = sum(1 for _ in bread.read(path))
    n_cxx = None
    if cxx and cxx_file:
        r = subprocess.run([cxx, "-f", "%m", cxx_file], capture_output=True, check=True)
        n_cxx = r.stdout.count(b"\n")

    gz = os.path.join(tmp, "orders.blog.gz")
    with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    cases: list[tuple[str, list[str], int, dict | None]] = [
        ("bread, default format", BREAD + [path], n, None),
        ("bread -s (sorted)", BREAD + ["-s", path], n, None),
        ("bread -f %m", BREAD + ["-f", "%m", path], n, None),
        ("bread -f %m, gzip input", BREAD + ["-f", "%m", gz], n, None),
        ("bread -l error (filter leaves out all)", BREAD + ["-l", "error", path], n, None),
        ("bread -w w1 (filter keeps 1/4)", BREAD + ["-w", "w1", path], n, None),
        ("bread -o jsonl", BREAD + ["-o", "jsonl", path], n, None),
        ("bread -o csv", BREAD + ["-o", "csv", path], n, None),
        ("bread, default format, pure Python", BREAD + [path], n,
         {**os.environ, "BREAD_PURE_PYTHON": "1"}),
    ]
    if n_cxx:
        cases += [
            ("C++ bread, default format", [cxx, cxx_file], n_cxx, None),
            ("C++ bread -f %m", [cxx, "-f", "%m", cxx_file], n_cxx, None),
            ("C++ bread -s", [cxx, "-s", cxx_file], n_cxx, None),
            ("bread on the C++ file, default format", BREAD + [cxx_file], n_cxx, None),
            ("bread on the C++ file, -f %m", BREAD + ["-f", "%m", cxx_file], n_cxx, None),
            ("bread on the C++ file, -s", BREAD + ["-s", cxx_file], n_cxx, None),
        ]
    warm_up()
    walls: dict[str, list[float]] = {c[0]: [] for c in cases}
    rss: dict[str, int | None] = {c[0]: None for c in cases}
    for rep in range(args.repeats):   # interleaved: every case sees the same machine
        for name, cmd, _, env in cases:
            if "pure Python" in name and rep > 0:
                continue   # slow: once is enough
            w, m, _ = run_child(cmd, env)
            walls[name].append(w)
            rss[name] = m if m is None else max(rss[name] or 0, m)
    arrow = "Arrow" if bread.sinks.batches.has_arrow() else "lists"
    lib_cases = {"bread.read, decode only": "decode",
                 "bread.read, ev.message touched": "message",
                 f"read_batches, fixed columns + message ({arrow})": "batches-fixed",
                 f"read_batches, all columns ({arrow})": "batches-all"}
    lib: dict[str, list[float]] = {name: [] for name in lib_cases}
    for _ in range(args.repeats):
        for name, case in lib_cases.items():
            lib[name].append(time_library(path, case))

    rows: list[dict[str, Any]] = []
    for name, _, count, _ in cases:
        rows.append({"case": name, "events": count, "median_s": statistics.median(walls[name]),
                     "events_per_s": count / statistics.median(walls[name]),
                     "best_events_per_s": count / min(walls[name]),
                     "peak_rss_mib": None if rss[name] is None else rss[name] / 1024})
    for name, ts in lib.items():
        rows.append({"case": name, "events": n, "median_s": statistics.median(ts),
                     "events_per_s": n / statistics.median(ts),
                     "best_events_per_s": n / min(ts), "peak_rss_mib": None})
    by = {r["case"]: r for r in rows}

    print(f"bread throughput: {n:,} events ({os.path.getsize(path):,} bytes); "
          f"C reader: {'yes' if accel.speedups else 'no'}; "
          f"{platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    print("(child processes: wall time including interpreter start-up; output to /dev/null)")
    print(f"{'case':46} {'events/s':>12} {'best':>12} {'peak RSS':>10}")
    print("(events/s: events in the file per second of reading, whatever the filter keeps; "
          "the median of the repeats, and the best)")
    for r in rows:
        mem = f"{r['peak_rss_mib']:.1f} MiB" if r["peak_rss_mib"] is not None else "-"
        print(f"{r['case']:46} {r['events_per_s']:>12,.0f} {r['best_events_per_s']:>12,.0f} "
              f"{mem:>10}")
    def rel(a: str, b: str) -> str:
        """The ratio of two rows: of their medians, and of their bests."""
        med = by[a]["events_per_s"] / by[b]["events_per_s"]
        best = by[a]["best_events_per_s"] / by[b]["best_events_per_s"]
        return f"{med:.2f}x (best: {best:.2f}x)"

    # The best of the repeats is the figure to judge by on a shared machine: other work
    # only ever adds time (as the timeit docs say of its min()); the median is shown too.
    print("ratios: of the medians (of the bests)")
    print(f"gzip input / the same file uncompressed (bread -f %m): "
          f"{rel('bread -f %m, gzip input', 'bread -f %m')}")
    # Also per repeat: the two run one after the other, at the same moment of the machine.
    pairs = [u / t for u, t in zip(walls["bread, default format"], walls["bread -s (sorted)"])]
    print(f"sorted / unsorted (default format): {rel('bread -s (sorted)', 'bread, default format')}"
          f"; per repeat {', '.join(f'{p:.2f}' for p in pairs)}, "
          f"median {statistics.median(pairs):.2f}x")
    print(f"filtered (all left out) / unfiltered: "
          f"{rel('bread -l error (filter leaves out all)', 'bread, default format')}")
    for out in ("jsonl", "csv"):
        ratio = rel(f'bread -o {out}', 'bread, default format')
        print(f"-o {out} / text (default format): {ratio}")
    if n_cxx:
        print("ours / C++, events per second:")
        for ours, theirs in (("bread, default format", "C++ bread, default format"),
                             ("bread -f %m", "C++ bread -f %m"),
                             ("bread -s (sorted)", "C++ bread -s"),
                             ("bread on the C++ file, default format",
                              "C++ bread, default format"),
                             ("bread on the C++ file, -f %m", "C++ bread -f %m"),
                             ("bread on the C++ file, -s", "C++ bread -s")):
            print(f"  {ours:38} {rel(ours, theirs)}")
    else:
        print("(set BREAD_CXX and BREAD_CXX_FILE to time the C++ bread in the same run)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "python": platform.python_version(),
                       "machine": platform.machine(), "cpus": os.cpu_count()}, f, indent=2)
    if not args.file:
        os.unlink(path)
    os.unlink(gz)
    os.rmdir(tmp)
    return 0


#: bread's cases on the C++ file, each after the C++ bread's same one.
CXX_CASES: tuple[tuple[str, list[str]], ...] = (
    ("default format", []), ("-f %m", ["-f", "%m"]), ("-s", ["-s"]))


def cxx_only(repeats: int) -> int:
    """The C++ bread and ours on its file, by turns: per case, the medians of wall and
    CPU time and ours / the C++ bread's events per second (the median of each turn's
    ratio too)."""
    cxx, cxx_file = os.environ.get("BREAD_CXX"), os.environ.get("BREAD_CXX_FILE")
    if not (cxx and cxx_file):
        raise SystemExit("--cxx-only needs BREAD_CXX and BREAD_CXX_FILE")
    r = subprocess.run([cxx, "-f", "%m", cxx_file], capture_output=True, check=True)
    n = r.stdout.count(b"\n")
    warm_up()
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    load = [os.getloadavg()[0]]
    for _ in range(repeats):
        for case, argv in CXX_CASES:
            for who, cmd in (("C++", [cxx, *argv, cxx_file]), ("ours", BREAD + argv + [cxx_file])):
                wall, _, cpu = run_child(cmd)
                times.setdefault((case, who), []).append((wall, cpu))
        load.append(os.getloadavg()[0])
    print(f"bread on a C++ binlog file ({n:,} events, {os.path.getsize(cxx_file):,} bytes) "
          f"against the C++ bread, {repeats} turns; load average {min(load):.1f} to "
          f"{max(load):.1f}")
    print(f"{'case':16} {'C++ events/s':>13} {'ours events/s':>14} {'wall ratio':>11} "
          f"{'per turn':>9} {'CPU ratio':>10} {'per turn':>9}")
    for case, _ in CXX_CASES:
        theirs, ours = times[(case, "C++")], times[(case, "ours")]

        def med(ts: list[tuple[float, float]], k: int) -> float:
            return statistics.median(t[k] for t in ts)
        turns = [[t[k] / o[k] for t, o in zip(theirs, ours)] for k in (0, 1)]
        print(f"{case:16} {n / med(theirs, 0):>13,.0f} {n / med(ours, 0):>14,.0f} "
              f"{med(theirs, 0) / med(ours, 0):>10.2f}x {statistics.median(turns[0]):>8.2f}x "
              f"{med(theirs, 1) / med(ours, 1):>9.2f}x {statistics.median(turns[1]):>8.2f}x")
    print("(events/s: of the median wall time, start-up included, output to /dev/null; "
          "ratios: ours / the C++ bread's events per second)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
