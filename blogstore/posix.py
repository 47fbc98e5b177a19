"""File locks (``fcntl``): what a log's file sets need of POSIX, and a plain file does not.

Where ``fcntl`` is missing (Windows), ``import blog``, ``import bread``, and a plain file
written and read work: a plain file is written unlocked there (``LOCKS`` is False), as on a
file system without ``flock``. What needs the locks (file sets: rotation, retention,
compression, the manifest; the crash buffer and recovery; ``bread compact``) imports
``fcntl`` from here, which then raises ``NeedsPosix`` saying so, when the option is used.
"""

from __future__ import annotations

import os

from blogformat.typinglite import TYPE_CHECKING
from .errors import NeedsPosix

if TYPE_CHECKING:
    from typing import Any

try:
    import fcntl  # noqa: F401  (there or not: what LOCKS says)
    LOCKS = True
except ModuleNotFoundError:   # not POSIX (Windows): ``fcntl`` is __getattr__'s
    LOCKS = False

#: Flags of ``os.open`` that POSIX has and Windows has not: 0 there, where a plain file
#: and a manifest are opened without them and a directory is not synced; what makes the
#: files of a set needs the locks too, and is refused before it opens one.
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

#: What NeedsPosix says.
WHY = ("blog's file sets (rotation, retention, compression), the crash buffer, crash "
       "recovery and bread compact need POSIX file locks (fcntl), which this platform does "
       "not have; a plain file works: blog.basic_config(\"app.blog\")")


def require() -> None:
    """Raise NeedsPosix where there are no file locks (a configuration that needs them
    checks before it changes anything)."""
    if not LOCKS:
        raise NeedsPosix(WHY)


def __getattr__(name: str) -> Any:
    if name == "fcntl":
        require()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
