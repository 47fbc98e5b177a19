"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers, as the next ``basic_config(FILE, crash_buffer=True)`` would
(``blogformat.crashfiles``). The one command of bread that writes to a log."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

from blogformat.crashfiles import (LockedFile, UnsafeBufferDirectory, buffer_directory,
                                   check_directory, recover)
from blogformat.fileset import file_name, members, split_base


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
        sys.stderr.write(f"bread: {exc}; nothing recovered (recover it as the user who owns "
                         "it)\n")
        return 2
    opened: list[Any] = []
    where, stem = split_base(args.file)
    if os.path.exists(args.file) or not os.path.isdir(directory) \
            or not members(where or ".", stem):
        try:
            log: Any = LockedFile(args.file)
        except BlockingIOError:
            sys.stderr.write(f"bread: {args.file} is being written by a live process; it "
                             "recovers what dead writers left when it starts with "
                             "crash_buffer=True\n")
            return 2
        except OSError as exc:
            sys.stderr.write(f"bread: cannot open {args.file}: {exc}\n")
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
    try:
        done = recover(directory, log, args.file)
    except OSError as exc:   # the disk, say: the buffer stays for the next try
        sys.stderr.write(f"bread: recovering into {args.file} failed: {exc}; the crash "
                         "buffer is kept\n")
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
        print(f"bread: recovered {r.events} event(s) of process {r.pid} into {r.path}")
    if not done:
        print(f"bread: no abandoned crash buffer of {args.file}")
    return 0
