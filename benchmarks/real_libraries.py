#!/usr/bin/env python3
"""Real libraries logging through blog's ``logging`` bridge: how many of their calls take
the fast path (no LogRecord), and what their calls cost on each path.

The application, in parts, each a library as applications use it, on 127.0.0.1 only:

- requests (urllib3 below it, charset_normalizer beside it) against a local ``http.server``,
  from a ``concurrent.futures`` thread pool and from asyncio tasks (``asyncio.to_thread``),
  its own logger's calls beside them, and ``warnings`` through ``logging.captureWarnings``
  (the ``py.warnings`` logger);
- httpx: a ``Client`` shared by a thread pool and an ``AsyncClient`` in asyncio tasks,
  against the same server ("httpx" logs a line per request at INFO, httpcore's
  connection and HTTP/1.1 steps at DEBUG);
- SQLAlchemy: an in-memory sqlite engine with the "sqlalchemy.engine" logger at INFO (the
  statements, their parameters, BEGIN and COMMIT), and a second engine with ``echo=True``
  (SQLAlchemy puts a ``StreamHandler`` on its logger, here writing to a null stream);
- Flask: an app served by werkzeug's threaded server (``werkzeug.serving.make_server``),
  ``app.logger`` calls in its views, a view that raises (Flask logs the exception),
  werkzeug's request log, requests as its client.

A library that is not installed is skipped, saying so. Every record at DEBUG or above goes
to blog (``blog.stdlib.capture("DEBUG")``, to a file in a temporary directory).

It runs the application twice: with the fast path installed (as a BlogHandler installs
it), then with ``blog.stdlibcalls.uninstall()`` (every call makes its record), and prints,
for each run and part, ``session.stats.logging_fast_path`` and ``logging_record_path``,
the events read back per logger, and the process CPU of the run. Then (but with
``--counts``) the libraries' own calls, each in a loop of its own, as they are made in the
run (the loggers as the libraries set them up: urllib3's NullHandler on "urllib3"...):
thread CPU ns per call, best of repeats, on each path.

    python benchmarks/real_libraries.py            # about 30 s on 2 cores
    python benchmarks/real_libraries.py --quick    # a few seconds
    BLOG_PURE_PYTHON=1 python benchmarks/real_libraries.py --counts   # the counts only

Needs the bench extra (``pip install -e '.[bench]'``: requests, httpx, SQLAlchemy, Flask).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import http.server
import importlib
import importlib.metadata
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


def optional(name: str) -> Any:
    """The module ``name``, or None (saying so) if it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"skipping {name}: not installed (pip install -e '.[bench]')")
        return None


httpx, sqlalchemy, flask = optional("httpx"), optional("sqlalchemy"), optional("flask")
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


def with_requests(base: str, n: int) -> None:
    """n requests from a pool of 4 threads, n from asyncio tasks."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: fetch(base, i), range(n)))
    asyncio.run(tasks(base, n))
    app_log.info("done: %d requests", 2 * n)


def with_httpx(base: str, n: int) -> None:
    """n requests on an httpx.Client from a pool of 4 threads, n on an AsyncClient from
    as many tasks (8 connections at most: the server's backlog is 5)."""
    with httpx.Client(base_url=base, timeout=10) as client:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: client.get(f"/item/{i}").raise_for_status(), range(n)))

    async def gets() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=10,
                                     limits=httpx.Limits(max_connections=8)) as client:
            for r in await asyncio.gather(*(client.get(f"/item/{i}") for i in range(n))):
                r.raise_for_status()
    asyncio.run(gets())


class Databases:
    """Two in-memory sqlite engines: one whose "sqlalchemy.engine" logger is at INFO (as
    an application's logging configuration sets it), one made with ``echo=True`` (its own
    logger, "sqlalchemy.engine.Engine.echo", gets SQLAlchemy's StreamHandler to stdout:
    here a null stream)."""

    def __init__(self) -> None:
        sa = sqlalchemy
        logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)
        self.devnull = open(os.devnull, "w")
        self.engine = sa.create_engine("sqlite://")
        with contextlib.redirect_stdout(self.devnull):
            self.echo = sa.create_engine("sqlite://", echo=True, logging_name="echo")
        meta = sa.MetaData()
        self.items = sa.Table("items", meta, sa.Column("id", sa.Integer, primary_key=True),
                              sa.Column("sku", sa.String), sa.Column("stock", sa.Integer))
        for engine in (self.engine, self.echo):
            meta.create_all(engine)

    def close(self) -> None:
        for engine in (self.engine, self.echo):
            engine.dispose()
        self.devnull.close()


_databases: list[Databases] = []


def with_sqlalchemy(base: str, n: int) -> None:
    """On each engine, n // 10 transactions: an insert of 10 rows, a query, an update."""
    if not _databases:
        _databases.append(Databases())
    db = _databases[0]
    sa, items = sqlalchemy, db.items
    for engine in (db.engine, db.echo):
        for k in range(n // 10):
            with engine.begin() as conn:
                conn.execute(items.insert(), [{"sku": f"sku-{k}-{j}", "stock": j}
                                              for j in range(10)])
                low = conn.execute(sa.select(items.c.sku).where(items.c.stock < 3)
                                   .limit(5)).all()
                conn.execute(items.update().where(items.c.sku == low[0].sku)
                             .values(stock=items.c.stock + 10))


def flask_app() -> Any:
    """The shop's Flask app: views that log through ``app.logger``, one that raises."""
    app = flask.Flask("shop")

    @app.get("/item/<int:i>")
    def item(i: int) -> Any:
        app.logger.debug("looking up item %d", i)
        if i % 7 == 0:
            app.logger.warning("item %d is low on stock", i)
        return {"sku": i, "stock": 3}

    @app.get("/fail")
    def fail() -> Any:
        raise RuntimeError("the stock service is down")

    return app


_servers: list = []


def with_flask(base: str, n: int) -> None:
    """n requests to the Flask app (werkzeug's threaded server), from a pool of 4 threads
    on requests sessions; one in 50 to the view that raises (a 500)."""
    if not _servers:
        from werkzeug.serving import make_server
        srv = make_server("127.0.0.1", 0, flask_app(), threaded=True)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        _servers.append(srv)
    url = f"http://127.0.0.1:{_servers[0].server_address[1]}"

    def get(i: int) -> int:
        s = getattr(_sessions, "s", None)
        if s is None:
            s = _sessions.s = requests.Session()
            _opened.append(s)
        return s.get(f"{url}/fail" if i % 50 == 49 else f"{url}/item/{i}", timeout=10).status_code
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(get, range(n)))


#: The application's parts, by library: those installed.
PARTS: dict[str, Callable[[str, int], None]] = {"requests": with_requests}
if httpx is not None:
    PARTS["httpx"] = with_httpx
if sqlalchemy is not None:
    PARTS["SQLAlchemy"] = with_sqlalchemy
if flask is not None:
    PARTS["Flask"] = with_flask


def application(base: str, n: int, session: blog.Session | None = None) -> dict[str, Any]:
    """Each part once: session.stats' counts of each (with a session), when it ran."""
    counts = {}
    for name, part in PARTS.items():
        if session is None:
            part(base, n)
            continue
        st = session.stats
        fast, record = st.logging_fast_path, st.logging_record_path
        part(base, n)
        counts[name] = (st.logging_fast_path - fast, st.logging_record_path - record)
    return counts


def run(base: str, n: int, session: blog.Session) -> dict[str, Any]:
    """The application once: session.stats' counts of each part, its process CPU, when it
    ran."""
    t0, c0 = time.time_ns(), time.process_time_ns()
    parts = application(base, n, session)
    cpu, t1 = time.process_time_ns() - c0, time.time_ns()
    return {"parts": parts, "fast": sum(f for f, _ in parts.values()),
            "record": sum(r for _, r in parts.values()), "cpu_ms": cpu / 1e6,
            "span": (t0, t1)}


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


#: The libraries each part's library runs on.
BELOW = {"requests": "urllib3", "httpx": "httpcore", "Flask": "werkzeug"}


def versions() -> str:
    """The versions of the parts' libraries (and of those below them)."""
    version = importlib.metadata.version
    return ", ".join(f"{name} {version(name)}"
                     + (f" ({BELOW[name]} {version(BELOW[name])})" if name in BELOW else "")
                     for name in PARTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    ap.add_argument("--counts", action="store_true",
                    help="the runs' counts only, not the cost of each call")
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
        application(base, 10)                    # warm up: connections, imports, sites
        figures = [run(base, n, session)]
        stdlibcalls.uninstall()
        try:
            figures.append(run(base, n, session))
        finally:
            stdlibcalls.install(blog.stdlib.BlogHandler)
        costs = {} if opts.counts else per_call(repeats, calls)
        for s in _opened:
            s.close()
        for db in _databases:
            db.close()
        for srv in _servers:
            srv.shutdown()
            srv.server_close()
        logging.captureWarnings(False)
        blog.shutdown()
        per_logger = events_per_logger(path, [f["span"] for f in figures])
        server.shutdown()
        server.server_close()

    print(f"blog {'C' if accel.speedups is not None else 'pure Python'} path, Python "
          f"{sys.version.split()[0]}; {versions()}; n = {n}")
    print()
    print("| run | part | logging_fast_path | logging_record_path | fast share |")
    print("|---|---|---:|---:|---:|")
    for run_name, f in zip(("installed", "uninstalled"), figures):
        for name, (fast, record) in [*f["parts"].items(), ("all", (f["fast"], f["record"]))]:
            print(f"| {run_name} | {name} | {fast:,} | {record:,} | "
                  f"{100 * fast / max(fast + record, 1):.0f} % |")
    print()
    print("| run | process CPU ms |")
    print("|---|---:|")
    for run_name, f in zip(("installed", "uninstalled"), figures):
        print(f"| {run_name} | {f['cpu_ms']:,.0f} |")
    print()
    print("| logger | events (fast run) | events (record run) |")
    print("|---|---:|---:|")
    for name in sorted(per_logger[0] | per_logger[1]):
        print(f"| {name} | {per_logger[0][name]:,} | {per_logger[1][name]:,} |")
    if costs:
        print()
        print("| call | fast path ns | record path ns | ratio |")
        print("|---|---:|---:|---:|")
        for name, (fast, record) in costs.items():
            print(f"| {name} | {fast:,.0f} | {record:,.0f} | {record / fast:.1f}x |")


if __name__ == "__main__":
    main()
