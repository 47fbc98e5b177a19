#!/usr/bin/env python3
"""Spark load benchmark: rows/s through the blog data source, beside Parquet and JSON lines.

The same events three ways, each loaded with 1 and 2 cores (``local[1]``,
``local[2]``) and fully materialized (every row and column, Spark's ``noop``
sink), best of ``--repeats`` after a warm-up: the blog file through
``bread.spark``, a Parquet copy and a JSON-lines copy (both written by Spark
from the blog load, so they hold the same rows and columns); then four of
the 19 columns from the blog file (a schema naming them) and from Parquet.
The ``cluster:`` rows load the same files on a Spark standalone cluster of two
1-core workers on 127.0.0.1 (``tests/sparkcluster.py``, as ``tests/test_spark_cluster.py``
starts it; its executors import the installed package); ``--no-cluster`` leaves them out.

    python benchmarks/spark_load.py --events 5000000       # the issue's size
    python benchmarks/spark_load.py --file /tmp/rb/orders1m.blog --no-cluster
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile

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
if os.environ.get("SPARK_LOAD_MASTER"):
    sys.path.insert(0, {tests!r})
    from sparkcluster import session
    spark = session(os.environ["SPARK_LOAD_MASTER"], "spark-load")
else:
    spark = (SparkSession.builder.master(f"local[{{cores}}]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
bread.spark.register(spark)
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
}}
for name, load in loads.items():
    best = None
    for k in range(repeats + 1):            # the first is a warm-up
        t0 = time.perf_counter()
        load().write.format("noop").mode("overwrite").save()
        t = time.perf_counter() - t0
        if k and (best is None or t < best):
            best = t
    print("RESULT", name, cores, best, flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--file", help="a blog file to load instead of writing one")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-cluster", action="store_true",
                    help="leave out the standalone cluster's rows (no master, no workers)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="spark-load-")
    try:
        path = a.file or os.path.join(work, "orders.blog")
        if not a.file:
            write_log(path, a.events)
        import bread
        n = sum(b.num_rows for b in bread.read_batches(path, ["clock"], arrow=True))
        code = CHILD.format(root=os.path.abspath(ROOT), tests=TESTS)
        results: dict[tuple[str, int], float] = {}
        for cores in (1, 2):
            _run_child(code, cores, path, work, a.repeats, results)
        if not a.no_cluster:      # the same files, two workers of one core
            sys.path.insert(0, TESTS)
            from sparkcluster import Cluster
            os.makedirs(os.path.join(work, "cluster"))
            with Cluster(os.path.join(work, "cluster"), workers=2) as cluster:
                _run_child(code, 2, path, work, a.repeats, results, "cluster:",
                           SPARK_LOAD_MASTER=cluster.url)
        print(f"spark load: {n:,} events ({os.path.getsize(path):,} bytes); "
              f"CPython {platform.python_version()}, {platform.machine()}, "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
        print(f"{'source':22} {'cores':>5} {'rows/s':>12} {'rows/s/core':>12}")
        for (name, cores), t in results.items():
            print(f"{name:22} {cores:>5} {n / t:12,.0f} {n / t / cores:12,.0f}")
        for cores in (1, 2):
            b = results[("blog", cores)]
            print(f"{cores} core(s), four columns: blog / parquet "
                  f"{results[('parquet-4cols', cores)] / results[('blog-4cols', cores)]:.2f}x")
            print(f"{cores} core(s): blog / json {results[('json', cores)] / b:.2f}x, "
                  f"blog / parquet {results[('parquet', cores)] / b:.2f}x (rows/s ratio)")
        for name in ("blog", "blog-4cols", "parquet") if not a.no_cluster else ():
            ratio = results[(name, 2)] / results[("cluster:" + name, 2)]
            print(f"2 cores, {name}: cluster / local[2] {ratio:.2f}x (rows/s ratio)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _run_child(code: str, cores: int, path: str, work: str, repeats: int,
               results: dict[tuple[str, int], float], tag: str = "", **env: str) -> None:
    """The loads in a child Spark session of ``cores`` (``env``: SPARK_LOAD_MASTER)."""
    r = subprocess.run([sys.executable, "-c", code, str(cores), path, work, str(repeats)],
                       capture_output=True, text=True, env=dict(os.environ, **env))
    if r.returncode != 0:
        raise SystemExit(f"spark child failed: {r.stderr[-2000:]}")
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            _, name, c, t = line.split()
            results[(tag + name, int(c))] = float(t)


if __name__ == "__main__":
    sys.exit(main())
