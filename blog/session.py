"""Session: owns the event sources, the writers and the clock sync; consumes them into a stream.

Its public surface is what a drainer needs (``attach``, ``detach``,
``consume``, ``pending``) and what a producer needs (``writer``,
``add_source``, ``site``); back-pressure lives in ``blog.backpressure`` and
the framing and writing of a consume in ``blog.output``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, Iterator

from blogformat.entries import (SOURCE_BACKTRACE, BatchHeader, ClockSync, Dropped, EventSource,
                                Metadata, WriterProp, metadata_frames)
from blogformat import valuetypes
from blogformat.placeholders import parse
from blogformat.valuetypes import Described
from blogformat.severity import Severity, to_severity

from . import __version__, accel, process
from .backpressure import BLOCK, Backpressure, Drainer, Handover
from .channel import Taken
from .errors import ConfigurationError
from .logger import DYNAMIC_FORMAT, Logger
from .source import MAX_FORMAT, MAX_SOURCE_TEXT, MAX_SOURCES, OVERFLOW_SOURCES, TooManySources

#: The category of the sources of call sites past MAX_SOURCES (their own category is
#: in the message).
OVERFLOW_CATEGORY = "blog.overflow"
from .output import Output, events_frame
from .report import report
from .stats import SessionStats
from .streams import OutputStream
from .writer import SessionWriter, ThreadEnd

if TYPE_CHECKING:
    from .crashbuf import CrashBuffer   # imported with the first crash buffer (start-up)

#: The most events a backtrace buffer keeps per thread.
MAX_BACKTRACE = 1 << 16


@dataclass(frozen=True)
class Backtrace:
    """A session's backtrace settings (``Session.use_backtrace``)."""

    size: int
    trigger: int
    least: int


#: Metadata strings are cut at this many characters, so that an entry always fits in a frame
#: (a format string is never cut: check_template refuses one longer than MAX_FORMAT).
MAX_METADATA_TEXT = 1 << 16


class Session:
    """A log stream: many SessionWriters (one per thread) feeding one consumer.

    ``channel_capacity`` bounds each thread's queue in bytes; ``overflow``
    says what a full queue does: ``"block"`` (wait for the consumer; the
    default) or ``"drop"`` (drop and count; the file records how many).
    """

    def __init__(self, *, min_severity: Severity | int | str = Severity.TRACE,
                 channel_capacity: int = 4 << 20, overflow: str = BLOCK,
                 name: str | None = None) -> None:
        self.pressure = Backpressure(capacity=channel_capacity, policy=overflow)
        self.name = name or "blog"
        self.stats = SessionStats()
        self._min = to_severity(min_severity)
        self.backtrace: Backtrace | None = None    # use_backtrace
        # Sources, writers, pending metadata. Reentrant: a signal handler or a finalizer
        # may log (and so register a source or a writer) while this thread holds it.
        self._lock = threading.RLock()
        self._consume_lock = threading.RLock()   # one consume at a time
        self._local = threading.local()          # .w: this thread's SessionWriter, .c its Channel
        self._sources: list[EventSource] = []
        self._overflow: dict[int, EventSource] = {}   # by severity: sources past MAX_SOURCES
        self._source_text = 0                          # their text, against MAX_SOURCE_TEXT
        self._sites: dict[tuple, EventSource] = {}
        # Site keys hold id(code) (hashing a code object hashes all of it); the code
        # objects are kept alive here so that no other code object can take their id.
        self._site_codes: set[Any] = set()
        self._writers: list[SessionWriter] = []
        self._reported_drops: dict[int, int] = {}   # writer id -> drops recorded in the output
        self._counted_drops: dict[int, int] = {}    # writer id -> drops counted in stats
        self._writer_ids = itertools.count(1)
        self._pending: list[Metadata] = []
        self._loggers: dict[str, Logger] = {}
        self._output = Output(self.stats, self.name)
        self._consuming: int | None = None       # ident of the thread inside consume()
        process.track(process.SESSION, self)
        self._tz_offset: int | None = None       # of the last ClockSync written
        self._crash: CrashBuffer | None = None
        self._crash_capacity = 0                 # the channel capacity its files were made for
        # A consume the output refused, kept with the crash buffer: ([(writer, Taken)], seq),
        # and where the file ended before its first try (device, inode, size).
        self._held: tuple[list[tuple[SessionWriter, Taken]], int] | None = None
        self._held_at: tuple[int, int, int] | None = None
        # Outputs beside the main one (add_output): each gets the same metadata and events.
        self._sides: list[tuple[Any, Output]] = []
        self.forked_drainer: Drainer | None = None   # in a forked child: the parent's drainer
        self.was_shut_down = False   # blog.shutdown() stopped its output (for the exit report)
        #: Keep the source line of each traceback frame of a logged exception (read from its
        #: file at the call); by default only file, line and function are kept, and the
        #: reader shows the line from the file where it has it.
        self.keep_source_lines = False
        self.start_ns = time.time_ns()
        self.descriptor = {
            "library": "blog", "library_version": __version__,
            "host": os.uname().nodename, "pid": os.getpid(),
            "program": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
            "python": sys.version.split()[0], "start_time_ns": self.start_ns,
            "session": self.name,
        }
        # Value types described so far (blogformat.valuetypes), and from now on as they are
        # (appended without a lock: see type_described); the first _types_written of them
        # are in the current stream's metadata.
        self._types: list[Described] = []
        self._types_written = 0
        self._types[:0] = valuetypes.listen(self)

    @property
    def overflow(self) -> str:
        """What a full channel does: "block" or "drop"."""
        return self.pressure.policy

    @property
    def channel_capacity(self) -> int:
        """Bytes each thread's channel may hold."""
        return self.pressure.capacity

    def configure(self, *, channel_capacity: int | None = None,
                  overflow: str | None = None) -> None:
        """Change the channel capacity (from each channel's next consume on) or the overflow policy."""
        with self._lock:
            self.pressure.configure(capacity=channel_capacity, policy=overflow)
            for w in self._writers:
                self.pressure.apply(w.channel)
            cb = self._crash
        if cb is not None and self.pressure.capacity > self._crash_capacity:
            # Channels larger than their files: a new buffer of the new size takes over.
            from .crashbuf import CrashBuffer
            try:
                bigger = CrashBuffer(cb.directory, cb.log_path, self.descriptor)
            except OSError as exc:   # a full disk, say: the old one goes on (events past
                report(f"blog: the crash buffer cannot grow ({exc}); events beyond its "
                       "old size are not protected from a kill")     # its size: unmirrored)
                return
            self.use_crash_buffer(bigger)

    # --- who drains it ------------------------------------------------------

    def attach(self, drainer: Drainer, *, wake_bytes: int) -> None:
        """Let ``drainer`` (a Consumer) drain this session; a channel holding ``wake_bytes`` wakes it.

        Raises RuntimeError if another drainer is attached.
        """
        with self._lock:
            self.pressure.attach(drainer, wake_bytes)
            for w in self._writers:
                self.pressure.apply(w.channel)

    def detach(self, drainer: Drainer) -> None:
        """``drainer`` no longer drains this session."""
        with self._lock:
            self.pressure.detach(drainer)

    @property
    def drainer(self) -> Drainer | None:
        """The attached drainer (a Consumer, or a Handover during a move), or None."""
        return self.pressure.drainer

    @contextlib.contextmanager
    def handover(self) -> Iterator[None]:
        """Move the session from one drainer to the next: inside the block, threads whose
        channel is full wait for the next drainer (policy "block") instead of dropping."""
        with self._lock:
            self.pressure.begin_handover(Handover(
                lambda: self.registering_here() or self.consuming_here()))
        try:
            yield
        finally:
            with self._lock:
                self.pressure.end_handover()

    def consuming_here(self) -> bool:
        """True if the calling thread is inside ``consume()`` (a drainer must not wait for itself)."""
        return self._consuming == threading.get_ident()

    def registering_here(self) -> bool:
        """True if the calling thread holds the session's lock: it is registering a source or
        writer, and logged again from inside (a gc callback, a finalizer). A drainer needs
        that lock, so such a thread must not wait for one."""
        return self._lock._is_owned()   # type: ignore[attr-defined]  # RLock's own check

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
                lg.refresh()

    def use_backtrace(self, size: int, *, trigger: Severity | int | str = Severity.ERROR,
                      least: Severity | int | str = Severity.TRACE) -> None:
        """Keep, per thread, the last ``size`` events below the minimum severity (and at
        ``least`` or above) in memory, encoded when logged; write them, marked as from
        the backtrace, before the next event of a logger at ``trigger`` or above in that
        thread. ``size=0`` turns it off (what is kept is dropped)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigurationError(f"backtrace size must be a count of events >= 0, not {size!r}")
        if size > MAX_BACKTRACE:
            raise ConfigurationError(f"backtrace size {size} is more than {MAX_BACKTRACE}")
        bt = Backtrace(size, to_severity(trigger), to_severity(least)) if size else None
        with self._lock:
            self.backtrace = bt
            for w in self._writers:
                w.forget_backtrace()
            for lg in list(self._loggers.values()):
                lg.refresh()

    def backtrace_source(self, sid: int) -> int:
        """The id of the twin of source ``sid`` that marks events from the backtrace."""
        src = self._sources[sid - 1]
        try:
            return self.add_source(
                key=("backtrace", sid), severity=src.severity, category=src.category,
                function=src.function, file=src.file, line=src.line, format=src.format,
                arg_tags=src.arg_tags, field_names=src.field_names, positional=src.positional,
                template=src.template, arg_names=src.arg_names, style=src.style,
                flags=SOURCE_BACKTRACE).id
        except TooManySources:
            return sid

    def get_logger(self, category: str = "main") -> Logger:
        """The session's logger for ``category`` (one per category)."""
        if not isinstance(category, str):
            raise TypeError(f"category must be a str, not {type(category).__name__}")
        lg = self._loggers.get(category)
        if lg is None:
            made = Logger(self, category)      # built outside the lock
            with self._lock:
                lg = self._loggers.setdefault(category, made)
                lg.refresh()                   # the session minimum may have changed meanwhile
        return lg

    # --- registration (slow path of the producers) ------------------------

    def add_source(self, *, key: tuple | None, severity: int, category: str, function: str,
                   file: str, line: int, format: str, arg_tags: str,
                   field_names: tuple[str, ...] = (), positional: int = 0,
                   template: Any = None, code: Any = None,
                   arg_names: tuple[str, ...] = (), style: str = "",
                   flags: int = 0) -> EventSource:
        """Register an EventSource once per ``key``; its metadata is written before its first event.

        ``code`` is the call site's code object, when ``key`` holds its id; ``style`` the
        syntax of ``format`` (EventSource.style).
        """
        with self._lock:
            if key is not None and key in self._sites:
                return self._sites[key]
            text = (len(category) + len(function) + len(file) + min(len(format), MAX_FORMAT)
                    + len(arg_tags) + sum(map(len, field_names)) + sum(map(len, arg_names)))
            if len(self._sources) >= MAX_SOURCES or self._source_text + text > MAX_SOURCE_TEXT:
                raise TooManySources(f"{file}:{line} ({function}): the session's call sites "
                                     f"fill a stream (at most {MAX_SOURCES} sources and "
                                     f"{MAX_SOURCE_TEXT} characters of their text)")
            self._source_text += text
            src = EventSource(len(self._sources) + 1, severity, _cap(category), _cap(function),
                              _cap(file), line, _cap(format, MAX_FORMAT), _cap(arg_tags),
                              tuple(field_names), positional, template,
                              tuple(_cap(n) for n in arg_names), style=style, flags=flags)
            self._sources.append(src)
            self._note(src)
            if key is not None:
                self._sites[key] = src
                if code is not None:
                    self._site_codes.add(code)
            return src

    def overflow_source(self, severity: int) -> EventSource:
        """A source for call sites that come after the session has MAX_SOURCES: format
        ``{}``, the message rendered at call time; one per severity (up to
        OVERFLOW_SOURCES, then the nearest)."""
        with self._lock:
            src = self._overflow.get(severity)
            if src is None:
                if len(self._overflow) >= OVERFLOW_SOURCES:
                    return self._overflow[min(self._overflow, key=lambda s: abs(s - severity))]
                if not self._overflow:
                    report(f"blog: the session has as many call sites ({len(self._sources)}) "
                           f"or as much of their text as a stream holds: later ones are "
                           f"logged as text (category, call site and message) in category "
                           f"{OVERFLOW_CATEGORY!r}")
                src = EventSource(len(self._sources) + 1, severity, OVERFLOW_CATEGORY, "", "",
                                  0, DYNAMIC_FORMAT, "str", (), 1, parse(DYNAMIC_FORMAT))
                self._sources.append(src)
                self._note(src)
                self._overflow[severity] = src
            return src

    def is_overflow(self, source: EventSource) -> bool:
        """True for a source ``overflow_source`` made."""
        return self._overflow.get(source.severity) is source

    def add_site(self, key: tuple, source: EventSource,
                 code: CodeType | None = None) -> EventSource:
        """Let ``key`` find ``source`` too (unless it finds one already); return what it finds."""
        with self._lock:
            if code is not None:
                self._site_codes.add(code)
            return self._sites.setdefault(key, source)

    def site(self, key: tuple) -> EventSource | None:
        """The source registered for ``key``, if any."""
        return self._sites.get(key)

    @property
    def local(self) -> threading.local:
        """Per thread: ``.w`` its SessionWriter and ``.c`` its Channel, once it has logged."""
        return self._local

    def writer(self) -> SessionWriter:
        """The calling thread's SessionWriter (made on first use)."""
        try:
            return self._local.w
        except AttributeError:
            return self.new_writer()

    def new_writer(self) -> SessionWriter:
        """Make the calling thread's SessionWriter (``writer()`` does when needed)."""
        with self._lock:
            w = SessionWriter(self, next(self._writer_ids), self.pressure)
            self._writers.append(w)
            self._note(w.entry())
            if self._crash is not None:
                w.channel.use_slot(self._crash.slot(w.id, self.pressure.capacity,
                                                    w.channel.prev))
        self._local.w = w
        self._local.c = w.channel
        self._local.end = ThreadEnd(w)
        return w

    def writer_renamed(self, w: SessionWriter) -> None:
        """Record ``w``'s new name (a rename from another thread: not in band)."""
        with self._lock:
            self._note(w.entry())

    def _note(self, entry: Metadata) -> None:
        """Metadata to write before the events that need it (with ``_lock`` held); a crash
        buffer keeps it too."""
        self._pending.append(entry)
        if self._crash is not None:
            self._crash.describe([entry])

    def type_described(self, entry: Described) -> None:
        """A value type described (process-wide) for the first time: written ahead of the
        first event that holds it, and into every stream from now on.

        Called with the registry's lock held: it takes no lock of the session's (a signal
        handler logging a new type while its thread holds ``_lock`` would deadlock). An
        append is atomic, and happens before any event holding the id is queued, so the
        consume that drains such an event finds the entry (``_new_types``)."""
        self._types.append(entry)
        cb = self._crash
        if cb is not None:
            cb.describe([entry])

    def _new_types(self) -> list[Described]:
        """The descriptions not yet in the current stream's metadata (with ``_lock`` held)."""
        n = len(self._types)
        new = self._types[self._types_written:n]
        self._types_written = n
        return new

    def described(self, entry: Metadata) -> None:
        """In-band metadata (a thread renaming itself), for the crash buffer."""
        if self._crash is not None:
            self._crash.describe([entry])

    # --- the crash buffer -------------------------------------------------

    @property
    def crash_buffer(self) -> CrashBuffer | None:
        """Where the channels are mirrored so that kill -9 loses nothing, if anywhere."""
        return self._crash

    def use_crash_buffer(self, cb: CrashBuffer | None) -> None:
        """Mirror every channel into ``cb`` (``blog.crashbuf``) from now on; None stops
        (the old one is removed: call it once everything is written).

        Events a refused write left held move to ``cb`` with the channels, and are written
        by the next consume; with None they stay in the old buffer, left on disk for the
        next start of its log (or ``bread --recover``) to append."""
        left = bare = 0
        with self._consume_lock, self._lock:
            old, self._crash = self._crash, cb
            self._crash_capacity = self.pressure.capacity
            if cb is not None:
                cb.describe([self._clock_sync(), *self._sources, *self._types]
                            + [w.entry() for w in self._writers])
            slots = {}
            for w in self._writers:
                if cb is not None:
                    slots[w.id] = cb.slot(w.id, self.pressure.capacity, w.channel.prev)
                    w.channel.use_slot(slots[w.id])
                elif old is not None:
                    w.channel.use_slot(None)
            if self._held is not None and old is not cb:
                taken, _ = self._held
                if cb is not None:
                    seq = cb.next_seq()
                    unheld = sum(t.count for w, t in taken if t.data and not (
                        (slot := slots.get(w.id)) is not None and slot.hold(t.data, t.base, seq)))
                    self._held = (taken, seq)
                    if unheld:
                        report(f"blog: {unheld} held event(s) do not fit in the new crash "
                               "buffer: they are written when the output works, but a kill "
                               "before that loses them")
                else:
                    # Left with the old buffer, and so are the events logged since (what
                    # its mirror missed is added): taken from the channels, never written
                    # twice. The next start of its log appends them all. Those of a
                    # writer the buffer has no file for are in no file: lost, and counted.
                    for w, t in taken:
                        if old is not None and old.has_slot(w.id):
                            left += t.count
                        else:
                            bare += t.count
                    for w in self._writers:
                        rest = w.channel.take()
                        if old is not None and old.keep(w.id, rest.data):
                            left += rest.count
                        else:
                            bare += rest.count
                    self.stats.events_lost += bare
                    self._held = self._held_at = None
                    self.stats.events_held = 0
            if old is not None and old is not cb and cb is not None:
                old.release()     # the new buffer has it all: the old one claims nothing
        if bare:
            report(f"blog: {bare} event(s) the output refused are lost: the crash buffer had "
                   "no file for their threads")
        if old is not None and old is not cb:
            if left:
                old.leave()
                report(f"blog: {left} event(s) the output refused are left in the crash buffer "
                       f"{old.directory}: the next start of {old.log_path} with crash_buffer=True "
                       f"(or bread --recover {old.log_path}) appends them")
            else:
                old.close()

    # --- consuming ----------------------------------------------------------

    def _clock_sync(self) -> ClockSync:
        now = time.time_ns()
        lt = time.localtime(now // 1_000_000_000)
        self._tz_offset = lt.tm_gmtoff
        return ClockSync(now, 1_000_000_000, now, lt.tm_gmtoff, lt.tm_zone)

    def _full_metadata(self) -> list[Metadata]:
        self._types_written = 0
        full: list[Metadata] = [self._clock_sync(), *self._sources, *self._new_types()]
        return full + [w.entry(w.stream_name) for w in self._writers]

    # --- outputs beside the main one --------------------------------------

    def add_output(self, stream: OutputStream) -> None:
        """Write everything from now on to ``stream`` too (anything with ``write(bytes)``:
        a ``blog.TextStream`` on the console, a MemoryOutputStream...), beside the main
        output, with its own header and metadata. A side output that fails loses its own
        writes only (reported on stderr); the main output is not affected."""
        if not callable(getattr(stream, "write", None)):
            raise TypeError(f"an output stream needs write(bytes); "
                            f"{type(stream).__name__} has none")
        with self._lock:
            if any(s is stream for s, _ in self._sides):
                return
            out = Output(SessionStats(), f"{self.name} -> {type(stream).__name__}")
            out.use(stream)
            self._sides = [*self._sides, (stream, out)]

    def remove_output(self, stream: OutputStream) -> bool:
        """Stop writing to a stream ``add_output`` added; False if it was not one."""
        with self._lock:
            kept = [(s, o) for s, o in self._sides if s is not stream]
            found = len(kept) != len(self._sides)
            self._sides = kept
        return found

    @property
    def outputs(self) -> list[OutputStream]:
        """The streams ``add_output`` added (not the main output)."""
        return [s for s, _ in self._sides]

    @property
    def output(self) -> OutputStream | None:
        """The main output: the stream the last ``consume`` wrote to (None before any)."""
        return self._output.stream

    def _write_sides(self, meta: list[Metadata], batches: list[bytes], n_events: int,
                     taken: list[Taken]) -> None:
        """Write what the main output got to each side output (a new one: all metadata)."""
        for _, out in self._sides:
            if out.started:
                side_meta = meta
            else:
                with self._lock:
                    side_meta = [self._clock_sync(), *self._sources, *self._types]
                    side_meta += [w.entry(w.stream_name) for w in self._writers]
            out.write(self.descriptor, side_meta, batches, n_events, taken)

    def consume(self, stream: OutputStream) -> int:
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

    def _consume(self, stream: OutputStream) -> int:
        out = self._output
        if stream is not out.stream:
            out.use(stream)
            self._held_at = None      # another stream (or the file opened again): not ours to cut
        with self._lock:
            writers = list(self._writers)
        # Drain first, then take the metadata: every drained event's source and
        # writer were registered before the event was queued, so the metadata
        # taken below covers them and is written ahead of them.
        crash = self._crash
        held = self._held
        if held is not None:
            # A write the output refused, kept (crash buffer) rather than lost: it is tried
            # again, whole, and nothing more is taken from the channels until it is written.
            taken, seq = held
            if crash is None or not self._cut_back(stream):
                return 0
        else:
            seq = crash.next_seq() if crash is not None else 0
            taken = [(w, w.channel.take(seq)) for w in writers]
        size = sum(len(t.data) for _, t in taken)
        if size:
            out.rotate_if_due(size)   # a RotatingFile's switch: between consumes, never inside one
        with self._lock:
            if not out.started:
                meta = self._full_metadata()
                self._pending.clear()
            else:
                meta, self._pending = self._pending, []
                meta += self._new_types()
                if time.localtime().tm_gmtoff != self._tz_offset:
                    meta.insert(0, self._clock_sync())   # DST began or ended: new zone from here on
        if out.started and out.passes_limits(meta):
            # More writers or text than a stream holds (threads come and go): end this
            # stream cleanly and start one that describes only what is in force.
            out.finish()
            with self._lock:
                meta = self._full_metadata()
        batches: list[bytes] = []
        n_events = 0
        reported: dict[int, int] = {}
        for w, t in taken:
            if t.count or t.marks:
                n_events += self._writer_frames(w, t, batches)
            dropped = self._drops(w)
            if dropped:   # recorded as written only once the write succeeds (below)
                reported[w.id] = w.channel.dropped
                meta.append(Dropped(w.id, dropped, time.time_ns()))
        before = None
        hold = crash is not None and n_events > 0
        if crash is not None:
            from .crashbuf import file_position

            def before(n: int) -> None:   # only when there is something to write
                self._held_at = where = file_position(stream)
                crash.writing(seq, where, n)
        written = out.write(self.descriptor, meta, batches, n_events, [t for _, t in taken],
                            before=before, hold=hold)
        if hold and not written:
            # Kept: the halves stay taken in the crash buffer (a kill now recovers them);
            # what the refused write left in the file is cut, so that none is written twice.
            self._held = (taken, seq)
            self.stats.events_held = n_events
            if crash is not None and self._cut_back(stream):   # (hold: there is one)
                crash.failed(seq)       # only once cut: until then recovery must cut it
            return 0
        self._held = None
        self._held_at = None
        self.stats.events_held = 0
        if self._sides:
            self._write_sides(meta, batches, n_events, [t for _, t in taken])
        retired = self._retire_writers(writers)
        if crash is not None:
            crash.written(seq)          # written, or its loss counted: the halves are free
            for w in retired:
                crash.retire(w.id)
        if written:
            self._reported_drops.update(reported)
        if held is not None and written:
            return written + self._consume(stream)   # then what was logged meanwhile
        return written

    def _cut_back(self, stream: OutputStream) -> bool:
        """Cut what a refused write left in the file (it was one writer's: the stream's lock);
        True if the file ends where it did before that write (or is not a file)."""
        at = self._held_at
        position = getattr(stream, "position", None)
        truncate = getattr(stream, "truncate", None)
        if at is None or position is None or truncate is None:
            return True
        try:
            here = position()
            if here[:2] == at[:2] and here[2] > at[2]:
                truncate(at[2])
            return True
        except (OSError, ValueError) as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            return False

    @property
    def held(self) -> bool:
        """True while a refused write's events are kept in the crash buffer, to write later."""
        return self._held is not None

    def output_failing(self) -> bool:
        """True while the output refuses writes (events are being lost)."""
        return self._output.failing

    def finish(self, stream: OutputStream) -> bool:
        """Close the stream's current file cleanly: write its Summary entry (after a last consume).

        Returns True if a Summary was written (nothing is written to a stream
        that has no header yet). The next consume into ``stream`` starts anew.
        """
        with self._consume_lock:
            out = self._output
            if stream is not out.stream:
                return False
            return out.finish()

    def _drops(self, w: SessionWriter) -> int:
        """Count ``w``'s new drops in ``stats``; return how many the output has not recorded."""
        total = w.channel.dropped
        counted = self._counted_drops.get(w.id, 0)
        if total > counted:
            self.stats.events_dropped += total - counted
            self._counted_drops[w.id] = total
        return total - self._reported_drops.get(w.id, 0)

    def _writer_frames(self, w: SessionWriter, taken: Taken, out: list[bytes]) -> int:
        """Frame what was taken from one writer's channel; return the number of events.

        The channel's bytes are already encoded events; in-band metadata marks
        (a writer renaming itself) cut them into the runs before and after.
        """
        data, base = taken.data, taken.base
        pos = done = 0
        for offset, at_count, prev, entry in taken.marks:
            if offset > pos:
                out.append(events_frame(BatchHeader(w.id, base, at_count - done, taken.lo,
                                                    taken.hi), data[pos:offset]))
            out.extend(metadata_frames([entry]))
            w.stream_name = entry.name
            pos, done, base = offset, at_count, prev
        if len(data) > pos:
            out.append(events_frame(BatchHeader(w.id, base, taken.count - done, taken.lo,
                                                taken.hi), data[pos:]))
        return taken.count

    def _retire_writers(self, writers: list[SessionWriter]) -> list[SessionWriter]:
        """Forget writers whose thread ended and whose channel is empty; return them."""
        dead = [w for w in writers if not w.alive() and not w.channel.nbytes]
        if dead:
            with self._lock:
                self._writers = [w for w in self._writers if w not in dead]
        return dead

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
        self._pending = [e for e in self._pending if not isinstance(e, WriterProp)]
        # The consumer's thread did not survive the fork: no drainer, no output. What the
        # parent had is kept for whoever gives the child its own (blog.default does).
        self.forked_drainer = self.pressure.drainer
        self.pressure = Backpressure(capacity=self.pressure.capacity, policy=self.pressure.policy)
        self._output = Output(self.stats, self.name)
        self._crash = None   # the parent's (blog.crashbuf lets go of it in the child)
        self._held = self._held_at = None
        self.stats.events_held = 0
        for name in ("w", "c", "end"):
            self._local.__dict__.pop(name, None)
        if accel.speedups is not None:   # the C call paths' entry of this thread: gone too
            accel.speedups.forget_thread_channel(self._local)
        self.descriptor = dict(self.descriptor, pid=os.getpid())

    def pending(self) -> int:
        """Events queued in the channels and not yet consumed."""
        with self._lock:
            return sum(w.channel.count for w in self._writers)

    def unrecorded_drops(self) -> int:
        """Events the channels dropped that no output has recorded (a Dropped entry)."""
        with self._lock:
            return sum(max(0, w.channel.dropped - self._reported_drops.get(w.id, 0))
                       for w in self._writers)


def _cap(text: str, limit: int = MAX_METADATA_TEXT) -> str:
    """Metadata strings are cut at ``limit`` characters, so that an entry always fits in a frame."""
    return text if len(text) <= limit else text[:limit] + "..."
