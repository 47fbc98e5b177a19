#!/usr/bin/env python3
"""Spark load benchmark: rows/s through the blog data source, beside Parquet and JSON lines.

The same events three ways, each loaded with 1 and 2 cores (``local[1]``,
``local[2]``) and fully materialized (every row and column, Spark's ``noop``
sink), best of ``--repeats`` after a warm-up: the blog file through
``bread.spark``, a Parquet copy and a JSON-lines copy (both written by Spark
from the blog load, so they hold the same rows and columns); then four of
the 19 columns from the blog file (a schema naming them) and from Parquet; and the blog
file compacted into columnar frames (``bread compact --columnar``), all columns and four.

    python benchmarks/spark_load.py --events 5000000       # the issue's size
    python benchmarks/spark_load.py --file /tmp/rb/orders1m.blog
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

from bread_throughput import write_log  # noqa: E402

#: One child per core count: the Spark session's cores are fixed when it starts.
CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import bread.spark
cores, blog_path, work, repeats = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
columnar_path = sys.argv[5]
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
    # the same events compacted into columnar frames (bread compact --columnar)
    "columnar": lambda: spark.read.format("blog").option("splitBytes", str(16 << 20))
        .load(columnar_path),
    "columnar-4cols": lambda: spark.read.format("blog").schema(FOUR)
        .option("splitBytes", str(16 << 20)).load(columnar_path),
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
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="spark-load-")
    try:
        path = a.file or os.path.join(work, "orders.blog")
        if not a.file:
            write_log(path, a.events)
        import bread
        from bread.compact.compactor import Compactor
        n = sum(b.num_rows for b in bread.read_batches(path, ["clock"], arrow=True))
        columnar = os.path.join(work, "columnar.blog")   # the same events, columnar frames
        c = Compactor(work)
        c.add_file(path)
        with open(columnar, "wb") as out:
            c.write(out, [], True)
        code = CHILD.format(root=os.path.abspath(ROOT))
        results: dict[tuple[str, int], float] = {}
        for cores in (1, 2):
            r = subprocess.run([sys.executable, "-c", code, str(cores), path, work,
                                str(a.repeats), columnar], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"spark child failed: {r.stderr[-2000:]}")
            for line in r.stdout.splitlines():
                if line.startswith("RESULT "):
                    _, name, c, t = line.split()
                    results[(name, int(c))] = float(t)
        print(f"spark load: {n:,} events ({os.path.getsize(path):,} bytes); "
              f"CPython {platform.python_version()}, {platform.machine()}, "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
        print(f"{'source':10} {'cores':>5} {'rows/s':>12} {'rows/s/core':>12}")
        for (name, cores), t in results.items():
            print(f"{name:10} {cores:>5} {n / t:12,.0f} {n / t / cores:12,.0f}")
        for cores in (1, 2):
            b = results[("blog", cores)]
            print(f"{cores} core(s), four columns: blog / parquet "
                  f"{results[('parquet-4cols', cores)] / results[('blog-4cols', cores)]:.2f}x")
            print(f"{cores} core(s): blog / json {results[('json', cores)] / b:.2f}x, "
                  f"blog / parquet {results[('parquet', cores)] / b:.2f}x (rows/s ratio)")
            four = results[('blog-4cols', cores)] / results[('columnar-4cols', cores)]
            print(f"{cores} core(s): columnar / row frames {b / results[('columnar', cores)]:.2f}x"
                  f", four columns {four:.2f}x (rows/s ratio; issue 30's target: 1.5x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
