"""The Spark data source (bread.spark): what Spark loads is what bread.read reads.

One local Spark session (local[2], UI off, quiet) for the whole module. Skipped
only where pyspark or Java is missing, saying which; ``make test`` installs the
``spark`` extra, and this machine has Java 17.
"""

from __future__ import annotations

import datetime
import gzip
import io
import json
import os
import shutil
import sys
import threading
from collections import Counter

import pytest

import blog
import bread
import bread.sinks.batches
import bread.sinks.tables

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install '.[spark]')")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later): none on PATH or in JAVA_HOME",
                allow_module_level=True)

import bread.spark  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable    # the workers import bread from here
    s = (SparkSession.builder.master("local[2]").appName("bread-tests")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Dlog4j.rootLogger=ERROR")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    bread.spark.register(s)
    yield s
    s.stop()


def write(path, tag: str, n: int = 400, threads: int = 2) -> None:
    """A service's log: several threads, categories, levels, keyword fields."""
    s = blog.Session()
    api, db = s.get_logger("api"), s.get_logger("db")
    out = blog.FileOutputStream(str(path), mode="wb")

    def work(k: int) -> None:
        s.writer().name = f"{tag}-w{k}"
        for i in range(n):
            api.info("request {} took {} ms", i, 0.5 * i + k, route="/orders")
            if i % 10 == 0:
                db.warning("slow query {q}", q=f"q{i}", ms=i * 3)
            if i % 50 == 0:
                api.error("failed {}", i, code=500 + k)
            if i % 100 == 99:
                s.consume(out)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    s.consume(out)
    out.close()


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("logs")
    write(d / "a.blog", "a")
    write(d / "b.blog", "b", n=300, threads=3)
    with open(d / "a.blog", "rb") as src, gzip.open(d / "c.blog.gz", "wb") as dst:
        dst.write(src.read())
    return d


def rows(df, *cols):
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


def test_counts_groups_and_sums_equal_bread_read(spark, logs):
    df = spark.read.format("blog").load(str(logs))          # a directory: all three files
    events = list(bread.read(str(logs)))
    assert df.count() == len(events) == 2 * 896 + 1008
    by = Counter((e.category, e.severity.name) for e in events)
    got = {(r["category"], r["severity"]): r["count"]
           for r in df.groupBy("category", "severity").count().collect()}
    assert got == dict(by)
    total = sum(e.args[0] for e in events if e.format.startswith("request"))
    assert df.where("format like 'request%'").selectExpr(
        "sum(cast(get_json_object(args, '$[0]') as bigint)) as s").first()["s"] == total
    # fields are JSON: queryable in SQL without string parsing
    slow = df.where("category = 'db'").selectExpr(
        "sum(cast(get_json_object(fields, '$.ms') as bigint)) as s").first()["s"]
    assert slow == sum(e.fields["ms"] for e in events if e.category == "db")
    assert rows(df, "path", "message", "clock") == sorted(
        (e.path, e.message, e.clock) for e in events)
    one = df.where(f"path = '{logs / 'a.blog'}'").select("host", "pid", "program").distinct()
    (r,) = one.collect()
    assert (r["host"], r["pid"]) == (next(iter(bread.read(str(logs / "a.blog")))).host,
                                     os.getpid())


def test_paths_globs_lists_and_gzip(spark, logs):
    a, gz = str(logs / "a.blog"), str(logs / "c.blog.gz")
    n_a = sum(1 for _ in bread.read(a))
    assert spark.read.format("blog").load(gz).count() == n_a
    assert spark.read.format("blog").load([a, gz]).count() == 2 * n_a
    assert spark.read.format("blog").load(str(logs / "*.blog")).count() == \
        sum(1 for _ in bread.read(str(logs / "*.blog")))


def test_a_split_file_gives_the_rows_of_one_partition(spark, logs):
    path = str(logs / "b.blog")
    whole = spark.read.format("blog").load(path)
    split = spark.read.format("blog").option("splitBytes", "3000").load(path)
    assert split.rdd.getNumPartitions() > 5 and whole.rdd.getNumPartitions() == 1
    cols = ("clock", "writer", "message", "args", "fields")
    assert rows(split, *cols) == rows(whole, *cols)
    assert split.count() == sum(1 for _ in bread.read(path))


def test_a_columnar_file_gives_the_rows_of_its_row_twin(spark, logs, tmp_path):
    # Proves: columnar frames (docs/format.md 5.5) reach Spark as the events frames of the
    # same compacted stream do, whole or split into partitions.
    from bread.compact.compactor import Compactor
    for columnar in (False, True):
        c = Compactor(str(tmp_path))
        c.add_file(str(logs / "b.blog"))
        with open(tmp_path / f"{columnar}.blog", "wb") as out:
            c.write(out, [], columnar)
    cols = ("time", "clock", "writer", "severity", "message", "args", "fields")
    want = rows(spark.read.format("blog").load(str(tmp_path / "False.blog")), *cols)
    for split in ("3000", str(1 << 30)):
        df = spark.read.format("blog").option("splitBytes", split).load(
            str(tmp_path / "True.blog"))
        assert rows(df, *cols) == want
    assert len(want) == sum(1 for _ in bread.read(str(logs / "b.blog")))


def test_sorted_is_bread_s_order(spark, logs):
    paths = [str(logs / "a.blog"), str(logs / "b.blog")]
    df = spark.read.format("blog").option("sorted", "true").load(paths)
    assert df.rdd.getNumPartitions() == 1
    got = [(r["path"], r["clock"], r["message"]) for r in df.collect()]
    want = [(e.path, e.clock, e.message) for e in bread.read(paths, sort=True)]
    assert got == want


def test_reader_filters_give_what_bread_filters_give(spark, logs):
    # minSeverity, categories, since, until: applied by the reader, before decoding.
    path = str(logs / "a.blog")
    events = list(bread.read(path))
    mid = sorted(e.ns for e in events)[len(events) // 2]
    want = list(bread.read(path, min_severity="WARNING", categories=["api", "db"], since=mid))
    df = (spark.read.format("blog").option("minSeverity", "WARNING")
          .option("categories", "api, db").option("since", str(mid)).load(path))
    assert sorted(r["clock"] for r in df.select("clock").collect()) == \
        sorted(e.clock for e in want)
    assert 0 < len(want) < len(events)
    with pytest.raises(Exception, match="format blog: .*loud"):
        spark.read.format("blog").option("minSeverity", "loud").load(path).count()


def test_one_dataframe_queried_again_without_a_where(spark, logs):
    # Spark SQL filters are Spark's (see docs/spark.md): a filtered query must not leave
    # anything behind for the next query of the same DataFrame.
    df = spark.read.format("blog").load(str(logs / "b.blog"))
    n = df.count()
    assert df.where("category = 'db'").count() == 90
    assert df.count() == n == len(df.select("clock").collect()) == 1008


def test_damage_is_reported_failed_or_ignored(spark, logs, tmp_path, capfd):
    data = bytearray((logs / "a.blog").read_bytes())
    # Inside the second events frame (not in metadata, whose size depends on the value
    # types the process described before): its events are lost, the others read.
    from bread.frames import iter_frames
    from blogformat.frames import FRAME_EVENTS
    frame = [f for f in iter_frames(io.BytesIO(bytes(data))) if f.kind == FRAME_EVENTS][1]
    for k in range(frame.offset + 40, frame.offset + 80):
        data[k] ^= 0xFF
    bad = tmp_path / "bad.blog"
    bad.write_bytes(bytes(data))
    readable = sum(1 for _ in bread.read(str(bad)))
    assert 0 < readable < sum(1 for _ in bread.read(str(logs / "a.blog")))
    assert spark.read.format("blog").load(str(bad)).count() == readable
    assert spark.read.format("blog").option("damage", "ignore").load(str(bad)).count() == readable
    # The report goes to the task's stderr, which Spark keeps (here: the JVM's); the
    # reader's own read(), run in this process, shows what it says.
    for damage, said in (("report", True), ("ignore", False)):
        r = bread.spark.BlogReader({"path": str(bad), "damage": damage},
                                   list(bread.sinks.batches.COLUMNS))
        n = sum(b.num_rows for part in r.partitions() for b in r.read(part))
        err = capfd.readouterr().err
        assert n == readable
        assert ("damage=report" in err and f"{bad}: skipped" in err and "offset" in err) == said
    with pytest.raises(Exception, match="damage=fail"):
        spark.read.format("blog").option("damage", "fail").load(str(bad)).count()


def test_a_file_whose_name_is_not_utf8_is_a_partition_like_any_other(tmp_path):
    # Proves: what each Spark task runs (BlogReader.read, no JVM needed) reads a directory
    # holding a log named in bytes that are not UTF-8: its path column is os.fsdecode's
    # name with U+FFFD for each undecodable byte (Arrow raised UnicodeEncodeError, which
    # failed the whole job).
    try:
        write(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"bad\xff.blog")), "x", n=5,
              threads=1)
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    r = bread.spark.BlogReader({"path": str(tmp_path)}, list(bread.sinks.batches.COLUMNS))
    paths = [p for part in r.partitions() for b in r.read(part) for p in b.column("path")]
    assert {p.as_py() for p in paths} == {os.path.join(str(tmp_path), "bad\ufffd.blog")}
    assert len(paths) == sum(1 for _ in bread.read(str(tmp_path))) > 0


def test_the_driver_opens_an_object_once_to_plan_its_parts(tmp_path, s3):
    # Proves: planning (BlogReader.partitions, on the driver) opens an object once for its
    # check and its size (before: twice, three HEADs and two GETs on the first bytes),
    # and the parts it plans read every event once.
    pafs = pytest.importorskip("pyarrow.fs")
    write(str(tmp_path / "a.blog"), "a", n=3000)
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint, allow_bucket_creation=True)
    fs.create_dir("plan")
    with fs.open_output_stream("plan/a.blog", compression=None) as out:
        out.write((tmp_path / "a.blog").read_bytes())
    s3.served.clear()
    r = bread.spark.BlogReader({"path": "s3://plan/a.blog", "endpoint": s3.endpoint,
                                "splitBytes": "4096"}, ["clock"])
    parts = r.partitions()
    assert len(parts) > 2
    # (the second GET: 63 bytes read again from offset 1, the store's ranged reads checked)
    assert [method for method, *_ in s3.served] == ["HEAD", "HEAD", "GET", "GET"]
    assert sum(b.num_rows for part in parts for b in r.read(part)) == \
        sum(1 for _ in bread.read(str(tmp_path / "a.blog")))


def test_an_object_that_fails_is_a_clear_error_or_the_task_s_damage_naming_its_url(tmp_path):
    # Proves: planning (the driver) fails naming an object deleted since the listing or
    # whose store fails (before: pyarrow's message without the URL); a task whose object's
    # reads fail reports it as damage with its URL (before: an OSError without it), one
    # deleted since planning fails naming it; no JVM needed, as in each task.
    from helpers import StubS3
    write(str(tmp_path / "a.blog"), "a", n=300)
    server = StubS3({"logs/a.blog": (tmp_path / "a.blog").read_bytes()})
    try:
        options = {"path": "s3://b/logs/a.blog", "endpoint": server.endpoint}
        for fault in ("gone", "whole"):
            server.faults = {"logs/a.blog": fault}
            with pytest.raises(OSError) as exc:
                bread.spark.BlogReader(options, ["message"]).partitions()
            assert exc.value.filename == "s3://b/logs/a.blog"
        server.faults = {}
        r = bread.spark.BlogReader({**options, "damage": "fail"}, ["message"])
        parts = r.partitions()
        server.faults = {"logs/a.blog": "whole"}
        with pytest.raises(bread.DamagedLog, match="s3://b/logs/a.blog: .*object"):
            list(r.read(parts[0]))
        server.faults = {"logs/a.blog": "gone"}
        with pytest.raises(FileNotFoundError) as exc:
            list(r.read(parts[0]))
        assert exc.value.filename == "s3://b/logs/a.blog"
    finally:
        server.stop()


def test_bad_input_and_options_fail_with_a_clear_message(spark, logs, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a log at all\n" * 10)
    with pytest.raises(Exception, match="notes.txt: not a blog log file"):
        spark.read.format("blog").load(str(text)).count()
    with pytest.raises(Exception, match="option damage must be one of"):
        spark.read.format("blog").option("damage", "loud").load(str(logs)).count()
    with pytest.raises(Exception, match="unknown option"):
        spark.read.format("blog").option("sortd", "true").load(str(logs)).count()
    with pytest.raises(Exception, match="splitBytes"):
        spark.read.format("blog").option("splitBytes", "-1").load(str(logs)).count()
    with pytest.raises(Exception, match="needs a path"):
        spark.read.format("blog").load().count()


def test_typed_tables_per_call_site(spark, logs, tmp_path):
    path = str(logs / "a.blog")
    df = bread.spark.events(spark, path, source="request {} took {} ms")
    types = dict(df.dtypes)
    assert [c for c in df.columns][:7] == list(bread.sinks.tables.COMMON)
    assert (types["arg0"], types["arg1"], types["route"]) == ("bigint", "double", "string")
    want = sorted((e.args[0], e.args[1], e.fields["route"], e.writer)
                  for e in bread.read(path) if e.format == "request {} took {} ms")
    assert sorted(tuple(r) for r in df.select("arg0", "arg1", "route", "writer").collect()) == want
    sid = next(e.source.id for e in bread.read(path) if e.category == "db")
    by_id = bread.spark.events(spark, path, source=sid)
    assert (dict(by_id.dtypes)["q"], dict(by_id.dtypes)["ms"]) == ("string", "bigint")
    assert by_id.count() == 80
    with pytest.raises(ValueError, match="more than one kind of event"):
        bread.spark.events(spark, path, source="work")    # the function: three formats
    # A site that logged different types: the widest common type, never a silent null.
    s = blog.Session()
    log = s.get_logger("m")
    out = blog.FileOutputStream(str(tmp_path / "m.blog"), mode="wb")
    for v, w in ((1, True), (2.5, 3), ("x", None), ([1, 2], 4)):
        log.info("v {} w {}", v, w, n=7)
    s.consume(out)
    out.close()
    m = bread.spark.events(spark, str(tmp_path / "m.blog"), source="v {} w {}")
    assert dict(m.dtypes)["arg0"] == "string" and dict(m.dtypes)["arg1"] == "bigint"
    assert [tuple(r) for r in m.select("arg0", "arg1", "n").collect()] == \
        [("1", 1, 7), ("2.5", 3, 7), ('"x"', None, 7), ("[1,2]", 4, 7)]
    with pytest.raises(ValueError, match="no event of source"):
        bread.spark.events(spark, path, source="nothing like it")


def test_the_spark_example_answers_from_the_logs(spark, tmp_path):
    # examples/spark_analysis.py, small: its answers agree with bread.read.
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    sys.path.insert(0, examples)    # by name: its service processes are spawned, and import it
    try:
        import spark_analysis as ex
        ex.simulate(str(tmp_path), seconds=0.3, processes=2, threads=1)
    finally:
        sys.path.remove(examples)
    got = ex.analyze(spark, str(tmp_path))
    events = list(bread.read(str(tmp_path)))
    handled = Counter(e.fields["route"] for e in events if e.format.startswith("handled"))
    assert {r["route"]: r["requests"] for r in got["slowest"].collect()} == dict(handled)
    rates = got["error_rate"].collect()
    assert sum(r["events"] for r in rates) == sum(e.category in ("api", "db") for e in events)
    top = got["noisiest"].collect()
    assert top[0]["count"] == max(Counter((e.function, e.line) for e in events).values())


def test_spark_reads_the_parquet_export(spark, logs, tmp_path):
    from bread.export import parquet
    path = str(logs / "a.blog")
    summary = parquet.export([path], str(tmp_path / "pq"))
    ev = spark.read.parquet(str(tmp_path / "pq" / "events.parquet"))
    assert ev.count() == summary["events"] == 896
    assert rows(ev, "clock", "message") == rows(spark.read.format("blog").load(path),
                                                "clock", "message")
    req = next(s for s in json.loads((tmp_path / "pq" / "sources.json").read_text())
               if s["format"].startswith("request"))
    t = spark.read.parquet(str(tmp_path / "pq" / req["file"]))
    assert (dict(t.dtypes)["time"], dict(t.dtypes)["arg0"], dict(t.dtypes)["arg1"]) == \
        ("timestamp", "bigint", "double")


def test_a_schema_of_some_columns_reads_only_those(spark, logs):
    # Python data sources get no column pruning from Spark: a schema naming the columns a
    # job needs is how it reads (and hands to Spark) only those.
    path = str(logs / "a.blog")
    df = spark.read.format("blog").schema("time timestamp, severity string, message string") \
        .load(path)
    assert df.columns == ["time", "severity", "message"]
    assert sorted(r["message"] for r in df.collect()) == sorted(e.message for e in bread.read(path))
    with pytest.raises(Exception, match="column clock of format blog is bigint, not string"):
        spark.read.format("blog").schema("clock string").load(path).count()
    with pytest.raises(Exception, match="no column.*when"):
        spark.read.format("blog").schema("when timestamp").load(path).count()


class _Order:
    def __init__(self, oid: int, qty: int) -> None:
        self.id, self.qty = oid, qty

    def __str__(self) -> str:
        return f"Order#{self.id}"


def test_an_adapted_class_s_fields_reach_spark(spark, tmp_path):
    # Proves: a class logged through blog.adapt is a structured value in Spark (its type
    # and fields as JSON in args; a typed table per call site), never its pickle.
    blog.adapt(_Order, fields=["id", "qty"])
    s = blog.Session()
    out = blog.FileOutputStream(str(tmp_path / "o.blog"), mode="wb")
    for i in range(3):
        s.get_logger("shop").info("placed {}", _Order(i, 10 * i))
    s.consume(out)
    out.close()
    df = spark.read.format("blog").load(str(tmp_path / "o.blog"))
    rows = df.select("message", "args").collect()
    assert [r.message for r in rows] == ["placed Order#0", "placed Order#1", "placed Order#2"]
    assert [json.loads(r.args)[0]["fields"] for r in rows] == [
        {"id": i, "qty": 10 * i} for i in range(3)]


@pytest.mark.slow
def test_cxx_binlog_files_are_read_whole_as_bread_reads_them(spark, logs):
    cxx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cxx")
    structs, damaged = (os.path.join(cxx, n) for n in ("LoggingAdaptedStructs.blog",
                                                        "trunc_payload.blog"))
    df = (spark.read.format("blog").option("splitBytes", "100").load([structs, damaged])
          .orderBy("path", "clock"))
    rows = df.select("message", "args", "severity", "writer_id").collect()
    want = list(bread.read([structs, damaged]))
    assert [r["message"] for r in rows] == [ev.message for ev in want]
    assert rows[2]["args"] == '[{"$struct":"Pair","fields":[["a",2],["b","three"]]}]'
    assert len(rows) == 16 and {r["severity"] for r in rows} >= {"INFO", "CRITICAL"}


def test_an_s3_prefix_loads_as_the_local_directory_a_large_object_by_ranges(spark, logs, s3):
    # The same files in moto's S3 (127.0.0.1): the same rows; a plain object split into
    # ranged partitions, a gzip object one partition.
    import pyarrow.fs
    fs = pyarrow.fs.S3FileSystem(endpoint_override=s3.endpoint, allow_bucket_creation=True)
    fs.create_dir("spark-logs")
    for name in os.listdir(logs):
        with open(logs / name, "rb") as src, fs.open_output_stream(
                f"spark-logs/svc/{name}", compression=None) as dst:
            dst.write(src.read())
    url = "s3://spark-logs/svc"
    remote = spark.read.format("blog").option("endpoint", s3.endpoint).option(
        "region", "us-east-1")
    cols = ("time", "clock", "writer", "severity", "message", "args", "fields", "pid")
    assert rows(remote.load(url), *cols) == rows(spark.read.format("blog").load(str(logs)),
                                                 *cols)
    split = remote.option("splitBytes", "3000").load(f"{url}/b.blog")
    assert split.rdd.getNumPartitions() > 5
    assert rows(split, *cols) == rows(spark.read.format("blog").load(str(logs / "b.blog")),
                                      *cols)
    assert remote.option("splitBytes", "3000").load(
        f"{url}/c.blog.gz").rdd.getNumPartitions() == 1


def test_a_typed_table_over_several_files_is_bread_read_s_events_of_that_site(spark, logs):
    # Proves (issue 29): every column of a site's typed table, time (to the microsecond),
    # severity, writer and writer id included, is what bread.read gives for that site's
    # events, with several files and several sites; the kinds are the reference's.
    from bread.decode.filters import names_source
    paths = [str(logs / "a.blog"), str(logs / "b.blog"), str(logs / "c.blog.gz")]
    for which in ("request {} took {} ms", "failed {}", "slow query {q}"):
        typer = bread.sinks.tables.infer(bread.read(paths), which)
        ref = bread.sinks.tables.batch(
            typer.names, typer.kinds,
            [bread.sinks.tables.common_values(e) + typer.row(e) for e in bread.read(paths)
             if names_source(e.source, which)]).to_pylist()
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        want = sorted(tuple((r["time"] - epoch) // datetime.timedelta(microseconds=1)
                            if k == "time" else v for k, v in r.items()) for r in ref)
        df = bread.spark.events(spark, paths, source=which)
        assert [t for _, t in df.dtypes[len(bread.sinks.tables.COMMON):]] == \
            [bread.sinks.tables.spark_type(k).lower() for k in typer.kinds]
        got = df.selectExpr("unix_micros(time)", *[f"`{c}`" for c in df.columns[1:]]).collect()
        assert sorted(tuple(r) for r in got) == want
        assert len(want) > 10
