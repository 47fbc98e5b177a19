"""LiveEvent and LiveDecoder: the binary stream a session writes to an output, decoded back
into events as it is written, for the outputs that want events rather than bytes (a
``blog.TextStream``, a callable output: ``blog.pipeline.calloutput``).

It decodes with ``blogformat`` (the writer never imports the reader) and builds a
LiveEvent only for the events at or above the minimum it is asked for. Imported with the
first such output: a session writing only files never loads it.
"""

from __future__ import annotations

import datetime as _dt

from blogformat.entries import (ClockSync, EventSource, WriterProp, decode_header,
                                decode_metadata_frame)
from blogformat.eventframes import decode_events
from blogformat.eventview import EventView
from blogformat.frames import FRAME_EVENTS, FRAME_HEADER, FRAME_METADATA, HEADER_SIZE, \
    parse_header, unescape
from blogformat.placeholders import FormatError, Template, parse_style, render
from blogformat.pretty import unparsed_message
from blogformat.tracebacks import shown_type
from blogformat.valueclasses import ExceptionValue
from blogformat.valuetypes import EnumMember, RecordType, TypeTable

_UTC = _dt.timezone.utc


def _unknown(source_id: int) -> tuple[EventSource, Template]:
    """The source of an event whose own was never described (as bread shows it)."""
    return EventSource(source_id, 0, "?", "?", "?", 0, "", ""), parse_style("", "")


class LiveEvent(EventView):
    """One event as its session wrote it, decoded: what a callable output is called with
    (``blog.add_output(func)``), and what a ``blog.TextStream`` prints. Its names are those
    of ``bread.Event``: ``severity``, ``category``, ``file``, ``line``, ``writer``
    (``blogformat.eventview``), ``time``, ``message``, ``args``, ``fields``, and here
    ``exception`` and ``exception_text``."""

    __slots__ = ("source", "writer_prop", "clock", "ns", "tz", "args", "fields", "_texts",
                 "_template", "host", "pid", "program", "text_version")

    def __init__(self, source: EventSource, writer: WriterProp, clock: int, ns: int,
                 tz: _dt.tzinfo, args: tuple, fields: dict, texts: dict,
                 template: Template | None, process: tuple) -> None:
        self.source, self.writer_prop, self.clock, self.ns, self.tz = source, writer, clock, ns, tz
        #: The positional values, and the keyword and context fields by name.
        self.args, self.fields, self._texts, self._template = args, fields, texts, template
        # the session's, as its file header says
        self.host, self.pid, self.program, self.text_version = process

    @property
    def time(self) -> _dt.datetime:
        """When it was logged, in the writer's time zone (``ns``: nanoseconds since the
        epoch)."""
        return _dt.datetime.fromtimestamp(0, self.tz) + _dt.timedelta(
            microseconds=self.ns // 1000)

    @property
    def message(self) -> str:
        """The format rendered with the arguments, as ``bread`` shows it."""
        if self._template is None:
            return unparsed_message(self.source.format, self.args)
        return render(self._template, self.args, self.fields, self._texts, decoded=True)

    @property
    def exception(self) -> ExceptionValue | None:
        """The exception logged with it (``log.exception``, ``exception=exc``), or None."""
        exc = self.fields.get("exception")
        return exc if isinstance(exc, ExceptionValue) else None

    @property
    def exception_text(self) -> str | None:
        """The exception as Python prints it: its traceback, or ``Type: message`` for one
        that has none; None without an exception."""
        exc = self.exception
        if exc is None:
            return None
        if exc.traceback:
            return exc.traceback
        return f"{shown_type(exc.type)}: {exc.message}" if exc.message else shown_type(exc.type)

    def __repr__(self) -> str:
        return (f"<LiveEvent {getattr(self.severity, 'name', self.severity)} "
                f"{self.category} {self.message!r}>")


class LiveDecoder:
    """The state of one binary stream as a session writes it (file header, sources,
    writers, clock, value types), and its events decoded from whole frames."""

    def __init__(self) -> None:
        self._new_stream()

    def _new_stream(self) -> None:
        """A file header: the metadata in force starts afresh."""
        self._sources: dict[int, tuple[EventSource, Template | None]] = {}
        self._writers: dict[int, WriterProp] = {}
        self._sync = ClockSync(0, 1_000_000_000, 0, 0, "UTC")
        self._tz: _dt.tzinfo = _UTC
        self._types = TypeTable()
        self._process: tuple = (None, None, None, 1)   # host, pid, program, text_version

    def events(self, data: bytes, least: int) -> list[LiveEvent]:
        """The events at or above severity ``least`` in ``data``: whole frames (a session
        writes nothing else); the metadata among them is taken in."""
        found: list[LiveEvent] = []
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
                self._decode(payload, start, least, found)
        return found

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

    def _decode(self, payload: bytes, offset: int, least: int, found: list[LiveEvent]) -> None:
        """Append the events of an events frame at or above ``least``."""
        sync, process = self._sync, self._process
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
            found.append(LiveEvent(src, writer, raw.clock, ns, self._tz, tuple(args), fields,
                                   raw.texts, tpl, process))
