"""Exactly what ``logging`` would have written for an exception (issue 38): an exception
group's members in their boxes, a SyntaxError's place, ``exc_info=True`` outside an
``except`` block, an exception never raised. Each is logged through the ``logging``
bridge beside a ``FileHandler`` on the same logger, and bread's text, ``-o jsonl`` and
``read_batches``' fields column carry what the FileHandler wrote; ``log.exception`` and a
field's exception what ``traceback.format_exception`` gives.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import traceback

import pytest

import blog
import blog.stdlib
import bread
from blogformat import tracebacks
from helpers import run_cli


def _group() -> None:
    try:
        raise ExceptionGroup("batch", [ValueError("v1"), TypeError("t2"), ValueError("v3")])
    except* ValueError:
        raise KeyError("while handling")


def _nested() -> None:
    def leaf(n: int) -> None:
        raise OSError(f"leaf {n}")

    errors = []
    for n in range(3):
        try:
            leaf(n)
        except OSError as e:
            errors.append(e)
    inner = ExceptionGroup("inner", errors)
    try:
        raise inner
    except ExceptionGroup as e:
        e.add_note("a note on the inner group")
        raise ExceptionGroup("outer", [e, RuntimeError("beside")]) from ValueError("cause")


def _task_group() -> None:
    async def fails(n: int) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"task {n}")

    async def main() -> None:
        async with asyncio.TaskGroup() as tg:
            for n in range(2):
                tg.create_task(fails(n))

    asyncio.run(main())


def _syntax() -> None:
    compile("def f():\n    x = = 1\n", "mod.py", "exec")


def _indentation() -> None:
    exec("def f():\nreturn 1\n")     # an IndentationError: a SyntaxError's subclass


def _wide() -> None:
    raise ExceptionGroup("wide", [ValueError(n) for n in range(20)])


def _deep() -> None:
    e: BaseException = ValueError("bottom")
    for n in range(13):          # deeper than traceback shows (max_group_depth 10)
        e = ExceptionGroup(f"level {n}", [e])
    raise e


RAISED = [_group, _nested, _task_group, _syntax, _indentation, _wide, _deep]


def _caught(fn) -> BaseException:
    try:
        fn()
    except BaseException as exc:   # noqa: BLE001 - any exception is the test's value
        return exc
    raise AssertionError("nothing raised")


class Both:
    """A logger with a BlogHandler (a private session) and a FileHandler (``%(message)s``):
    what ``logging`` writes, and what bread reads back, of the same records."""

    def __init__(self, tmp_path) -> None:
        self.tmp_path = tmp_path
        self.session = blog.Session()
        self.out = blog.MemoryOutputStream()
        self.logger = logging.Logger("app", logging.DEBUG)
        self.logger.addHandler(blog.stdlib.BlogHandler(session=self.session))
        self.file = logging.FileHandler(tmp_path / "app.log", encoding="utf-8")
        self.file.setFormatter(logging.Formatter("%(message)s"))
        self.logger.addHandler(self.file)

    def written(self) -> str:
        self.file.flush()
        self.file.close()
        return (self.tmp_path / "app.log").read_text(encoding="utf-8")

    def path(self):
        self.session.consume(self.out)
        path = self.tmp_path / "app.blog"
        path.write_bytes(self.out.getvalue())
        return path


def _unindented(bread_text: str) -> str:
    """bread's text (-f %m) with each traceback line's indent taken away: the layout a
    FileHandler with ``%(message)s`` writes."""
    return "".join(line[4:] if line.startswith("    ") else line
                   for line in bread_text.splitlines(True))


def _texts(both: Both, capsys) -> tuple[str, list, list]:
    """bread's text, each event's ``exception`` traceback in -o jsonl, and in
    read_batches' fields column."""
    path = both.path()
    code, text, err = run_cli(["--escape", "never", "-f", "%m", str(path)], capsys)
    assert (code, err) == (0, "")
    code, out, err = run_cli(["-o", "jsonl", str(path)], capsys)
    assert (code, err) == (0, "")
    jsonl = [json.loads(line)["fields"]["exception"] for line in out.splitlines()]
    batches = [json.loads(f)["exception"] for b in bread.read_batches(str(path),
                                                                       columns=["fields"])
               for f in b.column("fields").to_pylist()]
    return text, jsonl, batches


def _tracebacks(written: str, messages: list[str]) -> list[str]:
    """The exception texts a FileHandler wrote under each message (one line each)."""
    out, current = [], None
    for line in written.splitlines(True):
        if line.rstrip("\n") in messages and (current is None or current):
            if current is not None:
                out.append("".join(current))
            current = []
        else:
            current.append(line)
    out.append("".join(current))
    return out


@pytest.mark.parametrize("fn", RAISED, ids=lambda f: f.__name__.strip("_"))
def test_the_bridge_writes_what_a_file_handler_writes(tmp_path, capsys, hot_path, fn):
    # Proves: an exception group (except*, nested, a TaskGroup's, wider and deeper than
    # traceback shows) and a SyntaxError read back, in bread's text, in -o jsonl and in
    # read_batches, as logging's FileHandler wrote them. Before: the group's line only
    # (its members lost), the SyntaxError's str without its place.
    both = Both(tmp_path)
    try:
        fn()
    except BaseException:   # noqa: BLE001
        both.logger.exception("failed")
    written = both.written()
    text, jsonl, batches = _texts(both, capsys)
    assert _unindented(text) == written
    [want] = _tracebacks(written, ["failed"])
    assert [j["traceback"] for j in jsonl] == [b["traceback"] for b in batches] == [want]


def test_exc_info_outside_an_except_block_and_an_exception_never_raised(tmp_path, capsys,
                                                                        hot_path):
    # Proves: exc_info=True with no exception being handled writes "NoneType: None" as
    # logging does (before: nothing), an exception never raised its last line, in JSON
    # too (before: traceback null).
    both = Both(tmp_path)
    both.logger.error("outside", exc_info=True)
    both.logger.exception("exception outside")
    both.logger.error("never raised", exc_info=ValueError("boom"))
    both.logger.warning("tuple", exc_info=(KeyError, KeyError("k"), None))
    written = both.written()
    text, jsonl, batches = _texts(both, capsys)
    assert _unindented(text) == written
    want = _tracebacks(written, ["outside", "exception outside", "never raised", "tuple"])
    assert want == ["NoneType: None\n", "NoneType: None\n", "ValueError: boom\n",
                    "KeyError: 'k'\n"]
    assert [j["traceback"] for j in jsonl] == [b["traceback"] for b in batches] == want


def _read(logged) -> list:
    logged.consume()
    return list(bread.read(io.BytesIO(logged.out.getvalue())))


@pytest.mark.parametrize("fn", RAISED, ids=lambda f: f.__name__.strip("_"))
def test_log_exception_keeps_what_traceback_prints(logged, fn):
    # Proves: blog's own log.exception and a field's exception give the text
    # traceback.format_exception gives, members and SyntaxError place included; a
    # group's members are ExceptionValues of their own, their text each as Python
    # prints that member.
    exc = _caught(fn)
    try:
        raise exc
    except BaseException:   # noqa: BLE001
        logged.log.exception("failed")
    logged.log.error("as a field", err=exc)
    a, b = _read(logged)
    want = "".join(traceback.format_exception(exc))
    assert a.fields["exception"].traceback == b.fields["err"].traceback == want
    got = b.fields["err"]
    if isinstance(exc, BaseExceptionGroup):
        assert len(got.exceptions) == min(len(exc.exceptions), tracebacks.MAX_MEMBERS)
        for member, value in zip(exc.exceptions, got.exceptions):
            assert value.type == type(member).__name__
            if not isinstance(member, BaseExceptionGroup) or fn is not _deep:
                assert value.traceback == "".join(traceback.format_exception(member))
    if fn is _syntax:
        assert got.syntax == ("invalid syntax", "mod.py", 2, 9, "    x = = 1\n", 2, 10)
        assert SyntaxError(got.syntax[0], got.syntax[1:]).lineno == 2


def test_blog_log_exception_outside_an_except_block_writes_what_logging_writes(logged):
    # Proves: log.exception outside an except block logs what logging's does there,
    # "NoneType: None" (before: the field None, and no text), and %k shows it as None.
    logged.log.exception("nothing")
    [ev] = _read(logged)
    exc = ev.fields["exception"]
    assert (exc.type, exc.traceback) == ("NoneType", "NoneType: None\n")
    assert bread.render.fields_text(ev) == "exception=None"
    assert bread.sinks.json.json_value(exc)["traceback"] == "NoneType: None\n"


def test_an_exception_never_raised_has_its_text_in_json(logged):
    # Proves: -o jsonl's traceback of an exception never raised is the text bread shows
    # and Python prints (before: null).
    logged.log.error("x", err=ValueError("boom"))
    [ev] = _read(logged)
    assert ev.fields["err"].traceback == "ValueError: boom\n"
    assert bread.sinks.json.json_value(ev.fields["err"])["traceback"] == "ValueError: boom\n"


def test_group_members_and_syntax_in_json(logged):
    # Proves: -o jsonl holds a group's members (each an $exception with its own text)
    # and a SyntaxError's place.
    exc = _caught(_nested)
    logged.log.error("x", err=exc, bad=_caught(_syntax))
    [ev] = _read(logged)
    got = bread.sinks.json.json_value(ev.fields["err"])
    assert [m["$exception"] for m in got["exceptions"]] == ["ExceptionGroup", "RuntimeError"]
    assert [m["$exception"] for m in got["exceptions"][0]["exceptions"]] == ["OSError"] * 3
    assert got["exceptions"][1]["traceback"] == "RuntimeError: beside\n"
    assert bread.sinks.json.json_value(ev.fields["bad"])["syntax"] == [
        "invalid syntax", "mod.py", 2, 9, "    x = = 1\n", 2, 10]


def test_a_crafted_group_and_place_render_within_bounds():
    # Proves: members, counts and places of any shape or size (a crafted file's) render
    # without raising, within the text limit, deep groups as "..." as traceback does.
    member = ["ValueError", "v", None, None, None, None]
    for _ in range(200):
        member = ["ExceptionGroup", "g", None, None, None, None, [1, [member] * 20], None]
    text = tracebacks.render("ExceptionGroup", "g", None, None, None, None, 1 << 16,
                             group=[10**9, [member] * 100])
    assert len(text) <= 1 << 16 and "(max_group_depth is 10)" in text
    for group in (None, [], [1], ["x", []], [-5, ["bad", 3, None, []]], [2, "members"]):
        tracebacks.render("E", "m", None, None, None, None, group=group)
    for syntax in ([], [None] * 7, [1, 2, 3], ["m", "f", 1, 10**9, "t", 1, 2],
                   ["m", "f", "1", 2, 3], ["m", None, None, 5, "x", None, -1]):
        assert tracebacks.render("SyntaxError", "m", None, None, None, None,
                                 syntax=syntax).endswith("\n")
