"""One process's files merged into one compacted stream, written to a file (see the
package docstring): its header, the call sites, value types and writers of all of those
files renumbered as one, its events in time order, and a Summary."""

from __future__ import annotations

import io
import time
from typing import Any, Iterator

import msgpack

from blogformat.entries import (MAX_METADATA_TEXT, MAX_SOURCE_ID, MAX_WRITERS, ClockSync, Dropped,
                                EnumMember, EventSource, FileHeader, Lost, Metadata, RecordType,
                                Summary, WriterProp, header_payload, metadata_frames, text_size)
from blogformat.eventframes import BatchHeader, batch_start
from blogformat.valuedecoding import may_hold_described, renumber
from blogformat.valuetypes import MAX_TYPE_ID, MAX_TYPE_TEXT, Described, TypeTable
from blogformat.frames import FRAME_COLUMNS, FRAME_EVENTS, FRAME_HEADER, frame_bytes

from .. import accel
from ..entries import iter_entries
from ..frames import Damage, Frame, iter_frames
from ..inputs import open_path
from .runs import Runs

#: Events per events frame of a compacted file (one writer's events of a stretch of time).
EVENTS_PER_FRAME = 4096
#: Events per columnar frame (every writer's events of a stretch of time: docs/format.md 5.5).
EVENTS_PER_COLUMNS = 65536
_SEC = 1_000_000_000


class TooBig(RuntimeError):
    """What one process's files hold passes the limits of one stream (format.md 9.1), or
    cannot be copied whole (a frame cut short: its events are unverified)."""


class Compactor:
    """Merges the events of some files into one sorted stream (see the module docstring)."""

    def __init__(self, tmpdir: str) -> None:
        self.sources: dict[tuple, EventSource] = {}
        self.writers: dict[tuple, WriterProp] = {}
        self.runs = Runs(tmpdir)
        self.dropped = 0
        self.lost = 0
        self.damage: list[Damage] = []
        self.tz: tuple[int, str] | None = None
        self.descriptors: list[dict] = []
        self._seq = 0      # events taken in so far
        self._text = 0     # characters of the sources' and writers' text (format.md 9.1)
        self.types: dict[tuple, Described] = {}   # descriptions of value types, by content
        self._type_text = 0

    @property
    def events(self) -> int:
        """The events taken in so far."""
        return self._seq

    def add_file(self, path: str) -> bool:
        """Take in every event of ``path`` (damaged ranges are skipped and kept in
        ``damage``); True if it held damage."""
        before = len(self.damage)
        f = open_path(path)
        try:
            self._add(iter_entries(iter_frames(f, path), path, raw_events=True), path)
            error = getattr(f, "error", None)     # compressed data that did not decode
            if error is not None:
                self.damage.append(Damage(getattr(f, "pos", 0), 0, error, path))
        finally:
            f.close()
        return len(self.damage) > before

    def _add(self, entries: Iterator[Any], path: str) -> None:
        sources: dict[int, EventSource] = {}
        ids: dict[int, int] = {}     # the stream's source ids met in events: the compacted's
        writers: dict[int, WriterProp] = {}
        types = TypeTable()
        sync = (0, _SEC, 0)
        desc: dict = {}
        for e in entries:
            t = type(e)
            if t is Frame and e.kind == FRAME_EVENTS:
                if not e.verified:   # never made checksummed, never deleted: left as it is
                    raise TooBig(f"{path}: a frame cut short by the end of the file holds "
                                 "events that can only be read unverified")
                self._frame(e, sources, ids, writers, types, sync, desc, path)
            elif t is FileHeader:
                sources, ids, writers, sync, desc = {}, {}, {}, (0, _SEC, 0), e.descriptor
                types = TypeTable()
                self.descriptors.append(desc)
            elif t is EventSource:
                sources[e.id] = e
                ids.pop(e.id, None)
            elif t is WriterProp:
                writers[e.id] = e
            elif t is RecordType or t is EnumMember:
                why = types.add(e)
                if why is not None:
                    self.damage.append(Damage(e.offset, 0, f"metadata beyond the limits: {why}",
                                              path))
            elif t is ClockSync:
                sync = (e.clock_value, e.frequency, e.ns_since_epoch)
                if self.tz is None:
                    self.tz = (e.tz_offset, e.tz_name)
            elif t is Dropped:
                self.dropped += e.count
            elif t is Lost:
                self.lost += e.events
            elif t is Damage:
                self.damage.append(e)

    def _source(self, src: EventSource | None, sid: int) -> int:
        if src is None:
            key: tuple = ("?", sid)
        else:
            key = (src.severity, src.category, src.function, src.file, src.line, src.format,
                   src.arg_tags, src.field_names, src.positional, src.arg_names, src.style,
                   src.flags)
        s = self.sources.get(key)
        if s is None:
            size = text_size(src) if src is not None else 1
            if len(self.sources) >= MAX_SOURCE_ID or self._text + size > MAX_METADATA_TEXT:
                raise TooBig("more sources than one stream holds (format.md 9.1)")
            self._text += size
            if src is None:
                s = EventSource(len(self.sources) + 1, 0, "?", "?", "?", 0, "", "")
            else:
                s = EventSource(len(self.sources) + 1, src.severity, src.category, src.function,
                                src.file, src.line, src.format, src.arg_tags, src.field_names,
                                src.positional, arg_names=src.arg_names, style=src.style,
                                flags=src.flags)
            self.sources[key] = s
        return s.id

    def _type(self, types: TypeTable, tid: Any) -> int:
        """The compacted stream's id of the description ``types`` has under ``tid`` (0, which
        no stream describes, for one it has not)."""
        e = types.get(tid)
        if e is None:
            return 0
        key = ((e.type, e.repr_name, e.fields, e.mask) if type(e) is RecordType
               else (e.type, e.name, e.value, type(e.value), e.style))
        got = self.types.get(key)
        if got is None:
            size = e.text_size()
            if len(self.types) >= MAX_TYPE_ID or self._type_text + size > MAX_TYPE_TEXT:
                raise TooBig("more value types than one stream holds (format.md 9.1)")
            self._type_text += size
            new_id = len(self.types) + 1
            got = self.types[key] = (RecordType(new_id, e.type, e.repr_name, e.fields, e.mask)
                                     if type(e) is RecordType else
                                     EnumMember(new_id, e.type, e.name, e.value, e.style))
        return got.id

    def _writer(self, w: WriterProp | None, wid: int, desc: dict) -> int:
        name = w.name if w is not None else ""
        key = (desc.get("host"), desc.get("pid"), desc.get("start_time_ns"), wid, name)
        nw = self.writers.get(key)
        if nw is None:
            if len(self.writers) >= MAX_WRITERS or self._text + len(name) > MAX_METADATA_TEXT:
                raise TooBig("more writers than one stream holds (format.md 9.1)")
            self._text += len(name)
            pid = w.pid if w is not None and w.pid else desc.get("pid", 0)
            nw = WriterProp(len(self.writers) + 1, name, w.thread_ident if w else 0,
                            w.native_id if w else 0, pid if type(pid) is int else 0)
            self.writers[key] = nw
        return nw.id

    def _frame(self, fr: Frame, sources: dict, ids: dict, writers: dict, types: TypeTable,
               sync: tuple, desc: dict, path: str) -> None:
        payload = fr.payload
        u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(payload) + 1)
        u.feed(payload)
        try:     # the file is untrusted: anything but the format is damage of the frame
            wid, clock, count = batch_start(u.unpack())   # BadEntry is a ValueError
            new_wid = self._writer(writers.get(wid), wid, desc)
            cv, freq, ns0 = sync
            fast = accel.compact
            if fast is not None:   # C takes the plain events; from where it stops, Python
                at, why = u.tell(), 0
                while count > 0 and why != 2:   # (no event has less than a byte)
                    got, at, clock, self._seq, why, sid, event = fast.walk(
                        payload, at, min(count, len(payload)), clock, new_wid, cv, freq, ns0,
                        self._seq, ids)
                    self.runs.extend(got)
                    count -= len(got)
                    if why == 1:
                        ids[sid] = self._source(sources.get(sid), sid)
                    elif why == 3:   # a described value's id, maybe: Python's to renumber
                        assert event is not None   # (it comes with why 3)
                        sid, delta, n, raw = event
                        clock += delta
                        self._take(sid, n, raw, clock, sync, sources, types, new_wid)
                        count -= 1
                if count > 0:
                    payload = payload[at:]
                    u = msgpack.Unpacker(raw=False, strict_map_key=False,   # (its limits:
                                         max_buffer_size=len(fr.payload) + 1)   # the frame's)
                    u.feed(payload)
            for _ in range(count):
                n = u.read_array_header()
                sid = u.unpack()
                delta = u.unpack()
                if n < 3 or type(sid) is not int or type(delta) is not int:
                    raise ValueError("an event is not [source id, clock delta, args...]")
                clock += delta
                start = u.tell()
                for _ in range(n - 2):
                    u.skip()
                self._take(sid, n, payload[start:u.tell()], clock, sync, sources, types,
                           new_wid)
        except (ValueError, TypeError, IndexError, msgpack.OutOfData,
                msgpack.ExtraData, msgpack.FormatError, msgpack.StackError,
                RecursionError) as exc:
            self.damage.append(Damage(fr.offset, fr.size,
                                      f"undecodable frame: {exc}", path))

    def _take(self, sid: int, n: int, raw: bytes, clock: int, sync: tuple, sources: dict,
              types: TypeTable, new_wid: int) -> None:
        """One event of a frame: ``n`` (its array's elements), ``raw`` (what follows its
        clock delta), its clock; ValueError where its time is beyond 64 bits."""
        if may_hold_described(raw):   # ids of this stream's descriptions: the
            # compacted one's (0, described by none, where this stream has none)
            raw = renumber(raw, lambda tid: self._type(types, tid))
        cv, freq, ns0 = sync
        ns = ns0 + (clock - cv) * _SEC // freq
        if not -(1 << 63) <= ns < 1 << 63:
            raise ValueError("a time beyond 64 bits of nanoseconds")
        self._seq += 1
        self.runs.add((ns, new_wid, self._seq, self._source(sources.get(sid), sid), n, raw))

    def write(self, out: io.BufferedIOBase, replaces: list[str], columnar: bool = False) -> int:
        """Write the compacted stream to ``out``; the number of events.

        Its descriptor is the first original's (host, pid, program...: the events'
        origin), marked ``compacted`` and listing every original the file replaces.
        ``columnar``: its events in columnar frames (``blogformat.columnframes``).
        """
        descriptor = dict(self.descriptors[0]) if self.descriptors else {}
        descriptor.update(compacted=True, replaces=replaces, compacted_by="bread",
                          compacted_ns=time.time_ns())
        out.write(frame_bytes(FRAME_HEADER, header_payload(descriptor)))
        tz = self.tz or (0, "UTC")
        meta: list[Metadata] = [ClockSync(0, _SEC, 0, tz[0], tz[1]), *self.sources.values(),
                *self.types.values(), *self.writers.values()]
        if self.dropped:
            meta.append(Dropped(0, self.dropped, time.time_ns()))
        if self.lost:
            meta.append(Lost(self.lost, 0, time.time_ns()))
        self._metadata(out, meta)
        counts: dict[int, int] = {}
        n, lo, hi = 0, None, None
        events, size = (_columns, EVENTS_PER_COLUMNS) if columnar else \
            (self._events, EVENTS_PER_FRAME)
        for chunk in self.runs.merged(size):
            events(out, chunk, counts)
            n += len(chunk)
            lo = chunk[0][0] if lo is None else lo
            hi = chunk[-1][0]
        self._metadata(out, [Summary(n, lo or 0, hi or 0, self.dropped, self.lost, counts,
                                     time.time_ns())])
        self.runs.close()
        return n

    @staticmethod
    def _metadata(out: io.BufferedIOBase, entries: list[Metadata]) -> None:
        for fr in metadata_frames(entries):
            out.write(fr)

    @staticmethod
    def _events(out: io.BufferedIOBase, chunk: list[tuple], counts: dict[int, int]) -> None:
        """One frame per writer of a stretch of sorted events, each in time order. Every
        time is 64-bit signed (``_take`` and walk() make a time beyond damage), so each
        frame's base and its differences (in [0, 2**64)) are msgpack ints."""
        fast = accel.compact
        payloads = None if fast is None else fast.rows(chunk, counts)
        if payloads is not None:
            for p in payloads:
                out.write(frame_bytes(FRAME_EVENTS, p))
            return
        by_writer: dict[int, list[tuple]] = {}
        for rec in chunk:
            by_writer.setdefault(rec[1], []).append(rec)
        pack = msgpack.packb
        for wid, recs in by_writer.items():
            base = prev = recs[0][0]
            parts = []
            for ns, _w, _s, sid, n, raw in recs:
                head_n = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
                parts.append(head_n + pack(sid) + pack(ns - prev) + raw)
                prev = ns
                counts[sid] = counts.get(sid, 0) + 1
            head = BatchHeader(wid, base, len(recs), recs[0][0], recs[-1][0])
            out.write(frame_bytes(FRAME_EVENTS, head.encode() + b"".join(parts)))


def _columns(out: io.BufferedIOBase, chunk: list[tuple], counts: dict[int, int]) -> None:
    """A stretch of sorted events as one columnar frame, in their order; as events frames
    (``Compactor._events``) where one does not fit its coding (an event with more than its
    values and texts, an id or clock delta beyond 64 bits)."""
    fast = accel.compact
    payload = None if fast is None else fast.columns(chunk, counts)
    if payload is not None:
        out.write(frame_bytes(FRAME_COLUMNS, payload))
        return
    from blogformat import columnframes
    events = []
    for ns, wid, _seq, sid, n, raw in chunk:
        split = _values_and_texts(n, raw)
        if split is None:
            Compactor._events(out, chunk, counts)
            return
        events.append(columnframes.Event(sid, wid, ns, *split))
    try:
        payload = columnframes.encode(events)
    except ValueError:
        Compactor._events(out, chunk, counts)
        return
    for e in events:
        counts[e[0]] = counts.get(e[0], 0) + 1
    out.write(frame_bytes(FRAME_COLUMNS, payload))


def _values_and_texts(n: int, raw: bytes) -> tuple[list[bytes], bytes | None] | None:
    """An event's values (each one's msgpack bytes) and its texts map's bytes, from what
    follows its clock delta (``n`` - 2 elements); None for any other shape."""
    if n not in (3, 4):
        return None
    u = msgpack.Unpacker(max_buffer_size=len(raw) + 1)
    u.feed(raw)
    try:
        k = u.read_array_header()
        values, at = [], u.tell()
        for _ in range(k):
            u.skip()
            values.append(raw[at:u.tell()])
            at = u.tell()
    except (ValueError, msgpack.OutOfData, msgpack.StackError, msgpack.FormatError):
        return None
    if n == 3:
        return (values, None) if at == len(raw) else None
    return values, raw[at:]
