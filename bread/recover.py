"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers (``blog.crashbuf``), as the next ``basic_config(FILE,
crash_buffer=True)`` would. The one command of bread that writes: it uses the writer's own
recovery (``blog.recovery``), imported only here."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


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
    from blog.crashbuf import buffer_directory   # the writer's side: only this command
    from blog.recovery import recover
    from blog.streams import FileOutputStream
    try:
        stream = FileOutputStream(args.file, fallback=False)
    except BlockingIOError:
        sys.stderr.write(f"bread: {args.file} is being written by a live process; it recovers "
                         "what dead writers left when it starts with crash_buffer=True\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"bread: cannot open {args.file}: {exc}\n")
        return 2
    try:
        done = recover(buffer_directory(args.file, args.crash_dir), stream)
    finally:
        stream.close()
    for r in done:
        print(f"bread: recovered {r.events} event(s) of process {r.pid} into {args.file}")
    if not done:
        print(f"bread: no abandoned crash buffer of {args.file}")
    return 0
