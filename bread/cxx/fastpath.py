"""C++ binlog files' lines by the C printer (``bread/cxx/_binlog.c``), where it is built.

The C printer renders the events of the call sites it was given, whose values it reads;
each entry it stops before (metadata, any other event, damage) is read here, by the
Python reference (``entries``, ``values``, ``render``), which also keeps the C tables up
to date: what C prints is what Python would print.
"""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING, BinaryIO, Callable

from blogformat.entries import ClockSync, EventSource, WriterProp

from .entries import BinlogError, RawEvent, check_size, entry, iter_entries
from .printer import NO_SYNC, NO_WRITER, CxxEvent, CxxPrinter, as_bytes
from .values import decode

if TYPE_CHECKING:
    from .._binlog import Printer
    from ..accel import Binlog

#: Bytes read at once.
CHUNK = 1 << 20
#: Why the C printer stopped (``bread/cxx/_binlog.c``).
STOP_END = 0
_U32 = struct.Struct("<I")


class _Tables:
    """What the stream has said so far, in Python and in the C printer's tables."""

    def __init__(self, c: Printer, printer: CxxPrinter) -> None:
        self.c = c
        self.printer = printer
        self.sources: dict[int, EventSource] = {}
        self.writer, self.sync = NO_WRITER, NO_SYNC

    def take(self, payload: bytes, offset: int) -> tuple[str, int]:
        """One entry the C printer left: applied, or its line (Python's) and clock."""
        e = entry(payload, offset)
        if isinstance(e, RawEvent):
            src = self.sources.get(e.source_id)
            if src is None:
                raise BinlogError(f"Event has invalid source id: {e.source_id}")
            return self.printer(CxxEvent(src, self.writer, self.sync, e.clock,
                                         decode(src.arg_tags, e.args), e.offset)), e.clock
        if isinstance(e, EventSource):
            self.sources[e.id] = e
            self.c.add_source(e.id, *self.printer.plan(e))
        elif isinstance(e, WriterProp):
            self.writer = e
            self.c.set_writer(as_bytes(e.name), str(e.id).encode())
        elif isinstance(e, ClockSync):
            self.sync = e
            m = (1 << 64) - 1
            self.c.set_sync(e.clock_value & m, e.frequency & m, e.ns_since_epoch & m,
                            e.tz_offset, as_bytes(e.tz_name))
        return "", 0


def print_lines(binlog: Binlog, f: BinaryIO, printer: CxxPrinter,
                write: Callable[[bytes], object], sort: bool = False) -> None:
    """Write the lines of ``f`` with the C module ``binlog``: in file order, or with
    ``sort`` all at the end, stably sorted by their clocks. Damage raises BinlogError (the
    C++ bread's words) after the lines before it (sorted: none)."""
    tables = _Tables(binlog.Printer(as_bytes(printer.date.pattern)), printer)
    c = tables.c
    buf, pos, base = b"", 0, 0     # base: the offset of buf[0] in the stream
    while True:
        lines, pos, stop = c.render(buf, pos, sort)
        if lines:
            write(lines)
        if stop != STOP_END:
            size = _U32.unpack_from(buf, pos)[0]
            line, clock = tables.take(buf[pos + 4:pos + 4 + size], base + pos)
            if line and sort:
                c.hold(clock, as_bytes(line))
            elif line:
                write(as_bytes(line))
            pos += 4 + size
            continue
        if len(buf) - pos >= 4:
            check_size(_U32.unpack_from(buf, pos)[0], base + pos)
        chunk = f.read(CHUNK)
        base += pos
        buf, pos = buf[pos:] + chunk, 0
        if not chunk:
            break
    for _ in iter_entries(io.BytesIO(buf)):   # what is left is cut short: Python says how
        pass
    if sort:
        c.write_sorted(write)
