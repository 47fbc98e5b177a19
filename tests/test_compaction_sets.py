"""Compaction in a file set's housekeeping (``compact=``) beside other sets and processes:
a set's child compacts that set only, a worker's retention waits for a running compaction,
the child runs the installed ``bread``, and a crash in it is told apart from a bad option."""

from __future__ import annotations

import os
import stat
import time

import blog
import bread.compact
from bread.cli import main
from blogstore import catalog
from blogstore.fileset import members

from helpers import flushed_one_by_one, run_python

OLD = time.time() - 3 * 86400      # files "last written" three days ago


def _aged(directory, stem: str) -> list[str]:
    """The names of set ``stem``'s files in ``directory``, made three days old."""
    names = [f.name for f in members(str(directory), stem)]
    for name in names:
        os.utime(directory / name, (OLD, OLD))
    return names


def _compacted(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if catalog.is_compacted(n))


def test_a_sets_compaction_leaves_the_other_sets_of_its_directory_alone(tmp_path):
    # Proves: set "jobs" (compact=) compacts its own files only: set "api" of the same
    # directory, whose on_close hook fails (nothing shipped), keeps every file.
    def fails(path: str) -> None:
        raise OSError("bucket unreachable")

    api = blog.RotatingFile(tmp_path / "api.blog", rotate_bytes=1, on_close=fails)
    flushed_one_by_one(api, 3)
    api_files = _aged(tmp_path, "api")
    flushed_one_by_one(blog.RotatingFile(tmp_path / "jobs.blog", rotate_bytes=1), 3)
    jobs_files = _aged(tmp_path, "jobs")
    jobs = blog.RotatingFile(tmp_path / "jobs.blog", rotate_bytes=1,
                             compact=blog.Compaction(older_than="1h"))
    jobs.wait()
    compactions = jobs.housekeeper.compactions
    assert compactions is not None and compactions.wait(120)
    jobs.close()
    assert compactions.runs == 1 and compactions.failures == 0
    assert [n.split(".")[0] for n in _compacted(tmp_path)] == ["jobs"]
    assert all(os.path.exists(tmp_path / n) for n in api_files)
    assert not any(os.path.exists(tmp_path / n) for n in jobs_files)
    assert "--set" in compactions.child.args


def test_a_spawned_workers_retention_waits_for_a_running_compaction(tmp_path):
    # Proves: a spawned multiprocessing child of a set with compact= starts no compaction
    # and its retention (at its set's start) deletes nothing while the lock is held.
    (tmp_path / "logs").mkdir()
    old = [f"app.2026-11-0{k + 1}T00-00-00.000.pid9999{k}.blog" for k in range(4)]
    for name in old:
        (tmp_path / "logs" / name).write_bytes(b"")
        os.utime(tmp_path / "logs" / name, (OLD, OLD))
    r = run_python("""
        import multiprocessing, os, blog
        from blogstore.posix import fcntl
        if __name__ == "__main__":
            lock = os.open("logs/blog-compaction.lock", os.O_RDWR | os.O_CREAT)
            fcntl.flock(lock, fcntl.LOCK_EX)       # a compaction runs
            blog.basic_config("logs/app.blog", rotate_bytes=1, keep_files=2, compact="1d")
            p = multiprocessing.get_context("spawn").Process(target=blog.flush)
            p.start()
            p.join()
            print(p.exitcode)
    """, tmp_path)
    assert r.returncode == 0 and "failed" not in r.stderr, r.stderr
    assert r.stdout.split() == ["0"]
    assert all(os.path.exists(tmp_path / "logs" / n) for n in old)
    assert _compacted(tmp_path / "logs") == []


def test_a_crash_in_bread_compact_exits_4_with_one_line_not_1(tmp_path, monkeypatch, capsys):
    # Proves: an unexpected error in the compaction is not a bad option's exit 1 with a
    # traceback: exit 4, one escaped line naming it and where it was raised.
    def crashes(*args, **kwargs):
        raise KeyError("no\nsuch")

    monkeypatch.setattr(bread.compact, "compact", crashes)
    assert main(["compact", str(tmp_path), "--older-than", "1h"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("bread compact: failed: KeyError: 'no\\nsuch' (at ")
    assert "in crashes)" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_child_that_crashed_is_reported_as_failed(tmp_path, capsys):
    # Proves: housekeeping labels a child's exit status 4 as a failure, not a bad option.
    fake = tmp_path / "python-crash"
    fake.write_text("#!/bin/sh\necho 'bread compact: failed: OSError' >&2; exit 4\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    flushed_one_by_one(blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1), 2)
    _aged(tmp_path, "app")
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1,
                           compact=blog.Compaction(older_than="1h", python=str(fake)))
    rf.wait()
    assert rf.housekeeper.compactions is not None and rf.housekeeper.compactions.wait(120)
    rf.close()
    err = capsys.readouterr().err
    assert "exited 4 (it failed: an unexpected error)" in err and "failed: OSError" in err
