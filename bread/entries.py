"""Frames -> entries: the file header, metadata entries and raw events, all validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Union

import msgpack

from blog import format as fmt
from blog.source import EventSource
from blog.values import UNICODE_ERRORS, ext_hook, map_pairs

from .frames import Damage, Frame


@dataclass(frozen=True)
class FileHeader:
    """The first frame of every file (and of every file concatenated after it)."""

    offset: int
    version: int
    descriptor: dict


@dataclass(frozen=True)
class WriterProp:
    """A SessionWriter: id, name, and the thread and process it belongs to."""

    id: int
    name: str
    thread_ident: int = 0
    native_id: int = 0
    pid: int = 0


@dataclass(frozen=True)
class ClockSync:
    """Relates clock values to wall time: ``ns = ns_since_epoch + (clock - clock_value) * 1e9 / frequency``."""

    clock_value: int
    frequency: int
    ns_since_epoch: int
    tz_offset: int
    tz_name: str


@dataclass(frozen=True)
class Dropped:
    """``count`` events of writer ``writer_id`` were dropped (channel full) before ``clock``."""

    writer_id: int
    count: int
    clock: int
    offset: int = 0


@dataclass(frozen=True)
class Lost:
    """The writer's output failed: ``events`` events (``bytes`` bytes) did not reach this file."""

    events: int
    bytes: int
    clock: int
    offset: int = 0


@dataclass(slots=True)   # one per event: slots, and not frozen (a frozen __init__ is slower)
class RawEvent:
    """An event as stored: source and writer ids, clock, argument values and captured texts."""

    offset: int              # of the frame that holds it
    writer_id: int
    source_id: int
    clock: int
    args: list
    texts: dict = field(default_factory=dict)


Entry = Union[FileHeader, EventSource, WriterProp, ClockSync, Dropped, Lost, RawEvent, Damage]


class BadEntry(ValueError):
    """An entry whose fields do not have the specified types."""


def _int(v: Any) -> int:
    if type(v) is not int:
        raise BadEntry(f"expected an integer, got {type(v).__name__}")
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise BadEntry(f"expected a string, got {type(v).__name__}")
    return v


def _unpacker(payload: bytes) -> msgpack.Unpacker:
    u = msgpack.Unpacker(None, raw=False, ext_hook=ext_hook, strict_map_key=False,
                         unicode_errors=UNICODE_ERRORS, max_buffer_size=max(len(payload), 1),
                         object_pairs_hook=map_pairs)
    u.feed(payload)
    return u


def _metadata(e: list, offset: int) -> Entry | None:
    tag = e[0]
    if type(tag) is not int:
        return None  # not a tag this format defines: skipped like an unknown one
    if tag == fmt.ENTRY_EVENT_SOURCE:
        sid, sev, cat, func, file, line, form, tags = e[1:9]
        names = e[9] if len(e) > 9 else []
        if type(names) is not list:
            raise BadEntry("field names must be an array")
        names = tuple(_str(n) for n in names)
        positional = _int(e[10]) if len(e) > 10 else None
        return EventSource(_int(sid), _int(sev), _str(cat), _str(func), _str(file), _int(line),
                           _str(form), _str(tags), names,
                           positional if positional is not None else -1)
    if tag == fmt.ENTRY_WRITER_PROP:
        wid, name = e[1:3]
        extra = [_int(x) for x in e[3:6]]
        return WriterProp(_int(wid), _str(name), *extra)
    if tag == fmt.ENTRY_CLOCK_SYNC:
        clock, freq, ns, tzo, tzn = e[1:6]
        if _int(freq) <= 0:
            raise BadEntry("clock frequency must be positive")
        return ClockSync(_int(clock), freq, _int(ns), _int(tzo), _str(tzn))
    if tag == fmt.ENTRY_DROPPED:
        return Dropped(_int(e[1]), _int(e[2]), _int(e[3]), offset)
    if tag == fmt.ENTRY_LOST:
        return Lost(_int(e[1]), _int(e[2]), _int(e[3]), offset)
    return None  # unknown metadata: skipped, as the format promises


def iter_entries(frames: Iterable[Frame | Damage], source: str = "") -> Iterator[Entry]:
    """Decode frames into entries; anything malformed becomes a Damage (never an exception)."""
    unsupported: int | None = None   # the version of the current stream, if not readable
    for fr in frames:
        if isinstance(fr, Damage):
            yield fr
            continue
        if fr.kind == fmt.FRAME_HEADER:
            unsupported = None
            version = _peek_version(fr.payload)
            if version is not None and version != fmt.FORMAT_VERSION:
                unsupported = version
        if unsupported is not None:
            yield Damage(fr.offset, fmt.HEADER_SIZE + len(fr.payload),
                         f"format version {unsupported} not supported by this reader", source)
            continue
        if fr.flags:
            # A feature this reader does not know (compression, say): not readable here.
            yield Damage(fr.offset, fmt.HEADER_SIZE + len(fr.payload),
                         f"frame flags {fr.flags:#x} not supported by this reader", source)
            continue
        try:
            if fr.kind == fmt.FRAME_HEADER:
                head = msgpack.unpackb(fr.payload, raw=False, strict_map_key=False,
                                       unicode_errors=UNICODE_ERRORS)
                if type(head) is not list or len(head) < 2:
                    raise BadEntry("header payload is not an array of 2 or more")
                version, descriptor = head[:2]
                yield FileHeader(fr.offset, _int(version),
                                 descriptor if isinstance(descriptor, dict) else {})
            elif fr.kind == fmt.FRAME_METADATA:
                for e in _unpacker(fr.payload):
                    if type(e) is not list or not e:
                        raise BadEntry("metadata entry is not a non-empty array")
                    try:
                        entry = _metadata(e, fr.offset)
                    except (ValueError, IndexError) as exc:  # too few fields
                        raise BadEntry(f"metadata entry tag {e[0]!r}: {exc}") from None
                    if entry is not None:
                        yield entry
            elif fr.kind == fmt.FRAME_EVENTS:
                yield from _events(fr)
            # other frame kinds: from a newer writer, skipped
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
            yield Damage(fr.offset, fmt.HEADER_SIZE + len(fr.payload),
                         f"undecodable frame: {str(exc) or type(exc).__name__}", source)


def _peek_version(payload: bytes) -> int | None:
    try:
        version = msgpack.unpackb(payload, raw=False, strict_map_key=False,
                                  unicode_errors=UNICODE_ERRORS)[0]
    except Exception:
        return None
    return version if type(version) is int else None


def _events(fr: Frame) -> Iterator[RawEvent]:
    u = _unpacker(fr.payload)
    head = u.unpack()
    if type(head) is not list or len(head) < 3:
        raise BadEntry("events batch header is not an array of 3 or more")
    wid, prev, count = _int(head[0]), _int(head[1]), _int(head[2])
    off = fr.offset
    for _ in range(count):
        ev = u.unpack()
        if type(ev) is not list or len(ev) < 3:
            raise BadEntry("event is not an array of 3 or more")
        sid, delta, args = ev[0], ev[1], ev[2]
        if type(sid) is not int or type(delta) is not int or type(args) is not list:
            raise BadEntry("event fields have the wrong types")
        prev += delta
        texts = ev[3] if len(ev) > 3 and type(ev[3]) is dict else {}
        yield RawEvent(off, wid, sid, prev, args, texts)
