#!/usr/bin/env python3
"""Hot-path benchmark: blog against an empty call, stdlib logging, picologging, structlog, loguru.

One run measures, side by side:

1. the cost of one logging call on the calling thread (ns/call, best of several
   repeats of N calls, wall time by ``time.perf_counter_ns``; the calling
   thread's own CPU time by ``time.thread_time_ns`` is shown beside it);
2. the bytes each library puts on disk per event;
3. end-to-end process CPU per event for blog and stdlib logging
   (``time.process_time_ns``: calling thread + blog's consumer thread, until
   ``blog.flush()`` / the handler's ``flush()`` returns);

then checks blog's targets against the figures.

    python benchmarks/hot_path.py              # full run (~1 minute on 2 cores)
    python benchmarks/hot_path.py --quick      # smoke run (a few seconds)
    python benchmarks/hot_path.py --json out.json

Every library writes to its own file in a temporary directory. The optional
libraries (``pip install -e '.[bench]'``) are reported as "not installed" when
missing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import blog  # noqa: E402

perf_ns = time.perf_counter_ns
thread_ns = time.thread_time_ns
process_ns = time.process_time_ns

FMT_BRACE = "order {} filled at {} qty {}"
FMT_PERCENT = "order %s filled at %s qty %s"
LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# Each loop below is written out with literal arguments, so that every library
# sees the same call: a constant format and three constant scalars. The logger
# is a local variable and the method is looked up on each call, as in
# application code (``log.info(...)``). A loop returns (wall ns, thread CPU ns).


def empty(fmt, a, b, c):
    pass


def loop_bare(n: int, _obj: Any = None) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        pass
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_empty(n: int, f: Callable = empty) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        f("order {} filled at {} qty {}", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_blog_info(n: int, log: Any) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_blog_event(n: int, order_filled: Callable) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        order_filled(12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_blog_disabled(n: int, log: Any) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        log.debug("order {} filled at {} qty {}", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_blog_disabled_local(n: int, log: Any) -> tuple[int, int]:
    debug = log.debug
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        debug("order {} filled at {} qty {}", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_percent(n: int, log: Any) -> tuple[int, int]:
    """stdlib logging and picologging."""
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        log.info("order %s filled at %s qty %s", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_structlog(n: int, log: Any) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        log.info("order filled", order_id=12345, price=101.25, symbol="AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


def loop_loguru(n: int, log: Any) -> tuple[int, int]:
    c0 = thread_ns()
    t0 = perf_ns()
    for _ in range(n):
        log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")
    t1 = perf_ns()
    return t1 - t0, thread_ns() - c0


# --- measuring ---------------------------------------------------------------


def best_of(loop: Callable, obj: Any, n: int, repeats: int,
            before: Callable[[], None] | None = None,
            after: Callable[[], None] | None = None) -> dict:
    """Best (min) wall and thread-CPU ns/call over ``repeats`` runs of ``n`` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        gc.collect()
        wall, cpu = loop(n, obj)
        if after is not None:
            after()
        walls.append(wall / n)
        cpus.append(cpu / n)
    return {"ns_per_call": min(walls), "thread_cpu_ns_per_call": min(cpus),
            "all_ns_per_call": [round(w, 1) for w in walls], "n": n, "repeats": repeats}


class Counted:
    """Events one library wrote to its file, for bytes/event."""

    def __init__(self) -> None:
        self.events = 0

    def wrap(self, loop: Callable) -> Callable:
        def counted(n: int, obj: Any) -> tuple[int, int]:
            r = loop(n, obj)
            self.events += n
            return r
        return counted


def file_stats(path: str, events: int) -> dict:
    size = os.path.getsize(path)
    return {"file": os.path.basename(path), "bytes": size, "events": events,
            "bytes_per_event": size / events if events else float("nan")}


def not_installed(name: str, exc: Exception) -> dict:
    return {"status": "not installed", "error": f"{type(exc).__name__}: {exc}", "name": name}


# --- the cases ---------------------------------------------------------------


def bench_blog(tmp: str, cfg: dict, out: dict) -> None:
    s = blog.default_session()
    repeats = cfg["repeats"]
    n = cfg["n_fast"]

    def check_backlog(label: str) -> Callable[[], None]:
        # After the timed loop: how far behind the consumer is, then flush.
        def after() -> None:
            backlog = s.pending()
            worst = out["blog_consumer"].setdefault(label, {"max_backlog_after_loop": 0})
            worst["max_backlog_after_loop"] = max(worst["max_backlog_after_loop"], backlog)
            blog.flush()
        return after

    out["blog_consumer"] = {}

    # (b) log.info, enabled, the consumer writing to a file.
    path = os.path.join(tmp, "blog_info.blog")
    blog.basic_config(path, mode="wb")
    log = blog.get_logger("bench")
    off = blog.get_logger("bench.off")
    off.set_min_severity("info")               # debug is below the minimum: disabled
    counter = Counted()
    w0 = s.stats.events_written
    d0 = s.stats.events_dropped
    counted_info = counter.wrap(loop_blog_info)
    counted_info(1000, log)                     # warm-up: registers the call site
    blog.flush()
    out["per_call"]["blog log.info"] = best_of(counted_info, log, n, repeats,
                                               after=check_backlog("blog log.info"))

    # (d) disabled call: log.debug below the logger's minimum severity.
    loop_blog_disabled(1000, off)
    out["per_call"]["blog disabled (log.debug)"] = best_of(loop_blog_disabled, off, n, repeats)
    loop_blog_disabled_local(1000, off)
    out["per_call"]["blog disabled, method in a local"] = best_of(
        loop_blog_disabled_local, off, n, repeats)

    blog.flush()
    out["bytes"]["blog log.info"] = dict(file_stats(path, counter.events),
                                         written=s.stats.events_written - w0,
                                         dropped=s.stats.events_dropped - d0)

    # (c) @blog.event function, to its own file.
    path = os.path.join(tmp, "blog_event.blog")
    blog.basic_config(path, mode="wb")

    @blog.event("order {} filled at {} qty {}", severity="info", category="bench")
    def order_filled(order_id: int, price: float, symbol: str):
        ...

    counter = Counted()
    w0 = s.stats.events_written
    d0 = s.stats.events_dropped
    counted_event = counter.wrap(loop_blog_event)
    counted_event(1000, order_filled)
    blog.flush()
    out["per_call"]["blog @event"] = best_of(counted_event, order_filled, n, repeats,
                                             after=check_backlog("blog @event"))
    blog.flush()
    out["bytes"]["blog @event"] = dict(file_stats(path, counter.events),
                                       written=s.stats.events_written - w0,
                                       dropped=s.stats.events_dropped - d0)

    # (3) end to end: process CPU (all threads) for n_e2e events until flush() returns.
    path = os.path.join(tmp, "blog_e2e.blog")
    blog.basic_config(path, mode="wb")
    w0 = s.stats.events_written
    d0 = s.stats.events_dropped
    loop_blog_info(1000, log)
    blog.flush()
    m = cfg["n_e2e_blog"]
    cpu_runs, wall_runs = [], []
    for _ in range(cfg["e2e_repeats"]):
        gc.collect()
        c0, t0 = process_ns(), perf_ns()
        loop_blog_info(m, log)
        blog.flush()
        c1, t1 = process_ns(), perf_ns()
        cpu_runs.append((c1 - c0) / m)
        wall_runs.append((t1 - t0) / m)
    events = 1000 + m * cfg["e2e_repeats"]
    out["e2e"]["blog log.info"] = {
        "cpu_ns_per_event": min(cpu_runs), "wall_ns_per_event": min(wall_runs),
        "all_cpu_ns_per_event": [round(c, 1) for c in cpu_runs], "events": m,
        "repeats": cfg["e2e_repeats"]}
    out["bytes"]["blog e2e file"] = dict(file_stats(path, events),
                                         written=s.stats.events_written - w0,
                                         dropped=s.stats.events_dropped - d0)
    blog.shutdown()


def stdlib_logger(name: str, path: str):
    import logging
    lg = logging.getLogger(name)
    lg.handlers.clear()
    lg.propagate = False
    lg.setLevel(logging.INFO)
    h = logging.FileHandler(path, mode="w", encoding="utf-8")
    h.setFormatter(logging.Formatter(LINE_FORMAT))
    lg.addHandler(h)
    return lg, h


def bench_stdlib(tmp: str, cfg: dict, out: dict) -> None:
    path = os.path.join(tmp, "stdlib.log")
    lg, h = stdlib_logger("bench", path)
    counter = Counted()
    loop = counter.wrap(loop_percent)
    loop(1000, lg)
    out["per_call"]["stdlib logging FileHandler"] = best_of(loop, lg, cfg["n_slow"],
                                                            cfg["repeats"], after=h.flush)
    h.flush()
    out["bytes"]["stdlib logging FileHandler"] = file_stats(path, counter.events)
    h.close()
    lg.removeHandler(h)

    # end to end: synchronous, so this is the calling thread plus the write syscalls.
    path = os.path.join(tmp, "stdlib_e2e.log")
    lg, h = stdlib_logger("bench.e2e", path)
    loop_percent(1000, lg)
    m = cfg["n_e2e_stdlib"]
    cpu_runs, wall_runs = [], []
    for _ in range(cfg["e2e_repeats"]):
        gc.collect()
        c0, t0 = process_ns(), perf_ns()
        loop_percent(m, lg)
        h.flush()
        c1, t1 = process_ns(), perf_ns()
        cpu_runs.append((c1 - c0) / m)
        wall_runs.append((t1 - t0) / m)
    out["e2e"]["stdlib logging FileHandler"] = {
        "cpu_ns_per_event": min(cpu_runs), "wall_ns_per_event": min(wall_runs),
        "all_cpu_ns_per_event": [round(c, 1) for c in cpu_runs], "events": m,
        "repeats": cfg["e2e_repeats"]}
    h.close()
    lg.removeHandler(h)


def bench_picologging(tmp: str, cfg: dict, out: dict) -> None:
    name = "picologging FileHandler"
    try:
        import picologging
    except Exception as exc:  # ImportError, or a broken binary wheel
        out["per_call"][name] = not_installed("picologging", exc)
        return
    path = os.path.join(tmp, "picologging.log")
    lg = picologging.getLogger("bench")
    lg.propagate = False
    lg.setLevel(picologging.INFO)
    h = picologging.FileHandler(path, mode="w", encoding="utf-8")
    h.setFormatter(picologging.Formatter(LINE_FORMAT))
    lg.addHandler(h)
    counter = Counted()
    loop = counter.wrap(loop_percent)
    loop(1000, lg)
    out["per_call"][name] = best_of(loop, lg, cfg["n_slow"], cfg["repeats"], after=h.flush)
    h.flush()
    out["bytes"][name] = file_stats(path, counter.events)
    h.close()
    lg.removeHandler(h)


def bench_structlog(tmp: str, cfg: dict, out: dict) -> None:
    name = "structlog (JSON line)"
    try:
        import structlog
    except Exception as exc:
        out["per_call"][name] = not_installed("structlog", exc)
        return
    import logging
    path = os.path.join(tmp, "structlog.log")
    fh = open(path, "w", encoding="utf-8")
    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.WriteLoggerFactory(file=fh),
        cache_logger_on_first_use=True,
    )
    lg = structlog.get_logger().bind()   # the concrete bound logger, not the lazy proxy
    counter = Counted()
    loop = counter.wrap(loop_structlog)
    loop(1000, lg)
    out["per_call"][name] = best_of(loop, lg, cfg["n_slow"], cfg["repeats"])
    fh.flush()
    out["bytes"][name] = file_stats(path, counter.events)
    fh.close()
    structlog.reset_defaults()


def bench_loguru(tmp: str, cfg: dict, out: dict) -> None:
    name = "loguru file sink"
    try:
        from loguru import logger
    except Exception as exc:
        out["per_call"][name] = not_installed("loguru", exc)
        return
    path = os.path.join(tmp, "loguru.log")
    logger.remove()   # the default stderr sink
    sink = logger.add(path, mode="w", level="INFO",
                      format="{time:YYYY-MM-DD HH:mm:ss,SSS} {level} {name} {message}")
    counter = Counted()
    loop = counter.wrap(loop_loguru)
    loop(1000, logger)
    out["per_call"][name] = best_of(loop, logger, cfg["n_slow"], cfg["repeats"])
    logger.remove(sink)  # closes (and flushes) the file
    out["bytes"][name] = file_stats(path, counter.events)


# --- report ------------------------------------------------------------------


def fmt_ns(x: float) -> str:
    return f"{x:,.1f}"


def report(out: dict, cfg: dict) -> list[dict]:
    pc, by, e2e = out["per_call"], out["bytes"], out["e2e"]
    std = pc.get("stdlib logging FileHandler", {}).get("ns_per_call")
    loop_ns = pc["(bare for-loop, for reference)"]["ns_per_call"]

    print()
    print("1. Per-call cost on the calling thread (best of repeats; wall = perf_counter_ns,")
    print("   thread CPU = thread_time_ns of the calling thread only; loop overhead included)")
    print()
    w = max(len(k) for k in pc) + 2
    print(f"{'case':<{w}}{'ns/call':>10}{'thread CPU':>12}{'stdlib/x':>10}{'N x repeats':>15}")
    print("-" * (w + 47))
    for name, r in pc.items():
        if r.get("status") == "not installed":
            print(f"{name:<{w}}{'not installed':>32}   ({r['error']})")
            continue
        ratio = f"{std / r['ns_per_call']:.1f}x" if std else "-"
        print(f"{name:<{w}}{fmt_ns(r['ns_per_call']):>10}{fmt_ns(r['thread_cpu_ns_per_call']):>12}"
              f"{ratio:>10}{r['n']:>9,} x {r['repeats']}")
    e = pc["(a) empty function"]["ns_per_call"]
    d = pc["blog disabled (log.debug)"]["ns_per_call"]
    dl = pc["blog disabled, method in a local"]["ns_per_call"]
    print()
    print(f"disabled / empty: {d / e:.2f}x  ({fmt_ns(d)} / {fmt_ns(e)} ns);"
          f" without the for-loop's {fmt_ns(loop_ns)} ns: {(d - loop_ns) / (e - loop_ns):.2f}x")
    print(f"disabled with the method in a local / empty: {dl / e:.2f}x")
    cons = out.get("blog_consumer", {})
    for label, c in cons.items():
        print(f"{label}: largest backlog left in the channel at the end of a timed loop: "
              f"{c['max_backlog_after_loop']:,} events")
    for label in ("blog log.info", "blog @event", "blog e2e file"):
        b = by.get(label)
        if b:
            print(f"{label}: events queued {b['events']:,}, written {b['written']:,}, "
                  f"dropped {b['dropped']:,}")

    print()
    print("2. Bytes per event on disk (file size / events)")
    print()
    w2 = max(len(k) for k in by) + 2
    print(f"{'case':<{w2}}{'bytes':>14}{'events':>12}{'bytes/event':>13}")
    print("-" * (w2 + 39))
    for name, b in by.items():
        print(f"{name:<{w2}}{b['bytes']:>14,}{b['events']:>12,}{b['bytes_per_event']:>13.2f}")
    std_b = by.get("stdlib logging FileHandler", {}).get("bytes_per_event")
    blog_b = by.get("blog log.info", {}).get("bytes_per_event")
    if std_b and blog_b:
        print(f"\nblog / stdlib bytes per event: {blog_b / std_b:.3f}")

    print()
    print("3. End to end: process CPU (all threads) per event, until flush() returns")
    print()
    w3 = max(len(k) for k in e2e) + 2
    print(f"{'case':<{w3}}{'CPU ns/event':>14}{'wall ns/event':>15}{'events':>12}{'runs (CPU ns/event)':>28}")
    print("-" * (w3 + 69))
    for name, r in e2e.items():
        runs = ", ".join(f"{c:,.0f}" for c in r["all_cpu_ns_per_event"])
        print(f"{name:<{w3}}{fmt_ns(r['cpu_ns_per_event']):>14}{fmt_ns(r['wall_ns_per_event']):>15}"
              f"{r['events']:>12,}{runs:>28}")
    std_e = e2e["stdlib logging FileHandler"]["cpu_ns_per_event"]
    blog_e = e2e["blog log.info"]["cpu_ns_per_event"]
    print(f"\nstdlib / blog end-to-end CPU: {std_e / blog_e:.1f}x")

    targets = []

    def target(name: str, ok: bool, detail: str) -> None:
        targets.append({"target": name, "pass": ok, "detail": detail})

    info = pc["blog log.info"]["ns_per_call"]
    ev = pc["blog @event"]["ns_per_call"]
    target("enabled log.info <= 1/25 of stdlib", std / info >= 25,
           f"{fmt_ns(info)} ns vs stdlib {fmt_ns(std)} ns: {std / info:.1f}x faster (need >= 25x)")
    target("@blog.event <= 1/25 of stdlib", std / ev >= 25,
           f"{fmt_ns(ev)} ns vs stdlib {fmt_ns(std)} ns: {std / ev:.1f}x faster (need >= 25x)")
    target("end-to-end CPU <= 1/12 of stdlib", std_e / blog_e >= 12,
           f"{fmt_ns(blog_e)} ns vs stdlib {fmt_ns(std_e)} ns per event: "
           f"{std_e / blog_e:.1f}x less (need >= 12x)")
    target("disabled call <= 1.2x empty call", d / e <= 1.2,
           f"{fmt_ns(d)} ns vs empty {fmt_ns(e)} ns: {d / e:.2f}x (need <= 1.2x)")
    target("bytes/event <= 0.35x stdlib", blog_b / std_b <= 0.35,
           f"{blog_b:.2f} vs stdlib {std_b:.2f} bytes/event: {blog_b / std_b:.3f}x (need <= 0.35x)")
    print()
    print("Targets")
    print()
    for t in targets:
        print(f"  [{'PASS' if t['pass'] else 'FAIL'}] {t['target']}: {t['detail']}")
    return targets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N: a smoke run of a few seconds")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory of logs")
    args = ap.parse_args(argv)

    if args.quick:
        cfg = dict(n_fast=20_000, n_slow=5_000, repeats=3,
                   n_e2e_blog=100_000, n_e2e_stdlib=20_000, e2e_repeats=1)
    else:
        cfg = dict(n_fast=200_000, n_slow=40_000, repeats=7,
                   n_e2e_blog=1_000_000, n_e2e_stdlib=200_000, e2e_repeats=3)

    env = {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
           "platform": platform.platform(), "cpus": os.cpu_count(),
           "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
           "blog": blog.__version__, "gc": gc.isenabled(), "quick": args.quick}
    for mod in ("picologging", "structlog", "loguru"):
        try:
            from importlib.metadata import version
            env[mod] = version(mod)
        except Exception:
            env[mod] = "not installed"
    print(f"hot_path benchmark: Python {env['python']} ({env['implementation']}) on "
          f"{env['platform']}, {env['cpus']} CPUs, load average {env['loadavg']}")
    print("versions: " + ", ".join(f"{k} {env[k]}" for k in ("blog", "picologging", "structlog",
                                                             "loguru")))
    print(f"config: {cfg}")

    out: dict[str, Any] = {"env": env, "config": cfg, "per_call": {}, "bytes": {}, "e2e": {}}
    tmp = tempfile.mkdtemp(prefix="blog-bench-")
    start = perf_ns()
    try:
        pc = out["per_call"]
        loop_bare(1000)
        pc["(bare for-loop, for reference)"] = best_of(loop_bare, None, cfg["n_fast"],
                                                       cfg["repeats"])
        loop_empty(1000, empty)
        pc["(a) empty function"] = best_of(loop_empty, empty, cfg["n_fast"], cfg["repeats"])
        bench_blog(tmp, cfg, out)
        bench_stdlib(tmp, cfg, out)
        bench_picologging(tmp, cfg, out)
        bench_structlog(tmp, cfg, out)
        bench_loguru(tmp, cfg, out)
        out["targets"] = report(out, cfg)
    finally:
        if args.keep:
            print(f"\nlogs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    out["env"]["seconds"] = (perf_ns() - start) / 1e9
    out["env"]["loadavg_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\ntotal {out['env']['seconds']:.1f} s; load average after {out['env']['loadavg_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
