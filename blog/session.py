"""Session: owns the event sources, the writers and the clock sync; consumes them into a stream."""

from __future__ import annotations

import itertools
import os
import socket
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

from . import format as fmt
from .channel import BLOCK, DROP
from .severity import Severity, to_severity
from .source import EventSource
from .values import UNICODE_ERRORS
from .writer import SessionWriter

if TYPE_CHECKING:
    from .consumer import Consumer
    from .logger import Logger

__version__ = "0.1.0"

#: Metadata frames are cut at about this many payload bytes.
FRAME_TARGET = 1 << 20
#: The largest channel: what one channel holds goes into one frame.
MAX_CHANNEL_CAPACITY = fmt.MAX_PAYLOAD // 2


def check_overflow(overflow: str) -> None:
    """Reject an overflow policy other than "block" and "drop"."""
    if overflow not in (BLOCK, DROP):
        raise ValueError(f"overflow must be {BLOCK!r} or {DROP!r}, not {overflow!r}")


def check_capacity(capacity: int) -> None:
    """Reject a channel capacity that is not a byte count the format can frame."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) \
            or not 64 <= capacity <= MAX_CHANNEL_CAPACITY:
        raise ValueError(f"channel_capacity must be bytes from 64 to {MAX_CHANNEL_CAPACITY}, "
                         f"not {capacity!r}")


@dataclass
class SessionStats:
    """What a session wrote and what it lost, for monitoring. Counts since the session began."""

    events_written: int = 0
    bytes_written: int = 0
    events_dropped: int = 0     # channel full (overflow="drop") or event too large
    events_lost: int = 0        # in writes that the output stream refused
    bytes_lost: int = 0
    write_errors: int = 0
    last_error: str | None = None


class Session:
    """A log stream: many SessionWriters (one per thread) feeding one consumer.

    ``channel_capacity`` bounds each thread's queue in bytes; ``overflow``
    says what a full queue does: ``"block"`` (wait for the consumer; the
    default) or ``"drop"`` (drop and count; the file records how many).
    """

    def __init__(self, *, min_severity: Severity | int | str = Severity.TRACE,
                 channel_capacity: int = 4 << 20, overflow: str = BLOCK,
                 name: str | None = None) -> None:
        check_overflow(overflow)
        check_capacity(channel_capacity)
        self.overflow = overflow
        self.channel_capacity = channel_capacity
        self.name = name or "blog"
        self.stats = SessionStats()
        self._min = to_severity(min_severity)
        # Sources, writers, pending metadata. Reentrant: a signal handler or a finalizer
        # may log (and so register a source or a writer) while this thread holds it.
        self._lock = threading.RLock()
        self._consume_lock = threading.RLock()   # one consume at a time
        self._local = threading.local()          # .w: this thread's SessionWriter, .c its Channel
        self._sources: list[EventSource] = []
        self._sites: dict[tuple, EventSource] = {}
        self._codes: set[Any] = set()            # code objects of registered call sites
        self._writers: list[SessionWriter] = []
        self._reported_drops: dict[int, int] = {}   # writer id -> drops recorded in the output
        self._counted_drops: dict[int, int] = {}    # writer id -> drops counted in stats
        self._writer_ids = itertools.count(1)
        self._pending: list[list] = []
        self._loggers: dict[str, Logger] = {}
        self._stream: Any = None                 # the stream that has this session's header
        self._unreported_loss = [0, 0]           # events, bytes lost since the last good write
        self._failing = False
        self._consumer: Consumer | None = None
        self._consuming: int | None = None       # ident of the thread inside consume()
        _SESSIONS.add(self)
        self._tz_offset: int | None = None       # of the last ClockSync written
        self.wake_bytes = channel_capacity       # a channel holding this much wakes the consumer
        self.start_ns = time.time_ns()
        self.descriptor = {
            "library": "blog", "library_version": __version__,
            "host": socket.gethostname(), "pid": os.getpid(),
            "program": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
            "python": sys.version.split()[0], "start_time_ns": self.start_ns,
            "session": self.name,
        }

    # --- severity and loggers ----------------------------------------------

    @property
    def min_severity(self) -> int:
        """Events below this severity are not logged by any logger of the session."""
        return self._min

    def set_min_severity(self, severity: Severity | int | str) -> None:
        """Change the session-wide minimum severity at runtime."""
        with self._lock:
            self._min = to_severity(severity)
            for lg in list(self._loggers.values()):
                lg._refresh()

    def get_logger(self, category: str = "main") -> Logger:
        """The session's logger for ``category`` (one per category)."""
        from .logger import Logger
        if not isinstance(category, str):
            raise TypeError(f"category must be a str, not {type(category).__name__}")
        lg = self._loggers.get(category)
        if lg is None:
            made = Logger(self, category)      # built outside the lock
            with self._lock:
                lg = self._loggers.setdefault(category, made)
                lg._refresh()                  # the session minimum may have changed meanwhile
        return lg

    # --- registration (slow path of the producers) ------------------------

    def add_source(self, key: tuple | None, severity: int, category: str, function: str,
                   file: str, line: int, format: str, arg_tags: str,
                   field_names: tuple[str, ...], positional: int, template: Any) -> EventSource:
        """Register an EventSource once per ``key``; its metadata is written before its first event."""
        with self._lock:
            if key is not None and key in self._sites:
                return self._sites[key]
            src = EventSource(len(self._sources) + 1, severity, _cap(category), _cap(function),
                              _cap(file), line, _cap(format), _cap(arg_tags),
                              tuple(field_names), positional, template)
            self._sources.append(src)
            self._pending.append(src.entry())
            if key is not None:
                self._sites[key] = src
            return src

    def site(self, key: tuple) -> EventSource | None:
        """The source registered for ``key``, if any."""
        return self._sites.get(key)

    def writer(self) -> SessionWriter:
        """The calling thread's SessionWriter (made on first use)."""
        try:
            return self._local.w
        except AttributeError:
            return self._new_writer()

    def _new_writer(self) -> SessionWriter:
        with self._lock:
            w = SessionWriter(self, next(self._writer_ids), self.channel_capacity,
                              self.wake_bytes)
            self._writers.append(w)
            self._pending.append(w.entry())
        self._local.w = w
        self._local.c = w.channel
        return w

    def _writer_changed(self, w: SessionWriter) -> None:
        with self._lock:
            self._pending.append(w.entry())

    # --- consumer coordination --------------------------------------------

    def _wake(self) -> None:
        c = self._consumer
        if c is not None:
            c.wake()

    def _can_block(self) -> bool:
        c = self._consumer
        return (c is not None and c.running and c.thread.is_alive()
                and threading.current_thread() is not c.thread
                and self._consuming != threading.get_ident())   # not from inside consume()

    # --- consuming ----------------------------------------------------------

    def _clock_sync(self) -> list:
        now = time.time_ns()
        lt = time.localtime(now // 1_000_000_000)
        self._tz_offset = lt.tm_gmtoff
        return [fmt.ENTRY_CLOCK_SYNC, now, 1_000_000_000, now, lt.tm_gmtoff, lt.tm_zone]

    def _full_metadata(self) -> list[list]:
        return ([self._clock_sync()] + [s.entry() for s in self._sources]
                + [w.entry(w.stream_name) for w in self._writers])

    def consume(self, stream: Any) -> int:
        """Write pending metadata, then the queued events, to ``stream``; return bytes written.

        ``stream`` is anything with ``write(bytes)`` (and optionally ``flush()``).
        The first consume into a stream writes the file header and all metadata
        first. A stream that raises never raises here: the loss is counted in
        ``stats``, reported once on stderr and recorded in the file once the
        stream works again.
        """
        me = threading.get_ident()
        if self._consuming == me:
            return 0   # re-entered (a finalizer or signal handler in this thread): not now
        with self._consume_lock:
            self._consuming = me
            try:
                return self._consume(stream)
            finally:
                self._consuming = None

    def _consume(self, stream: Any) -> int:
        with self._lock:
            writers = list(self._writers)
        # Drain first, then take the metadata: every drained event's source and
        # writer were registered before the event was queued, so the metadata
        # taken below covers them and is written ahead of them.
        taken = [(w, w.channel.take()) for w in writers]
        with self._lock:
            fresh = stream is not self._stream
            if fresh:
                meta = self._full_metadata()
                self._pending.clear()
            else:
                meta, self._pending = self._pending, []
                tz = time.localtime().tm_gmtoff
                if tz != self._tz_offset:   # DST began or ended: new zone from here on
                    meta.insert(0, self._clock_sync())
        parts: list[bytes] = []
        if fresh:
            parts.append(fmt.frame_bytes(fmt.FRAME_HEADER, msgpack.packb(
                [fmt.FORMAT_VERSION, self.descriptor], use_bin_type=True,
                unicode_errors=UNICODE_ERRORS)))
        lost_events, lost_bytes = self._unreported_loss
        if lost_events or lost_bytes:
            meta.append([fmt.ENTRY_LOST, lost_events, lost_bytes, time.time_ns()])
        batches: list[bytes] = []
        n_events = 0
        reported: dict[int, int] = {}
        for w, t in taken:
            if t[1] or t[5]:
                n_events += self._writer_frames(w, t, batches)
            total = w.channel.dropped
            counted = self._counted_drops.get(w.id, 0)
            if total > counted:
                self.stats.events_dropped += total - counted
                self._counted_drops[w.id] = total
            dropped = total - self._reported_drops.get(w.id, 0)
            if dropped:   # recorded as written only once the write succeeds (below)
                reported[w.id] = total
                meta.append([fmt.ENTRY_DROPPED, w.id, dropped, time.time_ns()])
        self._retire_writers(writers)
        if meta:
            parts.extend(self._metadata_frames(meta))
        parts.extend(batches)
        if not parts:
            return 0
        data = b"".join(parts)
        if self._write(stream, data, n_events):
            self._reported_drops.update(reported)
            self._stream = stream
            self._unreported_loss = [0, 0]
            self.stats.events_written += n_events
            self.stats.bytes_written += len(data)
            return len(data)
        return 0

    def _metadata_frames(self, meta: list[list]) -> list[bytes]:
        frames, buf = [], []
        size = 0
        for entry in meta:
            b = msgpack.packb(entry, use_bin_type=True, unicode_errors=UNICODE_ERRORS)
            if buf and size + len(b) > FRAME_TARGET:
                frames.append(fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(buf)))
                buf, size = [], 0
            buf.append(b)
            size += len(b)
        if buf:
            frames.append(fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(buf)))
        return frames

    def _writer_frames(self, w: SessionWriter, taken: tuple, out: list[bytes]) -> int:
        """Frame what was taken from one writer's channel; return the number of events.

        The channel's bytes are already encoded events; in-band metadata marks
        (a writer renaming itself) cut them into the runs before and after.
        """
        data, count, base, lo, hi, marks = taken
        pos = done = 0
        for offset, at_count, prev, entry in marks:
            if offset > pos:
                out.append(self._events_frame(w.id, base, at_count - done, lo, hi,
                                              data[pos:offset]))
            out.extend(self._metadata_frames([entry]))
            w.stream_name = entry[2]
            pos, done, base = offset, at_count, prev
        if len(data) > pos:
            out.append(self._events_frame(w.id, base, count - done, lo, hi, data[pos:]))
        return count

    def _events_frame(self, wid: int, base: int, count: int, lo: int, hi: int,
                      events: bytes) -> bytes:
        head = msgpack.packb([wid, base, count, lo, hi])
        return fmt.frame_bytes(fmt.FRAME_EVENTS, head + events)

    def _retire_writers(self, writers: list[SessionWriter]) -> None:
        """Forget writers whose thread ended and whose channel is empty."""
        dead = [w for w in writers if not w.thread.is_alive() and not w.channel.nbytes]
        if dead:
            with self._lock:
                self._writers = [w for w in self._writers if w not in dead]

    def _write(self, stream: Any, data: bytes, n_events: int) -> bool:
        try:
            view = memoryview(data)
            while view:
                n = stream.write(view)
                if n is None or n >= len(view):
                    break
                if n <= 0:
                    raise OSError("stream accepted no bytes")
                view = view[n:]
            flush = getattr(stream, "flush", None)
            if flush is not None:
                flush()
        except Exception as exc:  # never raise into the application
            self.stats.write_errors += 1
            self.stats.events_lost += n_events
            self.stats.bytes_lost += len(data)
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            self._unreported_loss[0] += n_events
            self._unreported_loss[1] += len(data)
            self._stream = None  # the next good write starts with a header and all metadata
            if not self._failing:
                self._failing = True
                _report(f"blog: writing session {self.name!r} failed ({self.stats.last_error}); "
                        "events are being lost until the output recovers")
            return False
        if self._failing:
            self._failing = False
            _report(f"blog: session {self.name!r} output recovered; "
                    f"{self.stats.events_lost} event(s) lost in total")
        return True

    # --- lifetime -------------------------------------------------------

    def _forked(self) -> None:
        """In a child made by fork(): the parent's threads, queued events and output are not ours.

        The parent writes what it had queued; the child starts with no writers
        and no consumer (its thread did not survive the fork), so that nothing
        is written twice. The child logs into its own output once it is given one.
        """
        self._lock = threading.RLock()           # may have been held by a thread that is gone
        self._consume_lock = threading.RLock()
        self._consuming = None
        self._writers = []   # their channels are the parent's: not touched (their locks may be held)
        self._pending = [e for e in self._pending if e[0] != fmt.ENTRY_WRITER_PROP]
        self._consumer = None
        self._stream = None
        self._unreported_loss = [0, 0]
        for name in ("w", "c"):
            self._local.__dict__.pop(name, None)
        self.descriptor = dict(self.descriptor, pid=os.getpid())

    def pending(self) -> int:
        """Events queued in the channels and not yet consumed."""
        with self._lock:
            return sum(w.channel.count for w in self._writers)


_SESSIONS: weakref.WeakSet[Session] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for s in list(_SESSIONS):
        s._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _cap(text: str, limit: int = 1 << 16) -> str:
    """Metadata strings are cut at 64 KiB, so that a metadata entry always fits in a frame."""
    return text if len(text) <= limit else text[:limit] + "..."


def _report(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except Exception:
        pass
