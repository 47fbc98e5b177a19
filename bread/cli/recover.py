"""``bread --recover FILE [--crash-dir DIR]``: append to FILE what its dead writers left in
their crash buffers, as the next ``basic_config(FILE, crash_buffer=True)`` would
(``blogstore.recovery``). The one command of bread that writes to a log.

Exit status: 0 done, or nothing to recover (no abandoned buffer: after a clean exit, or of
a log never written); 2 nothing could be done (a live writer holds the file a dead one's
events are for, a buffer directory that is not this user's own, FILE no regular file or
in no directory), 3 a buffer was damaged (its readable events recovered, its files
kept as ``*.damaged``) or left alone: see standard error.

The whole command is here: its options, ``Log`` (where recovery appends) and
``recover_into`` (``blogstore.recovery`` drives the recovery itself)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any, Callable

from blogformat.errors import UnsafeBufferDirectory
from blogstore.crashlayout import buffer_directory, check_directory
from blogstore.fileset import NEW, file_name, members, split_base
from blogstore.recovery import Recovery, recover
from blogstore.recoverytarget import LockedFile

from ..inputs import name_text
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
    path = args.file
    if os.path.lexists(path) and not os.path.isfile(path):
        # a FIFO would hang the opening, a device swallow what is recovered
        _say(sys.stderr, f"bread: {path} is not a regular file; nothing recovered")
        return 2
    try:
        where, stem = split_base(path)
    except ValueError:       # ".blog": no log's name, nor a set's
        _say(sys.stderr, f"bread: {path} names no log file; nothing recovered")
        return 2
    if not os.path.isdir(where):
        _say(sys.stderr, f"bread: no directory {where} (of {path}); nothing recovered")
        return 2
    directory = buffer_directory(path, args.crash_dir)
    try:
        buffers = check_directory(directory)
    except UnsafeBufferDirectory as exc:
        _say(sys.stderr, f"bread: {exc}; nothing recovered (recover it as the user who owns "
                         "it)")
        return 2
    if not buffers:          # a clean exit removed them (or no writer had one)
        none = "" if os.path.exists(path) or members(where, stem) else \
            " (nor a log file of that name)"
        _say(sys.stdout, f"bread: no abandoned crash buffer of {path}{none}")
        return 0
    log = Log(path)
    said: list[str] = []

    def warn(text: str) -> None:
        said.append(text)
        _say(sys.stderr, text)
    try:
        done = recover_into(log, directory, warn)
    except BlockingIOError:  # a dead writer's events are for the file a live one holds
        _say(sys.stderr, f"bread: {path} is being written by a live process; it "
                         "recovers what dead writers left when it starts with "
                         "crash_buffer=True")
        return 2
    except OSError as exc:   # cannot be opened, the disk: the buffer stays for the next try
        _say(sys.stderr, f"bread: recovering into {path} failed: {exc}; the crash "
                         "buffer is kept")
        return 2
    finally:
        log.close()
    for r in done:
        _say(sys.stdout, f"bread: recovered {r.events} event(s) of process {r.pid} into "
                         f"{r.path}")
    if not done:
        _say(sys.stdout, f"bread: no abandoned crash buffer of {path}")
    return 3 if said else 0      # 3: a buffer was damaged or left alone (said above)


main = subcommand(parser, run)


class Log:
    """Where recovery appends the events of a dead writer whose own file is not there to
    take them (``blogstore.recovery.recover`` finds that file first): ``stream()``, called
    when first needed. It is the file ``path`` if it is there, locked (BlockingIOError if a
    live writer holds it, OSError if it cannot be opened); else ``path`` is the base name
    of a rotated set (which is no file), and it is a new file of the set. ValueError if
    ``path`` names no log (``logs/.blog``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: list[LockedFile] = []
        self._where, self._stem = split_base(path)

    def stream(self) -> LockedFile:
        f = LockedFile(self.path) if os.path.exists(self.path) else self._new_file()
        self.opened.append(f)
        return f

    def _new_file(self) -> LockedFile:
        """A new file of the set, locked before it has its name (``NAME.new``, then linked,
        as a writer makes one): no follower or housekeeper sees it unlocked and empty, and
        takes it for a finished file. Names are by the millisecond: a recovery that goes on
        in a further file within the same one takes the next free millisecond's name."""
        now = time.time_ns()
        f = LockedFile(os.path.join(self._where, file_name(self._stem, now, os.getpid())) + NEW,
                       create=True)
        try:
            for ms in range(1000):
                path = os.path.join(self._where,
                                    file_name(self._stem, now + ms * 1_000_000, os.getpid()))
                try:
                    os.link(f.path, path)      # never over another's file
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError(f"no free name for a new file of the set {self.path}")
            os.unlink(f.path)
        except BaseException:
            f.close()
            with contextlib.suppress(OSError):
                os.unlink(f.path)
            raise
        f.path = path
        return f

    def close(self) -> None:
        """Close what was opened; a file made for a recovery that appended nothing goes."""
        for f in self.opened:
            if f.path != self.path and f.position()[2] == 0:
                os.unlink(f.path)
            f.close()


def recover_into(log: Log, directory: str, warn: Callable[[str], None]) -> list[Recovery]:
    """Append to ``log`` the events of every abandoned buffer in ``directory``
    (``crashfiles.recover``: a damaged buffer is said to ``warn``), then remove ``directory``
    if that emptied it; what was recovered. An OSError (the disk, say) keeps the buffers for
    the next try. The caller closes ``log`` in any case."""
    done = recover(directory, log.stream, log.path, warn=warn)
    try:
        os.rmdir(directory)      # emptied (a writer's next start makes it again)
    except OSError:
        pass
    return done
