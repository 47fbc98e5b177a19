#!/usr/bin/env python3
"""``@blog.traced`` against a plain ``log.info``: the cost of one traced call (issue 27).

One traced call of a function of two ints logs two events (the call, the return); its
target is at most 5x the plain call ``log.info("order {} filled at {}", i, 1.5)``, measured
in the same run, round-robin (best of repeats; wall and the calling thread's CPU). Beside
them, for reference: the function undecorated, and the same traced call through the
Python wrapper (what the pure-Python build runs, and what the C path hands back).
Correlation with OpenTelemetry is off for these rows (where opentelemetry-api is
installed a traced call is a span, which ``benchmarks/otel_call.py`` measures).
The loops are short (10,000 calls of a few ms: the 20,000 events stay below the size at
which a channel wakes the consumer, so no row pays for it, and a loop that short is seldom
preempted on a loaded machine) and many (best of 25).
``benchmarks/hot_path.py`` runs it after its own tables; alone:

    python benchmarks/traced_call.py [--quick]
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import blog  # noqa: E402
from blog import accel, correlation  # noqa: E402
from blog.integrations import traced  # noqa: E402
from timedloop import timed_loop  # noqa: E402  (beside this file)

perf_ns = time.perf_counter_ns
thread_ns = time.thread_time_ns

PLAIN = 'log.info("order {} filled at {}", i, 1.5)'
TRACED = "@blog.traced fill(i, 2): call + return events"
#: Each row: its loop (the call written out, ``i`` the loop's counter) and its object.
LOOPS = {
    PLAIN: timed_loop(globals(), "plain", PLAIN.replace("i,", "_,"), thread_cpu=True),
    TRACED: timed_loop(globals(), "traced", "f(_, 2)", arg="f", thread_cpu=True),
    "the same through the Python wrapper": timed_loop(globals(), "traced_py", "f(_, 2)",
                                                      arg="f", thread_cpu=True),
    "fill(i, 2) undecorated": timed_loop(globals(), "undecorated", "f(_, 2)", arg="f",
                                         thread_cpu=True),
}
TARGET = 5.0


def fill(order_id: int, qty: int) -> int:
    return order_id


def _python_wrapper(**options: Any) -> Callable[..., Any]:
    """``fill`` traced by the Python wrapper alone (as the pure-Python build makes it)."""
    chosen, traced.TracedCall = traced.TracedCall, traced._python_alone
    try:
        return blog.traced(fill, **options)
    finally:
        traced.TracedCall = chosen


def run(cfg: dict, tmp: str) -> dict:
    """Measure the rows round-robin; the figures as a dict."""
    blog.basic_config(os.path.join(tmp, "traced.blog"), mode="wb", otel=False)
    options = dict(severity="info", category="bench")
    objs = [blog.get_logger("bench"), blog.traced(fill, **options),
            _python_wrapper(**options), fill]
    cases = list(zip(LOOPS, LOOPS.values(), objs))
    for _, loop, obj in cases:
        loop(1000, obj)                  # registration, specialization
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in LOOPS}
    for _ in range(cfg["repeats"]):      # round-robin: a slow spell falls on every row
        for name, loop, obj in cases:
            n = cfg["n"]
            gc.collect()
            wall, cpu = loop(n, obj)
            times[name].append((wall / n, cpu / n))
            blog.flush()
    blog.shutdown()
    correlation.use(True)
    return {name: {"ns_per_call": min(w for w, _ in t), "thread_cpu_ns_per_call":
                   min(c for _, c in t), "all": [round(w, 1) for w, _ in t]}
            for name, t in times.items()}


def report(res: dict) -> list[dict]:
    """Print the table and the target; return the target."""
    plain = res[PLAIN]
    w = max(len(k) for k in res) + 2
    print()
    print("@blog.traced: ns per call on the calling thread (best of repeats, loop included)")
    print()
    print(f"{'call':<{w}}{'ns/call':>10}{'x plain':>9}{'thread CPU':>12}{'x plain':>9}")
    print("-" * (w + 40))
    for name, r in res.items():
        x, c = r["ns_per_call"], r["thread_cpu_ns_per_call"]
        print(f"{name:<{w}}{x:>10,.1f}{x / plain['ns_per_call']:>8.2f}x{c:>12,.1f}"
              f"{c / plain['thread_cpu_ns_per_call']:>8.2f}x")
    t = res[TRACED]
    ratio = t["ns_per_call"] / plain["ns_per_call"]
    cpu = t["thread_cpu_ns_per_call"] / plain["thread_cpu_ns_per_call"]
    target = {"target": f"@blog.traced call + return <= {TARGET}x the plain call",
              "pass": ratio <= TARGET,
              "detail": f"{t['ns_per_call']:,.1f} ns vs {plain['ns_per_call']:,.1f} ns: "
                        f"{ratio:.2f}x (thread CPU {cpu:.2f}x)"}
    print()
    print(f"  [{'PASS' if target['pass'] else 'FAIL'}] {target['target']}: {target['detail']}")
    return [target]


def measure(quick: bool, tmp: str) -> dict:
    """Run (small N if ``quick``) and print; the figures, with the target."""
    cfg = dict(n=5_000, repeats=5) if quick else dict(n=10_000, repeats=25)
    print(f"\n@blog.traced: config {cfg}")
    res = run(cfg, tmp)
    return dict(res, targets=report(res), config=cfg)


if __name__ == "__main__":
    print(f"traced benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()}; blog hot path: "
          f"{'C' if accel.speedups is not None else 'pure Python'}")
    with tempfile.TemporaryDirectory(prefix="blog-traced-") as tmp:
        measure("--quick" in sys.argv[1:], tmp)
