"""The C fast path's tables kept in step with an EventStream (``bread/_speedups.c``).

The C Renderer knows call sites, writers and the clock sync only as this
module tells it, from the same entries the Python EventStream reads: what it
renders is therefore what Python would, for the same state. Used by
``bread.lines`` (text) and ``bread.batches`` (columns).
"""

from __future__ import annotations

from typing import Any, Callable

from blogformat.entries import ClockSync, EventSource, FileHeader, WriterProp
from blogformat.placeholders import FormatError, parse

from .entries import Entry
from .events import EventStream

#: Source and writer ids the C renderer keeps in its tables; others go through Python.
MAX_C_IDS = 65536
#: The C renderer's ``state`` after a call: frame done, more to come, Python reads the rest.
DONE, MORE, PYTHON = 0, 1, 2


def utf8(text: str) -> bytes:
    """Text as bread writes it: UTF-8, a lone surrogate as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace")


def message_items(src: EventSource) -> list | None:
    """The message template as literals and argument indexes; None if Python must render it.

    An index ``i >= 0`` is the i-th positional argument; ``-1 - j`` the j-th
    keyword field. Conversions, format specs, a field the source does not
    name and a format that does not parse are left to Python.
    """
    try:
        tpl = parse(src.format)
    except FormatError:
        return None
    items: list = []
    for i, ph in enumerate(tpl.placeholders):
        if ph.conversion is not None or ph.spec:
            return None
        if tpl.literals[i]:
            items.append(utf8(tpl.literals[i]))
        if isinstance(ph.key, int):
            items.append(ph.key)
        elif ph.key in src.field_names:
            items.append(-1 - src.field_names.index(ph.key))
        else:
            return None
    if tpl.literals[-1]:
        items.append(utf8(tpl.literals[-1]))
    return items


class NativeState:
    """Applies entries to ``stream`` and tells the C ``renderer`` what changed.

    ``source_items(src)`` gives the event-format items of a source (text
    output) or ``[]`` (columns). ``ok`` is False while the clock sync in force
    does not fit the C renderer (clocks beyond 64 bits): then Python reads.
    """

    def __init__(self, stream: EventStream, renderer: Any,
                 source_items: Callable[[EventSource], list]) -> None:
        self.stream = stream
        self.renderer = renderer
        self.source_items = source_items
        self.ok = True

    def apply(self, e: Entry) -> None:
        self.stream.apply(e)
        c = self.renderer
        t = type(e)
        if t is EventSource:
            if 0 <= e.id < MAX_C_IDS:
                c.add_source(e.id, self.source_items(e), message_items(e), len(e.field_names))
        elif t is WriterProp:
            if 0 <= e.id < MAX_C_IDS:
                c.add_writer(e.id, utf8(e.name), str(e.id).encode())
        elif t is ClockSync:
            tz = self.stream.tz
            off = tz.utcoffset(None)
            try:
                c.set_sync(e.clock_value, e.frequency, e.ns_since_epoch,
                           int(off.total_seconds()) if off is not None else 0,
                           utf8(tz.tzname(None) or ""))
                self.ok = True
            except OverflowError:   # clocks beyond 64 bits: Python reads them
                self.ok = False
        elif t is FileHeader:
            c.reset()
            self.ok = True
