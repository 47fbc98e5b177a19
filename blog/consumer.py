"""Consumer: a background thread that moves a Session's events to an OutputStream."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

from .durability import GroupSync, sync_stream
from .report import report
from .session import Session


class Consumer:
    """Consumes ``session`` into ``stream`` every ``interval`` seconds, or sooner.

    It wakes early when a thread's channel holds ``flush_bytes`` bytes: the
    producer that crosses that mark signals it. With ``fsync_interval`` (seconds)
    it also syncs the stream that often while there are new writes (group
    commit, ``blog.durability``); ``flush_async`` and ``flush(durable=True)``
    share its syncs.
    """

    def __init__(self, session: Session, stream: Any, *, interval: float = 0.02,
                 flush_bytes: int = 1 << 20, name: str = "blog-consumer",
                 fsync_interval: float | None = None) -> None:
        if not hasattr(stream, "write"):
            raise TypeError(f"output stream must have write(bytes); got {type(stream).__name__}")
        if not interval > 0:
            raise ValueError(f"interval must be positive seconds, not {interval!r}")
        if not isinstance(flush_bytes, int) or flush_bytes < 1:
            raise ValueError(f"flush_bytes must be a positive int, not {flush_bytes!r}")
        if fsync_interval is not None and not fsync_interval > 0:
            raise ValueError(f"fsync_interval must be positive seconds, not {fsync_interval!r}")
        self.fsync_interval = fsync_interval
        self.session = session
        self.stream = stream
        self.interval = interval
        self.flush_bytes = flush_bytes
        # Woken through a SimpleQueue: its put() is safe where a lock is not, from a
        # signal handler or a finalizer that logs while the thread is inside a put.
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._stop = False
        self._stopping = False
        self._stopper: threading.Thread | None = None
        self.running = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._group = GroupSync(lambda: sync_stream(self.stream))
        self._synced_bytes = 0       # stats.bytes_written at the last interval sync
        self._synced_at = time.monotonic()
        # flush_async's futures: (future, durable), answered by the next consume.
        self._waiting: list[tuple[Future, bool]] = []
        self._waiting_lock = threading.Lock()

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
                or self.session.registering_here()):
            return False
        if self._stopping:  # stop() consumes what is pending before it detaches
            return me is not self._stopper
        return self.running and (self.thread.ident is None or self.thread.is_alive())

    def flush(self, durable: bool = False) -> None:
        """Consume now, in the calling thread: when it returns, everything logged before is
        written (handed to the OS); with ``durable``, also on stable storage (OSError if
        the output failed, so that it is not)."""
        errors = self.session.stats.write_errors
        self.session.consume(self.stream)
        if durable:
            self.check_output(errors)
            self.sync()

    def sync(self) -> None:
        """Put what was written on stable storage; calls at once share one fsync."""
        self._group.sync()

    def flush_async(self, durable: bool = False) -> "Future[None]":
        """A Future that completes once everything logged before this call is written (with
        ``durable``, on stable storage), by the consumer's thread: the caller never
        waits. Its exception is the OSError of a failed output or sync. Futures asked for
        at once share one consume and one fsync."""
        fut: Future[None] = Future()
        with self._waiting_lock:
            alive = self.running and not self._stop
            if alive:
                self._waiting.append((fut, durable))
        if not alive:          # stopped: what was logged before was written by stop()
            fut.set_result(None)
            return fut
        self.wake()
        return fut

    def check_output(self, errors_before: int) -> None:
        """OSError if a write failed since ``stats.write_errors`` was ``errors_before``, or the
        output still fails: what was logged is then not all written."""
        st = self.session.stats
        if st.write_errors != errors_before or self.session.output_failing():
            raise OSError(f"blog: the output failed, events were lost: {st.last_error}")

    def _answer(self, waiting: list[tuple[Future, bool]], errors_before: int) -> None:
        """After a consume: complete the futures that waited for it (one sync for all)."""
        if not waiting:
            return
        failed: OSError | None = None       # the output: every future fails
        unsynced: OSError | None = None     # the sync: the durable ones fail
        try:
            self.check_output(errors_before)
        except OSError as exc:
            failed = exc
        if failed is None and any(durable for _, durable in waiting):
            try:
                self.sync()
            except OSError as exc:
                unsynced = exc
        for fut, durable in waiting:
            if not fut.set_running_or_notify_cancel():
                continue
            error = failed or (unsynced if durable else None)
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(None)

    def _take_waiting(self) -> list[tuple[Future, bool]]:
        with self._waiting_lock:
            waiting, self._waiting = self._waiting, []
        return waiting

    def _sync_if_due(self) -> None:
        """Group commit: sync at most every ``fsync_interval`` seconds while there are new writes."""
        if self.fsync_interval is None:
            return
        written = self.session.stats.bytes_written
        now = time.monotonic()
        if written == self._synced_bytes or now - self._synced_at < self.fsync_interval:
            return
        self._synced_bytes, self._synced_at = written, now
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
            self._stop = True
            self._wake.put(None)
            if self.thread is not threading.current_thread() and self.thread.is_alive():
                self.thread.join()
            self.running = False
        self.session.detach(self)
        waiting = self._take_waiting()
        errors = self.session.stats.write_errors
        self.session.consume(self.stream)
        self._answer(waiting, errors)
        self.session.finish(self.stream)

    def _run(self) -> None:
        s = self.session
        try:
            while not self._stop:
                try:
                    self._wake.get(timeout=self.interval)
                    while not self._wake.empty():   # one consume answers every wake-up
                        self._wake.get_nowait()
                except queue.Empty:
                    pass
                waiting = self._take_waiting()
                errors = s.stats.write_errors
                try:
                    s.consume(self.stream)
                    self._answer(waiting, errors)
                    self._sync_if_due()
                except Exception as exc:  # a bug here must not kill logging silently
                    report(f"blog: consumer error: {type(exc).__name__}: {exc}")
                    for fut, _ in waiting:
                        if not fut.done():
                            fut.set_exception(exc)
        finally:
            self.running = False
