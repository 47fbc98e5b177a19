"""The default session and the module-level functions that use it."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from blogformat.severity import Severity, to_severity

from .backpressure import BLOCK, check_capacity, check_overflow
from .consumer import Consumer
from .logger import Logger
from .report import report
from .session import Session
from .streams import FileOutputStream

_session: Session | None = None      # the only global state: the default session
_lock = threading.Lock()


def default_session() -> Session:
    """The process's default session (made on first use, without output until ``basic_config``)."""
    global _session
    if _session is None:
        with _lock:
            if _session is None:
                _session = Session()
                atexit.register(_at_exit, _session)
    return _session


def basic_config(output: Any = "app.blog", *, min_severity: Severity | int | str = Severity.TRACE,
                 flush_interval: float = 0.02, flush_bytes: int | None = None,
                 channel_capacity: int = 4 << 20, overflow: str = BLOCK, mode: str = "ab",
                 fsync: bool = False) -> Session:
    """Send the default session to ``output`` (a path, or any object with ``write(bytes)``).

    Starts the background consumer: it writes every ``flush_interval`` seconds,
    or as soon as a thread has ``flush_bytes`` pending (default: 1 MiB, or the
    channel capacity if smaller). Calling it again moves the
    session to the new output, after writing what is pending to the old one.
    """
    s = default_session()
    check_overflow(overflow)
    check_capacity(channel_capacity)
    if flush_bytes is None:
        flush_bytes = min(1 << 20, channel_capacity)
    if not isinstance(flush_bytes, int) or not 1 <= flush_bytes <= channel_capacity:
        raise ValueError(f"flush_bytes must be from 1 to channel_capacity ({channel_capacity}), "
                         f"not {flush_bytes!r}")
    if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) \
            or not flush_interval > 0:
        raise ValueError(f"flush_interval must be positive seconds, not {flush_interval!r}")
    if mode not in ("ab", "wb", "xb"):
        raise ValueError(f"mode must be 'ab', 'wb' or 'xb', not {mode!r}")
    if not isinstance(output, (str, os.PathLike)) and not hasattr(output, "write"):
        raise TypeError(f"output must be a path or have write(bytes), not {type(output).__name__}")
    min_severity = to_severity(min_severity)
    old = _consumer(s)
    same = (old is not None and isinstance(old.stream, FileOutputStream)
            and isinstance(output, (str, os.PathLike)) and _same_file(old.stream.path, output))
    if same:
        _stop_consumer(s)   # the file gets what is pending before it is reopened
    try:
        if isinstance(output, (str, os.PathLike)):
            stream: Any = FileOutputStream(output, mode=mode, fsync=fsync)
        else:
            stream = output
    except BaseException:
        if same and old is not None:   # give the session its output back
            Consumer(s, FileOutputStream(old.stream.path, fsync=old.stream.fsync),
                     interval=old.interval, flush_bytes=old.flush_bytes).start()
        raise
    if not same:
        _stop_consumer(s)   # the old output gets what is pending
    consumer = Consumer(s, stream, interval=flush_interval, flush_bytes=flush_bytes)
    s.configure(channel_capacity=channel_capacity, overflow=overflow)
    s.set_min_severity(min_severity)
    consumer.start()
    return s


def _same_file(a: str, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(os.fspath(b))


def get_logger(category: str = "main") -> Logger:
    """The default session's logger for ``category``."""
    return default_session().get_logger(category)


def flush() -> None:
    """Write everything logged so far to the output; when it returns, it is there."""
    c = _consumer(default_session())
    if c is not None:
        c.flush()


def shutdown() -> None:
    """Flush and stop the default session's consumer and close its file. Also runs at exit."""
    if _session is not None:
        _stop_consumer(_session)


def set_writer_name(name: str) -> None:
    """Rename the calling thread's writer in the default session (bread's ``%n``)."""
    default_session().writer().name = name


def _consumer(s: Session) -> Consumer | None:
    """The default session's consumer (basic_config attaches only Consumers)."""
    c = s.drainer
    return c if isinstance(c, Consumer) else None


def _stop_consumer(s: Session) -> None:
    c = _consumer(s)
    if c is None:
        return
    c.stop()
    if isinstance(c.stream, FileOutputStream):
        c.stream.close()


def _at_exit(s: Session) -> None:
    _stop_consumer(s)
    left = s.pending()
    if left:
        report(f"blog: {left} event(s) were logged but never written: "
                "call blog.basic_config() to give the session an output")
