#!/usr/bin/env python3
"""Spark load benchmark: rows/s through the blog data source, beside Parquet and JSON lines.

The same events three ways, each loaded with 1 and 2 cores (``local[1]``,
``local[2]``) and fully materialized (every row and column, Spark's ``noop``
sink), best of ``--repeats`` after a warm-up: the blog file through
``bread.spark``, a Parquet copy and a JSON-lines copy (both written by Spark
from the blog load, so they hold the same rows and columns); then four of
the 19 columns from the blog file (a schema naming them) and from Parquet.
With ``--s3``, the same blog file is also loaded from a local S3-compatible
server (moto, on 127.0.0.1, in this process: ``s3://bench/orders.blog``),
its rows beside the local file's. The loads are timed by turns (each repeat
runs every load once), so that a noisy machine weighs on all of them alike.

    python benchmarks/spark_load.py --events 5000000       # the issue's size
    python benchmarks/spark_load.py --file /tmp/rb/orders1m.blog
    python benchmarks/spark_load.py --events 1000000 --s3  # and from a local S3 server
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

from bread_throughput import write_log  # noqa: E402

#: One child per core count: the Spark session's cores are fixed when it starts.
CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import bread.spark
cores, blog_path, work, repeats = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
endpoint = sys.argv[5] if len(sys.argv) > 5 else None   # the S3 server of --s3
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--file", help="a blog file to load instead of writing one")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--s3", action="store_true",
                    help="also load the file from a local S3-compatible server (moto)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="spark-load-")
    server: Any = None
    try:
        path = a.file or os.path.join(work, "orders.blog")
        if not a.file:
            write_log(path, a.events)
        import bread
        n = sum(b.num_rows for b in bread.read_batches(path, ["clock"], arrow=True))
        code = CHILD.format(root=os.path.abspath(ROOT))
        extra: list[str] = []
        if a.s3:
            server, endpoint = s3_server(path)
            extra = [endpoint]
        results: dict[tuple[str, int], float] = {}
        for cores in (1, 2):
            r = subprocess.run([sys.executable, "-c", code, str(cores), path, work,
                                str(a.repeats), *extra], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"spark child failed: {r.stderr[-2000:]}")
            for line in r.stdout.splitlines():
                if line.startswith("RESULT "):
                    _, name, c, t = line.split()
                    results[(name, int(c))] = float(t)
        print(f"spark load: {n:,} events ({os.path.getsize(path):,} bytes); "
              f"CPython {platform.python_version()}, {platform.machine()}, "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
        print(f"{'source':14} {'cores':>5} {'rows/s':>12} {'rows/s/core':>12}")
        for (name, cores), t in results.items():
            print(f"{name:14} {cores:>5} {n / t:12,.0f} {n / t / cores:12,.0f}")
        for cores in (1, 2):
            b = results[("blog", cores)]
            print(f"{cores} core(s), four columns: blog / parquet "
                  f"{results[('parquet-4cols', cores)] / results[('blog-4cols', cores)]:.2f}x")
            print(f"{cores} core(s): blog / json {results[('json', cores)] / b:.2f}x, "
                  f"blog / parquet {results[('parquet', cores)] / b:.2f}x (rows/s ratio)")
            if a.s3:
                print(f"{cores} core(s): time from S3 / from the local file: "
                      f"{results[('blog-s3', cores)] / b:.2f}x (19 columns), "
                      f"{results[('blog-4cols-s3', cores)] / results[('blog-4cols', cores)]:.2f}x"
                      " (4 columns)")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
