"""Consumer: a background thread that moves a Session's events to an OutputStream."""

from __future__ import annotations

import threading
import time
try:
    from _queue import Empty, SimpleQueue   # (queue's own, without queue.py and its heapq)
except ImportError:     # (a Python without the C module: queue's own, in Python)
    from queue import Empty, SimpleQueue

from .. import process
from ..files.durability import GroupSync, sync_stream
from ..errors import ConfigurationError
from ..report import report
from blogformat.typinglite import TYPE_CHECKING
from .session import Session
from .streams import OutputStream

if TYPE_CHECKING:   # imported by the first flush_async (concurrent.futures imports logging)
    from concurrent.futures import Future


def _settle(fut: "Future[None]", error: BaseException | None) -> None:
    """Complete ``fut`` (unless it was cancelled); what its callbacks raise never reaches
    the consumer's thread."""
    from concurrent.futures import InvalidStateError
    try:
        if fut.done() or not fut.set_running_or_notify_cancel():
            return                 # answered already, or cancelled
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)
    except InvalidStateError:
        pass
    except BaseException as exc:   # a done-callback that raised SystemExit, say
        report(f"blog: a flush_async callback raised {type(exc).__name__}: {exc}")


class Consumer:
    """Consumes ``session`` into ``stream`` every ``interval`` seconds, or sooner.

    It wakes early when a thread's channel holds ``flush_bytes`` bytes: the
    producer that crosses that mark signals it. With ``fsync_interval`` (seconds)
    it also syncs the stream that often while there are new writes (group
    commit, ``blog.files.durability``); ``flush_async`` and ``flush(durable=True)``
    share its syncs.

    Its thread is stopped before a fork, after writing what was logged, and started
    again in the parent by the next log call or flush (``blog.process``): the events
    logged meanwhile wait in their channels.
    """

    def __init__(self, session: Session, stream: OutputStream, *, interval: float = 0.02,
                 flush_bytes: int = 1 << 20, name: str = "blog-consumer",
                 fsync_interval: float | None = None) -> None:
        if not hasattr(stream, "write"):
            raise TypeError(f"output stream must have write(bytes); got {type(stream).__name__}")
        if not interval > 0:
            raise ConfigurationError(f"interval must be positive seconds, not {interval!r}")
        if not isinstance(flush_bytes, int) or flush_bytes < 1:
            raise ConfigurationError(f"flush_bytes must be a positive int, not {flush_bytes!r}")
        if fsync_interval is not None and not fsync_interval > 0:
            raise ConfigurationError(
                f"fsync_interval must be positive seconds, not {fsync_interval!r}")
        self.fsync_interval = fsync_interval
        self.session = session
        self.stream = stream
        self.interval = interval
        self.flush_bytes = flush_bytes
        # Woken through a SimpleQueue: its put() is safe where a lock is not, from a
        # signal handler or a finalizer that logs while the thread is inside a put.
        self._wake: SimpleQueue[None] = SimpleQueue()
        self._stop = False
        self._stopping = False
        self._stopper: threading.Thread | None = None
        self.running = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        # Stopping for a fork (blog.process): asked (_pausing), done (_paused: the thread
        # ended for it), by the forking thread (_pauser). Under _thread_lock with _stop.
        self._thread_lock = threading.Lock()
        self._pausing = False
        self._paused = False
        self._pauser: int | None = None
        self._group = GroupSync(lambda: sync_stream(self.stream))
        self._synced_bytes = 0       # stats.bytes_written at the last interval sync
        self._synced_at = time.monotonic()
        # flush_async's futures: (future, durable), answered by the next consume. Reentrant:
        # a finalizer (asyncio's hook) may ask for a flush on a thread that holds it.
        self._waiting: list[tuple[Future, bool]] = []
        self._waiting_lock = threading.RLock()
        self._closed = False         # stop() has answered its last futures
        self._lost_told = session.stats.events_lost   # losses a flush was told of

    def start(self) -> "Consumer":
        """Attach to the session and start the thread.

        Raises RuntimeError if the session already has another consumer.
        """
        self.running = True          # before attach: a full channel waits from the start
        try:
            self.session.attach(self, wake_bytes=self.flush_bytes)
        except BaseException:
            self.running = False
            raise
        process.track_threads(self)
        try:
            self.thread.start()
        except BaseException:        # no thread (can't start new thread): nobody to wait for
            self.running = False
            self.session.detach(self)
            raise
        return self

    def wake(self) -> None:
        """Ask for a consume as soon as possible."""
        self._wake.put(None)

    def can_wait(self) -> bool:
        """True if the calling thread may wait for this consumer to make room in its channel.

        Not the consumer's own thread, nor a thread inside a consume (a
        ``flush()``) or a registration (a gc callback or finalizer logging while
        the thread registers a call site): the consumer would wait for it in turn.
        Such a push drops the event and counts it.
        """
        me = threading.current_thread()
        if (me is self.thread or self.session.consuming_here()
                or self.session.registry.registering_here()):
            return False
        if self._stopping:  # stop() consumes what is pending before it detaches
            return me is not self._stopper
        if self._paused:    # restarted after the fork, by the thread that forks
            return self.running and me.ident != self._pauser
        return self.running and (self.thread.ident is None or self.thread.is_alive())

    def flush(self, durable: bool = False) -> None:
        """Consume now, in the calling thread: when it returns, everything logged before is
        written (handed to the OS); with ``durable``, also on stable storage (OSError if
        the output failed, so that it is not)."""
        process.restart_threads()      # (after a fork: the thread, and housekeeping's)
        self.session.consume(self.stream)
        if durable:
            self.check_output()
            self.sync()

    def sync(self) -> None:
        """Put what was written on stable storage; calls at once share one fsync."""
        self._group.sync()

    def flush_async(self, durable: bool = False) -> "Future[None]":
        """A Future that completes once everything logged before this call is written (with
        ``durable``, on stable storage), by the consumer's thread: the caller never
        waits. Its exception is the OSError of a failed output or sync. Futures asked for
        at once share one consume and one fsync."""
        from concurrent.futures import Future
        process.restart_threads()      # (after a fork: the thread that answers it)
        fut: Future[None] = Future()
        with self._waiting_lock:
            closed = self._closed
            if not closed:     # answered by the thread's next consume, or by stop()'s last
                self._waiting.append((fut, durable))
        if closed:
            _settle(fut, self._after_stop())
            return fut
        if not self.thread.is_alive() and self.thread.ident is not None and not (
                self._stop or self._paused):
            with self._waiting_lock:   # the thread is gone: nobody else will answer it
                if (fut, durable) in self._waiting:
                    self._waiting.remove((fut, durable))
                    _settle(fut, OSError("blog: the consumer's thread is not running"))
            return fut
        self.wake()
        return fut

    def _after_stop(self) -> OSError | None:
        pending = self.session.pending()
        if pending:
            return OSError(f"blog: {pending} event(s) were logged after the output was "
                           "stopped: they are not written")
        return None

    def check_output(self) -> None:
        """OSError if events were lost (a failed write) since the last time a flush was
        told, or the output fails now: what was logged is then not all written. Each
        loss is told to the flushes that come during it or next."""
        st = self.session.stats
        with self._waiting_lock:
            lost = st.events_lost - self._lost_told
            self._lost_told = st.events_lost
        if lost > 0 or self.session.output_failing():
            held = (f", {st.events_held} are kept in the crash buffer until it works"
                    if st.events_held else "")
            raise OSError(f"blog: the output failed, {lost} event(s) were lost{held}: "
                          f"{st.last_error}")

    def _answer(self, waiting: list[tuple[Future, bool]]) -> None:
        """After a consume: complete the futures that waited for it (one sync for all)."""
        if not waiting:
            return
        failed: OSError | None = None       # the output: every future fails
        unsynced: OSError | None = None     # the sync: the durable ones fail
        try:
            self.check_output()
        except OSError as exc:
            failed = exc
        if failed is None and any(durable for _, durable in waiting):
            try:
                self.sync()
            except OSError as exc:
                unsynced = exc
        for fut, durable in waiting:
            _settle(fut, failed or (unsynced if durable else None))

    def _take_waiting(self) -> list[tuple[Future, bool]]:
        with self._waiting_lock:
            waiting, self._waiting = self._waiting, []
        return waiting

    def _sync_if_due(self) -> None:
        """Group commit: sync at most every ``fsync_interval`` seconds while there are new
        writes."""
        if self.fsync_interval is None:
            return
        written = self.session.stats.bytes_written
        now = time.monotonic()
        if written == self._synced_bytes or now - self._synced_at < self.fsync_interval:
            return
        self._synced_bytes, self._synced_at = written, now
        if self._group.failed:
            return                     # told once; durable flushes say it from now on
        try:
            self.sync()
        except OSError as exc:
            report(f"blog: {exc}")

    def stop(self) -> None:
        """Stop the thread after a last consume, detach from the session and close the
        stream's file cleanly (its Summary entry)."""
        self._stopper = threading.current_thread()   # it must never wait for itself
        self._stopping = True
        try:
            self._stop_and_detach()
        finally:
            self._stopping = False

    def _stop_and_detach(self) -> None:
        if self.running:
            with self._thread_lock:
                self._stop = True
                thread = self.thread
            self._wake.put(None)
            if thread is not threading.current_thread():
                # Not past the deadline of the outputs beside the main one as the process
                # ends: the thread may be in one that never returns (it is left there).
                while thread.is_alive() and not self.session.outputs_overdue():
                    thread.join(0.05)
            self.running = False
        self.session.detach(self)
        waiting = self._take_waiting()
        self.session.consume(self.stream)
        self._answer(waiting)
        with self._waiting_lock:       # from now on flush_async answers at once
            self._closed = True
            late, self._waiting = self._waiting, []
        self._answer(late)             # asked during the last consume: it covered them
        self.session.finish(self.stream)

    def _sleep(self, held: bool) -> None:
        """Until a wake-up or ``interval`` has passed. While the output refuses writes (their
        events ``held`` in the crash buffer), only ``stop`` cuts the interval short: a
        blocked log call that wakes the consumer again and again never makes it retry more
        often than that."""
        end = time.monotonic() + self.interval
        while True:
            try:
                self._wake.get(timeout=max(0.0, end - time.monotonic()))
                while not self._wake.empty():   # one consume answers every wake-up
                    self._wake.get_nowait()
            except Empty:
                return
            if not held or self._stop or self._pausing:
                return

    def _stop_for_fork(self, deadline: float) -> None:
        """Before a fork (``blog.process``): end the thread after its current consume, if
        it ends by ``deadline``, and write what was logged; what is logged from now on
        waits in the channels."""
        t = self.thread
        if not self.running or t is threading.current_thread():
            return
        with self._thread_lock:
            if self._stop:
                return
            self._pauser = threading.get_ident()
            stopping = not self._paused and t.is_alive()
            if stopping:
                self._pausing = True
        if stopping:
            self._wake.put(None)
            process.join_for_fork(t, deadline)
        if self._paused and not self.session.consuming_here():
            try:     # (stopped by an earlier fork and not restarted since: logged between)
                self.session.consume(self.stream)
            except Exception as exc:
                report(f"blog: consume before a fork failed: {type(exc).__name__}: {exc}")

    def _after_fork_in_parent(self) -> None:
        """The fork is done: the next event of any thread restarts the thread."""
        if self._paused:
            self.session.wake_on_next_push()

    def _restart_after_fork(self) -> None:
        """After a fork, in the parent: a new thread goes on where the last one ended."""
        with self._thread_lock:
            self._pausing = False
            if not self._paused:
                return          # not stopped (busy past the deadline): it goes on
            self._paused = False
            if self._stop:
                return          # stop() came meanwhile: it consumed what was queued
            self.session.attach(self, wake_bytes=self.flush_bytes)   # (no longer armed)
            self.thread = threading.Thread(target=self._run, name=self.thread.name,
                                           daemon=True)
            try:
                self.thread.start()
            except BaseException:   # no thread: flushes consume in their own thread
                self.running = False
                raise
        self.wake()             # what was logged during the fork

    def _goes_on(self) -> bool:
        """False when the thread must end: stopped, or stopped for a fork (``_paused``)."""
        with self._thread_lock:
            if self._pausing and not self._stop:
                self._paused = True
            return not (self._stop or self._paused)

    def _run(self) -> None:
        s = self.session
        try:
            while self._goes_on():
                self._sleep(s.held)
                waiting = self._take_waiting()
                try:
                    s.consume(self.stream)
                    self._answer(waiting)
                    self._sync_if_due()
                except Exception as exc:  # a bug here must not kill logging silently
                    report(f"blog: consumer error: {type(exc).__name__}: {exc}")
                    for fut, _ in waiting:
                        _settle(fut, exc)
        finally:
            if not self._paused:     # stopped for a fork: started again after it
                self.running = False
