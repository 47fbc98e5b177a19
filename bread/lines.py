"""Entries -> text lines in large blocks of UTF-8: what the ``bread`` command prints.

The Python path renders each event as an Event through a PrettyPrinter. The
C fast path (``bread/_speedups.c``) renders a whole events frame at once:
this module gives it, once, everything that is fixed per call site (the
event format with the source's fields already rendered, and the message
template), per writer and per clock sync; an event it cannot render exactly
as Python does comes back here, one at a time. Both give the same bytes (a
property test says so).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from blogformat.entries import (ClockSync, EventSource, FileHeader, RawEvent, WriterProp,
                                decode_events)
from blogformat.placeholders import FormatError, parse
from blogformat.values import unpackb

from . import accel
from .entries import DECODE_ERRORS, Entry, undecodable
from .events import EventStream
from .frames import Frame
from .render import SOURCE_TEXT, PrettyPrinter, escape_controls

#: Lines per block on the Python path.
BLOCK_LINES = 512
#: Source and writer ids the C renderer keeps in its tables; others go through Python.
MAX_C_IDS = 65536
#: The C renderer's ``state`` after a call: frame done, more to come, Python reads the rest.
_DONE, _MORE, _PYTHON = 0, 1, 2


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


class LineRenderer:
    """Renders the events of ``entries`` (from ``iter_entries(..., raw_events=True)``)."""

    #: About how many bytes of text the C renderer returns per call (memory stays bounded
    #: however much text the events of one frame make).
    C_MAX_OUT = 1 << 20

    def __init__(self, stream: EventStream, printer: PrettyPrinter, *, escape: bool,
                 source: str = "") -> None:
        self.stream = stream
        self.printer = printer
        self.escape = escape
        self.source = source
        self._offset = 0
        date_items: list = []
        for lit, code in printer.date.parts:
            if lit:
                date_items.append(_utf8(lit))
            if code is not None:
                date_items.append(ord(code))
        s = accel.speedups
        self._c = None if s is None else s.Renderer(date_items, self._fallback, escape)
        if self._c is not None:
            self._c.max_out = self.C_MAX_OUT
        self._c_ok = True   # False while the clock sync in force does not fit the C renderer

    @property
    def uses_c(self) -> bool:
        """True if frames are rendered by the C fast path."""
        return self._c is not None

    def blocks(self, entries: Iterable[Entry | Frame]) -> Iterator[bytes]:
        """The rendered lines, each ending with a newline, in blocks."""
        lines: list[str] = []
        for e in entries:
            t = type(e)
            if t is RawEvent:   # the Python path's entries
                lines.append(self._line(e))
                if len(lines) >= BLOCK_LINES:
                    yield self._join(lines)
                    lines = []
            elif t is Frame:
                if lines:
                    yield self._join(lines)
                    lines = []
                yield from self._frame(e)
            else:
                self._apply(e)
        if lines:
            yield self._join(lines)

    # --- Python path ---------------------------------------------------------

    def _line(self, raw: RawEvent) -> str:
        line = self.printer(self.stream.event(raw))
        return escape_controls(line) if self.escape else line

    @staticmethod
    def _join(lines: list[str]) -> bytes:
        return _utf8("\n".join(lines) + "\n")

    def _python_frame(self, fr: Frame, skip: int = 0) -> Iterator[bytes]:
        """The frame's events from the ``skip``-th on, rendered by Python, in blocks."""
        lines = []
        try:
            for k, raw in enumerate(decode_events(fr.payload, fr.offset)):
                if k >= skip:
                    lines.append(self._line(raw))
                    if len(lines) >= BLOCK_LINES:
                        yield self._join(lines)
                        lines = []
        except DECODE_ERRORS as exc:
            self.stream.apply(undecodable(fr, exc, self.source))
        if lines:
            yield self._join(lines)

    def _fallback(self, data: bytes, writer_id: int, clock: int) -> bytes:
        """One event the C renderer leaves to Python: its bytes, writer and clock."""
        ev = unpackb(data)
        texts = ev[3] if len(ev) > 3 and type(ev[3]) is dict else {}
        return _utf8(self._line(RawEvent(self._offset, writer_id, ev[0], clock, ev[2], texts))
                     + "\n")

    # --- C path --------------------------------------------------------------

    def _frame(self, fr: Frame) -> Iterator[bytes]:
        c = self._c
        if c is None or not self._c_ok:
            yield from self._python_frame(fr)
            return
        self._offset = fr.offset
        out = c.render(fr.payload)
        while True:
            if out:
                yield out
            if c.state == _DONE:
                return
            if c.state == _PYTHON:   # from here on, the bytes are Python's to judge
                yield from self._python_frame(fr, skip=c.rendered)
                return
            out = c.render(None)

    def _apply(self, e: Entry) -> None:
        self.stream.apply(e)
        c = self._c
        if c is None:
            return
        t = type(e)
        if t is EventSource:
            if 0 <= e.id < MAX_C_IDS:
                c.add_source(e.id, self._source_items(e), self._message_items(e),
                             len(e.field_names))
        elif t is WriterProp:
            if 0 <= e.id < MAX_C_IDS:
                c.add_writer(e.id, _utf8(e.name), str(e.id).encode())
        elif t is ClockSync:
            self._set_sync(e)
        elif t is FileHeader:
            c.reset()
            self._c_ok = True

    def _set_sync(self, e: ClockSync) -> None:
        tz = self.stream.tz
        off = tz.utcoffset(None)
        try:
            self._c.set_sync(e.clock_value, e.frequency, e.ns_since_epoch,   # type: ignore[union-attr]
                             int(off.total_seconds()) if off is not None else 0,
                             _utf8(tz.tzname(None) or ""))
            self._c_ok = True
        except OverflowError:   # clocks beyond 64 bits: Python renders them
            self._c_ok = False

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
            if text:
                items.append(_utf8(text))
                text = ""
            items.append(ord(code))
        if text:
            items.append(_utf8(text))
        return items

    @staticmethod
    def _message_items(src: EventSource) -> list | None:
        """The message template as literals and argument indexes; None if Python must render it."""
        try:
            tpl = parse(src.format)
        except FormatError:
            return None
        items: list = []
        for i, ph in enumerate(tpl.placeholders):
            if ph.conversion is not None or ph.spec:
                return None
            if tpl.literals[i]:
                items.append(_utf8(tpl.literals[i]))
            if isinstance(ph.key, int):
                items.append(ph.key)
            elif ph.key in src.field_names:
                items.append(-1 - src.field_names.index(ph.key))
            else:
                return None
        if tpl.literals[-1]:
            items.append(_utf8(tpl.literals[-1]))
        return items
