"""The ``bread`` command: render blog files as text."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, Sequence

from .entries import Dropped, Lost
from .inputs import STDIN, expand
from .reader import Reader
from .render import DEFAULT_DATE_FORMAT, DEFAULT_FORMAT, PrettyPrinter, escape_controls

EXIT_OK, EXIT_USAGE, EXIT_OPEN, EXIT_DAMAGED = 0, 1, 2, 3

EPILOG = """\
event format placeholders (-f):
  %I source id     %S severity      %C category      %M function
  %F file path     %G file name     %L line          %P format string
  %T argument tags %n writer name   %t writer id     %d time (writer's zone)
  %u time (UTC)    %r raw clock     %m message       %% a percent sign
date format placeholders (-d):
  %Y year  %y 2-digit year  %m month  %d day  %H hour  %M minute  %S second
  %N nanoseconds  %z UTC offset (+hhmm)  %Z zone name
exit status: 0 ok, 1 bad option, 2 cannot open an input, 3 damaged input
(everything readable is printed first)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"bread: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bread", description="Print blog binary log files as text.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="*", metavar="FILE",
                   help="blog files to read in order: paths, directories (their *.blog and "
                        "*.blog.gz files), glob patterns; gzip is read as is; "
                        "'-' (or none) reads standard input")
    def pct(text: str) -> str:  # argparse %-formats help strings
        return text.replace("%", "%%")

    p.add_argument("-f", "--format", default=DEFAULT_FORMAT,
                   help=pct(f"event format (default {DEFAULT_FORMAT!r})"))
    p.add_argument("-d", "--date-format", default=DEFAULT_DATE_FORMAT,
                   help=pct(f"date format for %d and %u (default {DEFAULT_DATE_FORMAT!r})"))
    p.add_argument("-s", "--sort", action="store_true",
                   help="events in time order across writers and inputs (bounded memory)")
    p.add_argument("--escape", choices=("auto", "always", "never"), default="auto",
                   help="escape control characters: auto (when writing to a terminal), always, never")
    return p


def _inputs(names: Sequence[str]) -> list[str]:
    """The files to read (patterns and directories expanded), each checked to open."""
    paths = expand(names or [STDIN])
    for path in paths:
        if path != STDIN:
            open(path, "rb").close()
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Run bread; return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # -h, or a bad option (already explained on stderr)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not args.inputs and sys.stdin.isatty():
        _parser().print_usage(sys.stderr)
        sys.stderr.write("bread: error: no input: name a file, or pipe one into standard input\n")
        return EXIT_USAGE
    try:
        inputs = _inputs(args.inputs)
    except OSError as exc:
        sys.stderr.write(f"bread: cannot open {escape_controls(str(exc.filename))}: "
                         f"{exc.strerror}\n")
        return EXIT_OPEN
    out = sys.stdout
    escape = args.escape == "always" or (args.escape == "auto" and out.isatty())
    printer = PrettyPrinter(args.format, args.date_format)
    reader = Reader(inputs, sort=args.sort)
    write = sys.stdout.buffer.write
    try:
        for block in reader.text(printer, escape=escape):
            write(block)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # The reader of our output went away (``bread x | head``): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    for n in reader.notices:
        if isinstance(n, Dropped):
            sys.stderr.write(f"bread: writer {n.writer_id} dropped {n.count} event(s) "
                             f"(channel full) before clock {n.clock}\n")
        elif isinstance(n, Lost):
            sys.stderr.write(f"bread: {n.events} event(s) ({n.bytes} bytes) never reached "
                             f"this file: the writer's output failed\n")
    if reader.unknown_sources:
        sys.stderr.write(f"bread: {reader.unknown_sources} event(s) refer to sources whose "
                         "metadata is missing\n")
    for d in reader.damage:
        sys.stderr.write(f"bread: {escape_controls(str(d))}\n")
    if reader.damage:
        return EXIT_DAMAGED
    return EXIT_OK


def run() -> NoReturn:
    """Console-script entry point."""
    sys.exit(main())
