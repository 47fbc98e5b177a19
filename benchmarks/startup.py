#!/usr/bin/env python3
"""Start-up benchmark: whole processes that import blog or bread, against ``python -c pass``.

Each case is a fresh ``python`` process, timed from its start to its exit (wall, by
``time.perf_counter``; CPU, the child's user + system time from ``os.wait4``). The
cases run by turns with ``python -c pass`` (A B A B ...), so that both see the same
machine; the table gives the medians and the median of the per-pair ratios:

- ``python -c "import blog"`` (issue 31's target: at most 2x);
- ``import blog; blog.basic_config(path); get_logger().info(...)``, then exit (3x);
- ``python -c "import bread"`` (2x) and ``bread small.blog``: 100 events as text (3x);
- for comparison: ``import logging``, the stdlib's first event (``logging.basicConfig``
  to a file, one ``logging.info``, exit), and ``import loguru`` if it is installed;
- blog's first event against the stdlib's, by turns with it rather than with
  ``python -c pass`` (issue 40's target: at most 1x).

The children run this checkout (``PYTHONPATH``) with their bytecode cached (as an
installed package has it: ``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment, and a warm-up run writes it); with ``--installed``, the packages installed
for the Python that runs this script instead. An editable install's import hook, if
there is one, costs every case, ``python -c pass`` included, and so hides the ratios:
measure from a plain install (``python -m venv /tmp/v && /tmp/v/bin/pip install .``,
then ``/tmp/v/bin/python benchmarks/startup.py --installed``). The children run in a
temporary directory, whatever the directory this is run from (``python -c`` puts it first
on ``sys.path``); the summary line names the ``blog`` they imported.

    python benchmarks/startup.py              # 20 pairs per case, ~15 s on 2 cores
    python benchmarks/startup.py --runs 50 --json startup.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: Code run with ``python -c`` by name: the baselines the cases are timed against.
PASS = "pass"
LOGGING_FIRST = ("import logging; logging.basicConfig(filename={text_log!r}, level=logging.INFO); "
                 "logging.info('started %s', 1)")
BLOG_FIRST = "import blog; blog.basic_config({log!r}); blog.get_logger().info('started {{}}', 1)"

#: (name, code run with ``python -c``, the code it runs by turns with, its name in the
#: table, target ratio or None).
CASES = [
    ("import blog", "import blog", PASS, "pass", 2.0),
    ("import blog; basic_config; info; exit", BLOG_FIRST, PASS, "pass", 3.0),
    ("import bread", "import bread", PASS, "pass", 2.0),
    ("bread small.blog (100 events)",
     "import sys; sys.argv = ['bread', {small!r}]; from bread.cli import run; run()",
     PASS, "pass", 3.0),
    ("import logging", "import logging", PASS, "pass", None),
    ("logging basicConfig; info; exit", LOGGING_FIRST, PASS, "pass", None),
    ("import loguru", "import loguru", PASS, "pass", None),
    ("blog's first event, logging's", BLOG_FIRST, LOGGING_FIRST, "logging", 1.0),
]


#: What the children import, told in the summary: blog's file and whether the C speedups
#: of blog and of bread loaded.
WHICH = ("import blog, blog.accel, bread.accel; print(blog.__file__, 'C speedups:', "
         "blog.accel.speedups is not None, bread.accel.speedups is not None)")


def _run(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one whole process, run in ``cwd``."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read() if p.stderr is not None else b""
    if p.stderr is not None:
        p.stderr.close()
    if p.returncode != 0:
        raise RuntimeError(f"{argv} failed: {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def _small_file(path: str, env: dict[str, str], cwd: str) -> None:
    """A file of 100 events, as an application writes them."""
    code = ("import blog\nblog.basic_config({path!r}, mode='wb')\nlog = blog.get_logger('app')\n"
            "for i in range(100):\n    log.info('order {{}} filled at {{}}', i, 101.25 + i)\n"
            "blog.shutdown()\n").format(path=path)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="pairs per case (default 20)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--installed", action="store_true",
                    help="run the packages installed for this Python, not this checkout")
    ap.add_argument("--only", help="only the cases whose name contains this")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not args.installed:
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.abspath(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    rows = []
    load_start = os.getloadavg()[0]
    # The children run in a temporary directory: ``python -c`` puts its working directory
    # first on sys.path, and from the checkout they would import its blog, not the
    # installed one.
    with tempfile.TemporaryDirectory() as tmp:
        which = subprocess.run([sys.executable, "-c", WHICH], env=env, cwd=tmp, check=True,
                               capture_output=True, text=True).stdout.strip()
        small = os.path.join(tmp, "small.blog")
        _small_file(small, env, tmp)
        paths = {"log": os.path.join(tmp, "app.blog"), "small": small,
                 "text_log": os.path.join(tmp, "app.log")}
        for name, code, base_code, base_name, target in CASES:
            if args.only and args.only not in name:
                continue
            if name == "import loguru" and importlib.util.find_spec("loguru") is None:
                print(f"{name:40} not installed")
                continue
            argv = [sys.executable, "-c", code.format(**paths)]
            base = [sys.executable, "-c", base_code.format(**paths)]
            _run(argv, env, tmp)   # warm-up: writes the bytecode
            _run(base, env, tmp)
            walls, cpus, base_walls, base_cpus = [], [], [], []
            for _ in range(args.runs):
                w, c = _run(argv, env, tmp)
                bw, bc = _run(base, env, tmp)
                walls.append(w), cpus.append(c), base_walls.append(bw), base_cpus.append(bc)
            rows.append({
                "case": name, "target": target, "runs": args.runs, "against": base_name,
                "wall_ms": 1000 * statistics.median(walls),
                "cpu_ms": 1000 * statistics.median(cpus),
                "base_wall_ms": 1000 * statistics.median(base_walls),
                "base_cpu_ms": 1000 * statistics.median(base_cpus),
                "wall_ratio": statistics.median(a / b for a, b in zip(walls, base_walls)),
                "cpu_ratio": statistics.median(a / b for a, b in zip(cpus, base_cpus)
                                               if b > 0),
            })
    print(f"{'case':40} {'wall ms':>8} {'cpu ms':>7} {'against':>8} {'its wall':>8} "
          f"{'its cpu':>7} {'x wall':>7} {'x cpu':>6}  target")
    for r in rows:
        target = f"<= {r['target']:g}x" if r["target"] else ""
        print(f"{r['case']:40} {r['wall_ms']:8.1f} {r['cpu_ms']:7.1f} {r['against']:>8} "
              f"{r['base_wall_ms']:8.1f} {r['base_cpu_ms']:7.1f} {r['wall_ratio']:7.2f} "
              f"{r['cpu_ratio']:6.2f}  {target}")
    print(f"({args.runs} pairs per case, each by turns with what it is against; medians; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load {load_start:.1f} to {os.getloadavg()[0]:.1f}, "
          f"{'installed' if args.installed else 'this checkout'}: {which})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
