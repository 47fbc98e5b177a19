"""The process's live objects, and every hook by which blog follows the process: fork, exit,
signals, unhandled exceptions, the end of a multiprocessing child.

Live objects: each session, file stream, rotated file set and crash buffer registers
itself here when it is made (``track``; held weakly). Nothing else in blog keeps a set
of them or registers a hook with the interpreter.

After a fork, the child runs these steps, in this order, whatever order the modules
were imported in (one ``os.register_at_fork``, made when this module is imported):

1. locks a thread of the parent may have held: the fork guard is released (below); the
   objects whose threads a fork stops are forgotten (they are the parent's); the
   lock of the registry of described types (``blogformat.valuetypes``) and the manifest's
   in-process lock (``blogstore.manifest``) are made anew, and the random span ids
   (``blog.correlation``) seeded anew (their ``reset_after_fork``), each if its module is
   loaded;
2. file streams close the files they inherited (their flock is the parent's too);
3. rotated file sets let go of theirs, with housekeeping of their own;
4. crash buffers let go of theirs (never unlocking: the lock is the parent's);
5. sessions forget the parent's threads, queued events and output;
6. the default session opens the child's own output (``blog.default``): a new file
   stream, file set or crash buffer made now is the child's, and no step above lets
   go of it.

Before a fork, in the parent, blog's own threads (each consumer's, each rotated set's
housekeeping, a compaction's watcher: every object that ``track_threads`` registered)
are stopped and joined, so that none runs at the fork: Python 3.12+ warns of a fork in
a process with other threads (counting them after the after-fork hooks), and a thread
of blog's then would have been the cause. Each stops at its next step, never in the
middle of one (a consume, a file's compression, an ``on_close`` hook): the fork waits
for that step, ``FORK_WAIT`` seconds at most (a thread still busy then is left
running, as it was before). A consumer writes what was logged before the fork, before
it. In the parent, the first use of blog after the fork starts them again
(``restart_threads``): the next log call of any thread (the fork arms each channel so
that its next push takes the slow path), a flush, a file set's housekeeping or close.
Nothing they had to do is lost or reordered: events logged meanwhile wait in their
channels, a housekeeper's tasks in its queue. The child starts threads of its own, as
it needs them (steps 3 and 6).
Then the fork guard is taken (``fork_guard``: held for an instant around a
short-lived file lock, a probe or the manifest's, so that no child inherits the lock
for its life), and released after it in both processes.

At exit: the default session closes its output (``at_exit``: Python's ``atexit``);
in a multiprocessing child, at the end of its bootstrap (``hook_multiprocessing``) or
in multiprocessing's last exit finalizer (``last_mp_finalizer``).
The ways a process ends that skip ``atexit`` flush the default session too
(``install_exit_hooks``, called by ``basic_config``):

- ``SIGTERM`` (what ``kill``, systemd and container runtimes send): the
  default action ends the process at once, without ``atexit``. blog's handler
  flushes, then does what was there before: calls the application's handler,
  or ends the process by the signal as the default action would (the exit
  status still says "killed by SIGTERM").
- ``SIGINT`` whose handler is not Python's own (``SIG_DFL``: Ctrl-C ends the
  process at once; or a handler the application installed): the same. An
  ignored signal (``SIG_IGN``) is left alone: the process goes on, and programs
  it execs inherit the ignoring, as before. Python's
  own handler raises ``KeyboardInterrupt``, which reaches ``atexit`` or the
  hook below, so it is left in place (``asyncio.run`` and others look for it).
- An unhandled exception, in the main thread (``sys.excepthook``) or in any
  other (``threading.excepthook``): it is logged first, at CRITICAL with its
  traceback in the ``exception`` field, flushed, and then handed to the hook that
  was there before (which prints it, as usual).
- An exception reported to an asyncio event loop (its default exception handler:
  a task's exception never retrieved, a callback that raised, the application's
  ``call_exception_handler``): asyncio's handler reports it as before, at ERROR;
  if the ``logging`` bridge logged that record (it tells ``exception_logged``), it
  is the one event of it, else blog logs it at ERROR with its traceback; then a
  flush is asked for.
- A ``multiprocessing`` child: multiprocessing ends it with ``os._exit``
  once its bootstrap returns (fork, forkserver), after its exit finalizers,
  the join of its threads and its last record ("process exiting with exitcode
  0"); Python 3.13 joins the threads and logs that record in the bootstrap,
  then runs the child's atexit functions, its exit finalizers last (from
  atexit), after it returns. ``hook_multiprocessing`` wraps the bootstrap so
  that blog closes its output after all of that.

``install_exit_hooks`` installs each hook once, the signal handlers only from the main
thread (Python allows no other), and the asyncio hook if asyncio is imported by then
(it is not imported for it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from types import TracebackType

from blogformat.typinglite import TYPE_CHECKING, Protocol

from .report import report

if TYPE_CHECKING:
    import signal
    from typing import Any, Callable
else:   # its functions without signal.py's enums (which cost a tenth of starting Python)
    import _signal as signal

# --- live objects and the after-fork steps ----------------------------------------


class Forked(Protocol):
    """A live object: ``_forked()`` lets go, in a forked child, of what is the parent's."""

    def _forked(self) -> None: ...


#: The kinds of live object, in the order a forked child runs their steps (2 to 5 above).
STREAM, ROTATING, CRASH_BUFFER, SESSION = ("file stream", "rotated file set", "crash buffer",
                                           "session")
_live: dict[str, weakref.WeakSet[Forked]] = {
    kind: weakref.WeakSet() for kind in (STREAM, ROTATING, CRASH_BUFFER, SESSION)}

#: The modules whose per-process state a child resets (step 1), if they are loaded: each
#: has ``reset_after_fork()`` (blogformat imports nothing of blog: it is called from here).
RESET_AFTER_FORK = ("blogformat.valuetypes", "blogstore.manifest", "blog.correlation")

#: No fork while this is held (housekeeping holds it around a short-lived file lock).
fork_guard = threading.Lock()

_default_step: Callable[[], None] | None = None


def track(kind: str, obj: Forked) -> None:
    """Register a live object of ``kind`` (``STREAM``...): a forked child calls its
    ``_forked()`` in its kind's step."""
    _live[kind].add(obj)


class Threaded(Protocol):
    """A live object with threads of its own, none of which may run at a fork."""

    def _stop_for_fork(self, deadline: float) -> None:
        """Stop its threads at their next step and join them (by ``time.monotonic()``
        ``deadline`` at most), keeping what they had to do."""

    def _after_fork_in_parent(self) -> None:
        """In the parent, once the fork is done: no thread may start yet (Python counts
        them after this hook); have the next use call ``restart_threads``."""

    def _restart_after_fork(self) -> None:
        """Start again the threads it stopped, on what they had to do."""


#: How long a fork waits, at most, for blog's threads to finish the step they are in.
FORK_WAIT = 5.0

_threaded: weakref.WeakSet[Threaded] = weakref.WeakSet()
#: The objects whose threads a fork stopped; how many forks of threads of this process are
#: in progress; whether the fork is over and the threads wait for ``restart_threads``.
_stopped: list[Threaded] = []
_forking = 0
_restart_due = False
_forking_lock = threading.Lock()
_hooked = False


def track_threads(obj: Threaded) -> None:
    """Register ``obj``, whose threads a fork stops (``restart_threads`` starts them again)."""
    global _hooked
    _threaded.add(obj)
    if not _hooked and hasattr(os, "register_at_fork"):
        # Registered when the first thread is about to start, not at import: before-fork
        # hooks run last registered first, so blog's threads are stopped before the hooks
        # of the modules imported earlier (logging's takes its lock, which a thread of
        # ours may need in order to end).
        _hooked = True
        os.register_at_fork(before=_stop_threads, after_in_parent=_fork_done)


def join_for_fork(thread: threading.Thread, deadline: float) -> None:
    """Join ``thread`` by ``time.monotonic()`` ``deadline`` at most, and then wait until the
    OS no longer counts it (Linux; Python 3.12's join returns once the thread's Python
    state is gone, a moment before the OS thread is, and the fork's warning counts it)."""
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive() or thread.native_id is None:
        return
    task = f"/proc/self/task/{thread.native_id}"
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.0001)


def restart_threads() -> None:
    """In the parent after a fork: start again the threads it stopped. Called by the first
    use of blog after it (a log call, a flush, a file set's housekeeping or close), never
    by an after-fork hook: Python 3.12+ counts the threads after those. A no-op otherwise,
    and while a fork is in progress (its end asks for it again)."""
    global _restart_due
    if not _restart_due or not _forking_lock.acquire(blocking=False):
        return           # (held: a fork begins or ends, or another thread restarts them)
    try:
        if _forking or not _restart_due:
            return
        _restart_due = False
        stopped = _stopped[:]
        _stopped.clear()
    finally:
        _forking_lock.release()
    for obj in stopped:
        try:
            obj._restart_after_fork()
        except Exception as exc:   # e.g. "can't start new thread": the others still start
            report(f"blog: restarting a thread after a fork failed: "
                   f"{type(exc).__name__}: {exc}")


def _stop_threads() -> None:
    global _forking
    with _forking_lock:
        _forking += 1
        if _forking > 1:
            return     # another thread's fork stopped them: they stay stopped
    deadline = time.monotonic() + FORK_WAIT
    for obj in list(_threaded):
        try:
            obj._stop_for_fork(deadline)
        except Exception as exc:   # the fork goes on
            report(f"blog: stopping a thread for a fork failed: "
                   f"{type(exc).__name__}: {exc}")
        if obj not in _stopped:    # (stopped by an earlier fork, and not restarted since)
            _stopped.append(obj)


def _fork_done() -> None:
    global _forking, _restart_due
    with _forking_lock:
        _forking -= 1
        if _forking > 0:
            return
        _restart_due = bool(_stopped)
        stopped = _stopped[:]
    for obj in stopped:
        try:
            obj._after_fork_in_parent()
        except Exception as exc:
            report(f"blog: after a fork: {type(exc).__name__}: {exc}")


def _forget_threads() -> None:
    """In the child, first: the parent's threads and their objects are not its own (each
    object's ``_forked``, or the default session's step, makes the child's)."""
    global _forking, _forking_lock, _restart_due
    _forking_lock = threading.Lock()
    _forking, _restart_due = 0, False
    _stopped.clear()
    _threaded.clear()


def after_fork_last(step: Callable[[], None]) -> None:
    """Make ``step`` the last after-fork step in a child (6 above: the default session's)."""
    global _default_step
    _default_step = step


def _after_fork_in_child() -> None:
    fork_guard.release()     # taken before the fork by the thread that goes on here
    _forget_threads()
    for name in RESET_AFTER_FORK:
        module = sys.modules.get(name)
        if module is not None:
            module.reset_after_fork()
    for objects in _live.values():
        for obj in list(objects):
            obj._forked()
    if _default_step is not None:
        _default_step()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=fork_guard.acquire, after_in_parent=fork_guard.release,
                        after_in_child=_after_fork_in_child)


# --- exit, signals, unhandled exceptions ------------------------------------------

_flush: Callable[[], None] | None = None
_flush_soon: Callable[[], Any] | None = None
_log: Callable[..., None] | None = None    # log(severity name, format, *args, **fields)
_previous: dict[int, Any] = {}     # signal -> the handler that was there before ours
_installed = {"sys": False, "threading": False, "asyncio": False}
#: ``.exc``: the exception asyncio's default handler is reporting on this thread; None once
#: the ``logging`` bridge logged it (``exception_logged``).
_asyncio_reporting = threading.local()
_child_end: Callable[[], None] | None = None
_bootstrapped = 0    # the pid of the process whose wrapped multiprocessing bootstrap runs
_wrapper: Callable[..., Any] | None = None   # that wrapper
_ended = 0           # the pid of the process whose child end (``_end_child_once``) ran
#: The lowest priority of a multiprocessing exit finalizer: run after all others.
_LAST = -sys.maxsize


def at_exit(end: Callable[..., None], *args: Any) -> None:
    """Call ``end(*args)`` when Python exits (``atexit``)."""
    atexit.register(end, *args)


def last_mp_finalizer(owner: Any, end: Callable[..., None], *args: Any) -> None:
    """Call ``end(*args)`` in multiprocessing's last exit finalizer (the lowest priority:
    after the application's, and the join of its children), if multiprocessing is loaded;
    ``owner`` is None, or an object the finalizer goes with."""
    mpu = sys.modules.get("multiprocessing.util")
    if mpu is not None:
        mpu.Finalize(owner, end, args=args, exitpriority=_LAST)


def after_mp_fork(owner: Any, step: Callable[[Any], None]) -> None:
    """Call ``step(owner)`` in a multiprocessing child, when its bootstrap runs the
    after-fork hooks it registered, if multiprocessing is loaded."""
    mpu = sys.modules.get("multiprocessing.util")
    if mpu is not None:
        mpu.register_after_fork(owner, step)


def install_exit_hooks(flush: Callable[[], None], log: Callable[..., None],
                       flush_soon: Callable[[], Any] | None = None) -> None:
    """Flush with ``flush`` on SIGTERM and unhandled exceptions, logging them with
    ``log(severity, fmt, *args, exception=exc)`` first; ``flush_soon`` asks for a flush
    without waiting (from asyncio's handler, which may run in a finalizer)."""
    global _flush, _log, _flush_soon
    _flush, _log, _flush_soon = flush, log, flush_soon
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
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            if signum in _previous:
                continue
            try:
                current = signal.getsignal(signum)
                if current == signal.SIG_IGN:
                    continue   # ignored: the process goes on (and so do exec'd children)
                if signum == signal.SIGINT and current is signal.default_int_handler:
                    continue   # KeyboardInterrupt: atexit or the excepthook flushes
                _previous[signum] = signal.signal(signum, _on_signal)
            except (ValueError, OSError, TypeError):   # no signals here (embedded...)
                pass
    aio = sys.modules.get("asyncio.base_events")
    if aio is not None and not _installed["asyncio"]:
        _installed["asyncio"] = True
        loop_class = aio.BaseEventLoop
        previous_aio = loop_class.default_exception_handler

        def default_exception_handler(self: Any, context: dict) -> None:
            exc = context.get("exception")
            if not isinstance(exc, BaseException):
                previous_aio(self, context)
                return
            outer = getattr(_asyncio_reporting, "exc", None)
            _asyncio_reporting.exc = exc     # exception_logged: asyncio's record reached blog
            try:
                previous_aio(self, context)  # logging.getLogger("asyncio").error(...)
            finally:
                logged = _asyncio_reporting.exc is None
                _asyncio_reporting.exc = outer
                # often in a finalizer: never blocks
                _report(None if logged else exc,
                        f"an asyncio event loop ({context.get('message', '')})", soon=True,
                        severity="error")
        loop_class.default_exception_handler = default_exception_handler


def exception_logged(exc: BaseException) -> None:
    """The ``logging`` bridge logged ``exc``: if asyncio's handler is reporting it on this
    thread (its own ERROR record), blog's hook logs it no more."""
    if getattr(_asyncio_reporting, "exc", None) is exc:
        _asyncio_reporting.exc = None


def _report(exc: BaseException | None, where: str, soon: bool = False,
            severity: str = "critical") -> None:
    """Log ``exc`` (None: nothing) and flush; with ``soon`` (a finalizer may be running:
    blog's locks may be held on this thread) only ask the consumer to flush."""
    try:
        if _log is not None and exc is not None:
            _log(severity, "unhandled {} in {}: {}", type(exc).__name__, where, str(exc),
                 exception=exc)
        flush = _flush_soon if soon else _flush
        if flush is not None:
            flush()
    except Exception:   # the application's own hook must still run
        pass


def _on_signal(signum: int, frame: Any) -> None:
    try:
        if _flush is not None:
            _flush()
    except Exception:
        pass
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:   # the default action: end the process by the signal, as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def hook_multiprocessing(end: Callable[[], None]) -> None:
    """Call ``end`` when a multiprocessing child's bootstrap returns, or (Python 3.13+) after
    the exit finalizers that follow it: the last moment before multiprocessing ends the
    child with ``os._exit`` (spawn's child exits after it too).

    Wraps ``BaseProcess._bootstrap`` once, if multiprocessing is loaded; a child reaches
    the wrapper if it was there before the child began its bootstrap (blog imported in
    the parent, or while a spawned child loads its target). Else ``child_ends_later()``
    is False, and multiprocessing's last exit finalizer is the latest blog can do.
    """
    global _child_end, _wrapper
    _child_end = end
    mp = sys.modules.get("multiprocessing.process")
    if mp is None or (_wrapper is not None and mp.BaseProcess._bootstrap is _wrapper):
        return
    original = mp.BaseProcess._bootstrap

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _bootstrapped
        _bootstrapped = os.getpid()
        mpu = sys.modules["multiprocessing.util"]    # (the bootstrap runs on it)
        # Python 3.13+ runs the exit finalizers (util._exit_function) from atexit once the
        # bootstrap has returned, os._exit after them: the end is the atexit function that
        # runs right after (atexit calls the last registered first; the application's,
        # registered in the run, come before). Earlier versions never call it in a fork
        # child, nor again in a spawned one (the end below ran).
        atexit.unregister(mpu._exit_function)
        atexit.register(_end_child_once)
        atexit.register(mpu._exit_function)
        try:
            return original(self, *args, **kwargs)
        finally:
            if mpu._exiting:      # Python 3.12-: the bootstrap ran the exit finalizers
                _end_child_once()
    _bootstrap.__wrapped__ = original             # type: ignore[attr-defined]
    _wrapper = _bootstrap
    # multiprocessing has no hook after a child's last record: its bootstrap is wrapped.
    mp.BaseProcess._bootstrap = _bootstrap


def _end_child_once() -> None:
    """Call ``hook_multiprocessing``'s ``end``, once in this process."""
    global _ended
    if _child_end is None or _ended == os.getpid():
        return
    _ended = os.getpid()
    try:
        _child_end()
    except Exception:   # the child's exit code must still reach os._exit
        pass


def end_child(code: int) -> None:
    """End a child forked off a thread of blog's (a callable output that forked, returned
    in the child): close the default session's output as at a multiprocessing child's end
    (``hook_multiprocessing``'s ``end``), then ``os._exit(code)``."""
    try:
        if _child_end is not None:
            _child_end()
    finally:
        os._exit(code)


def child_ends_later() -> bool:
    """True in a multiprocessing child whose bootstrap ``hook_multiprocessing`` wrapped:
    its end calls ``end``, after every exit finalizer."""
    return _bootstrapped == os.getpid()
