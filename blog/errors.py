"""The errors blog raises of its own, each a subclass of the built-in it stands for (an
``except ValueError`` still catches a ConfigurationError or a CallSiteError).

A wrong type of argument stays a plain ``TypeError``; an output that fails, an ``OSError``.
"""

from blogformat.errors import FormatError, UnsafeBufferDirectory
from blogstore.errors import NeedsPosix

__all__ = ["CallSiteError", "ConfigurationError", "FormatError", "NeedsPosix", "NotAFile",
           "TooManySources", "UnsafeBufferDirectory"]


class ConfigurationError(ValueError):
    """An option out of its range or not one of its values: ``basic_config``,
    ``Session.configure``, ``Consumer``, ``RotatingFile``, ``FileOutputStream``, the
    ``logging`` bridge's level. Raised where the option is given; nothing is changed."""


class NotAFile(ConfigurationError, OSError):
    """A log path where something other than a regular file is: a link (never followed), a
    FIFO (never waited on), a device, a socket, a directory. Raised by ``basic_config`` and
    ``FileOutputStream``; raised by the stream's writes while it is what the path names
    when the file is opened again (the session counts or holds what they refuse)."""


class CallSiteError(FormatError):
    """A format string that does not fit the arguments of its call site."""


class TooManySources(CallSiteError):
    """The session has as many sources as a stream may hold
    (``blog.pipeline.source.MAX_SOURCES``)."""
