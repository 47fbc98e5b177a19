"""Session: a log stream: the threads' channels, drained by one consumer into an output.

Its public surface is what a drainer needs (``attach``, ``detach``,
``consume``, ``pending``) and what a producer needs (``get_logger``,
``writer``); what loggers and writers share (sources, call sites, value types,
writers' properties, the settings they read) is its ``registry``
(``blog.pipeline.registry``), its threads' writers are ``writers`` (``blog.pipeline.writer``).
Back-pressure lives in ``blog.pipeline.backpressure``, the framing and writing of a
consume in ``blog.pipeline.output``, the crash buffer's hold on the writes in
``blog.pipeline.heldwrites`` and the outputs beside the main one in ``blog.pipeline.sideoutputs``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time

from blogformat.typinglite import TYPE_CHECKING
from blogformat import TEXT_VERSION
from blogformat.entries import ClockSync, Dropped, Metadata
from blogformat.severity import Severity, to_severity

from .. import __version__, process
from .backpressure import BLOCK, Backpressure, Drainer, Handover
from ..errors import ConfigurationError
from .logger import Logger
from .output import Output, writer_frames
from . import parts
from .plainwrites import PlainWrites
from .registry import Backtrace, Registry
from ..report import report
from .sideoutputs import SideOutputs
from .stats import SessionStats
from .streams import OutputStream
from .writer import SessionWriter, Writers

if TYPE_CHECKING:
    from typing import Callable, Iterator

    from ..files.crashbuf import CrashBuffer   # imported with the first crash buffer (start-up)
    from .channel import AnyTaken
    from .heldwrites import HeldWrites, Takes
    from .liveevents import LiveEvent   # imported with the first callable output (start-up)

#: The most events a backtrace buffer keeps per thread.
MAX_BACKTRACE = 1 << 16
#: Seconds the outputs beside the main one (``add_output``) may take to return as the
#: process ends (``Session.exit_timeout``).
EXIT_TIMEOUT = 5.0


class Session:
    """A log stream: many SessionWriters (one per thread) feeding one consumer.

    ``channel_capacity`` bounds each thread's queue in bytes; ``overflow``
    says what a full queue does: ``"block"`` (wait for the consumer; the
    default) or ``"drop"`` (drop and count; the file records how many). ``strict``:
    a literal format that does not fit its call raises ``CallSiteError`` (``strict``).
    """

    def __init__(self, *, min_severity: Severity | int | str = Severity.TRACE,
                 channel_capacity: int = 4 << 20, overflow: str = BLOCK,
                 name: str | None = None, strict: bool = False) -> None:
        self.pressure = Backpressure(capacity=channel_capacity, policy=overflow)
        self.name = name or "blog"
        self.stats = SessionStats()
        self.registry = Registry()    # sources, sites, types, metadata to write; its lock
        self.registry.min_severity = to_severity(min_severity)
        self.strict = strict
        self.writers = Writers(self.registry, self.pressure)
        self._consume_lock = threading.RLock()   # one consume at a time
        self._reported_drops: dict[int, int] = {}   # writer id -> drops recorded in the output
        self._counted_drops: dict[int, int] = {}    # writer id -> drops counted in stats
        self._loggers: dict[str, Logger] = {}
        self.registry.loggers = self._loggers    # read when a minimum changes
        self._output = Output(self.stats, self.name)
        self._consuming: int | None = None       # ident of the thread inside consume()
        process.track(process.SESSION, self)
        self._tz_offset: int | None = None       # of the last ClockSync written
        # How a consume writes: PlainWrites, or with a crash buffer its hold on the writes.
        self._writes: PlainWrites | HeldWrites = PlainWrites()
        self._crash_capacity = 0                 # the channel capacity its files were made for
        self._sides = SideOutputs(self.name, self.stats, self.writers.echo_ids)   # beside
        # Written after the main output, outside the consume lock but in consume order:
        # one that never returns holds only this lock (``close_outputs``).
        self._sides_lock = threading.Lock()
        self._sides_by: int | None = None        # ident of the thread writing them
        self._side_jobs: list[tuple[int, Callable[[], None]]] = []   # (events, write)
        self._sides_deadline: float | None = None
        #: Seconds the outputs beside the main one may take, once the process ends, to
        #: return (``close_outputs``): a callable that never returns must not keep the
        #: process from exiting.
        self.exit_timeout = EXIT_TIMEOUT
        self.forked_drainer: Drainer | None = None   # in a forked child: the parent's drainer
        self.was_shut_down = False   # blog.shutdown() stopped its output (for the exit report)
        self.start_ns = time.time_ns()
        self.descriptor = {
            "library": "blog", "library_version": __version__,
            "host": os.uname().nodename, "pid": os.getpid(),
            "program": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
            "python": sys.version.split()[0], "start_time_ns": self.start_ns,
            "session": self.name, "text_version": TEXT_VERSION,
        }

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
        """Change the channel capacity (from each channel's next consume on) or the overflow
        policy."""
        with self.registry.lock:
            self.pressure.configure(capacity=channel_capacity, policy=overflow)
            for w in self.writers.all:
                self.pressure.apply(w.channel)
            cb = self.registry.mirror
        if cb is not None and self.pressure.capacity > self._crash_capacity:
            # Channels larger than their files: a new buffer of the new size takes over.
            from ..files.crashbuf import CrashBuffer
            try:
                bigger = CrashBuffer(cb.directory, cb.log_path, self.descriptor,
                                     cb.rotate_bytes)
            except OSError as exc:   # a full disk, say: the old one goes on (events past
                report(f"blog: the crash buffer cannot grow ({exc}); events beyond its "
                       "old size are not protected from a kill")     # its size: unmirrored)
                return
            self.use_crash_buffer(bigger)

    # --- who drains it ------------------------------------------------------

    def attach(self, drainer: Drainer, *, wake_bytes: int) -> None:
        """Let ``drainer`` (a Consumer) drain this session; a channel holding ``wake_bytes``
        wakes it.

        Raises RuntimeError if another drainer is attached.
        """
        with self.registry.lock:
            self.pressure.attach(drainer, wake_bytes)
            for w in self.writers.all:
                self.pressure.apply(w.channel)

    def wake_on_next_push(self) -> None:
        """Each thread's next event, in a channel or in its first, takes the slow path
        (which restarts the threads a fork stopped: ``blog.process``), until the drainer
        attaches again."""
        with self.registry.lock:
            self.pressure.arm()
            for w in self.writers.all:
                self.pressure.apply(w.channel)

    def detach(self, drainer: Drainer) -> None:
        """``drainer`` no longer drains this session."""
        with self.registry.lock:
            self.pressure.detach(drainer)

    @property
    def drainer(self) -> Drainer | None:
        """The attached drainer (a Consumer, or a Handover during a move), or None."""
        return self.pressure.drainer

    @contextlib.contextmanager
    def handover(self) -> Iterator[None]:
        """Move the session from one drainer to the next: inside the block, threads whose
        channel is full wait for the next drainer (policy "block") instead of dropping."""
        with self.registry.lock:
            self.pressure.begin_handover(Handover(
                lambda: self.registry.registering_here() or self.consuming_here()))
        try:
            yield
        finally:
            with self.registry.lock:
                self.pressure.end_handover()

    def consuming_here(self) -> bool:
        """True if the calling thread is inside ``consume()`` (a drainer must not wait for
        itself)."""
        return self._consuming == threading.get_ident()

    # --- severity and loggers ----------------------------------------------

    @property
    def min_severity(self) -> int:
        """Events below this severity are not logged by any logger of the session."""
        return self.registry.min_severity

    def set_min_severity(self, severity: Severity | int | str | None,
                         category: str | None = None) -> None:
        """Change the session-wide minimum severity at runtime; with ``category``, that
        category's own, which its children without one share (``"db"`` applies to
        ``db.pool`` and ``db.pool.conn``, as ``logging``'s logger tree does; None: its
        parent's again). The session-wide minimum applies to every category too."""
        if category is not None:
            if not isinstance(category, str):
                raise TypeError(f"category must be a str, not {type(category).__name__}")
            self.registry.set_category_min(
                category, None if severity is None else to_severity(severity))
            return
        if severity is None:
            raise TypeError("the session-wide minimum needs a severity, not None")
        with self.registry.lock:
            self.registry.min_severity = to_severity(severity)
            self.registry.refresh_loggers()

    @property
    def strict(self) -> bool:
        """True: a literal format that does not fit its call (``log.info("no args {}")``)
        raises ``CallSiteError`` at the call site's first call, as tests want. False (the
        default): the event is logged, its format as text marked and its arguments after
        it, and stderr says so once per call site: a log call never raises."""
        return self.registry.strict

    @strict.setter
    def strict(self, strict: bool) -> None:
        if not isinstance(strict, bool):
            raise ConfigurationError(f"strict must be True or False, not {strict!r}")
        self.registry.strict = strict

    @property
    def backtrace(self) -> Backtrace | None:
        """The backtrace settings (``use_backtrace``), or None."""
        return self.registry.backtrace

    @property
    def keep_source_lines(self) -> bool:
        """Keep the source line of each traceback frame of a logged exception (read from its
        file at the call); by default only file, line and function are kept, and the
        reader shows the line from the file where it has it."""
        return self.registry.keep_source_lines

    @keep_source_lines.setter
    def keep_source_lines(self, keep: bool) -> None:
        self.registry.keep_source_lines = keep

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
        with self.registry.lock:
            self.registry.backtrace = bt
            for w in self.writers.all:
                w.forget_backtrace()
            self.registry.refresh_loggers()

    def get_logger(self, category: str = "main") -> Logger:
        """The session's logger for ``category`` (one per category)."""
        if not isinstance(category, str):
            raise TypeError(f"category must be a str, not {type(category).__name__}")
        lg = self._loggers.get(category)
        if lg is None:
            made = Logger(self.registry, self.writers, category)   # built outside the lock
            with self.registry.lock:
                lg = self._loggers.setdefault(category, made)
                lg.refresh()                   # the session minimum may have changed meanwhile
        return lg

    def writer(self) -> SessionWriter:
        """The calling thread's SessionWriter (made on first use)."""
        return self.writers.writer()

    # --- the crash buffer -------------------------------------------------

    @property
    def crash_buffer(self) -> CrashBuffer | None:
        """Where the channels are mirrored so that kill -9 loses nothing, if anywhere."""
        return self.registry.mirror

    def use_crash_buffer(self, cb: CrashBuffer | None) -> None:
        """Mirror every channel into ``cb`` (``blog.files.crashbuf``) from now on; None stops
        (the old one is removed: call it once everything is written).

        Events a refused write left held move to ``cb`` with the channels, and are written
        by the next consume; with None they stay in the old buffer, left on disk for the
        next start of its log (or ``bread --recover``) to append."""
        reg = self.registry
        left = bare = 0
        with self._consume_lock, reg.lock:
            old = new = None if isinstance(self._writes, PlainWrites) else self._writes
            if cb is None:
                new = None
            elif old is None or old.buffer is not cb:
                from .heldwrites import HeldWrites   # with the first crash buffer (start-up)
                new = HeldWrites(cb, self.stats)
            self._writes, reg.mirror = new or PlainWrites(), cb
            self._crash_capacity = self.pressure.capacity
            if cb is not None:
                cb.describe([self._clock_sync(), *reg.sources, *reg.types]
                            + [w.entry() for w in self.writers.all])
            slots = self.writers.mirror_into(cb, stop=old is not None)
            if old is not None and old is not new:
                left, bare = old.hand_over(new, slots, self.writers.all)
        if old is not None and old is not new:
            old.let_go(left, bare)

    # --- consuming ----------------------------------------------------------

    def _clock_sync(self) -> ClockSync:
        now = time.time_ns()
        lt = time.localtime(now // 1_000_000_000)
        self._tz_offset = lt.tm_gmtoff
        return ClockSync(now, 1_000_000_000, now, lt.tm_gmtoff, lt.tm_zone)

    def _full_metadata(self) -> list[Metadata]:
        """All metadata in force, for a stream that starts: nothing is pending any more."""
        with self.registry.lock:
            self.registry.pending.clear()
            return [self._clock_sync(), *self.registry.for_new_stream(), *self.writers.entries()]

    def _described_so_far(self) -> list[Metadata]:
        """All metadata in force, for a side output that starts."""
        with self.registry.lock:
            reg = self.registry
            return [self._clock_sync(), *reg.sources, *reg.types, *self.writers.entries()]

    # --- outputs beside the main one --------------------------------------

    def add_output(self, output: OutputStream | Callable[[LiveEvent], object], *,
                   min_severity: Severity | int | str | None = None) -> None:
        """Write everything from now on to ``output`` too (anything with ``write(bytes)``:
        a ``blog.TextStream`` on the console, a MemoryOutputStream...), beside the main
        output, with its own header and metadata. A side output that fails loses its own
        writes only (reported on stderr); the main output is not affected.

        A callable (no ``write``) is called with each event at or above ``min_severity``
        (a ``blog.LiveEvent``) by the thread that writes (``blog.pipeline.calloutput``)."""
        with self.registry.lock:
            self._sides.add(output, min_severity)

    def remove_output(self, output: object) -> bool:
        """Stop writing to an output ``add_output`` added; False if it was not one."""
        with self.registry.lock:
            return self._sides.remove(output)

    @property
    def outputs(self) -> list[OutputStream | Callable[[LiveEvent], object]]:
        """The streams and callables ``add_output`` added (not the main output)."""
        return self._sides.streams

    @property
    def output(self) -> OutputStream | None:
        """The main output: the stream the last ``consume`` wrote to (None before any)."""
        return self._output.stream

    def consume(self, stream: OutputStream) -> int:
        """Write pending metadata, then the queued events, to ``stream``; return bytes written.

        ``stream`` is anything with ``write(bytes)`` (and optionally ``flush()``).
        The first consume into a stream writes the file header and all metadata
        first. A stream that raises never raises here: the loss is counted in
        ``stats``, reported once on stderr and recorded in the file once the
        stream works again.
        """
        me = threading.get_ident()
        if self._consuming == me or self._sides_by == me:
            return 0   # re-entered (a finalizer, a signal handler, an output): not now
        jobs: list[tuple[int, Callable[[], None]]] = []
        with self._consume_lock:
            self._consuming = me
            try:
                total = self._consume(stream)
                jobs = self._side_jobs
                lock = self._sides_lock
                if jobs and not self._take_sides(lock):
                    self._sides.skipped(sum(n for n, _ in jobs), self.exit_timeout)
                    jobs = []
            finally:
                self._consuming = None
                self._side_jobs = []
        if not jobs:
            return total
        # In consume order: the sides lock was taken before the consume lock let go.
        if self._sides_deadline is None:
            self._write_sides(jobs, lock)
            return total
        # The process ends: never stuck here in an output that does not return.
        left = [n for n, _ in jobs]
        t = threading.Thread(target=self._write_sides, args=(jobs, lock, left),
                             name="blog-outputs", daemon=True)
        try:
            t.start()
        except RuntimeError:  # no thread starts in an exit handler (Python 3.12): written
            self._write_sides(jobs, lock)      # here, the wait unbounded (guide)
            return total
        while t.is_alive() and not self.outputs_overdue():
            t.join(0.05)
        if t.is_alive():      # left behind, holding the sides lock: later ones are skipped
            self._sides.skipped(sum(left), self.exit_timeout)
        return total

    def _write_sides(self, jobs: list[tuple[int, Callable[[], None]]], lock: threading.Lock,
                     left: list[int] | None = None) -> None:
        """Write the side outputs (``jobs``, with ``lock`` held: released here); ``left``
        loses its first count as each job is done."""
        self._sides_by = threading.get_ident()
        try:
            with self.writers.writing_outputs():   # what they log is not fed back
                for _, job in jobs:
                    job()
                    if left:
                        left.pop(0)
        finally:
            self._sides_by = None
            lock.release()

    def _take_sides(self, lock: threading.Lock) -> bool:
        """Take the side outputs' lock: waiting as long as it takes, but once the process
        ends (``close_outputs``) no longer than its deadline. False: not taken."""
        while not lock.acquire(timeout=0.05):
            if self.outputs_overdue():
                return False
        return True

    def close_outputs(self, timeout: float) -> None:
        """The process ends: the outputs beside the main one get at most ``timeout`` seconds
        more; past it, one that has not returned is left behind, and the events it and the
        others are not given are told on stderr (the main output gets every one)."""
        self._sides_deadline = time.monotonic() + timeout

    def tell_undelivered(self) -> None:
        """Say on stderr how many more events the outputs beside the main one were not given
        since ``close_outputs`` left one behind (if it did)."""
        self._sides.tell()

    def outputs_overdue(self) -> bool:
        """True once the deadline ``close_outputs`` set has passed."""
        return self._sides_deadline is not None and time.monotonic() >= self._sides_deadline

    def _consume(self, stream: OutputStream) -> int:
        """Write into ``stream`` what the channels hold (or a held write first): take ->
        metadata -> frames -> write -> after the write. Once a held write is written, what
        was logged meanwhile follows. Returns the bytes written."""
        total = 0
        while True:
            writers = self._start(stream)
            took = self._writes.take(writers, stream)   # drain first, then the metadata:
            if took is None:     # a held write whose last try cannot be cut yet
                return total
            taken, retry = took  # every event's source and writer is registered by now
            left = parts.room(stream)     # a size limit: a consume is cut to fit
            meta = self._metadata(sum(len(t.data) for _, t in taken), left)
            batches, n_events, reported = self._frames(taken, meta)
            kept, written = self._write(stream, meta, batches, taken, n_events, left)
            if kept is None:     # held in the crash buffer: but for the parts written, if any
                if written:
                    self._reported_drops.update(reported)
                    batches, takes = self._writes.parted   # (HeldWrites: held only there)
                    self._write_sides_later(meta, batches, sum(t.count for t in takes), takes)
                return total
            self._write_sides_later(meta, batches, n_events, [t for _, t in taken])
            total += kept
            self._writes.done(self.writers.retire(writers))
            if written:
                self._reported_drops.update(reported)
            if not (retry and written):
                return total

    def _start(self, stream: OutputStream) -> list[SessionWriter]:
        """The output writes to ``stream`` (a new one: what a held write left in the old
        one is not cut); the writers whose channels this consume takes."""
        if stream is not self._output.stream:
            self._output.use(stream)
            self._writes.new_stream()
        with self.registry.lock:
            return list(self.writers.all)

    def _metadata(self, size: int, left: int | None) -> list[Metadata]:
        """The metadata to write before ``size`` bytes of events (``left``: the room in a
        size-limited stream), after a switch by time (or size) if one is due: all of it
        into a new stream, else what was registered since the last consume (and a
        ClockSync where the zone changed). A stream past its limits of writers or text
        ends here, and the next starts with only what is in force."""
        out, reg = self._output, self.registry
        if size:
            out.rotate_if_due(size if left is None else 0)
        with reg.lock:
            if not out.started:
                return self._full_metadata()
            meta, reg.pending = reg.pending, []
            meta += reg.new_types()
            if time.localtime().tm_gmtoff != self._tz_offset:
                meta.insert(0, self._clock_sync())   # DST began or ended: new zone from here on
        if out.passes_limits(meta):
            out.finish()
            meta = self._full_metadata()
        return meta

    def _frames(self, taken: Takes, meta: list[Metadata]
                ) -> tuple[list[bytes], int, dict[int, int]]:
        """The event frames of what was taken, each writer's drops added to ``meta``:
        (frames, events, each writer's drops so far: recorded once the write succeeds)."""
        batches: list[bytes] = []
        n_events = 0
        reported: dict[int, int] = {}
        for w, t in taken:
            if t.count or t.marks:
                n_events += writer_frames(w, t, batches)
            dropped = self._drops(w)
            if dropped:
                reported[w.id] = w.channel.dropped
                meta.append(Dropped(w.id, dropped, time.time_ns()))
        return batches, n_events, reported

    def _write(self, stream: OutputStream, meta: list[Metadata], batches: list[bytes],
               taken: Takes, n_events: int, left: int | None) -> tuple[int | None, int]:
        """Write it all, cut between files where it does not fit in the room ``left``:
        (bytes written, or None if held in the crash buffer; bytes of its first part)."""
        out, writes = self._output, self._writes
        if left is not None and not parts.fits(out, self.descriptor, meta, batches,
                                               parts.room(stream) or 0):
            cut = functools.partial(parts.write_parts, out, stream, self.descriptor, meta,
                                    taken, self._full_metadata, writer_frames)
            return writes.write_parts(out, stream, self.descriptor, taken, cut)
        kept = writes.write(out, stream, self.descriptor, meta, batches, taken, n_events)
        return kept, kept or 0

    def _write_sides_later(self, meta: list[Metadata], batches: list[bytes], n_events: int,
                           takes: list[AnyTaken]) -> None:
        """The outputs beside the main one get what it got, after the consume lock
        (``consume``)."""
        if self._sides:
            sides, descriptor = self._sides, self.descriptor
            self._side_jobs.append((n_events, lambda: sides.write(
                descriptor, meta, batches, n_events, takes, self._described_so_far)))

    @property
    def held(self) -> bool:
        """True while a refused write's events are kept in the crash buffer, to write later."""
        return self._writes.held

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

    # --- lifetime -------------------------------------------------------

    def _forked(self) -> None:
        """In a child made by fork(): the parent's threads, queued events and output are not ours.

        The parent writes what it had queued; the child starts with no writers
        and no consumer (its thread did not survive the fork), so that nothing
        is written twice. The child logs into its own output once it is given one.
        """
        self.registry.forked()     # a new lock: a thread that is gone may have held it
        self._consume_lock = threading.RLock()
        self._consuming = None
        self._sides_lock = threading.Lock()   # (an output that forked holds the parent's)
        self._sides_by = None
        self._side_jobs = []
        self._sides_deadline = None
        # The consumer's thread did not survive the fork: no drainer, no output. What the
        # parent had is kept for whoever gives the child its own (blog.default does).
        self.forked_drainer = self.pressure.drainer
        self.pressure = Backpressure(capacity=self.pressure.capacity, policy=self.pressure.policy)
        self.writers.forked(self.pressure)   # the parent's writers and channels: not ours
        self._output = Output(self.stats, self.name)
        self._writes = PlainWrites()   # the parent's buffer: blog.files.crashbuf lets go of it
        self.stats.events_held = 0
        self.descriptor = dict(self.descriptor, pid=os.getpid())

    def pending(self) -> int:
        """Events queued in the channels and not yet consumed."""
        with self.registry.lock:
            return sum(w.channel.count for w in self.writers.all)

    def unrecorded_drops(self) -> int:
        """Events the channels dropped that no output has recorded (a Dropped entry)."""
        with self.registry.lock:
            return sum(max(0, w.channel.dropped - self._reported_drops.get(w.id, 0))
                       for w in self.writers.all)
