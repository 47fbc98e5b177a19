"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers, as the next ``basic_config(FILE, crash_buffer=True)`` would
(``bread.recover``). The one command of bread that writes to a log.

Exit status: 0 done, 2 nothing could be done (a live writer, a buffer directory that is
not this user's own), 3 a buffer was damaged (its readable events recovered, its files
kept as ``*.damaged``) or left alone: see standard error."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from blogformat.errors import UnsafeBufferDirectory
from blogstore.crashlayout import buffer_directory, check_directory

from ..inputs import name_text
from ..recover import Log, recover_into
from ..render import escape_controls
from .options import subcommand


def _say(out: Any, text: str) -> None:
    """A line for a person: names as bread shows them, control characters escaped."""
    out.write(escape_controls(name_text(text)) + "\n")


def parser() -> argparse.ArgumentParser:
    """The options of ``bread --recover`` (argparse's parser: a usage error is exit 2)."""
    p = argparse.ArgumentParser(prog="bread --recover",
                                description="Append the events that killed writers of FILE "
                                            "left in their crash buffers to FILE.")
    p.add_argument("file", metavar="FILE", help="the log file the dead writers wrote (a "
                   "regular file, or a rotated set's base name)")
    p.add_argument("--crash-dir", metavar="DIR",
                   help="where the writers kept their buffers (their basic_config crash_dir)")
    return p


def run(args: argparse.Namespace) -> int:
    """``bread --recover FILE [--crash-dir DIR]``; the exit status (module docstring)."""
    if os.path.exists(args.file) and not os.path.isfile(args.file):
        # a FIFO would hang the opening, a device swallow what is recovered
        _say(sys.stderr, f"bread: {args.file} is not a regular file; nothing recovered")
        return 2
    directory = buffer_directory(args.file, args.crash_dir)
    try:
        check_directory(directory)
    except UnsafeBufferDirectory as exc:
        _say(sys.stderr, f"bread: {exc}; nothing recovered (recover it as the user who owns "
                         "it)")
        return 2
    try:
        log = Log(args.file, directory)
    except BlockingIOError:
        _say(sys.stderr, f"bread: {args.file} is being written by a live process; it "
                         "recovers what dead writers left when it starts with "
                         "crash_buffer=True")
        return 2
    except OSError as exc:
        _say(sys.stderr, f"bread: cannot open {args.file}: {exc}")
        return 2
    except ValueError:       # ".blog": no log's name, nor a set's
        _say(sys.stderr, f"bread: {args.file} names no log file; nothing recovered")
        return 2
    said: list[str] = []

    def warn(text: str) -> None:
        said.append(text)
        _say(sys.stderr, text)
    try:
        done = recover_into(log, directory, warn)
    except OSError as exc:   # the disk, say: the buffer stays for the next try
        _say(sys.stderr, f"bread: recovering into {args.file} failed: {exc}; the crash "
                         "buffer is kept")
        return 2
    finally:
        log.close()
    for r in done:
        _say(sys.stdout, f"bread: recovered {r.events} event(s) of process {r.pid} into "
                         f"{r.path}")
    if not done:
        _say(sys.stdout, f"bread: no abandoned crash buffer of {args.file}")
    return 3 if said else 0      # 3: a buffer was damaged or left alone (said above)


main = subcommand(parser, run)
