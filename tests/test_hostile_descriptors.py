"""Directories of more files than there are file descriptors (docs/security.md):
sorting and statistics hold a bounded number open; following, which needs a descriptor and
a thread per file it follows, says why a file cannot be followed."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import threading

import bread

from crafted import log_to
from helpers import python_child

#: Run by a child under ``ulimit -n 64``: 200 files of 2 events.
LOW_LIMIT = "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)); "


def many(tmp_path, n: int) -> str:
    d = tmp_path / "many"
    d.mkdir()
    log_to(str(d / "f000.blog"), "w", 2)
    for i in range(1, n):
        shutil.copyfile(d / "f000.blog", d / f"f{i:03d}.blog")
    return str(d)


def test_sorting_and_statistics_of_more_files_than_descriptors_read_them_all(tmp_path):
    d = many(tmp_path, 200)
    for command in (["-s"], ["stats", "-o", "json"]):
        code = (LOW_LIMIT + "import sys; from bread import cli; "
                f"sys.exit(cli.main({command + [d]!r}))")
        r = subprocess.run(python_child("-c", code), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count(b"\n") == 400 if command == ["-s"] else b'"events": 400' in r.stdout


def test_a_followed_file_that_cannot_be_opened_says_why(tmp_path, monkeypatch):
    log_to(str(tmp_path / "a.blog"), "a", 2)
    log_to(str(tmp_path / "b.blog"), "b", 2)
    real_open = os.open

    def out_of_descriptors(path, *a, **k):
        if str(path).endswith("b.blog"):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), path)
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", out_of_descriptors)
    reader = bread.read(str(tmp_path), follow=True)
    events = iter(reader)
    assert next(events).message == "a 0"
    assert [str(d) for d in reader.damage] == [
        f"{tmp_path / 'b.blog'}: damage at offset 0 (cannot be followed: Too many open files)"]


def test_a_followed_file_for_which_no_thread_can_be_started_says_why(tmp_path, monkeypatch):
    log_to(str(tmp_path / "a.blog"), "a", 2)
    log_to(str(tmp_path / "b.blog"), "b", 2)
    real_start = threading.Thread.start

    def no_thread_left(self):
        if self.name == "bread-follow" and no_thread_left.started:
            raise RuntimeError("can't start new thread")
        no_thread_left.started = True
        real_start(self)

    no_thread_left.started = False
    monkeypatch.setattr(threading.Thread, "start", no_thread_left)
    reader = bread.read(str(tmp_path), follow=True)
    events = iter(reader)
    assert [next(events).message for _ in range(2)] == ["a 0", "a 1"]
    assert [str(d) for d in reader.damage] == [
        f"{tmp_path / 'b.blog'}: damage at offset 0 (cannot be followed: can't start new "
        "thread)"]
