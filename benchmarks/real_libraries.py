#!/usr/bin/env python3
"""Real libraries logging through blog's ``logging`` bridge: how many of their calls take
the fast path (no LogRecord), and what their calls cost on each path.

The application: requests (urllib3 below it, charset_normalizer beside it) against a local
``http.server`` on 127.0.0.1, from a ``concurrent.futures`` thread pool and from asyncio
tasks (``asyncio.to_thread``), its own logger's calls beside them, and ``warnings`` through
``logging.captureWarnings`` (the ``py.warnings`` logger). Every record at DEBUG or above
goes to blog (``blog.stdlib.capture("DEBUG")``, to a file in a temporary directory).

It runs the application twice: with the fast path installed (as a BlogHandler installs
it), then with ``blog.stdlibcalls.uninstall()`` (every call makes its record), and prints,
for each run, ``session.stats.logging_fast_path`` and ``logging_record_path``, the events
read back per logger, and the process CPU of the run. Then the libraries' own calls, each
in a loop of its own, as they are made in the run (the loggers as the libraries set them
up: urllib3's NullHandler on "urllib3"...): thread CPU ns per call, best of repeats, on
each path.

    python benchmarks/real_libraries.py            # about 30 s on 2 cores
    python benchmarks/real_libraries.py --quick    # a few seconds
    BLOG_PURE_PYTHON=1 python benchmarks/real_libraries.py

Needs the bench extra (``pip install -e '.[bench]'``: requests).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import http.server
import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout

import blog  # noqa: E402
import blog.stdlib  # noqa: E402
import bread  # noqa: E402
from blog import accel, stdlibcalls  # noqa: E402
from timedloop import timed_loop  # noqa: E402  (beside this file)

try:
    import requests
except ImportError:
    sys.exit("real_libraries.py needs requests: pip install -e '.[bench]'")

perf_ns, thread_ns = time.perf_counter_ns, time.thread_time_ns
app_log = logging.getLogger("shop.app")


class Quiet(http.server.BaseHTTPRequestHandler):
    """A keep-alive server of small JSON answers, that logs nothing of its own."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b'{"sku": "%s", "stock": 3}' % self.path.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


_sessions = threading.local()
_opened: list = []           # every thread's requests.Session, closed at the end


def fetch(base: str, i: int) -> int:
    """One request, on this thread's requests.Session, and the application's log lines."""
    s = getattr(_sessions, "s", None)
    if s is None:
        s = _sessions.s = requests.Session()
        _opened.append(s)
    app_log.debug("fetching item %d", i)
    r = s.get(f"{base}/item/{i}", timeout=10)
    app_log.info("item %d: %d bytes, status %d", i, len(r.text), r.status_code)
    if i % 50 == 0:
        warnings.warn(f"item {i} is slow to answer", ResourceWarning, stacklevel=1)
    return r.status_code


async def tasks(base: str, n: int) -> None:
    async def one(i: int) -> None:
        status = await asyncio.to_thread(fetch, base, i)
        if status != 200:
            app_log.warning("item %d: status %d", i, status)
    await asyncio.gather(*(one(i) for i in range(n)))


def application(base: str, n: int) -> None:
    """n requests from a pool of 4 threads, n from asyncio tasks."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: fetch(base, i), range(n)))
    asyncio.run(tasks(base, n))
    app_log.info("done: %d requests", 2 * n)


def run(base: str, n: int, session: blog.Session) -> dict[str, Any]:
    """The application once: session.stats' counts of it, its process CPU, when it ran."""
    st = session.stats
    fast, record = st.logging_fast_path, st.logging_record_path
    t0, c0 = time.time_ns(), time.process_time_ns()
    application(base, n)
    cpu, t1 = time.process_time_ns() - c0, time.time_ns()
    return {"fast": st.logging_fast_path - fast, "record": st.logging_record_path - record,
            "cpu_ms": cpu / 1e6, "span": (t0, t1)}


#: The libraries' calls, as they make them (their format and values), each timed alone.
CALLS = {
    "urllib3.connectionpool": ('log.debug(\'%s://%s:%s "%s %s %s" %s %s\', "http", '
                               '"127.0.0.1", 8080, "GET", "/item/7", "HTTP/1.1", 200, 27)'),
    "shop.app": 'log.info("item %d: %d bytes, status %d", 7, 27, 200)',
    "asyncio": 'log.debug("Using selector: %s", "EpollSelector")',
}


def per_call(repeats: int, n: int) -> dict[str, tuple[float, float]]:
    """Thread CPU ns per call of each of CALLS: (fast path, record path), best of repeats."""
    loops: dict[str, Callable] = {name: timed_loop(globals(), name.replace(".", "_"), stmt,
                                                   thread_cpu=True)
                                  for name, stmt in CALLS.items()}
    out = {}
    for name, loop in loops.items():
        log = logging.getLogger(name)
        best = []
        for installed in (True, False):
            if not installed:
                stdlibcalls.uninstall()
            try:
                loop(n // 10, log)
                best.append(min(loop(n, log)[1] for _ in range(repeats)) / n)
            finally:
                stdlibcalls.install(blog.stdlib.BlogHandler)
        out[name] = (best[0], best[1])
    return out


def events_per_logger(path: str, spans: list[tuple[int, int]]) -> list[collections.Counter]:
    """The events read back, per logger (category), of each run (its span of time)."""
    runs: list[collections.Counter] = [collections.Counter() for _ in spans]
    for ev in bread.read(path):
        for span, counts in zip(spans, runs):
            if span[0] <= ev.ns <= span[1]:
                counts[ev.category] += 1
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    opts = ap.parse_args()
    n, calls, repeats = (20, 2_000, 2) if opts.quick else (200, 20_000, 7)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "app.blog")
        session = blog.basic_config(path)
        blog.stdlib.capture("DEBUG")
        logging.captureWarnings(True)
        warnings.simplefilter("always", ResourceWarning)
        application(base, 2)                     # warm up: connections, imports, sites
        figures = [run(base, n, session)]
        stdlibcalls.uninstall()
        try:
            figures.append(run(base, n, session))
        finally:
            stdlibcalls.install(blog.stdlib.BlogHandler)
        costs = per_call(repeats, calls)
        for s in _opened:
            s.close()
        logging.captureWarnings(False)
        blog.shutdown()
        per_logger = events_per_logger(path, [f["span"] for f in figures])
        server.shutdown()
        server.server_close()

    print(f"blog {'C' if accel.speedups is not None else 'pure Python'} path, Python "
          f"{sys.version.split()[0]}, requests {requests.__version__}; {2 * n} requests")
    print()
    print("| run | logging_fast_path | logging_record_path | fast share | process CPU ms |")
    print("|---|---:|---:|---:|---:|")
    for name, f in zip(("fast path installed", "uninstalled"), figures):
        total = f["fast"] + f["record"]
        print(f"| {name} | {f['fast']:,} | {f['record']:,} | "
              f"{100 * f['fast'] / max(total, 1):.0f} % | {f['cpu_ms']:,.0f} |")
    print()
    print("| logger | events (fast run) | events (record run) |")
    print("|---|---:|---:|")
    for name in sorted(per_logger[0] | per_logger[1]):
        print(f"| {name} | {per_logger[0][name]:,} | {per_logger[1][name]:,} |")
    print()
    print("| call | fast path ns | record path ns | ratio |")
    print("|---|---:|---:|---:|")
    for name, (fast, record) in costs.items():
        print(f"| {name} | {fast:,.0f} | {record:,.0f} | {record / fast:.1f}x |")


if __name__ == "__main__":
    main()
