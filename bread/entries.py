"""Frames -> entries: the file header, metadata entries and raw events, all validated.

What each entry holds is defined once, in ``blogformat.entries`` and
``blogformat.eventframes``; this layer
walks a stream's frames, tracks its format version and turns whatever does
not decode into Damage.
"""

from __future__ import annotations

import msgpack

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import (BadEntry, ClockSync, Dropped, EnumMember, EventSource, FileHeader,
                                Lost, RecordType, Recovered, Summary, WriterProp, decode_header,
                                decode_metadata_frame, peek_version)
from blogformat.eventframes import RawEvent, decode_events
from blogformat.frames import (FORMAT_VERSION, FRAME_COLUMNS, FRAME_EVENTS, FRAME_HEADER,
                               FRAME_METADATA)
from blogformat.valuetypes import TypeTable

from .frames import Damage, Frame

if TYPE_CHECKING:
    from typing import Iterable, Iterator

#: What ``iter_entries`` gives: the metadata entries, raw events, and the Damage of each
#: range skipped.
Entry = (FileHeader | EventSource | WriterProp | ClockSync | Dropped | Lost | Recovered | Summary
         | RecordType | EnumMember | RawEvent | Damage)

__all__ = ["DECODE_ERRORS", "BadEntry", "ClockSync", "Dropped", "Entry", "EnumMember",
           "EventSource", "FileHeader", "Lost", "RawEvent", "RecordType", "Recovered", "Summary",
           "TypeTable", "WriterProp", "columnar_parts", "iter_entries", "undecodable"]


#: What decoding a frame raises when its bytes are not what the format says.
DECODE_ERRORS = (ValueError, TypeError, msgpack.UnpackException, RecursionError)


def undecodable(fr: Frame, exc: BaseException, source: str) -> Damage:
    """The Damage of a frame whose payload did not decode."""
    return Damage(fr.offset, fr.size,
                  f"undecodable frame: {str(exc) or type(exc).__name__}", source)


def columnar_parts(fr: Frame, source: str = "") -> list[Frame | Damage]:
    """A columnar frame (docs/format.md 5.5) as events frames, one per writer (the first
    one has the frame's size), all of it checked first; or its Damage."""
    from blogformat.columnframes import events_payloads
    try:
        payloads = list(events_payloads(fr.payload))
    except DECODE_ERRORS as exc:
        return [undecodable(fr, exc, source)]
    return [Frame(fr.offset, FRAME_EVENTS, payload, 0, fr.size if i == 0 else 0)
            for i, payload in enumerate(payloads)]


def iter_entries(frames: Iterable[Frame | Damage], source: str = "", *,
                 raw_events: bool = False, columns: bool = False) -> Iterator[Entry | Frame]:
    """Decode frames into entries; anything malformed becomes a Damage (never an exception).

    With ``raw_events``, events frames come out as they are (a Frame), for a
    caller that decodes them itself (``bread.decode.decoder``), with the stream's descriptions
    of value types (``EventStream.types``); with ``columns`` too, columnar frames (else
    given as events frames, ``columnar_parts``).
    """
    unsupported: int | None = None   # the version of the current stream, if not readable
    types = TypeTable()              # without raw_events: the descriptions in force
    for fr in frames:
        if isinstance(fr, Damage):
            yield fr
            continue
        if fr.kind == FRAME_HEADER:
            unsupported = None
            version = peek_version(fr.payload)
            if version is not None and version != FORMAT_VERSION:
                unsupported = version
            types = TypeTable()
        if unsupported is not None:
            yield Damage(fr.offset, fr.size,
                         f"format version {unsupported} not supported by this reader", source)
            continue
        if fr.flags:
            # A feature this reader does not know (compression, say): not readable here.
            yield Damage(fr.offset, fr.size,
                         f"frame flags {fr.flags:#x} not supported by this reader", source)
            continue
        try:
            if fr.kind == FRAME_HEADER:
                yield decode_header(fr.payload, fr.offset)
            elif fr.kind == FRAME_METADATA:
                for e in decode_metadata_frame(fr.payload, fr.offset):
                    if type(e) is RecordType or type(e) is EnumMember:
                        types.add(e)     # one beyond the limits: the reader reports it
                    yield e
            elif fr.kind == FRAME_EVENTS:
                if raw_events:
                    yield fr
                else:
                    yield from decode_events(fr.payload, fr.offset, types)
            elif fr.kind == FRAME_COLUMNS:   # as events frames, one per writer (5.5)
                if columns and raw_events:
                    yield fr
                    continue
                for part in columnar_parts(fr, source):
                    if raw_events or type(part) is Damage:
                        yield part
                    else:
                        yield from decode_events(part.payload, part.offset, types)
            # other frame kinds: from a newer writer, skipped
        except DECODE_ERRORS as exc:
            yield undecodable(fr, exc, source)
