"""Outputs beside the main one: ``add_output``, ``blog.TextStream`` on the console while
the file has everything."""

from __future__ import annotations

import io
import sys

import pytest

import blog
import bread

from helpers import run_python


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_text_stream_shows_warnings_while_the_file_has_everything(tmp_path):
    # Proves: one session writes every event to its file and the ones at or above the
    # text stream's minimum, rendered with bread's placeholders, to a text stream.
    s = blog.Session()
    main = blog.MemoryOutputStream()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%S %C %m", min_severity="warning"))
    log = s.get_logger("disk")
    log.info("checked {}", "/")
    log.warning("disk {} at {}%", "/var", 93.5)
    log.debug("detail {}", 1)
    log.error("write failed: {!r}", "no space\x1b[2J")
    s.consume(main)
    assert console.getvalue() == ("WARN disk disk /var at 93.5%\n"
                                  "ERRO disk write failed: 'no space\\x1b[2J'\n")
    assert [ev.message for ev in bread.read(io.BytesIO(main.getvalue()))] == [
        "checked /", "disk /var at 93.5%", "detail 1", "write failed: 'no space\\x1b[2J'"]


def test_a_text_stream_shows_the_writing_process():
    # Proves: %h %p %a show the session's host, pid and program, as bread shows them.
    import os

    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%h %p %a %m"))
    s.get_logger().info("up")
    main = blog.MemoryOutputStream()
    s.consume(main)
    assert console.getvalue() == f"{os.uname().nodename} {os.getpid()} " \
        f"{os.path.basename(sys.argv[0]) or 'python'} up\n"
    printer = bread.render.PrettyPrinter("%h %p %a %m")
    assert [printer(ev) for ev in bread.read(io.BytesIO(main.getvalue()))] == [
        console.getvalue()[:-1]]


def test_text_stream_lines_across_many_writes_keep_their_sources_and_types(tmp_path):
    import dataclasses

    @dataclasses.dataclass
    class Fill:
        qty: int

    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%m"))
    log = s.get_logger()
    for i in range(3):
        log.info("fill {}", Fill(i))
        s.consume(blog.MemoryOutputStream())    # one write per consume: state carried on
    assert console.getvalue().splitlines() == [f"fill {Fill(i)!r}" for i in range(3)]


def test_text_stream_escapes_controls_and_bidirectional_format_characters():
    # Proves: a logged string cannot drive the console nor reorder its line: control
    # characters and the bidi marks, embeddings, overrides and isolates are escapes.
    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%C %m"))
    log = s.get_logger("a\u202eb")
    log.info("x {}", "\x1b[2J\u2066y\u2069\u200e\u061c\n")
    s.consume(blog.MemoryOutputStream())
    assert console.getvalue() == "a\\u202eb x \\x1b[2J\\u2066y\\u2069\\u200e\\u061c\\n\n"


def test_colour_on_a_terminal_only():
    for file, coloured in ((Tty(), True), (io.StringIO(), False)):
        s = blog.Session()
        s.add_output(blog.TextStream(file, format="%m"))
        s.get_logger().error("bad")
        s.consume(blog.MemoryOutputStream())
        assert (file.getvalue() == "\x1b[31mbad\x1b[0m\n") is coloured, file.getvalue()


def test_a_failing_side_output_loses_only_its_own_writes():
    class Broken:
        def write(self, data):
            raise OSError("console gone")

    s = blog.Session()
    main = blog.MemoryOutputStream()
    s.add_output(Broken())
    s.get_logger().info("kept {}", 1)
    s.consume(main)
    assert [ev.message for ev in bread.read(io.BytesIO(main.getvalue()))] == ["kept 1"]
    assert s.stats.events_lost == 0


def test_remove_output_and_bad_outputs():
    s = blog.Session()
    side = blog.MemoryOutputStream()
    s.add_output(side)
    s.add_output(side)                     # once only
    assert s.outputs == [side]
    log = s.get_logger()
    log.info("one")
    s.consume(blog.MemoryOutputStream())
    assert s.remove_output(side) and not s.remove_output(side)
    log.info("two")
    s.consume(blog.MemoryOutputStream())
    assert [ev.message for ev in bread.read(io.BytesIO(side.getvalue()))] == ["one"]
    with pytest.raises(TypeError, match="needs write"):
        s.add_output(object())
    with pytest.raises(TypeError, match="needs a text file"):
        blog.TextStream(object())
    with pytest.raises(ValueError):
        blog.TextStream(io.StringIO(), min_severity="loud")


def test_the_default_session_shows_warnings_on_stderr_beside_its_file(tmp_path):
    r = run_python("""
        import sys, blog
        blog.basic_config("app.blog")
        blog.add_output(blog.TextStream(sys.stderr, format="%S %m", min_severity="warning"))
        log = blog.get_logger("app")
        log.info("started")
        log.warning("low disk {}%", 7)
        blog.shutdown()
    """, tmp_path, timeout=60)
    assert r.returncode == 0
    assert r.stderr == "WARN low disk 7%\n"
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == [
        "started", "low disk 7%"]
