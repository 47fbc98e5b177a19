"""C++ binlog files: ``bread`` prints each sample of ``tests/data/cxx`` byte for byte as the
C++ bread printed it (its README says how each was made), and reads their values back."""

from __future__ import annotations

import io
import math
import os
import struct

import pytest
from helpers import seeded_random

from bread import cli
from bread.cxx import entries, values
from bread.cxx.printer import CxxPrinter, DateText, ValueText, c_g16
from bread.cxx.text import print_files

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cxx")
SAMPLES = sorted(n[:-5] for n in os.listdir(DATA) if n.endswith(".blog"))
FULL = "%I|%S|%C|%M|%F|%G|%L|%P|%T|%n|%t|%d|%u|%r|%m|%%|%X"


def expected_format(name: str) -> str:
    """The format of NAME.expected.txt, as the samples' README gives it."""
    if name == "NamedWriters":
        return "%n %m"
    if name == "Categories":
        return "%C %n %m"
    if name.startswith("Logging") and name != "Logging":
        return "%m"
    return "%S %m"


CASES = [(name, kind, argv) for name in SAMPLES
         for kind, argv in (("expected", ["-f", expected_format(name)]), ("default", []),
                            ("sorted", ["-s"]), ("full", ["-f", FULL]))
         if os.path.exists(os.path.join(DATA, f"{name}.{kind}.txt"))]


def path(name: str) -> str:
    return os.path.join(DATA, name)


def test_every_sample_has_its_outputs():
    assert len(SAMPLES) == 28
    assert len(CASES) == 28 * 4 - 2   # trunc_payload: expected and sorted only


@pytest.mark.parametrize("name,kind,argv", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_bread_prints_as_the_cxx_bread(name, kind, argv, capsysbinary):
    code = cli.main([*argv, "--escape", "never", path(f"{name}.blog")])
    out, err = capsysbinary.readouterr()
    with open(path(f"{name}.{kind}.txt"), "rb") as f:
        assert out == f.read()
    if name == "trunc_payload":
        with open(path(f"trunc_payload.{kind}.stderr.txt"), "rb") as f:
            assert err == f.read()
        assert code == 3
    else:
        assert (code, err) == (0, b"")


def test_the_cxx_default_format_whatever_blog_s_is(monkeypatch, capsysbinary):
    # blog's default may show more (keyword fields: %K): a C++ file keeps the C++ bread's.
    monkeypatch.setattr("bread.cli.read.DEFAULT_FORMAT", "%S %C [%d] %n %m%K (%G:%L)")
    assert cli.main([path("Logging.blog")]) == 0
    with open(path("Logging.default.txt"), "rb") as f:
        assert capsysbinary.readouterr().out == f.read()


def test_damaged_file_from_standard_input(monkeypatch, capsysbinary):
    with open(path("trunc_payload.blog"), "rb") as f:
        data = f.read()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    code = cli.main(["-f", "%S %m", "-"])
    out, err = capsysbinary.readouterr()
    with open(path("trunc_payload.stdin.txt"), "rb") as f:
        assert out + err == f.read()
    assert code == 3


def test_controls_and_bidi_escaped_by_default_raw_with_escape_never(tmp_path, capsysbinary):
    # Proves (issue 24): a crafted C++ file cannot drive the terminal by default: NUL, ESC,
    # C1 and a right-to-left override are escaped as in blog files' text, wherever the
    # output goes; --escape never prints the C++ bread's bytes.
    log = tmp_path / "nul.blog"
    text = "ab\0\x1b\u0085x\u202ey\tz".encode()
    log.write_bytes(sync(0, 10**9, 0) + writer(1, "w") + source(1, "s={}", "[c")
                    + event(1, 1, _s(text)) + event(1, 2, _s(b"plain")))
    for argv in ([], ["--escape", "always"], ["--escape", "auto"]):
        assert cli.main(["-f", "%m", *argv, str(log)]) == 0
        assert capsysbinary.readouterr().out == b"s=ab\\x00\\x1b\\x85x\\u202ey\tz\ns=plain\n"
    assert cli.main(["-f", "%m", "--escape", "never", str(log)]) == 0
    assert capsysbinary.readouterr().out == b"s=" + text + b"\ns=plain\n"


def test_the_raw_scan_finds_exactly_what_escaping_changes():
    # The C++ printer writes a block as it is when a bytes scan finds nothing to escape:
    # that scan must find every character escape_controls changes (but the newline that
    # ends a line) and no other.
    from bread.cxx.text import _PLAIN, _RAW
    from bread.render import escape_controls
    for c in [*range(0x3000), *range(0xfff0, 0x10000), 0x10ffff]:
        if 0xd800 <= c < 0xe000:
            continue
        ch = chr(c)
        escaped = ch != "\n" and escape_controls(ch) != ch
        assert (_RAW.search(ch.encode()) is not None) == escaped
        if escaped:     # the first, coarser scan never lets one through
            assert ch.encode().translate(None, _PLAIN)


def test_told_by_first_bytes(tmp_path, capsysbinary):
    for name in SAMPLES:
        with open(path(f"{name}.blog"), "rb") as f:
            assert entries.is_binlog(f.read(12)), name
    assert not entries.is_binlog(b"\x9eBLG" + bytes(8))
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"hello, not a log at all\n")
    assert cli.main([str(notes)]) == 2
    assert b"not a blog" in capsysbinary.readouterr().err


def _entry(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def _s(text: str | bytes) -> bytes:
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<I", len(b)) + b


def source(sid: int, fmt: str, tags: str, severity: int = 128) -> bytes:
    return _entry(struct.pack("<QQH", (1 << 64) - 1, sid, severity) + _s("cat") + _s("fn")
                  + _s("/a/b.cpp") + struct.pack("<Q", 7) + _s(fmt) + _s(tags))


def event(sid: int, clock: int, args: bytes) -> bytes:
    return _entry(struct.pack("<QQ", sid, clock) + args)


def writer(wid: int, name: str) -> bytes:
    return _entry(struct.pack("<QQ", (1 << 64) - 2, wid) + _s(name) + struct.pack("<Q", 0))


def sync(clock: int, freq: int, ns: int, offset: int = 0, zone: str = "UTC") -> bytes:
    return _entry(struct.pack("<QQQQi", (1 << 64) - 3, clock, freq, ns, offset) + _s(zone))


def lines(data: bytes, fmt: str = "%m", sort: bool = False) -> tuple[bytes, list]:
    out: list = []
    err: list = []
    print_files([io.BytesIO(data)], CxxPrinter(fmt, "%Y-%m-%d %H:%M:%S.%N"), sort, out.append,
                err.append)
    return b"".join(out), err


@pytest.mark.parametrize("tags,args,text", [
    ("[{E}", struct.pack("<I", 40), "[E ... <repeats 40 times>]"),
    ("[{E}", struct.pack("<I", 2), "[E, E]"),
    ("{N`v'i`next'<0{N}>}", struct.pack("<iBiB", 1, 1, 2, 0),
     "N{ v: 1, next: N{ v: 2, next: {null} } }"),
    ("/i`Color'0`Red'1`Green'\\", struct.pack("<i", 7), "0x7"),
    ("/i`Color'0`Red'1`Green'\\", struct.pack("<i", 1), "Green"),
    ("/b`S'-1`Minus'\\", struct.pack("<b", -1), "Minus"),
    ("<0i[c>", struct.pack("<BI", 2, 2) + b"hi", "hi"),
    ("<0i>", struct.pack("<B", 5), ""),
    ("(yc)", b"\x01x", "(true, x)"),
    ("{D`'{B`a'i}`b'S}", struct.pack("<iH", -3, 9), "D{ B{ a: -3 }, b: 9 }"),
    ("{std::chrono::duration<Rep, std::milli>`count'l}", struct.pack("<q", 12), "12ms"),
    ("{binlog::address`value'L}", struct.pack("<Q", 0xbeef), "0xBEEF"),
    ("f", struct.pack("<f", 0.1), "0.1000000014901161"),
    ("f", struct.pack("<I", 0xFFFFFFFF), "-nan"),          # (Python's % printed nan)
    ("d", struct.pack("<Q", 0xFFF8000000000000), "-nan"),
    ("d", struct.pack("<d", float("nan")), "nan"),
    ("d", struct.pack("<d", float("-inf")), "-inf"),
    ("D", struct.pack("<QH6x", 0xC000000000000000, 0xFFFF), "-nan"),
    ("D", struct.pack("<QH6x", 1 << 63, 16383), "1"),
    ("D", struct.pack("<QH6x", (1 << 63) | 1, 16383), "1"),
    ("D", struct.pack("<QH6x", 0xCCCCCCCCCCCCCCCD, 16379), "0.1"),
    ("D", struct.pack("<QH6x", 1 << 63, 16383 + 200), "1.60693804425899e+60"),
    ("D", struct.pack("<QH6x", (1 << 63) | 1, 16383 + 200), "1.60693804425899e+60"),
    ("D", struct.pack("<QH6x", (1 << 63) | 1, 16383 - 200), "6.223015277861142e-61"),
])
def test_values(tags, args, text):
    data = sync(0, 10**9, 0) + writer(1, "w") + source(1, "{}", tags) + event(1, 5, args)
    assert lines(data) == ((text + "\n").encode(), [])


def test_values_as_python_objects():
    v = values.decode("{N`v'i`next'<0{N}>}/i`C'0`Red'\\[c", struct.pack("<iBiBiI", 1, 1, 2, 0, 0, 2)
                      + b"ok")
    assert v == (values.Struct("N", "`v'i`next'<0{N}>",
                               (("v", 1), ("next", values.Struct("N", "`v'i`next'<0{N}>",
                                                                 (("v", 2), ("next", None)))))),
                 values.Enum("C", "Red", 0, "0"), "ok")
    assert values.decode("[{E}", struct.pack("<I", 1 << 31)) == (values.Repeated(
        values.Struct("E", "", ()), 1 << 31),)


def test_a_sequence_of_a_struct_defined_elsewhere_that_takes_no_byte_is_one_repeated():
    # {A} names A defined earlier in the tag; its one field, an empty tuple, takes no byte:
    # a count of 2**32 - 1 in 4 bytes made a list of that many (MemoryError), as 40 made 40
    tags = "{A`x'()}[{A}"
    a = values.Struct("A", "`x'()", (("x", ()),))
    assert values.decode(tags, struct.pack("<I", 40)) == (a, values.Repeated(a, 40))
    data = sync(0, 10**9, 0) + writer(1, "w") + source(1, "{} {}", tags) + event(
        1, 5, struct.pack("<I", 40))
    assert lines(data) == (b"A{ x: () } [A{ x: () } ... <repeats 40 times>]\n", [])



@pytest.mark.parametrize("tag,value", [("d", struct.pack("<d", float("nan"))),
                                       ("f", struct.pack("<f", float("inf"))),
                                       ("D", struct.pack("<QH6x", 1 << 63, 0x7FFE))])
def test_an_enum_of_a_floating_point_tag_is_damage(tag, value):
    # (a NaN or an infinity raised ValueError or OverflowError, out of bread; 2**16383 a
    # ValueError from its hex digits)
    good = sync(0, 10**9, 0) + writer(1, "w") + source(1, "x {}", "i") + event(
        1, 1, struct.pack("<i", 1))
    enum = source(2, "e {}", f"/{tag}`E'0`A'\\") + event(2, 2, value)
    assert lines(good + enum) == (b"x 1\n", [f"[bread] Exception: Invalid enum tag: {tag}\n"])


class _CountedText(str):
    """A str that counts the characters its slices copy (and whose slices count too)."""

    copied = [0]

    def __getitem__(self, key):
        got = str.__getitem__(self, key)
        if isinstance(key, slice):
            self.copied[0] += len(got)
            return _CountedText(got)
        return got


@pytest.mark.parametrize("tags,args", [
    ("y" * 3000, bytes(3000)),
    ("(" + "y" * 3000 + ")", bytes(3000)),
    ("{A" + "".join(f"`f{i}'y" for i in range(3000)) + "}", bytes(3000)),
    ("<" + "y" * 3000 + ">", bytes([200, 1])),
])
def test_argument_tags_are_walked_in_one_pass(tags, args):
    # Proves: the tags of a value are split once, not the rest of them copied after each
    # tag: a tag of n values costs about n (a million values in 64 MiB took days).
    _CountedText.copied[0] = 0
    got = values.decode(_CountedText(tags), args)
    assert len(got) == (3000 if tags[0] == "y" else 1)
    assert _CountedText.copied[0] <= 8 * len(tags)


def _nested(kind: str, depth: int) -> tuple[str, bytes]:
    """Tags of a value ``depth`` deep and its bytes: a struct in a struct..., a list in a
    list..., a tuple in a tuple..."""
    return {"struct": ("{A`a'" * depth + "y" + "}" * depth, b"\1"),
            "list": ("[" * depth + "y", struct.pack("<I", 1) * depth + b"\1"),
            "tuple": ("(" * depth + "y" + ")" * depth, b"\1")}[kind]


@pytest.mark.parametrize("kind", ["struct", "list", "tuple"])
def test_a_value_nested_as_deep_as_tags_may_renders_in_every_form(kind, tmp_path,
                                                                   capsysbinary):
    # Proves: tags nest at most MAX_DEPTH deep, and a value that deep renders as text, JSON
    # and columns; deeper is damage. (At 198, within the old limit of 200, the rendering
    # of a struct raised RecursionError out of bread, the reader and read_batches.)
    import bread
    for depth, readable in ((values.MAX_DEPTH - 1, True), (198, False)):
        tags, args = _nested(kind, depth)
        data = sync(0, 10**9, 0) + writer(1, "w") + source(1, "v {}", tags) + event(1, 5, args)
        p = tmp_path / f"{kind}{depth}.blog"
        p.write_bytes(data)
        for argv in ([], ["-s"], ["-o", "jsonl"], ["-l", "trace"]):
            code = cli.main([*argv, str(p)])
            out, err = capsysbinary.readouterr()
            assert (code, b"Recursion limit" in err) == ((0, False) if readable else (3, True))
        reader = bread.read(str(p))
        assert len([ev.message for ev in reader]) == readable
        assert sum(len(b["message"]) for b in bread.read_batches(str(p), arrow=False)) == readable

def test_sessions_restart_and_metadata_replaced():
    first = sync(0, 10**9, 0) + writer(1, "a") + source(1, "one {}", "i") + event(
        1, 1, struct.pack("<i", 1))
    second = sync(0, 10**9, 0, 3600, "CET") + writer(1, "b") + source(1, "two {}", "i")
    unknown = _entry(struct.pack("<Q", (1 << 64) - 9) + b"future")
    data = first + second + unknown + event(1, 2, struct.pack("<i", 2) + b"extra")
    assert lines(data, "%n %d %m") == (b"a 1970-01-01 00:00:00.000000001 one 1\n"
                                        b"b 1970-01-01 01:00:00.000000002 two 2\n", [])


def test_no_clock_sync_and_unknown_placeholders():
    data = writer(1, "w") + source(1, "x", "", severity=3) + event(1, 5, b"")
    assert lines(data, "%d|%u|%S|%X|%")[0] == b"no_clock_sync?|no_clock_sync?|UNKW|%X|%\n"


def test_damage_ends_the_file_after_what_was_read():
    good = sync(0, 10**9, 0) + writer(1, "w") + source(1, "x {}", "i") + event(
        1, 1, struct.pack("<i", 1))
    assert lines(good + event(9, 1, b"")) == (
        b"x 1\n", ["[bread] Exception: Event has invalid source id: 9\n"])
    assert lines(good + event(1, 1, b"\1"))[1] == ["[bread] Exception: Range overflow 4 > 1\n"]
    assert lines(good + b"\1\0")[1] == [
        "[bread] Exception: Failed to read entry size from istream, only got 2 bytes, "
        "expected 4\n"]
    assert lines(good + event(1, 1, b"\1"), sort=True)[0] == b""


class _Recording(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.asked: list[int] = []

    def read(self, n: int | None = -1) -> bytes:
        self.asked.append(-1 if n is None else n)
        return super().read(n)


def test_a_declared_size_is_never_allocated():
    f = _Recording(struct.pack("<I", entries.MAX_ENTRY) + b"abc")
    with pytest.raises(entries.BinlogError, match="only got 3 bytes, expected 67108864"):
        list(entries.iter_entries(f))
    assert max(f.asked) <= 1 << 20
    with pytest.raises(entries.BinlogError, match="over the bound"):
        list(entries.iter_entries(io.BytesIO(struct.pack("<I", 0xFFFFFFF0) + bytes(20))))


def test_long_double_and_dates():
    assert c_g16(values.long_double(0xCCCCCCCCCCCCCCCD, 16379)) == "0.1"
    assert c_g16(1e-6) == "1e-06"
    assert DateText("%Y %y %z %Z %% %Q %")(0, -16200, "X\0Y") == "1969 69 -0430 X %% %Q %"
    assert ValueText(DateText("%N"))(values.Struct(
        "std::chrono::system_clock::time_point", "`ns'l", (("ns", 5),))) == "000000005"


# --- bread.read, the other outputs, stats ---------------------------------------------------

def test_bread_read_gives_events_with_python_values():
    import bread
    from bread.cxx.values import Enum, Struct
    evs = list(bread.read(path("LoggingAdaptedStructs.blog")))
    assert len(evs) == 10
    ev = evs[2]
    assert (ev.message, ev.args) == ("Pair{ a: 2, b: three }",
                                     (Struct("Pair", "`a'i`b'[c", (("a", 2), ("b", "three"))),))
    assert ev.severity == bread.Severity.INFO and ev.category == "main"
    assert ev.time.isoformat() == "2026-11-25T21:27:50.000296+00:00"
    assert ev.path == path("LoggingAdaptedStructs.blog") and ev.line == 95
    enums = [ev.args for ev in bread.read(path("LoggingEnums.blog"))]
    assert enums[1] == (Enum("AdaptedEnum", "Delta", 1, "1"),)
    warned = bread.read(path("SeverityControl.blog"), min_severity="warning")
    assert [ev.severity.name for ev in warned] == ["CRITICAL", "ERROR", "WARNING"]


def test_bread_read_of_a_damaged_file():
    import bread
    r = bread.read(path("trunc_payload.blog"))
    assert [ev.message for ev in r] == ["Hello"] * 6
    assert [(d.offset, d.reason) for d in r.damage] == [
        (1005, "Failed to read entry payload from istream, only got 10 bytes, expected 20")]


def test_sorted_with_a_blog_file_and_filters(tmp_path, capsysbinary):
    import blog
    s = blog.Session()
    s.get_logger("py").info("from python")
    with open(tmp_path / "py.blog", "wb") as f:
        s.consume(f)
    code = cli.main(["-s", "-f", "%C %m", "-c", "py,main", str(tmp_path / "py.blog"),
                     path("Logging.blog")])
    out = capsysbinary.readouterr().out.decode().splitlines()
    assert code == 0
    assert out[:7] == ["main Hello"] * 6 + ["main Result: 42"] and out[7:] == ["py from python"]


def test_jsonl_and_stats(capsysbinary):
    import json
    assert cli.main(["-o", "jsonl", path("LoggingEnums.blog")]) == 0
    rows = [json.loads(x) for x in capsysbinary.readouterr().out.splitlines()]
    assert rows[1]["args"] == [{"$enum": "AdaptedEnum", "name": "Delta", "value": 1}]
    assert cli.main(["stats", "-o", "json", path("Logging.blog")]) == 0
    stats = json.loads(capsysbinary.readouterr().out)
    assert stats["events"] == 7
    assert cli.main(["stats", path("trunc_payload.blog")]) == 3


def test_entries_as_the_samples_readme_lists_them():
    with open(path("Logging.blog"), "rb") as f:
        got = [f"offset={off} size={len(p)} tag=0x{struct.unpack_from('<Q', p)[0]:016x}"
               for off, p in entries.payloads(f)]
    with open(path("Logging.entries.txt")) as f:
        assert got == f.read().splitlines()


# --- the C fast path (bread/cxx/_binlog.c) --------------------------------------------------

def _both_paths(monkeypatch, data: bytes, fmt: str, date: str, sort: bool) -> tuple:
    from bread import accel
    out = []
    for fast in (accel.binlog, None):
        monkeypatch.setattr(accel, "binlog", fast)
        got: list = []
        err: list = []
        print_files([io.BytesIO(data)], CxxPrinter(fmt, date), sort, got.append, err.append)
        out.append((b"".join(got), err))
    return tuple(out)


@pytest.mark.parametrize("fmt,date", [
    ("%d|%u|%d %m %r %t %n %X %", "%N%N%N%N%N%N%N%N%N%N %Y-%y %z %Z %%"),
    (FULL, "%Y-%m-%dT%H:%M:%S.%N%z"),
])
@pytest.mark.parametrize("sort", [False, True])
def test_the_c_path_prints_what_python_prints(monkeypatch, fmt, date, sort):
    if __import__("bread").accel.binlog is None:
        pytest.skip("the C extension is not built (or BREAD_PURE_PYTHON)")
    for name in SAMPLES:
        with open(path(f"{name}.blog"), "rb") as f:
            data = f.read()
        fast, python = _both_paths(monkeypatch, data, fmt, date, sort)
        assert fast == python, name
    zones = (sync(0, 3 * 10**9, 10**18, -16200, "X\0Y") + writer(2, "w") + source(
        1, "{} {} {} {}", "ybBsSiIlLfd[cc") + event(1, 3 * 10**9 + 7, b"\1" + struct.pack(
            "<bBhHiIqQfd", -1, 255, -2, 65535, -3, 2**32 - 1, -(2**63), 2**64 - 1, 0.1, 1e300)
            + _s("str") + b"z") + sync(0, 10**9, 5, 3600, "CET") + event(1, 4, bytes(45)))
    fast, python = _both_paths(monkeypatch, zones, fmt, date, sort)
    assert fast == python and python[1] == ["[bread] Exception: Range overflow 4 > 2\n"]



@pytest.mark.parametrize("clock,freq,ns,offset", [
    (2**63 - 2, 2**63 - 1, 0, 0),                # the remainder times 10**9: beyond 64 bits
    (10**15 + 10**12 - 1, 10**12, 0, 0),
    (5, 10**9, 2**63 - 1, 0),                    # the time beyond 64 bits
    (5, 10**9, 2**63 - 10**18, 2**31 - 1),       # ... in the writer's zone only
    (5, 10**9, 0, -(2**31)),                     # the zone's %z of the least offset
    (5, 10**9, 2**64 - 1_500_000_007, 3600),     # before 1970: %N of a negative time
])
def test_the_c_path_prints_what_python_prints_at_the_clock_sync_s_limits(
        monkeypatch, clock, freq, ns, offset):
    if __import__("bread").accel.binlog is None:
        pytest.skip("the C extension is not built (or BREAD_PURE_PYTHON)")
    data = sync(0, freq, ns, offset, "Z") + writer(1, "w") + source(1, "v {}", "i") + event(
        1, clock, struct.pack("<i", 7))
    fast, python = _both_paths(monkeypatch, data, "%d|%u|%m", "%Y-%m-%d %H:%M:%S.%N %z", False)
    assert fast == python and python[1] == []


def _floats(rng) -> list[float]:
    """Doubles of every kind: random bit patterns, decimal fractions, exact binary
    fractions whose 17th digit is a tie, the neighbours of powers of ten, the ends of
    the range C renders exactly in 128 bits (about 1e-7 to 2**126) and beyond."""
    vs = [0.0, -0.0, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308, 1e-7,
          9.999999999999999e-8, 2.0**126, 2.0**127, -(2.0**126) * 1.5, 1e16, 1e15 - 0.5]
    for _ in range(4000):
        vs.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
        vs.append(rng.randrange(-10**12, 10**12) / 10 ** rng.randrange(0, 12))
        vs.append(rng.randrange(10**15, 9 * 10**15) + 0.5)                 # ties, half
        vs.append(rng.randrange(10**14, 10**15) + rng.randrange(4) / 4)     # to even
        vs.append(math.ldexp(rng.getrandbits(53), rng.randrange(-180, 140)))
        p = 10.0 ** rng.randrange(-30, 40)
        vs += [p, math.nextafter(p, 0), math.nextafter(p, math.inf)]
    return vs


def test_the_c_path_prints_floats_as_python_does(monkeypatch):
    """%.16g in C (exact 128-bit arithmetic, the C library beyond its range) against
    Python's formatting of the same doubles and floats, which the C++ bread's agree with."""
    if __import__("bread").accel.binlog is None:
        pytest.skip("the C extension is not built (or BREAD_PURE_PYTHON)")
    vs = _floats(seeded_random("CXX_FLOATS_SEED"))
    data = sync(0, 10**9, 0) + writer(1, "w") + source(1, "{} {}", "df") + b"".join(
        event(1, i, struct.pack("<df", v, v if not math.isfinite(v) or abs(v) < 3.4e38
                                  else math.inf))
        for i, v in enumerate(vs))
    fast, python = _both_paths(monkeypatch, data, "%m", "%Y", False)
    assert python[1] == [] and len(python[0].splitlines()) == len(vs)
    for got, want in zip(fast[0].splitlines(), python[0].splitlines()):
        assert got == want
    assert fast == python


def test_the_c_path_leaves_python_only_the_metadata(monkeypatch):
    from bread import accel
    from bread.cxx import fastpath
    if accel.binlog is None:
        pytest.skip("the C extension is not built (or BREAD_PURE_PYTHON)")
    taken = []
    take = fastpath._Tables.take
    monkeypatch.setattr(fastpath._Tables, "take", lambda self, *a: taken.append(a) or take(
        self, *a))
    data = sync(0, 10**9, 0) + writer(1, "w0") + source(1, "order {} filled at {} qty {}",
                                                       "id[c")
    data += b"".join(event(1, i, struct.pack("<id", i, 101.25 + i) + _s("AAPL"))
                     for i in range(3000))
    out, err = lines(data)
    assert (len(out.splitlines()), err, len(taken)) == (3000, [], 3)
    assert out.splitlines()[2999] == b"order 2999 filled at 3100.25 qty AAPL"


def test_sorted_with_a_blog_file_in_bounded_memory(tmp_path, monkeypatch):
    import blog
    import bread
    from bread.cxx import events
    s = blog.Session()
    s.get_logger("py").info("from python")
    with open(tmp_path / "py.blog", "wb") as f:
        s.consume(f)
    data = sync(0, 10**9, 0) + writer(1, "a") + source(1, "n={}", "i")
    data += b"".join(event(1, 10**9 * 1_700_000_000 + i, struct.pack("<i", i))
                     for i in range(20_000))
    (tmp_path / "cxx.blog").write_bytes(data)
    read = events.read_events
    count = [0]

    def counted(*a):
        for ev in read(*a):
            count[0] += 1
            yield ev
    monkeypatch.setattr(events, "read_events", counted)
    r = iter(bread.read([str(tmp_path / "cxx.blog"), str(tmp_path / "py.blog")], sort=True))
    first = next(r)
    assert first.message == "n=0" and count[0] <= 3 * 1024    # not the whole file held
    rest = list(r)
    assert [ev.message for ev in rest[:2]] == ["n=1", "n=2"] and len(rest) == 20_000
    assert rest[-1].message == "from python"
