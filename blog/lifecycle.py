"""The default session's output at the process's ends and in its children.

How it ends: at exit, and at the end of a multiprocessing child (which multiprocessing
ends with ``os._exit``, no ``atexit``), the output is closed (a last consume) and what
was logged but never written is told on stderr. How children go on: a forked child
logs into a file (set) of its own, with the parent's options; a multiprocessing child
started by spawn or forkserver reads them from the environment (``CONFIG_ENV``).

``blog.default`` calls these with its session; ``blog.process`` holds the hooks that
call them (at exit, after a fork, at a multiprocessing child's end).
"""

from __future__ import annotations

import datetime as _dt
import marshal
import os
import sys

from blogformat.typinglite import TYPE_CHECKING
from blogstore.fileset import pid_path

from . import process
from .files.durability import NEVER
from .pipeline.consumer import Consumer
from .pipeline.latewrites import LateWriter
from .report import report
from .pipeline.session import Session
from .pipeline.streams import FileOutputStream

if TYPE_CHECKING:
    from typing import Any, Literal, TypeGuard

    from .files.rotating import RotatingFile

    #: The crash buffer option: False (none), None (beside the log), or the directory to
    #: keep it in.
    CrashOption = str | None | Literal[False]

#: Where basic_config leaves its options for multiprocessing children started by spawn
#: or forkserver (they do not inherit the parent's memory, only its environment).
CONFIG_ENV = "BLOG_CONFIG"
#: Events told of as never written; what closed the output as the process ended.
_told_unwritten = 0
_closed_by: str | None = None


def consumer_of(s: Session) -> Consumer | None:
    """The default session's consumer (basic_config attaches only Consumers)."""
    c = s.drainer
    return c if isinstance(c, Consumer) else None


def is_rotating(stream: Any) -> TypeGuard[RotatingFile]:
    """True for a RotatingFile (blog.files.rotating is imported with the first one)."""
    rotating = sys.modules.get("blog.files.rotating")
    return rotating is not None and isinstance(stream, rotating.RotatingFile)


def is_file(stream: Any) -> TypeGuard[FileOutputStream | RotatingFile]:
    """True for the streams basic_config opens on a path (and closes)."""
    return isinstance(stream, FileOutputStream) or is_rotating(stream)


def stop_consumer(s: Session, keep_buffer: bool = False) -> None:
    """Stop the consumer (a last consume, the file closed cleanly); its crash buffer goes
    too, unless ``keep_buffer`` (a move: it mirrors the channels until the next output's
    buffer takes over)."""
    c = consumer_of(s)
    if c is None:
        return
    c.stop()
    if not keep_buffer:
        s.use_crash_buffer(None)      # everything is written: the buffer goes
    if is_file(c.stream):
        c.stream.close()


def opened(s: Session) -> None:
    """The session was given an output: what it logs from now on is written."""
    global _closed_by
    s.was_shut_down = False
    _closed_by = None


def at_exit(s: Session) -> None:
    """Python's exit: close the output (a last consume) and tell what was never written.
    The exit handlers that run after this one (registered before it: a library's, and
    multiprocessing's) may log: that is written at once (``LateWriter``), or told."""
    close_for_good(s, "at exit, after blog had closed its output")
    process.last_mp_finalizer(None, _tell_unwritten, s)


def close_for_good(s: Session, after: str) -> None:
    """Close the output as the process ends; what is logged from now on is written at once
    into the output opened again (``blog.pipeline.latewrites``), or told as ``after``."""
    global _closed_by
    c = consumer_of(s)
    if c is not None:
        _closed_by = after
    s.close_outputs(s.exit_timeout)   # a callable output that never returns is left behind
    stop_consumer(s)
    s.tell_undelivered()
    if c is not None:
        st = c.stream
        LateWriter(s, lambda: _reopen(st), lambda: _tell_unwritten(s), close=_close_own,
                   durable=getattr(st, "fsync", NEVER) != NEVER
                   or c.fsync_interval is not None).start()
    _tell_unwritten(s)


def _reopen(st: Any) -> Any:
    """The output ``st`` again, for the events logged after it was closed at exit: its file
    opened again, a rotated set's next file (compaction left to the set's next run), or
    the application's own stream (blog never closes it)."""
    if is_rotating(st):
        return type(st)(st.path, **dict(st.options, compact=None))
    if isinstance(st, FileOutputStream):
        return FileOutputStream(st.path, fsync=st.fsync)
    return st


def _close_own(st: Any) -> None:
    """Close ``st`` if blog opened it (a file or a set), not the application's own stream."""
    if is_file(st):
        st.close()


def end_late_writes(s: Session) -> None:
    """The session is given an output again (``basic_config`` in a late exit handler): the
    LateWriter stands down, its file closed before the output is opened."""
    d = s.drainer
    if isinstance(d, LateWriter):
        d.stop()


def _tell_unwritten(s: Session) -> None:
    """Report on stderr the events logged but never written (each once)."""
    global _told_unwritten
    left, dropped = s.pending(), s.unrecorded_drops()
    if left + dropped <= _told_unwritten:
        return
    _told_unwritten = left + dropped
    why = ("after blog.shutdown() (the session had no output any more)" if s.was_shut_down
           else _closed_by or "without an output: call blog.basic_config() to give the "
                              "session one")
    report(f"blog: {left + dropped} event(s) were logged but never written ({left} "
           f"queued, {dropped} dropped when the queue was full), logged {why}")


# --- multiprocessing children --------------------------------------------------------

def for_children(path: str, rotating: bool, options: dict) -> None:
    """Record the configuration for children started by spawn or forkserver."""
    os.environ[CONFIG_ENV] = _dump_config({"pid": os.getpid(), "output": path,
                                           "rotating": rotating, "options": options})


def _plain(v: Any) -> Any:
    """``v`` as plain values (a Severity as its number, a time as ISO text...)."""
    if v is None or isinstance(v, bool):
        return v
    # (a subclass's own value: a str Enum's "drop", where str() gives "Overflow.DROP")
    if isinstance(v, int):
        return int.__int__(v)
    if isinstance(v, float):
        return float.__float__(v)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, _dt.time):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    raise TypeError(f"a {type(v).__name__} cannot be passed to a child's configuration")


def _dump_config(cfg: dict) -> str:
    """``cfg`` as ``CONFIG_ENV``'s text: its plain values, marshalled, in hex (``json`` with
    the ``re`` it imports cost a first ``basic_config`` a fifth of starting Python)."""
    return marshal.dumps(_plain(cfg)).hex()


def _load_config(raw: str) -> dict:
    """``CONFIG_ENV``'s text back (ValueError if it is not what ``_dump_config`` writes:
    text that is not hex, a marshal that fails, whatever its error, as a crafted length's
    MemoryError, or a value not of a configuration's shape)."""
    if raw.lstrip().startswith("{"):
        raise ValueError(f"{CONFIG_ENV} is JSON, from an older blog: not read")
    try:
        cfg = marshal.loads(bytes.fromhex(raw))
    except Exception as exc:
        raise ValueError(f"{CONFIG_ENV} is not a configuration: {type(exc).__name__}") \
            from None
    if not (type(cfg) is dict and type(cfg.get("pid")) is int
            and type(cfg.get("output")) is str and type(cfg.get("rotating")) is bool
            and type(cfg.get("options")) is dict
            and all(type(k) is str for k in cfg["options"])):
        raise ValueError(f"{CONFIG_ENV} is not a configuration")
    return cfg


#: Whether a bad ``CONFIG_ENV`` was told already (once a process).
_told_bad = False


def parent_config() -> tuple[str, dict] | None:
    """In a multiprocessing child started by spawn or forkserver: the output and options
    of the parent's configuration (``CONFIG_ENV``), the output made the child's own. A
    value that is not one is told once on stderr, and the child goes on unconfigured."""
    global _told_bad
    raw = os.environ.get(CONFIG_ENV)
    if not raw or not _mp_child():
        return None
    try:
        cfg = _load_config(raw)
    except ValueError as exc:
        if not _told_bad:
            _told_bad = True
            report(f"blog: child {os.getpid()} is not configured: {exc}")
        return None
    if cfg["pid"] == os.getpid():
        return None
    path = cfg["output"] if cfg["rotating"] else pid_path(cfg["output"], os.getpid())
    return path, dict(cfg["options"])


def _mp_child() -> bool:
    """True in a multiprocessing child started by spawn or forkserver (not in any program
    that merely imports multiprocessing)."""
    mp = sys.modules.get("multiprocessing.process")
    if mp is None or not ("multiprocessing.spawn" in sys.modules
                          or "multiprocessing.forkserver" in sys.modules):
        return False
    # While a child unpickles its target (and imports its modules) multiprocessing marks
    # the process as inheriting; once it runs, it has a parent process.
    return bool(getattr(mp.current_process(), "_inheriting", False)) \
        or mp.parent_process() is not None


def hook_multiprocessing(s: Session) -> None:
    """A multiprocessing child ends with os._exit (no atexit): close its output at the end of
    its bootstrap (``process.hook_multiprocessing``), or failing that in its exit finalizers.

    Called in the child, before multiprocessing's bootstrap clears the finalizers it
    inherited and runs its after-fork hooks (of which this makes one).
    """
    process.after_mp_fork(s, finalize_in_mp_child)


def finalize_in_mp_child(s: Session) -> None:
    """Close the output in multiprocessing's last exit finalizer (the lowest priority: after
    the application's, and the join of its children), unless the end of the child's
    bootstrap will, later still."""
    # loaded for process.last_mp_finalizer (a child has it: its bootstrap runs on it)
    import multiprocessing.util  # noqa: F401
    process.last_mp_finalizer(s, _at_mp_finalizers, s)


def _at_mp_finalizers(s: Session) -> None:
    """multiprocessing's last exit finalizer in a child: close the output, unless the end of
    its bootstrap will."""
    if not process.child_ends_later():
        close_at_child_end(s)


def close_at_child_end(s: Session) -> None:
    """A multiprocessing child's run is over (os._exit follows): close the output, and tell
    what is left unwritten."""
    close_for_good(s, "after the multiprocessing child's run had ended (its output was "
                      "closed then: multiprocessing ends a child with os._exit)")


# --- forked children -----------------------------------------------------------------

def forked() -> None:
    """In a forked child: its own queue, none of it told of yet."""
    global _closed_by, _told_unwritten
    _closed_by, _told_unwritten = None, 0


def own_output(s: Session, crash: CrashOption) -> None:
    """In a forked child: go on logging into a file (set) of its own, with the parent's
    options (``crash``: its crash buffer option); the application's own stream is left
    for the child to replace."""
    old = s.forked_drainer
    s.forked_drainer = None
    if not isinstance(old, Consumer):
        return
    st = old.stream
    try:
        if is_rotating(st):
            stream: Any = st.for_child()
        elif isinstance(st, FileOutputStream):
            stream = FileOutputStream(pid_path(st.path, os.getpid()), fsync=st.fsync)
        else:
            return   # the application's own stream: the child gives itself an output
    except Exception as exc:
        report(f"blog: forked child {os.getpid()} cannot open its log: "
               f"{type(exc).__name__}: {exc}")
        return
    if crash is not False and is_file(stream):
        from blogstore.crashlayout import buffer_directory

        from .files.crashbuf import CrashBuffer
        try:
            directory = buffer_directory(st.requested if isinstance(st, FileOutputStream)
                                         else st.path, crash)
            s.use_crash_buffer(CrashBuffer(directory, stream.path, s.descriptor,
                                           getattr(stream, "rotate_bytes", None)))
        except OSError as exc:
            report(f"blog: forked child {os.getpid()} has no crash buffer: {exc}")
    Consumer(s, stream, interval=old.interval, flush_bytes=old.flush_bytes,
             fsync_interval=old.fsync_interval).start()
    hook_multiprocessing(s)
    if CONFIG_ENV in os.environ:
        try:
            cfg = _load_config(os.environ[CONFIG_ENV])
            cfg["pid"] = os.getpid()
            os.environ[CONFIG_ENV] = _dump_config(cfg)
        except (ValueError, TypeError):
            pass
