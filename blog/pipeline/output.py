"""Output: frames what a consume took, writes it to an OutputStream, and counts what it refuses.

The session decides what to write (metadata first, then event batches);
this module turns it into frames (docs/format.md sections 2 to 5), completes
short writes, and accounts for a stream that fails: the loss is counted,
reported once on stderr, and recorded (a Lost entry) in the next write that
succeeds, which starts a new stream with a header. A stream closed cleanly
ends with a Summary entry (``finish``); a stream that rotates (``RotatingFile``)
is finished and started afresh, header and all metadata, in its next file.
"""

from __future__ import annotations

import time

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import (MAX_METADATA_TEXT, MAX_WRITERS, EventSource, Lost, Metadata,
                                WriterProp, header_payload, metadata_frames, text_size)
from blogformat.eventframes import BatchHeader
from blogformat.frames import FRAME_EVENTS, FRAME_HEADER, frame_bytes

from ..report import report
from .stats import SessionStats
from .streams import OutputStream
from .summary import Tally

if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from .channel import AnyTaken
    from .writer import SessionWriter

def _described(metadata: Sequence[Metadata]) -> tuple[int, int]:
    """(WriterProps, characters of source and writer text) in ``metadata``."""
    writers = text = 0
    for m in metadata:
        if type(m) is WriterProp:
            writers += 1
            text += text_size(m)
        elif type(m) is EventSource:
            text += text_size(m)
    return writers, text


def events_frame(header: BatchHeader, events: bytes) -> bytes:
    """An events frame: the batch header, then events already encoded back to back."""
    return frame_bytes(FRAME_EVENTS, header.encode() + events)


def writer_frames(w: SessionWriter, taken: AnyTaken, out: list[bytes]) -> int:
    """Frame what was taken from one writer's channel into ``out``; the number of events.

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


class Output:
    """One session's way to its current OutputStream (anything with ``write(bytes)``).

    ``started`` is False until the stream has the header and all metadata, and
    again after a failed write: what follows a failure is a new stream, so
    that a reader never depends on bytes that may be missing.
    """

    def __init__(self, stats: SessionStats, name: str) -> None:
        self.stream: OutputStream | None = None
        self.started = False
        self._stats = stats
        self._name = name
        self._lost_events = 0      # lost since the last good write, not yet recorded
        self._lost_bytes = 0
        self._lost_since = 0       # the clock of the first write lost since the last good one
        self._failing = False
        self._told: set[str] = set()   # what this spell of failure was said to do to events
        self.tally = Tally()       # what the current stream holds, for its Summary
        self._writers = 0          # WriterProps and text described in the current stream,
        self._text = 0             # against the limits of a stream (format.md 9.1)

    @property
    def failing(self) -> bool:
        """True from a failed write until a write succeeds."""
        return self._failing

    def use(self, stream: OutputStream | None) -> None:
        """Write to ``stream`` from now on (a new stream: header and metadata first)."""
        self.stream = stream
        self.started = False

    def rotate_if_due(self, nbytes: int, before: Callable[[int], None] | None = None) -> bool:
        """If the stream wants a new file before ``nbytes`` more bytes, finish this one and switch.

        A stream rotates if it has ``rotate_due(nbytes)`` and ``rotate()``
        (``blog.RotatingFile``; ``FileOutputStream`` when its file was deleted
        or truncated). Returns True if it did: the next write starts the new
        file with a header and all metadata. ``before`` is as ``finish``'s.
        """
        due = getattr(self.stream, "rotate_due", None)
        if due is None or not due(nbytes):
            return False
        if not self.started:
            pass    # nothing written since the last switch or failure: nothing to close
        elif getattr(self.stream, "rotate_finishes", True):
            self.finish(before)
        else:     # the old file is gone or truncated: nothing to close there
            self.started = False
            self.tally = Tally()
        try:
            getattr(self.stream, "rotate")()   # it has rotate_due: a rotating stream
        except Exception as exc:   # the next write fails and counts the loss
            self._stats.last_error = f"{type(exc).__name__}: {exc}"
        return True

    def passes_limits(self, metadata: Sequence[Metadata]) -> bool:
        """True if writing ``metadata`` would describe more writers or text than one stream
        may hold: the session then starts a new stream (live writers only) instead."""
        writers, text = _described(metadata)
        return self._writers + writers > MAX_WRITERS or self._text + text > MAX_METADATA_TEXT

    def finish(self, before: Callable[[int], None] | None = None) -> bool:
        """End the current stream cleanly: write its Summary entry. Returns True if written.

        The next write starts a new stream (a header and all metadata). ``before(length)``
        is told the length about to be written (as ``write``'s).
        """
        if not self.started or self.stream is None:
            return False
        summary = self.tally.summary()
        data = b"".join(metadata_frames([summary]))
        if before is not None:
            before(len(data))
        ok = self._write_all(data, 0)
        self.started = False
        self.tally = Tally()
        return ok

    def write(self, descriptor: dict, metadata: list[Metadata], batches: list[bytes],
              n_events: int, taken: Sequence[Any] = (),
              before: Callable[[int], None] | None = None, hold: bool = False) -> int:
        """Write the header (if the stream needs it), ``metadata`` and ``batches``; return bytes
        written.

        ``metadata`` must be all of the session's metadata if ``started`` is
        False; ``taken`` are the channel takes the batches were framed from
        (counted for the Summary). A write the stream refuses returns 0 and is
        counted as lost. ``before(length)`` is told the length about to be written (the
        crash buffer's record of the write in progress). With ``hold``, a refused write is
        not counted lost: the caller keeps its events (in the crash buffer) and tries again.
        """
        parts, metadata = self._head(descriptor, metadata)
        parts.extend(batches)
        if not batches and not metadata:
            return 0
        data = b"".join(parts)
        if before is not None:
            before(len(data))
        if not self._write_all(data, 0 if hold else n_events, hold):
            return 0
        if not self.started:
            self.tally = Tally()
            self._writers = self._text = 0
        self.started = True
        writers, text = _described(metadata)
        self._writers += writers
        self._text += text
        self.tally.add_metadata(metadata)
        for t in taken:
            self.tally.add_events(t)
        self._lost_events = self._lost_bytes = 0
        self._stats.events_written += n_events
        self._stats.bytes_written += len(data)
        return len(data)

    def head_size(self, descriptor: dict, metadata: list[Metadata]) -> int:
        """Bytes a ``write`` of ``metadata`` adds before its batches (the header if the stream
        needs it, the metadata, a Lost entry if one is due)."""
        return sum(map(len, self._head(descriptor, metadata)[0]))

    def _head(self, descriptor: dict,
              metadata: list[Metadata]) -> tuple[list[bytes], list[Metadata]]:
        """The frames a write starts with, and the metadata they hold."""
        parts: list[bytes] = []
        if not self.started:
            parts.append(frame_bytes(FRAME_HEADER, header_payload(descriptor)))
        if self._lost_events or self._lost_bytes:
            metadata = [*metadata, Lost(self._lost_events, self._lost_bytes, time.time_ns(),
                                        since=self._lost_since)]
        if metadata:
            parts.extend(metadata_frames(metadata))
        return parts, metadata

    def _write_all(self, data: bytes, n_events: int, hold: bool = False) -> bool:
        stats = self._stats
        # Any stream: its write may return the bytes it took (a raw file), or anything else
        # (None: all of them).
        stream: Any = self.stream
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
            stats.write_errors += 1
            stats.last_error = f"{type(exc).__name__}: {exc}"
            if not hold:
                stats.events_lost += n_events
                stats.bytes_lost += len(data)
                if not (self._lost_events or self._lost_bytes):
                    self._lost_since = time.time_ns()
                self._lost_events += n_events
                self._lost_bytes += len(data)
            self.started = False   # the next good write starts with a header and all metadata
            # Said once per spell of failure, and once more for what it does to events
            # (lost, or held in the crash buffer) when the first failed write held none.
            kind = "held" if hold else "lost" if n_events else ""
            if not self._failing or (kind and kind not in self._told):
                self._told.add(kind)
                report(f"blog: writing session {self._name!r} failed ({stats.last_error}); "
                       + {"held": "its events are kept in the crash buffer until the output "
                                  "recovers (a full channel then blocks or drops, as its "
                                  "overflow policy says)",
                          "lost": "events are being lost until the output recovers",
                          "": "it is tried again with the next write"}[kind])
            self._failing = True
            return False
        if self._failing:
            self._failing = False
            self._told = set()
            report(f"blog: session {self._name!r} output recovered; "
                   f"{stats.events_lost} event(s) lost in total")
        return True
