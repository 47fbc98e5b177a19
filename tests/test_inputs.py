"""What bread reads: paths, directories, glob patterns, standard input, gzip by content."""

from __future__ import annotations

import gzip
import io
import subprocess

import pytest

import bread
from bread import cli

from helpers import python_child, run_cli, write_log


def messages(source) -> list[str]:
    return [e.message for e in bread.read(source)]


def test_gzip_is_read_as_is_whatever_the_name(tmp_path, capsys):
    data = write_log(None)
    plain = tmp_path / "plain.blog"
    plain.write_bytes(data)
    packed = tmp_path / "packed.blog"          # no .gz: detected by content
    packed.write_bytes(gzip.compress(data))
    assert messages(str(packed)) == messages(str(plain)) == [f"event {i} of a" for i in range(50)]
    assert messages(io.BytesIO(gzip.compress(data))) == messages(str(plain))
    code1, out1, _ = run_cli([str(plain)], capsys)
    code2, out2, _ = run_cli([str(packed)], capsys)
    assert (code1, code2) == (0, 0) and out1 == out2


def test_concatenated_gzip_members_read_as_one(tmp_path):
    a, b = write_log(None, 5, "a"), write_log(None, 5, "b")
    p = tmp_path / "two.blog.gz"
    p.write_bytes(gzip.compress(a) + gzip.compress(b))
    assert messages(str(p)) == [f"event {i} of a" for i in range(5)] + \
        [f"event {i} of b" for i in range(5)]


def test_a_gzip_cut_short_gives_what_it_holds_and_reports_damage(tmp_path, capsys):
    # Enough events that the cut falls among them whatever metadata precedes them (a
    # session describes every value type its process has met: other tests' too).
    data = write_log(None, 5000)
    packed = gzip.compress(data)
    p = tmp_path / "cut.blog.gz"
    p.write_bytes(packed[:len(packed) * 2 // 3])
    r = bread.read(str(p))
    got = [e.message for e in r]
    assert 0 < len(got) < 5000 and got == [f"event {i} of a" for i in range(len(got))]
    assert any("compressed data" in d.reason for d in r.damage)
    code, out, err = run_cli([str(p)], capsys)
    assert code == cli.EXIT_DAMAGED and "compressed data cut short" in err
    assert out.count("\n") == len(got)


def test_bytes_that_only_look_like_gzip_are_read_as_they_are(tmp_path):
    data = write_log(None, 10)
    p = tmp_path / "odd.blog"
    p.write_bytes(b"\x1f\x8b\x08\x00junk" + data)
    r = bread.read(str(p))
    assert [e.message for e in r] == [f"event {i} of a" for i in range(10)]
    assert [(d.offset, d.length) for d in r.damage] == [(0, 8)]


def test_a_directory_is_its_log_files_in_name_order(tmp_path, capsys):
    d = tmp_path / "logs"
    d.mkdir()
    write_log(d / "app.2026-11-26T10-00-00.blog", 3, "first")
    (d / "app.2026-11-26T11-00-00.blog.gz").write_bytes(gzip.compress(write_log(None, 3, "second")))
    write_log(d / "app.2026-11-26T12-00-00.blog", 3, "third")
    (d / "notes.txt").write_text("not a log")
    (d / "sub.blog").mkdir()
    want = [f"event {i} of {t}" for t in ("first", "second", "third") for i in range(3)]
    assert messages(str(d)) == want
    code, out, _ = run_cli(["-f", "%m", str(d)], capsys)
    assert code == 0 and out.splitlines() == want


def test_a_directory_without_log_files_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    with pytest.raises(FileNotFoundError, match="no log files"):
        list(bread.read(str(tmp_path / "pics")))
    code, out, err = run_cli([str(tmp_path / "pics")], capsys)
    assert code == cli.EXIT_OPEN and out == ""
    assert err.count("\n") == 1 and "no log files" in err and "Traceback" not in err


def test_glob_patterns_are_expanded_by_bread(tmp_path, capsys):
    for k in range(3):
        write_log(tmp_path / f"app.{k}.blog", 2, str(k))
    pattern = str(tmp_path / "app.*.blog")
    want = [f"event {i} of {k}" for k in range(3) for i in range(2)]
    assert messages(pattern) == want
    code, out, _ = run_cli(["-f", "%m", pattern], capsys)
    assert code == 0 and out.splitlines() == want
    code, out, err = run_cli([str(tmp_path / "nothing.*.blog")], capsys)
    assert code == cli.EXIT_OPEN and "no file matches" in err


def test_a_path_that_exists_is_never_a_pattern(tmp_path):
    p = tmp_path / "odd[1].blog"
    write_log(p, 2)
    assert messages(str(p)) == ["event 0 of a", "event 1 of a"]


def test_standard_input_gzip_or_not(tmp_path):
    data = write_log(None, 20)
    for payload in (data, gzip.compress(data)):
        r = subprocess.run(python_child("-m", "bread", "-f", "%m", "-"), input=payload,
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().splitlines() == [f"event {i} of a" for i in range(20)]


def test_a_text_file_is_one_clear_line(tmp_path, capsys):
    # Issue 26: it says that it is not a blog file, exit 2 (it was "damaged bytes", exit 3).
    p = tmp_path / "notes.txt"
    p.write_text("hello\n" * 100)
    code, out, err = run_cli([str(p)], capsys)
    assert code == cli.EXIT_OPEN and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"bread: {p}: not a blog log file" in err


@pytest.mark.parametrize("sort", [False, True])
def test_an_input_that_is_not_a_blog_file_is_refused_naming_it(tmp_path, sort):
    # Proves (issue 26): bread.read raises bread.NotABlogFile (a ValueError) for a file, or
    # a file object, that does not begin as a blog file, instead of giving no events; a blog
    # file damaged at its start or later, its gzip, and an empty file read as before.
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 100)
    for source in (str(notes), io.BytesIO(b"hello"), [str(tmp_path / "a.blog"), str(notes)]):
        write_log(tmp_path / "a.blog", 3)
        with pytest.raises(bread.NotABlogFile, match="not a blog log file"):
            list(bread.read(source, sort=sort))
    assert issubclass(bread.NotABlogFile, ValueError)
    data = write_log(None, 3)
    for good in (data, b"\x00" + data[1:], data[:200] + b"junk" + data[200:],
                 gzip.compress(data), b"junk" + data, b""):
        r = bread.read(io.BytesIO(good), sort=sort)
        assert len(list(r)) == (3 if good else 0)


def test_a_directory_reads_a_file_that_is_not_blog_as_damage(tmp_path, capsys):
    # Proves: a directory's *.blog file that is not a blog file (a crash's zeroed blocks)
    # is damage, as before; only an input named itself is refused.
    write_log(tmp_path / "app.1.blog", 3)
    (tmp_path / "app.2.blog").write_bytes(b"\x00" * 100)
    code, out, err = run_cli([str(tmp_path)], capsys)
    assert code == cli.EXIT_DAMAGED and len(out.splitlines()) == 3 and "app.2.blog" in err


@pytest.mark.parametrize("command", [[], ["-s"], ["-o", "jsonl"], ["stats"], ["stats", "-o",
                                                                               "json"]])
def test_bread_says_an_input_is_not_a_blog_file(tmp_path, capsys, command):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 100)
    code, out, err = run_cli([*command, str(notes)], capsys)
    assert code == cli.EXIT_OPEN and out == ""
    assert err == f"bread: {notes}: not a blog log file (its first 600 bytes hold no blog " \
                  "frame)\n"


def test_bread_export_says_an_input_is_not_a_blog_file(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 100)
    code, out, err = run_cli(["export", "--parquet", str(tmp_path / "out"), str(notes)], capsys)
    assert code == cli.EXIT_OPEN and "Traceback" not in err
    assert f"bread export: {notes}: not a blog log file" in err
