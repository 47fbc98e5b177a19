"""Crafted C++ binlog files (docs/format.md 16; docs/security.md): the samples of
``tests/data/cxx`` mutated, and entries crafted at the limits (huge counts and sizes,
nested and recursive tags, odd placeholders, clock syncs of no or negative frequency), read
by every reader in a child whose memory is bounded: each is read or reported as damage,
nothing else escapes, and the C printer prints what the Python reference prints."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import textwrap

from helpers import python_child

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cxx")
SEED = 24
INPUTS = 240

#: Argument tags a crafted call site takes its own from.
TAGS = ["y", "c", "i", "L", "f", "d", "D", "[c", "[i", "()", "[()", "(i[c)", "<0i[c>", "<>",
        "/i`E'0`A'1`B'\\", "/d`E'\\", "{A`x'i}", "{A}", "[{A}", "{A`x'()}[{A}",
        "{A`a'{A}`b'{A}}", "{std::chrono::system_clock::time_point`ns'l}",
        "{binlog::address`value'L}", "[" * 120 + "i", "(" * 99 + ")" * 99, "{A`a'" * 120,
        "<" * 50 + ">" * 50, "[<>", "x", "", "[", "{A`", "/i`E", "{A`x'(" + "[" * 50 + "c)}"]
#: Arguments of their events: a count of 2**32 - 1, zeros, 40 values, a NaN, a few bytes.
ARGS = [struct.pack("<I", 2**32 - 1), bytes(17), struct.pack("<I", 40) + bytes(64),
        struct.pack("<d", float("nan")), b"\x07" * 9, b""]
FORMATS = ["{}", "{} {} {}", "%d %s {}", "\x1b[31m{}\x07", "\u202e{}", "no placeholder", "{",
           "}{"]


def _text(s: str) -> bytes:
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<I", len(b)) + b


def _entry(tag: int, body: bytes) -> bytes:
    payload = struct.pack("<Q", tag % (1 << 64)) + body
    return struct.pack("<I", len(payload)) + payload


def _crafted(rng: random.Random, k: int) -> bytes:
    """A writer, a clock sync at the limits, call sites of crafted tags (the k-th of TAGS
    among them, so that each is met) and their events."""
    out = _entry(-2, struct.pack("<Q", 1) + _text(rng.choice(["w", "\x1b]0;x\x07"]))
                 + struct.pack("<Q", 128))
    freq = [10**9, 2**63 - 1, 0, -1, 10**12, 2**64 - 1][k % 6]
    ns = rng.choice([0, -1, 2**63 - 1, -(2**63), 1764151200123000000])
    out += _entry(-3, struct.pack("<QQQi", rng.randrange(2**64), freq % (1 << 64),
                                  ns % (1 << 64), rng.choice([0, 2**31 - 1, -(2**31)]))
                  + _text(rng.choice(["UTC", "\0X", "\x1b[2J"])))
    ids = [rng.choice([0, 1, 65535, 65536, 2**63 - 1]) for _ in range(rng.randrange(1, 3))]
    for n, sid in enumerate(ids):
        tags = TAGS[k % len(TAGS)] if n == 0 else rng.choice(TAGS) + rng.choice(["", "i"])
        out += _entry(-1, struct.pack("<QH", sid, rng.choice([128, 0, 65535])) + _text("c")
                      + _text("f") + _text("a/b.cpp") + struct.pack("<Q", 7)
                      + _text(rng.choice(FORMATS)) + _text(tags))
    for n in range(rng.randrange(1, 6)):
        args = ARGS[(k // len(TAGS) + n) % len(ARGS)] if n < 2 else rng.choice(ARGS)
        out += _entry(ids[0] if n == 0 else rng.choice(ids),
                      struct.pack("<Q", rng.randrange(2**64)) + args)
    return out


def _mutated(rng: random.Random, data: bytes) -> bytes:
    """A sample with bytes changed, cut, crafted entries put in, or a size word replaced."""
    b = bytearray(data)
    how = rng.randrange(4)
    if how == 0:
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif how == 1:
        del b[rng.randrange(len(b)):]
    elif how == 2:
        at = rng.randrange(len(b) + 1)
        b[at:at] = _crafted(rng, rng.randrange(len(TAGS)))
    else:
        at = rng.randrange(len(b) - 4)
        b[at:at + 4] = struct.pack("<I", rng.choice([0, 7, 15, 1 << 26, 2**32 - 1]))
    return bytes(b)


#: The child: each file read by every reader; what escaped, and the C and Python lines.
_READ_ALL = """
    import io, json, os, resource, sys
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):   # (make sanitize: ASan bounds it)
        resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
    import bread
    from bread import accel
    from bread.cxx.printer import CxxPrinter
    from bread.cxx.text import print_files
    FULL = "%I|%S|%C|%M|%F|%G|%L|%P|%T|%n|%t|%d|%u|%r|%m|%%|%X"

    def lines(data, sort):
        out, err = [], []
        print_files([io.BytesIO(data)], CxxPrinter(FULL, "%Y-%m-%d %H:%M:%S.%N %z %Z"), sort,
                    out.append, err.append)
        return [b"".join(out).decode("utf-8", "surrogateescape"), err]

    fast = accel.binlog
    for path in sys.argv[1:]:
        data = open(path, "rb").read()
        got = {"escaped": [], "differ": False}
        try:
            for sort in (False, True):
                python = (accel.__setattr__("binlog", None), lines(data, sort))[1]
                accel.binlog = fast
                got["differ"] |= fast is not None and lines(data, sort) != python
            [ev.message for ev in bread.read(path)]
            [b for b in bread.read_batches(path, arrow=False)]
        except bread.NotABlogFile:
            pass      # its first bytes no longer say C++ nor blog: documented
        except BaseException as exc:
            got["escaped"].append(f"{type(exc).__name__}: {exc}"[:300])
        print(json.dumps(got))
"""


def test_crafted_cxx_files_are_read_or_reported_and_print_alike_in_c_and_python(tmp_path):
    rng = random.Random(SEED)
    samples = []
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".blog"):
            with open(os.path.join(DATA, name), "rb") as f:
                samples.append(f.read())
    paths = []
    for i in range(INPUTS):
        data = _crafted(rng, i // 2) if i % 2 == 0 else _mutated(rng, rng.choice(samples))
        p = tmp_path / f"{i}.blog"
        p.write_bytes(data)
        paths.append(str(p))
    r = subprocess.run(python_child("-c", textwrap.dedent(_READ_ALL), *paths), cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    results = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(results) == INPUTS
    for path, got in zip(paths, results):
        assert got == {"escaped": [], "differ": False}, path
