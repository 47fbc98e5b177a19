"""The text sink: events -> lines in large blocks of UTF-8, what the ``bread`` command prints.

The Python path renders each event as an Event through a PrettyPrinter. The
C fast path (``bread/sinks/_lines.c``) renders a whole events frame at once: the
decoder (``bread.decode.decoder``) gives it, once, everything that is fixed per
call site (the event format with the source's fields already rendered, and
the message template: ``LineSink.source_items``), per writer and per clock sync;
an event it cannot render exactly as Python does comes back here, one at a time.
Both give the same bytes (a property test says so).
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import EventSource

from .. import accel
from ..decode.decoder import Native, utf8
from ..events import Event, Origin
from ..frames import Frame
from ..render import (BACKTRACE_MARK, PROCESS_TEXT, SOURCE_TEXT, TEXT_VERSION, PrettyPrinter,
                      colors, field_name)

if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator

    from .._speedups import Renderer

#: Lines per block on the Python path.
BLOCK_LINES = 512
#: The longest text of its field names a source may have for the C renderer to show its
#: fields (%K): with its values' (bread/sinks/_lines.c), far below a cut message.
MAX_NAMES_TEXT = 4096
#: About how many bytes of text a block holds at most (the C renderer's per call too: memory
#: stays bounded however much text the events of one frame make).
MAX_BLOCK = 1 << 20


def join_lines(lines: list[str]) -> bytes:
    """Lines as one block of bytes, each ending with a newline."""
    return utf8("\n".join(lines) + "\n")


def line_blocks(events: Iterable[Event], printer: PrettyPrinter, escape: bool) -> Iterator[bytes]:
    """The events rendered by Python, in blocks of at most ``BLOCK_LINES`` lines or about
    ``MAX_BLOCK`` bytes."""
    lines = []
    size = 0
    for ev in events:
        line = printer.line(ev, escape)
        lines.append(line)
        size += len(line)
        if len(lines) >= BLOCK_LINES or size >= MAX_BLOCK:
            yield join_lines(lines)
            lines = []
            size = 0
    if lines:
        yield join_lines(lines)


class LineSink(Native):
    """Events as text lines rendered by ``printer`` (``bread.decode.decoder.Sink``): blocks of
    lines, at least one per events frame; for the merge, each event's line. Its own C side
    (``Native``): the Renderer's ``render`` call, but for a format with ``%k`` (fields),
    which Python renders."""

    metadata = None

    def __init__(self, printer: PrettyPrinter, *, escape: bool) -> None:
        self.printer = printer
        self.escape = escape
        self.decorate: Callable[[EventSource], tuple[bytes, bytes]] | None = \
            _colors if printer.color else None
        self.native: Native | None = None if any(
            code == "k" for _, code in printer.parts) else self
        #: The date format as the C renderer takes it: literals (UTF-8) and codes.
        self.date_items: list[bytes | int] = []
        for lit, code in printer.date.parts:
            if lit:
                self.date_items.append(utf8(lit))
            if code is not None:
                self.date_items.append(ord(code))

    def item(self, ev: Event) -> bytes:
        """One event's line (ending with a newline), in UTF-8."""
        return utf8(self.printer.line(ev, self.escape) + "\n")

    def python(self, events: Iterator[Event]) -> Iterator[bytes]:
        return line_blocks(events, self.printer, self.escape)

    def finish(self) -> tuple:
        return ()

    # --- its C side --------------------------------------------------------------

    def renderer(self, fallback: Callable[[bytes, int, int], Any],
                 keyed: bool) -> Renderer:
        c = accel.speedups.Renderer(self.date_items, fallback,  # type: ignore[union-attr]
                                    self.escape)
        c.max_out = MAX_BLOCK
        return c

    def step(self, c: Any) -> Callable[[Frame | None], bytes]:
        return c.render

    def fallback(self, ev: Event) -> bytes:
        return self.item(ev)

    def source_items(self, src: EventSource, origin: Origin) -> list:
        """The event format for this source of a stream from ``origin``: literals with the
        source's fields and the process's (host, pid, program) rendered, codes for the
        rest (``%K``: a literal `` name=`` and the field's index, ``-(j + 1)``, per field).
        A file header starts the sources afresh, so the process is fixed per source."""
        items: list = [ord("x")] if src.field_names and self.printer.shows_tracebacks(origin) \
            else []   # an event with an exception among its fields: Python shows it
        text = ""
        for lit, code in self.printer.parts:
            text += lit
            if code is None:
                continue
            if code in SOURCE_TEXT:
                text += SOURCE_TEXT[code](src)
                continue
            if code in PROCESS_TEXT:
                text += PROCESS_TEXT[code](origin)
                continue
            if code == "K":
                if not src.field_names or origin.text_version < TEXT_VERSION:
                    continue   # shows nothing
                names = [field_name(n) for n in src.field_names]
                if len(set(names)) == len(names) and sum(map(len, names)) <= MAX_NAMES_TEXT:
                    for j, name in enumerate(names):   # " name=" then the field's value
                        items.append(utf8(f"{text} {name}="))
                        items.append(-(j + 1))
                        text = ""
                    continue
                code = "k"   # a code C does not know: Python renders the event
            if code == "m" and src.backtrace:
                text += BACKTRACE_MARK
            if text:
                items.append(utf8(text))
                text = ""
            items.append(ord(code))
        if text:
            items.append(utf8(text))
        return items


def _colors(src: EventSource) -> tuple[bytes, bytes]:
    before, after = colors(src.severity)
    return before.encode(), after.encode()
