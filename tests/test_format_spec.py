"""docs/format.md is exact: a decoder written from it alone reads what blog writes as bread does.

The decoder below uses only struct, zlib and msgpack (plus the standard
library types the values decode to). It imports nothing from blogformat,
blog.values or bread; blog is used only to write files and bread only as the
reference to compare with.
"""

from __future__ import annotations

import datetime as dt
import io
import pathlib
import re
import struct
import threading
import uuid
import zlib
from decimal import Decimal

import msgpack
import pytest

import blog
import blog.pipeline.logger
import blogformat.entries
import bread
from helpers import pure_python_clock

# --- the decoder, from docs/format.md --------------------------------------

MAGIC = b"\x9eBLG"                       # 2.1
# magic, kind, flags, spare, length, payload_crc, header_crc
HEAD = struct.Struct("<4sBBHIII")
MAX_PAYLOAD = 64 * 1024 * 1024
KIND_HEADER, KIND_METADATA, KIND_EVENTS = 1, 2, 3
DEFAULT_SYNC = (0, 1_000_000_000, 0, 0, "UTC")   # 4.3


def scan(data: bytes) -> list[tuple]:
    """Section 10: ("frame", offset, kind, payload) and ("damage", offset, length, reason),
    in order."""
    out: list[tuple] = []
    p, n = 0, len(data)
    bad = None                               # (start, reason) of the open damaged range
    wasted = 0                               # failed CRC bytes over claims holding the magic

    def damage(reason: str) -> None:
        nonlocal bad
        if bad is None:
            bad = (p, reason)

    while True:
        if n - p < HEAD.size:                                        # 1: torn tail
            if p < n:
                damage("truncated frame at end of input")
            break
        if data[p:p + 4] != MAGIC:                                   # 2
            damage("no frame marker")
            j = data.find(MAGIC, p + 1)
            if j < 0:
                break
            p = j
            continue
        _magic, kind, flags, _spare, length, payload_crc, header_crc = HEAD.unpack_from(data, p)
        if zlib.crc32(data[p + 4:p + 16]) != header_crc:             # 3
            reason = "bad frame header"
        elif length > MAX_PAYLOAD:                                   # 4
            reason = f"frame length {length} out of range"
        elif n - p - 20 < length:                                    # 5
            reason = "truncated frame at end of input"
        elif (MAGIC in data[p + 20:p + 20 + length]                  # 6: a marker inside,
              and wasted + length > 2 * (p + 20 + length)):          # allowance spent
            reason = "marker inside the claimed payload"
        elif zlib.crc32(data[p + 20:p + 20 + length]) != payload_crc:  # 7
            reason = "checksum mismatch"
            if MAGIC in data[p + 20:p + 20 + length]:
                wasted += length
        else:                                                        # 8
            if bad is not None:
                out.append(("damage", bad[0], p - bad[0], bad[1]))
                bad = None
            payload = data[p + 20:p + 20 + length]
            if flags & 1:                                            # 2.3: escaped
                payload = payload.replace(b"\x9e\x01", b"\x9e")
            out.append(("frame", p, kind, payload))
            p += 20 + length
            continue
        damage(reason)
        p += 1
    if bad is not None:
        out.append(("damage", bad[0], n - bad[0], bad[1]))
    return out


def hashable(v):
    """Section 7, unhashable keys: kept as an opaque value of the type name and repr."""
    try:
        hash(v)
        return v
    except TypeError:
        return ("opaque", type(v).__name__, repr(v))


def pairs(items: list) -> dict:
    return {hashable(k): v for k, v in items}


def unpacker(data: bytes) -> msgpack.Unpacker:
    u = msgpack.Unpacker(raw=False, ext_hook=ext_hook, strict_map_key=False,
                         unicode_errors="surrogatepass", max_buffer_size=max(len(data), 1),
                         object_pairs_hook=pairs)
    u.feed(data)
    return u


def unpackb(data: bytes):
    return msgpack.unpackb(data, raw=False, ext_hook=ext_hook, strict_map_key=False,
                           unicode_errors="surrogatepass", object_pairs_hook=pairs)


def decode_tz(tz):
    """Section 7, tz: nil or [offset_us, name, key]; rebuilt as a fixed offset."""
    if tz is None:
        return None
    us, name = tz[0], tz[1]
    off = dt.timedelta(microseconds=us)
    return dt.timezone(off, name) if isinstance(name, str) else dt.timezone(off)


MAX_DECODE_DEPTH = 40
_depth = threading.local()


def ext_hook(code: int, data: bytes):
    """Section 7: an extension that does not decode, or is nested deeper than 40 levels,
    stays an opaque ("ext", code, data)."""
    depth = getattr(_depth, "n", 0)
    if depth >= MAX_DECODE_DEPTH:
        return ("ext", code, bytes(data))
    _depth.n = depth + 1
    try:
        return decode_ext(code, data)
    except Exception:
        return ("ext", code, bytes(data))
    finally:
        _depth.n = depth


def decode_ext(code: int, data: bytes):
    """Section 7, the extension table."""
    if code == 1:
        return tuple(unpackb(data))
    if code == 2:
        return int.from_bytes(data, "little", signed=True)
    if code == 3:
        return set(map(hashable, unpackb(data)))
    if code == 4:
        return frozenset(map(hashable, unpackb(data)))
    if code == 5:
        y, mo, d, h, mi, s, us, fold, tz = unpackb(data)[:9]
        return dt.datetime(y, mo, d, h, mi, s, us, tzinfo=decode_tz(tz), fold=fold)
    if code == 6:
        return dt.date(*unpackb(data)[:3])
    if code == 7:
        h, mi, s, us, fold, tz = unpackb(data)[:6]
        return dt.time(h, mi, s, us, tzinfo=decode_tz(tz), fold=fold)
    if code == 8:
        days, seconds, micros = unpackb(data)[:3]
        return dt.timedelta(days=days, seconds=seconds, microseconds=micros)
    if code == 9:
        return Decimal(data.decode("ascii"))
    if code == 10:
        return uuid.UUID(bytes=bytes(data))
    if code in (11, 12, 13, 14):
        names = {11: "enum", 12: "dataclass", 13: "exception", 14: "opaque"}
        n = {11: 3, 12: 2, 13: 3, 14: 2}[code]
        fields = unpackb(data)[:n]
        if len(fields) < n:
            raise ValueError("missing elements")
        return (names[code], *fields)
    return ("ext", code, bytes(data))


def decode(data: bytes) -> dict:
    """Sections 3-6 and 9: the events, headers, notices and damage of a file."""
    events: list[dict] = []
    result = {"events": events, "headers": [], "notices": [], "damage": []}
    sources: dict = {}
    writers: dict = {}
    sync = DEFAULT_SYNC
    for item in scan(data):
        if item[0] == "damage":
            result["damage"].append(item[1:])
            continue
        _, offset, kind, payload = item
        if kind == KIND_HEADER:
            version, descriptor = unpackb(payload)[:2]
            result["headers"].append((offset, version, descriptor))
            sources, writers, sync = {}, {}, DEFAULT_SYNC
        elif kind == KIND_METADATA:
            for e in unpacker(payload):
                tag = e[0]
                if type(tag) is not int:                            # 4: skipped
                    continue
                if tag == 1:
                    sid, sev, cat, func, file, line, form, tags = e[1:9]
                    names = list(e[9]) if len(e) > 9 else []
                    sources[sid] = dict(id=sid, severity=sev, category=cat, function=func,
                                        file=file, line=line, format=form, arg_tags=tags,
                                        field_names=names)
                elif tag == 2:
                    writers[e[1]] = dict(id=e[1], name=e[2])
                elif tag == 3:
                    sync = tuple(e[1:6])
                elif tag in (4, 5):
                    result["notices"].append((tag, *e[1:4]))
        elif kind == KIND_EVENTS:
            u = unpacker(payload)
            head = u.unpack()
            wid, clock, count = head[0], head[1], head[2]
            for _ in range(count):
                ev = u.unpack()
                sid, delta, args = ev[0], ev[1], ev[2]
                texts = ev[3] if len(ev) > 3 and isinstance(ev[3], dict) else {}
                clock += delta                                       # 5.3
                src = sources[sid]
                names = src["field_names"]
                if names and len(args) >= len(names):               # 6.3
                    k = len(args) - len(names)
                    fields = dict(zip(names, args[k:]))
                    args = args[:k]
                else:
                    fields = {}
                clock_value, freq, ns_epoch, tz_offset, tz_name = sync
                ns = ns_epoch + (clock - clock_value) * 1_000_000_000 // freq
                events.append(dict(source=src, writer=writers.get(wid, dict(id=wid, name="")),
                                   clock=clock, ns=ns, tz=(tz_offset, tz_name),
                                   args=tuple(args), fields=fields, texts=texts,
                                   message=render(src["format"], args, fields, texts)))
    return result


_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)?(?:!([rsa]))?(?::(.*))?\Z", re.S)


def parse_format(fmt: str) -> tuple[list[str], list[tuple]]:
    """Section 8.1: literals and (key, conversion, spec) placeholders."""
    literals, placeholders, text, i, positional = [], [], "", 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c in "{}" and fmt[i + 1:i + 2] == c:
            text += c
            i += 2
        elif c == "{":
            j = fmt.index("}", i)
            name, conv, spec = _FIELD.match(fmt[i + 1:j]).groups()
            if name is None:
                key, positional = positional, positional + 1
            else:
                key = name
            literals.append(text)
            placeholders.append((key, conv, spec or ""))
            text, i = "", j + 1
        else:
            text += c
            i += 1
    literals.append(text)
    return literals, placeholders


def render(fmt: str, args, fields: dict, texts: dict) -> str:
    """Section 8.2 (the test formats are all valid, with small widths)."""
    literals, placeholders = parse_format(fmt)
    out = [literals[0]]
    for i, (key, conv, spec) in enumerate(placeholders):
        if i in texts:
            out.append(texts[i])
        else:
            v = args[key] if isinstance(key, int) else fields[key]
            v = {"r": repr, "s": str, "a": ascii}.get(conv, lambda x: x)(v)
            out.append(format(v, spec))
        out.append(literals[i + 1])
    return "".join(out)


# --- writing with blog, comparing with bread --------------------------------

CET = dt.timezone(dt.timedelta(hours=1), "CET")
NEG = dt.timezone(dt.timedelta(hours=-5, minutes=-30))


def shape(v):
    """A value with its exact types, so that 1 == 1.0 == True and (1,) vs [1] are told apart."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [shape(x) for x in v])
    if isinstance(v, (set, frozenset)):    # bread's SetValue is a set shown in logged order
        return ("frozenset" if isinstance(v, frozenset) else "set", sorted(map(repr, v)))
    if isinstance(v, dict):
        return ("dict", [(shape(k), shape(x)) for k, x in v.items()])
    if isinstance(v, (dt.datetime, dt.time)):
        return (type(v).__name__, v.isoformat(), v.utcoffset() if isinstance(v, dt.datetime)
                else v.utcoffset())
    return (type(v).__name__, repr(v))


def as_spec(v):
    """bread's value classes in the spec decoder's form (section 7), recursively."""
    if isinstance(v, list):
        return [as_spec(x) for x in v]
    if isinstance(v, tuple):
        return tuple(as_spec(x) for x in v)
    if isinstance(v, (set, frozenset)):
        return type(v)(as_spec(x) for x in v)
    if isinstance(v, dict):
        return {as_spec(k): as_spec(x) for k, x in v.items()}
    if isinstance(v, bread.ExtValue):
        return ("ext", v.code, v.data)
    if isinstance(v, bread.OpaqueValue):
        return ("opaque", v.type, v.text)
    if isinstance(v, bread.EnumValue):
        return ("enum", v.type, v.name, as_spec(v.value))
    if isinstance(v, bread.DataclassValue):
        return ("dataclass", v.type, as_spec(v.fields))
    if isinstance(v, bread.ExceptionValue):
        return ("exception", v.type, v.message, v.traceback)
    return v


def assert_same(data: bytes) -> dict:
    """Decode ``data`` with the spec decoder and with bread; everything must agree."""
    mine = decode(data)
    reader = bread.read(io.BytesIO(data))
    theirs = list(reader)
    assert [(d.offset, d.length, d.reason) for d in reader.damage] == mine["damage"]
    assert [(h.offset, h.version, h.descriptor) for h in reader.headers] == mine["headers"]
    assert len(theirs) == len(mine["events"])
    for ev, m in zip(theirs, mine["events"]):
        src = m["source"]
        assert (ev.source.id, ev.source.severity, ev.category, ev.function, ev.file, ev.line,
                ev.format, ev.source.arg_tags, list(ev.source.field_names)) == (
            src["id"], src["severity"], src["category"], src["function"], src["file"],
            src["line"], src["format"], src["arg_tags"], src["field_names"])
        assert (ev.writer_id, ev.writer) == (m["writer"]["id"], m["writer"]["name"])
        assert (ev.clock, ev.ns) == (m["clock"], m["ns"])
        assert ev.time.utcoffset() == dt.timedelta(seconds=m["tz"][0])
        args, fields = as_spec(ev.args), as_spec(ev.fields)
        assert args == m["args"] and shape(args) == shape(m["args"])
        assert fields == m["fields"] and shape(fields) == shape(m["fields"])
        assert ev.message == m["message"]
    return mine


def make_clock(base: int):
    """A deterministic clock that sometimes steps back, so that some deltas are negative."""
    lock = threading.Lock()
    n = [0]

    def clock() -> int:
        with lock:
            n[0] += 1
            return base + n[0] * 1000 - (5000 if n[0] % 7 == 3 else 0)
    return clock


def log_everything(log: blog.Logger) -> None:
    log.info("ints {} {} {} {}", 1, -2, 2**64 - 1, -2**63)
    log.info("float {:.3f} and {} and {}", 3.14159, float("-inf"), -0.0)
    log.debug("str {!r} and {} bytes {}", "héllo \ud800 ✓", "", b"\x00\xff")
    log.info("list {} tuple {} empty {}", [1, "a", [2.5, None]], (1, (2, 3)), ())
    log.info("dict {}", {"a": 1, 2: "b", (1, 2): [3], None: {"x": b"y"}})
    log.warning("at {} and {}", dt.datetime(2024, 1, 1, 12, tzinfo=CET),
                dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=NEG))
    log.info("naive {} date {} time {}", dt.datetime(2000, 1, 2, 3, 4, 5),
             dt.date(1999, 12, 31), dt.time(1, 2, 3, 4, tzinfo=dt.timezone.utc))
    log.info("user {user} did {} in {ms:.1f} ms", "login", user="ann", ms=12.25)
    log.error("set {} big {} dec {} id {} td {}", {3, 1}, 2**200, Decimal("1.10"),
              uuid.UUID(int=0x1234), dt.timedelta(days=-1, seconds=5, microseconds=7))
    log.info("fields only {k}", k=frozenset({"z"}))
    log.critical("no placeholders")


@pytest.mark.parametrize("clock", ["stepping-back", "real"])
def test_decoder_matches_bread(monkeypatch: pytest.MonkeyPatch, clock: str) -> None:
    # Small metadata frames, several consumes and an in-band rename, so that metadata
    # and events are split into many frames and clock deltas continue across batches.
    monkeypatch.setattr(blogformat.entries, "FRAME_TARGET", 200)
    if clock == "stepping-back":
        # A clock that sometimes goes back: the pure-Python logger, whose clock we can replace.
        pure_python_clock(monkeypatch, make_clock(1_700_000_000_000_000_000))
    s = blog.Session(name="spec")
    log = s.get_logger("main")
    out = blog.MemoryOutputStream()

    log_everything(log)

    def worker() -> None:
        wlog = s.get_logger("worker")
        for i in range(20):
            wlog.info("step {} of {}", i, 20, phase="warm" if i < 10 else "hot")
            if i == 9:
                s.writer().name = "worker-renamed"   # in band: between steps 9 and 10

    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()
    for i in range(30):
        log.info("loop {} {}", i, [i] * (i % 3))
        if i % 10 == 9:
            s.consume(out)
    log_everything(log)                       # second consume: no header, more events
    s.consume(out)

    data = out.getvalue()
    mine = assert_same(data)
    events = mine["events"]
    assert len(events) == 2 * 11 + 20 + 30
    assert len(mine["headers"]) == 1 and mine["headers"][0][1] == 1
    assert sum(1 for f in scan(data) if f[0] == "frame" and f[2] == KIND_EVENTS) >= 5
    assert {e["writer"]["name"] for e in events} == {"MainThread", "worker", "worker-renamed"}
    steps = [e for e in events if e["source"]["category"] == "worker"]
    assert [e["writer"]["name"] for e in steps] == ["worker"] * 10 + ["worker-renamed"] * 10
    assert [e["fields"] for e in steps[9:11]] == [{"phase": "warm"}, {"phase": "hot"}]
    clocks = [e["clock"] for e in events]
    if clock == "stepping-back":
        assert any(b < a for a, b in zip(clocks, clocks[1:])), "expected a negative delta"
    kw = next(e for e in events if e["source"]["format"].startswith("user"))
    assert kw["args"] == ("login",) and kw["fields"] == {"user": "ann", "ms": 12.25}
    assert kw["message"] == "user ann did login in 12.2 ms"
    sets = next(e for e in events if e["source"]["format"].startswith("set"))
    # A set's text is derived from the file (its logged order): no texts map since
    # 2026-11-26 (the worked example of section 12, written before, has one).
    assert sets["texts"] == {} and sets["args"][1] == 2**200
    assert sets["message"].startswith(f"set {({3, 1})} big ")
    assert mine["damage"] == [] and mine["notices"] == []
    # 5.1/5.3: blog's base_clock is the clock of the writer's previous event (across frames
    # and across the rename's cut), and min/max_clock bound the frame's clocks.
    last: dict = {}
    rest = iter(events)
    for f in scan(data):
        if f[0] == "frame" and f[2] == KIND_EVENTS:
            wid, base, count, lo, hi = unpacker(f[3]).unpack()[:5]
            clocks = [next(rest)["clock"] for _ in range(count)]
            if wid in last:
                assert base == last[wid]
            assert lo <= min(clocks) and max(clocks) <= hi
            last[wid] = clocks[-1]
    assert next(rest, None) is None and len(last) == 2


def _file(name: str, fmt: str, value) -> bytes:
    s = blog.Session(name=name)
    s.get_logger(name).info(fmt, value)
    out = blog.MemoryOutputStream()
    s.consume(out)
    return out.getvalue()


def test_concatenation_resets_state() -> None:
    a = _file("a", "a={}", 1)
    b = _file("b", "b={!r}", "two")
    mine = assert_same(a + b)
    assert [e["message"] for e in mine["events"]] == ["a=1", "b='two'"]
    assert [e["source"]["id"] for e in mine["events"]] == [1, 1]   # ids restart per stream
    assert [h[0] for h in mine["headers"]] == [0, len(a)]


def test_damage_and_torn_tail() -> None:
    a = _file("a", "a={}", [1, 2])
    b = _file("b", "b={}", (3,))
    frames = [f for f in scan(a) if f[0] == "frame"]
    ev_off = frames[-1][1]                       # a's events frame
    broken = bytearray(a + b)
    broken[ev_off + 20] ^= 0xFF                  # bad payload CRC: a's event is lost
    mine = assert_same(bytes(broken) + b[:-3])   # and a torn copy of b at the end
    assert [e["message"] for e in mine["events"]] == ["b=(3,)"]
    assert mine["damage"][0][:2] == (ev_off, len(a) - ev_off)
    assert mine["damage"][0][2] == "checksum mismatch"
    b_last = [f for f in scan(b) if f[0] == "frame"][-1][1]   # b's events frame, torn
    assert mine["damage"][-1] == (len(broken) + b_last, len(b) - 3 - b_last,
                                  "truncated frame at end of input")
    assert len(mine["headers"]) == 3
    broken[ev_off + 20] ^= 0xFF
    broken[ev_off + 8] ^= 0x01                   # a's events frame's length: bad header CRC
    assert assert_same(bytes(broken))["damage"] == [(ev_off, len(a) - ev_off,
                                                     "bad frame header")]
    assert assert_same(b"junk" + a)["damage"] == [(0, 4, "no frame marker")]
    assert assert_same(a[:10])["damage"] == [(0, 10, "truncated frame at end of input")]


def test_example_in_spec() -> None:
    """The hex dump of the worked example decodes to what the text says."""
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "format.md").read_text()
    section = doc.split("## 12. Worked example", 1)[1]
    dump = re.findall(r"^[0-9a-f]{4}  ((?:[0-9a-f]{2} ?)+)", section, re.M)
    data = bytes.fromhex("".join(dump))
    assert len(data) == 385
    mine = assert_same(data)
    assert [(e["clock"], e["message"]) for e in mine["events"]] == [
        (1700000000000001500, "Hello 42"), (1700000000000004000, "tags {'a'} for ann")]
    assert mine["events"][1]["fields"] == {"user": "ann"}
    assert mine["events"][1]["texts"] == {0: "{'a'}"}
    assert mine["headers"][0][2]["host"] == "h1"
    frames = scan(data)
    assert [(f[1], f[2], len(f[3])) for f in frames] == [(0, 1, 118), (0x8a, 2, 147),
                                                          (0x131, 3, 60)]
    # the base clock is the channel's creation time, after the first event's clock
    head = unpacker(frames[2][3]).unpack()
    assert head == [1, 1700000000000001600, 2, 1700000000000001500, 1700000000000004000]


def test_unknown_format_version_is_reported_not_misread():
    # A stream announcing another version is not decoded as version 1: its
    # frames are reported as damage, and the next version-1 stream reads again.
    s = blog.Session()
    s.get_logger().info("ok {}", 1)
    good = blog.MemoryOutputStream()
    s.consume(good)
    alien = spec_frame(KIND_HEADER, msgpack.packb([99, {}])) + spec_frame(3, b"\x00" * 8)
    r = bread.read(io.BytesIO(alien + good.getvalue()))
    assert [e.message for e in r] == ["ok 1"]
    assert len(r.damage) == 2 and "version 99" in r.damage[0].reason


def test_unknown_frame_flags_are_not_decoded():
    s = blog.Session()
    s.get_logger().info("ok {}", 1)
    out = blog.MemoryOutputStream()
    s.consume(out)
    data = bytearray(out.getvalue())
    # set a flag on the last (events) frame and fix its header CRC, as a future writer would
    last = data.rfind(MAGIC)
    data[last + 5] = 2     # bit 0 is FLAG_ESCAPED (2.3); bit 1 is nobody's yet
    data[last + 16:last + 20] = struct.pack("<I", zlib.crc32(bytes(data[last + 4:last + 16])))
    r = bread.read(io.BytesIO(bytes(data)))
    assert list(r) == [] and "flags" in r.damage[0].reason


def spec_frame(kind: int, payload: bytes) -> bytes:
    """A frame built from section 2.1 alone."""
    fields = struct.pack("<BBHII", kind, 0, 0, len(payload), zlib.crc32(payload))
    return MAGIC + fields + struct.pack("<I", zlib.crc32(fields)) + payload


def test_opaque_deep_and_unhashable_values_as_specified():
    """Section 7: extension values that do not decode and ones nested deeper than 40 levels
    stay opaque (code, data), unhashable keys and members are kept as opaque values, and
    none of it is damage; section 4: a metadata tag that is not an int is skipped. The
    frames are built from section 2.1 alone."""
    def nested(depth: int) -> msgpack.ExtType:
        v = msgpack.ExtType(1, msgpack.packb([]))
        for _ in range(depth - 1):
            v = msgpack.ExtType(1, msgpack.packb([v]))
        return v

    values = [
        msgpack.ExtType(77, b"\x00\x01"),                             # unknown code
        msgpack.ExtType(5, msgpack.packb([2020, 13, 1, 0, 0, 0, 0, 0, None])),  # month 13
        msgpack.ExtType(1, msgpack.packb([1]) + b"\x01"),             # trailing bytes
        msgpack.ExtType(11, msgpack.packb(["T"])),                    # missing elements
        nested(40), nested(41),
        msgpack.ExtType(3, msgpack.packb([[1], 2])),                  # a set holding a list
    ]
    payload = b"".join(msgpack.packb(e) for e in [
        [3, 0, 1_000_000_000, 0, 0, "UTC"], [1.0, "float tag"], ["str tag"],
        [1, 1, 0x80, "c", "f", "f.py", 1, "x", "", [], len(values)], [2, 1, "w"]])
    data = (spec_frame(KIND_HEADER, msgpack.packb([1, {}])) + spec_frame(KIND_METADATA, payload)
            + spec_frame(KIND_EVENTS, msgpack.packb([1, 10, 2, 10, 11])
                         + msgpack.packb([1, 0, values]) + b"\x93\x01\x01\x91\x81\x91\x01\xa1x"))
    mine = assert_same(data)
    assert mine["damage"] == [] and [e["message"] for e in mine["events"]] == ["x", "x"]
    args = mine["events"][0]["args"]
    assert args[:4] == tuple(("ext", v.code, v.data) for v in values[:4])
    deep, deeper = args[4:6]
    for _ in range(39):
        deep, deeper = deep[0], deeper[0]
    assert deep == () and deeper[0] == ("ext", 1, msgpack.packb([]))
    assert args[6] == {("opaque", "list", "[1]"), 2}
    assert mine["events"][1]["args"] == ({("opaque", "list", "[1]"): "x"},)
