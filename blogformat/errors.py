"""The errors of the format, each a subclass of the built-in it stands for, so that an
``except ValueError`` (or ``PermissionError``) written before them still catches them.

``blog`` and ``bread`` re-export them with their own (``blog.errors``, ``bread.errors``).
"""


class FormatError(ValueError):
    """A format string blog does not accept."""


class BadEntry(ValueError):
    """An entry whose fields do not have the specified types (``blogformat.entries``,
    ``blogformat.valuetypes``): damage to a reader."""


class UnsafeBufferDirectory(PermissionError):
    """A crash buffer directory this process must not trust: not a directory of its own user,
    or one others may write (a planted one would make recovery append chosen bytes)."""
