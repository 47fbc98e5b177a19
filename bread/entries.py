"""Frames -> entries: the file header, metadata entries and raw events, all validated.

What each entry holds is defined once, in ``blogformat.entries``; this layer
walks a stream's frames, tracks its format version and turns whatever does
not decode into Damage.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Union

import msgpack

from blogformat.entries import (BadEntry, ClockSync, Dropped, EventSource, FileHeader, Lost,
                                RawEvent, WriterProp, decode_events, decode_header,
                                decode_metadata_frame, peek_version)
from blogformat.frames import (FORMAT_VERSION, FRAME_EVENTS, FRAME_HEADER, FRAME_METADATA,
                               HEADER_SIZE)

from .frames import Damage, Frame

Entry = Union[FileHeader, EventSource, WriterProp, ClockSync, Dropped, Lost, RawEvent, Damage]

__all__ = ["BadEntry", "ClockSync", "Dropped", "Entry", "EventSource", "FileHeader", "Lost",
           "RawEvent", "WriterProp", "iter_entries"]


def iter_entries(frames: Iterable[Frame | Damage], source: str = "") -> Iterator[Entry]:
    """Decode frames into entries; anything malformed becomes a Damage (never an exception)."""
    unsupported: int | None = None   # the version of the current stream, if not readable
    for fr in frames:
        if isinstance(fr, Damage):
            yield fr
            continue
        if fr.kind == FRAME_HEADER:
            unsupported = None
            version = peek_version(fr.payload)
            if version is not None and version != FORMAT_VERSION:
                unsupported = version
        if unsupported is not None:
            yield Damage(fr.offset, HEADER_SIZE + len(fr.payload),
                         f"format version {unsupported} not supported by this reader", source)
            continue
        if fr.flags:
            # A feature this reader does not know (compression, say): not readable here.
            yield Damage(fr.offset, HEADER_SIZE + len(fr.payload),
                         f"frame flags {fr.flags:#x} not supported by this reader", source)
            continue
        try:
            if fr.kind == FRAME_HEADER:
                yield decode_header(fr.payload, fr.offset)
            elif fr.kind == FRAME_METADATA:
                yield from decode_metadata_frame(fr.payload, fr.offset)
            elif fr.kind == FRAME_EVENTS:
                yield from decode_events(fr.payload, fr.offset)
            # other frame kinds: from a newer writer, skipped
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
            yield Damage(fr.offset, HEADER_SIZE + len(fr.payload),
                         f"undecodable frame: {str(exc) or type(exc).__name__}", source)
