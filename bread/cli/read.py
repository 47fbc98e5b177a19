"""``bread FILE...``, the default command: blog files rendered as text, JSON lines or CSV."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys

from blogformat.typinglite import TYPE_CHECKING
from blogformat import __version__
from blogformat.severity import to_severity

from ..entries import Dropped, Lost, Recovered
from ..errors import NotABlogFile, OptionError
from ..decode.filters import Filter, parse_time
from ..inputs import STDIN, Inputs, is_url, name_text, object_store
from ..reader import Reader
from ..render import (DEFAULT_DATE_FORMAT, DEFAULT_FORMAT, DateFormat, PrettyPrinter,
                      escape_controls)
from .options import EXIT_DAMAGED, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Parser, subcommand

if TYPE_CHECKING:
    from typing import BinaryIO, Callable, Iterator, Sequence, TypeVar

    from ..inputs.objectstore import Store

    T = TypeVar("T")

EPILOG = """\
event format placeholders (-f):
  %I source id     %S severity      %C category      %M function
  %F file path     %G file name     %L line          %P format string
  %T argument tags %n writer name   %t writer id     %d time (writer's zone)
  %u time (UTC)    %r raw clock     %m message       %% a percent sign
  %k keyword fields, context fields too, as name=value pairs
  %K the same after a space, if the event has any and its file's header asks for
     them (blog's files since 2026-11-27; the default format shows them so)
  %h host          %p process id    %a program       (of the file header)
date format placeholders (-d):
  %Y year  %y 2-digit year  %m month  %d day  %H hour  %M minute  %S second
  %N nanoseconds  %z UTC offset (+hhmm)  %Z zone name
exit status: 0 ok, 1 bad option, 2 cannot open an input or it is not a blog
file, 3 damaged input or events whose call site is unknown (everything readable
is printed first).
bread export --parquet OUT_DIR FILE...: the events table and a typed table per
call site, as Parquet files (docs/spark.md); --jsonl OUT or --csv OUT: the events
time-sorted, as -s -o jsonl / -o csv print them, in a file.
bread stats [-o json] FILE...: counts by severity, category, call site and
writer, time range and rate, drops, losses, damage, events over time.
bread compact DIR --older-than AGE [--period 1d] [--dry-run]: closed files
merged into one time-sorted compressed file per set and period (docs/compaction.md).
bread --recover FILE [--crash-dir DIR]: append to FILE the events its killed writers
left in their crash buffers (basic_config(crash_buffer=True)).
C++ binlog files (Morgan Stanley's binlog) are read too, told by their first bytes: with
only -f, -d, -s (and --escape), printed byte for byte as the C++ bread prints them
(%X, an unknown placeholder, printed as is; exit status 3 after damage)."""


def parser() -> argparse.ArgumentParser:
    """The options of ``bread FILE...``."""
    p = Parser(prog="bread", description="Print blog binary log files as text.",
               epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="*", metavar="FILE",
                   help="blog files to read in order: paths, directories (their *.blog and "
                        "*.blog.gz regular files: no link, FIFO or device found there is "
                        "read), a rotated set's base name (logs/app.blog: its files), glob "
                        "patterns (the same); gzip is read as is; "
                        "'-' (or none) reads standard input; URLs of object storage "
                        "(s3://bucket/prefix/, gs://, hdfs://host:port/, file://: a file, a "
                        "prefix, a pattern) through pyarrow.fs, with the store's usual "
                        "credentials (AWS_* variables, ~/.aws, GOOGLE_APPLICATION_CREDENTIALS)")
    def pct(text: str) -> str:  # argparse %-formats help strings
        return text.replace("%", "%%")

    p.add_argument("--version", action="version", version=f"bread {__version__}",
                   help="print bread's version (blog's, pyproject's) and exit")
    p.add_argument("-f", "--format", default=DEFAULT_FORMAT,
                   help=pct(f"event format (default {DEFAULT_FORMAT!r})"))
    p.add_argument("-d", "--date-format", default=DEFAULT_DATE_FORMAT,
                   help=pct(f"date format for %d and %u (default {DEFAULT_DATE_FORMAT!r})"))
    p.add_argument("-F", "--follow", action="store_true",
                   help="follow one path as it grows, until Ctrl-C: a regular file (across "
                        "rotation and truncation, as tail -F), or a directory or a rotated "
                        "set's base name (logs/app.blog): its files and those that appear later "
                        "(rotations, new processes), each file's events in order, files "
                        "written at once interleaved (docs/reading.md, Following)")
    p.add_argument("-s", "--sort", action="store_true",
                   help="events in time order across writers and inputs (bounded memory)")
    p.add_argument("-l", "--min-severity", "--level", dest="level", metavar="SEVERITY",
                   help="only events of this severity or above (trace, debug, info, warning, "
                        "error, critical; or logging's names: warn, fatal); --level is its "
                        "old name")
    p.add_argument("-c", "--category", metavar="NAMES",
                   help="only these categories and those below them on the dots (db takes "
                        "db.pool); =db takes db alone (comma-separated)")
    p.add_argument("--since", metavar="TIME",
                   help="only events at or after TIME: ISO 8601 (local time unless it has an "
                        "offset) or a duration ago (30s, 15m, 2h, 1d)")
    p.add_argument("--until", metavar="TIME", help="only events before TIME (as --since)")
    p.add_argument("-w", "--writer", metavar="NAMES", help="only these writers (comma-separated)")
    p.add_argument("--site", metavar="SITES",
                   help="only these call sites: function, file name or file:line (comma-separated)")
    p.add_argument("-g", "--grep", metavar="REGEX",
                   help="only events whose message matches REGEX (Python syntax)")
    p.add_argument("--verified-only", action="store_true",
                   help="leave out the events of a frame cut short by the end of a file "
                        "(complete, but their checksum cannot be checked)")
    p.add_argument("-o", "--output", choices=("text", "jsonl", "csv"), default="text",
                   help="text (-f, -d), jsonl (one JSON object per event, exact: never "
                        "escaped), csv (RFC 4180, with a header row; escaped as text is, "
                        "formulas quoted: --csv-formulas)")
    p.add_argument("--tz", metavar="ZONE",
                   help="show times in this IANA zone (Europe/London...) instead of the "
                        "writer's; %%u stays UTC")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour lines by severity: auto (when writing to a terminal), always, "
                        "never")
    p.add_argument("--escape", choices=("always", "auto", "never"),
                   help="show control characters (C0 but tab, DEL, C1) as \\xNN, \\n, \\r and "
                        "bidirectional format characters (U+202E...) as \\uNNNN, in text and "
                        "csv (in its JSON cells as JSON's \\uNNNN), so that a logged string "
                        "cannot drive a terminal or reorder a line, wherever the output goes "
                        "(a pipe to grep ends on a terminal too): always (the default; auto is "
                        "the same, its old name), never (as logged, for programs). -o jsonl "
                        "is always exact. C++ binlog files are escaped the same; --escape never "
                        "prints them byte for byte as the C++ bread does")
    p.add_argument("--traceback", action=argparse.BooleanOptionalAction, default=None,
                   help="text: under an event, the traceback of each exception among its "
                        "fields (log.exception) as Python prints it, each line indented and "
                        "escaped: shown by default where the file's header asks for it (blog's "
                        "files since 2026-11-27; older files and other producers' keep the "
                        "text they had); --traceback shows them in any file, --no-traceback "
                        "in none")
    p.add_argument("--endpoint", metavar="URL",
                   help="the object store's endpoint for URLs (an S3-compatible server: "
                        "http://127.0.0.1:9000); else AWS_ENDPOINT_URL, else the store's own")
    p.add_argument("--region", metavar="NAME",
                   help="the S3 region for s3:// URLs; else AWS_DEFAULT_REGION or ~/.aws")
    p.add_argument("--csv-formulas", choices=("quote", "raw"), default="quote",
                   help="-o csv: a cell of logged text (category, writer, function, file, "
                        "message, host, program) that begins with = + - @ tab or CR, which a "
                        "spreadsheet would run as a formula: quote (the default) puts a ' "
                        "before it (OWASP), so that it is shown, not run; raw leaves it as logged")
    return p


def open_inputs(names: Sequence[str], store: Store | None = None) -> Inputs:
    """The inputs to read, found once (patterns, directories and prefixes expanded,
    standard input if none: ``bread.inputs``), each checked to open (a URL's listed by
    ``store``, which the reader then reads through); OSError (``cannot_open`` says it);
    ImportError for a URL without pyarrow. A URL whose listing is cut at its bounds is
    left to the reader (its damage)."""
    return Inputs(list(names) or [STDIN], store).found().check()


def storage_options(args: argparse.Namespace) -> dict:
    """``--endpoint`` and ``--region`` as ``bread.read``'s ``storage_options``."""
    opts = {"endpoint_override": args.endpoint, "region": args.region}
    return {k: v for k, v in opts.items() if v is not None}


def cannot_read_urls(exc: ImportError) -> int:
    """Say on standard error that URLs need pyarrow (which extra); the exit status."""
    sys.stderr.write(f"bread: {exc}\n")
    return EXIT_OPEN


def cannot_open(exc: OSError) -> int:
    """Say on standard error that an input does not open; the exit status."""
    sys.stderr.write(f"bread: cannot open {escape_controls(name_text(exc.filename))}: "
                     f"{exc.strerror}\n")
    return EXIT_OPEN


def not_blog(exc: NotABlogFile) -> int:
    """Say on standard error that an input is not a blog file; the exit status."""
    sys.stderr.write(f"bread: {escape_controls(str(exc))}\n")
    return EXIT_OPEN


def _filter(args: argparse.Namespace) -> Filter:
    """The filter of the options, each checked: a bad value names its option."""
    def check(option: str, value: str | None, parse: Callable[[str], T]) -> T | None:
        if value is None:
            return None
        try:
            return parse(value)
        except (ValueError, re.error) as exc:
            raise OptionError(f"{option}: {exc}") from None

    return Filter(
        min_severity=check("-l/--level", args.level, to_severity),
        categories=check("-c/--category", args.category, _names),
        since=check("--since", args.since, parse_time),
        until=check("--until", args.until, parse_time),
        writers=check("-w/--writer", args.writer, _names),
        sites=tuple(sorted(check("--site", args.site, _names) or ())),
        grep=check("-g/--grep", args.grep, re.compile))


def _zone(name: str | None) -> dt.tzinfo | None:
    if name is None:
        return None
    import pytz
    try:
        return pytz.timezone(name)
    except pytz.UnknownTimeZoneError:
        raise OptionError(f"--tz: unknown time zone {name!r} (an IANA name: Europe/London, "
                          "America/New_York, UTC...)") from None


def _printer(args: argparse.Namespace, zone: dt.tzinfo | None, color: bool) -> PrettyPrinter:
    """The printer of -f and -d: an unknown placeholder names its option."""
    try:
        DateFormat(args.date_format)
    except ValueError as exc:
        raise OptionError(f"-d/--date-format: {exc}") from None
    try:
        return PrettyPrinter(args.format, args.date_format, zone, color, args.traceback)
    except ValueError as exc:
        raise OptionError(f"-f/--format: {exc}") from None


def _names(text: str) -> frozenset[str]:
    return frozenset(x.strip() for x in text.split(",") if x.strip())


def _as_cxx_bread(args: argparse.Namespace) -> bool:
    """True for the options the C++ bread has (-f, -d, -s, --escape): C++ binlog files are
    then printed as it prints them; other options read them as events (``bread.read``)."""
    return (args.output == "text" and not args.follow and args.tz is None
            and args.color != "always" and not any(
                (args.level, args.category, args.since, args.until, args.writer, args.site,
                 args.grep)))


def cxx_bread(inputs: Inputs, args: argparse.Namespace) -> int:
    """Print C++ binlog files as the C++ bread does (without -f or -d, in its default
    formats, whatever blog's are); the exit status."""
    from ..cxx import text as cxx_text
    fmt = cxx_text.DEFAULT_FORMAT if args.format == DEFAULT_FORMAT else args.format
    date = (cxx_text.DEFAULT_DATE_FORMAT if args.date_format == DEFAULT_DATE_FORMAT
            else args.date_format)
    try:
        ok = cxx_text.print_inputs(inputs, fmt, date, args.sort, args.escape != "never")
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return EXIT_OK if ok else EXIT_DAMAGED


def run(args: argparse.Namespace) -> int:
    """``bread [OPTION...] [FILE...]``; the exit status."""
    return write(args, sys.stdout.buffer, sys.stdout.isatty())


def write(args: argparse.Namespace, stdout: BinaryIO, terminal: bool = False) -> int:
    """What ``bread [OPTION...] [FILE...]`` prints, written to ``stdout`` (``terminal``:
    it is one, for ``--color auto``); the exit status. ``bread export --jsonl`` and
    ``--csv`` write a file with it. In order: the inputs found once (printed as the C++
    bread prints them if they are all C++ files), the options checked, the reader made,
    its output copied, then what it met said on standard error."""
    if not args.inputs and sys.stdin.isatty():
        return _usage("no input: name a file, or pipe one into standard input")
    try:
        store = object_store(args.inputs, storage_options(args))
    except ImportError as exc:
        return cannot_read_urls(exc)
    found: Inputs | None = None    # (found once: checked, judged, then read)
    if _as_cxx_bread(args):
        opened = _opening(lambda: open_inputs(args.inputs, store))
        if isinstance(opened, int):
            return opened
        if opened.all_cxx():
            return _opening(lambda: cxx_bread(opened, args))
        found = opened
    color = args.color == "always" or (args.color == "auto" and terminal)
    try:
        flt = _filter(args)
        zone = _zone(args.tz)
        printer = _printer(args, zone, color)
    except ValueError as exc:
        return _usage(str(exc))
    if args.follow and (len(args.inputs) != 1 or args.inputs[0] == STDIN or args.sort
                        or is_url(args.inputs[0])):
        return _usage("-F/--follow takes one file, directory or set's base name (local: "
                      "not '-', not a URL), and no -s")
    reader = _opening(lambda: _reader(args, found, store, flt))
    if isinstance(reader, int):
        return reader
    escape = args.escape != "never"   # not only on a terminal: bread x | grep y ends on one

    def blocks() -> Iterator[bytes]:
        if args.output == "text":
            return reader.text(printer, escape=escape)
        return reader.rows(args.output, zone, escape=escape,
                           quote_formulas=args.csv_formulas == "quote")
    status = _copy(blocks, stdout, args.follow)
    return status if status is not None else _report(reader)


def _usage(message: str) -> int:
    """The usage and ``message`` on standard error: a bad option or input."""
    parser().print_usage(sys.stderr)
    sys.stderr.write(f"bread: error: {message}\n")
    return EXIT_USAGE


def _opening(make: Callable[[], T]) -> T | int:
    """What ``make`` returns, or the exit status of an input that cannot be opened or
    read (said on standard error)."""
    try:
        return make()
    except OSError as exc:
        return cannot_open(exc)
    except ImportError as exc:
        return cannot_read_urls(exc)
    except OptionError as exc:   # storage options a URL's file system does not take
        sys.stderr.write(f"bread: error: {escape_controls(str(exc))}\n")
        return EXIT_USAGE
    except NotABlogFile as exc:
        return not_blog(exc)


def _reader(args: argparse.Namespace, found: Inputs | None, store: Store | None,
            flt: Filter) -> Reader:
    """The Reader of the inputs: following one path, or those ``found`` (found now if
    they were not), as named: a file found in a directory that is not a blog file is
    damage."""
    if args.follow:
        return Reader(args.inputs[0], filter=flt, verified_only=args.verified_only,
                      follow=True)
    if found is None:
        found = open_inputs(args.inputs, store)
    return Reader(found, sort=args.sort, filter=flt, verified_only=args.verified_only)


def _copy(blocks: Callable[[], Iterator[bytes]], stdout: BinaryIO, follow: bool) -> int | None:
    """Write what ``blocks()`` gives to ``stdout`` (flushed after each block when
    following); an exit status if the output ended early (a reader of it gone, an input
    that is not a blog file)."""
    try:
        for block in blocks():
            stdout.write(block)
            if follow:
                stdout.flush()    # as the writer writes
        stdout.flush()
    except KeyboardInterrupt:     # Ctrl-C: the way a follow ends
        stdout.flush()
    except NotABlogFile as exc:
        stdout.flush()
        return not_blog(exc)
    except BrokenPipeError:
        # The reader of our output went away (``bread x | head``): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    return None


def _report(reader: Reader) -> int:
    """What the reader met, said on standard error (drops, recoveries, losses, events
    without their metadata, damage, unverified events); the exit status."""
    for n in reader.notices:
        if isinstance(n, Dropped):
            sys.stderr.write(f"bread: writer {n.writer_id} dropped {n.count} event(s) "
                             f"(channel full) before clock {n.clock}\n")
        elif isinstance(n, Recovered):
            sys.stderr.write(f"bread: {n.events} event(s) recovered from the crash buffer of "
                             f"process {n.pid}, which died before writing them\n")
        elif isinstance(n, Lost):
            from ..stats import iso_time
            when = (f" from {iso_time(n.since)} to {iso_time(n.clock)}" if n.since is not None
                    else f" before {iso_time(n.clock)}")
            sys.stderr.write(f"bread: {n.events} event(s) ({n.bytes} bytes) never reached "
                             f"this file: the writer's output failed{when}\n")
    if reader.unknown_sources:
        sys.stderr.write(f"bread: {reader.unknown_sources} event(s) refer to sources whose "
                         "metadata is missing\n")
    for d in reader.damage:
        sys.stderr.write(f"bread: {escape_controls(str(d))}\n")
    if reader.unverified:
        sys.stderr.write(f"bread: {reader.unverified} complete event(s) of frames cut short "
                         "by the end of a file read unverified (before any filter; "
                         "--verified-only leaves them out)\n")
    if reader.damage or reader.unknown_sources:   # events without their metadata: damage
        return EXIT_DAMAGED
    return EXIT_OK


main = subcommand(parser, run)
