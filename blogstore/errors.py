"""The errors of the files on disk: ``UnsafeBufferDirectory`` (a ``PermissionError``), a
crash buffer directory this process must not trust (``crashlayout.open_directory``);
``NeedsPosix`` (an ``ImportError``), a feature that needs file locks where there are none.

It is defined with the format's errors (``blogformat.errors``), which ``blog.errors`` and
``bread.errors`` re-export it from, so that one class is caught wherever it is raised.
"""

from blogformat.errors import UnsafeBufferDirectory

__all__ = ["NeedsPosix", "UnsafeBufferDirectory"]


class NeedsPosix(ImportError):
    """A feature that needs POSIX file locks (``fcntl``), used where there are none
    (Windows): file sets, the crash buffer, recovery, ``bread compact`` (``posix``)."""
