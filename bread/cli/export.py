"""``bread export --parquet OUT_DIR FILE...``: the Parquet tables of ``bread.columnar.parquet``."""

from __future__ import annotations

import argparse
import sys

from ..columnar import parquet
from ..errors import NotABlogFile
from ..inputs import STDIN
from ..render import escape_controls
from .options import Parser, subcommand


def parser() -> argparse.ArgumentParser:
    """The options of ``bread export``."""
    p = Parser(prog="bread export", description=(parquet.__doc__ or "").split("\n")[0])
    p.add_argument("--parquet", metavar="OUT_DIR", required=True,
                   help="write events.parquet, sources/*.parquet and sources.json here")
    p.add_argument("inputs", nargs="+", metavar="FILE")
    return p


def run(args: argparse.Namespace) -> int:
    """``bread export --parquet OUT_DIR FILE...``; the exit codes of bread."""
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


main = subcommand(parser, run)
