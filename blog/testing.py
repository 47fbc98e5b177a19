"""Testing helpers: what an application logged, as ``bread`` events, for its tests to check.

    with blog.testing.capture() as logged:
        checkout(cart)
    assert logged.messages() == ["order 42 filled at 101.25"]
    assert logged[0].fields["request_id"] == "r-1"

With pytest, the ``blog_capture`` fixture (registered by blog's pytest plugin)
gives the same object for the whole test. Records of ``logging`` (the application's and its
libraries') are captured too, as ``logging`` would emit them: no ``blog.stdlib.capture()``
is needed in a test.
"""

from __future__ import annotations

import io
import time
from typing import Any, Iterator

import bread
from blogformat.severity import Severity, to_severity

from .default import default_session
from .pipeline.session import Session
from .pipeline.streams import MemoryOutputStream


class Captured:
    """The events a session wrote between ``start`` and ``stop``, read back by bread.

    A sequence of ``bread.Event`` (``len``, index, iterate); reading it writes what is
    pending first, so events logged so far are there.
    """

    def __init__(self, session: Session | None = None,
                 min_severity: Severity | int | str = Severity.TRACE,
                 strict: bool = True, logging: bool = True) -> None:
        if session is not None and not isinstance(session, Session):
            raise TypeError(f"capture needs a blog.Session, not {type(session).__name__}")
        self.session = session if session is not None else default_session()
        self.min_severity = to_severity(min_severity)
        self._out = MemoryOutputStream()
        self._discard = _Discard()
        self._start = 0
        self._stopped = False
        self._events: list[bread.Event] = []
        self.strict = strict
        self._was_strict = False
        self.logging = logging
        self._handler: Any = None

    def start(self) -> "Captured":
        """Capture from now on."""
        flush = getattr(self.session.drainer, "flush", None)
        if flush is not None:
            flush()               # what was logged before goes to the output only
        self._start = time.time_ns()
        self._was_strict = self.session.strict
        self.session.strict = self.strict
        self.session.add_output(self._out)
        if self.logging:
            self._handler = _logging_handler(self.session)
        return self

    def stop(self) -> None:
        """Stop capturing (what was logged until now stays)."""
        if not self._stopped:
            self._events = self._read()
            self.session.remove_output(self._out)
            self.session.strict = self._was_strict
            if self._handler is not None:
                import logging
                logging.getLogger().removeHandler(self._handler)
            self._stopped = True

    def _read(self) -> list[bread.Event]:
        s = self.session
        flush = getattr(s.drainer, "flush", None)
        if flush is not None:
            flush()               # the session writes to its output and to the capture
        elif s.drainer is None:
            # Nothing writes this session: write it now, to its own output if it has one;
            # if it has none (the default session before basic_config), the events are
            # taken for the capture only.
            s.consume(s.output if s.output is not None else self._discard)
        reader = bread.read(io.BytesIO(self._out.getvalue()))
        return [ev for ev in reader
                if ev.clock >= self._start and ev.source.severity >= self.min_severity]

    @property
    def events(self) -> list[bread.Event]:
        """The events captured so far, in the order they were written."""
        return list(self._events) if self._stopped else self._read()

    def messages(self) -> list[str]:
        """The captured events' messages."""
        return [ev.message for ev in self.events]

    def __iter__(self) -> Iterator[bread.Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, i: Any) -> Any:
        return self.events[i]

    def __enter__(self) -> "Captured":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<blog.testing.Captured {len(self)} event(s)>"


def _logging_handler(session: Session) -> Any:
    """A handler on the root logger that writes into ``session`` each ``logging`` record
    that reaches it and no BlogHandler of the session has written on its way (one the
    application or the test put on a logger), so that none is captured twice; the
    loggers' levels are left as they are (what logging would not emit is not captured)."""
    import logging

    from .stdlib import BlogHandler

    class CaptureHandler(BlogHandler):
        capture_only = True      # never taken for its own by blog.stdlib.capture()

        def handle(self, record: logging.LogRecord) -> Any:
            logger = logging.root.manager.loggerDict.get(record.name)
            while isinstance(logger, logging.Logger) and logger is not logging.root:
                if any(isinstance(h, BlogHandler) and h.session is session
                       for h in logger.handlers):
                    return False
                logger = logger.parent
            if any(isinstance(h, BlogHandler) and h is not self and h.session is session
                   for h in logging.root.handlers):
                return False     # one put on the root since (blog.stdlib.capture()) writes it
            return super().handle(record)

    root = logging.getLogger()
    if any(isinstance(h, BlogHandler) and h.session is session for h in root.handlers):
        return None
    handler = CaptureHandler(session=session)
    root.addHandler(handler)
    return handler


class _Discard:
    """The output of a session nothing else writes: a capture keeps what it needs."""

    def write(self, data: bytes) -> int:
        return len(data)


def capture(session: Session | None = None, *,
            min_severity: Severity | int | str = Severity.TRACE,
            strict: bool = True, logging: bool = True) -> Captured:
    """Collect the events logged from now until the end of the ``with`` block (or ``stop()``)
    into ``session`` (the default session if None), at ``min_severity`` or above.

    While it captures, the session is strict (``Session.strict``): a literal format that
    does not fit its call raises ``CallSiteError``, so that a test finds the mistake;
    ``strict=False`` leaves it logged as text, as in production.

    Records of ``logging`` that reach its root logger are captured too (``logging=False``:
    not), through a handler added for the capture unless a BlogHandler of the session is
    on the root already; one that a BlogHandler on its way wrote is not taken twice."""
    return Captured(session, min_severity, strict, logging)


__all__ = ["Captured", "capture"]
