"""The errors blog raises of its own, each a subclass of the built-in it stands for (an
``except ValueError`` still catches a ConfigurationError or a CallSiteError).

A wrong type of argument stays a plain ``TypeError``; an output that fails, an ``OSError``.
"""

from blogformat.errors import FormatError, UnsafeBufferDirectory

__all__ = ["CallSiteError", "ConfigurationError", "FormatError", "TooManySources",
           "UnsafeBufferDirectory"]


class ConfigurationError(ValueError):
    """An option out of its range or not one of its values: ``basic_config``,
    ``Session.configure``, ``Consumer``, ``RotatingFile``, ``FileOutputStream``, the
    ``logging`` bridge's level. Raised where the option is given; nothing is changed."""


class CallSiteError(FormatError):
    """A format string that does not fit the arguments of its call site."""


class TooManySources(CallSiteError):
    """The session has as many sources as a stream may hold
    (``blog.pipeline.source.MAX_SOURCES``)."""
