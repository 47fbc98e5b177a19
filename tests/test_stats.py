"""bread stats: counts that agree with bread.read, drops, damage, a histogram that adds up."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess

import pytest

import bread
from bread import cli

from helpers import python_child, write_log

DATA = pathlib.Path(__file__).parent / "data" / "v1"


def stats(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(["stats", "-o", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_counts_agree_with_read(capsys):
    path = str(DATA / "every_type.blog")
    events = list(bread.read(path))
    code, s = stats(capsys, path)
    assert code == 0 and s["events"] == len(events)
    assert s["severity"] == dict(collections.Counter(e.severity.name for e in events))
    assert s["category"] == dict(collections.Counter(e.category for e in events))
    assert s["writer"] == dict(collections.Counter(e.writer for e in events))
    assert sum(x["events"] for x in s["sites"]) == len(events)
    assert sum(sum(b["severity"].values()) for b in s["histogram"]) == len(events)
    assert s["first"] <= s["last"] and s["dropped"] == 0 and s["damage"] == []


def test_drops_and_damage_are_reported(tmp_path, capsys):
    code, s = stats(capsys, str(DATA / "dropped.blog"))
    assert code == 0 and s["dropped"] == 3
    bad = tmp_path / "bad.blog"
    data = bytearray((DATA / "two_writers.blog").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    code, s = stats(capsys, str(bad))
    assert code == cli.EXIT_DAMAGED and s["damage"] and s["damage"][0]["length"] > 0


def test_text_output_fits_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["stats", str(DATA / "every_type.blog")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("events: ") and "by call site:" in out and "events over time" in out
    assert max(len(line) for line in out.splitlines() if line.startswith("  2")) <= 60


def test_a_bad_stats_option_is_exit_1_naming_it(capsys):
    from bread import cli
    assert cli.main(["stats", "-o", "xml", "x.blog"]) == 1
    assert "-o/--output" in capsys.readouterr().err


def test_stats_tells_which_files_were_closed_cleanly_and_checks_their_summaries(
        capsys, tmp_path):
    # Proves: a file whose streams all end with a Summary is closed cleanly and its events
    # are checked against it (a frame gone missing shows); a torn file is not clean.
    import blog
    s = blog.Session()
    log = s.get_logger()
    out = blog.MemoryOutputStream()
    log.info("a {}", 1)
    s.consume(out)
    cut_at = out.tell()
    log.info("b {}", 2)
    log.info("b {}", 3)
    s.consume(out)
    cut_end = out.tell()
    s.finish(out)
    whole = out.getvalue()
    (tmp_path / "clean.blog").write_bytes(whole)
    (tmp_path / "missing.blog").write_bytes(whole[:cut_at] + whole[cut_end:])
    (tmp_path / "torn.blog").write_bytes(whole[:cut_end - 3])
    code, st = stats(capsys, str(tmp_path / "clean.blog"), str(tmp_path / "missing.blog"),
                     str(tmp_path / "torn.blog"))
    files = {pathlib.Path(f["path"]).name: f for f in st["files"]}
    assert files["clean.blog"] == dict(files["clean.blog"], closed_cleanly=True, events=3,
                                       summary_events=3)
    assert files["missing.blog"] == dict(files["missing.blog"], closed_cleanly=True, events=1,
                                         summary_events=3)
    assert files["torn.blog"]["closed_cleanly"] is False
    assert files["torn.blog"]["summary_events"] is None and code == 3   # the torn tail
    cli.main(["stats", str(tmp_path / "missing.blog"), str(tmp_path / "torn.blog")])
    text = capsys.readouterr().out
    assert "files: 2, closed cleanly: 1" in text
    assert "summary counts 3 event(s), 1 read" in text
    assert "not closed cleanly" in text and "torn.blog" in text


def test_stats_text_escapes_controls_and_bidirectional_format_characters(tmp_path, capsys):
    # Proves: the category, writer and call site that bread stats prints come from the file:
    # control and bidi characters in them are escapes, in the text; -o json is exact.
    import blog
    s = blog.Session()
    out = blog.MemoryOutputStream()
    s.get_logger("ops\u202etxt.exe\x1b[2J").info("x")
    s.consume(out)
    path = tmp_path / "s.blog"
    path.write_bytes(out.getvalue())
    assert cli.main(["stats", str(path)]) == 0
    text = capsys.readouterr().out
    assert "ops\\u202etxt.exe\\x1b[2J" in text and "\u202e" not in text and "\x1b" not in text
    assert stats(capsys, str(path))[1]["category"] == {"ops\u202etxt.exe\x1b[2J": 1}


def test_stats_names_a_file_whose_name_is_not_utf8_and_carries_on(tmp_path):
    # Proves: bread stats on a directory holding a log named in bytes that are not UTF-8,
    # not closed cleanly and damaged, prints and exits 3 as for any name (its text output
    # raised UnicodeEncodeError on the name): the name is os.fsdecode's with U+FFFD for
    # each undecodable byte, in the text, in -o json and in the damage report.
    import blog
    s = blog.Session()
    out = blog.MemoryOutputStream()
    s.get_logger("x").info("one")
    s.consume(out)
    try:
        with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.blog"), "wb") as f:
            f.write(out.getvalue() + b"\x00junk")
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    shown = os.path.join(str(tmp_path), "bad\ufffd.blog")
    root = pathlib.Path(__file__).parent.parent
    for fmt in ("text", "json"):
        p = subprocess.run(python_child("-m", "bread", "stats", "-o", fmt, str(tmp_path)),
                           capture_output=True, cwd=root, timeout=60,
                           stdin=subprocess.DEVNULL)
        text = p.stdout.decode("utf-8")
        assert p.returncode == cli.EXIT_DAMAGED and b"Traceback" not in p.stderr, p.stderr
        if fmt == "text":
            assert f"not closed cleanly (writer killed, or still writing): {shown}" in text
            assert f"damage: {shown}: " in text
        else:
            got = json.loads(text)
            assert [f["path"] for f in got["files"]] == [shown]
            assert [d["source"] for d in got["damage"]] == [shown]


def test_stats_counts_a_directory_file_that_is_not_blog_as_damage(tmp_path, capsys):
    # Proves (issue 26): as bread reads them, a named input that is not a blog file is
    # refused (test_inputs), one that a directory stands for is damage.
    write_log(tmp_path / "app.1.blog", 3)
    (tmp_path / "app.2.blog").write_bytes(b"\x00" * 100)
    assert cli.main(["stats", "-o", "json", str(tmp_path)]) == 3
    counted = json.loads(capsys.readouterr().out)
    assert counted["events"] == 3 and [d["source"] for d in counted["damage"]] == [
        str(tmp_path / "app.2.blog")]
