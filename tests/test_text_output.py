"""What a person sees in text (bread's lines, blog.TextStream): the traceback of a logged
exception under its event, as Python prints it, and an event's fields on its line in the
default format (``%K``); the same on the C and the Python path.

Files whose header does not ask for it (``text_version``: blog's before it, other
producers', the golden files) keep the text they had.
"""

from __future__ import annotations

import io
import shutil
import traceback
from pathlib import Path

import pytest

import blog
from blogformat.entries import EventSource
from helpers import run_cli
from test_render_parity import build
from test_tracebacks import _caught, _chained, _stdlib_text

GOLDEN_EXCEPTIONS = Path(__file__).parent / "data" / "v1" / "exceptions.blog"


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.rstrip("\n").split("\n"))


def _lines_of(logged, tmp_path, capsys, *options: str) -> str:
    """bread's text of what ``logged`` wrote (-f '%S %m' unless options say)."""
    logged.consume()
    path = tmp_path / "app.blog"
    path.write_bytes(logged.out.getvalue())
    code, out, err = run_cli([*(options or ("-f", "%S %m")), str(path)], capsys)
    assert (code, err) == (0, "")
    return out


def test_bread_shows_the_traceback_under_its_event(logged, tmp_path, capsys):
    # Proves: after log.exception, bread prints the traceback (its chain too) under the
    # event's line, each line indented, as the stdlib prints it (carets aside: not kept).
    exc = _caught(_chained)
    try:
        raise exc
    except ValueError:
        logged.log.exception("order {} failed", 7)
    logged.log.info("after")
    assert _lines_of(logged, tmp_path, capsys) == (
        "ERRO order 7 failed\n" + _indented(_stdlib_text(exc)) + "INFO after\n")


def test_an_exception_never_raised_shows_its_last_line(logged, tmp_path, capsys):
    # Proves: an exception with no traceback shows the line Python ends with.
    logged.log.error("lookup", err=KeyError("k"), other=ValueError())
    assert _lines_of(logged, tmp_path, capsys) == (
        "ERRO lookup\n    KeyError: 'k'\n    ValueError\n")
    assert "".join(traceback.format_exception_only(KeyError("k"))) == "KeyError: 'k'\n"


def test_k_shows_an_exception_with_its_type(logged, tmp_path, capsys):
    # Proves: %k shows an exception as its repr does, not as its str (the type was lost).
    logged.log.error("lookup", err=KeyError("missing"), bad=ValueError("no 'x'"),
                     empty=StopIteration())
    out = _lines_of(logged, tmp_path, capsys, "-f", "%k", "--no-traceback")
    assert out == "err=KeyError('missing') bad=ValueError(\"no 'x'\") empty=StopIteration()\n"


def test_tracebacks_are_escaped_as_any_logged_text(logged, tmp_path, capsys):
    # Proves: a message's control characters are escaped in the traceback too, and each of
    # its lines is indented, so that no line of it can pass for an event's.
    logged.log.error("bad", err=ValueError("one\nERRO forged\x1b[2J\u202e"))
    assert _lines_of(logged, tmp_path, capsys) == (
        "ERRO bad\n    ValueError: one\n    ERRO forged\\x1b[2J\\u202e\n")


def test_no_traceback_hides_them_and_traceback_shows_an_old_files(tmp_path, capsys, logged):
    # Proves: --no-traceback leaves tracebacks out; a file whose header does not ask for
    # them (the golden one, written before) shows none unless --traceback asks.
    logged.log.error("bare", err=KeyError("k"))
    assert _lines_of(logged, tmp_path, capsys, "-f", "%m", "--no-traceback") == "bare\n"
    shutil.copy(GOLDEN_EXCEPTIONS, tmp_path / "old.blog")
    old = str(tmp_path / "old.blog")
    code, out, _ = run_cli(["-f", "%m", old], capsys)
    assert out == "order 7 failed\nkept 8\nbare KeyError('never raised')\n"
    code, out, _ = run_cli(["-f", "%m", "--traceback", old], capsys)
    assert out.startswith("order 7 failed\n    Traceback (most recent call last):\n")
    assert "    RuntimeError: order failed\nkept 8\n    Traceback" in out


def test_a_text_stream_shows_tracebacks_as_bread_does(tmp_path, capsys):
    # Proves: blog.TextStream prints the same lines as bread, traceback included, and
    # traceback=False leaves it out.
    s = blog.Session()
    shown, hidden = io.StringIO(), io.StringIO()
    s.add_output(blog.TextStream(shown, format="%S %m"))
    s.add_output(blog.TextStream(hidden, format="%S %m", traceback=False))
    try:
        {}["k"]
    except KeyError:
        s.get_logger().exception("failed")
    main = blog.MemoryOutputStream()
    s.consume(main)
    (tmp_path / "a.blog").write_bytes(main.getvalue())
    _, out, _ = run_cli(["-f", "%S %m", str(tmp_path / "a.blog")], capsys)
    assert shown.getvalue() == out
    assert out.startswith("ERRO failed\n    Traceback (most recent call last):\n")
    assert out.endswith("    KeyError: 'k'\n")
    assert hidden.getvalue() == "ERRO failed\n"


@pytest.mark.parametrize("sort", [[], ["-s"]])
def test_c_and_python_print_tracebacks_the_same(tmp_path, capsys, monkeypatch, sort):
    # Proves: the C renderer leaves an event with an exception field to Python, and the
    # bytes are those of the pure-Python path, sorted or not, coloured or not.
    from bread import accel

    s = blog.Session()
    log = s.get_logger("c")
    for i in range(20):
        log.info("plain {}", i, n=i)
        try:
            raise KeyError(i)
        except KeyError:
            log.exception("failed {}", i, n=i)
        log.warning("field {}", i, err=OSError(i, "gone\x1b"))
    main = blog.MemoryOutputStream()
    s.consume(main)
    path = tmp_path / "a.blog"
    path.write_bytes(main.getvalue())
    outs = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(accel, "speedups", None)
        outs.append(run_cli([*sort, "--color", "always", str(path)], capsys))
        outs.append(run_cli([*sort, str(path)], capsys))
    assert outs[:2] == outs[2:]
    assert outs[1][1].count("Traceback (most recent call last):") == 20


def test_the_default_text_shows_an_events_fields(tmp_path, capsys):
    # Proves: the default format shows the keyword and context fields after the message
    # (as %k shows them), nothing for an event without; TextStream shows the same.
    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console))
    log = s.get_logger("disk")
    log.warning("disk {} at {}%", "/", 93.5, host="db1")
    with blog.context(request="r-7"):
        log.info("checked", path="/var log")
    log.info("plain {}", 1)
    main = blog.MemoryOutputStream()
    s.consume(main)
    (tmp_path / "a.blog").write_bytes(main.getvalue())
    _, out, _ = run_cli([str(tmp_path / "a.blog")], capsys)
    lines = [line.split("] ", 1)[1].rsplit(":", 1)[0] for line in out.splitlines()]
    assert lines == ["MainThread disk / at 93.5% host=db1 (test_text_output.py",
                     "MainThread checked path='/var log' request=r-7 (test_text_output.py",
                     "MainThread plain 1 (test_text_output.py"]
    assert out.startswith("WARN disk [")
    assert console.getvalue() == out


def test_files_of_other_producers_keep_their_default_text(tmp_path, capsys):
    # Proves: a stream whose header does not ask for fields (a C++ binlog-style file, blog's
    # before; the golden files are pinned by test_golden) shows none in the default format
    # nor with %K; %k still shows them.
    src = EventSource(1, 0x80, "c", "f", "x.py", 3, "m {}", "int,str", ("host",), 1)
    path = tmp_path / "old.blog"
    path.write_bytes(build([src], [[1, 0, [1, "db1"]]], descriptor={"host": "h"}))
    _, out, _ = run_cli([str(path)], capsys)
    assert out.endswith(" main m 1 (x.py:3)\n")
    _, out, _ = run_cli(["-f", "%m%K|%k", str(path)], capsys)
    assert out == "m 1|host=db1\n"
