"""What the dead writers of a log left in their crash buffers, appended to it, as the next
``basic_config(FILE, crash_buffer=True)`` would (``blogstore.recovery``): the library
side of ``bread --recover``, the one command of bread that writes to a log."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

from blogstore.fileset import NEW, file_name, split_base
from blogstore.recovery import Recovery, recover
from blogstore.recoverytarget import LockedFile


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
