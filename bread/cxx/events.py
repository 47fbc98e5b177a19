"""Entries of a C++ binlog stream -> events: each with its source, the writer and clock
sync in force, and its arguments decoded; as ``CxxEvent`` (the text path) or
``bread.Event`` (``bread.read``).

As in the C++ reader, an EventSource replaces an earlier one of its id (a later session in
the same stream), the last WriterProp is the writer of the events after it, the last
ClockSync their clock; an event of a source never defined is damage, and ends the stream.
"""

from __future__ import annotations

import datetime as _dt
from typing import BinaryIO, Callable, Iterator

from blogformat.entries import ClockSync, EventSource, WriterProp

from ..events import Event, Origin
from .entries import BinlogError, RawEvent, iter_entries
from .printer import NO_SYNC, NO_WRITER, CxxEvent, DateText, ValueText, clock_ns, message
from .values import decode


def cxx_events(f: BinaryIO) -> Iterator[CxxEvent]:
    """The events of a C++ binlog stream in file order; damage raises BinlogError after the
    events before it."""
    sources: dict[int, EventSource] = {}
    writer, sync = NO_WRITER, NO_SYNC
    for e in iter_entries(f):
        if isinstance(e, RawEvent):
            src = sources.get(e.source_id)
            if src is None:
                raise BinlogError(f"Event has invalid source id: {e.source_id}")
            yield CxxEvent(src, writer, sync, e.clock, decode(src.arg_tags, e.args), e.offset)
        elif isinstance(e, EventSource):
            sources[e.id] = e
        elif isinstance(e, WriterProp):
            writer = e
        else:
            sync = e


def event_ns(sync: ClockSync, clock: int) -> int:
    """An event's ``ns``: its time, or its clock itself where no clock sync says."""
    ns = clock_ns(sync, clock)
    return clock if ns is None else ns


def zone(sync: ClockSync) -> _dt.tzinfo:
    """The writer's zone of a clock sync (UTC where its offset is not one a zone has)."""
    try:
        offset = _dt.timedelta(seconds=sync.tz_offset)
        return _dt.timezone(offset, sync.tz_name) if sync.tz_name else _dt.timezone(offset)
    except (ValueError, TypeError):
        return _dt.timezone.utc


class BinlogEvent(Event):
    """A ``bread.Event`` of a C++ binlog file: its message rendered when it is read."""

    __slots__ = ()

    def __init__(self, ev: CxxEvent, ns: int, tz: _dt.tzinfo, origin: Origin,
                 text: str) -> None:
        super().__init__(ev.source, ev.writer, ev.clock, ns, tz, ev.args, None, {}, ev.offset,
                         origin)
        self._message = text


def to_events(events: Iterator[CxxEvent], origin: Origin) -> Iterator[Event]:
    """``bread.Event`` objects: the message rendered as the C++ bread renders it (time
    points in the writer's zone), ``ns`` the clock itself where no clock sync says."""
    text = ValueText(DateText("%Y-%m-%d %H:%M:%S.%N"))
    zones: dict[ClockSync, _dt.tzinfo] = {}
    for ev in events:
        sync = ev.sync
        tz = zones.get(sync)
        if tz is None:
            tz = zones[sync] = zone(sync)
        text.sync = sync
        yield BinlogEvent(ev, event_ns(sync, ev.clock), tz, origin,
                          message(ev.source.format, ev.args, text))


def read_events(f: BinaryIO, name: str, damaged: Callable[[int, str], None]) -> Iterator[Event]:
    """The ``bread.Event`` objects of a C++ binlog stream; damage is given to ``damaged``
    (its offset, the C++ bread's message) and ends the stream."""
    events = cxx_events(f)
    last = [0]

    def tracked() -> Iterator[CxxEvent]:
        for ev in events:
            last[0] = ev.offset
            yield ev
    try:
        yield from to_events(tracked(), Origin(name))
    except BinlogError as exc:
        damaged(last[0], str(exc))
