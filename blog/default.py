"""The default session and the module-level functions that use it.

What only an option needs is imported when a configuration asks for it, so that
``basic_config(path)`` costs little more than starting Python: the crash buffer and
its recovery (``crash_buffer``), rotated file sets (``blog.files.rotating``: rotation,
retention, compression), ``concurrent.futures`` (``flush_async``).
"""

from __future__ import annotations

import os
import sys
import threading

from blogformat.typinglite import TYPE_CHECKING
from blogformat.severity import Severity
from blogstore import posix
from blogstore.fileset import pid_path

from . import lifecycle, process
from .config import Config
from .pipeline.backpressure import BLOCK
from .pipeline.consumer import Consumer
from .lifecycle import CONFIG_ENV, consumer_of, is_file, is_rotating, stop_consumer
from .pipeline.logger import Logger
from .report import report
from .pipeline.session import Session
from .pipeline.streams import FileOutputStream, OutputStream

if TYPE_CHECKING:
    from typing import Any, Callable

    from concurrent.futures import Future

    from .files.compaction import Compaction
    from .files.schedule import Interval, TimesOfDay
    from .lifecycle import CrashOption
    from .pipeline.liveevents import LiveEvent

_session: Session | None = None      # the only global state: the default session
_lock = threading.Lock()
_config_lock = threading.RLock()     # one move of the default session at a time (flush waits)


def default_session() -> Session:
    """The process's default session (made on first use, without output until ``basic_config``;
    until then it queues its events and shows warnings and above on stderr as text)."""
    global _session
    if _session is None:
        with _lock:
            if _session is None:
                _session = Session()
                _session.registry.use_last_resort(True)   # until basic_config gives an output
                process.at_exit(lifecycle.at_exit, _session)
                _configure_from_env(_session)
    return _session


def basic_config(output: str | os.PathLike[str] | OutputStream | None = None, *,
                 min_severity: Severity | int | str | None = None,
                 flush_interval: float = 0.02, flush_bytes: int | None = None,
                 channel_capacity: int = 4 << 20, overflow: str = BLOCK, mode: str = "ab",
                 fsync: bool | str | float = False, rotate_bytes: int | None = None,
                 rotate_every: Interval | None = None, rotate_at: TimesOfDay | None = None,
                 tz: str | None = None, keep_files: int | None = None,
                 keep_days: float | None = None, keep_bytes: int | None = None,
                 compress: bool = False, crash_buffer: bool = False,
                 crash_dir: str | os.PathLike | None = None,
                 keep_source_lines: bool = False, backtrace: int | None = None,
                 backtrace_trigger: Severity | int | str = Severity.ERROR,
                 strict: bool | None = None,
                 on_close: Callable[[str], object] | None = None,
                 compact: Compaction | str | int | bool | None = None,
                 otel: bool | None = None) -> Session:
    """Send the default session to ``output`` (a path, or any object with ``write(bytes)``).

    Left out, ``output`` is the environment variable ``BLOG_FILE`` (else ``app.blog``) and
    ``min_severity`` is ``BLOG_LEVEL`` (a name or number; else trace): ``blog.envconfig``.
    A path names a regular file (made if missing): a link, a FIFO, a device or a directory
    there raises ``blog.errors.NotAFile`` (give a device or a pipe as an open stream).

    Starts the background consumer: it writes every ``flush_interval`` seconds,
    or as soon as a thread has ``flush_bytes`` pending (default: 1 MiB, or the
    channel capacity if smaller). Calling it again moves the
    session to the new output, after writing what is pending to the old one.

    Any of ``rotate_bytes``, ``rotate_every``, ``rotate_at`` (with ``tz``),
    ``keep_files``, ``keep_days``, ``keep_bytes`` and ``compress`` makes
    ``output`` the base name of a rotated file set (``blog.RotatingFile``):
    ``logs/app.blog`` writes ``logs/app.<time>.pid<N>.blog`` files. A forked
    child, and a ``multiprocessing`` child started by spawn or forkserver,
    goes on logging into a file set of its own (its pid) with the same options.

    ``fsync`` is the durability policy (``blog.files.durability``): ``False`` (the OS
    writes back when it likes), ``"rotation"`` (each file when it is closed),
    ``True`` (after every consume) or a number of seconds (group commit: at
    most that often while there is something new, and at close).

    ``crash_buffer=True`` (a file output) mirrors every thread's channel into
    file-backed shared memory (``blog.files.crashbuf``: in ``.<name>.buffers`` beside
    the file, or under ``crash_dir``), so that a process killed at any moment
    (kill -9, the OOM killer) loses no event a log call returned from: the next
    ``basic_config`` of the same file (or ``bread --recover FILE``) appends what a
    dead process left, marked as recovered.

    A logged exception keeps its traceback as frames (file, line, function), which
    cost almost nothing at the call; ``bread`` shows each frame's source line from
    the file where it is available. ``keep_source_lines=True`` stores the lines too
    (read at the call: for logs read where the sources are not).

    ``backtrace=N`` keeps each thread's last N events below ``min_severity`` in memory
    and writes them (marked) before its next event at ``backtrace_trigger`` or above
    (``Session.use_backtrace``): debug detail around every error; ``0`` turns it off,
    and leaving it out keeps what was set.

    ``on_close`` (a rotated set) is called with the path of each closed file of the set
    once it is final (compressed, with ``compress``), on the housekeeping thread, at least
    once per file; retention keeps a file until its call returned (``blog.files.shipping``):
    to ship logs to object storage. A spawned child's files are its parent's to ship.

    ``compact`` (a rotated set: ``"1d"``, or a ``blog.Compaction``) runs ``bread compact``
    on the set's directory as a child process, at most hourly, for closed files older than
    the age (``--columnar`` by default; with ``on_close``, only files already shipped):
    docs/compaction.md. The process that configured it runs it, not its children
    (whose retention waits for it as its own does).

    ``strict=True`` makes a literal format that does not fit its call raise
    ``CallSiteError`` (``Session.strict``); by default such an event is logged as text,
    marked, and stderr says so once per call site. Leaving it out keeps what was set.

    ``otel=False`` turns off correlation with OpenTelemetry for the process (every event
    logged inside a span carries its ``trace_id`` and ``span_id``, and ``@blog.traced``
    calls are spans, where opentelemetry-api is installed: docs/opentelemetry.md);
    ``True`` turns it on again; leaving it out keeps what was set (on, unless
    ``BLOG_OTEL=0``).
    """
    s = default_session()     # (a spawned child's own configuration first)
    if otel is not None:
        from . import correlation
        correlation.use(otel)
    cfg = Config(output, min_severity=min_severity, flush_interval=flush_interval,
                 flush_bytes=flush_bytes, channel_capacity=channel_capacity,
                 overflow=overflow, mode=mode, fsync=fsync, rotate_bytes=rotate_bytes,
                 rotate_every=rotate_every, rotate_at=rotate_at, tz=tz,
                 keep_files=keep_files, keep_days=keep_days, keep_bytes=keep_bytes,
                 compress=compress, crash_buffer=crash_buffer, crash_dir=crash_dir,
                 keep_source_lines=keep_source_lines, backtrace=backtrace,
                 backtrace_trigger=backtrace_trigger, strict=strict, on_close=on_close,
                 compact=compact)
    if cfg.rotating or cfg.crash_buffer:
        posix.require()   # file locks (not on Windows): NeedsPosix before anything changes
    with _config_lock, s.handover():   # a full channel meanwhile waits for the new consumer
        _move(s, cfg)
    s.keep_source_lines = cfg.keep_source_lines
    if cfg.strict is not None:
        s.strict = cfg.strict
    if cfg.backtrace is not None:     # None: as it was (Session.use_backtrace's, say)
        s.use_backtrace(cfg.backtrace, trigger=cfg.backtrace_trigger)
    process.install_exit_hooks(flush, lambda *a, **k: get_logger("blog").log(*a, **k),
                               flush_async)
    process.hook_multiprocessing(_at_child_end)
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None and mp.parent_process() is not None:
        # A multiprocessing child configuring its own output: it ends with os._exit
        # (no atexit), so it is closed at the end of its bootstrap, or failing that
        # by multiprocessing's exit finalizers.
        lifecycle.finalize_in_mp_child(s)
    if cfg.is_path:
        lifecycle.for_children(os.path.abspath(os.fspath(cfg.output)),  # type: ignore[arg-type]
                               cfg.rotating, cfg.for_children())
    else:
        os.environ.pop(CONFIG_ENV, None)
    return s


def _move(s: Session, cfg: Config) -> None:
    """Stop the session's consumer (what is pending goes to the old output) and start one
    writing to ``cfg.output``, with its crash buffer if it has one."""
    lifecycle.end_late_writes(s)
    old = consumer_of(s)
    output: Any = cfg.output
    fsync, fsync_interval = cfg.fsync_policy
    if cfg.rotating:   # a new file of the set: never the old output's file
        from blogstore.crashlayout import buffer_directory

        from .files.rotating import RotatingFile
        crash = cfg.crash
        stream: Any = RotatingFile(output, fsync=fsync, **cfg.rotation, crash_dirs=(
            [] if crash is False else [buffer_directory(os.fspath(output), crash)]),
                                   on_close=cfg.on_close, compact=cfg.compaction)
        stop_consumer(s, keep_buffer=True)
    else:
        same = (old is not None and isinstance(old.stream, FileOutputStream) and cfg.is_path
                and any(_same_file(a, b) for a, b in (
                    (old.stream.path, output), (old.stream.requested, output),
                    (old.stream.path, pid_path(os.fspath(output), os.getpid())))))
        if same:
            # the file gets what is pending before it is reopened
            stop_consumer(s, keep_buffer=True)
        try:
            stream = FileOutputStream(output, mode=cfg.mode, fsync=fsync) if cfg.is_path \
                else output
        except BaseException:
            if same and old is not None and isinstance(old.stream, FileOutputStream):
                # give the session its output back
                Consumer(s, FileOutputStream(old.stream.path, fsync=old.stream.fsync),
                         interval=old.interval, flush_bytes=old.flush_bytes,
                         fsync_interval=old.fsync_interval).start()
            raise
        if not same:
            stop_consumer(s, keep_buffer=True)   # the old output gets what is pending
    lifecycle.opened(s)
    s.configure(channel_capacity=cfg.channel_capacity, overflow=cfg.overflow)
    _use_crash_buffer(s, stream, output, cfg.crash)
    consumer = Consumer(s, stream, interval=cfg.flush_interval, flush_bytes=cfg.flush_size,
                        fsync_interval=fsync_interval)
    s.set_min_severity(cfg.min_severity)
    consumer.start()
    s.registry.use_last_resort(False)   # its output shows the events from now on


#: The default session's crash buffer option: False (none), or its crash_dir (None: beside).
_crash_option: CrashOption = False


def _use_crash_buffer(s: Session, stream: Any, output: Any, crash: CrashOption) -> None:
    """Recover what dead writers of this file left, then mirror the channels (``crash`` not
    False), or stop mirroring."""
    global _crash_option
    _crash_option = crash
    if crash is False or not is_file(stream):
        s.use_crash_buffer(None)
        return
    from blogstore.crashlayout import buffer_directory, pending_pids
    from blogstore.recovery import recover

    from .files.crashbuf import CrashBuffer
    directory = buffer_directory(os.fspath(output), crash)
    try:
        waited = is_rotating(stream) and bool(pending_pids(directory))
        recovered = recover(directory, stream, os.fspath(output), warn=report)
        for r in recovered:
            report(f"blog: recovered {r.events} event(s) that process {r.pid} logged but "
                   f"did not write before it died, into {r.path}")
        if (recovered or waited) and is_rotating(stream):
            # Their files may be compressed and shipped now, a dead writer's whose buffer
            # held nothing to append too (a SIGTERM flushes, and leaves it empty).
            stream.housekeeper.sweep()
        s.use_crash_buffer(CrashBuffer(directory, stream.path, s.descriptor,
                                       getattr(stream, "rotate_bytes", None)))
    except OSError as exc:   # the output is moved already: it goes on, unprotected
        s.use_crash_buffer(None)
        report(f"blog: the crash buffer in {directory} cannot be used ({exc}); logging goes "
               "on to the file without it")


def _same_file(a: str, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(os.fspath(b))


def add_output(output: OutputStream | Callable[[LiveEvent], object], *,
               min_severity: Severity | int | str | None = None) -> None:
    """Write the default session's events to ``output`` too, beside its file
    (``Session.add_output``): ``blog.add_output(blog.TextStream(sys.stderr,
    min_severity="warning"))``; or call a function with each event at or above
    ``min_severity`` (a ``blog.LiveEvent``): ``blog.add_output(alert,
    min_severity="error")``. Events reach it when the session writes (after
    ``basic_config``, every ``flush_interval``, in the consumer's thread)."""
    default_session().add_output(output, min_severity=min_severity)


def remove_output(output: object) -> bool:
    """Stop writing the default session's events to an output ``add_output`` added."""
    return default_session().remove_output(output)


def get_logger(category: str = "main") -> Logger:
    """The default session's logger for ``category``."""
    return default_session().get_logger(category)


def set_min_severity(severity: Severity | int | str | None, category: str | None = None) -> None:
    """The default session's minimum severity, or with ``category`` that category's and its
    children's without one of their own (``Session.set_min_severity``)."""
    default_session().set_min_severity(severity, category)


def flush(durable: bool = False) -> None:
    """Write everything logged so far to the output; when it returns, it is there (handed
    to the OS: it survives the process). With ``durable``, it is also on stable storage
    (it survives the machine), or OSError says it is not (the output or the device
    failed); durable flushes at once share one fsync."""
    s = default_session()
    with _config_lock:       # not halfway through a basic_config: its new output gets it
        c = consumer_of(s)
        if c is not None:
            c.flush()
    if not durable:
        return
    if c is None:
        _no_output(s)
        return
    c.check_output()         # outside the lock: concurrent callers share the fsync
    c.sync()


def _no_output(s: Session) -> None:
    """A durable flush with no output: fine if nothing waits to be written."""
    if s.pending():
        raise OSError(f"blog: no output: {s.pending()} event(s) are queued, not written "
                      "(call blog.basic_config)")


def flush_async(durable: bool = False) -> "Future[None]":
    """A ``concurrent.futures.Future`` that completes once everything logged before this
    call is written (with ``durable``, on stable storage): the caller never waits
    (``await asyncio.wrap_future(blog.flush_async(durable=True))`` in a coroutine). It
    fails with OSError if the output or the device failed. Many at once share one
    consume and one fsync."""
    from concurrent.futures import Future   # (imported on first use: it imports logging)
    s = default_session()
    c = consumer_of(s)
    if c is None:             # no output: done only if nothing waits to be written
        fut: Future[None] = Future()
        try:
            _no_output(s)
            fut.set_result(None)
        except OSError as exc:
            fut.set_exception(exc)
        return fut
    return c.flush_async(durable)


def shutdown() -> None:
    """Flush and stop the default session's consumer and close its file. Also runs at exit."""
    if _session is not None:
        with _config_lock:
            if consumer_of(_session) is not None:
                _session.was_shut_down = True
            stop_consumer(_session)


def set_writer_name(name: str) -> None:
    """Rename the calling thread's writer in the default session (bread's ``%n``)."""
    default_session().writer().name = name


def _at_child_end() -> None:
    """A multiprocessing child's run is over (os._exit follows): close the output, and tell
    what is left unwritten."""
    if _session is not None:
        lifecycle.close_at_child_end(_session)


def _configure_from_env(s: Session) -> None:
    """In a multiprocessing child started by spawn or forkserver: the parent's configuration."""
    config = lifecycle.parent_config()
    if config is None:
        return
    path, options = config
    try:
        if isinstance(options.get("compact"), dict):   # for_children's: Compaction's fields
            from .files.compaction import Compaction
            options["compact"] = Compaction(**options["compact"])
        basic_config(path, **options)
        lifecycle.hook_multiprocessing(s)
        # Closed when the child ends (with os._exit): in case its bootstrap is past the
        # point where it runs the after-fork hooks.
        lifecycle.finalize_in_mp_child(s)
    except Exception as exc:   # a child must start even if its log cannot be opened
        report(f"blog: the parent's configuration failed in child {os.getpid()}: "
               f"{type(exc).__name__}: {exc}")


def _after_fork_in_child() -> None:
    """The last after-fork step (blog.process): a forked child goes on logging into its own
    file (set), with the same options and its pid."""
    global _config_lock
    _config_lock = threading.RLock()   # may have been held by a thread that is gone
    lifecycle.forked()
    process.hook_multiprocessing(_at_child_end)   # before a multiprocessing child's bootstrap
    if _session is not None:
        lifecycle.own_output(_session, _crash_option)


process.after_fork_last(_after_fork_in_child)

# A spawned or forkserver child that imports blog while it loads its target is closed at
# the end of its bootstrap even if it configures its output only in its run.
process.hook_multiprocessing(_at_child_end)
