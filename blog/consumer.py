"""Consumer: a background thread that moves a Session's events to an OutputStream."""

from __future__ import annotations

import queue
import threading
from typing import Any

from .report import report
from .session import Session


class Consumer:
    """Consumes ``session`` into ``stream`` every ``interval`` seconds, or sooner.

    It wakes early when a thread's channel holds ``flush_bytes`` bytes: the
    producer that crosses that mark signals it.
    """

    def __init__(self, session: Session, stream: Any, *, interval: float = 0.02,
                 flush_bytes: int = 1 << 20, name: str = "blog-consumer") -> None:
        if not hasattr(stream, "write"):
            raise TypeError(f"output stream must have write(bytes); got {type(stream).__name__}")
        if not interval > 0:
            raise ValueError(f"interval must be positive seconds, not {interval!r}")
        if not isinstance(flush_bytes, int) or flush_bytes < 1:
            raise ValueError(f"flush_bytes must be a positive int, not {flush_bytes!r}")
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

    def flush(self) -> None:
        """Consume now, in the calling thread: when it returns, everything logged before is written."""
        self.session.consume(self.stream)

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
        self.session.consume(self.stream)
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
                try:
                    s.consume(self.stream)
                except Exception as exc:  # a bug here must not kill logging silently
                    report(f"blog: consumer error: {type(exc).__name__}: {exc}")
        finally:
            self.running = False
