"""Entries -> text lines in large blocks of UTF-8: what the ``bread`` command prints.

The Python path renders each event as an Event through a PrettyPrinter. The
C fast path (``bread/_lines.c``) renders a whole events frame at once:
this module gives it, once, everything that is fixed per call site (the
event format with the source's fields already rendered, and the message
template), per writer and per clock sync; an event it cannot render exactly
as Python does comes back here, one at a time. Both give the same bytes (a
property test says so).
"""

from __future__ import annotations

import array
from typing import Iterable, Iterator

from blogformat.entries import EventSource, RawEvent

from . import accel
from .entries import Entry
from .events import EventStream
from .frames import Frame
from .filters import NO_FILTER, Filter
from .merge import clamp64
from .native import DONE, PYTHON, NativeState, raw_event, utf8
from .render import BACKTRACE_MARK, SOURCE_TEXT, PrettyPrinter, colors

#: Lines per block on the Python path.
BLOCK_LINES = 512


def join_lines(lines: list[str]) -> bytes:
    """Lines as one block of bytes, each ending with a newline."""
    return utf8("\n".join(lines) + "\n")


class LineRenderer:
    """Renders the events of ``entries`` (from ``iter_entries(..., raw_events=True)``)."""

    #: About how many bytes of text the C renderer returns per call (memory stays bounded
    #: however much text the events of one frame make).
    C_MAX_OUT = 1 << 20

    def __init__(self, stream: EventStream, printer: PrettyPrinter, *, escape: bool,
                 source: str = "", flt: Filter = NO_FILTER) -> None:
        self.stream = stream
        self.printer = printer
        self.escape = escape
        self.source = source
        self.filter = flt
        self._offset = 0
        self._native: NativeState | None = None
        # The C renderer knows every placeholder but %k (fields): with it, Python renders.
        if accel.speedups is not None and all(code != "k" for _, code in printer.parts):
            date_items: list = []
            for lit, code in printer.date.parts:
                if lit:
                    date_items.append(utf8(lit))
                if code is not None:
                    date_items.append(ord(code))
            c = accel.speedups.Renderer(date_items, self._fallback, escape)
            c.max_out = self.C_MAX_OUT
            self._native = NativeState(stream, c, self._source_items, flt,
                                       self._colors if printer.color else None)

    def blocks(self, entries: Iterable[Entry | Frame]) -> Iterator[bytes]:
        """The rendered lines, each ending with a newline, in blocks: at least one per
        events frame (entries from ``iter_entries(..., raw_events=True)``)."""
        apply = self.stream.apply if self._native is None else self._native.apply
        for e in entries:
            if type(e) is Frame:
                yield from self._frame(e)
            else:
                apply(e)

    # --- Python path ---------------------------------------------------------

    def _line(self, raw: RawEvent) -> str | None:
        """The event's line; None if the filter leaves it out."""
        ev = self.stream.event(raw)
        if not self.filter.keeps(ev):
            return None
        return self.printer.line(ev, self.escape)


    def _python_frame(self, fr: Frame, skip: int = 0) -> Iterator[bytes]:
        """The frame's events from the ``skip``-th on, rendered by Python, in blocks."""
        lines = []
        size = 0
        for ev in self.stream.frame(fr, self.filter.keeps, self.source, skip):
            line = self.printer.line(ev, self.escape)
            lines.append(line)
            size += len(line)
            if len(lines) >= BLOCK_LINES or size >= self.C_MAX_OUT:
                yield join_lines(lines)
                lines = []
                size = 0
        if lines:
            yield join_lines(lines)

    def _fallback(self, data: bytes, writer_id: int, clock: int) -> bytes:
        """One event the C renderer leaves to Python: its bytes, writer and clock."""
        line = self._line(raw_event(data, self._offset, writer_id, clock, self.stream.types))
        return b"" if line is None else utf8(line + "\n")

    # --- runs of lines, for the sorted merge -------------------------------------

    def runs(self, entries: Iterable[Entry | Frame]) -> Iterator[int | tuple]:
        """For the sorted merge (``bread.merge``): each events frame's offset, then its
        kept lines as runs ``(writer id, text, keys)``, keys the Merger's int64 pairs
        (time, end of the line in text). Rendered by C where it can."""
        apply = self.stream.apply if self._native is None else self._native.apply
        for e in entries:
            if type(e) is not Frame:
                apply(e)
                continue
            yield e.offset
            n = self._native
            if n is None or not n.ok:
                yield from self._python_runs(e)
                continue
            c = n.renderer
            self._offset = e.offset
            text, keys, wid = c.keyed(e.payload)
            while True:
                if text:
                    yield wid, text, keys
                if c.state == DONE:
                    break
                if c.state == PYTHON:
                    yield from self._python_runs(e, skip=c.rendered)
                    break
                text, keys, wid = c.keyed(None)

    def _python_runs(self, fr: Frame, skip: int = 0) -> Iterator[tuple]:
        lines: list[bytes] = []
        keys = array.array("q")
        end = wid = 0
        for ev in self.stream.frame(fr, self.filter.keeps, self.source, skip):
            wid = ev.writer_prop.id
            line = utf8(self.printer.line(ev, self.escape) + "\n")
            lines.append(line)
            end += len(line)
            keys.append(clamp64(ev.ns))
            keys.append(end)
            if end >= self.C_MAX_OUT:
                yield wid, b"".join(lines), keys.tobytes()
                lines, keys, end = [], array.array("q"), 0
        if lines:
            yield wid, b"".join(lines), keys.tobytes()

    # --- C path --------------------------------------------------------------

    def _frame(self, fr: Frame) -> Iterator[bytes]:
        n = self._native
        if n is None or not n.ok:
            yield from self._python_frame(fr)
            return
        c = n.renderer
        self._offset = fr.offset
        out = c.render(fr.payload)
        while True:
            if out:
                yield out
            if c.state == DONE:
                return
            if c.state == PYTHON:   # from here on, the bytes are Python's to judge
                yield from self._python_frame(fr, skip=c.rendered)
                return
            out = c.render(None)

    @staticmethod
    def _colors(src: EventSource) -> tuple[bytes, bytes]:
        before, after = colors(src.severity)
        return before.encode(), after.encode()

    def _source_items(self, src: EventSource) -> list:
        """The event format for this source: literals with its fields rendered, codes for the rest."""
        items: list = []
        text = ""
        for lit, code in self.printer.parts:
            text += lit
            if code is None:
                continue
            if code in SOURCE_TEXT:
                text += SOURCE_TEXT[code](src)
                continue
            if code == "m" and src.backtrace:
                text += BACKTRACE_MARK
            if text:
                items.append(utf8(text))
                text = ""
            items.append(ord(code))
        if text:
            items.append(utf8(text))
        return items
