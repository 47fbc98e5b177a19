"""Value types described once per stream (blogformat/valuetypes.py, docs/format.md 4.8, 4.9):
a dataclass's field names and repr, an enum member's name, value and style are metadata,
written once per stream ahead of the first event that holds them; each call holds an id
(and a record's field values). These tests prove nothing is lost by that: every stream
(a rotated file, a later session, a recovered crash buffer, a compacted file) carries the
descriptions its events need, and a reader given a hostile or incomplete table never
fails."""

from __future__ import annotations

import dataclasses
import enum
import io
import os
import signal
import subprocess
import textwrap
import threading
import time
import typing

import msgpack

import blog
import bread
from blogformat import frames as fmt
from blogformat import values, valuetypes
from blogformat.entries import EnumMember, RecordType, metadata_frames
from blogformat.valueclasses import ENUM_NAMED, DataclassValue, EnumValue, ExtValue
from blogformat.values import EXT_MEMBER, EXT_RECORD
from bread.compact import compact
from bread.entries import iter_entries
from bread.frames import iter_frames

from helpers import in_threads, python_child


class Venue(enum.Enum):
    NYSE = "n"
    LSE = "l"


@dataclasses.dataclass
class QuoteTick:
    sym: str
    bid: float
    ask: float
    note: str = dataclasses.field(default="", repr=False)


class Leg(typing.NamedTuple):
    sym: str
    qty: int


def _entries(data: bytes) -> list:
    return list(iter_entries(iter_frames(io.BytesIO(data))))


def test_a_type_is_described_once_per_stream_and_calls_hold_only_ids_and_values():
    s = blog.Session(name="described")
    log = s.get_logger("t")
    out = blog.MemoryOutputStream()
    for i in range(500):
        log.info("q {} at {} legs {}", QuoteTick("AAPL", i, i + 0.5, "x"), Venue.NYSE,
                 [Leg("A", i), Leg("B", -i)])
        if i % 100 == 0:
            s.consume(out)
    s.consume(out)
    data = out.getvalue()
    described = [e for e in _entries(data) if type(e) in (RecordType, EnumMember)]
    tick = [e for e in described if type(e) is RecordType and e.type.endswith("QuoteTick")]
    assert len(tick) == 1 and tick[0].fields == ("sym", "bid", "ask", "note")
    assert tick[0].repr_name == "QuoteTick" and tick[0].shown == ("sym", "bid", "ask")
    assert len([e for e in described if type(e) is EnumMember and e.name == "NYSE"]) == 1
    # No event holds a name: the type's, its fields', the member's are in its description.
    events = b"".join(fr.payload for fr in iter_frames(io.BytesIO(data))
                      if fr.kind == fmt.FRAME_EVENTS)
    assert len(events) > 500 * 20
    for name in (b"QuoteTick", b"bid", b"NYSE", b"Leg", b"qty"):
        assert name not in events, name
    evs = list(bread.read(io.BytesIO(data)))
    assert [e.message for e in evs] == [
        f"q QuoteTick(sym='AAPL', bid={i}, ask={i + 0.5}) at Venue.NYSE legs "
        f"[Leg(sym='A', qty={i}), Leg(sym='B', qty={-i})]" for i in range(500)]
    tick_value = evs[3].args[0]
    assert tick_value == DataclassValue(tick[0].type, {"sym": "AAPL", "bid": 3, "ask": 3.5,
                                                       "note": "x"})
    assert evs[0].args[1] == EnumValue(values.type_name(Venue), "NYSE", "n")


def test_every_rotated_file_describes_the_types_its_events_hold(tmp_path):
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1500)
    s = blog.Session(name="rot")
    log = s.get_logger("t")
    for i in range(300):
        log.info("{} {}", QuoteTick("S", i, i), Venue.LSE if i % 2 else Venue.NYSE)
        if i % 20 == 19:
            s.consume(rf)
    s.consume(rf)
    rf.close()
    files = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".blog"))
    assert len(files) > 3
    got = []
    for p in files:            # each read alone: nothing comes from an earlier file
        evs = list(bread.read(str(p)))
        assert all(isinstance(e.args[0], DataclassValue) for e in evs), p
        got += [e.message for e in evs]
    assert got == [f"QuoteTick(sym='S', bid={i}, ask={i}) Venue.{'LSE' if i % 2 else 'NYSE'}"
                   for i in range(300)]


def test_a_session_made_later_describes_the_types_met_before():
    first = blog.Session(name="first")
    first.get_logger().info("{}", Leg("X", 1))     # described now, in this process
    later = blog.Session(name="later")
    out = blog.MemoryOutputStream()
    later.get_logger().info("{} {}", Leg("Y", 2), QuoteTick("Z", 1.0, 2.0))
    later.consume(out)
    (ev,) = bread.read(io.BytesIO(out.getvalue()))
    assert ev.message == "Leg(sym='Y', qty=2) QuoteTick(sym='Z', bid=1.0, ask=2.0)"


def test_threads_meeting_a_new_type_at_once_share_one_description():
    s = blog.Session(name="race")
    log = s.get_logger()
    out = blog.MemoryOutputStream()
    Fresh = dataclasses.make_dataclass("Fresh", [("a", int), ("b", int)])
    Mood = enum.Enum("Mood", ["CALM", "BUSY"])
    start = threading.Barrier(8)

    def work(k: int) -> None:
        start.wait()
        for i in range(200):
            log.info("{} {}", Fresh(k, i), Mood.BUSY if i % 2 else Mood.CALM)

    in_threads(work, 8)
    s.consume(out)
    data = out.getvalue()
    fresh = [e for e in _entries(data) if type(e) is RecordType and e.type.endswith("Fresh")]
    assert len(fresh) == 1
    evs = list(bread.read(io.BytesIO(data)))
    assert len(evs) == 1600 and all(type(e.args[0]) is DataclassValue for e in evs)
    assert sorted(e.message for e in evs) == sorted(
        f"Fresh(a={k}, b={i}) Mood.{'BUSY' if i % 2 else 'CALM'}"
        for k in range(8) for i in range(200))


def test_a_kill_right_after_a_type_is_first_met_recovers_its_description(tmp_path):
    # Proves: the description reaches the crash buffer before any event that holds it.
    # Nothing is consumed before the kill; recovery rebuilds the events from the buffer.
    path = str(tmp_path / "app.blog")
    code = textwrap.dedent(f"""
        import dataclasses, enum, os, signal, blog
        blog.basic_config({path!r}, crash_buffer=True, flush_interval=60)
        Late = dataclasses.make_dataclass("Late", [("x", int)])
        Hue = enum.Enum("Hue", ["INK"])
        log = blog.get_logger()
        for i in range(50):
            log.info("late {{}} {{}}", Late(i), Hue.INK)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run(python_child("-c", code), capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL
    r = subprocess.run(python_child("-m", "bread", "--recover", path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rd = bread.read(path)
    assert [e.message for e in rd] == [f"late Late(x={i}) Hue.INK" for i in range(50)]
    assert rd.damage == []


def _log_process(d, first: str) -> None:
    """A process logging into the set ``d``/app.blog, meeting the types in another order."""
    code = textwrap.dedent(f"""
        import dataclasses, enum, blog
        Leg = dataclasses.make_dataclass("Leg", [("sym", str), ("qty", int)])
        Side = enum.Enum("Side", ["BUY", "SELL"])
        blog.basic_config("{d}/app.blog", rotate_bytes=4000)
        log = blog.get_logger("x")
        for i in range(300):
            if {first!r} == "leg":
                log.info("{{}} {{}}", Leg("A", i), Side.SELL)
            else:
                log.info("{{}} {{}}", Side.BUY, [Leg("B", i)])
        blog.shutdown()
    """)
    subprocess.run(python_child("-c", code), check=True, timeout=60)


def test_compaction_renumbers_the_types_of_each_process(tmp_path):
    # Two processes gave their types other ids; in the compacted file, one stream per
    # process, every value still reads as it did.
    d = tmp_path / "logs"
    _log_process(d, "leg")
    _log_process(d, "side")
    before = sorted(e.message for e in bread.read(str(d)))
    assert len(before) == 600 and "Leg(sym='A', qty=7) Side.SELL" in before
    t = time.time() - 3600
    for n in os.listdir(d):
        os.utime(d / n, (t, t))
    done = compact(str(d), 60 * 10**9)
    assert [x["events"] for x in done] == [600] and done[0]["damage"] == []
    r = bread.read(str(d))
    assert sorted(e.message for e in r) == before
    assert r.damage == []


# --- a hostile or incomplete table -----------------------------------------------------------

def _file(meta: list, args: list) -> bytes:
    """A stream with ``meta`` entries, one source "{} {}" and one event of ``args``."""
    from blogformat.entries import ClockSync, EventSource, header_payload
    from blogformat.eventframes import BatchHeader
    data = fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({}))
    data += b"".join(metadata_frames([ClockSync(0, 10**9, 0, 0, "UTC"),
                                      EventSource(1, 0x80, "c", "f", "x.py", 1, "{} {}", ""),
                                      *meta]))
    ev = msgpack.packb([1, 0, args])
    return data + fmt.frame_bytes(fmt.FRAME_EVENTS, BatchHeader(1, 0, 1, 0, 0).encode() + ev)


def _ext(code: int, value) -> msgpack.ExtType:
    return msgpack.ExtType(code, msgpack.packb(value))


def test_values_whose_description_is_missing_or_wrong_read_as_extension_values():
    rec = RecordType(3, "m.R", "R", ("a", "b"), 3)
    mem = EnumMember(4, "m.E", "X", 1, ENUM_NAMED)
    cases = [
        ([rec, mem], [_ext(EXT_RECORD, [3, 1, "s"]), _ext(EXT_MEMBER, 4)], "R(a=1, b='s') E.X"),
        ([], [_ext(EXT_RECORD, [3, 1, "s"]), _ext(EXT_MEMBER, 4)], None),     # not described
        ([rec, mem], [_ext(EXT_RECORD, [3, 1]), _ext(EXT_MEMBER, 3)], None),  # count, kind
        ([rec, mem], [_ext(EXT_RECORD, ["3", 1, 2]), _ext(EXT_MEMBER, "4")], None),
    ]
    for meta, args, message in cases:
        rd = bread.read(io.BytesIO(_file(meta, args)))
        (ev,) = rd
        assert rd.damage == []
        if message is not None:
            assert ev.message == message
        else:
            assert all(type(a) is ExtValue and a.code in (EXT_MEMBER, EXT_RECORD)
                       for a in ev.args)
            assert ev.message.startswith("ExtValue(code=")        # rendered, never raised
        out = subprocess.run(python_child("-m", "bread", "-"), input=_file(meta, args),
                             capture_output=True, timeout=60)
        assert out.returncode == 0 and out.stdout.count(b"\n") == 1


def test_descriptions_beyond_the_limits_are_damage_and_not_kept():
    big = "n" * (valuetypes.MAX_FIELD_TEXT + 1)
    bad = [RecordType(0, "m.R", "R", ("a",), 1), RecordType(valuetypes.MAX_TYPE_ID + 1, "m.R",
                                                            "R", ("a",), 1),
           RecordType(5, big, None, (), 0), EnumMember(6, "m.E", big, 1, 1),
           RecordType(7, "m.R", None, tuple(f"f{i}" for i in range(5000)), 0)]
    rd = bread.read(io.BytesIO(_file(bad, [_ext(EXT_RECORD, [5]), _ext(EXT_MEMBER, 6)])))
    (ev,) = rd
    assert len(rd.damage) == len(bad)
    assert all("metadata beyond the limits" in d.reason for d in rd.damage)
    assert [type(a) for a in ev.args] == [ExtValue, ExtValue]


def test_a_description_given_again_replaces_the_old_one():
    meta = [EnumMember(4, "m.E", "X", 1, 1), EnumMember(4, "m.E", "Y", 2, 1)]
    (ev,) = bread.read(io.BytesIO(_file(meta, [_ext(EXT_MEMBER, 4), 0])))
    assert ev.message == "E.Y 0"


def test_described_values_nested_deep_in_other_extensions_decode():
    meta = [RecordType(1, "m.P", "P", ("x",), 1)]
    inner = _ext(EXT_RECORD, [1, 5])
    tup = msgpack.ExtType(values.EXT_TUPLE, msgpack.packb([inner, [inner]]))
    (ev,) = bread.read(io.BytesIO(_file(meta, [tup, {"k": inner}])))
    assert ev.message == "(P(x=5), [P(x=5)]) {'k': P(x=5)}"


def test_a_signal_handler_logging_a_new_type_while_its_thread_holds_the_session_lock():
    # Proves no deadlock between the registry's lock and the session's: the main thread
    # registers call sites (the session's lock held) while a signal handler logs values
    # of brand-new types, and another thread does too.
    s = blog.Session(name="signals")
    log = s.get_logger("t")
    ran = [0]
    stop = threading.Event()
    # Classes met for the first time during the test (each describes itself once).
    fresh_h = [dataclasses.make_dataclass(f"H{k}", ["x"]) for k in range(200)]
    fresh_t = [dataclasses.make_dataclass(f"T{k}", ["y"]) for k in range(300)]

    def handler(signum, frame):
        ran[0] += 1
        log.info("h {}", fresh_h[ran[0] % 200](1))

    def other():
        i = 0
        while not stop.is_set():
            i += 1
            log.info("t {}", fresh_t[i % 300](2))

    old = signal.signal(signal.SIGALRM, handler)
    t = threading.Thread(target=other, daemon=True)
    t.start()
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    try:
        end = time.monotonic() + 2
        i = 0
        while time.monotonic() < end:
            i += 1
            s.registry.add_source(key=("k", i % 1000), severity=0x80, category="c",
                                  function="f", file="x.py", line=i % 1000, format="{}",
                                  arg_tags="")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        stop.set()
        t.join(10)
    assert not t.is_alive() and ran[0] > 10
    out = blog.MemoryOutputStream()
    s.consume(out)
    evs = list(bread.read(io.BytesIO(out.getvalue())))
    assert evs and all(type(e.args[0]) is DataclassValue for e in evs)


def _stream(meta: list, events: list, pid: int = 1) -> bytes:
    from blogformat.entries import ClockSync, EventSource, header_payload
    from blogformat.eventframes import BatchHeader
    data = fmt.frame_bytes(fmt.FRAME_HEADER, header_payload({"pid": pid}))
    data += b"".join(metadata_frames([ClockSync(0, 10**9, 0, 0, "UTC"),
                                      EventSource(1, 0x80, "c", "f", "x.py", 1, "{} {}", ""),
                                      *meta]))
    body = b"".join(msgpack.packb([1, 1, args]) for args in events)
    return data + fmt.frame_bytes(fmt.FRAME_EVENTS, BatchHeader(1, 0, len(events), 0, 0).encode()
                                  + body)


def _compacted(tmp_path, *files: bytes, damage: int = 0) -> list[str]:
    from bread.compact.compactor import Compactor
    c = Compactor(str(tmp_path))
    for k, data in enumerate(files):
        (tmp_path / f"{k}.blog").write_bytes(data)
        c.add_file(str(tmp_path / f"{k}.blog"))
    assert len(c.damage) == damage
    out = io.BytesIO()
    c.write(out, [])
    return [e.message for e in bread.read(io.BytesIO(out.getvalue()))]


def test_compaction_keeps_extension_values_it_cannot_decode_as_they_are(tmp_path):
    member = EnumMember(1, "m.Side", "BUY", 1, ENUM_NAMED)
    future = msgpack.ExtType(20, b"\xc1\xc1")      # a newer writer's code, not msgpack
    data = _stream([member], [[_ext(EXT_MEMBER, 1), 5], [_ext(EXT_MEMBER, 1), future]])
    before = [e.message for e in bread.read(io.BytesIO(data))]
    assert before == ["Side.BUY 5", "Side.BUY ExtValue(code=20, data=b'\\xc1\\xc1')"]
    assert _compacted(tmp_path, data) == before


def test_compaction_never_lends_a_value_another_file_s_description(tmp_path):
    # File a lost its description of id 1 (refused as beyond the limits); file b, of the
    # same process, describes id 1 as Mood.CALM: a's value stays unknown.
    a = _stream([EnumMember(0, "m.Alarm", "FIRE", 1, 1)], [[_ext(EXT_MEMBER, 1), 0]])
    b = _stream([EnumMember(1, "m.Mood", "CALM", 1, 1)], [[_ext(EXT_MEMBER, 1), 1]])
    got = sorted(_compacted(tmp_path, b, a, damage=1))
    assert got[1] == "Mood.CALM 1" and got[0].startswith("ExtValue(code=15") and \
        got[0].endswith(" 0")


def test_a_refused_description_leaves_no_older_one_of_its_id_in_force():
    meta = [EnumMember(4, "m.E", "OLD", 1, 1),
            EnumMember(4, "m.E", "n" * (valuetypes.MAX_FIELD_TEXT + 1), 1, 1)]
    rd = bread.read(io.BytesIO(_file(meta, [_ext(EXT_MEMBER, 4), 0])))
    (ev,) = rd
    assert type(ev.args[0]) is ExtValue and len(rd.damage) == 1
