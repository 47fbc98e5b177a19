"""The ``bread`` command: output formats, inputs, options, exit statuses and escaping."""

from __future__ import annotations

import datetime as dt
import inspect
import io
import os
import re
import select
import subprocess
import sys
import threading

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blog
import bread
from blogformat import entries
from blogformat import frames as fmt
from bread import cli

from bread.render import PrettyPrinter
from helpers import python_child, run_cli, write_log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTC = dt.timezone.utc
N0 = 1_700_000_000 * 10**9          # 2023-11-14 22:13:20 UTC


# --- inputs -----------------------------------------------------------------------------

def _sample(log: blog.Logger) -> None:
    # Every call on its own line: the tests find the lines by their format strings.
    log.info("order {} filled at {}", 42, 101.25)
    log.warning("disk {} at {}%", "/", 93.5, host="db1")
    log.error("failed: {!r}", "boom")


def _in_thread(log: blog.Logger) -> None:
    log.critical("from thread {}", 7)


SAMPLE_FORMATS = ["order {} filled at {}", "disk {} at {}%", "failed: {!r}", "from thread {}"]


def _line_of(func, form: str) -> int:
    src, start = inspect.getsourcelines(func)
    return next(start + i for i, line in enumerate(src) if repr(form)[1:-1] in line)


def session_log(extra: str | None = None) -> bytes:
    """A real log: two consumes, two writers (MainThread and 'worker-1')."""
    s = blog.Session()
    log = s.get_logger("orders")
    out = blog.MemoryOutputStream()
    _sample(log)
    s.consume(out)
    t = threading.Thread(target=_in_thread, args=(s.get_logger("jobs"),), name="worker-1")
    t.start()
    t.join()
    if extra is not None:
        log.info("extra {}", extra)
    s.consume(out)
    return out.getvalue()


def synthetic_log(tz_offset=19800, tz_name="IST", clock_value=1000, freq=10**9, ns=N0,
                  clocks=(1000 + 123_456_789, 1000 + 1_123_456_789)) -> bytes:
    """A hand-built file whose clock sync, sources and writers are known exactly."""
    header = fmt.frame_bytes(fmt.FRAME_HEADER, msgpack.packb([1, {"library": "test"}]))
    meta = b"".join(msgpack.packb(e) for e in [
        [entries.ENTRY_CLOCK_SYNC, clock_value, freq, ns, tz_offset, tz_name],
        [entries.ENTRY_EVENT_SOURCE, 1, 0x100, "net", "Conn.send", "/srv/app/net.py", 42,
         "sent {} bytes to {peer}", "int,str", ["peer"], 1],
        [entries.ENTRY_WRITER_PROP, 1, "io-thread", 1, 2, 3],
    ])
    first = clocks[0]
    evs = [msgpack.packb([1, 0, [512, "10.0.0.1"]])]
    evs += [msgpack.packb([1, c - p, [7, "h"]]) for p, c in zip(clocks, clocks[1:])]
    batch = msgpack.packb([1, first, len(evs), min(clocks), max(clocks)]) + b"".join(evs)
    return (header + fmt.frame_bytes(fmt.FRAME_METADATA, meta)
            + fmt.frame_bytes(fmt.FRAME_EVENTS, batch))


def write(tmp_path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def events_of(data: bytes) -> list[bread.Event]:
    r = bread.read(io.BytesIO(data))
    evs = list(r)
    assert r.damage == []
    return evs


# --- running bread ------------------------------------------------------------------------

def run(argv, capsysbinary, stdin: bytes | None = None, monkeypatch=None):
    """bread in-process: (exit status, stdout text, stderr text)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        rc = cli.main(argv)
    except SystemExit as exc:   # argparse exits for -h and for bad options
        rc = exc.code
    out, err = capsysbinary.readouterr()
    return rc, out.decode("utf-8"), err.decode("utf-8")


def run_proc(args, stdin: bytes | None = None, **kw) -> subprocess.CompletedProcess:
    """bread as a separate process (``python -m bread``), bytes in and out."""
    return subprocess.run(python_child("-m", "bread", *args), input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=60, cwd=ROOT, **kw)


def expected_date(ns: int, tz: dt.tzinfo) -> str:
    secs, frac = divmod(ns, 10**9)
    return dt.datetime.fromtimestamp(secs, tz).strftime("%Y-%m-%d %H:%M:%S") + f".{frac:09d}"


# ======================================================================================
# Output formats
# ======================================================================================

DEFAULT_LINE = re.compile(
    r"^(TRAC|DEBG|INFO|WARN|ERRO|CRIT) (\S+) \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9})\] "
    r"(\S+) (.*) \(([^():]+):(\d+)\)$")


def test_default_format_line_shape(tmp_path, capsysbinary):
    """Default: ``SEV CAT [YYYY-mm-dd HH:MM:SS.NNNNNNNNN] writer message fields (file:line)``,
    one line per event, in file order, every field exactly as the event holds it."""
    data = session_log()
    rc, out, err = run([write(tmp_path, "a.blog", data)], capsysbinary)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    evs = events_of(data)
    assert len(lines) == len(evs) == 4
    for line, ev in zip(lines, evs):
        m = DEFAULT_LINE.match(line)
        assert m, line
        sev, cat, date, writer, message, file, lineno = m.groups()
        assert sev == ev.severity.abbrev and cat == ev.category
        assert date == expected_date(ev.ns, ev.tz)
        assert writer == ev.writer and message == ev.message + (
            " " + bread.render.fields_text(ev) if ev.fields else "")
        assert file == "test_cli.py" and int(lineno) == ev.line
    assert [m.split()[0] for m in lines] == ["INFO", "WARN", "ERRO", "CRIT"]
    assert lines[0].endswith(f"MainThread order 42 filled at 101.25 "
                             f"(test_cli.py:{_line_of(_sample, SAMPLE_FORMATS[0])})")
    assert " jobs [" in lines[3] and "] worker-1 from thread 7 " in lines[3]


def test_default_format_exact_synthetic(tmp_path, capsysbinary):
    """The default line of a file with a known clock sync, to the nanosecond, in the
    writer's zone (IST, +05:30: the date rolls over to the next day)."""
    rc, out, _ = run([write(tmp_path, "s.blog", synthetic_log())], capsysbinary)
    assert rc == 0
    assert out.splitlines() == [
        "WARN net [2023-11-15 03:43:20.123456789] io-thread sent 512 bytes to 10.0.0.1 (net.py:42)",
        "WARN net [2023-11-15 03:43:21.123456789] io-thread sent 7 bytes to h (net.py:42)",
    ]


ALL_EVENT = "%I|%S|%C|%M|%F|%G|%L|%P|%T|%n|%t|%d|%u|%r|%m|%%"


def test_every_event_placeholder_exact(tmp_path, capsysbinary):
    """``-f`` with every placeholder, on a file where every value is known."""
    rc, out, _ = run(["-f", ALL_EVENT, write(tmp_path, "s.blog", synthetic_log())], capsysbinary)
    assert rc == 0
    assert out.splitlines()[0].split("|") == [
        "1", "WARN", "net", "Conn.send", "/srv/app/net.py", "net.py", "42",
        "sent {} bytes to {peer}", "int,str", "io-thread", "1",
        "2023-11-15 03:43:20.123456789", "2023-11-14 22:13:20.123456789",
        str(1000 + 123_456_789), "sent 512 bytes to 10.0.0.1", "%"]


def test_every_event_placeholder_real_session(tmp_path, capsysbinary):
    """``-f`` with every placeholder on a real session's file: %r is the event's raw clock,
    %u that clock in UTC (blog's clock is ns since the epoch) with a 9-digit %N, %d the same
    instant in the writer's zone, and the call-site fields are this file's."""
    data = session_log()
    rc, out, _ = run(["-f", ALL_EVENT, write(tmp_path, "a.blog", data)], capsysbinary)
    assert rc == 0
    rows = [line.split("|") for line in out.splitlines()]
    evs = events_of(data)
    assert len(rows) == len(evs) == 4
    here = inspect.getsourcefile(_sample)
    funcs = ["_sample"] * 3 + ["_in_thread"]
    tags = ["int,float", "str,float,str", "str", "int"]
    for row, ev, form, func, tag in zip(rows, evs, SAMPLE_FORMATS, funcs, tags):
        (sid, sev, cat, m, f, g, line, p, t, n, tid, d, u, r, msg, pct) = row
        assert sid == str(ev.source.id) and sev == ev.severity.abbrev and cat == ev.category
        assert m == func and f == here and g == "test_cli.py"
        assert int(line) == _line_of(globals()[func], form)
        assert p == form and t == tag
        assert r == str(ev.clock)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9}", u)
        assert u == expected_date(ev.clock, UTC)
        assert d == expected_date(ev.clock, ev.tz)
        assert msg == ev.message and pct == "%"
    assert [(row[9], row[10]) for row in rows] == [("MainThread", "1")] * 3 + [("worker-1", "2")]
    assert [row[14] for row in rows] == ["order 42 filled at 101.25", "disk / at 93.5%",
                                         "failed: 'boom'", "from thread 7"]


ALL_DATE = "%Y|%y|%m|%d|%H|%M|%S|%N|%z|%Z"


@pytest.mark.parametrize("kw, local, utc", [
    ({}, "2023|23|11|15|03|43|20|123456789|+0530|IST",
     "2023|23|11|14|22|13|20|123456789|+0000|UTC"),
    # ms ticks, a negative offset and a year boundary: 2005-01-01 00:00:01.5 UTC
    (dict(tz_offset=-12600, tz_name="NST", clock_value=0, freq=1000, ns=1_104_537_600 * 10**9,
          clocks=(1500, 2500)),
     "2004|04|12|31|20|30|01|500000000|-0330|NST",
     "2005|05|01|01|00|00|01|500000000|+0000|UTC"),
    # no zone name: %Z is the fixed offset's default name
    (dict(tz_offset=3600, tz_name=""), "2023|23|11|14|23|13|20|123456789|+0100|UTC+01:00",
     "2023|23|11|14|22|13|20|123456789|+0000|UTC"),
])
def test_every_date_placeholder_exact(tmp_path, capsysbinary, kw, local, utc):
    """``-d`` with every date placeholder, for %d (writer's zone) and %u (UTC)."""
    path = write(tmp_path, "s.blog", synthetic_log(**kw))
    rc, out, _ = run(["-f", "%d#%u", "-d", ALL_DATE, path], capsysbinary)
    assert rc == 0
    assert out.splitlines()[0] == f"{local}#{utc}"


def test_format_literals(tmp_path, capsysbinary):
    """``%%`` is one percent sign (also before a code letter), a ``%`` before what is not a
    letter and a trailing ``%`` are kept literally, and text around placeholders is kept.
    (Unknown codes were kept literally too: issue 26 refuses them,
    test_an_unknown_placeholder_is_refused_naming_it.)"""
    path = write(tmp_path, "s.blog", synthetic_log())
    rc, out, _ = run(["-f", "<%%d %- %L 100% %", "-d", "%%Y %. %Y%", path], capsysbinary)
    assert rc == 0
    assert out.splitlines()[0] == "<%d %- 42 100% %"
    rc, out, _ = run(["-f", "%d", "-d", "%%Y %. %Y%", path], capsysbinary)
    assert out.splitlines()[0] == "%Y %. 2023%"


# ======================================================================================
# Inputs
# ======================================================================================

def test_stdin_dash_and_no_argument(capsysbinary, monkeypatch, tmp_path):
    """``-`` (and no file at all, when stdin is not a terminal) reads standard input."""
    data = session_log()
    rc, expected, _ = run([write(tmp_path, "a.blog", data)], capsysbinary)
    assert rc == 0 and len(expected.splitlines()) == 4
    assert run(["-"], capsysbinary, data, monkeypatch)[:2] == (0, expected)
    assert run([], capsysbinary, data, monkeypatch)[:2] == (0, expected)


def test_stdin_subprocess():
    """The same through a real pipe, with ``python -m bread``."""
    data = synthetic_log()
    p = run_proc(["-"], data)
    assert p.returncode == 0 and p.stderr == b""
    assert p.stdout.decode().splitlines()[0].startswith("WARN net [2023-11-15 03:43:20.123456789]")
    assert run_proc([], data).stdout == p.stdout


def test_no_input_on_a_terminal_is_a_usage_error():
    """With no file and a terminal on stdin, bread explains instead of waiting: exit 1."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    try:
        p = subprocess.run(python_child("-m", "bread"), stdin=slave, capture_output=True,
                           timeout=60, cwd=ROOT)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 1
    assert b"no input" in p.stderr and b"Traceback" not in p.stderr


def test_several_files_in_order(tmp_path, capsysbinary, monkeypatch):
    """Files are printed one after the other in command-line order; ``-`` may be among them."""
    a = write(tmp_path, "a.blog", session_log("A"))
    b = write(tmp_path, "b.blog", synthetic_log())
    c = session_log("C")
    _, out_a, _ = run([a], capsysbinary)
    _, out_b, _ = run([b], capsysbinary)
    _, out_c, _ = run([write(tmp_path, "c.blog", c)], capsysbinary)
    assert run([a, b], capsysbinary)[:2] == (0, out_a + out_b)
    assert run([b, a], capsysbinary)[:2] == (0, out_b + out_a)
    assert run([b, "-", a], capsysbinary, c, monkeypatch)[:2] == (0, out_b + out_c + out_a)
    assert "extra A" in out_a and "extra C" in out_c


# ======================================================================================
# Options and exit statuses
# ======================================================================================

@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(flag):
    """``-h`` prints usage and every placeholder of both formats, and exits 0."""
    p = run_proc([flag])
    assert p.returncode == 0 and b"Traceback" not in p.stderr
    text = p.stdout.decode()
    for code in "ISCMFGLPTntdurm%":
        assert f"%{code} " in text, code
    for code in "YymdHMSNzZ":
        assert f"%{code} " in text, code
    assert "usage: bread" in text


def test_help_text_lists_placeholders():
    """The help epilog (what -h should print) documents every placeholder and exit status."""
    for code in "ISCMFGLPTntdurm%":
        assert f"%{code} " in cli.EPILOG
    for code in "YymdHMSNzZ":
        assert f"%{code} " in cli.EPILOG
    assert "3 damaged input" in cli.EPILOG


@pytest.mark.parametrize("args", [["--bogus", "{}"], ["--escape", "sometimes", "{}"],
                                  ["{}", "-f"], ["-x", "a", "{}"], ["{}", "--date-format"]])
def test_bad_option_exits_1(args, tmp_path, capsysbinary):
    """A bad option is a usage error: status 1, usage on stderr, nothing on stdout."""
    path = write(tmp_path, "s.blog", synthetic_log())
    args = [a.format(path) for a in args]
    rc, out, err = run(args, capsysbinary)
    assert rc == 1 and out == ""
    assert "usage: bread" in err and "bread: error:" in err
    p = run_proc(args)
    assert p.returncode == 1 and p.stdout == b""
    assert b"bread: error:" in p.stderr and b"Traceback" not in p.stderr


def test_missing_file_exits_2(tmp_path, capsysbinary):
    """An input that cannot be opened: status 2 and one line naming it."""
    good = write(tmp_path, "s.blog", synthetic_log())
    missing = str(tmp_path / "nope.blog")
    for argv in ([missing], [good, missing]):
        rc, out, err = run(argv, capsysbinary)
        assert rc == 2
        assert err.splitlines() == [f"bread: cannot open {missing}: No such file or directory"]
    p = run_proc([missing])
    assert p.returncode == 2 and b"Traceback" not in p.stderr


def test_torn_tail_subprocess(tmp_path):
    """A file whose writer died mid-frame: every complete event is printed, stderr has exactly
    one line, about the damage, no traceback, and the status is 3."""
    data = session_log("last")
    evs = events_of(data)
    frames = [f for f in bread.frames.iter_frames(io.BytesIO(data))]
    last = frames[-1]
    assert last.kind == fmt.FRAME_EVENTS
    cut = last.offset + fmt.HEADER_SIZE + 4      # the header and 4 payload bytes
    path = write(tmp_path, "torn.blog", data[:cut])
    p = run_proc([path])
    full = run_proc([write(tmp_path, "full.blog", data)])
    assert full.returncode == 0
    complete = [e for e in evs if e.offset < last.offset]
    assert 0 < len(complete) < len(evs)
    assert p.stdout.decode().splitlines() == full.stdout.decode().splitlines()[:len(complete)]
    err = p.stderr.decode().splitlines()
    assert len(err) == 1, err
    assert "damaged" in err[0] and "truncated" in err[0] and path in err[0]
    assert f"offset {last.offset}" in err[0]
    assert p.returncode == 3


def test_damage_in_the_middle_exits_3_after_printing_everything(tmp_path, capsysbinary):
    """Damage before good frames: the later events are printed too, then status 3."""
    a = session_log("x")
    b = synthetic_log()
    path = write(tmp_path, "mid.blog", a + b"\x00garbage\x00" + b)
    rc, out, err = run([path], capsysbinary)
    _, out_a, _ = run([write(tmp_path, "a.blog", a)], capsysbinary)
    _, out_b, _ = run([write(tmp_path, "b.blog", b)], capsysbinary)
    assert rc == 3
    assert out == out_a + out_b
    assert err.splitlines() == [f"bread: {path}: skipped 9 damaged byte(s) at offset {len(a)} "
                                "(no frame marker)"]


# ======================================================================================
# Escaping
# ======================================================================================

CONTROL = "a\x01b\x1b[31mc\nd\x7fe\x85f\tg"
ESCAPED = "a\\x01b\\x1b[31mc\\nd\\x7fe\\x85f\tg"


def control_log() -> bytes:
    s = blog.Session()
    log = s.get_logger("ctl")
    out = blog.MemoryOutputStream()
    log.info("ctl {}", CONTROL)
    s.consume(out)
    return out.getvalue()


def test_escape_always_and_never(tmp_path, capsysbinary):
    """``--escape always`` (the default, and ``auto``, its old name) shows control
    characters (C0 but tab, DEL, C1) as escapes, so a line stays one line and cannot drive
    a terminal, wherever the output goes: ``bread app.blog | grep x`` ends on a terminal
    too. ``--escape never`` writes them as they are, for programs."""
    path = write(tmp_path, "c.blog", control_log())
    for default in ([], ["--escape", "always"], ["--escape", "auto"]):
        rc, out, _ = run([*default, "-f", "%m", path], capsysbinary)
        assert rc == 0 and out == f"ctl {ESCAPED}\n", default
    rc, out, _ = run(["--escape", "never", "-f", "%m", path], capsysbinary)
    assert rc == 0 and out == f"ctl {CONTROL}\n"
    p = run_proc([path])   # into a pipe
    assert p.returncode == 0 and p.stdout.count(b"\n") == 1 and b"\x1b" not in p.stdout
    assert b"\\x1b[31m" in p.stdout
    p = run_proc(["--escape", "never", path])
    assert b"\x01b\x1b[31m" in p.stdout and "\x7fe\x85f".encode() in p.stdout


def test_escape_auto_on_a_terminal(tmp_path):
    """``--escape auto`` (the default) escapes on a terminal, as into a pipe."""
    pty = pytest.importorskip("pty")
    path = write(tmp_path, "c.blog", control_log())
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(python_child("-m", "bread", "-f", "%m", path), stdout=slave,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT)
        os.close(slave)
        slave = -1
        got = b""
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:      # EIO: the child closed the terminal
                break
            if not chunk:
                break
            got += chunk
        assert p.wait(timeout=30) == 0
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert b"\x1b" not in got and b"\\x1b[31m" in got and b"\\x01" in got


def test_damage_report_is_escaped(tmp_path):
    """The damage line on stderr is escaped too (the file name is part of it)."""
    data = control_log()
    path = write(tmp_path, "ev\x1b[2Jil.blog", data[:-3])
    p = run_proc(["--escape", "never", path])
    assert p.returncode == 3
    err = p.stderr.decode("utf-8", "backslashreplace")
    assert len(err.splitlines()) == 1 and "\x1b" not in err and "ev\\x1b[2Jil.blog" in err


#: A name that reads "txt.exe" backwards on screen: U+202E (right-to-left override) and
#: U+2066 (left-to-right isolate) reorder what follows them.
BIDI = "invoice\u202eexe.txt\u2066 paid\u2069 \u200f\u061c"
BIDI_ESCAPED = "invoice\\u202eexe.txt\\u2066 paid\\u2069 \\u200f\\u061c"


def test_bidirectional_format_characters_are_escaped_as_controls_are(tmp_path, capsys):
    # Proves: the marks, embeddings, overrides and isolates that reorder a line on screen
    # are shown as \uNNNN escapes, by the C renderer and by Python, in the message and in
    # the call site's category; never escapes the raw text.
    s = blog.Session()
    log = s.get_logger("cat\u202e")
    out = blog.MemoryOutputStream()
    log.info("file {}", BIDI)
    s.consume(out)
    path = write(tmp_path, "b.blog", out.getvalue())
    for hot in (True, False):
        with pytest.MonkeyPatch.context() as m:
            if not hot:
                m.setattr(bread.accel, "speedups", None)
            assert cli.main(["--escape", "always", "-f", "%C %m", path]) == 0
            assert capsys.readouterr().out == f"cat\\u202e file {BIDI_ESCAPED}\n"
            assert cli.main(["--escape", "never", "-f", "%C %m", path]) == 0
            assert capsys.readouterr().out == f"cat\u202e file {BIDI}\n"


def test_a_file_whose_name_is_not_utf8_is_read_and_named_in_every_output(tmp_path):
    # Proves: a damaged log named in bytes that are not UTF-8 is read in text, jsonl and
    # csv like any other, and the damage line (and a missing file's) names it as
    # os.fsdecode does with U+FFFD for each undecodable byte: valid UTF-8 on stderr.
    data = control_log()
    try:
        with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.blog"), "wb") as f:
            f.write(data + b"\x00junk")
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    shown = os.path.join(str(tmp_path), "bad\ufffd.blog")
    for out in ("text", "jsonl", "csv"):
        p = run_proc(["-o", out, str(tmp_path)])
        assert p.returncode == cli.EXIT_DAMAGED and b"ctl" in p.stdout
        [err] = p.stderr.decode("utf-8").splitlines()
        assert err.startswith(f"bread: {shown}: skipped 5 damaged byte(s) at offset {len(data)}")
    gone = os.path.join(str(tmp_path), "gone\ufffd.blog")
    p = run_proc([os.path.join(os.fsencode(tmp_path), b"gone\xfe.blog")])
    assert p.returncode == cli.EXIT_OPEN and p.stderr.decode("utf-8") == (
        f"bread: cannot open {gone}: No such file or directory\n")


# --- truncation at any byte, through the CLI ---------------------------------------------

def _three_consumes() -> bytes:
    s = blog.Session()
    log = s.get_logger("main")
    out = blog.MemoryOutputStream()
    for k in range(3):
        for i in range(4):
            log.info("batch {} event {} {}", k, i, [i] * (i % 2))
        s.consume(out)
    return out.getvalue()


_FILE = _three_consumes()
_FULL = [f"batch {k} event {i} {[i] * (i % 2)}" for k in range(3) for i in range(4)]


def _cli(data: bytes, tmp: str) -> tuple[int, list[str], str]:
    path = os.path.join(tmp, "cut.blog")
    with open(path, "wb") as f:
        f.write(data)
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = cli.main(["-f", "%m", path])
    finally:
        sys.stdout, sys.stderr = saved
    out.flush()
    return code, out.buffer.getvalue().decode().splitlines(), err.getvalue()


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, len(_FILE)))
def test_cli_never_raises_on_a_cut_file_and_prints_every_complete_event(cut, tmp_path_factory):
    # Proves: whatever byte the file ends at, the CLI prints every event of the frames
    # before the cut, in order, exits 0 (cut on a frame boundary) or 3, and says so on
    # stderr in one line per damaged range, never with a traceback.
    code, lines, err = _cli(_FILE[:cut], str(tmp_path_factory.mktemp("cut")))
    assert lines == _FULL[:len(lines)]
    full = list(bread.read(io.BytesIO(_FILE[:cut])))
    assert len(lines) == len(full)
    assert code in (0, 3) and "Traceback" not in err
    assert (code == 3) == bool(err.strip())


def test_color_by_severity_outside_the_escaping(tmp_path, capsys):
    s = blog.Session()
    log = s.get_logger("main")
    out = blog.MemoryOutputStream()
    log.info("calm {}", 1)
    log.warning("careful \x1b[2J {}", 2)     # a logged escape sequence stays escaped
    log.error("broken {}", 3)
    s.consume(out)
    p = tmp_path / "c.blog"
    p.write_bytes(out.getvalue())
    for hot in (True, False):
        with pytest.MonkeyPatch.context() as m:
            if not hot:
                m.setattr(bread.accel, "speedups", None)
            assert cli.main(["--color", "always", "--escape", "always", "-f", "%m", str(p)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines == ["calm 1", "\x1b[33mcareful \\x1b[2J 2\x1b[0m", "\x1b[31mbroken 3\x1b[0m"]
    assert cli.main(["--color", "never", "-f", "%m", str(p)]) == 0
    assert "\x1b[3" not in capsys.readouterr().out


@pytest.mark.parametrize("option", ["-f", "-d", "--format", "--date-format"])
def test_an_unknown_placeholder_is_refused_naming_it(option, tmp_path, capsys):
    # Proves (issue 26): -f %Q and -d %Q are exit 1 naming the option and the placeholder
    # (they were printed as written); %% and a % at the end stay a percent sign.
    p = tmp_path / "a.blog"
    write_log(p, 1)
    code, out, err = run_cli([option, "at %Q", str(p)], capsys)
    long = "--format" if option in ("-f", "--format") else "--date-format"
    assert code == cli.EXIT_USAGE and out == ""
    assert f"bread: error: -{long[2]}/{long}: unknown placeholder '%Q' in 'at %Q'" in err
    code, out, err = run_cli(["-f", "%m 100%% %", "-d", "%H%%", str(p)], capsys)
    assert code == cli.EXIT_OK and out == "event 0 of a 100% %\n"
    with pytest.raises(ValueError, match="unknown placeholder '%Q'"):
        PrettyPrinter("%S %Q")


# --- bread export --jsonl / --csv -------------------------------------------------------

def test_export_writes_json_lines_and_csv_as_bread_prints_them(tmp_path, capsys):
    # Proves: `bread export --jsonl OUT` and `--csv OUT` write exactly what `bread -s -o
    # jsonl` / `-o csv` print (every event, time-sorted across inputs), as the README says;
    # a link planted at OUT is replaced, its target untouched; a failed export leaves no
    # OUT and no temporary file; no kind named is a usage error naming the three.
    a, b = tmp_path / "a.blog", tmp_path / "b.blog"
    write_log(a, 30, "a")
    write_log(b, 30, "b")
    for kind in ("jsonl", "csv"):
        code, want, _ = run_cli(["-s", "-o", kind, str(a), str(b)], capsys)
        assert code == 0 and len(want.splitlines()) == 60 + (kind == "csv")
        out = tmp_path / f"out.{kind}"
        victim = tmp_path / f"victim.{kind}"
        victim.write_text("keep")
        os.symlink(victim, out)
        code, printed, err = run_cli(["export", f"--{kind}", str(out), str(a), str(b)], capsys)
        assert code == 0 and printed == "" and "Traceback" not in err
        assert not out.is_symlink() and out.read_bytes().decode() == want
        assert victim.read_text() == "keep"
        assert run_cli(["export", f"--{kind}", "-", str(a), str(b)], capsys)[1] == want
    stale = tmp_path / f".out.jsonl.{os.getpid()}.tmp"    # a killed export of this pid's
    stale.write_text("stale")
    assert run_cli(["export", "--jsonl", str(tmp_path / "out.jsonl"), str(a)], capsys)[0] == 0
    stale.unlink()
    gone = tmp_path / "gone.jsonl"
    code, _, err = run_cli(["export", "--jsonl", str(gone), str(tmp_path / "none.blog")], capsys)
    assert code == cli.EXIT_OPEN and "none.blog" in err
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["a.blog", "b.blog", "out.jsonl", "out.csv", "victim.jsonl", "victim.csv"])
    code, _, err = run_cli(["export", str(a)], capsys)
    assert code == cli.EXIT_USAGE and "--parquet" in err and "--jsonl" in err and "--csv" in err
