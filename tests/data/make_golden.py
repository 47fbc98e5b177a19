"""Write the golden files of format version 1 (``tests/data/v1/``) and their expected output.

This script was run ONCE, by hand, and its outputs are committed:

    python tests/data/make_golden.py

NEVER regenerate the existing files, and never edit or delete them: they are
the proof that ``bread`` still reads what blog wrote when format version 1
was current. ``tests/test_golden.py`` runs bread on the COMMITTED ``.blog``
files and compares with the COMMITTED expected outputs, so a change of the
reader that renders or decodes them differently fails, whatever the writer
does today. If such a change is intended (a bug fix in rendering), update the
expected output by hand, in its own commit, and say why.

The script writes only the golden files that are not there yet: a file set
that exists is kept as it is, and one that exists in part is an error. So a
later addition that keeps the format at version 1 (a new extension code,
say) adds a new function to GOLDEN below and runs the script again. A new
format version gets a new folder (``v2/``, written by a copy of this script
adapted to the writer of that day); no folder is ever deleted.

For each ``NAME.blog`` the script writes, beside it:

* ``NAME.txt``: the exact stdout of ``bread --escape never NAME.blog`` (default
  format, ``%S %C [%d] %n %m (%G:%L)``; control characters as logged, as bread
  printed them into a pipe when v1 was made);
* ``NAME.m.txt``: the exact stdout of ``bread --escape never -f "%S %C %n %m"
  NAME.blog``,
  which depends on neither times nor paths;
* ``NAME.stderr``: bread's exact stderr (the same for both formats);
* ``NAME.json``: ``{"exit": N}``, bread's exit status.

Regenerating (into another folder: ``--out DIR``) gives the same ``.m.txt``
files, and the same ``.txt`` and ``.stderr`` files except for the times and
the raw clocks of the Dropped notices: the threads' events are sequenced,
the values are fixed, sets hold ints or one element (their order does not
depend on the hash seed), and the writer's zone is pinned to Asia/Kolkata
(UTC+05:30, no daylight saving time) below, so that ``%d`` shows a zone that
is neither UTC nor, likely, the zone of the machine that runs the tests. The
``.blog`` files themselves differ in every regeneration (clocks, host name,
process id, the paths in tracebacks): they are frozen as they were written,
and that is fine.

Only blog's public API is used: ``blog.Session``, ``session.get_logger``,
``session.writer()``, ``blog.event(..., session=...)``,
``blog.MemoryOutputStream`` and ``session.consume(stream)``.
"""

from __future__ import annotations

import os
import time

os.environ["TZ"] = "Asia/Kolkata"   # the writer's zone, recorded in each file's ClockSync
time.tzset()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime as dt  # noqa: E402
import enum  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import queue  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import typing  # noqa: E402
import threading  # noqa: E402
import uuid  # noqa: E402
import zoneinfo  # noqa: E402
from decimal import Decimal  # noqa: E402
from typing import Callable  # noqa: E402

import pytz  # noqa: E402

import blog  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_DIR = os.path.join(HERE, "v1")
MINIMAL_FORMAT = "%S %C %n %m"


# --- values ------------------------------------------------------------------------------

class Color(enum.Enum):
    RED = 1
    GREEN = "g"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: list


@dataclasses.dataclass(frozen=True)
class Segment:
    start: Point
    end: Point
    label: str = "seg"


class Widget:
    """A class the format does not know: logged as an opaque value (its type and str())."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __str__(self) -> str:
        return f"Widget #{self.n}"

    def __repr__(self) -> str:
        return f"Widget(n={self.n})"


UTC = dt.timezone.utc
NAIVE = dt.datetime(2024, 2, 29, 23, 59, 59, 999999)
AWARE_UTC = dt.datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
FIXED = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30)))
FIXED_NAMED = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=-3), "BRT"))
# The second 02:30 of the night summer time ends in Paris (fold=1: UTC+01:00).
PARIS = dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
NEW_YORK = pytz.timezone("America/New_York").localize(dt.datetime(2024, 7, 4, 9, 15))
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")


# --- every_type.blog ---------------------------------------------------------------------

def every_type() -> bytes:
    s = blog.Session(name="golden-every-type")
    app = s.get_logger("app")
    lv = s.get_logger("values")
    out = blog.MemoryOutputStream()

    @blog.event("shipped order {} to {city}", severity="warning", category="app", session=s)
    def shipped(order_id: int, city: str, weight: float = 1.0): ...

    app.info("every value type of format version {}", 1)
    lv.trace("none {} bools {} {} as number {:d}", None, True, False, True)
    lv.debug("small ints {} {} {} {:+05d}", 0, 1, -1, -42)
    lv.debug("64-bit edges {} {} {} {:#x}", 2**63 - 1, -2**63, 2**64 - 1, 2**64 - 1)
    lv.debug("beyond 64 bits {} {} {:,} {}", 2**64, -2**63 - 1, 10**30, -(2**200))
    lv.info("floats {} {} {:>8.2f} {:e}", 0.1, 1.5, 3.14159, 6.02e23)
    lv.info("special floats {} {} {} {} {:>8.2f}", math.inf, -math.inf, math.nan, -0.0, math.nan)
    lv.info("strings {!r} {} {!r} raw {} {!a}", "", "héllo wörld ✓ 😀", "bell\x07tab\there",
            "bell\x07tab\there", "snow ☃")
    lv.info("lone surrogates {!r} raw {}", "\udc80", "x\ud800y")
    lv.info("bytes {} {!r} empty {}", b"\x00\x01\xffbin", b"abc", b"")
    lv.info("list {} tuple {} one {} empty {}", [1, "a", None, [2.5]], (1, "b"), (7,), ())
    lv.info("dict {} empty {}", {"k": 1, 2: [3], None: (4,), (1, 2): "t"}, {})
    lv.info("set {} frozenset {} empty {}", {3, 1, 2}, frozenset({"x"}), set())
    lv.info("datetimes naive {} utc {} fixed {} named fixed {}", NAIVE, AWARE_UTC, FIXED,
            FIXED_NAMED)
    lv.info("zoned {} {!r} pytz {}", PARIS, PARIS, NEW_YORK)
    lv.info("datetime spec {:%Y-%m-%d %H:%M} repr {!r}", NAIVE, FIXED_NAMED)
    lv.info("date {} time {} aware time {} timedelta {} negative {}",
            dt.date(1999, 12, 31), dt.time(23, 59, 59, 999999),
            dt.time(8, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            dt.timedelta(days=2, hours=3, microseconds=4), dt.timedelta(seconds=-1))
    lv.info("decimals {} {:>8.2f} {} {} {}", Decimal("3.14159"), Decimal("2.5"), Decimal("-0"),
            Decimal("NaN"), Decimal("1E+3"))
    lv.info("uuid {} {!r}", UID, UID)
    lv.warning("enums {} {!r} int enum {}", Color.RED, Color.GREEN, Level.HIGH)
    lv.warning("dataclasses {} {}", Point(1, 2.5, ["a"]), Segment(Point(0, 0.0, []),
                                                                  Point(3, 4.0, [1])))
    try:
        int("forty-two")
    except ValueError as exc:
        caught = exc
    lv.error("exceptions {!r} without traceback, {} with", KeyError("k"), caught)
    lv.warning("opaque {} {!r}", Widget(7), Widget(8))
    lv.info("user {user} paid {amount:>8.2f} at {when}", user="ann", amount=Decimal("12.5"),
            when=NAIVE, extra=[1, 2])
    lv.info("order {} for {user!r}", 42, user="bob")
    lv.critical("nested {} and {}", None, {"deep": [1, (2, {3}), frozenset()]})
    app.info("literal {{braces}} and {} placeholder", "one")
    for i in range(3):
        app.debug("tick {}", i)
    shipped(42, "Zürich", weight=2.5)
    try:
        try:
            {}["missing"]
        except KeyError as exc:
            raise RuntimeError("lookup failed") from exc
    except RuntimeError:
        app.exception("request {} failed: {exception}", 7)
    s.consume(out)
    return out.getvalue()


# --- two_writers.blog --------------------------------------------------------------------

class Worker(threading.Thread):
    """A thread that runs the jobs it is given, one at a time, while the main thread waits."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.done: queue.Queue[None] = queue.Queue()

    def run(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()
            self.done.put(None)

    def do(self, job: Callable[[], None]) -> None:
        self.jobs.put(job)
        self.done.get()

    def stop(self) -> None:
        self.jobs.put(None)
        self.join()


def two_writers() -> bytes:
    s = blog.Session(name="golden-two-writers")
    ingest = s.get_logger("ingest")
    store = s.get_logger("store")
    out = blog.MemoryOutputStream()

    def fetch(n: int) -> None:
        ingest.info("fetched batch {} of {}", n, 4)

    def save(n: int, rows: int) -> None:
        store.debug("saved batch {} ({} rows)", n, rows)

    def rename(name: str) -> None:
        s.writer().name = name   # in band: the events before it keep the old name

    alpha, beta = Worker("alpha"), Worker("beta")
    alpha.start()
    beta.start()
    alpha.do(lambda: fetch(1))          # alpha is writer 1
    beta.do(lambda: save(1, 10))        # beta is writer 2
    alpha.do(lambda: fetch(2))
    s.consume(out)                      # alpha's two events, then beta's
    beta.do(lambda: save(2, 20))
    beta.do(lambda: rename("beta-renamed"))
    alpha.do(lambda: fetch(3))
    beta.do(lambda: save(3, 30))        # the first event under the new name
    s.consume(out)
    beta.do(lambda: save(4, 40))
    alpha.do(lambda: fetch(4))
    s.consume(out)
    alpha.stop()
    beta.stop()
    s.consume(out)                      # nothing left: writes nothing
    return out.getvalue()


# --- dropped.blog ------------------------------------------------------------------------

def dropped() -> bytes:
    # 256 bytes hold 3 of these events, never 4, whatever size their clock deltas take
    # (1 to 9 bytes each): each event is 70 bytes plus its delta.
    s = blog.Session(name="golden-dropped", overflow="drop", channel_capacity=256)
    log = s.get_logger("burst")
    out = blog.MemoryOutputStream()
    pad = "x" * 64
    for i in range(5):                  # 3 kept, 2 dropped
        log.info("burst event {} {}", i, pad)
    s.consume(out)
    log.info("too large to ever fit {}", "y" * 300)   # dropped: larger than the channel
    for i in range(5, 7):               # 2 kept
        log.info("burst event {} {}", i, pad)
    s.consume(out)
    return out.getvalue()


def summary() -> bytes:
    # Two streams, as a file that was written by two runs: each closed cleanly with
    # its Summary entry (tag 6, added in blog 0.1 without a version change).
    out = blog.MemoryOutputStream()
    for run in range(2):
        s = blog.Session(name=f"golden-summary-{run}")
        log = s.get_logger("run")
        log.info("run {} starts", run)
        for i in range(3):
            log.warning("step {} of run {}", i, run)
        s.consume(out)
        s.finish(out)
    return out.getvalue()


def _nested(n: int) -> None:
    if n == 0:
        err = ValueError("bad fill")
        err.add_note("order 7")
        raise err
    _nested(n - 1)


def exceptions() -> bytes:
    # Exceptions kept as structured frames (extension 13's elements 3-5, added on
    # 2026-11-26 without a version change): a chain of a context and a cause, notes, a
    # repeated frame, and one value with its source lines kept (keep_source_lines).
    s = blog.Session(name="golden-exceptions")
    log = s.get_logger("exc")
    out = blog.MemoryOutputStream()
    try:
        try:
            {}["k"]
        except KeyError:
            try:
                _nested(5)
            except ValueError as exc:
                raise RuntimeError("order failed") from exc
    except RuntimeError:
        log.exception("order {} failed", 7)
        s.keep_source_lines = True
        log.exception("kept {}", 8)
    log.info("bare {!r}", KeyError("never raised"))
    s.consume(out)
    return out.getvalue()


class Side(enum.StrEnum):
    BUY = "buy"
    SELL = "sell"


class Perm(enum.Flag):
    R = 1
    W = 2


class Planet(enum.Enum):
    EARTH = (5.97, 6.37)      # a value that is not a scalar: the member describes itself


@dataclasses.dataclass
class Fill:
    oid: int
    px: float
    venue: str = dataclasses.field(default="X", repr=False)


class Leg(typing.NamedTuple):
    sym: str
    qty: int


def described() -> bytes:
    # Value types described once per stream (RecordType and EnumMember entries, tags 8
    # and 9; extensions 15 and 16, added on 2026-11-26 without a version change): enum
    # members of each style, a dataclass with a field its repr leaves out, a named tuple,
    # nested in containers and as fields; and a member that still describes itself.
    s = blog.Session(name="golden-described")
    log = s.get_logger("types")
    out = blog.MemoryOutputStream()
    log.info("color {} level {} side {} perm {}", Color.RED, Level.HIGH, Side.SELL,
             Perm.R | Perm.W)
    log.info("fill {} leg {}", Fill(7, 101.25), Leg("AAPL", 100))
    log.info("nested {} {}", [Fill(8, 1.5), Leg("MSFT", -5)], {Side.BUY: Color.GREEN})
    log.info("again {!r} {}", Fill(9, 2.0, "Y"), Color.RED, side=Side.BUY)
    log.info("planet {}", Planet.EARTH)
    s.consume(out)
    return out.getvalue()


def stdlib_bridge() -> bytes:
    # Records of the stdlib logging bridge (EventSource element 12, style: "%" printf and
    # "literal", added on 2026-11-26 without a version change): conversions with flags,
    # widths and precisions, %%, mapping arguments as fields, extra fields, a message
    # without arguments holding % and braces, an object as the message, arguments that do
    # not fit their format, a custom level.
    import logging

    import blog.stdlib
    s = blog.Session(name="golden-stdlib")
    out = blog.MemoryOutputStream()
    lg = logging.Logger("vendor.db", logging.DEBUG)
    lg.addHandler(blog.stdlib.BlogHandler(session=s))
    lg.info("query %s took %8.3f ms (%+d rows, %x, %5.1f%%)", "select", 12.3456, 7, 255, 99.5)
    lg.warning("%(user)-6s retried %(n)03d times", {"user": "bob", "n": 4})
    lg.error("payment %r failed", "p-1", extra={"request_id": "r-9"})
    lg.debug("disk 100% full, %% and {braces} as they are")
    lg.info(ValueError("an object as the message"))
    lg.info("%d of %d", 1)
    lg.log(25, "notice %c %a %e", 65, "é", 1234.5)
    s.consume(out)
    return out.getvalue()


def _split_group() -> None:
    try:
        raise ExceptionGroup("batch", [ValueError("v1"), TypeError("t2")])
    except* ValueError:
        raise KeyError("while handling")


def groups() -> bytes:
    # Exception groups and SyntaxErrors (extension 13's elements 6 and 7, chain entries'
    # 5 and 6, added on 2026-12-07 without a version change): except*'s group of a member
    # with a context and a nested group, a group in a group with a note and a cause, a
    # SyntaxError's place; and exc_info=True outside an except block ("NoneType: None").
    # Source lines kept, so that the text does not depend on the machine that reads it.
    import logging

    import blog.stdlib
    s = blog.Session(name="golden-groups")
    s.keep_source_lines = True
    log = s.get_logger("exc")
    out = blog.MemoryOutputStream()
    try:
        _split_group()
    except ExceptionGroup:
        log.exception("split")
    inner = ExceptionGroup("inner", [OSError("disk")])
    inner.add_note("a note")
    try:
        raise ExceptionGroup("outer", [inner, RuntimeError("beside")]) from ValueError("cause")
    except ExceptionGroup:
        log.exception("nested")
    try:
        compile("def f():\n    x = = 1\n", "golden.py", "exec")
    except SyntaxError:
        log.exception("syntax")
    lg = logging.Logger("vendor", logging.DEBUG)
    lg.addHandler(blog.stdlib.BlogHandler(session=s))
    lg.error("outside", exc_info=True)
    s.consume(out)
    return out.getvalue()


GOLDEN = {"every_type": every_type, "two_writers": two_writers, "dropped": dropped,
          "summary": summary, "exceptions": exceptions, "described": described,
          "stdlib_bridge": stdlib_bridge, "groups": groups}


# --- expected bread output ---------------------------------------------------------------

def run_bread(directory: str, name: str, *options: str) -> tuple[bytes, bytes, int]:
    """bread's stdout, stderr and exit status, run as a user would, in ``directory``."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    p = subprocess.run([sys.executable, "-m", "bread", "--escape", "never", *options,
                        name + ".blog"],
                       cwd=directory, capture_output=True, env=env, check=False)
    return p.stdout, p.stderr, p.returncode


def run_bread_on(directory: str, name: str, data: bytes) -> tuple[tuple[bytes, bytes], bytes, int]:
    """bread's output of ``data`` with both formats (from a copy, so a failure writes nothing)."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        with open(os.path.join(tmp, name + ".blog"), "wb") as f:
            f.write(data)
        out, err, status = run_bread(tmp, name)
        out_m, err_m, status_m = run_bread(tmp, name, "-f", MINIMAL_FORMAT)
    if (err_m, status_m) != (err, status):
        raise SystemExit(f"make_golden: bread's stderr or exit status for {name} "
                         "depends on the format")
    return (out, out_m), err, status


def write_new(path: str, data: bytes) -> None:
    with open(path, "xb") as f:   # never overwrite a golden file
        f.write(data)


SUFFIXES = (".blog", ".txt", ".m.txt", ".stderr", ".json")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", default=VERSION_DIR,
                   help="folder to write to (default: tests/data/v1); existing files are kept")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in GOLDEN.items():
        paths = [os.path.join(args.out, name + x) for x in SUFFIXES]
        there = [os.path.basename(x) for x in paths if os.path.exists(x)]
        if len(there) == len(paths):
            print(f"{name}: kept (golden files are never regenerated)")
            continue
        if there:
            sys.stderr.write(f"make_golden: {args.out} holds only part of {name}'s files "
                             f"({', '.join(there)}): restore them from git\n")
            return 1
        data = make()
        if len(data) >= 10_000:
            raise SystemExit(f"make_golden: {name}.blog is {len(data)} bytes: keep it small")
        out, err, status = run_bread_on(args.out, name, data)
        write_new(paths[0], data)
        write_new(paths[1], out[0])
        write_new(paths[2], out[1])
        write_new(paths[3], err)
        write_new(paths[4], (json.dumps({"exit": status}) + "\n").encode("ascii"))
        print(f"{name}.blog: {len(data)} bytes, bread exit {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
