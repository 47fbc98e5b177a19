"""The environment variables ``basic_config`` reads for what it is not given: ``BLOG_FILE``
(the output) and ``BLOG_LEVEL`` (the minimum severity); and ``BLOG_OTEL`` (correlation with
OpenTelemetry, read once by ``blog.correlation``). Set but empty is not set."""

from __future__ import annotations

import os

from blogformat.severity import Severity, to_severity

from .errors import ConfigurationError, NotAFile

#: The output of ``basic_config()`` called without one (default ``app.blog``).
FILE_ENV = "BLOG_FILE"
#: The minimum severity of ``basic_config()`` called without one (default trace).
LEVEL_ENV = "BLOG_LEVEL"
#: ``0`` turns off correlation with OpenTelemetry (``blog.correlation``; default on).
OTEL_ENV = "BLOG_OTEL"


def output_from_env(default: str = "app.blog") -> str:
    """The path ``BLOG_FILE`` names, else ``default``; a ConfigurationError naming the
    variable if it names a directory, or anything else that is no regular file there (a
    link, a FIFO, a device: ``NotAFile``); a path that cannot be opened raises OSError."""
    path = os.environ.get(FILE_ENV)
    if not path:
        return default
    if os.path.isdir(path):
        raise ConfigurationError(f"{FILE_ENV}={path!r} is a directory: name the log file in "
                                 f"it ({os.path.join(path, default)!r}, say)")
    from .pipeline.streams import check_log_path   # (with basic_config, which opens it)
    try:
        check_log_path(path)
    except NotAFile as exc:
        raise NotAFile(f"{FILE_ENV}={path!r}: {exc}") from None
    return path


def severity_from_env(default: int = Severity.TRACE) -> int:
    """The severity ``BLOG_LEVEL`` names (``info``, ``WARNING``, ``20``, ``0x100``: a name or
    a number, a ``logging`` level's too), else ``default``; a ConfigurationError naming the
    variable for any other value."""
    raw = os.environ.get(LEVEL_ENV, "").strip()
    if not raw:
        return default
    try:
        value: int | str = int(raw, 0)
    except ValueError:
        value = raw
    try:
        return to_severity(value)
    except ValueError as exc:
        raise ConfigurationError(f"{LEVEL_ENV}={raw!r}: {exc}") from None


def otel_from_env(default: bool = True) -> bool:
    """Whether ``BLOG_OTEL`` leaves correlation with OpenTelemetry on: ``0``, ``false``,
    ``no``, ``off`` turn it off, ``1``, ``true``, ``yes``, ``on`` on (any case), unset or
    empty is ``default``; a ConfigurationError naming the variable for any other value."""
    raw = os.environ.get(OTEL_ENV, "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigurationError(f"{OTEL_ENV}={raw!r}: 0 or 1 (false or true, no or yes, off or on)")
