"""Compaction in a file set's housekeeping (``compact=``) beside other sets and processes:
a set's child compacts that set only, a worker's retention waits for a running compaction,
the child runs the installed ``bread``, and a crash in it is told apart from a bad option."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import blog
import bread.compact
from blog.files.compaction import Compactions
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


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(blog.__file__)))

#: A service (run as a script, in its own directory) whose set compacts an old file; it
#: prints how the compaction went.
SERVICE = """
import os, time
import blog
os.makedirs("logs", exist_ok=True)
old = "logs/app.2026-11-01T00-00-00.000.pid99999.blog"
open(old, "wb").close()
os.utime(old, (time.time() - 5 * 86400,) * 2)
rf = blog.RotatingFile("logs/app.blog", rotate_bytes=100, compact="1d")
rf.wait()
c = rf.housekeeper.compactions
print(c.wait(120), c.runs, c.failures, os.path.exists(old))
"""


def _planted(directory, name: str) -> None:
    """A module ``name`` in ``directory`` that, imported, leaves a mark and fails."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(f"open({str(directory / 'imported')!r}, 'w').close()\n"
                                  "raise ImportError('planted')\n")


def test_the_child_runs_the_installed_bread_not_one_in_the_working_directory(tmp_path):
    # Proves: the compaction child does not put the service's working directory on its
    # path: a bread/ there is not imported; the real one compacts.
    _planted(tmp_path / "work" / "bread", "__init__.py")
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path / "work",
                       capture_output=True, text=True, timeout=180)
    assert r.stdout.split() == ["True", "1", "0", "False"], r.stderr
    assert not (tmp_path / "work" / "bread" / "imported").exists()


def test_the_childs_path_keeps_the_standard_library_first(tmp_path):
    # Proves: where the child finds no bread on its own path (here: -S, no site-packages),
    # it appends the directory this process has bread from, after the standard library:
    # a module there named as one of it (a backport's enum.py) is not run.
    import msgpack

    site = tmp_path / "site"
    _planted(site, "enum.py")
    for package in ("blog", "bread", "blogformat", "blogstore"):
        os.symlink(os.path.join(ROOT, package), site / package)
    os.symlink(os.path.dirname(msgpack.__file__), site / "msgpack")
    argv = Compactions(str(tmp_path), "app", blog.Compaction())._argv(False)
    assert argv is not None and argv[1:3] == ["-P", "-c"] and argv[5] == ROOT
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([argv[0], "-S", *argv[1:5], str(site), "compact", "--help"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--set STEM" in r.stdout, r.stderr
    assert not (site / "imported").exists()


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
