"""bread.spark on a real cluster: a Spark standalone master and two workers on 127.0.0.1
(``sparkcluster``), whose executors share nothing with the driver but the files and the
installed package, give what ``bread.read`` gives.

One cluster and one session for the module (starting them is most of its time). Marked slow:
``make test`` runs it in both passes, and its pure pass reads on the pure path in the
executors too (the workers inherit ``BREAD_PURE_PYTHON``: checked here). Skipped, saying
why, where the executors would import another bread than the one under test (a tree on
``PYTHONPATH`` over another checkout's install).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

import blog
import bread
from helpers import run_python

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install '.[spark]')")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later): none on PATH or in JAVA_HOME",
                allow_module_level=True)

import bread.spark  # noqa: E402
from sparkcluster import Cluster, installed_env  # noqa: E402

pytestmark = pytest.mark.slow

HANDLED = "handled {route} in {ms} ms"

#: Three processes (a service and two forked workers), each its own rotated, compressed
#: file set in one directory; ``handled`` logged at three severities from one call site.
SERVICE = f"""
    import os, blog
    blog.basic_config("logs/svc.blog", rotate_bytes=6000, compress=True,
                      flush_interval=0.005)
    api, db = blog.get_logger("api"), blog.get_logger("db")
    kids = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            break
        kids.append(pid)
    for i in range(700):
        api.log(("info", "warning", "error")[i % 3], {HANDLED!r},
                route=("/orders", "/users", "/stock")[i % 4 % 3], ms=i % 97)
        if i % 7 == 0:
            db.info("query {{}} returned {{}} rows", f"q{{i}}", i * 3)
    blog.shutdown()
    if len(kids) < 2:
        os._exit(0)
    for pid in kids:
        os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("svc")
    r = run_python(SERVICE, d)
    assert r.returncode == 0, r.stderr
    names = os.listdir(d / "logs")
    gz = [n for n in names if n.endswith(".blog.gz")]
    assert len(gz) >= 6 and len({n.split(".pid")[1] for n in gz}) == 3, names
    return str(d / "logs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> str:
    """The bread that a Python of the deployment's environment (no PYTHONPATH) imports from
    elsewhere: what the executors run. Skips where that is not the bread under test (a
    tree put first on PYTHONPATH over another checkout's install): the driver's reader,
    pickled to the tasks, would be read by other code."""
    r = subprocess.run([sys.executable, "-c", "import bread; print(bread.__file__)"],
                       env=installed_env(), cwd=tmp_path_factory.mktemp("elsewhere"),
                       capture_output=True, text=True, check=True)
    path = r.stdout.strip()
    if os.path.realpath(path) != os.path.realpath(bread.__file__):
        pytest.skip(f"the executors would import {path}, not the bread under test "
                    f"({bread.__file__}): install this tree (pip install -e .) to run this")
    return path


@pytest.fixture(scope="module")
def cluster(installed, tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("spark")), workers=2)
    try:
        c.start(wait=False)     # the driver starts while the workers register
        yield c
    finally:
        c.stop()                # the JVMs end however the tests ended


@pytest.fixture(scope="module")
def spark(cluster):
    s = cluster.session("bread-cluster-tests")
    try:
        cluster.wait_registered()
        bread.spark.register(s)
        yield s
    finally:
        s.stop()


def test_executors_run_the_installed_package_on_this_runs_reader_path(spark, cluster,
                                                                      installed):
    def probe(_rows):     # defined here: pickled by value (the executors have no tests/)
        import bread.accel
        yield (bread.__file__, bread.accel.speedups is None, sys.executable,
               os.path.dirname(os.path.dirname(os.getcwd())))

    got = set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(probe).collect())
    pure = bool(os.environ.get("BREAD_PURE_PYTHON"))
    assert {(f, p, exe) for f, p, exe, _ in got} == {(installed, pure, sys.executable)}
    # the tasks ran in both workers' directories (an executor's cwd: WORKER/app-ID/N)
    workers = {os.path.join(cluster.directory, f"worker{k}") for k in range(2)}
    assert {w for *_, w in got} == workers
    # every daemon and the driver on 127.0.0.1
    state = cluster.state()
    assert {w["host"] for w in state["workers"]} == {"127.0.0.1"}
    assert cluster.url.startswith("spark://127.0.0.1:")
    assert spark.sparkContext.getConf().get("spark.driver.host") == "127.0.0.1"


def test_a_query_of_rotated_compressed_files_of_three_processes_equals_bread_read(spark,
                                                                                  logs):
    events = list(bread.read(logs))
    df = spark.read.format("blog").option("splitBytes", "4096").load(logs)
    assert len(events) == 3 * (700 + 100)
    want = Counter((e.pid, e.category, e.severity.name) for e in events)
    got = df.groupBy("pid", "category", "severity").count().collect()
    assert {(r["pid"], r["category"], r["severity"]): r["count"] for r in got} == dict(want)
    assert sorted(tuple(r) for r in df.select("path", "clock", "message").collect()) == \
        sorted((e.path, e.clock, e.message) for e in events)


def test_the_typed_table_of_a_call_site_equals_bread_read(spark, logs):
    handled = bread.spark.events(spark, logs, source=HANDLED)
    assert (dict(handled.dtypes)["route"], dict(handled.dtypes)["ms"]) == ("string", "bigint")
    want = sorted((e.pid, e.severity.name, e.writer, e.fields["route"], e.fields["ms"])
                  for e in bread.read(logs) if e.format == HANDLED)
    assert len(want) == 3 * 700
    rows = handled.select("pid", "severity", "writer", "route", "ms").collect()
    assert sorted(tuple(r) for r in rows) == want
    top: Counter[str] = Counter()
    for _, _, _, route, ms in want:
        top[route] = max(top[route], ms)
    got = handled.groupBy("route").agg({"ms": "max"}).collect()
    assert {r["route"]: r["max(ms)"] for r in got} == dict(top)


def _big_plain_file(path: str) -> None:
    """A plain (not compressed) file of 60,000 events in frames of about 60 KB (each
    consume of 5,000 events a frame), for ten or so ranged partitions of 64 KiB."""
    s = blog.Session(name="big")
    out = blog.FileOutputStream(path)
    log = s.get_logger("big")
    for i in range(60000):
        log.info("row {} of {}", i, "big")
        if i % 5000 == 4999:
            s.consume(out)
    s.consume(out)
    out.close()


def test_the_same_query_from_a_local_s3_server_reads_by_ranges_and_agrees(spark, logs, s3,
                                                                          tmp_path):
    # Proves (issue 29): the executors read the same files from an S3-compatible server
    # (moto on 127.0.0.1; endpoint as a reader option, the keys from the environment the
    # workers inherit) and the query gives what the local directory gives; a plain object
    # split into partitions is fetched by ranges only, never whole per partition.
    import pyarrow.fs
    big = str(tmp_path / "big.blog")
    _big_plain_file(big)
    fs = pyarrow.fs.S3FileSystem(endpoint_override=s3.endpoint, allow_bucket_creation=True)
    fs.create_dir("cluster-logs")
    for name, src in [(f"svc/{n}", os.path.join(logs, n)) for n in os.listdir(logs)] + \
            [("big.blog", big)]:
        with open(src, "rb") as f, fs.open_output_stream(f"cluster-logs/{name}",
                                                         compression=None) as dst:
            dst.write(f.read())
    remote = spark.read.format("blog").option("endpoint", s3.endpoint)
    local, s3df = spark.read.format("blog").load(logs), remote.load("s3://cluster-logs/svc")
    for df in (local, s3df):
        assert df.count() == 3 * (700 + 100)
    key = ("pid", "category", "severity")
    assert sorted(tuple(r) for r in s3df.groupBy(*key).count().collect()) == \
        sorted(tuple(r) for r in local.groupBy(*key).count().collect())
    handled = [bread.spark.events(spark, p, source=HANDLED, **opts)
               .select("pid", "severity", "route", "ms").collect()
               for p, opts in ((logs, {}), ("s3://cluster-logs/svc", {"endpoint": s3.endpoint}))]
    assert sorted(map(tuple, handled[0])) == sorted(map(tuple, handled[1]))
    del s3.served[:]
    split = remote.option("splitBytes", "65536").load("s3://cluster-logs/big.blog")
    assert split.rdd.getNumPartitions() >= 8   # so whole objects would be 8 times its size
    assert sorted(tuple(r) for r in split.select("clock", "message").collect()) == \
        sorted((e.clock, e.message) for e in bread.read(big))
    gets = [(rng, n) for method, p, rng, n in s3.served
            if method == "GET" and p.endswith("/big.blog")]
    assert gets and all(rng is not None for rng, _ in gets), gets
    # Every frame once, by the part where it begins, and the skims before each part (4 KiB
    # a frame header: these parts of 64 KiB hold one frame each): 1.7 times the object;
    # before the read-ahead stopped at a part's last frame, 2.6 times.
    assert os.path.getsize(big) <= sum(n for _, n in gets) < 2 * os.path.getsize(big)
