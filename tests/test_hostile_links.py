"""Links planted in a log directory, leading to a log elsewhere: what a directory or a
pattern stands for is its regular files, never a link (docs/security.md)."""

from __future__ import annotations

import os
import subprocess
import time

import bread
from blogstore.fileset import file_name

from crafted import log_to, victims
from helpers import python_child


def planted(tmp_path) -> str:
    """A log directory with one log of its own and links to the victim's log at a plain
    name and at a set's file name."""
    outside, victim = victims(str(tmp_path))
    logs = tmp_path / "logs"
    logs.mkdir()
    log_to(str(logs / "own.blog"), "own", 2)
    os.symlink(victim, logs / "plain.blog")
    os.symlink(victim, logs / file_name("app", time.time_ns(), 4242))
    return str(logs)


def test_a_directory_or_a_pattern_never_reads_through_a_link(tmp_path):
    logs = planted(tmp_path)
    for source in (logs, os.path.join(logs, "*.blog")):
        assert [ev.message for ev in bread.read(source)] == ["own 0", "own 1"]
    r = subprocess.run(python_child("-m", "bread", "stats", "-o", "json", logs),
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and b'"events": 2' in r.stdout


def test_following_a_directory_never_reads_through_a_link(tmp_path):
    logs = planted(tmp_path)
    reader = bread.read(logs, follow=True)
    events = iter(reader)
    assert [next(events).message for _ in range(2)] == ["own 0", "own 1"]
    assert [str(d).split(": ", 1)[1] for d in reader.damage] == [
        "damage at offset 0 (cannot be followed: Too many levels of symbolic links)"]


def test_a_link_named_itself_is_read(tmp_path):
    logs = planted(tmp_path)
    assert len(list(bread.read(os.path.join(logs, "plain.blog")))) == 50
