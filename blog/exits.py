"""The ways a process ends that skip ``atexit``: flush the default session on them too.

- ``SIGTERM`` (what ``kill``, systemd and container runtimes send): the
  default action ends the process at once, without ``atexit``. blog's handler
  flushes, then does what was there before: calls the application's handler,
  ignores the signal if it was ignored, or ends the process by the signal as
  the default action would (the exit status still says "killed by SIGTERM").
- An unhandled exception, in the main thread (``sys.excepthook``) or in any
  other (``threading.excepthook``): it is logged first, at CRITICAL with its
  traceback in the ``exception`` field, flushed, and then handed to the hook
  that was there before (which prints it, as usual).

``install`` is called by ``basic_config``; it installs each hook once, and
the signal handler only from the main thread (Python allows no other).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import TracebackType
from typing import Any, Callable

_flush: Callable[[], None] | None = None
_log: Callable[..., None] | None = None
_previous_term: Any = None
_installed = {"term": False, "sys": False, "threading": False}


def install(flush: Callable[[], None], log_critical: Callable[..., None]) -> None:
    """Flush with ``flush`` on SIGTERM and unhandled exceptions, logging them with
    ``log_critical(fmt, *args, exception=exc)`` first."""
    global _flush, _log, _previous_term
    _flush, _log = flush, log_critical
    if not _installed["sys"]:
        _installed["sys"] = True
        previous_sys = sys.excepthook

        def excepthook(t: type[BaseException], exc: BaseException,
                       tb: TracebackType | None) -> None:
            _report(exc, "the main thread")
            previous_sys(t, exc, tb)
        sys.excepthook = excepthook
    if not _installed["threading"]:
        _installed["threading"] = True
        previous_threading = threading.excepthook

        def thread_hook(args: Any) -> None:
            if args.exc_type is not SystemExit:
                name = args.thread.name if args.thread is not None else "a thread"
                _report(args.exc_value, f"thread {name}")
            previous_threading(args)
        threading.excepthook = thread_hook
    if not _installed["term"] and threading.current_thread() is threading.main_thread():
        try:
            _previous_term = signal.signal(signal.SIGTERM, _on_sigterm)
            _installed["term"] = True
        except (ValueError, OSError):   # no signals here (an embedded interpreter...)
            pass


def _report(exc: BaseException | None, where: str) -> None:
    try:
        if _log is not None and exc is not None:
            _log("unhandled {} in {}: {}", type(exc).__name__, where, str(exc), exception=exc)
        if _flush is not None:
            _flush()
    except Exception:   # the application's own hook must still run
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    try:
        if _flush is not None:
            _flush()
    except Exception:
        pass
    prev = _previous_term
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:   # the default action: end the process by the signal, as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
