"""The rows sink: events -> JSON lines or CSV rows in blocks of UTF-8, what ``bread -o
jsonl`` and ``bread -o csv`` print.

``bread.sinks.json`` writes each Event (the Python path, the reference). The C fast
path (``bread/sinks/_lines.c``, in the form the renderer is given) writes whole events
frames: the decoder (``bread.decode.decoder``) gives it, once per call site of a stream,
the row's parts that depend on nothing else (severity, category, the call site,
host, pid, program: the keys of ``json.event_object`` and the cells of
``json.csv_cells``, made here from a template Event by that same code), once
per writer its name's JSON or cell; C writes the time, the message and the
values' JSON of each event. What C leaves to Python comes back here, one event at
a time: values other than None, bools, ints within 64 bits, floats and str (lists,
dicts, big ints, exceptions, rich values), a str with a lone surrogate, a message
C does not render (conversions, format specs, past MAX_MESSAGE), values whose
JSON might pass MAX_JSON, a field name given twice, an unknown call site or
writer, a time beyond 64 bits, and for ``jsonl`` every event of a source with a
lone surrogate in its format. Both give the same bytes
(tests/test_export_parity.py).
"""

from __future__ import annotations

import csv
import datetime as _dt
import functools
import io
from typing import Any, Callable, Iterator

from blogformat.entries import EventSource, WriterProp

from .. import accel
from ..decode.decoder import Native, utf8
from ..events import Event, Origin
from ..frames import Frame
from .json import (CSV_COLUMNS, ascii_json, csv_cells, event_object, iso_parts, json_line,
                   text_cell)
from .lines import BLOCK_LINES, MAX_BLOCK

#: The forms, as the C renderer's ``form`` names them.
FORMS = {"jsonl": 1, "csv": 2}
#: What C writes per event (``bread/decode/_extension.h``'s IT_ codes), by the key or column.
_DATE, _WRITER, _WRITER_ID, _MESSAGE, _ARGS, _FIELDS, _PYTHON = (
    ord("d"), ord("n"), ord("t"), ord("m"), ord("["), ord("{"), ord("?"))
_PER_EVENT = {"time": _DATE, "writer": _WRITER, "writer_id": _WRITER_ID, "message": _MESSAGE,
              "args": _ARGS, "fields": _FIELDS}
#: The ISO time of the C renderer: its date items (``json.iso_time``; ``o`` the offset).
_ISO_ITEMS: list[bytes | int] = [ord("Y"), b"-", ord("m"), b"-", ord("d"), b"T", ord("H"), b":",
                                 ord("M"), b":", ord("S"), b".", ord("N"), ord("o")]
_UTC = _dt.timezone.utc
_NO_WRITER = WriterProp(0, "")


def csv_header() -> bytes:
    """The header row of ``-o csv``."""
    return utf8(",".join(CSV_COLUMNS) + "\r\n")


class RowSink(Native):
    """Events as JSON lines (``form`` ``"jsonl"``) or CSV rows (``"csv"``, no header) in the
    time zone ``zone`` (None: each writer's), ``bread.decode.decoder.Sink``: blocks of
    rows, at least one per events frame; for the merge, each event's row. ``escape`` and
    ``quote_formulas``: the CSV cells' (``json.csv_rows``). Its own C side (``Native``):
    the Renderer's ``render`` call in its ``form``."""

    metadata = None

    def __init__(self, form: str, zone: _dt.tzinfo | None = None, *, escape: bool = True,
                 quote_formulas: bool = True) -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {sorted(FORMS)}, not {form!r}")
        self.form = form
        self.zone = zone
        self.escape = escape and form == "csv"   # (JSON lines are exact)
        self.quote_formulas = quote_formulas
        self._buf = io.StringIO()
        self._csv = csv.writer(self._buf, lineterminator="\r\n")
        self.native: Native | None = self

    def item(self, ev: Event) -> bytes:
        """One event's row, made by Python (``bread.sinks.json``)."""
        if self.form == "jsonl":
            return json_line(ev, self.zone).encode()
        self._csv.writerow(csv_cells(ev, self.zone, escape=self.escape,
                                     quote_formulas=self.quote_formulas))
        return utf8(self._take())

    def _take(self) -> str:
        text = self._buf.getvalue()
        self._buf.seek(0)
        self._buf.truncate()
        return text

    def _cell(self, value: Any) -> str:
        """A value as its CSV cell: quoted where csv.writer quotes it."""
        self._csv.writerow((value, ""))
        return self._take()[:-3]   # less the empty cell and the line end

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Any:
        c = accel.speedups.Renderer(_ISO_ITEMS, fallback, self.escape)  # type: ignore[union-attr]
        c.max_out = MAX_BLOCK
        c.form = FORMS[self.form]
        c.quote_formulas = self.quote_formulas
        if self.zone is not None:
            c.set_zone(functools.partial(iso_parts, tz=self.zone))
        return c

    def step(self, c: Any) -> Callable[[Frame | None], bytes]:
        return c.render

    def python(self, events: Iterator[Event]) -> Iterator[bytes]:
        rows: list[bytes] = []
        size = 0
        for ev in events:
            r = self.item(ev)
            rows.append(r)
            size += len(r)
            if len(rows) >= BLOCK_LINES or size >= MAX_BLOCK:
                yield b"".join(rows)
                rows, size = [], 0
        if rows:
            yield b"".join(rows)

    def finish(self) -> tuple:
        return ()

    def fallback(self, ev: Event) -> bytes:
        return self.item(ev)

    def writer_text(self, w: WriterProp) -> bytes:
        """What C writes as the writer of each event of ``w``: its name's JSON, or its
        cell."""
        if self.form == "jsonl":
            return ascii_json(w.name).encode()
        return utf8(self._cell(text_cell(w.name, self.escape, self.quote_formulas)))

    def source_items(self, src: EventSource, origin: Origin) -> list:
        """The row of an event of ``src`` from ``origin`` as literals, made from a template
        Event by ``bread.sinks.json``, and codes where C writes the event's own parts."""
        ev = Event(src, _NO_WRITER, 0, 0, _UTC, (), None, {}, 0, origin)
        items: list = []
        if self.form == "jsonl":
            if not _utf8_as_is(src.format):   # its message's literals: C would show \udXXX
                return [_PYTHON]
            text = "{"
            for k, (key, value) in enumerate(event_object(ev, self.zone).items()):
                text += ("," if k else "") + ascii_json(key) + ":"
                code = _PER_EVENT.get(key)
                if code is None:
                    text += ascii_json(value)
                    continue
                items += [utf8(text + ('"' if code == _DATE else "")), code]
                text = '"' if code == _DATE else ""
            return items + [utf8(text + "}\n")]
        text = ""
        cells = csv_cells(ev, self.zone, escape=self.escape, quote_formulas=self.quote_formulas)
        for k, (column, cell) in enumerate(zip(CSV_COLUMNS, cells)):
            text += "," if k else ""
            code = _PER_EVENT.get(column)
            if code is None:
                text += self._cell(cell)
                continue
            items += [utf8(text), code]
            text = ""
        return items + [utf8(text + "\r\n")]


def _utf8_as_is(text: str) -> bool:
    """True if ``text`` has UTF-8 (no lone surrogate)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
