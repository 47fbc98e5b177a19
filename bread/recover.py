"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers, as the next ``basic_config(FILE, crash_buffer=True)`` would
(``blogstore.recovery``). The one command of bread that writes to a log.

Exit status: 0 done, 2 nothing could be done (a live writer, a buffer directory that is
not this user's own), 3 a buffer was damaged (its readable events recovered, its files
kept as ``*.damaged``) or left alone: see standard error."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

from blogformat.errors import UnsafeBufferDirectory
from blogstore.crashlayout import buffer_directory, check_directory
from blogstore.fileset import file_name, members, split_base
from blogstore.recovery import recover
from blogstore.recoverytarget import LockedFile

from .inputs import name_text
from .render import escape_controls


def _say(out: Any, text: str) -> None:
    """A line for a person: names as bread shows them, control characters escaped."""
    out.write(escape_controls(name_text(text)) + "\n")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bread --recover",
                                description="Append the events that killed writers of FILE "
                                            "left in their crash buffers to FILE.")
    p.add_argument("file", metavar="FILE", help="the log file the dead writers wrote")
    p.add_argument("--crash-dir", metavar="DIR",
                   help="where the writers kept their buffers (their basic_config crash_dir)")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    directory = buffer_directory(args.file, args.crash_dir)
    try:
        check_directory(directory)
    except UnsafeBufferDirectory as exc:
        _say(sys.stderr, f"bread: {exc}; nothing recovered (recover it as the user who owns "
                         "it)")
        return 2
    opened: list[Any] = []
    where, stem = split_base(args.file)
    if os.path.exists(args.file) or not os.path.isdir(directory) \
            or not members(where or ".", stem):
        try:
            log: Any = LockedFile(args.file)
        except BlockingIOError:
            _say(sys.stderr, f"bread: {args.file} is being written by a live process; it "
                             "recovers what dead writers left when it starts with "
                             "crash_buffer=True")
            return 2
        except OSError as exc:
            _say(sys.stderr, f"bread: cannot open {args.file}: {exc}")
            return 2
        opened.append(log)
    else:
        # The base name of a rotated set: each dead writer's events go to the file it was
        # writing; one whose file is gone gets a new file of the set, made when needed.
        def log() -> LockedFile:
            f = LockedFile(os.path.join(where, file_name(stem, time.time_ns(), os.getpid())),
                           create=True)
            opened.append(f)
            return f
    said: list[str] = []

    def warn(text: str) -> None:
        said.append(text)
        _say(sys.stderr, text)
    try:
        done = recover(directory, log, args.file, warn=warn)
    except OSError as exc:   # the disk, say: the buffer stays for the next try
        _say(sys.stderr, f"bread: recovering into {args.file} failed: {exc}; the crash "
                         "buffer is kept")
        return 2
    finally:
        for f in opened:
            if f.path != args.file and f.position()[2] == 0:
                os.unlink(f.path)      # made for a recovery that appended nothing
            f.close()
    try:
        os.rmdir(directory)      # emptied (a writer's next start makes it again)
    except OSError:
        pass
    for r in done:
        _say(sys.stdout, f"bread: recovered {r.events} event(s) of process {r.pid} into "
                         f"{r.path}")
    if not done:
        _say(sys.stdout, f"bread: no abandoned crash buffer of {args.file}")
    return 3 if said else 0      # 3: a buffer was damaged or left alone (said above)
