"""Consumer: a background thread that moves a Session's events to an OutputStream."""

from __future__ import annotations

import threading
from typing import Any

from .session import Session, _report


class Consumer:
    """Consumes ``session`` into ``stream`` every ``interval`` seconds, or sooner.

    It wakes early when about ``flush_bytes`` bytes are pending: producers
    signal it when a channel reaches ``session.wake_events`` events, a
    length the consumer recomputes from the bytes per event it has seen.
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
        self._wake = threading.Event()
        self._stop = False
        self.running = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._set_wake_events(64)

    def start(self) -> "Consumer":
        """Attach to the session and start the thread."""
        if self.session._consumer is not None and self.session._consumer is not self:
            raise RuntimeError("the session already has a running consumer")
        self.session._consumer = self
        self.running = True
        self.thread.start()
        return self

    def wake(self) -> None:
        """Ask for a consume as soon as possible."""
        self._wake.set()

    def flush(self) -> None:
        """Consume now, in the calling thread: when it returns, everything logged before is written."""
        self.session.consume(self.stream)

    def stop(self) -> None:
        """Stop the thread after a last consume, detach from the session and flush the stream."""
        if self.running:
            self._stop = True
            self._wake.set()
            if self.thread is not threading.current_thread() and self.thread.is_alive():
                self.thread.join()
            self.running = False
        if self.session._consumer is self:
            self.session._consumer = None
        self.session.consume(self.stream)

    def _set_wake_events(self, bytes_per_event: int) -> None:
        s = self.session
        s.wake_events = max(16, min(s.channel_capacity, self.flush_bytes // max(1, bytes_per_event)))
        with s._lock:
            for w in s._writers:
                w.channel.limit = min(w.channel.capacity, s.wake_events)

    def _run(self) -> None:
        s = self.session
        while not self._stop:
            self._wake.wait(self.interval)
            self._wake.clear()
            try:
                before = s.stats.events_written, s.stats.bytes_written
                s.consume(self.stream)
                n = s.stats.events_written - before[0]
                if n >= 64:
                    self._set_wake_events((s.stats.bytes_written - before[1]) // n)
            except Exception as exc:  # a bug here must not kill logging silently
                _report(f"blog: consumer error: {type(exc).__name__}: {exc}")
        self.running = False
