"""Analyze a service's logs with PySpark: error rates, slow operations, noisy call sites.

A small simulated service (several processes, each with a few threads,
handling requests for ``--seconds``) logs with blog into one directory; Spark
then loads the directory with the ``blog`` data source and answers:

1. the error rate per category per time window;
2. the slowest operations, from the logged ``ms`` field (p50 and p99 per route),
   through the typed table of that call site;
3. the noisiest call sites.

    pip install ".[spark]"
    python examples/spark_analysis.py                      # 20 s of 3 processes
    python examples/spark_analysis.py --seconds 180 --window "1 minute" --dir logs/
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time

import blog

ROUTES = {"/orders": 12.0, "/quotes": 3.0, "/login": 40.0, "/report": 250.0}


@blog.event("db query {} returned {rows} rows in {ms} ms", severity="debug", category="db")
def db_query(table: str, rows: int, ms: float): ...


def serve(seconds: float, seed: int) -> None:
    """One thread of the service: requests, their database queries, some failures."""
    rng = random.Random(seed)
    api, cache = blog.get_logger("api"), blog.get_logger("cache")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        route = rng.choice(list(ROUTES))
        ms = round(rng.lognormvariate(0, 0.6) * ROUTES[route], 3)
        db_query(route.strip("/"), rng.randint(0, 500), round(ms * 0.6, 3))
        if rng.random() < 0.3:
            cache.debug("cache miss for {}", route)
        if rng.random() < (0.08 if route == "/report" else 0.01):
            api.error("{route} failed after {ms} ms: {reason}", route=route, ms=ms,
                      reason=rng.choice(["timeout", "upstream 502", "bad request"]))
        else:
            api.info("handled {route} in {ms} ms", route=route, ms=ms, status=200)
        time.sleep(rng.random() * 0.002)


def process(directory: str, seconds: float, threads: int) -> None:
    """One process of the service, logging into its own file."""
    blog.basic_config(os.path.join(directory, f"service-{os.getpid()}.blog"))
    ts = [threading.Thread(target=serve, args=(seconds, os.getpid() * 10 + k))
          for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    blog.shutdown()


def simulate(directory: str, seconds: float = 20, processes: int = 3, threads: int = 2) -> None:
    ctx = multiprocessing.get_context("spawn")
    ps = [ctx.Process(target=process, args=(directory, seconds, threads))
          for _ in range(processes)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a service process failed ({p.exitcode})")


def analyze(spark, directory: str, window: str = "10 seconds") -> dict:
    """The three answers, as DataFrames."""
    import bread.spark
    from pyspark.sql import functions as F

    bread.spark.register(spark)
    df = spark.read.format("blog").load(directory)
    error_rate = (df.where("category in ('api', 'db')")
                  .groupBy(F.window("time", window).start.alias("window"), "category")
                  .agg(F.count("*").alias("events"),
                       F.avg((F.col("severity_value") >= 160).cast("double")).alias("error_rate"))
                  .orderBy("window", "category"))
    handled = bread.spark.events(spark, directory, source="handled {route} in {ms} ms")
    slowest = (handled.groupBy("route")
               .agg(F.count("*").alias("requests"),
                    F.percentile_approx("ms", 0.5).alias("p50_ms"),
                    F.percentile_approx("ms", 0.99).alias("p99_ms"))
               .orderBy(F.desc("p99_ms")))
    noisiest = (df.groupBy("function", "line", "format").count()
                .orderBy(F.desc("count")).limit(5))
    return {"error_rate": error_rate, "slowest": slowest, "noisiest": noisiest}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--window", default="10 seconds", help='Spark window, e.g. "1 minute"')
    ap.add_argument("--dir", help="where the logs go (default: a temporary directory)")
    a = ap.parse_args()
    directory = a.dir or tempfile.mkdtemp(prefix="service-logs-")
    os.makedirs(directory, exist_ok=True)
    print(f"simulating {a.processes} processes for {a.seconds:g} s into {directory} ...")
    simulate(directory, a.seconds, a.processes)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers import bread
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("spark_analysis")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for title, frame in analyze(spark, directory, a.window).items():
        print(f"\n{title.replace('_', ' ')}:")
        frame.show(20, truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
