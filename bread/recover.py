"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers, as the next ``basic_config(FILE, crash_buffer=True)`` would
(``blogformat.crashfiles``). The one command of bread that writes to a log."""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from typing import Sequence

from blogformat.crashfiles import buffer_directory, recover


class LockedLog:
    """FILE opened for appending under its writer's lock (``flock``, as blog's writers
    take it): what recovery writes through. BlockingIOError if a live writer holds it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)   # a log: never made here
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(self.fd)
            raise

    def write(self, data: bytes) -> int:
        return os.write(self.fd, data)

    def position(self) -> tuple[int, int, int]:
        st = os.fstat(self.fd)
        return st.st_dev, st.st_ino, st.st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


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
    try:
        log = LockedLog(args.file)
    except BlockingIOError:
        sys.stderr.write(f"bread: {args.file} is being written by a live process; it recovers "
                         "what dead writers left when it starts with crash_buffer=True\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"bread: cannot open {args.file}: {exc}\n")
        return 2
    try:
        done = recover(buffer_directory(args.file, args.crash_dir), log)
    except OSError as exc:   # the disk, say: the buffer stays for the next try
        sys.stderr.write(f"bread: recovering into {args.file} failed: {exc}; the crash "
                         "buffer is kept\n")
        return 2
    finally:
        log.close()
    for r in done:
        print(f"bread: recovered {r.events} event(s) of process {r.pid} into {args.file}")
    if not done:
        print(f"bread: no abandoned crash buffer of {args.file}")
    return 0
