"""Config: the default session's configuration, checked once.

``basic_config``'s keywords as one object, each checked (``ConfigurationError`` or
``TypeError`` for a bad one) before anything changes; what they imply (a rotated set, the
fsync policy, the crash buffer's place) as its properties. ``basic_config`` makes one
and the default session moves to it; ``for_children`` is what a spawned or forkserver
child is configured with (``blog.lifecycle``: marshalled, in hex, in the environment).
"""

from __future__ import annotations

import os

from blogformat.typinglite import TYPE_CHECKING
from blogformat.severity import Severity, to_severity

from .envconfig import output_from_env, severity_from_env
from .errors import ConfigurationError
from .files.durability import fsync_policy
from .pipeline.backpressure import BLOCK, check_capacity, check_overflow
from .pipeline.streams import OutputStream

if TYPE_CHECKING:
    from typing import Any, Callable

    from .files.compaction import Compaction
    from .files.schedule import Interval, TimesOfDay
    from .lifecycle import CrashOption

#: The options that make ``output`` the base name of a rotated set (``RotatingFile``'s).
ROTATION = ("rotate_bytes", "rotate_every", "rotate_at", "tz", "keep_files", "keep_days",
            "keep_bytes", "compress")


#: ``basic_config``'s keywords (but ``output``) and what each is when left out.
DEFAULTS: dict[str, Any] = {
    "min_severity": None, "flush_interval": 0.02, "flush_bytes": None,
    "channel_capacity": 4 << 20, "overflow": BLOCK, "mode": "ab", "fsync": False,
    "rotate_bytes": None, "rotate_every": None, "rotate_at": None, "tz": None,
    "keep_files": None, "keep_days": None, "keep_bytes": None, "compress": False,
    "crash_buffer": False, "crash_dir": None, "keep_source_lines": False, "backtrace": None,
    "backtrace_trigger": Severity.ERROR, "strict": None, "on_close": None, "compact": None,
}


class Config:
    """``basic_config``'s keywords, checked (its docstring says what each does). Left out,
    ``output`` is ``BLOG_FILE`` (else ``app.blog``) and ``min_severity`` ``BLOG_LEVEL``.
    (A plain class: ``dataclasses`` would cost the start-up of every program.)"""

    output: str | os.PathLike[str] | OutputStream
    min_severity: int
    flush_interval: float
    flush_bytes: int | None       # 1 MiB, or channel_capacity if smaller (``flush_size``)
    channel_capacity: int
    overflow: str
    mode: str
    fsync: bool | str | float
    rotate_bytes: int | None
    rotate_every: Interval | None
    rotate_at: TimesOfDay | None
    tz: str | None
    keep_files: int | None
    keep_days: float | None
    keep_bytes: int | None
    compress: bool
    crash_buffer: bool
    crash_dir: str | os.PathLike | None
    keep_source_lines: bool
    backtrace: int | None
    backtrace_trigger: int
    strict: bool | None
    on_close: Callable[[str], object] | None
    compact: Compaction | str | int | bool | None
    #: ``compact`` as a Compaction (None: off).
    compaction: Compaction | None

    def __init__(self, output: str | os.PathLike[str] | OutputStream | None = None,
                 **options: Any) -> None:
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(unknown)}")
        for name, default in DEFAULTS.items():
            setattr(self, name, options.get(name, default))
        self.output = output_from_env() if output is None else output
        self.compaction = None
        self._check()

    def _check(self) -> None:
        ms: Any = self.min_severity
        self.min_severity = severity_from_env() if ms is None else to_severity(ms)
        self.backtrace_trigger = to_severity(self.backtrace_trigger)
        fsync_policy(self.fsync)
        check_overflow(self.overflow)
        check_capacity(self.channel_capacity)
        self._check_writing()
        self._check_files()

    def _check_writing(self) -> None:
        """The consumer's and the output's options."""
        fb, fi = self.flush_size, self.flush_interval
        if not isinstance(fb, int) or not 1 <= fb <= self.channel_capacity:
            raise ConfigurationError(
                f"flush_bytes must be from 1 to channel_capacity ({self.channel_capacity}), "
                f"not {fb!r}")
        if isinstance(fi, bool) or not isinstance(fi, (int, float)) or not fi > 0:
            raise ConfigurationError(f"flush_interval must be positive seconds, not {fi!r}")
        if self.mode not in ("ab", "wb", "xb"):
            raise ConfigurationError(f"mode must be 'ab', 'wb' or 'xb', not {self.mode!r}")
        if not self.is_path and not hasattr(self.output, "write"):
            raise TypeError("output must be a path or have write(bytes), "
                            f"not {type(self.output).__name__}")
        for name in ("keep_source_lines", "crash_buffer"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, not {getattr(self, name)!r}")
        if self.strict is not None and not isinstance(self.strict, bool):
            raise ConfigurationError(f"strict must be True or False, not {self.strict!r}")
        bt = self.backtrace
        if bt is not None and (isinstance(bt, bool) or not isinstance(bt, int) or bt < 0):
            raise ConfigurationError(f"backtrace must be a count of events >= 0, not {bt!r}")

    def _check_files(self) -> None:
        """The options of a file set and the crash buffer."""
        kind = type(self.output).__name__
        if self.rotating and not self.is_path:
            raise TypeError(f"rotation, retention and compression need a path as output, "
                            f"not {kind}")
        if self.on_close is not None and not callable(self.on_close):
            raise ConfigurationError(
                f"on_close must be a function of a path, not {self.on_close!r}")
        if self.on_close is not None and not self.rotating:
            raise ConfigurationError("on_close is called for the closed files of a rotated "
                                     "set: give rotate_bytes, rotate_every or rotate_at too")
        if self.compact is not None and self.compact is not False:
            from .files.compaction import compaction_option
            self.compaction = compaction_option(self.compact)
            if not self.rotating:
                raise ConfigurationError("compact compacts the closed files of a rotated set: "
                                         "give rotate_bytes, rotate_every or rotate_at too")
        if self.rotating and self.mode != "ab":
            raise ConfigurationError(f"mode={self.mode!r} applies to one file; a rotated set "
                                     "always starts new files")
        if self.crash_buffer and not self.is_path:
            raise TypeError(f"crash_buffer needs a file path as output, not {kind}")
        if self.crash_dir is not None and not self.crash_buffer:
            raise ConfigurationError(
                "crash_dir is where crash_buffer=True keeps its files: give both")

    @property
    def is_path(self) -> bool:
        """True if ``output`` names a file (or a set's base name), not a stream."""
        return isinstance(self.output, (str, os.PathLike))

    @property
    def rotation(self) -> dict[str, Any]:
        """The options of a rotated set, as ``RotatingFile`` takes them."""
        return {name: getattr(self, name) for name in ROTATION}

    @property
    def rotating(self) -> bool:
        """True if any rotation, retention or compression option makes a rotated set."""
        return any(v is not None and v is not False for v in self.rotation.values())

    @property
    def fsync_policy(self) -> tuple[str, float | None]:
        """(what a stream does: NEVER, ROTATION or FLUSH; the group-commit interval)."""
        return fsync_policy(self.fsync)

    @property
    def crash(self) -> CrashOption:
        """The crash buffer: False (none), None (beside the log) or its directory."""
        if not self.crash_buffer:
            return False
        return os.fspath(self.crash_dir) if self.crash_dir is not None else None

    def for_children(self) -> dict[str, Any]:
        """The keywords a child started by spawn or forkserver is configured with (its
        output is the parent's, made its own): no hook, no compaction of its own (the
        parent runs it; the child's retention waits for it)."""
        return dict(
            self.rotation if self.rotating else {}, min_severity=self.min_severity,
            flush_interval=self.flush_interval, flush_bytes=self.flush_size,
            channel_capacity=self.channel_capacity, overflow=self.overflow,
            fsync=self.fsync, crash_buffer=self.crash_buffer,
            keep_source_lines=self.keep_source_lines,
            crash_dir=None if self.crash_dir is None else os.fspath(self.crash_dir),
            compact=None if self.compaction is None
            else self.compaction.for_workers().fields())

    @property
    def flush_size(self) -> int:
        """``flush_bytes``; left out, 1 MiB or ``channel_capacity`` if smaller."""
        fb = self.flush_bytes
        return min(1 << 20, self.channel_capacity) if fb is None else fb
