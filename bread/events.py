"""Entries -> events: resolve each raw event's source, writer and clock."""

from __future__ import annotations

import datetime as _dt

from blogformat.typinglite import TYPE_CHECKING
from blogformat.eventview import EventView
from blogformat.placeholders import FormatError, Template, parse_style, render
from blogformat.plainclass import Frozen, field
from blogformat.pretty import unparsed_message
from blogformat.entries import (MAX_METADATA_TEXT, MAX_SOURCE_ID, MAX_WRITERS, EventSource,
                                oversized, text_size)
from blogformat.eventframes import decode_events

from . import accel
from .entries import (DECODE_ERRORS, ClockSync, Dropped, EnumMember, Entry, FileHeader, Lost,
                      RawEvent, RecordType, Recovered, Summary, TypeTable, WriterProp,
                      undecodable)
from .frames import Damage, Frame

if TYPE_CHECKING:
    from typing import Callable, Iterable, Iterator

__all__ = ["Event", "EventStream", "Origin"]

_MAX_TIME = _dt.datetime.max.replace(tzinfo=_dt.timezone.utc)
_MIN_TIME = _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)
_UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)
_DEFAULT_SYNC = ClockSync(0, 1_000_000_000, 0, 0, "UTC")
#: The times bread keeps exactly everywhere (sort keys, columns): 64-bit ns since the epoch.
_NS_MIN, _NS_MAX = -(1 << 63), (1 << 63) - 1


def clamp64(ns: int) -> int:
    """A time as a sort key: beyond 64 bits, the least or greatest 64-bit time."""
    return _NS_MIN if ns < _NS_MIN else _NS_MAX if ns > _NS_MAX else ns


class Origin(Frozen):
    """Where events come from: the input's name, and the host, process id and program
    that its stream's file header names (None where it does not say), and the text its
    header asks for (``blogformat.pretty.TEXT_VERSION``; 1 where it does not say)."""

    path: str
    host: str | None = None
    pid: int | None = None
    program: str | None = None
    text_version: int = 1
    #: The offsets of its events frames cut short by the end of the input (5.4).
    unverified: set = field(default_factory=set, hidden=True)

    @classmethod
    def of(cls, path: str, descriptor: object) -> "Origin":
        """From a file header's descriptor (untrusted: a value of the wrong type is None)."""
        d = descriptor if type(descriptor) is dict else {}
        host, pid, program = d.get("host"), d.get("pid"), d.get("program")
        text = d.get("text_version")
        return cls(path, host if type(host) is str else None,
                   pid if type(pid) is int and -(1 << 63) <= pid < (1 << 63) else None,
                   program if type(program) is str else None,
                   text if type(text) is int and 1 <= text < (1 << 31) else 1)


class Event(EventView):
    """One log event, as read back.

    ``time`` is a timezone-aware datetime in the writer's zone (microseconds;
    ``clock`` and ``ns`` keep nanoseconds), ``args`` the positional values,
    ``fields`` the keyword fields and ``message`` the rendered text; its call site and
    writer give it ``severity``, ``category``, ``file``, ``line``, ``writer``...
    (``blogformat.eventview``).
    """

    __slots__ = ("source", "writer_prop", "clock", "ns", "tz", "args", "_fields", "_texts",
                 "_message", "offset", "origin")

    def __init__(self, source: EventSource, writer: WriterProp, clock: int, ns: int,
                 tz: _dt.tzinfo, args: tuple, fields: dict | None, texts: dict, offset: int,
                 origin: Origin = Origin("")) -> None:
        self.source = source
        self.writer_prop = writer
        self.clock = clock
        self.ns = ns
        self.tz = tz
        self.args = args
        self._fields = fields or None     # made when first asked for: most events have none
        self._texts = texts
        self._message: str | None = None
        self.offset = offset
        self.origin = origin

    path = property(lambda self: self.origin.path,
                    doc="the input it was read from (its name as text: inputs.name_text)")
    verified = property(lambda self: self.offset not in self.origin.unverified,
                        doc="False for an event of a frame cut short by the end of its input "
                            "(complete, but its frame's checksum could not be checked)")
    host = property(lambda self: self.origin.host, doc="the host its file header names")
    pid = property(lambda self: self.origin.pid, doc="the process id its file header names")
    program = property(lambda self: self.origin.program, doc="the program its header names")
    text_version = property(lambda self: self.origin.text_version,
                            doc="the text its header asks for (blogformat.pretty.TEXT_VERSION)")

    @property
    def fields(self) -> dict:
        """The keyword fields, by name."""
        f = self._fields
        if f is None:
            f = self._fields = {}
        return f

    @property
    def time(self) -> _dt.datetime:
        """When the event was logged, in the writer's time zone. A time beyond what a
        datetime holds (only a damaged or crafted file has one) is the first or last
        datetime (UTC): never an exception. ``ns`` keeps the exact value."""
        try:
            return (_EPOCH + _dt.timedelta(microseconds=self.ns // 1000)).astimezone(self.tz)
        except (OverflowError, ValueError):
            return _MAX_TIME if self.ns > 0 else _MIN_TIME

    def _render(self) -> str:
        if self._message is None:
            self._message = render_message(self.source, self.args, self._fields or {},
                                           self._texts)
        return self._message

    message = property(_render, doc="The format string rendered with the arguments, "
                                    "as it was at call time.")

    def __repr__(self) -> str:
        try:
            when = self.time.isoformat()
        except (OverflowError, ValueError):
            when = f"clock={self.clock}"
        return (f"<Event {when} {getattr(self.severity, 'name', self.severity)} "
                f"{self.category} {self.message!r}>")


if accel.speedups is not None:   # the same getter in C: the common case without a Python frame
    Event.message = property(accel.speedups.MessageGetter(Event, Event._render),
                             doc=Event.message.__doc__)

_templates: dict[str | tuple[str, str], Template | None] = {}
_CACHE_MAX = 10_000
#: Characters of format the cache holds at most (a crafted stream can describe source 1
#: again and again with a new format of 2 Mi characters each): past it, it starts afresh.
#: As much as one stream's metadata may hold, so that the formats of the sources in force
#: always fit (were they more, each event could parse its format anew).
_CACHE_CHARS = MAX_METADATA_TEXT
_cached_chars = 0


def _remember(key: str | tuple[str, str], tpl: Template | None, size: int) -> None:
    """Keep a parsed format, the cache bounded by entries and by characters."""
    global _cached_chars
    if len(_templates) >= _CACHE_MAX or _cached_chars + size > _CACHE_CHARS:
        _templates.clear()
        _cached_chars = 0
    if size <= _CACHE_CHARS:
        _templates[key] = tpl
        _cached_chars += size


#: The plan of a source whose message Python renders.
_NO_PLAN: tuple = (None,)


def message_plan(src: EventSource) -> tuple | None:
    """The message template as literal strs and argument indexes, for the C fast path.

    An index ``i >= 0`` is the i-th positional argument; ``-1 - j`` the j-th
    keyword field. None if Python must render it: conversions, format specs,
    a field the source does not name, a format that does not parse.
    """
    try:
        tpl = parse_style(src.format, src.style)
    except FormatError:
        return None
    items: list = []
    for i, ph in enumerate(tpl.placeholders):
        if ph.conversion is not None or ph.spec:
            return None
        if tpl.literals[i]:
            items.append(tpl.literals[i])
        if isinstance(ph.key, int):
            items.append(ph.key)
        elif ph.key in src.field_names:   # the last of the name, as the fields dict keeps
            names = src.field_names
            items.append(-1 - (len(names) - 1 - names[::-1].index(ph.key)))
        else:
            return None
    if tpl.literals[-1]:
        items.append(tpl.literals[-1])
    return tuple(items)


def render_message(source: EventSource, args: tuple, fields: dict, texts: dict) -> str:
    """Render a source's format with values read from a file (safely: the file is untrusted)."""
    fast = accel.speedups
    if fast is not None and not texts:
        plan = source.template   # the reader keeps its plan there (the writer, its Template)
        if plan is None:
            found = message_plan(source)
            plan = source.template = _NO_PLAN if found is None else found
        if plan is not _NO_PLAN:
            text = fast.message(plan, args, fields, source.field_names)
            if text is not None:
                return text
    # Keyed by the format alone for {} sources (no tuple made per event), with its style
    # for the others.
    key = (source.format, source.style) if source.style else source.format
    tpl = _templates.get(key, False)
    if tpl is False:
        try:
            tpl = parse_style(source.format, source.style)
        except FormatError:
            tpl = None
        _remember(key, tpl, len(source.format))
    if tpl is None:   # as the format, then the values' reprs
        return unparsed_message(source.format, args)
    return render(tpl, args, fields, texts, decoded=True)  # type: ignore[arg-type]


class EventStream:
    """Turns a sequence of entries into Events, keeping the metadata state.

    Damage, drops and losses are collected in ``damage`` and ``notices``, the
    Summary entries that close cleanly closed streams in ``summaries``;
    ``headers`` holds the descriptors of the files read.
    """

    def __init__(self, entries: Iterable[Entry], name: str = "") -> None:
        self._entries = entries
        self.name = name
        self.origin = Origin(name)
        self.headers: list[FileHeader] = []
        self.damage: list[Damage] = []
        self.notices: list[Dropped | Lost | Recovered] = []
        self.summaries: list[Summary] = []
        self.unknown_sources = 0
        self._reset()

    def _reset(self) -> None:
        self.sources: dict[int, EventSource] = {}
        self.writers: dict[int, WriterProp] = {}
        self._text = 0                 # characters held by sources and writers (9.1)
        self._clock_damage = False     # an event time beyond 64 bits reported in this stream
        self.sync = _DEFAULT_SYNC
        self.tz: _dt.tzinfo = _UTC     # the zone of the sync in force
        self.types = TypeTable()       # the descriptions of value types in force

    def __iter__(self) -> Iterator[Event]:
        event, apply = self.event, self.apply
        for e in self._entries:
            if type(e) is RawEvent:
                yield event(e)
            else:
                apply(e)

    def event(self, e: RawEvent) -> Event:
        """The Event of a raw event, with the source, writer and clock sync in force."""
        src = self.sources.get(e.source_id)
        if src is None:
            self.unknown_sources += 1
            src = EventSource(e.source_id, 0, "?", "?", "?", 0, "", "")
        w = self.writers.get(e.writer_id) or WriterProp(e.writer_id, "")
        args = e.args
        names = src.field_names
        if names and len(args) >= len(names):
            n = len(args) - len(names)
            fields = dict(zip(names, args[n:]))
            args = args[:n]
        else:
            fields = None
        sync = self.sync
        ns = sync.ns_since_epoch + (e.clock - sync.clock_value) * 1_000_000_000 // sync.frequency
        if not _NS_MIN <= ns <= _NS_MAX:
            self._clock_out_of_range(e, ns)
        return Event(src, w, e.clock, ns, self.tz, tuple(args), fields, e.texts, e.offset,
                     self.origin)

    def frame(self, fr: Frame, keeps: Callable[[Event], bool], source: str = "",
              skip: int = 0) -> Iterator[Event]:
        """The Events of an events frame (from the ``skip``-th on) that ``keeps`` keeps; a
        payload that does not decode ends it with a Damage."""
        event = self.event
        try:
            for k, raw in enumerate(decode_events(fr.payload, fr.offset, self.types)):
                if k >= skip:
                    ev = event(raw)
                    if keeps(ev):
                        yield ev
        except DECODE_ERRORS as exc:
            self.apply(undecodable(fr, exc, source))

    def apply(self, e: Entry) -> bool:
        """Take in an entry that is not an event: metadata, a header, damage, a notice.

        False if it was a source or writer beyond the stream's limits (docs/format.md
        9.1): it is reported as damage and not kept.
        """
        if type(e) is EventSource or type(e) is WriterProp:
            return self._describe(e)
        elif type(e) is RecordType or type(e) is EnumMember:
            why = self.types.add(e)
            if why is not None:
                self.damage.append(Damage(e.offset, 0, f"metadata beyond the limits: {why}",
                                          self.name))
                return False
        elif type(e) is ClockSync:
            self.sync = e
            try:
                off = _dt.timedelta(seconds=e.tz_offset)
                self.tz = _dt.timezone(off, e.tz_name) if e.tz_name else _dt.timezone(off)
            except (ValueError, OverflowError):
                self.tz = _UTC
        elif type(e) is FileHeader:
            self.headers.append(e)
            self._reset()
            self.origin = Origin.of(self.name, e.descriptor)
        elif type(e) is Damage:
            self.damage.append(e)
            if e.unverified:
                self.origin.unverified.add(e.offset)
        elif type(e) is Dropped or type(e) is Lost or type(e) is Recovered:
            self.notices.append(e)
        elif type(e) is Summary:
            self.summaries.append(e)
        return True

    def _clock_out_of_range(self, e: RawEvent, ns: int) -> None:
        """An event whose time does not fit in 64 bits (only a damaged or crafted file has one)
        is kept, with its time clamped where it is shown or sorted, and reported as damage:
        once per stream (docs/format.md 4.3), so that the reports stay bounded."""
        if not self._clock_damage:
            self._clock_damage = True
            self.damage.append(Damage(e.offset, 0, f"an event time beyond 64-bit ns ({ns}); "
                                      "shown and sorted clamped (reported once per stream)",
                                      self.name))

    def _describe(self, e: EventSource | WriterProp) -> bool:
        table: dict = self.sources if type(e) is EventSource else self.writers
        old = table.get(e.id)
        text = self._text + text_size(e) - (text_size(old) if old is not None else 0)
        big = oversized(e)
        if type(e) is EventSource and not 1 <= e.id <= MAX_SOURCE_ID:
            why = f"source id {e.id} out of range 1..{MAX_SOURCE_ID}"
        elif big is not None:
            why = f"{type(e).__name__} {e.id}: {big} longer than its limit"
        elif old is None and type(e) is WriterProp and len(table) >= MAX_WRITERS:
            why = f"more than {MAX_WRITERS} writers in one stream"
        elif text > MAX_METADATA_TEXT:
            why = f"more than {MAX_METADATA_TEXT} characters of metadata in one stream"
        else:
            table[e.id] = e
            self._text = text
            return True
        self.damage.append(Damage(e.offset, 0, f"metadata beyond the limits: {why}", self.name))
        return False
