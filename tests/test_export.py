"""bread -o jsonl / -o csv / --tz: every value comes back, quoting is RFC 4180, zones are right."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
import pathlib
import uuid
from decimal import Decimal

import pytest

import blog
import bread
from blogformat import frames as fmt
from blogformat.entries import ClockSync, EventSource, WriterProp, encode_metadata, header_payload
from blogformat.eventframes import BatchHeader
from blogformat.valueencoding import packb
from bread import cli
from bread.sinks.json import csv_rows, jsonl
from bread.render import escape_controls

GOLDEN = pathlib.Path(__file__).parent / "data" / "v1" / "every_type.blog"


def from_json(v):
    """The inverse of bread.sinks.json.json_value: what a consumer of the jsonl does."""
    if isinstance(v, list):
        return [from_json(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) >= 1 and next(iter(v)).startswith("$"):
        key = next(iter(v))
        x = v[key]
        return {
            "$int": lambda: int(x), "$float": lambda: float(x),
            "$bytes": lambda: base64.b64decode(x), "$tuple": lambda: tuple(from_json(x)),
            "$set": lambda: set(map(_hashable, from_json(x))),
            "$frozenset": lambda: frozenset(map(_hashable, from_json(x))),
            "$datetime": lambda: dt.datetime.fromisoformat(x),
            "$date": lambda: dt.date.fromisoformat(x), "$time": lambda: dt.time.fromisoformat(x),
            "$timedelta": lambda: dt.timedelta(*x), "$decimal": lambda: Decimal(x),
            "$uuid": lambda: uuid.UUID(x),
            "$enum": lambda: bread.EnumValue(x, v["name"], from_json(v["value"])),
            "$dataclass": lambda: bread.DataclassValue(x, from_json(v["fields"])),
            "$exception": lambda: bread.ExceptionValue(
                x, v["message"], v["traceback"], tuple(map(tuple, v["frames"])),
                tuple(v["notes"]), tuple((t, m, tuple(map(tuple, fr)), tuple(no), link)
                                         for t, m, fr, no, link in v["chain"])),
            "$opaque": lambda: bread.OpaqueValue(x, v["text"]),
            "$ext": lambda: bread.ExtValue(x, base64.b64decode(v["data"])),
            "$map": lambda: {_hashable(from_json(k)): from_json(val) for k, val in x},
        }[key]()
    return {k: from_json(x) for k, x in v.items()}


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


def same(a, b) -> bool:
    """Equal, NaN included."""
    if isinstance(a, (float, Decimal)) and isinstance(b, (float, Decimal)) and a != a and b != b:
        return type(a) is type(b)    # NaN
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return str(a) == str(b)      # the same digits, sign and exponent
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):   # the same instant and offset
        return (a.tzinfo is None) == (b.tzinfo is None) and a.utcoffset() == b.utcoffset() \
            and (a.replace(tzinfo=None) - (a.utcoffset() or dt.timedelta(0))
                 == b.replace(tzinfo=None) - (b.utcoffset() or dt.timedelta(0)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        return isinstance(a, frozenset) == isinstance(b, frozenset) and a == b
    return type(a) is type(b) and a == b


def test_jsonl_gives_back_every_value_of_every_type(capsys):
    events = list(bread.read(str(GOLDEN)))
    assert cli.main(["-o", "jsonl", str(GOLDEN)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(events) > 20
    for line, ev in zip(lines, events):
        o = json.loads(line)       # one object per line: what jq and spark.read.json take
        assert o["message"] == ev.message and o["category"] == ev.category
        assert o["severity_value"] == ev.source.severity and o["writer"] == ev.writer
        assert o["source"] == {"id": ev.source.id, "function": ev.function, "file": ev.file,
                               "line": ev.line, "format": ev.format}
        assert same(from_json(o["args"]), list(ev.args)), (o["args"], ev.args)
        assert same(from_json(o["fields"]), ev.fields)
        when = dt.datetime.fromisoformat(o["time"][:26] + o["time"][29:])   # to microseconds
        assert int(o["time"][20:29]) == ev.ns % 10**9
        assert when == ev.time


def test_csv_is_rfc_4180_with_a_header(tmp_path, capsys):
    src = EventSource(1, 0x80, "c,at", "f", "x.py", 3, "{}", "str")
    data = _file([src], [[1, 5, [text]] for text in
                         ('plain', 'with, comma', 'with "quotes"', 'two\nlines', '')])
    p = tmp_path / "x.blog"
    p.write_bytes(data)
    assert cli.main(["-o", "csv", "--escape", "never", str(p)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("time,severity,category,writer,function,file,line,message,args,fields,"
                          "host,pid,program\r\n")
    rows = list(csv.reader(io.StringIO(out, newline="")))
    assert rows[0][7] == "message"
    assert [r[7] for r in rows[1:]] == ["plain", "with, comma", 'with "quotes"', "two\nlines", ""]
    assert [json.loads(r[8]) for r in rows[1:]][1] == ["with, comma"]
    assert all(r[2] == "c,at" for r in rows[1:])
    assert cli.main(["-o", "csv", str(p)]) == 0   # escaped by default: a row is a line
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))
    assert rows[4][7] == "two\\nlines" and json.loads(rows[4][8]) == ["two\nlines"]


def test_jsonl_and_csv_say_which_process_wrote_each_event(tmp_path, capsys):
    # Proves: -o jsonl has host, pid and program keys (null where the header does not say)
    # and -o csv has them as its last columns, from each stream's file header.
    src = EventSource(1, 0x80, "c", "f", "x.py", 3, "{}", "int")
    first = _file([src], [[1, 5, [1]]], descriptor={"host": "db1", "pid": 42, "program": "=app"})
    p = tmp_path / "x.blog"
    p.write_bytes(first + _file([src], [[1, 5, [2]]]))
    assert cli.main(["-o", "jsonl", str(p)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(o["host"], o["pid"], o["program"]) for o in objs] == [
        ("db1", 42, "=app"), (None, None, None)]
    assert cli.main(["-o", "csv", str(p)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))
    assert rows[0][-3:] == ["host", "pid", "program"]
    assert [r[-3:] for r in rows[1:]] == [["db1", "42", "'=app"], ["", "", ""]]


#: What a crafted file's strings hold to drive a terminal: CSI, OSC (a title, a link),
#: BEL, C1 (CSI as one byte, NEL), NUL, DEL, and a right-to-left override and isolate.
HOSTILE = ["\x1b[2J\x1b]0;owned\x07", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
           "\x9b31m\x85\x00\x7f", "\u202etxt.exe\u2066\u2069\u200e\u061c", "a\rb\nc\td"]
TERMINAL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x0d), *range(0x0e, 0x20), 0x7f,
                             *range(0x80, 0xa0), 0x061c, 0x200e, 0x200f, *range(0x202a, 0x202f),
                             *range(0x2066, 0x206a))]


def _hostile_file(tmp_path) -> pathlib.Path:
    srcs = [EventSource(k + 1, 0x80, h, h, h, 3, h.replace("{", "{{").replace("}", "}}")
                        + " {}", "str") for k, h in enumerate(HOSTILE)]
    p = tmp_path / "hostile.blog"
    p.write_bytes(_file(srcs, [[k + 1, 1, [h]] for k, h in enumerate(HOSTILE)]))
    return p


def test_csv_is_escaped_as_text_is_and_its_json_cells_stay_exact(tmp_path, capsys):
    # Proves: -o csv, like the text, shows every control and bidi format character of the
    # file's strings (category, function, file, message, args) as an escape, by default
    # and wherever it goes, so that it cannot drive the terminal it ends on; the args and
    # fields cells stay JSON that gives back the exact values. --escape never: as logged.
    p = _hostile_file(tmp_path)
    assert cli.main(["-o", "csv", str(p)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in out.replace("\r\n", "") if c in TERMINAL]
    rows = list(csv.reader(io.StringIO(out, newline="")))[1:]
    assert len(rows) == len(HOSTILE) == out.count("\r\n") - 1   # a row is one line
    for h, r in zip(HOSTILE, rows):
        want = escape_controls(h)
        assert (r[2], r[4], r[5], r[7]) == (want, want, want, f"{want} {want}")
        assert json.loads(r[8]) == [h]
    assert cli.main(["-o", "csv", "--escape", "never", str(p)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))[1:]
    assert [(r[2], r[7], json.loads(r[8])) for r in rows] == [(h, f"{h} {h}", [h])
                                                              for h in HOSTILE]
    assert cli.main(["-o", "jsonl", str(p)]) == 0   # exact, always
    objs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(o["category"], o["message"], o["args"]) for o in objs] == [
        (h, f"{h} {h}", [h]) for h in HOSTILE]


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1:A2)", "\t=1", "\r=1"]


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_quoted(tmp_path, capsys):
    # Proves: a cell of logged text that begins as a formula (= + - @ tab CR) gets OWASP's
    # leading ' in -o csv, so that a spreadsheet shows it, in every text column; bread's
    # own columns (line, here negative) are left alone; --csv-formulas raw and -o jsonl
    # give the text as logged.
    srcs = [EventSource(k + 1, 0x80, f, f, f, -3, "{}", "str") for k, f in enumerate(FORMULAS)]
    p = tmp_path / "formulas.blog"
    p.write_bytes(_file(srcs + [EventSource(9, 0x80, "c", "f", "x.py", 1, "{}", "int")],
                        [[k + 1, 1, [f]] for k, f in enumerate(FORMULAS)] + [[9, 1, [-5]]]))
    assert cli.main(["-o", "csv", "--escape", "never", str(p)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))[1:]
    assert [(r[2], r[4], r[5], r[6], r[7]) for r in rows] == [
        ("'" + f, "'" + f, "'" + f, "-3", "'" + f) for f in FORMULAS] + [
        ("c", "f", "x.py", "1", "'-5")]
    assert [json.loads(r[8]) for r in rows] == [[f] for f in FORMULAS] + [[-5]]
    assert cli.main(["-o", "csv", str(p)]) == 0    # escaped too: the quote comes first
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))[1:]
    assert [r[7] for r in rows] == ["'" + escape_controls(f) for f in FORMULAS] + ["'-5"]
    assert cli.main(["-o", "csv", "--csv-formulas", "raw", "--escape", "never", str(p)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))[1:]
    assert [(r[2], r[7]) for r in rows] == [(f, f) for f in FORMULAS] + [("c", "-5")]
    assert cli.main(["-o", "jsonl", str(p)]) == 0
    assert [json.loads(x)["message"] for x in capsys.readouterr().out.splitlines()] == [
        *FORMULAS, "-5"]


def _file(sources, events, sync=None, descriptor=None) -> bytes:
    meta = [sync or ClockSync(0, 10**9, 0, 0, "UTC"), *sources, WriterProp(1, "main")]
    clocks, prev, body = [], 0, []
    for e in events:
        clocks.append(prev + e[1])
        prev = clocks[-1]
    for e in events:
        body.append(packb(e))
    head = BatchHeader(1, 0, len(events), min(clocks), max(clocks)).encode()
    return (fmt.frame_bytes(fmt.FRAME_HEADER, header_payload(descriptor or {}))
            + fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))
            + fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(body)))


def test_tz_renders_in_a_named_zone_across_a_dst_change(tmp_path, capsys):
    # Europe/London went to summer time on 2026-03-29 at 01:00 UTC.
    t0 = int(dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.timezone.utc).timestamp()) * 10**9
    src = EventSource(1, 0x80, "c", "f", "x.py", 3, "tick", "")
    p = tmp_path / "dst.blog"
    p.write_bytes(_file([src], [[1, t0, []], [1, 3600 * 10**9, []]]))
    assert cli.main(["--tz", "Europe/London", "-f", "%d|%u", "-d", "%H:%M %z %Z",
                     str(p)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "00:30 +0000 GMT|00:30 +0000 UTC", "02:30 +0100 BST|01:30 +0000 UTC"]
    assert cli.main(["--tz", "Europe/London", "-o", "jsonl", str(p)]) == 0
    times = [json.loads(x)["time"] for x in capsys.readouterr().out.splitlines()]
    assert times == ["2026-03-29T00:30:00.000000000+00:00", "2026-03-29T02:30:00.000000000+01:00"]
    assert cli.main(["-f", "%d", "-d", "%H:%M %Z", str(p)]) == 0   # the writer's zone: UTC here
    assert capsys.readouterr().out.splitlines() == ["00:30 UTC", "01:30 UTC"]


def test_an_unknown_zone_is_a_clear_error(tmp_path, capsys):
    p = tmp_path / "x.blog"
    p.write_bytes(_file([EventSource(1, 0x80, "c", "f", "x.py", 3, "x", "")], [[1, 0, []]]))
    assert cli.main(["--tz", "Mars/Olympus", str(p)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--tz: unknown time zone 'Mars/Olympus'" in err and "Traceback" not in err


@pytest.mark.parametrize("fmt_", ["jsonl", "csv"])
def test_outputs_take_filters_and_sort(fmt_, capsys):
    assert cli.main(["-o", fmt_, "-s", "-l", "error", str(GOLDEN)]) == 0
    out = capsys.readouterr().out
    n = len([e for e in bread.read(str(GOLDEN)) if e.severity >= 0x200])
    assert n > 0
    lines = out.splitlines() if fmt_ == "jsonl" else list(csv.reader(io.StringIO(out)))[1:]
    assert len(lines) == n


INTS_64 = [2**53 + 1, 1_764_000_000_123_456_789, -2**63, 2**63, 2**64 - 1, -2**53 - 1]


@pytest.mark.parametrize("use_c", [True, False])
def test_ints_within_64_bits_are_json_numbers(use_c, monkeypatch):
    # Proves: an int of 64 bits, signed or unsigned (time.time_ns() values), is a JSON
    # number in -o jsonl and the args column; a larger one stays {"$int": ...}.
    if not use_c:
        monkeypatch.setattr(bread.accel, "speedups", None)
    s = blog.Session()
    out = blog.MemoryOutputStream()
    s.get_logger("x").info("{} {} {} {} {} {}", *INTS_64)
    s.get_logger("x").info("{} {}", 2**64, -2**63 - 1)
    s.consume(out)
    text = "".join(jsonl(bread.read(io.BytesIO(out.getvalue()))))
    lines = [json.loads(line)["args"] for line in text.splitlines()]
    assert lines == [INTS_64, [{"$int": str(2**64)}, {"$int": str(-2**63 - 1)}]]
    assert str(2**64 - 1) in text and str(1_764_000_000_123_456_789) in text
    cols = next(iter(bread.read_batches(io.BytesIO(out.getvalue()), ["args"], arrow=False)))
    assert [json.loads(a) for a in cols["args"]] == lines


def test_an_int_of_more_digits_than_python_converts_is_exported_in_hex(tmp_path):
    # 10**5000 has more decimal digits than str() converts (sys.get_int_max_str_digits):
    # -o jsonl and -o csv crashed on it; now it is {"$int": "0x..."}, in linear time.
    s = blog.Session()
    log = s.get_logger("x")
    out = blog.MemoryOutputStream()
    log.info("{} {}", 10**5000, -(2**70))
    s.consume(out)
    [ev] = list(bread.read(io.BytesIO(out.getvalue())))
    obj = json.loads(next(iter(jsonl([ev]))))
    assert obj["args"] == [{"$int": hex(10**5000)}, {"$int": str(-(2**70))}]
    assert int(obj["args"][0]["$int"], 16) == 10**5000
    header, row = list(csv.reader(io.StringIO("".join(csv_rows([ev])))))
    assert json.loads(row[header.index("args")]) == obj["args"]
