"""``bread compact DIR --older-than AGE [--period LENGTH] [--set STEM] [--columnar]
[--shipped] [--dry-run]``: the compaction of ``bread.compact``, saying on standard output what it
compacted."""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

from .. import compact
from ..compact.files import to_stderr
from ..errors import OptionError
from ..inputs import is_url, name_text
from ..render import escape_controls
from .options import Parser, subcommand

_SEC = 1_000_000_000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

EPILOG = """\
Only what was copied is deleted. An original in which reading met damage (an
event time beyond 64 bits of nanoseconds, before 1677 or after 2262, among it) is
never deleted: its readable events go into the compacted file and the original
is moved to DIR/damaged/ (no reader of DIR nor compaction takes it again; read
it with `bread DIR/damaged/NAME`). Names in the compaction catalog that are not
the directory's own files, and files that are not regular files (links), are
left alone. Each such case is said on standard error.

Each original is locked (as its writer locks it) from before it is read until it
is gone: one another process holds then (a writer, a compression, a recovery) is
said and left for the next compaction.

DIR is a local directory: a URL of object storage (s3://...) is refused; compact
where the logs are written, before they are shipped. A file set can run this
itself: blog.basic_config(..., compact="1d") (docs/compaction.md, "Compaction in the
set's housekeeping").

exit status: 0 done, 1 bad option, 2 not a directory (or a URL), another compaction
running, 3 something was left as it is (an original kept for its damage, a set
that cannot be copied whole, a name left alone), 4 failed (an unexpected error,
said on one line with where it was raised; the next compaction finishes or undoes
what it did): see standard error."""


def parse_duration(text: str, option: str) -> int:
    """``30s``, ``15m``, ``12h``, ``1d``, ``2w`` in ns; ValueError naming ``option``."""
    t = text.strip()
    if len(t) >= 2 and t[-1] in _UNITS and t[:-1].isdigit() and int(t[:-1]) > 0:
        return int(t[:-1]) * _UNITS[t[-1]] * _SEC
    raise OptionError(f"{option} must be a duration like 30m, 12h, 1d or 1w, not {text!r}")


def parser() -> argparse.ArgumentParser:
    """The options of ``bread compact``."""
    p = Parser(
        prog="bread compact", description=(compact.__doc__ or "").split("\n")[0],
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--older-than", required=True, metavar="AGE",
                   help="compact closed files last written longer ago than AGE (30m, 12h, 1d)")
    p.add_argument("--period", default="1d", metavar="LENGTH",
                   help="one compacted file per set and period of this length (UTC; default 1d)")
    p.add_argument("--set", metavar="STEM", dest="set_stem",
                   help="compact only the set STEM (the files STEM.*.blog[.gz]), no other set "
                        "of DIR: what blog's compact= option runs for its set")
    p.add_argument("--columnar", action="store_true",
                   help="write the events as columns (each field of each call site coded for "
                        "its type): about 0.4x the bytes of compressed text; every reader "
                        "reads them")
    p.add_argument("--shipped", action="store_true",
                   help="take only files the directory's manifest records as shipped (a set's "
                        "on_close hook returned for them): what blog's compact= option runs "
                        "for a set that ships its files")
    p.add_argument("--dry-run", action="store_true",
                   help="list what would be done (each set and period, the files it would "
                        "compact); do nothing")
    return p


def run(args: argparse.Namespace) -> int:
    """``bread compact DIR --older-than 1d [--period 1d] [--dry-run]``; the exit status
    (``EPILOG``)."""
    try:
        older = parse_duration(args.older_than, "--older-than")
        period = parse_duration(args.period, "--period")
    except ValueError as exc:
        sys.stderr.write(f"bread compact: error: {exc}\n")
        return 1
    if is_url(args.directory):
        sys.stderr.write("bread compact: compacts a local directory, not a URL: compact on "
                         "the machine that writes the logs, before shipping them "
                         "(docs/compaction.md)\n")
        return 2
    if not os.path.isdir(args.directory):
        sys.stderr.write(f"bread compact: not a directory: {args.directory}\n")
        return 2

    notes: list[str] = []

    def warn(message: str) -> None:
        notes.append(message)
        to_stderr(message)

    def say(plan: dict) -> None:
        if "compacted" not in plan:   # a dry run: which files would go into which file
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(plan["period_start_ns"]
                                                                    // _SEC))
            sys.stdout.write(f"would compact {len(plan['replaces'])} file(s) of set "
                             f"{escape_controls(name_text(plan['stem']))}, period from "
                             f"{start}, into one:\n")
            sys.stdout.write("".join(f"  {escape_controls(name_text(n))}\n"
                                     for n in plan["replaces"]))
            return
        sys.stdout.write(escape_controls(name_text(plan["compacted"]))
                         + f": {len(plan['replaces'])} file(s)"
                         + (f", {plan['events']:,} events" if "events" in plan else "") + "\n")

    try:
        compact.compact(args.directory, older, period_ns=period, dry_run=args.dry_run,
                        log=say, warn=warn, columnar=args.columnar,
                        shipped_only=args.shipped, set_stem=args.set_stem)
    except BlockingIOError:
        sys.stderr.write("bread compact: another compaction of this directory is running\n")
        return 2
    except IsADirectoryError as exc:   # something else at a lock's name: nothing was done
        to_stderr(f"{exc.filename}: not a lock file: nothing compacted")
        return 2
    except RuntimeError as exc:    # a set that cannot be copied whole: left as it is
        sys.stderr.write(f"bread compact: {exc}\n")
        return 3
    except Exception as exc:   # a crash: one line (a traceback would read as a bad option's 1)
        at = traceback.extract_tb(exc.__traceback__)[-1]
        sys.stderr.write(escape_controls(f"bread compact: failed: {type(exc).__name__}: {exc} "
                                         f"(at {at.filename}:{at.lineno} in {at.name})") + "\n")
        return 4
    return 3 if notes else 0


main = subcommand(parser, run)
