"""The errors bread raises of its own, each a subclass of the built-in it stands for (an
``except ValueError`` still catches an OptionError or a NotABlogFile).

Damage in a log is not an error: the reader skips it and reports it (``Reader.damage``).
"""

from blogformat.errors import BadEntry, UnsafeBufferDirectory

__all__ = ["BadEntry", "DamagedLog", "ListingCut", "NotABlogFile", "OptionError",
           "UnsafeBufferDirectory"]


class OptionError(ValueError):
    """A reader option out of its range or not one of its values: a span, a batch size,
    columns, a filter's time, a command-line option, an option of the Spark format."""


class NotABlogFile(ValueError):
    """An input that is not a blog file: no frame where one begins (``bread.read`` and the
    Spark format check the inputs named themselves; ``bread.frames.check_begins``)."""


class DamagedLog(ValueError):
    """The Spark format's ``damage=fail``: the log read had damaged bytes."""


class ListingCut(OSError):
    """A listing of object storage stopped at its bounds of keys or time
    (``bread.inputs.lister``): ``strerror`` says which, ``filename`` is the URL. ``bread.read``
    reports it as the URL's damage."""
