"""The directory's files, handled with care: only its own regular files are removed, an
original that held damage is moved aside (never deleted), and names are shown as bread
shows them. Whatever is left alone is said to ``warn``."""

from __future__ import annotations

import os
import sys
from typing import Callable

from blogstore import catalog
from blogstore.fileset import is_regular

from ..inputs import name_text
from ..render import escape_controls

Warn = Callable[[str], None]


def to_stderr(message: str) -> None:
    """The default ``warn``: a line on standard error."""
    sys.stderr.write(f"bread compact: {escape_controls(name_text(message))}\n")


def shown(directory: str, name: str) -> str:
    """A path for a message: its name as bread names files, control characters escaped."""
    return escape_controls(name_text(os.path.join(directory, name)))


def remove(directory: str, name: str, removed: list[str], warn: Warn,
            links: bool = False) -> None:
    """Delete the regular file ``name`` of ``directory`` (with ``links``, a link too: a
    planted one at a temporary name); anything else is said to ``warn`` and left alone."""
    path = os.path.join(directory, name)
    if not (is_regular(directory, name) or links and os.path.islink(path)):
        if os.path.lexists(path):
            warn(f"{path}: not a regular file: left alone")
        return
    try:
        os.unlink(path)
        removed.append(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        warn(f"{path}: cannot remove it ({exc.strerror}): left alone")


def keep_damaged(directory: str, name: str, compacted: str, warn: Warn) -> str | None:
    """Move ``name``, an original that held damage, to ``DIR/damaged/``; where it is now,
    said to ``warn``. If it cannot be moved (not a regular file, ``damaged`` a link or not
    ours) it stays where it is, said too (None): never deleted."""
    where = os.path.join(directory, catalog.DAMAGED)
    try:
        if not is_regular(directory, name):
            raise OSError(0, "not a regular file")
        target = _move_aside(directory, name)
    except OSError as exc:
        warn(f"{os.path.join(directory, name)} held damage; its readable events are in "
             f"{compacted}; left in place, not moved to {where}/ ({exc.strerror or exc})")
        return None
    path = os.path.join(where, target)
    warn(f"{os.path.join(directory, name)} held damage: kept as {path} (its readable events "
         f"are in {compacted})")
    return path


def _move_aside(directory: str, name: str) -> str:
    """Rename ``directory/name`` into its ``damaged`` subdirectory (made if missing, never
    through a link, only if it is this user's) under a name not taken there; that name.
    Both directories are fsynced."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(catalog.DAMAGED, dir_fd=dfd)
        except FileExistsError:
            pass
        sub = os.open(catalog.DAMAGED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                      | os.O_CLOEXEC, dir_fd=dfd)
        try:
            if os.fstat(sub).st_uid != os.geteuid():
                raise PermissionError(0, f"{catalog.DAMAGED}/ is another user's")
            target, k = name, 0
            while _exists(target, sub):
                k += 1
                target = f"{name}.{k}"
            os.rename(name, target, src_dir_fd=dfd, dst_dir_fd=sub)
            os.fsync(sub)
            os.fsync(dfd)
        finally:
            os.close(sub)
    finally:
        os.close(dfd)
    return target


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True
