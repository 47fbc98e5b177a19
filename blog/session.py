"""Session: owns the event sources, the writers and the clock sync; consumes them into a stream."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

from . import accel
from . import format as fmt
from .channel import BLOCK, DROP
from .severity import Severity, to_severity
from .source import EventSource
from . import values
from .values import UNICODE_ERRORS
from .writer import SessionWriter

if TYPE_CHECKING:
    from .consumer import Consumer
    from .logger import Logger

__version__ = "0.1.0"

#: Frames are cut at about this many payload bytes.
FRAME_TARGET = 1 << 20
#: An event larger than this is dropped (and counted): it could not fit in a frame.
MAX_EVENT = fmt.MAX_PAYLOAD // 2


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

    ``channel_capacity`` bounds each thread's queue in events; ``overflow``
    says what a full queue does: ``"block"`` (wait for the consumer; the
    default) or ``"drop"`` (drop and count; the file records how many).
    """

    def __init__(self, *, min_severity: Severity | int | str = Severity.TRACE,
                 channel_capacity: int = 65536, overflow: str = BLOCK,
                 name: str | None = None) -> None:
        if overflow not in (BLOCK, DROP):
            raise ValueError(f"overflow must be {BLOCK!r} or {DROP!r}, not {overflow!r}")
        if not isinstance(channel_capacity, int) or channel_capacity < 1:
            raise ValueError(f"channel_capacity must be a positive int, not {channel_capacity!r}")
        self.overflow = overflow
        self.channel_capacity = channel_capacity
        self.name = name or "blog"
        self.stats = SessionStats()
        self._min = to_severity(min_severity)
        self._lock = threading.Lock()            # sources, writers, pending metadata
        self._consume_lock = threading.RLock()   # one consume at a time
        self._local = threading.local()          # .w: this thread's SessionWriter, .c its Channel
        self._sources: list[EventSource] = []
        self._sites: dict[tuple, EventSource] = {}
        self._writers: list[SessionWriter] = []
        self._reported_drops: dict[int, int] = {}
        self._pending: list[list] = []
        self._loggers: dict[str, Logger] = {}
        self._stream: Any = None                 # the stream that has this session's header
        self._unreported_loss = [0, 0]           # events, bytes lost since the last good write
        self._failing = False
        self._consumer: Consumer | None = None
        self._tz_offset: int | None = None       # of the last ClockSync written
        # Plain scalars only reach this packer; ints beyond 64 bits go through the hook.
        self._packer = msgpack.Packer(use_bin_type=True, unicode_errors=UNICODE_ERRORS,
                                      default=values._default)
        self.wake_events = channel_capacity      # a channel this long wakes the consumer
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
        self._min = to_severity(severity)
        for lg in list(self._loggers.values()):
            lg._refresh()

    def get_logger(self, category: str = "main") -> Logger:
        """The session's logger for ``category`` (one per category)."""
        from .logger import Logger
        if not isinstance(category, str):
            raise TypeError(f"category must be a str, not {type(category).__name__}")
        with self._lock:
            lg = self._loggers.get(category)
            if lg is None:
                lg = self._loggers[category] = Logger(self, category)
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
            w = SessionWriter(self, len(self._reported_drops) + 1, self.channel_capacity)
            w.channel.limit = min(self.channel_capacity, self.wake_events)
            self._reported_drops[w.id] = 0
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
        return c is not None and c.running and threading.current_thread() is not c.thread

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
        with self._consume_lock:
            with self._lock:
                writers = list(self._writers)
            # Drain first, then take the metadata: every drained event's source and
            # writer were registered before the event was queued, so the metadata
            # taken below covers them and is written ahead of them.
            drained = [(w, w.channel.drain()) for w in writers]
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
            for w, items in drained:
                oversized = 0
                if items:
                    n, oversized = self._encode_batches(w, items, batches)
                    n_events += n
                dropped = w.channel.dropped - self._reported_drops.get(w.id, 0)
                self._reported_drops[w.id] = w.channel.dropped
                dropped += oversized
                if dropped:
                    self.stats.events_dropped += dropped
                    meta.append([fmt.ENTRY_DROPPED, w.id, dropped, time.time_ns()])
            self._retire_writers(writers)
            if meta:
                parts.extend(self._metadata_frames(meta))
            parts.extend(batches)
            if not parts:
                return 0
            data = b"".join(parts)
            if self._write(stream, data, n_events):
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

    def _encode_batches(self, w: SessionWriter, items: list,
                        out: list[bytes]) -> tuple[int, int]:
        """Encode one writer's events as EVENTS frames; return (encoded, dropped as too large).

        The C loop (``_speedups.encode_events``) takes the runs of ordinary
        events; this loop takes the first event of each frame and whatever the
        C loop leaves: in-band metadata, ints beyond 64 bits, lone surrogates.
        """
        pack = self._packer.pack
        fast = accel.speedups.encode_events if accel.speedups is not None else None
        written = oversized = 0
        parts: list[bytes] = []
        size = count = 0
        first = prev = lo = hi = 0
        i, n = 0, len(items)
        while i < n:
            if fast is not None and count:
                chunk, i, c, prev, lo, hi = fast(items, i, prev, lo, hi, FRAME_TARGET - size)
                if c:
                    parts.append(chunk)
                    size += len(chunk)
                    count += c
                if size >= FRAME_TARGET:
                    out.append(self._events_frame(w.id, first, count, lo, hi, parts))
                    written += count
                    parts, size, count = [], 0, 0
                    continue
                if i >= n:
                    break
            sid, clock, args = items[i]
            i += 1
            if sid == 0:
                # A metadata entry queued in band (a writer renamed itself): it goes
                # between the events queued before and after it.
                if count:
                    out.append(self._events_frame(w.id, first, count, lo, hi, parts))
                    written += count
                    parts, size, count = [], 0, 0
                out.extend(self._metadata_frames([args]))
                w.stream_name = args[2]
                continue
            if count == 0:
                first = lo = hi = prev = clock
            if type(args) is tuple:
                # Plain scalars only (checked on the calling thread).
                b = pack((sid, clock - prev, args))
            else:
                # Captured at call time: first byte is the element count, then args (and texts).
                b = b"%c%s%s%s" % (0x90 | args[0], pack(sid), pack(clock - prev), args[1:])
            if len(b) > MAX_EVENT:
                oversized += 1  # could not fit in any frame: dropped, and counted
                continue
            prev = clock
            if clock < lo:
                lo = clock
            elif clock > hi:
                hi = clock
            parts.append(b)
            size += len(b)
            count += 1
            if size >= FRAME_TARGET:
                out.append(self._events_frame(w.id, first, count, lo, hi, parts))
                written += count
                parts, size, count = [], 0, 0
        if count:
            out.append(self._events_frame(w.id, first, count, lo, hi, parts))
            written += count
        return written, oversized

    def _events_frame(self, wid: int, first: int, count: int, lo: int, hi: int,
                      parts: list[bytes]) -> bytes:
        head = msgpack.packb([wid, first, count, lo, hi])
        return fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(parts))

    def _retire_writers(self, writers: list[SessionWriter]) -> None:
        """Forget writers whose thread ended and whose channel is empty."""
        dead = [w for w in writers if not w.thread.is_alive() and not w.channel.queue]
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

    def pending(self) -> int:
        """Events queued in the channels and not yet consumed."""
        with self._lock:
            return sum(len(w.channel.queue) for w in self._writers)


def _cap(text: str, limit: int = 1 << 16) -> str:
    """Metadata strings are cut at 64 KiB, so that a metadata entry always fits in a frame."""
    return text if len(text) <= limit else text[:limit] + "..."


def _report(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except Exception:
        pass
