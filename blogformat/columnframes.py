"""Columnar events frames (docs/format.md 5.5, frame kind 4): the events of one call site
as typed columns, for compacted archives.

An events frame (kind 3) stores events row by row: each event's clock delta, source id
and values sit between the other events' fields, and a general compressor finds little
to repeat. A columnar frame holds a stretch of events of any sources and writers, each
field in its own column: the source ids, the writer ids, the clocks (their deltas less
the frame's median delta), and per source one column per value position, each coded for
what it holds: ints as zigzag varints of their deltas, floats as scaled decimals where
that is exact, strs by a dictionary, anything else as its msgpack bytes. The events keep
their order.

Exact by construction: a value enters a typed column only if packing it again gives
its bytes, so ``decode`` gives back each event's values byte for byte. ``events_payloads``
turns a columnar frame into ordinary events payloads (one per writer), which every
reader already reads. Decoding takes untrusted input: anything out of bounds or of the
wrong type raises ``BadEntry``; no count is trusted before the bytes that back it.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator, Sequence

import msgpack

from .eventframes import BatchHeader, event_prefix
from .frames import FRAME_COLUMNS  # noqa: F401  (the kind of frame these payloads are)
from .values import UNPACK_OPTIONS, pack_plain
from .valuetypes import BadEntry

#: Events one columnar frame holds at most (a reader refuses more).
MAX_EVENTS = 1 << 20
#: Values one event of a columnar frame holds at most.
MAX_VALUES = 256

# Column codings (the first element of a column array).
INTS = 0          # [0, varints]: zigzag deltas from 0 (the first value, then differences)
CLOCKS = 1        # [1, varints]: zigzag deltas of deltas (the clocks: read, no longer written)
DECIMALS = 2      # [2, scale, column]: floats f = n / 10**scale, n in an int column
DOUBLES = 3       # [3, bytes]: little-endian IEEE doubles, 8 bytes each
STRINGS = 4       # [4, [str...], varints]: indexes into the dictionary
PACKED = 5        # [5, bytes]: each value's msgpack bytes, one after another
SAME = 6          # [6, int]: one int, every event's (the source and writer columns only)
PLAIN = 7         # [7, base, varints]: zigzag ints, each its difference from base
DELTAS = 8        # [8, base, varints]: zigzag, each its difference from the one before, less base

#: The codings of the source and writer id columns (a value column's: INTS or PLAIN).
ID_CODINGS = (INTS, PLAIN, SAME)
#: The codings of the clocks column: DELTAS (written since 2026-11-27: the deltas of clocks
#: that jitter, less their median, compress better than their deltas of deltas) or CLOCKS
#: (written before).
CLOCK_CODINGS = (DELTAS, CLOCKS)
#: The most decimal digits DECIMALS takes (10**15 and every n within 2**53 are exact
#: doubles, so n / 10**scale is one correctly rounded division, in C as in Python).
MAX_SCALE = 15
_EXACT = 1 << 53


class Event(tuple):
    """(source id, writer id, clock, values, texts): ``values`` a list of each value's
    msgpack bytes, ``texts`` the msgpack bytes of the event's texts map, or None."""

    __slots__ = ()

    def __new__(cls, source_id: int, writer_id: int, clock: int, values: list[bytes],
                texts: bytes | None = None) -> "Event":
        return tuple.__new__(cls, (source_id, writer_id, clock, values, texts))


# --- varints -----------------------------------------------------------------------

def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63) if -(1 << 63) <= n < (1 << 63) else -1


def _put_varints(values: Sequence[int]) -> bytes | None:
    """Zigzag LEB128 of each value; None if one is beyond 64 bits signed."""
    out = bytearray()
    for v in values:
        z = _zigzag(v)
        if z < 0:
            return None
        while z >= 0x80:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


def _get_varints(data: Any, count: int) -> list[int]:
    if type(data) is not bytes or len(data) < count:
        raise BadEntry("a column's varints are not bytes enough for its events")
    out: list[int] = []
    z = shift = 0
    for b in data:
        z |= (b & 0x7F) << shift
        if b & 0x80:
            shift += 7
            if shift > 63:
                raise BadEntry("a varint of a column runs beyond 64 bits")
            continue
        out.append((z >> 1) ^ -(z & 1))
        z = shift = 0
    if shift or len(out) != count:
        raise BadEntry(f"a column holds {len(out)} values, not {count}")
    return out


def _deltas(values: Sequence[int]) -> list[int]:
    prev, out = 0, []
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def _sums(deltas: list[int]) -> list[int]:
    total, out = 0, []
    for d in deltas:
        total += d
        out.append(total)
    return out


# --- encoding ----------------------------------------------------------------------

def _clock_column(clocks: Sequence[int]) -> list | None:
    """The clocks column: DELTAS, its base the median of the clocks' differences (the
    len // 2-th smallest, the first clock's from 0 among them); None if the base or a
    difference less it is beyond 64 bits."""
    d = _deltas(clocks)
    base = sorted(d)[len(d) // 2]
    data = _put_varints([x - base for x in d]) if _zigzag(base) >= 0 else None
    return None if data is None else [DELTAS, base, data]


def _int_column(values: Sequence[int], same: bool = False) -> list | None:
    """An int column of ``values``: the shortest of INTS and PLAIN, or SAME where ``same``
    allows it (the source and writer columns only: a value column takes a byte per value
    at least, so that no count is without the bytes that back it); None if a value or
    difference is beyond 64 bits."""
    d = _deltas(values)
    if same and all(v == values[0] for v in values) and _zigzag(values[0]) >= 0:
        return [SAME, values[0]]
    ways: list[tuple[bytes, list]] = []
    deltas = _put_varints(d)
    if deltas is not None:
        ways.append((deltas, [INTS, deltas]))
    base = min(values)
    offsets = _put_varints([v - base for v in values]) if _zigzag(base) >= 0 else None
    if offsets is not None:
        ways.append((offsets, [PLAIN, base, offsets]))
    if len(ways) > 1 and len(values) >= 256:   # what a compressor makes of each
        import zlib
        return min(ways, key=lambda w: len(zlib.compress(w[0], 1)))[1]
    return min(ways, key=lambda w: len(w[0]))[1] if ways else None


def _scale_of(values: list[float]) -> int | None:
    """The fewest decimals that give every float back exactly, or None."""
    for f in values:   # NaN, infinities, -0.0 and the huge have no such decimal
        if not abs(f) < _EXACT or (f == 0 and str(f)[0] == "-"):
            return None
    for scale in range(MAX_SCALE + 1):
        p = 10 ** scale
        for f in values:
            n = round(f * p)
            if abs(n) >= _EXACT or n / p != f:
                break
        else:
            return scale
    return None


def _column(raw: list[bytes]) -> list:
    """The column of one value position: the narrowest coding whose values pack back to
    the same bytes, else PACKED."""
    try:
        values = [msgpack.unpackb(b, **UNPACK_OPTIONS) for b in raw]
    except Exception:   # a map with an array key, say: readers keep such a value opaque
        return [PACKED, b"".join(raw)]
    kinds = {type(v) for v in values}
    if kinds == {int} and all(pack_plain(v) == b for v, b in zip(values, raw)):
        got = _int_column(values)
        if got is not None:
            return got
    if kinds == {float} and all(b[0] == 0xCB for b in raw):
        scale = _scale_of(values)
        if scale is not None:
            got = _int_column([round(f * 10 ** scale) for f in values])
            if got is not None:
                return [DECIMALS, scale, got]
        return [DOUBLES, b"".join(b[1:][::-1] for b in raw)]   # big- to little-endian
    if kinds == {str} and all(pack_plain(v) == b for v, b in zip(values, raw)):
        index: dict[str, int] = {}
        codes = [index.setdefault(v, len(index)) for v in values]
        if len(index) <= len(values) // 2 + 1:
            return [STRINGS, list(index), _put_varints(codes)]
    return [PACKED, b"".join(raw)]


def encode(events: Sequence[Event]) -> bytes:
    """The payload of a columnar frame of ``events`` (1 to MAX_EVENTS, in the order they
    are to be read; the events of one source hold as many values each)."""
    if not 0 < len(events) <= MAX_EVENTS:
        raise ValueError(f"a columnar frame holds 1 to {MAX_EVENTS} events, not {len(events)}")
    by_source: dict[int, list[Event]] = {}
    for e in events:
        by_source.setdefault(e[0], []).append(e)
    groups = []
    for sid, evs in by_source.items():
        width = len(evs[0][3])
        if width > MAX_VALUES or any(len(e[3]) != width for e in evs):
            raise ValueError(f"the events of source {sid} hold one number of values each "
                             f"(at most {MAX_VALUES})")
        groups.append([sid, width, [_column([e[3][i] for e in evs]) for i in range(width)]])
    clocks = [e[2] for e in events]
    sources = _int_column([e[0] for e in events], same=True)
    writers = _int_column([e[1] for e in events], same=True)
    times = _clock_column(clocks)
    if sources is None or writers is None or times is None:
        raise ValueError("a source id, writer id or clock beyond 64 bits")
    texts = None
    if any(e[4] is not None for e in events):
        texts = [PACKED, b"".join(e[4] if e[4] is not None else b"\xc0" for e in events)]
    return pack_plain([sources, groups, len(events), min(clocks), max(clocks), writers, times,
                       texts])


# --- decoding ----------------------------------------------------------------------

def _packed(data: Any, count: int) -> list[bytes]:
    if type(data) is not bytes:
        raise BadEntry("a packed column is not bytes")
    u = msgpack.Unpacker(max_buffer_size=len(data) + 1)
    u.feed(data)
    out, at = [], 0
    try:
        for _ in range(count):
            u.skip()
            end = u.tell()
            out.append(data[at:end])
            at = end
    except (msgpack.OutOfData, ValueError, msgpack.StackError, msgpack.FormatError) as exc:
        raise BadEntry(f"a packed column does not hold {count} values: {exc}") from None
    if at != len(data):
        raise BadEntry("a packed column holds more than its values")
    return out


def _ints(col: Any, count: int, codings: tuple[int, ...] = (INTS, PLAIN)) -> list[int]:
    """The ints of a column of one of ``codings`` (SAME, bytes for no value, only where
    the caller allows it: the frame's count is then backed by its clocks)."""
    if type(col) is not list or len(col) < 2 or col[0] not in codings:
        raise BadEntry("an int column is not of a coding its place takes")
    if col[0] == SAME:
        if type(col[1]) is not int:
            raise BadEntry("a same column's value is not an int")
        return [col[1]] * count
    if col[0] in (PLAIN, DELTAS):
        if len(col) < 3 or type(col[1]) is not int:
            raise BadEntry(f"an int column is not [{col[0]}, base, varints]")
        got = [col[1] + v for v in _get_varints(col[2], count)]
        return _sums(got) if col[0] == DELTAS else got
    d = _get_varints(col[1], count)
    return _sums(_sums(d) if col[0] == CLOCKS else d)


def _values(col: Any, count: int) -> list[bytes]:
    """The msgpack bytes of each value of a column."""
    if type(col) is not list or not col or type(col[0]) is not int:
        raise BadEntry("a column is not an array starting with its coding")
    coding = col[0]
    if coding in (INTS, PLAIN):
        return [pack_plain(v) for v in _ints(col, count) if _in64(v)]
    if coding == DECIMALS:
        if len(col) < 3 or type(col[1]) is not int or not 0 <= col[1] <= MAX_SCALE:
            raise BadEntry("a decimal column's scale is not 0 to 15")
        p = 10 ** col[1]
        return [b"\xcb" + struct.pack(">d", n / p) for n in _ints(col[2], count)
                if abs(n) < _EXACT or _bad("a decimal beyond 2**53")]
    if coding == DOUBLES:
        if len(col) < 2 or type(col[1]) is not bytes or len(col[1]) != 8 * count:
            raise BadEntry("a double column's bytes are not 8 per value")
        data = col[1]
        return [b"\xcb" + data[8 * i:8 * i + 8][::-1] for i in range(count)]
    if coding == STRINGS:
        if len(col) < 3 or type(col[1]) is not list or not all(type(s) is str for s in col[1]):
            raise BadEntry("a string column's dictionary is not a list of str")
        words = [pack_plain(s) for s in col[1]]
        codes = _get_varints(col[2], count)
        if any(not 0 <= c < len(words) for c in codes):
            raise BadEntry("a string column's index is outside its dictionary")
        return [words[c] for c in codes]
    if coding == PACKED:
        if len(col) < 2:
            raise BadEntry("a packed column has no bytes")
        return _packed(col[1], count)
    raise BadEntry(f"unknown column coding {coding}")


def _bad(why: str) -> bool:
    raise BadEntry(why)


def _in64(v: int) -> bool:
    return -(1 << 63) <= v < (1 << 64) or _bad("an int column value beyond 64 bits")


def decode(payload: bytes) -> list[Event]:
    """The events of a columnar frame's payload, in frame order."""
    try:
        head = msgpack.unpackb(payload, **UNPACK_OPTIONS)   # (its limits: the payload's size)
    except Exception as exc:   # the payload is untrusted: any failure is the frame's damage
        raise BadEntry(f"a columnar frame does not decode: {type(exc).__name__}") from None
    if type(head) is not list or len(head) < 8:
        raise BadEntry("a columnar frame is not an array of 8 or more")
    sources, groups, count, lo, hi, writers, times, texts = head[0:8]
    if type(count) is not int or not 0 < count <= MAX_EVENTS:
        raise BadEntry("a columnar frame's count is out of range")
    sids, wids = _ints(sources, count, ID_CODINGS), _ints(writers, count, ID_CODINGS)
    clocks = _ints(times, count, CLOCK_CODINGS)   # a varint per event: the count's bytes
    if not all(0 <= w < (1 << 64) for w in wids) or not all(0 <= s < (1 << 64) for s in sids):
        raise BadEntry("a source or writer id out of range")
    if not all(-(1 << 63) <= c < (1 << 63) for c in clocks):
        raise BadEntry("a clock beyond 64 bits")
    if type(lo) is not int or type(hi) is not int or not lo <= min(clocks) <= max(clocks) <= hi:
        raise BadEntry("a columnar frame's clocks are outside its min_clock and max_clock")
    counts: dict[int, int] = {}
    for sid in sids:
        counts[sid] = counts.get(sid, 0) + 1
    if type(groups) is not list or len(groups) != len(counts):
        raise BadEntry("a columnar frame's sources are not those of its events")
    rows: dict[int, Iterator[list[bytes]]] = {}
    for g in groups:
        if type(g) is not list or len(g) < 3 or type(g[2]) is not list or g[0] not in counts \
                or g[0] in rows or type(g[1]) is not int or len(g[2]) != g[1] \
                or g[1] > MAX_VALUES:
            raise BadEntry("a columnar frame's source group is not [id, width, columns]")
        cols = [_values(c, counts[g[0]]) for c in g[2]]
        rows[g[0]] = (list(r) for r in zip(*cols)) if cols else ([] for _ in range(counts[g[0]]))
    if texts is not None and (type(texts) is not list or not texts or texts[0] != PACKED):
        raise BadEntry("a columnar frame's texts are not nil or a packed column")
    txt = None if texts is None else _values(texts, count)
    return [Event(sids[i], wids[i], clocks[i], next(rows[sids[i]]),
                  None if txt is None or txt[i] == b"\xc0" else txt[i]) for i in range(count)]


def events_payloads(payload: bytes) -> Iterator[bytes]:
    """The columnar frame's events as ordinary events payloads (docs/format.md 5.1), one
    per writer, each in frame order: what every reader reads."""
    by_writer: dict[int, list[Event]] = {}
    for e in decode(payload):
        by_writer.setdefault(e[1], []).append(e)
    for wid, evs in by_writer.items():
        clocks = [e[2] for e in evs]
        out = [BatchHeader(wid, clocks[0], len(evs), min(clocks), max(clocks)).encode()]
        prev = clocks[0]
        for sid, _, clock, values, texts in evs:
            if not -(1 << 63) <= clock - prev < (1 << 63):
                raise BadEntry("a clock delta beyond 64 bits between a writer's events")
            head = b"\xdc" + len(values).to_bytes(2, "big") if len(values) > 15 \
                else bytes([0x90 | len(values)])
            out.append(event_prefix(3 if texts is None else 4, sid, clock - prev) + head
                       + b"".join(values) + (texts or b""))
            prev = clock
        yield b"".join(out)
