"""Exceptions are kept as structured frames (blogformat/tracebacks.py): the call reads and
formats nothing, and the reader renders the text ``traceback`` gives, from the frames and
the source files where it has them. The files a log names are untrusted: only regular
``.py`` files of bounded size are read."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import traceback

import pytest

import bread
from blogformat.tracebacks import SourceLines, render

_CARETS = re.compile(r"^\s*[~^]+\s*$")


def _stdlib_text(exc: BaseException) -> str:
    """What the stdlib prints, 3.11's position markers (``~~^^^``) included."""
    return "".join(traceback.format_exception(exc))


def _without_markers(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not _CARETS.match(line))


def _deep(n: int) -> None:
    if n == 0:
        raise ValueError("bad fill")
    _deep(n - 1)


def _caught(fn, *args) -> BaseException:
    try:
        fn(*args)
    except BaseException as exc:   # noqa: BLE001 - any exception is the test's value
        return exc
    raise AssertionError("nothing raised")


def _chained() -> None:
    try:
        {}["k"]
    except KeyError:
        try:
            raise RuntimeError("while handling")
        except RuntimeError as r:
            raise ValueError("outer") from r


def _noted() -> None:
    e = TypeError("typed")
    e.add_note("first note")
    e.add_note("second")
    raise e


def _recurse(n: int) -> None:
    if n == 0:
        raise OverflowError("deep")
    _recurse(n - 1)


def _suppressed() -> None:
    try:
        1 / 0
    except ZeroDivisionError:
        raise LookupError("no context") from None


def _empty_message() -> None:
    raise StopIteration


@pytest.mark.parametrize("fn,args", [(_deep, (10,)), (_chained, ()), (_noted, ()),
                                     (_recurse, (30,)), (_suppressed, ()),
                                     (_empty_message, ())])
def test_the_traceback_reads_back_as_the_stdlib_prints_it(logged, fn, args):
    # Proves: log.exception keeps type, message, frames, notes and the chain of causes
    # and contexts, and the reader's text is the stdlib's (carets aside), source lines
    # read from this file, repeated frames collapsed as the stdlib collapses them.
    exc = _caught(fn, *args)
    try:
        raise exc
    except BaseException:
        logged.log.exception("failed {}", 1)
    [ev] = logged.read()
    got = ev.fields["exception"]
    assert ev.message == "failed 1"
    assert got.type == bread.ExceptionValue(type(exc).__name__, "").type
    assert got.message == str(exc)
    assert got.traceback == _stdlib_text(exc)
    assert got.frames[-1][0] == __file__ and got.frames[0][2] == \
        "test_the_traceback_reads_back_as_the_stdlib_prints_it"


def test_frames_are_structured_and_the_chain_is_in_print_order(logged):
    exc = _caught(_chained)
    logged.log.error("e {}", exc)
    [ev] = logged.read()
    v = ev.args[0]
    assert [f[2] for f in v.frames] == ["_caught", "_chained"]
    assert all(len(f) == 3 for f in v.frames)          # no source line kept by default
    assert [(t, m, link) for t, m, _, _, link in v.chain] == [
        ("KeyError", "'k'", 2), ("RuntimeError", "while handling", 1)]
    assert ev.message == "e outer"


def test_keep_source_lines_stores_them_for_logs_read_where_the_source_is_not(
        logged, tmp_path):
    # Proves: by default the reader shows a frame's source line only while the file is
    # there; with keep_source_lines the line is in the log itself.
    mod = tmp_path / "gone_module.py"
    mod.write_text("def fail():\n    raise KeyError('x')  # the failing line\n")
    spec = importlib.util.spec_from_file_location("gone_module", mod)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    exc = _caught(m.fail)
    logged.log.error("a {}", exc)
    logged.session.keep_source_lines = True
    logged.log.error("b {}", exc)
    os.unlink(mod)
    a, b = [e.args[0] for e in logged.read()]
    assert "the failing line" not in a.traceback and f'File "{mod}", line 2' in a.traceback
    assert "raise KeyError('x')  # the failing line" in b.traceback
    assert b.frames[-1][3] == "raise KeyError('x')  # the failing line"


def test_the_reader_reads_only_regular_py_files_of_bounded_size(tmp_path):
    # Proves: a log naming a FIFO, a device, a directory, a file that is not .py or one
    # larger than the bound never makes the reader block, read it or hold it.
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 300_000)
    txt = tmp_path / "notes.txt"
    txt.write_text("secret\n")
    ok = tmp_path / "ok.py"
    ok.write_text("first\nsecond\n")
    lines = SourceLines(max_files=2, max_file=1 << 20)
    for name in (str(fifo), "/dev/zero.py", str(tmp_path) + ".py", str(big), str(txt),
                 "/nonexistent/x.py", "bad\0name.py"):
        assert lines.line(name, 1) is None
    assert lines.line(str(ok), 2) == "second"
    ok.write_text("first\nchanged\n")
    assert lines.line(str(ok), 2) == "second"      # kept: read once
    for name in (str(txt), str(big)):
        lines.line(name, 1)
    assert lines.line(str(ok), 2) == "changed"     # at most max_files kept: read anew
    text = render("X", "m", [[str(txt), 1, "f"], [str(ok), 1, "g"]], None, None, lines)
    assert "secret" not in text and "    first\n" in text


def test_hostile_exception_values_render_without_raising():
    # A crafted file's exception value: frames and chain of the wrong shapes and types.
    lines = SourceLines()
    for frames, chain in [([[1, 2]], None), ([["f", [1], {"a": 1}]], [[1, 2, 3, 4, [5]]]),
                          ("x", "y"), ([[None, None, None, 7]], [["T", "m", None, None, 9]])]:
        assert isinstance(render("T", "m", frames, None, chain, lines), str)


def test_a_logged_exception_costs_no_formatting(logged, monkeypatch):
    # Proves: nothing reads source files or formats a traceback at the call (what made
    # log.exception cost more than the stdlib's): both are made to fail here.
    import linecache
    monkeypatch.setattr(linecache, "getline", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(traceback, "format_exception", lambda *a, **k: 1 / 0)
    exc = _caught(_deep, 3)
    logged.log.error("x {}", exc)
    monkeypatch.undo()
    [ev] = logged.read()
    assert ev.args[0].traceback == _stdlib_text(exc)
    assert sys.getrecursionlimit() > 0


def _subscript(d: dict) -> int:
    return 1 + d["k"] * 2


def test_position_markers_are_shown_as_the_stdlib_shows_them(logged, tmp_path):
    # Proves: the writer keeps each frame's columns (3.11's co_positions), and the reader
    # prints the markers under the source line: read from the file, or from the line
    # kept in the log (its indent kept too) once the file is gone.
    exc = _caught(_subscript, {})
    assert "    return 1 + d[\"k\"] * 2\n               ~^^^^^\n" in _stdlib_text(exc)
    mod = tmp_path / "gone_markers.py"
    mod.write_text("def fail(d):\n\tif d:\n\t\treturn 1 + d['k'] * 2\n\treturn 0\n")
    spec = importlib.util.spec_from_file_location("gone_markers", mod)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    gone = _caught(m.fail, {"x": 1})
    expected = _stdlib_text(gone)
    assert "    return 1 + d['k'] * 2\n               ~^^^^^\n" in expected
    logged.log.error("a {}", exc)
    logged.session.keep_source_lines = True
    logged.log.error("b {}", gone)
    os.unlink(mod)
    a, b = [e.args[0] for e in logged.read()]
    assert a.traceback == _stdlib_text(exc)
    assert b.traceback == expected
    assert all(len(f) == 3 for f in a.frames)   # the positions are not part of the frames


def test_crafted_positions_render_without_raising():
    # A file's positions of the wrong shape, type or size show no markers, never raise.
    for pos in ([1], [1, 2, "x"], [1, -5, 3], [1, 2, 1 << 40], "pos", [3, 9, 2], [0, 0, 0, -1]):
        text = render("T", "m", [[__file__, 1, "f", None, pos],
                                 [__file__, 1, "f", "kept", pos]], None, None, SourceLines())
        assert text.endswith("T: m\n")
