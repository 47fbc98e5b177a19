#!/usr/bin/env python3
"""Spark load benchmark: rows/s through the blog data source, beside Parquet and JSON lines.

The same events three ways, each loaded with 1 and 2 cores (``local[1]``,
``local[2]``) and fully materialized (every row and column, Spark's ``noop``
sink), best of ``--repeats`` after a warm-up: the blog file through
``bread.spark``, a Parquet copy and a JSON-lines copy (both written by Spark
from the blog load, so they hold the same rows and columns); then four of
the 19 columns from the blog file (a schema naming them) and from Parquet; and the blog
file compacted into columnar frames (``bread compact --columnar``), all columns and four.
With ``--s3``, the same blog file is also loaded from a local S3-compatible
server (moto, on 127.0.0.1, in this process: ``s3://bench/orders.blog``),
its rows beside the local file's. The loads are timed by turns (each repeat
runs every load once), so that a noisy machine weighs on all of them alike.

And a p99 of a latency per route (issue 29) on a second file, ``--route-events``
events from four call sites such as ``log.info("GET {} took {} ms", route, ms)``:
``p99-typed`` through the typed table of that site (``bread.spark.events``),
``p99-json`` through the events DataFrame's JSON ``args`` column with
``get_json_object``, and ``p99-json-2cols`` the same with a schema of the two columns
it reads; both give the same answer (checked), timed by turns in the same child.
``--compare-root`` runs every child against another checkout too, by turns (old/new
within one run).

The ``cluster:`` rows load the same files on a Spark standalone cluster of two 1-core
workers on 127.0.0.1 (``tests/sparkcluster.py``, as ``tests/test_spark_cluster.py``
starts it; its executors import this checkout), after the local rows; ``--no-cluster``
leaves them out.

    python benchmarks/spark_load.py --events 5000000       # the issue's size
    python benchmarks/spark_load.py --file /tmp/rb/orders1m.blog --no-cluster
    python benchmarks/spark_load.py --events 1000000 --s3  # and from a local S3 server
    python benchmarks/spark_load.py --p99-only --route-events 2000000 --cores 1
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
TESTS = os.path.join(ROOT, "tests")

from bread_throughput import write_log  # noqa: E402

#: One child per core count (and one for the cluster, whose spark:// URL is in
#: SPARK_LOAD_MASTER): the Spark session's cores are fixed when it starts.
CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import bread.spark
cores, blog_path, work, repeats = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
routes_path = sys.argv[5]
columnar_path = sys.argv[6]
endpoint = sys.argv[7] if len(sys.argv) > 7 else None   # the S3 server of --s3
if os.environ.get("SPARK_LOAD_MASTER"):
    sys.path.insert(0, {tests!r})
    from sparkcluster import session
    spark = session(os.environ["SPARK_LOAD_MASTER"], "spark-load")
else:
    spark = (SparkSession.builder.master(f"local[{{cores}}]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
bread.spark.register(spark)
from pyspark.sql import functions as F
GET = "GET {{}} took {{}} ms"


def p99_typed():
    t = bread.spark.events(spark, routes_path, source=GET)
    return t.groupBy(F.col("arg0").alias("route")).agg(
        F.percentile_approx("arg1", 0.99).alias("p99"))


def p99_json(df):
    return (df.where(F.col("format") == GET)
            .select(F.get_json_object("args", "$[0]").alias("route"),
                    F.get_json_object("args", "$[1]").cast("double").alias("ms"))
            .groupBy("route").agg(F.percentile_approx("ms", 0.99).alias("p99")))


p99 = {{
    "p99-typed": p99_typed,
    "p99-json": lambda: p99_json(spark.read.format("blog").load(routes_path)),
    "p99-json-2cols": lambda: p99_json(
        spark.read.format("blog").schema("format string, args string").load(routes_path)),
}}
if routes_path:
    answers = {{}}
    best = {{}}
    for k in range(repeats + 1):            # by turns; the first round is a warm-up
        for name, query in p99.items():
            t0 = time.perf_counter()
            rows = query().collect()
            t = time.perf_counter() - t0
            answers[name] = sorted((r["route"], r["p99"]) for r in rows)
            if k and (name not in best or t < best[name]):
                best[name] = t
    same = answers["p99-typed"] == answers["p99-json"] == answers["p99-json-2cols"]
    print("CHECK", "same" if same else f"DIFFERENT {{answers}}", flush=True)
    for name, t in best.items():
        print("RESULT", name, cores, t, flush=True)
if blog_path == "-":
    sys.exit(0)
pq, js = os.path.join(work, "events.parquet"), os.path.join(work, "events.json")
FOUR = "time timestamp, severity string, category string, message string"
if not os.path.exists(pq):
    df = spark.read.format("blog").option("splitBytes", str(16 << 20)).load(blog_path)
    df.write.parquet(pq)
    df.write.json(js)
loads = {{
    "blog": lambda: spark.read.format("blog").option("splitBytes", str(16 << 20)).load(blog_path),
    "parquet": lambda: spark.read.parquet(pq),
    "json": lambda: spark.read.schema(spark.read.parquet(pq).schema).json(js),
    # four columns: the blog source reads only what its schema names, Parquet prunes
    "blog-4cols": lambda: spark.read.format("blog").schema(FOUR)
        .option("splitBytes", str(16 << 20)).load(blog_path),
    "parquet-4cols": lambda: spark.read.parquet(pq).select("time", "severity", "category",
                                                          "message"),
    # the same events compacted into columnar frames (bread compact --columnar)
    "columnar": lambda: spark.read.format("blog").option("splitBytes", str(16 << 20))
        .load(columnar_path),
    "columnar-4cols": lambda: spark.read.format("blog").schema(FOUR)
        .option("splitBytes", str(16 << 20)).load(columnar_path),
}}
if endpoint:     # the same file from the S3 server, each beside its local row
    s3 = lambda: spark.read.format("blog").option("endpoint", endpoint).option(
        "splitBytes", str(16 << 20))
    loads["blog-s3"] = lambda: s3().load("s3://bench/orders.blog")
    loads["blog-4cols-s3"] = lambda: s3().schema(FOUR).load("s3://bench/orders.blog")
best = {{}}
for k in range(repeats + 1):            # the first is a warm-up; the loads by turns
    for name, load in loads.items():
        t0 = time.perf_counter()
        load().write.format("noop").mode("overwrite").save()
        t = time.perf_counter() - t0
        if k and (name not in best or t < best[name]):
            best[name] = t
for name, t in best.items():
    print("RESULT", name, cores, t, flush=True)
"""


def s3_server(path: str) -> tuple[object, str]:
    """moto's S3 on 127.0.0.1 (a free port) holding ``path`` as ``s3://bench/orders.blog``;
    (the server, its endpoint). Dummy keys, no instance metadata: nothing else is asked."""
    os.environ.update({"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "bench",
                       "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"})
    import logging
    import socket
    import pyarrow.fs
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    fs = pyarrow.fs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True)
    fs.create_dir("bench")
    with open(path, "rb") as src, fs.open_output_stream("bench/orders.blog",
                                                        compression=None) as dst:
        shutil.copyfileobj(src, dst, 8 << 20)
    return server, endpoint


ROUTES = ("/", "/orders", "/users", "/login", "/search", "/cart", "/pay")


def write_routes(path: str, n: int) -> None:
    """n events from four call sites, two with a route and a latency in ms (the p99 rows)."""
    import blog
    s = blog.Session()
    log = s.get_logger("http")
    stream = blog.FileOutputStream(path, mode="wb")
    c = blog.Consumer(s, stream).start()
    for i in range(0, n, 4):
        route = ROUTES[i % len(ROUTES)]
        log.info("GET {} took {} ms", route, (i % 997) * 0.25)
        log.info("POST {} took {} ms", route, (i % 991) * 0.5)
        log.info("cache {} hit {}", i, i % 3 == 0)
        log.debug("user {} logged in", f"u{i % 100}")
    c.stop()
    stream.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--file", help="a blog file to load instead of writing one")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--route-events", type=int, default=2_000_000,
                    help="events of the p99-per-route file (0: no p99 rows)")
    ap.add_argument("--p99-only", action="store_true", help="only the p99 rows")
    ap.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--compare-root", help="another checkout whose children run by turns")
    ap.add_argument("--s3", action="store_true",
                    help="also load the file from a local S3-compatible server (moto)")
    ap.add_argument("--no-cluster", action="store_true",
                    help="leave out the standalone cluster's rows (no master, no workers)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="spark-load-")
    server: Any = None
    try:
        path = "-" if a.p99_only else a.file or os.path.join(work, "orders.blog")
        if path != "-" and not a.file:
            write_log(path, a.events)
        routes = os.path.join(work, "routes.blog") if a.route_events else ""
        if routes:
            write_routes(routes, a.route_events)
        import bread
        n = sum(b.num_rows for b in bread.read_batches(path, ["clock"], arrow=True)) \
            if path != "-" else 0
        columnar = os.path.join(work, "columnar.blog")   # the same events, columnar frames
        if n:
            from bread.compact.compactor import Compactor
            c = Compactor(work)
            c.add_file(path)
            with open(columnar, "wb") as out:
                c.write(out, [], True)
        extra: list[str] = []
        if a.s3 and n:
            server, endpoint = s3_server(path)
            extra = [endpoint]
        roots = {"": ROOT} | ({"old:": a.compare_root} if a.compare_root else {})
        results: dict[tuple[str, int], float] = {}
        args = [path, work, str(a.repeats), routes, columnar, *extra]
        for cores in a.cores:
            for tag, root in roots.items():
                _run_child(root, cores, args, results, tag)
        if not a.no_cluster:      # the same files, two workers of one core, this checkout
            sys.path.insert(0, TESTS)
            from sparkcluster import Cluster
            os.makedirs(os.path.join(work, "cluster"))
            with Cluster(os.path.join(work, "cluster"), workers=2,
                         env={"PYTHONPATH": os.path.abspath(ROOT)}) as cluster:
                _run_child(ROOT, 2, args, results, "cluster:", SPARK_LOAD_MASTER=cluster.url)
        print(f"CPython {platform.python_version()}, {platform.machine()}, "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
        if n:
            print(f"spark load: {n:,} events ({os.path.getsize(path):,} bytes)")
        if routes:
            print(f"p99 per route: {a.route_events:,} events "
                  f"({os.path.getsize(routes):,} bytes), seconds")
        print(f"{'source':20} {'cores':>5} {'rows/s':>12} {'rows/s/core':>12} {'s':>8}")
        for (name, cores), t in results.items():
            rows = a.route_events if "p99" in name else n
            print(f"{name:20} {cores:>5} {rows / t:12,.0f} {rows / t / cores:12,.0f} {t:8.2f}")
        for cores in a.cores:
            for tag in roots:
                if (f"{tag}p99-typed", cores) in results:
                    typed = results[(f"{tag}p99-typed", cores)]
                    print(f"{tag}{cores} core(s), p99 per route: JSON / typed "
                          f"{results[(f'{tag}p99-json', cores)] / typed:.2f}x, "
                          f"JSON of 2 columns / typed "
                          f"{results[(f'{tag}p99-json-2cols', cores)] / typed:.2f}x")
            if not n:
                continue
            b = results[("blog", cores)]
            print(f"{cores} core(s), four columns: blog / parquet "
                  f"{results[('parquet-4cols', cores)] / results[('blog-4cols', cores)]:.2f}x")
            print(f"{cores} core(s): blog / json {results[('json', cores)] / b:.2f}x, "
                  f"blog / parquet {results[('parquet', cores)] / b:.2f}x (rows/s ratio)")
            four = results[('blog-4cols', cores)] / results[('columnar-4cols', cores)]
            print(f"{cores} core(s): columnar / row frames {b / results[('columnar', cores)]:.2f}x"
                  f", four columns {four:.2f}x (rows/s ratio; issue 30's target: 1.5x)")
            if a.s3:
                print(f"{cores} core(s): time from S3 / from the local file: "
                      f"{results[('blog-s3', cores)] / b:.2f}x (19 columns), "
                      f"{results[('blog-4cols-s3', cores)] / results[('blog-4cols', cores)]:.2f}x"
                      " (4 columns)")
        for name in ("blog", "blog-4cols", "parquet") if n and not a.no_cluster else ():
            ratio = results[(name, 2)] / results[("cluster:" + name, 2)]
            print(f"2 cores, {name}: cluster / local[2] {ratio:.2f}x (rows/s ratio)")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _run_child(root: str, cores: int, args: list[str], results: dict[tuple[str, int], float],
               tag: str = "", **env: str) -> None:
    """The loads of checkout ``root`` in a child Spark session of ``cores`` (``env``:
    SPARK_LOAD_MASTER, a cluster's URL)."""
    code = CHILD.format(root=os.path.abspath(root), tests=TESTS)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root), **env)   # Spark's workers too
    r = subprocess.run([sys.executable, "-c", code, str(cores), *args], capture_output=True,
                       text=True, env=env, cwd=args[1])   # not this checkout on the path
    if r.returncode != 0:
        raise SystemExit(f"spark child failed: {r.stderr[-2000:]}")
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            _, name, c, t = line.split()
            results[(tag + name, int(c))] = float(t)
        elif line.startswith("CHECK "):
            print(f"{tag}{cores} core(s): p99 typed and JSON answers:", line[6:])


if __name__ == "__main__":
    sys.exit(main())
