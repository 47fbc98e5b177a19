"""Entries: what header and metadata frames hold (docs/format.md sections 3 and 4; events
frames are ``eventframes``).

Each entry kind is a class with ``array()`` (the msgpack array the writer
packs) and is decoded by ``decode_metadata`` (metadata entries) or
``decode_header``; a new kind is added here and nowhere else. Decoders take
untrusted input: a field of the wrong type raises ``BadEntry`` (the reader turns it
into damage), never anything else.
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING, Any, final
from .frames import FORMAT_VERSION, FRAME_METADATA, frame_bytes
from .plainclass import Frozen, Plain, field
from .values import pack_plain, unpack_plain
from .valuetypes import (ENTRY_ENUM_MEMBER, ENTRY_RECORD_TYPE, MAX_FIELD_TEXT, BadEntry,
                         EnumMember, RecordType, decode_entry)
from .valuetypes import int_field as _int
from .valuetypes import str_field as _str

if TYPE_CHECKING:
    from typing import Iterable, Iterator

# Metadata entry tags: the first element of each entry array (section 4).
ENTRY_EVENT_SOURCE = 1
ENTRY_WRITER_PROP = 2
ENTRY_CLOCK_SYNC = 3
ENTRY_DROPPED = 4
ENTRY_LOST = 5
ENTRY_SUMMARY = 6
ENTRY_RECOVERED = 7
# 8 and 9 (RecordType, EnumMember): blogformat.valuetypes

#: EventSource flags (element 13): its events were kept in a backtrace buffer and
#: written when a more severe event was logged (blog.Session.use_backtrace).
SOURCE_BACKTRACE = 1



# --- the header frame (section 3) -------------------------------------------

@final
class FileHeader(Frozen):
    """The first frame of every stream: the format version and the writer's descriptor."""

    offset: int
    version: int
    descriptor: dict


def header_payload(descriptor: dict, version: int = FORMAT_VERSION) -> bytes:
    """The payload of a header frame."""
    return pack_plain([version, descriptor])


def peek_version(payload: bytes) -> int | None:
    """The format version of a header payload, or None if it has none."""
    try:
        version = unpack_plain(payload)[0]
    except Exception:
        return None
    return version if type(version) is int else None


def decode_header(payload: bytes, offset: int) -> FileHeader:
    """A header frame's payload as a FileHeader."""
    head = unpack_plain(payload)
    if type(head) is not list or len(head) < 2:
        raise BadEntry("header payload is not an array of 2 or more")
    version, descriptor = head[:2]
    return FileHeader(offset, _int(version), descriptor if isinstance(descriptor, dict) else {})


# --- metadata entries (section 4) -------------------------------------------

#: Limits of one stream (docs/format.md 9.1): a writer stays within them, and a reader
#: treats a metadata entry beyond them as damage, so that no file can make it hold more.
#: Source ids run from 1 to MAX_SOURCE_ID.
MAX_SOURCE_ID = 65_535
#: Distinct writer ids described in one stream.
MAX_WRITERS = 1 << 20
#: Characters of text (category, function, file, format, tags, field and argument names,
#: writer names) the sources and writers in force in one stream hold together.
MAX_METADATA_TEXT = 64 << 20
#: Characters of one format (blog writes at most 1 Mi: blog.pipeline.source.MAX_FORMAT).
MAX_FORMAT_TEXT = 2 << 20
# MAX_FIELD_TEXT (characters of any other one text of a source or writer): valuetypes.


def oversized(e: "EventSource | WriterProp") -> str | None:
    """The name of a text of ``e`` past its limit (MAX_FORMAT_TEXT, MAX_FIELD_TEXT), or None."""
    if type(e) is WriterProp:
        return "name" if len(e.name) > MAX_FIELD_TEXT else None
    if len(e.format) > MAX_FORMAT_TEXT:
        return "format"
    for name in ("category", "function", "file", "arg_tags"):
        if len(getattr(e, name)) > MAX_FIELD_TEXT:
            return name
    if any(len(n) > MAX_FIELD_TEXT for n in (*e.field_names, *e.arg_names)):
        return "a field or argument name"
    return None


def text_size(e: "EventSource | WriterProp") -> int:
    """The characters of text an entry holds, as MAX_METADATA_TEXT counts them."""
    if type(e) is WriterProp:
        return len(e.name)
    return (len(e.category) + len(e.function) + len(e.file) + len(e.format) + len(e.arg_tags)
            + sum(len(n) for n in e.field_names) + sum(len(n) for n in e.arg_names))



@final
class EventSource(Plain):
    """Severity, category, function, file, line, format and argument tags of a call site.

    Events carry only the source's ``id``; everything else is written once as
    metadata. ``field_names`` are the keyword fields that follow the
    ``positional`` arguments in every event of this source (-1: not recorded).
    ``arg_names`` name the positional arguments where the call site knows them (the
    parameters of an ``@blog.event`` function); empty otherwise.
    ``template`` is the parsed format, kept by whoever parsed it. ``style`` is the
    syntax of ``format``: ``""`` for ``{}`` placeholders, ``"%"`` for printf-style (the
    stdlib ``logging`` bridge), ``"literal"`` for a format that is the message itself
    (blogformat.placeholders.parse_style).
    """

    TAG = ENTRY_EVENT_SOURCE

    id: int
    severity: int
    category: str
    function: str
    file: str
    line: int
    format: str
    arg_tags: str
    field_names: tuple[str, ...] = ()
    positional: int = 0
    template: Any = field(default=None, hidden=True)
    arg_names: tuple[str, ...] = ()
    offset: int = field(default=0, hidden=True)   # of its frame, when read
    style: str = ""
    flags: int = 0

    @property
    def backtrace(self) -> bool:
        """True for the twin source of events kept in a backtrace buffer (format.md 4.1)."""
        return bool(self.flags & SOURCE_BACKTRACE)

    def array(self) -> list:
        a = [ENTRY_EVENT_SOURCE, self.id, int(self.severity), self.category, self.function,
             self.file, self.line, self.format, self.arg_tags, list(self.field_names),
             self.positional]
        if self.arg_names or self.style or self.flags:   # only then: the bytes of
            a.append(list(self.arg_names))               # every other source stay
        if self.style or self.flags:
            a.append(self.style)
        if self.flags:
            a.append(self.flags)
        return a


@final
class WriterProp(Frozen):
    """A SessionWriter: id, name, and the thread and process it belongs to."""

    TAG = ENTRY_WRITER_PROP

    id: int
    name: str
    thread_ident: int = 0
    native_id: int = 0
    pid: int = 0
    offset: int = field(default=0, hidden=True)   # of its frame, when read

    def array(self) -> list:
        return [ENTRY_WRITER_PROP, self.id, self.name, self.thread_ident, self.native_id,
                self.pid]


@final
class ClockSync(Frozen):
    """Relates clock values to wall time:
    ``ns = ns_since_epoch + (clock - clock_value) * 1e9 / frequency``."""

    TAG = ENTRY_CLOCK_SYNC

    clock_value: int
    frequency: int
    ns_since_epoch: int
    tz_offset: int
    tz_name: str

    def array(self) -> list:
        return [ENTRY_CLOCK_SYNC, self.clock_value, self.frequency, self.ns_since_epoch,
                self.tz_offset, self.tz_name]


@final
class Dropped(Frozen):
    """``count`` events of writer ``writer_id`` were dropped (channel full) before ``clock``.

    ``offset`` is where the reader found it (not written).
    """

    TAG = ENTRY_DROPPED

    writer_id: int
    count: int
    clock: int
    offset: int = 0

    def array(self) -> list:
        return [ENTRY_DROPPED, self.writer_id, self.count, self.clock]


@final
class Lost(Frozen):
    """The writer's output failed: ``events`` events (``bytes`` bytes) did not reach this file,
    from ``since`` (the clock of the first failed write, if the writer says) until ``clock``."""

    TAG = ENTRY_LOST

    events: int
    bytes: int
    clock: int
    offset: int = 0
    since: int | None = None

    def array(self) -> list:
        head = [ENTRY_LOST, self.events, self.bytes, self.clock]
        return head if self.since is None else [*head, self.since]


@final
class Summary(Frozen):
    """The last entry of a cleanly closed stream: what the stream holds, counted by the writer.

    ``sources`` maps source id to its events in the stream (severity and
    category come with each source); ``dropped`` and ``lost`` total the
    stream's Dropped and Lost entries. ``first_clock``/``last_clock`` bound the
    events' clocks (0 and 0 when there are none). ``offset`` is where the
    reader found it (not written).
    """

    TAG = ENTRY_SUMMARY

    events: int
    first_clock: int
    last_clock: int
    dropped: int
    lost: int
    sources: dict = field(default_factory=dict)
    clock: int = 0
    offset: int = 0

    def array(self) -> list:
        return [ENTRY_SUMMARY, self.events, self.first_clock, self.last_clock, self.dropped,
                self.lost, dict(self.sources), self.clock]


@final
class Recovered(Frozen):
    """The events of this stream were recovered from the crash buffer of process ``pid``
    (killed before it wrote them): ``events`` of them, recovered at ``clock``."""

    TAG = ENTRY_RECOVERED

    events: int
    pid: int
    clock: int
    offset: int = 0

    def array(self) -> list:
        return [ENTRY_RECOVERED, self.events, self.pid, self.clock]


Metadata = (EventSource | WriterProp | ClockSync | Dropped | Lost | Summary | Recovered
            | RecordType | EnumMember)


def encode_metadata(entry: Metadata) -> bytes:
    """One metadata entry as packed into a metadata frame."""
    return pack_plain(entry.array())


#: Metadata frames are cut at about this many payload bytes (an entry is never split).
FRAME_TARGET = 1 << 20


def metadata_frames(entries: Iterable[Metadata]) -> list[bytes]:
    """Metadata entries as whole frames of about FRAME_TARGET payload bytes each."""
    frames: list[bytes] = []
    buf: list[bytes] = []
    size = 0
    for entry in entries:
        b = encode_metadata(entry)
        if buf and size + len(b) > FRAME_TARGET:
            frames.append(frame_bytes(FRAME_METADATA, b"".join(buf)))
            buf, size = [], 0
        buf.append(b)
        size += len(b)
    if buf:
        frames.append(frame_bytes(FRAME_METADATA, b"".join(buf)))
    return frames


def _event_source(e: list) -> EventSource:
    sid, sev, cat, func, file, line, form, tags = e[1:9]
    names = e[9] if len(e) > 9 else []
    if type(names) is not list:
        raise BadEntry("field names must be an array")
    positional = _int(e[10]) if len(e) > 10 else -1
    # Element 11 came later: anything but an array of str there is ignored, as any
    # trailing element of an earlier writer would be.
    arg_names = e[11] if len(e) > 11 else []
    if type(arg_names) is not list or not all(type(n) is str for n in arg_names):
        arg_names = []
    # Element 12 (style) too; a style this reader does not know is kept, and the
    # format then renders as one that does not parse (docs/format.md 8.2).
    style = e[12] if len(e) > 12 and type(e[12]) is str else ""
    if len(style) > 16:
        style = "?"
    flags = e[13] if len(e) > 13 and type(e[13]) is int and 0 <= e[13] < 1 << 32 else 0
    return EventSource(_int(sid), _int(sev), _str(cat), _str(func), _str(file), _int(line),
                       _str(form), _str(tags), tuple(_str(n) for n in names), positional,
                       arg_names=tuple(arg_names), style=style, flags=flags)


def _summary(e: list, offset: int) -> Summary:
    events, first, last, dropped, lost, sources, clock = e[1:8]
    if type(sources) is not dict:
        raise BadEntry("summary sources must be a map")
    counts = {_int(k): _int(v) for k, v in sources.items()}
    return Summary(_int(events), _int(first), _int(last), _int(dropped), _int(lost), counts,
                   _int(clock), offset)


def _clock_sync(e: list) -> ClockSync:
    clock, freq, ns, tzo, tzn = e[1:6]
    if _int(freq) <= 0:
        raise BadEntry("clock frequency must be positive")
    return ClockSync(_int(clock), freq, _int(ns), _int(tzo), _str(tzn))


def decode_metadata(e: Any, offset: int) -> Metadata | None:
    """A metadata entry array as its entry; None for a tag this format does not define."""
    if type(e) is not list or not e:
        raise BadEntry("metadata entry is not a non-empty array")
    tag = e[0]
    if type(tag) is not int:
        return None   # not a tag this format defines: skipped like an unknown one
    try:
        if tag == ENTRY_EVENT_SOURCE:
            src = _event_source(e)
            src.offset = offset
            return src
        if tag == ENTRY_WRITER_PROP:
            wid, name = e[1:3]
            return WriterProp(_int(wid), _str(name), *[_int(x) for x in e[3:6]],  # at most 3
                              offset=offset)  # type: ignore[misc]
        if tag == ENTRY_CLOCK_SYNC:
            return _clock_sync(e)
        if tag == ENTRY_DROPPED:
            return Dropped(_int(e[1]), _int(e[2]), _int(e[3]), offset)
        if tag == ENTRY_LOST:
            since = e[4] if len(e) > 4 and type(e[4]) is int else None
            return Lost(_int(e[1]), _int(e[2]), _int(e[3]), offset, since)
        if tag == ENTRY_SUMMARY:
            return _summary(e, offset)
        if tag == ENTRY_RECOVERED:
            return Recovered(_int(e[1]), _int(e[2]), _int(e[3]), offset)
        if tag == ENTRY_RECORD_TYPE or tag == ENTRY_ENUM_MEMBER:
            return decode_entry(e, offset)
    except (ValueError, IndexError) as exc:  # too few fields
        raise BadEntry(f"metadata entry tag {tag!r}: {exc}") from None
    return None   # unknown metadata: skipped, as the format promises


def decode_metadata_frame(payload: bytes, offset: int) -> Iterator[Metadata]:
    """The entries of a metadata frame's payload, unknown ones left out."""
    from .valuedecoding import unpacker   # (the reader's: the writer never loads it)
    for e in unpacker(payload):
        entry = decode_metadata(e, offset)
        if entry is not None:
            yield entry
