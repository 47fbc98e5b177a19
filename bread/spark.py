"""blog logs in PySpark: ``spark.read.format("blog").load(path)``, no conversion step.

A data source on PySpark's Python Data Source API (``pyspark.sql.datasource``,
PySpark 4.1 or later): one row per event, read by ``bread``'s columnar batch
reader (``bread.sinks.batches``, the C fast path where it is built) and handed to
Spark as Arrow record batches. Each file is a partition; a file larger than
``splitBytes`` is split into several at byte offsets, each reading the frames
that begin in its range (``bread.frames.span_frames``: every event once,
whatever the cut), so that one big file uses every core. Paths may be URLs of
object storage (``s3://``, ``gs://``, ``hdfs://``, ``file://``: ``bread.inputs.objectstore``),
with the options ``endpoint`` and ``region``; a part of a large object fetches
only its byte range and the metadata before it. ``docs/spark.md`` says more: the
schema, the options, running on a cluster.

    from pyspark.sql import SparkSession
    import bread.spark
    spark = SparkSession.builder.getOrCreate()
    bread.spark.register(spark)
    df = spark.read.format("blog").load("logs/")
"""

from __future__ import annotations

import errno
import json
import sys
from typing import Any, Iterator, Mapping, Sequence, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from blogformat.frames import HEADER_SIZE, parse_header

from .sinks.batches import COLUMNS, portable
from .errors import DamagedLog, ListingCut, NotABlogFile, OptionError
from .decode.filters import Filter as BreadFilter
from .inputs import CXX, Input, Inputs, kind_of
from .inputs.compressed import GzipInput
from .sinks import tables
from .sinks.typed import TypedTable, find_kinds
from .reader import Reader

__all__ = ["BlogDataSource", "SCHEMA", "events", "register"]

#: One row per event. ``time`` is UTC, to the microsecond (Spark's precision; ``clock``
#: keeps every tick); ``args`` and ``fields`` are JSON text (docs/spark.md says why).
SCHEMA = ("time TIMESTAMP, clock BIGINT, severity STRING, severity_value BIGINT, "
          "category STRING, writer STRING, writer_id BIGINT, source_id BIGINT, "
          "function STRING, file STRING, line BIGINT, format STRING, message STRING, "
          "args STRING, fields STRING, host STRING, pid BIGINT, program STRING, path STRING")

_TYPES = {c.split()[0]: c.split()[1].lower() for c in SCHEMA.split(", ")}

#: Files larger than this are read by several tasks (option ``splitBytes``).
SPLIT_BYTES = 64 << 20
#: Rows per Arrow batch handed to Spark (option ``batchSize``).
BATCH_ROWS = 65536
DAMAGE = ("report", "fail", "ignore")
_OPTIONS = {"path", "paths", "sorted", "damage", "splitbytes", "batchsize", "minseverity",
            "categories", "since", "until", "source", "sourcecolumns", "endpoint", "region"}


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("blog")`` available in this session."""
    spark.dataSource.register(BlogDataSource)


class FilePart(InputPartition):
    """A task's share: a byte range ``[start, end)`` of one file, a whole file (None),
    or, sorted, every input at once (``paths``)."""

    def __init__(self, paths: Sequence[str], start: int | None = None,
                 end: int | None = None) -> None:
        super().__init__((tuple(paths), start, end))
        self.paths = tuple(paths)
        self.start = start
        self.end = end


class BlogDataSource(DataSource):
    """The ``blog`` format. Options: ``sorted``, ``damage``, ``splitBytes``, ``batchSize``,
    the reader's filters ``minSeverity``, ``categories`` (comma-separated), ``since``,
    ``until`` (as ``bread.read`` takes them), which skip events before they are decoded,
    and for URLs of object storage ``endpoint`` and ``region``."""

    @classmethod
    def name(cls) -> str:
        return "blog"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> "BlogReader":
        if "source" not in self.options:   # a schema of some columns: only those are read
            for f in schema.fields:
                want = _TYPES.get(f.name)
                if want is not None and f.dataType.simpleString() != want:
                    raise OptionError(f"column {f.name} of format blog is {want}, "
                                      f"not {f.dataType.simpleString()}")
        return BlogReader(self.options, [f.name for f in schema.fields])


class BlogReader(DataSourceReader):
    """Plans the partitions (on the driver) and reads them (in the tasks)."""

    def __init__(self, options: Mapping[str, str], columns: Sequence[str]) -> None:
        unknown = sorted(k for k in (k.lower() for k in options) if k not in _OPTIONS)
        if unknown:
            raise OptionError(f"unknown option(s) {', '.join(unknown)} for format blog; the "
                              "options are sorted, damage, splitBytes, batchSize, minSeverity, "
                              "categories, since, until, endpoint, region")
        # A typed table of one call site (``events``): the source, and its columns' kinds.
        self.source: int | str | None = None
        self.typer: tables.Typer | None = None
        if "source" in options:
            self.source, self.typer = _typed(options)
        else:
            bad = [c for c in columns if c not in COLUMNS]
            if bad:
                raise OptionError(f"no column(s) {', '.join(bad)} in format blog; "
                                  f"its columns are {', '.join(COLUMNS)}")
        self.columns = list(columns)
        self.paths = _paths(options)
        self.storage = storage(options)
        self.sorted = _flag(options.get("sorted", "false"), "sorted")
        self.damage = str(options.get("damage", "report")).lower()
        if self.damage not in DAMAGE:
            raise OptionError(f"option damage must be one of {', '.join(DAMAGE)}, "
                              f"not {options.get('damage')!r}")
        self.split = _count(options.get("splitBytes", str(SPLIT_BYTES)), "splitBytes")
        self.batch_rows = _count(options.get("batchSize", str(BATCH_ROWS)), "batchSize")
        # Filters the reader applies before decoding (bread.decode.filters): checked here, on
        # the driver, so that a bad value fails the query at once.
        self.filter_options: dict[str, Any] = {
            "min_severity": options.get("minSeverity"),
            "categories": options.get("categories"),
            "since": _time(options.get("since")),
            "until": _time(options.get("until")),
        }
        if self.filter_options["categories"] is not None:
            self.filter_options["categories"] = [
                c.strip() for c in self.filter_options["categories"].split(",")]
        try:
            self._window = BreadFilter.make(**self.filter_options)
        except ValueError as exc:
            raise OptionError(f"format blog: {exc}") from None

    # --- planning (driver) ---------------------------------------------------------

    def partitions(self) -> list[FilePart]:
        # Files that their directory's manifest shows outside since/until are not opened.
        found: list[Input] = []
        for inp in Inputs(self.paths, storage_options=self.storage).kept(
                self._window.since, self._window.until):
            if isinstance(inp, ListingCut):
                raise inp
            found.append(inp)
        sizes = [_split_size(inp) for inp in found]   # each opened once
        files = [cast(str, inp.source) for inp in found]   # (paths: no file object here)
        if self.sorted:    # one task merges every input by time
            return [FilePart(files)]
        parts = []
        for path, size in zip(files, sizes):
            if size is None or size <= self.split:
                parts.append(FilePart([path]))
                continue
            for start in range(0, size, self.split):
                parts.append(FilePart([path], start, min(start + self.split, size)))
        return parts

    # --- reading (tasks) -----------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        part = cast(FilePart, partition)   # one that partitions() made
        flt = BreadFilter.make(**self.filter_options, source=self.source)
        span = None if part.start is None or part.end is None else (part.start, part.end)
        source = list(part.paths) if len(part.paths) != 1 else part.paths[0]
        reader = Reader(source, sort=self.sorted, filter=flt, span=span,
                        storage_options=self.storage)
        if self.source is None:
            for batch in reader.batches(self.columns, self.batch_rows, arrow=True):
                yield portable(batch)
        else:
            yield from self._typed_batches(reader)
        if reader.damage and self.damage != "ignore":
            lines = "\n".join(str(d) for d in reader.damage)
            if self.damage == "fail":
                raise DamagedLog(f"damaged log (option damage=fail):\n{lines}")
            print(f"bread: skipped damaged bytes (option damage=report):\n{lines}",
                  file=sys.stderr)


    def _typed_batches(self, reader: Reader) -> Iterator[Any]:
        assert self.typer is not None
        table = TypedTable(reader, self.typer, self.columns[len(tables.COMMON):], self.batch_rows)
        yield from table
        if table.late:
            print(f"bread: {table.late} event(s) of source {self.source!r} do not fit the "
                  "columns found when the query began (written since?): left out",
                  file=sys.stderr)


def events(spark: SparkSession, path: str | Sequence[str], source: int | str,
           **options: str) -> DataFrame:
    """A DataFrame of one kind of event: its arguments as typed columns (``bread.sinks.tables``).

    ``source`` names the call site: its format string, its function, or its source id.
    The columns' types are found by a first pass over the files on the driver, then the
    tasks read them as ``spark.read.format("blog")`` would (``options`` are its options).
    A source id is an id within one file (each process numbers its own): give it with
    one file; with several, name the format string.
    """
    paths = [path] if isinstance(path, str) else list(path)
    typer = find_kinds(Reader(paths, filter=BreadFilter.make(source=source),
                              storage_options=storage(options)), source)
    if typer is None:
        raise ValueError(f"no event of source {source!r} in {', '.join(paths)}")
    names = typer.names
    ddl = ", ".join(["time TIMESTAMP", "severity STRING", "writer STRING", "writer_id BIGINT",
                     "host STRING", "pid BIGINT", "path STRING"]
                    + [f"`{n.replace('`', '``')}` {tables.spark_type(k)}"
                       for n, k in zip(names, typer.kinds)])
    r = spark.read.format("blog").schema(ddl).option("source", json.dumps(source)).option(
        "sourceColumns", json.dumps({"positional": typer.positional, "kinds": typer.kinds,
                                     "fields": list(typer.fields)}))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(paths)


def _typed(options: Mapping[str, str]) -> tuple[int | str, tables.Typer]:
    try:
        source = json.loads(options["source"])
        cols = json.loads(options.get("sourceColumns", "null"))
        positional, kinds, fields = cols["positional"], cols["kinds"], cols["fields"]
    except (ValueError, TypeError, KeyError):
        raise OptionError("option source is set by bread.spark.events(...); "
                          "load typed tables with it") from None
    if not isinstance(source, (int, str)) or type(positional) is not int \
            or not isinstance(kinds, list) or not all(k in tables.KINDS for k in kinds) \
            or not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise OptionError("option source is set by bread.spark.events(...); "
                          "load typed tables with it")
    return source, tables.columns_typer(positional, kinds, tuple(fields))


def _paths(options: Mapping[str, str]) -> list[str]:
    if "paths" in options:      # load([a, b]) passes a JSON list
        try:
            paths = json.loads(options["paths"])
        except ValueError:
            paths = None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise OptionError(
                f"option paths must be a JSON list of paths, not {options['paths']!r}")
        if "path" in options:
            paths.append(options["path"])
        if paths:
            return paths
    if "path" in options and options["path"]:
        return [options["path"]]
    raise OptionError('format blog needs a path: spark.read.format("blog").load(path)')


def storage(options: Mapping[str, str]) -> dict[str, str]:
    """The options ``endpoint`` and ``region`` as ``bread.read``'s ``storage_options``."""
    names = {"endpoint": "endpoint_override", "region": "region"}
    return {names[k.lower()]: v for k, v in options.items() if k.lower() in names}


def _flag(value: str, name: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def _count(value: str, name: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n < 1:
        raise OptionError(f"option {name} must be a positive number, not {value!r}")
    return n


def _time(value: str | None) -> int | str | None:
    """A time option: ns since the epoch (digits), or what bread.read takes (ISO 8601, 15m)."""
    if value is not None and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _split_size(inp: Input) -> int | None:
    """The size of a log file that may be split at byte offsets; None for a gzip file or a
    C++ binlog file (read whole, by one task: its entries cannot be split at a byte
    offset). A file that is not a log fails the query, naming it, as does an object whose
    store fails (OSError: its URL, the reason)."""
    f = inp.open()
    try:
        head = f.read(HEADER_SIZE)
        size = None if isinstance(f, GzipInput) else f.seek(0, 2)
        failed = inp.store_error(f)
    finally:
        f.close()
    if failed is not None:    # (an object whose store failed: not taken for a non-log)
        raise OSError(errno.EIO, failed, inp.name)
    if kind_of(head) == CXX:
        return None
    if len(head) < HEADER_SIZE or parse_header(head) is None:
        raise NotABlogFile(f"{inp.name}: not a blog log file (it does not begin with a "
                           "frame)")
    return size
