"""What the dead writers of a log left in their crash buffers, appended to it, as the next
``basic_config(FILE, crash_buffer=True)`` would (``blogstore.recovery``): the library
side of ``bread --recover``, the one command of bread that writes to a log."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from blogstore.fileset import file_name, members, split_base
from blogstore.recovery import Recovery, recover
from blogstore.recoverytarget import LockedFile


class Log:
    """Where recovery appends: the file ``path``, locked (BlockingIOError if a live writer
    holds it; OSError if it cannot be opened); or, when ``path`` is the base name of a rotated
    set with buffers in ``directory``, the file each dead writer was writing, and a new file
    of the set, made when needed, for one whose file is gone."""

    def __init__(self, path: str, directory: str) -> None:
        self.path = path
        self.opened: list[LockedFile] = []
        self._where, self._stem = split_base(path)
        if os.path.exists(path) or not os.path.isdir(directory) \
                or not members(self._where or ".", self._stem):
            self.opened.append(LockedFile(path))
            self.stream: Any = self.opened[0]
        else:
            self.stream = self._new_file

    def _new_file(self) -> LockedFile:
        f = LockedFile(os.path.join(self._where, file_name(self._stem, time.time_ns(),
                                                           os.getpid())), create=True)
        self.opened.append(f)
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
