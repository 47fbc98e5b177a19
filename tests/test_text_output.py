"""What a person sees in text (bread's lines, blog.TextStream): the traceback of a logged
exception under its event, as Python prints it; the same on the C and the Python path.

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
from helpers import run_cli
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
