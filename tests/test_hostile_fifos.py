"""Hostile files where bread reads: a FIFO or a device put where a followed or listed file was,
or named to follow (docs/security.md)."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

import bread
from bread import cli
from bread.inputs.tail import Tail

from crafted import log_to
from helpers import python_child


def test_a_fifo_put_at_a_followed_path_is_waited_past_never_waited_on(tmp_path):
    path = str(tmp_path / "a.blog")
    log_to(path, "first", 3)
    tail = Tail(path, interval=0.01)
    first = tail.read()
    fifo, keep = str(tmp_path / "fifo"), str(tmp_path / "keep")
    os.mkfifo(fifo)
    os.link(fifo, keep)                # (to let a reader blocked in it go at the end)
    os.replace(fifo, path)             # "rotated" to a FIFO nobody writes
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(tail.read()), daemon=True)
    reader.start()
    reader.join(0.5)                   # polling the FIFO at the path, not blocked in it
    log_to(str(tmp_path / "b.blog"), "second", 3)
    os.replace(tmp_path / "b.blog", path)
    reader.join(30)
    hung = reader.is_alive()
    if hung:                           # blocked opening the FIFO: let it go
        os.close(os.open(keep, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(30)
    assert not hung and got and got[0][:4] == first[:4]
    tail.close()


def test_following_a_fifo_or_a_device_is_refused_at_once(tmp_path, capsys):
    fifo = str(tmp_path / "x.blog")
    os.mkfifo(fifo)
    r = subprocess.run(python_child("-m", "bread", "-F", fifo), capture_output=True,
                       timeout=60)
    assert r.returncode == cli.EXIT_USAGE and r.stdout == b""
    assert "follow reads a regular file" in r.stderr.decode()
    r = subprocess.run(python_child("-m", "bread", "-F", "/dev/zero"), capture_output=True,
                       timeout=60)
    assert r.returncode == cli.EXIT_USAGE and "/dev/zero is none of them" in r.stderr.decode()


def test_a_fifo_a_pattern_finds_is_passed_over_never_waited_on(tmp_path):
    log_to(str(tmp_path / "a.blog"), "real", 3)
    os.mkfifo(tmp_path / "x.blog")
    for command in ([], ["stats"]):
        r = subprocess.run(python_child("-m", "bread", *command, str(tmp_path / "*.blog")),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert b"real 2" in r.stdout or r.stdout.startswith(b"events: 3\n")


@pytest.mark.parametrize("sort", [False, True])
def test_a_fifo_put_at_a_listed_files_name_before_it_is_opened_never_blocks(tmp_path, sort):
    log_to(str(tmp_path / "a.blog"), "first", 3)
    log_to(str(tmp_path / "b.blog"), "second", 3)
    keep = str(tmp_path / "keep")
    os.mkfifo(keep)
    reader = bread.read(str(tmp_path), sort=sort) if sort else bread.read(str(tmp_path))
    opened = threading.Event()
    got: list = []

    def read() -> None:
        try:
            for ev in reader:
                got.append(ev.message)
                if not opened.is_set():     # a.blog is open: b.blog is still to be opened
                    os.link(keep, tmp_path / "b.fifo")
                    os.replace(tmp_path / "b.fifo", tmp_path / "b.blog")
                    opened.set()
        except OSError as exc:
            got.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)
    hung = t.is_alive()
    if hung:                           # blocked opening the FIFO: let it go
        os.close(os.open(keep, os.O_WRONLY | os.O_NONBLOCK))
        t.join(30)
    assert not hung
    assert got[:3] == ["first 0", "first 1", "first 2"] or sort
    assert isinstance(got[-1], OSError) and "not a regular file" in str(got[-1])
