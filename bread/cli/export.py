"""``bread export``: the Parquet tables of ``bread.export.parquet`` (``--parquet OUT_DIR``),
or the events time-sorted as JSON lines (``--jsonl OUT``) or CSV (``--csv OUT``): what
``bread -s -o jsonl`` and ``-o csv`` print, in a file that appears whole or not at all."""

from __future__ import annotations

import argparse
import os
import sys

from blogstore.fileset import create_temp

from ..export import parquet
from ..errors import NotABlogFile
from ..inputs import STDIN
from ..render import escape_controls
from . import read
from .options import EXIT_OPEN, EXIT_USAGE, Parser, subcommand


def parser() -> argparse.ArgumentParser:
    """The options of ``bread export``."""
    p = Parser(prog="bread export", description=(
        "Export blog files: Parquet tables, or the events time-sorted as JSON lines or CSV "
        "(with filters or to a pipe: bread -s -o jsonl / -o csv [-l, -c, --since...])."))
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--parquet", metavar="OUT_DIR",
                      help="write events.parquet, sources/*.parquet and sources.json here")
    kind.add_argument("--jsonl", metavar="OUT",
                      help="write one JSON object per event, as bread -o jsonl (- : stdout)")
    kind.add_argument("--csv", metavar="OUT",
                      help="write CSV with a header row, as bread -o csv (- : stdout)")
    p.add_argument("--csv-formulas", choices=("quote", "raw"), default="quote",
                   help="--csv: quote (the default) or leave cells a spreadsheet would run "
                        "as formulas (as bread's option)")
    p.add_argument("inputs", nargs="+", metavar="FILE")
    return p


def run(args: argparse.Namespace) -> int:
    """``bread export``; the exit codes of bread."""
    if args.parquet is None:
        return _rows(args, "jsonl" if args.jsonl is not None else "csv",
                     args.jsonl if args.jsonl is not None else args.csv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        sys.stderr.write("bread export: Parquet needs pyarrow: pip install 'blog-bread[arrow]'\n")
        return 1
    if STDIN in args.inputs:
        sys.stderr.write("bread export: reads files (three passes), not standard input\n")
        return 1
    try:
        summary = parquet.export(args.inputs, args.parquet,
                                 sys.stderr if sys.stderr.isatty() else None)
    except (OSError, NotABlogFile) as exc:
        sys.stderr.write(f"bread export: {escape_controls(str(exc))}\n")
        return 2
    for d in summary["damage"]:
        sys.stderr.write(f"bread: {escape_controls(d)}\n")
    if summary["late"]:
        sys.stderr.write(f"bread export: {summary['late']:,} event(s) that the column-type "
                         "pass did not see (written while exporting) are not in the typed "
                         "tables\n")
    sys.stderr.write(f"bread export: {summary['events']:,} events, {summary['sources']} call "
                     f"site table(s) in {escape_controls(args.parquet)}\n")
    return 3 if summary["damage"] else 0


def _rows(args: argparse.Namespace, output: str, out: str) -> int:
    """``--jsonl OUT`` or ``--csv OUT``: ``bread -s -o OUTPUT FILE...`` written to a new
    file beside OUT (``O_EXCL | O_NOFOLLOW``, a name of its own: ``create_temp``), renamed
    to OUT when complete, removed if the export failed (exit 2 or a usage error); a link at
    OUT is replaced, never written through. The exit status is bread's (3: damaged input,
    all else written)."""
    argv = ["-s", "-o", output, "--csv-formulas", args.csv_formulas, "--", *args.inputs]
    options = read.parser().parse_args(argv)
    if out == STDIN:
        return read.write(options, sys.stdout.buffer)
    try:
        fd, temp = create_temp(out)     # OUT.<random>.tmp: a stale one is passed over
    except OSError as exc:
        sys.stderr.write(f"bread export: cannot write {escape_controls(out)}: {exc.strerror}\n")
        return EXIT_OPEN
    try:
        with os.fdopen(fd, "wb") as f:
            status = read.write(options, f)
        if status in (EXIT_OPEN, EXIT_USAGE):
            return status
        os.rename(temp, out)
        temp = ""
    except OSError as exc:
        sys.stderr.write(f"bread export: cannot write {escape_controls(out)}: {exc.strerror}\n")
        return EXIT_OPEN
    finally:
        if temp:
            os.unlink(temp)
    return status


main = subcommand(parser, run)
