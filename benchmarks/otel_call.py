#!/usr/bin/env python3
"""Correlation with OpenTelemetry: what a log call costs inside a span, and outside one.

The rows, each against the plain call (correlation off: ``blog.correlation.use(False)``,
which is what a process without opentelemetry-api runs), by turns in one run (best of the
repeats; wall and the calling thread's CPU):

1. before the application imported OpenTelemetry: ``log.info`` with correlation on (each
   call looks for OpenTelemetry's module in ``sys.modules``);
2. after it did (the SDK's TracerProvider set): ``log.info`` with no span current; inside a
   span (target 2x); the same call with the two ids as arguments (what the values cost);
   a ``logging`` call through the bridge, and an ``@blog.event`` call, inside a span and
   with correlation off; an ``@blog.traced`` call (call and return events), off, a root
   span, inside an OpenTelemetry span.

Targets: inside a span <= 2x the plain call, no span current <= 1.1x.

    python benchmarks/otel_call.py [--quick]      # needs opentelemetry-sdk (the test extra)
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import blog  # noqa: E402
import blog.stdlib  # noqa: E402
from blog import accel, correlation  # noqa: E402
from timedloop import timed_loop  # noqa: E402  (beside this file)

perf_ns = time.perf_counter_ns
thread_ns = time.thread_time_ns

INFO = 'log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")'
loop_info = timed_loop(globals(), "loop_info", INFO, thread_cpu=True)
loop_info_ids = timed_loop(globals(), "loop_info_ids", 'log.info("order {} filled at {} qty {} '
                           '{} {}", 12345, 101.25, "AAPL", "4bf92f3577b34da6a3ce929d0e0e4736", '
                           '"00f067aa0ba902b7")', thread_cpu=True)
loop_bridge = timed_loop(globals(), "loop_bridge",
                         'log.info("order %s filled at %s qty %s", 12345, 101.25, "AAPL")',
                         thread_cpu=True)
loop_event = timed_loop(globals(), "loop_event", 'f(12345, 101.25, "AAPL")', arg="f",
                        thread_cpu=True)
loop_traced = timed_loop(globals(), "loop_traced", "f(_, 2)", arg="f", thread_cpu=True)

PLAIN = "log.info, correlation off (as without OpenTelemetry)"
WAITING = "log.info, on, OpenTelemetry not imported yet"
NO_SPAN = "log.info, on, no span current"
IN_SPAN = "log.info inside a span"
TARGETS = {IN_SPAN: 2.0, NO_SPAN: 1.1, WAITING: 1.1}


class Row:
    """A row: its loop and object, whether correlation is on, and the span it runs in."""

    def __init__(self, name: str, loop: Callable, obj: Any, on: bool = True,
                 span: Callable[[], Any] | None = None) -> None:
        self.name, self.loop, self.obj, self.on, self.span = name, loop, obj, on, span
        self.times: list[tuple[float, float]] = []

    def __call__(self, n: int) -> tuple[int, int]:
        correlation.use(self.on)
        if self.span is None:
            return self.loop(n, self.obj)
        with self.span():
            return self.loop(n, self.obj)


def by_turns(rows: list[Row], cfg: dict) -> None:
    """Each row ``repeats`` times, round-robin (a slow spell falls on every row)."""
    for row in rows:
        row(1000)                        # registration, specialization
    for _ in range(cfg["repeats"]):
        for row in rows:
            n = cfg["n"]
            gc.collect()
            wall, cpu = row(n)
            row.times.append((wall / n, cpu / n))
            blog.flush()


def run(cfg: dict, tmp: str) -> dict[str, dict]:
    blog.basic_config(os.path.join(tmp, "otel.blog"), mode="wb")
    log = blog.get_logger("bench")
    first = [Row(PLAIN, loop_info, log, on=False), Row(WAITING, loop_info, log)]
    if "opentelemetry" in sys.modules:
        raise SystemExit("OpenTelemetry imported before the first rows")
    by_turns(first, cfg)

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
    tracer = trace.get_tracer("bench")

    def span() -> Any:
        return tracer.start_as_current_span("bench")

    lg = logging.getLogger("bench.bridge")
    lg.propagate = False
    lg.setLevel(logging.INFO)
    lg.addHandler(blog.stdlib.BlogHandler())
    event = blog.event("order {} filled at {} qty {}", severity="info")(
        lambda order_id, price, symbol: None)

    def fill(order_id: int, qty: int) -> int:
        return order_id

    traced = blog.traced(fill, severity="info", category="bench")
    rows = [Row(PLAIN, loop_info, log, on=False), Row(NO_SPAN, loop_info, log),
            Row(IN_SPAN, loop_info, log, span=span),
            Row("log.info with the two ids as arguments", loop_info_ids, log, on=False),
            Row("logging call to a BlogHandler, off", loop_bridge, lg, on=False),
            Row("the same inside a span", loop_bridge, lg, span=span),
            Row("@blog.event call, off", loop_event, event, on=False),
            Row("the same inside a span", loop_event, event, span=span),
            Row("@blog.traced call + return, off", loop_traced, traced, on=False),
            Row("the same, a root span", loop_traced, traced),
            Row("the same inside a span", loop_traced, traced, span=span)]
    by_turns(rows, cfg)
    correlation.use(True)
    blog.shutdown()
    res = {}
    for row in first[1:] + rows:
        name = row.name if row.name not in res else f"{row.name} ({row.loop.__name__})"
        res[name] = {"ns_per_call": min(w for w, _ in row.times),
                     "thread_cpu_ns_per_call": min(c for _, c in row.times),
                     "all": [round(w, 1) for w, _ in row.times]}
    res["plain, before the import"] = {"ns_per_call": min(w for w, _ in first[0].times),
                                       "thread_cpu_ns_per_call":
                                           min(c for _, c in first[0].times)}
    return res


def report(res: dict[str, dict]) -> list[dict]:
    """Print the table, each row against its plain call (the one before OpenTelemetry's
    import for the first row, the one of its own group for the others), and the targets."""
    plain = res[PLAIN]
    before = res["plain, before the import"]
    w = max(len(k) for k in res) + 2
    print(f"\n{'call':<{w}}{'ns/call':>10}{'x plain':>9}{'thread CPU':>12}{'x plain':>9}")
    print("-" * (w + 40))
    base = plain
    for name, r in res.items():
        if name == "plain, before the import":
            continue
        if name.endswith(", off"):
            base = r
        ref = before if name == WAITING else base
        x, c = r["ns_per_call"], r["thread_cpu_ns_per_call"]
        print(f"{name:<{w}}{x:>10,.1f}{x / ref['ns_per_call']:>8.2f}x{c:>12,.1f}"
              f"{c / ref['thread_cpu_ns_per_call']:>8.2f}x")
    targets = []
    for name, limit in TARGETS.items():
        ref = before if name == WAITING else plain
        ratio = res[name]["ns_per_call"] / ref["ns_per_call"]
        cpu = res[name]["thread_cpu_ns_per_call"] / ref["thread_cpu_ns_per_call"]
        targets.append({"target": f"{name} <= {limit}x the plain call", "pass": ratio <= limit,
                        "detail": f"{ratio:.2f}x (thread CPU {cpu:.2f}x)"})
        print(f"  [{'PASS' if ratio <= limit else 'FAIL'}] {targets[-1]['target']}: "
              f"{targets[-1]['detail']}")
    return targets


def measure(quick: bool, tmp: str) -> dict:
    cfg = dict(n=5_000, repeats=5) if quick else dict(n=10_000, repeats=25)
    print(f"\ncorrelation with OpenTelemetry: config {cfg}")
    res = run(cfg, tmp)
    return dict(res, targets=report(res), config=cfg)


if __name__ == "__main__":
    print(f"otel benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()}; blog hot path: "
          f"{'C' if accel.speedups is not None else 'pure Python'}")
    with tempfile.TemporaryDirectory(prefix="blog-otel-") as tmp:
        measure("--quick" in sys.argv[1:], tmp)
