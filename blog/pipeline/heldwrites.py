"""HeldWrites: a crash buffer's hold on the session's writes (docs/format.md 15).

With a crash buffer, each consume's takes are numbered (the channel files mark the
halves they take), the write in progress is recorded (where, how long) before it
starts, and a write the output refuses is not lost: its events stay taken in the
channel files (a kill now recovers them), what it left in the file is cut, and the
next consume writes it again before it takes anything more from the channels. A
consume cut between the files of a size-rotated set (``blog.pipeline.parts``) is
recorded part by part (``write_parts``): each half says how much of it is in a file
already, so that a kill between parts recovers only the rest, and a refused part holds
only what is left from it. The Session asks it what to write (``take``), writes through
it (``write``, ``write_parts``: around the Output's, it holds or settles) and tells it
the write is done (``done``); moving to
another buffer, the held write goes along (``hand_over``) or is left on disk for the next
start of the log (``let_go``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from blogformat.entries import Metadata

from ..files.crashbuf import CrashBuffer, Slot, file_position
from . import parts
from .output import Output
from ..report import report
from .stats import SessionStats
from .streams import OutputStream

if TYPE_CHECKING:
    from .channel import AnyTaken
    from .writer import SessionWriter

#: What one consume took: each writer with what its channel held.
Takes = list[tuple["SessionWriter", "AnyTaken"]]


class HeldWrites:
    """The consumes of a session into the outputs while ``buffer`` mirrors its channels."""

    def __init__(self, buffer: CrashBuffer, stats: SessionStats) -> None:
        self.buffer = buffer
        self._stats = stats
        self._held: Takes | None = None   # a consume the output refused, kept in the buffer
        self._seq = 0                     # the number of the consume being written (or held)
        # Where the file ended before the held write's first try (device, inode, size).
        self._at: tuple[int, int, int] | None = None
        # A consume cut between files (blog.pipeline.parts): where the held events begin
        # in each writer's half (the rest in files already), and whether halves hold a
        # ``from`` or ``rest`` to clear once it is written.
        self._from: dict[int, int] = {}
        self._in_parts = False
        self.parted: tuple[list[bytes], list[AnyTaken]] = ([], [])   # see write_parts

    @property
    def held(self) -> bool:
        """True while a refused write's events are kept in the crash buffer, to write later."""
        return self._held is not None

    def new_stream(self) -> None:
        """The session writes to another stream (or the file opened again): what a refused
        write left in the old one is not ours to cut."""
        self._at = None

    def take(self, writers: list[SessionWriter], stream: OutputStream) -> tuple[Takes, bool] | None:
        """What this consume writes, and True if it is a held write tried again: that first,
        whole (None while what its last try left in the file cannot be cut), else what
        the channels hold, taken as the next consume."""
        if self._held is not None:
            return (self._held, True) if self._cut_back(stream) else None
        self._seq = self.buffer.next_seq()
        return [(w, w.channel.take(self._seq)) for w in writers], False

    def write(self, out: Output, stream: OutputStream, descriptor: dict, meta: list[Metadata],
              batches: list[bytes], taken: Takes, n_events: int) -> int | None:
        """``out.write`` of what ``take`` gave, the write in progress recorded in the buffer
        first (only when there is something to write). Returns the bytes written, or None
        if the output refused it and its ``n_events`` are held: their halves stay taken in
        the buffer, and what the refused write left in the file is cut, so that none is
        written twice."""
        if self._from:        # what is left of a consume cut between files: recorded as a part
            return self.write_parts(out, stream, descriptor, taken, lambda part, _: (
                part(meta, batches, n_events, taken) or 0,) * 2)[0]
        written = self._attempt(out, stream, descriptor, meta, batches, taken, n_events)
        if written is None:
            self._hold(taken, stream)
            return None
        self._held = None
        self._at = None
        self._stats.events_held = 0
        return written

    def write_parts(self, out: Output, stream: OutputStream, descriptor: dict, taken: Takes,
                    cut: Callable[[parts.WritePart, Callable[[int], None]], tuple[int, int]]
                    ) -> tuple[int | None, int]:
        """Write what ``take`` gave in parts: ``cut(part, switch)`` is ``parts.write_parts``
        with ``part`` as its writer and ``switch`` told of a file's Summary. Each part is
        recorded in the buffer (docs/format.md 15): before its write, each half's ``rest``
        (what the part leaves out), then the write in progress; after it, each half's
        ``from`` (what is in files now), then ``writing`` cleared. The Summary that closes
        a file is recorded as a write too, cleared before the next part. Returns (bytes
        written, or None if a part was refused: what is left from that part on is held;
        bytes of the first part written). The frames and takes of the parts written are
        then in ``parted``."""
        start = {w.id: self._from.get(w.id, 0) for w, _ in taken}
        at = dict(start)          # where the next part begins in each writer's half
        finished: set[int] = set()
        lengths = {w.id: len(t.data) for w, t in taken}
        refused = False
        self.parted = ([], [])

        def part(meta: list[Metadata], batches: list[bytes], n: int,
                 pieces: parts.Pieces) -> int | None:
            nonlocal refused
            ends = dict(at)
            for w, p in pieces:
                ends[w.id] += len(p.data)
            self.buffer.covered(self._seq, {})    # a Summary written since the last part
            self.buffer.leaves(self._seq, ends)
            written = self._attempt(out, stream, descriptor, meta, batches, pieces, n)
            if written is None:
                refused = True
                return None
            self.buffer.covered(self._seq, ends)
            at.update(ends)
            self.parted[0].extend(batches)
            self.parted[1].extend(p for _, p in pieces)
            finished.update(w.id for w, _ in pieces
                            if ends[w.id] - start[w.id] == lengths[w.id])
            return written

        def switch(n: int) -> None:
            self.buffer.writing(self._seq, file_position(stream), n)

        total, first = cut(part, switch)
        self._in_parts = True
        if not refused:
            self._held = self._at = None
            self._from = {}
            self._stats.events_held = 0
            return total, first
        held = [(w, parts.remainder(t, at[w.id] - start[w.id])) for w, t in taken
                if w.id not in finished]
        self._from = {w.id: at[w.id] for w, _ in held}
        self._hold(held, stream)
        return None, first

    def _attempt(self, out: Output, stream: OutputStream, descriptor: dict,
                 meta: list[Metadata], batches: list[bytes], taken: Takes,
                 n_events: int) -> int | None:
        """One ``out.write``, recorded in the buffer before it starts; None if refused with
        events (held by the caller)."""
        def before(n: int) -> None:
            self._at = where = file_position(stream)
            self.buffer.writing(self._seq, where, n)

        written = out.write(descriptor, meta, batches, n_events, [t for _, t in taken],
                            before=before, hold=n_events > 0)
        return None if n_events and not written else written

    def _hold(self, taken: Takes, stream: OutputStream) -> None:
        """Keep ``taken`` (events of a refused write) to write again; what the write left in
        the file is cut, then ``writing`` cleared."""
        self._held = taken
        self._stats.events_held = sum(t.count for _, t in taken)
        if self._cut_back(stream):
            self.buffer.failed(self._seq)   # only once cut: until then recovery must cut it

    def done(self, retired: list[SessionWriter]) -> None:
        """The write is done (written, or its loss counted): the halves are free, and the
        files of the writers that ended go."""
        self.buffer.written(self._seq)
        if self._in_parts:        # (never held here: a held consume is not done)
            self.buffer.unsplit(self._seq)
            self._in_parts = False
        for w in retired:
            self.buffer.retire(w.id)

    def _cut_back(self, stream: OutputStream) -> bool:
        """Cut what a refused write left in the file (it was one writer's: the stream's lock);
        True if the file ends where it did before that write (or is not a file)."""
        at = self._at
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
            self._stats.last_error = f"{type(exc).__name__}: {exc}"
            return False

    # --- moving to another buffer -------------------------------------------

    def hand_over(self, new: HeldWrites | None, slots: dict[int, Slot | None],
                  writers: list[SessionWriter]) -> tuple[int, int]:
        """The session moves to ``new`` (its channels mirrored into ``slots`` already), or to
        no buffer; with its locks held. Returns (events left in this buffer, events lost).

        A held write moves to ``new`` with the channels, and is written by the next
        consume; with None it stays in this buffer, and so do the events logged since
        (what the mirror missed is added): taken from the channels, never written
        twice. The next start of its log appends them all. Those of a writer this
        buffer has no file for are in no file: lost, and counted."""
        left = bare = 0
        if self._held is not None:
            taken = self._held
            if new is not None:
                new.adopt(taken, self._at, slots)
            else:
                for w, t in taken:
                    if self.buffer.has_slot(w.id):
                        left += t.count
                    else:
                        bare += t.count
                for w in writers:
                    rest = w.channel.take()
                    if self.buffer.keep(w.id, rest.data):
                        left += rest.count
                    else:
                        bare += rest.count
                self._stats.events_lost += bare
                self._stats.events_held = 0
            self._held = self._at = None
        if new is not None:
            self.buffer.release()   # the new buffer has it all: this one claims nothing
        return left, bare

    def adopt(self, taken: Takes, at: tuple[int, int, int] | None,
              slots: dict[int, Slot | None]) -> None:
        """Hold the write another buffer held (``at``: where its file ended before its first
        try), as this buffer's next consume: its events go into the idle halves of
        ``slots``, the channel files here."""
        self._seq = seq = self.buffer.next_seq()
        self._from = {}           # the halves here hold the held events only
        unheld = sum(t.count for w, t in taken if t.data and not (
            (slot := slots.get(w.id)) is not None and slot.hold(t.data, t.base, seq)))
        self._held, self._at = taken, at
        if unheld:
            report(f"blog: {unheld} held event(s) do not fit in the new crash "
                   "buffer: they are written when the output works, but a kill "
                   "before that loses them")

    def let_go(self, left: int, bare: int) -> None:
        """After ``hand_over`` (the locks let go): close this buffer, or leave it on disk
        with the ``left`` events for the next start of its log."""
        old = self.buffer
        if bare:
            report(f"blog: {bare} event(s) the output refused are lost: the crash buffer had "
                   "no file for their threads")
        if left:
            old.leave()
            report(f"blog: {left} event(s) the output refused are left in the crash buffer "
                   f"{old.directory}: the next start of {old.log_path} with crash_buffer=True "
                   f"(or bread --recover {old.log_path}) appends them")
        else:
            old.close()
