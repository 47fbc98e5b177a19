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

    python benchmarks/hot_path.py              # full run (~4 minutes on 2 cores)
    python benchmarks/hot_path.py --quick      # smoke run (a few seconds)
    python benchmarks/hot_path.py --json out.json

Every library writes to its own file in a temporary directory. The optional libraries
(``pip install -e '.[bench]'``) are reported as "not installed" when missing.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout

import blog  # noqa: E402
import structured  # noqa: E402  (beside this file: keyword fields, rich values, exceptions)
import traced_call  # noqa: E402  (beside this file: @blog.traced against the plain call)
from hot_path_report import blog_hot_path, report  # noqa: E402  (beside this file)
from timedloop import timed_loop  # noqa: E402  (beside this file)

perf_ns, thread_ns, process_ns = time.perf_counter_ns, time.thread_time_ns, time.process_time_ns

LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# Each loop has its call written out with literal arguments (timedloop.py compiles it into
# the loop's body): every library sees a constant format and three constant scalars, the
# method looked up on each call as in application code. A loop gives (wall, thread CPU) ns.


def empty(fmt, a, b, c):
    pass


def _loop(name: str, stmt: str, arg: str = "log", before: str = "") -> Callable:
    return timed_loop(globals(), name, stmt, arg=arg, before=before, thread_cpu=True)


loop_bare = _loop("loop_bare", "pass", arg="_obj")
loop_empty = _loop("loop_empty", 'f("order {} filled at {} qty {}", 12345, 101.25, "AAPL")',
                   arg="f")
loop_blog_info = _loop("loop_blog_info",
                       'log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")')
loop_blog_info5 = _loop("loop_blog_info5", 'log.info("order {} filled at {} qty {} {} {}", 12345, '
                        '101.25, "AAPL", "r-12345", "bob")')   # with a context's two values
loop_blog_event = _loop("loop_blog_event", 'order_filled(12345, 101.25, "AAPL")',
                        arg="order_filled")
loop_blog_disabled = _loop("loop_blog_disabled",
                           'log.debug("order {} filled at {} qty {}", 12345, 101.25, "AAPL")')
loop_blog_disabled_local = _loop(
    "loop_blog_disabled_local", 'debug("order {} filled at {} qty {}", 12345, 101.25, "AAPL")',
    before="debug = log.debug")
#: stdlib logging and picologging.
loop_percent = _loop("loop_percent",
                     'log.info("order %s filled at %s qty %s", 12345, 101.25, "AAPL")')
loop_structlog = _loop("loop_structlog",
                       'log.info("order filled", order_id=12345, price=101.25, symbol="AAPL")')
loop_loguru = _loop("loop_loguru",
                    'log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")')


# --- measuring ---------------------------------------------------------------


class Case:
    """One row of the per-call table: a loop, its argument, N, and what to do after a run."""

    def __init__(self, name: str, loop: Callable, obj: Any, n: int,
                 after: Callable[[], None] | None = None, gc_off: bool = False,
                 counter: "Counted | None" = None) -> None:
        self.name, self.loop, self.obj, self.n = name, loop, obj, n
        self.after, self.gc_off, self.counter = after, gc_off, counter
        self.walls: list[float] = []
        self.cpus: list[float] = []

    def _call(self, n: int) -> tuple[int, int]:
        if self.gc_off:
            gc.disable()
        try:
            r = self.loop(n, self.obj)
        finally:
            if self.gc_off:
                gc.enable()
        if self.counter is not None:
            self.counter.events += n
        if self.after is not None:
            self.after()          # outside the timing (blog.flush(), say)
        return r

    def warm_up(self) -> None:
        self._call(1000)          # first calls: call-site registration, specialization

    def run_once(self) -> None:
        gc.collect()
        wall, cpu = self._call(self.n)
        self.walls.append(wall / self.n)
        self.cpus.append(cpu / self.n)

    def result(self) -> dict:
        return {"ns_per_call": min(self.walls), "thread_cpu_ns_per_call": min(self.cpus),
                "all_ns_per_call": [round(w, 1) for w in self.walls],
                "n": self.n, "repeats": len(self.walls)}


class Counted:
    """Events one library wrote to its file, for bytes/event."""

    def __init__(self) -> None:
        self.events = 0


def file_stats(path: str, events: int) -> dict:
    size = os.path.getsize(path)
    return {"file": os.path.basename(path), "bytes": size, "events": events,
            "bytes_per_event": size / events if events else float("nan")}


def not_installed(name: str, exc: Exception) -> dict:
    return {"status": "not installed", "error": f"{type(exc).__name__}: {exc}", "name": name}


# --- the libraries -------------------------------------------------------------
#
# Each setup_* function opens the library's file and returns its rows (Case
# objects) and a finish() that closes the file and records its bytes/event; an
# optional library not installed is a "not installed" row (per_call). All
# libraries are set up first; the repeats then run round-robin over every case,
# so that a slow spell of the machine falls on all cases alike rather than on
# every repeat of one.


def setup_blog(tmp: str, cfg: dict, out: dict) -> tuple[list, Callable[[], None]]:
    s = blog.default_session()
    n = cfg["n_fast"]
    out["blog_consumer"] = {}

    def flush_after(label: str) -> Callable[[], None]:
        # After a timed loop: how far behind the consumer is, then flush.
        def after() -> None:
            backlog = s.pending()
            c = out["blog_consumer"].setdefault(label, {"max_backlog_after_loop": 0})
            c["max_backlog_after_loop"] = max(c["max_backlog_after_loop"], backlog)
            blog.flush()
        return after

    path = os.path.join(tmp, "blog.blog")
    blog.basic_config(path, mode="wb")
    log = blog.get_logger("bench")
    off = blog.get_logger("bench.off")
    off.set_min_severity("info")               # debug is below the minimum: disabled

    @blog.event("order {} filled at {} qty {}", severity="info", category="bench")
    def order_filled(order_id: int, price: float, symbol: str):
        ...

    counter = Counted()
    w0, d0 = s.stats.events_written, s.stats.events_dropped
    # The same call into a session whose channels are mirrored into a crash buffer
    # (blog.files.crashbuf: kill -9 loses nothing), side by side.
    from blog.files.crashbuf import CrashBuffer, buffer_directory
    cs = blog.Session(name="crash")
    cpath = os.path.join(tmp, "blog-crash.blog")
    cstream = blog.FileOutputStream(cpath, mode="wb")
    cs.use_crash_buffer(CrashBuffer(buffer_directory(cpath), cstream.path, cs.descriptor))
    cconsumer = blog.Consumer(cs, cstream).start()
    clog = cs.get_logger("bench")
    rows = [
        Case("(b) blog log.info", loop_blog_info, log, n, flush_after("(b) blog log.info"),
             counter=counter),
        Case("(b2) blog log.info, crash buffer", loop_blog_info, clog, n, cconsumer.flush),
        Case("(b) blog log.info, gc disabled (reference)", loop_blog_info, log, n,
             flush_after("(b) blog log.info, gc off"), gc_off=True, counter=counter),
        Case("(c) blog @event", loop_blog_event, order_filled, n,
             flush_after("(c) blog @event"), counter=counter),
        Case("(d) blog disabled (log.debug)", loop_blog_disabled, off, n),
        Case("(d2) blog disabled, method in a local", loop_blog_disabled_local, off, n),
    ]

    def finish() -> None:
        cconsumer.stop()
        cs.use_crash_buffer(None)
        cstream.close()
        blog.flush()
        out["bytes"]["(b,c) blog log.info + @event"] = dict(
            file_stats(path, counter.events), written=s.stats.events_written - w0,
            dropped=s.stats.events_dropped - d0)
    return rows, finish


def bench_logger(logging: Any, name: str, handler: Any) -> Any:
    """``logging``'s logger ``name`` (``logging`` the stdlib's module, or picologging, its
    drop-in) at INFO, with ``handler`` alone and not propagating."""
    lg = logging.getLogger(name)
    lg.handlers.clear()
    lg.propagate = False
    lg.setLevel(logging.INFO)
    lg.addHandler(handler)
    return lg


def file_logger(logging: Any, name: str, path: str) -> tuple[Any, Any]:
    """A ``bench_logger`` writing LINE_FORMAT lines to ``path``, and its FileHandler."""
    h = logging.FileHandler(path, mode="w", encoding="utf-8")
    h.setFormatter(logging.Formatter(LINE_FORMAT))
    return bench_logger(logging, name, h), h


def setup_file_handler(name: str, logging: Any, path: str, cfg: dict,
                       out: dict) -> tuple[list, Callable[[], None]]:
    """The row of ``logging``'s FileHandler (the stdlib's or picologging's)."""
    lg, h = file_logger(logging, "bench", path)
    counter = Counted()

    def finish() -> None:
        h.flush()
        out["bytes"][name] = file_stats(path, counter.events)
        h.close()
        lg.removeHandler(h)
    return [Case(name, loop_percent, lg, cfg["n_slow"], h.flush, counter=counter)], finish


def setup_stdlib(tmp: str, cfg: dict, out: dict) -> tuple[list, Callable[[], None]]:
    import logging
    return setup_file_handler("(e) stdlib logging FileHandler", logging,
                              os.path.join(tmp, "stdlib.log"), cfg, out)


def setup_bridge(tmp: str, cfg: dict, out: dict) -> tuple[list, Callable[[], None]]:
    """The same ``logging`` call into blog.stdlib.BlogHandler (the default session's file,
    which setup_blog opened): with it alone on the way, the call makes no LogRecord (the
    fast path, blog.stdlibcalls); with a filter on the logger, the record path. And into a
    handler that does nothing: logging's own cost (its record, its logger hierarchy)."""
    import logging

    import blog.stdlib

    class Nothing(logging.Handler):
        def handle(self, record: logging.LogRecord) -> bool:   # no lock, no emit
            return True

    rows = []
    for name, handler in (("(e2) stdlib logging -> blog.stdlib.BlogHandler (no LogRecord)",
                           blog.stdlib.BlogHandler()),
                          ("(e4) the same, record path (a filter on the logger)",
                           blog.stdlib.BlogHandler()),
                          ("(e3) stdlib logging, a handler doing nothing (logging's own)",
                           Nothing())):
        lg = bench_logger(logging, "bench." + name[1:3], handler)
        if name.startswith("(e4)"):
            lg.addFilter(lambda record: True)
        rows.append(Case(name, loop_percent, lg, cfg["n_slow"], blog.flush))
    return rows, lambda: None


# The optional libraries': each takes the library's module and its row's name.

def setup_picologging(picologging: Any, name: str, tmp: str, cfg: dict,
                      out: dict) -> tuple[list, Callable[[], None]]:
    return setup_file_handler(name, picologging, os.path.join(tmp, "picologging.log"), cfg, out)


def setup_structlog(structlog: Any, name: str, tmp: str, cfg: dict,
                    out: dict) -> tuple[list, Callable[[], None]]:
    import logging
    path = os.path.join(tmp, "structlog.log")
    fh = open(path, "w", encoding="utf-8")
    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.WriteLoggerFactory(file=fh),   # writes and flushes each line
        cache_logger_on_first_use=True,
    )
    lg = structlog.get_logger().bind()   # the concrete bound logger, not the lazy proxy
    counter = Counted()

    def finish() -> None:
        fh.flush()
        out["bytes"][name] = file_stats(path, counter.events)
        fh.close()
        structlog.reset_defaults()
    return [Case(name, loop_structlog, lg, cfg["n_slow"], counter=counter)], finish


def setup_loguru(loguru: Any, name: str, tmp: str, cfg: dict,
                 out: dict) -> tuple[list, Callable[[], None]]:
    logger = loguru.logger
    path = os.path.join(tmp, "loguru.log")
    logger.remove()   # the default stderr sink
    sink = logger.add(path, mode="w", level="INFO",
                      format="{time:YYYY-MM-DD HH:mm:ss,SSS} {level} {name} {message}")
    counter = Counted()

    def finish() -> None:
        logger.remove(sink)  # flushes and closes the file
        out["bytes"][name] = file_stats(path, counter.events)
    return [Case(name, loop_loguru, logger, cfg["n_slow"], counter=counter)], finish


#: The optional libraries (``pip install -e '.[bench]'``): module, row, setup.
OPTIONAL = (("picologging", "(f) picologging FileHandler", setup_picologging),
            ("structlog", "(g) structlog (JSON line)", setup_structlog),
            ("loguru", "(h) loguru file sink", setup_loguru))


def per_call(tmp: str, cfg: dict, out: dict) -> None:
    rows: list = [Case("(bare for-loop, for reference)", loop_bare, None, cfg["n_fast"]),
                  Case("(a) empty function", loop_empty, empty, cfg["n_fast"])]
    finishers = []
    for setup in (setup_blog, setup_stdlib, setup_bridge):
        r, fin = setup(tmp, cfg, out)
        rows += r
        finishers.append(fin)
    for module, name, setup_optional in OPTIONAL:
        try:
            lib = importlib.import_module(module)
        except Exception as exc:  # ImportError, or a broken binary wheel
            rows.append(dict(not_installed(module, exc), row=name))
            continue
        r, fin = setup_optional(lib, name, tmp, cfg, out)
        rows += r
        finishers.append(fin)
    cases = [r for r in rows if isinstance(r, Case)]
    for c in cases:
        c.warm_up()
    for _ in range(cfg["repeats"]):
        for c in cases:
            c.run_once()
    for fin in finishers:
        fin()
    for r in rows:
        if isinstance(r, Case):
            out["per_call"][r.name] = r.result()
        else:
            out["per_call"][r["row"]] = r


def context_cost(tmp: str, cfg: dict, out: dict) -> None:
    """log.info before context was ever used, then once it was (outside any context), inside
    ``blog.context(request_id=..., user=...)``, and with those values as arguments."""
    blog.basic_config(os.path.join(tmp, "context.blog"), mode="wb")
    log = blog.get_logger("bench.context")
    n = cfg["n_fast"]
    never = Case("log.info, context never used", loop_blog_info, log, n, blog.flush)
    never.warm_up()
    for _ in range(cfg["repeats"]):
        never.run_once()
    blog.bind(request_id=None)       # context in use from now on (and empty again below)
    blog.contextfields.clear()
    outside = Case("log.info, context used elsewhere, none here", loop_blog_info, log, n,
                   blog.flush)

    def in_context(m: int, lg: Any) -> tuple[int, int]:
        with blog.context(request_id="r-12345", user="bob"):
            return loop_blog_info(m, lg)
    inside = Case("log.info in blog.context(request_id, user)", in_context, log, n, blog.flush)
    five = Case("log.info, the context's values as arguments", loop_blog_info5, log, n, blog.flush)
    for c in (outside, inside, five):
        c.warm_up()
    for _ in range(cfg["repeats"]):
        for c in (never, outside, inside, five):
            c.run_once()
    out["context"] = {c.name: c.result() for c in (never, outside, inside, five)}


def end_to_end(tmp: str, cfg: dict, out: dict) -> None:
    """Process CPU (all threads) per event until flush() returns; blog and stdlib in turn."""
    s = blog.default_session()
    path_b = os.path.join(tmp, "blog_e2e.blog")
    blog.basic_config(path_b, mode="wb")
    log = blog.get_logger("bench")
    w0, d0 = s.stats.events_written, s.stats.events_dropped
    loop_blog_info(1000, log)
    blog.flush()
    path_s = os.path.join(tmp, "stdlib_e2e.log")
    import logging
    lg, h = file_logger(logging, "bench.e2e", path_s)
    loop_percent(1000, lg)
    h.flush()

    def blog_run(m: int) -> None:
        loop_blog_info(m, log)
        blog.flush()

    def stdlib_run(m: int) -> None:
        loop_percent(m, lg)
        h.flush()

    runs = {"(b) blog log.info": (blog_run, cfg["n_e2e_blog"], []),
            "(e) stdlib logging FileHandler": (stdlib_run, cfg["n_e2e_stdlib"], [])}
    for _ in range(cfg["e2e_repeats"]):
        for run, m, results in runs.values():
            gc.collect()
            c0, t0 = process_ns(), perf_ns()
            run(m)
            c1, t1 = process_ns(), perf_ns()
            results.append(((c1 - c0) / m, (t1 - t0) / m))
    for name, (_, m, results) in runs.items():
        out["e2e"][name] = {
            "cpu_ns_per_event": min(c for c, _ in results),
            "wall_ns_per_event": min(w for _, w in results),
            "all_cpu_ns_per_event": [round(c, 1) for c, _ in results],
            "events": m, "repeats": len(results)}
    out["bytes"]["(b) blog, end-to-end file"] = dict(
        file_stats(path_b, 1000 + cfg["n_e2e_blog"] * cfg["e2e_repeats"]),
        written=s.stats.events_written - w0, dropped=s.stats.events_dropped - d0)
    out["bytes"]["(e) stdlib, end-to-end file"] = file_stats(
        path_s, 1000 + cfg["n_e2e_stdlib"] * cfg["e2e_repeats"])
    h.close()
    lg.removeHandler(h)
    blog.shutdown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N: a smoke run of a few seconds")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory of logs")
    ap.add_argument("--no-structured", action="store_true",
                    help="leave out the structured calls' table (benchmarks/structured.py)")
    args = ap.parse_args(argv)

    if args.quick:
        cfg = dict(n_fast=20_000, n_slow=5_000, repeats=3,
                   n_e2e_blog=100_000, n_e2e_stdlib=20_000, e2e_repeats=1)
    else:
        cfg = dict(n_fast=200_000, n_slow=20_000, repeats=9,
                   n_e2e_blog=1_000_000, n_e2e_stdlib=200_000, e2e_repeats=3)

    env = {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
           "platform": platform.platform(), "cpus": os.cpu_count(),
           "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
           "blog": blog.__version__, "gc": gc.isenabled(), "quick": args.quick,
           "blog_hot_path": blog_hot_path()}
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
    print(f"blog hot path: {env['blog_hot_path']}; blog from {os.path.dirname(blog.__file__)}")
    print(f"config: {cfg}")

    out: dict[str, Any] = {"env": env, "config": cfg, "per_call": {}, "bytes": {}, "e2e": {}}
    tmp = tempfile.mkdtemp(prefix="blog-bench-")
    start = perf_ns()
    try:
        per_call(tmp, cfg, out)
        end_to_end(tmp, cfg, out)
        out["traced"] = traced_call.measure(args.quick, tmp)   # before context is ever used
        context_cost(tmp, cfg, out)  # last: once context is used, every call looks at it
        out["targets"] = report(out, cfg)
        if not args.no_structured:   # keyword fields, rich values, exceptions (structured.py)
            scfg = structured.config(args.quick)
            print(f"\nstructured calls: config {scfg}")
            out["structured"] = structured.run(scfg, tmp)
            out["structured"]["targets"] = structured.report(out["structured"])
    finally:
        if args.keep:
            print(f"\nlogs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    out["env"]["seconds"] = (perf_ns() - start) / 1e9
    out["env"]["loadavg_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\ntotal {out['env']['seconds']:.1f} s; "
          f"load average after {out['env']['loadavg_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
