"""TextStream: an output stream that shows events as text lines, as ``bread`` would.

    blog.basic_config("app.blog")
    blog.add_output(blog.TextStream(sys.stderr, format="%S %C %m", min_severity="warning"))

The session writes its binary stream to it as to any output (header, metadata,
events frames); it decodes them (``blogformat``: the writer never imports the
reader) and writes a line per event at or above ``min_severity``, with bread's
``-f`` and ``-d`` placeholders (``blogformat.pretty``, which bread prints with): one
session writes the whole binary file and shows warnings on the console (the C++
binlog's TextOutputStream). Lines are coloured by severity on a terminal.
"""

from __future__ import annotations

import datetime as _dt
import threading
from typing import TextIO

from blogformat.entries import (ClockSync, EventSource, WriterProp, decode_events,
                                decode_header, decode_metadata_frame)
from blogformat.frames import FRAME_EVENTS, FRAME_HEADER, FRAME_METADATA, HEADER_SIZE, \
    parse_header, unescape
from blogformat.placeholders import FormatError, Template, parse_style, render
from blogformat.pretty import DEFAULT_DATE_FORMAT, DEFAULT_FORMAT, PrettyPrinter, \
    unparsed_message
from blogformat.severity import Severity, to_severity
from blogformat.valuetypes import EnumMember, RecordType, TypeTable

_UTC = _dt.timezone.utc


def _unknown(source_id: int) -> tuple[EventSource, Template]:
    """The source of an event whose own was never described (as bread shows it)."""
    return EventSource(source_id, 0, "?", "?", "?", 0, "", ""), parse_style("", "")


class _Live:
    """One event written to a TextStream, as its printer reads it (``pretty.Event``)."""

    __slots__ = ("source", "writer_prop", "clock", "ns", "tz", "args", "fields", "texts",
                 "template", "host", "pid", "program", "text_version")

    def __init__(self, source: EventSource, writer: WriterProp, clock: int, ns: int,
                 tz: _dt.tzinfo, args: list, fields: dict, texts: dict,
                 template: Template | None, process: tuple) -> None:
        self.source, self.writer_prop, self.clock, self.ns, self.tz = source, writer, clock, ns, tz
        self.args, self.fields, self.texts, self.template = args, fields, texts, template
        # the session's, as its file header says
        self.host, self.pid, self.program, self.text_version = process

    @property
    def message(self) -> str:
        if self.template is None:
            return unparsed_message(self.source.format, self.args)
        return render(self.template, self.args, self.fields, self.texts, decoded=True)


class TextStream:
    """Renders the events written to it as text lines on ``file`` (a text stream).

    ``format`` and ``date_format`` take bread's placeholders (``bread --help``);
    ``min_severity`` leaves out the events below it; ``color`` (default: when
    ``file`` is a terminal) colours lines by severity; ``traceback=False`` leaves out the
    tracebacks shown under events that have an exception among their fields
    (``log.exception``). Control characters and the bidirectional format characters in
    the events' text are escaped, as bread escapes them (``bread.render.escape_controls``),
    tracebacks included.
    """

    def __init__(self, file: TextIO, *, format: str = DEFAULT_FORMAT,
                 date_format: str = DEFAULT_DATE_FORMAT,
                 min_severity: Severity | int | str = Severity.TRACE,
                 color: bool | None = None, traceback: bool = True) -> None:
        if not callable(getattr(file, "write", None)):
            raise TypeError(f"TextStream needs a text file to write to, not "
                            f"{type(file).__name__}")
        if not isinstance(format, str) or not isinstance(date_format, str):
            raise TypeError("format and date_format must be str")
        self.file = file
        self.min_severity = to_severity(min_severity)
        if color is None:
            isatty = getattr(file, "isatty", None)
            try:
                color = bool(isatty()) if isatty is not None else False
            except (OSError, ValueError):
                color = False
        self.printer = PrettyPrinter(format, date_format, color=color,
                                     traceback=None if traceback else False)
        self._lock = threading.Lock()
        self._new_stream()

    def _new_stream(self) -> None:
        """A file header: the metadata in force starts afresh."""
        self._sources: dict[int, tuple[EventSource, Template | None]] = {}
        self._writers: dict[int, WriterProp] = {}
        self._sync = ClockSync(0, 1_000_000_000, 0, 0, "UTC")
        self._tz: _dt.tzinfo = _UTC
        self._types = TypeTable()
        self._process: tuple = (None, None, None, 1)   # host, pid, program, text_version

    def write(self, data: bytes) -> int:
        """Take whole frames (a session writes nothing else) and show their events."""
        lines: list[str] = []
        data = bytes(data)
        with self._lock:
            pos = 0
            while pos + HEADER_SIZE <= len(data):
                fields = parse_header(data[pos:pos + HEADER_SIZE])
                if fields is None:
                    break
                kind, flags, length, _ = fields
                start, pos = pos + HEADER_SIZE, pos + HEADER_SIZE + length
                payload = unescape(flags, data[start:pos])[1]
                if kind == FRAME_HEADER:
                    self._new_stream()
                    d = decode_header(payload, start).descriptor
                    text = d.get("text_version")
                    self._process = (d.get("host"), d.get("pid"), d.get("program"),
                                     text if type(text) is int else 1)
                elif kind == FRAME_METADATA:
                    for e in decode_metadata_frame(payload, start):
                        self._apply(e)
                elif kind == FRAME_EVENTS:
                    self._show(payload, start, lines)
            if lines:
                self.file.write("\n".join(lines) + "\n")
        return len(data)

    def _apply(self, e: object) -> None:
        """Take in a metadata entry: a source, a writer, a clock sync, a value type."""
        t = type(e)
        if t is EventSource:
            try:
                tpl: Template | None = parse_style(e.format, e.style)   # type: ignore[attr-defined]
            except FormatError:
                tpl = None
            self._sources[e.id] = (e, tpl)   # type: ignore[attr-defined,assignment]
        elif t is WriterProp:
            self._writers[e.id] = e   # type: ignore[attr-defined,assignment]
        elif t is ClockSync:
            self._sync = e   # type: ignore[assignment]
            try:
                off = _dt.timedelta(seconds=e.tz_offset)   # type: ignore[attr-defined]
                name = e.tz_name   # type: ignore[attr-defined]
                self._tz = _dt.timezone(off, name) if name else _dt.timezone(off)
            except (ValueError, OverflowError):
                self._tz = _UTC
        elif t is RecordType or t is EnumMember:
            self._types.add(e)   # type: ignore[arg-type]

    def _show(self, payload: bytes, offset: int, lines: list[str]) -> None:
        """Append the lines of an events frame's events at or above ``min_severity``."""
        printer, least, sync = self.printer, self.min_severity, self._sync
        for raw in decode_events(payload, offset, self._types):
            src, tpl = self._sources.get(raw.source_id) or _unknown(raw.source_id)
            if src.severity < least:
                continue
            args, names, fields = raw.args, src.field_names, {}
            if names and len(args) >= len(names):
                fields = dict(zip(names, args[len(args) - len(names):]))
                args = args[:len(args) - len(names)]
            writer = self._writers.get(raw.writer_id) or WriterProp(raw.writer_id, "")
            ns = sync.ns_since_epoch + ((raw.clock - sync.clock_value) * 1_000_000_000
                                        // sync.frequency)
            ev = _Live(src, writer, raw.clock, ns, self._tz, args, fields, raw.texts, tpl,
                       self._process)
            lines.append(printer.line(ev, escape=True))

    def flush(self) -> None:
        flush = getattr(self.file, "flush", None)
        if flush is not None:
            flush()

    def __repr__(self) -> str:
        return f"<blog.TextStream to {getattr(self.file, 'name', self.file)!r}>"


__all__ = ["TextStream"]
