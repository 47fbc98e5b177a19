#!/usr/bin/env python3
"""Fork benchmark: what ``os.fork()`` costs a process that configured blog (issue 38).

Each case is a fresh process that forks ``--forks`` times, each child calling
``os._exit(0)`` at once and the parent logging one event (blog's cases: the call that
starts blog's threads again) and waiting for it (``os.waitpid``). Two times per fork:
the parent's, from the fork to the return of that log call (what the fork costs the
parent: blog stops and joins its threads before it, and starts them again in that
call), and the whole round trip (the child's after-fork steps too: it opens its own
file). The cases run by turns (A B C A B C ...), so that all see the same machine; the
table gives each case's median over ``--runs`` processes:

- ``no blog``: the loop alone (what a fork of this interpreter costs);
- ``import blog``: blog imported, no output configured (its after-fork steps only);
- ``basic_config(app.blog)``: a plain file: the consumer's thread is stopped before each
  fork and started again after it, and each child opens its own ``app.pid<N>.blog``;
- ``basic_config(rotated set)``: the same, and the set's housekeeping thread.

The children run this checkout (``PYTHONPATH``); ``--compare DIR`` runs blog's cases in
another checkout (its C extensions built) too, by turns with this one's: before and after.

    python benchmarks/fork_cost.py                 # 200 forks x 7 runs per case, ~20 s
    python benchmarks/fork_cost.py --forks 500 --runs 11 --json fork.json
    python benchmarks/fork_cost.py --compare ../main
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: (name, code run before the loop, in the case's directory).
CASES = [
    ("no blog", ""),
    ("import blog", "import blog"),
    ("basic_config(app.blog)", "import blog; blog.basic_config('app.blog')"),
    ("basic_config(rotated set)",
     "import blog; blog.basic_config('app.blog', rotate_bytes=1 << 20); "
     "import time; time.sleep(0.2)"),   # its first sweep is done: the thread idles
]

LOOP = """
import os, time
{setup}
log = blog.get_logger("bench").info if "blog" in globals() else (lambda *a: None)
parent = 0.0
t0 = time.perf_counter()
for _ in range({forks}):
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    log("forked {{}}", pid)
    parent += time.perf_counter() - t
    os.waitpid(pid, 0)
print(parent / {forks}, (time.perf_counter() - t0) / {forks})
"""


def run_case(setup: str, forks: int, env: dict[str, str]) -> tuple[float, float]:
    """Seconds per fork in a fresh process: the parent's, and the round trip."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c",
                              LOOP.format(setup=setup, forks=forks)], cwd=d, env=env,
                             capture_output=True, text=True, check=True)
    parent, whole = out.stdout.split()
    return float(parent), float(whole)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forks", type=int, default=200)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--compare", metavar="DIR", help="another checkout: its figures too")
    args = ap.parse_args()
    checkouts = {"": os.path.abspath(ROOT)}
    if args.compare:
        checkouts[f" [{os.path.basename(os.path.abspath(args.compare))}]"] = \
            os.path.abspath(args.compare)
    cases = [(name + tag, setup, root) for name, setup in CASES
             for tag, root in checkouts.items() if setup or not tag]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in cases}
    for _ in range(args.runs):
        for name, setup, root in cases:
            env = dict(os.environ, PYTHONPATH=root)
            env.pop("PYTHONWARNINGS", None)
            times[name].append(run_case(setup, args.forks, env))
    print(f"Python {sys.version.split()[0]}, {args.forks} forks x {args.runs} runs per case "
          "(medians per fork)\n")
    width = max(len(name) for name in times) + 2
    print(f"{'case':<{width}} {'parent':>10} {'round trip':>11}")
    figures = {}
    for name in times:
        parent = statistics.median(t for t, _ in times[name])
        whole = statistics.median(t for _, t in times[name])
        figures[name] = {"parent": parent, "round_trip": whole}
        print(f"{name:<{width}} {parent * 1e6:7.0f} us {whole * 1e6:8.0f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(python=sys.version, forks=args.forks, runs=args.runs,
                           seconds_per_fork=figures), f, indent=2)


if __name__ == "__main__":
    main()
