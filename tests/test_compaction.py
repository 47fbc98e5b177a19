"""Compaction in a file set's housekeeping (``compact=``): ``bread compact`` run as a child
process on the set's directory; what it compacts reads back once, shipping loses nothing, a
failing child is reported and logging goes on."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

import blog
import bread
from blogstore.posix import fcntl
from blog.errors import ConfigurationError
from blogstore import catalog, manifest
from blogstore.crashlayout import buffer_directory
from blogstore.fileset import members

from helpers import flushed_one_by_one, run_python

OLD = time.time() - 3 * 86400      # files "last written" three days ago


def _old_set(directory, n: int, **options) -> list[str]:
    """A set ``directory/app.blog`` of ``n`` closed files, one event "e {i}" each, aged."""
    flushed_one_by_one(blog.RotatingFile(directory / "app.blog", rotate_bytes=1, **options), n)
    names = [f.name for f in members(str(directory), "app")]
    for name in names:
        os.utime(directory / name, (OLD, OLD))
    return names


def _compacting(directory, **options) -> blog.RotatingFile:
    """A RotatingFile of the set with ``compact=``; returned once its child (if any) ended."""
    rf = blog.RotatingFile(directory / "app.blog", rotate_bytes=1, **options)
    rf.wait()                                   # the start's sweep: the child is started
    assert rf.housekeeper.compactions is not None
    assert rf.housekeeper.compactions.wait(120)
    return rf


def _compacted(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if catalog.is_compacted(n))


@pytest.mark.parametrize("columnar", [True, False])
def test_a_set_with_compact_reads_back_every_event_once_and_in_order(tmp_path, columnar):
    # Proves: on its sweep, housekeeping runs bread compact as a child: the closed files
    # older than the age become one compacted file, the originals go, and bread reads
    # every event exactly once, in order; logging into the set goes on beside it.
    logs = tmp_path / "logs"
    originals = _old_set(logs, 6)
    rf = _compacting(logs, compact=blog.Compaction(older_than="1h", columnar=columnar))
    assert rf.housekeeper.compactions.runs == 1 and rf.housekeeper.compactions.failures == 0
    assert len(_compacted(logs)) == 1
    assert not any(os.path.exists(logs / n) for n in originals)
    flushed_one_by_one(rf, 2)      # logging goes on (its young files are not compacted)
    assert [ev.message for ev in bread.read(str(logs), sort=True)] == [
        f"e {i}" for i in range(6)] + ["e 0", "e 1"]
    assert [ev.message for ev in bread.read(str(logs / _compacted(logs)[0]))] == [
        f"e {i}" for i in range(6)]


def test_no_child_when_compact_is_off_nor_while_no_file_is_old_enough(tmp_path):
    _old_set(tmp_path, 2)
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1)
    rf.wait()
    assert rf.housekeeper.compactions is None
    young = tmp_path / "young"
    flushed_one_by_one(blog.RotatingFile(young / "app.blog", rotate_bytes=1), 2)
    rf = _compacting(young, compact="1d")
    assert rf.housekeeper.compactions.runs == 0
    rf.close()
    assert _compacted(tmp_path) == [] == _compacted(young)


def test_a_forked_worker_leaves_compaction_to_its_parent(tmp_path):
    # Proves: after fork, neither the default session's new set nor a RotatingFile of the
    # application's own starts compaction children in the child: the parent's does; and
    # the worker's retention, as its parent's, deletes nothing while a compaction runs
    # (the lock held here): it may be reading those files.
    old = [f"app.2026-11-0{k + 1}T00-00-00.000.pid9999{k}.blog" for k in range(4)]
    (tmp_path / "logs").mkdir()
    for name in old:
        (tmp_path / "logs" / name).write_bytes(b"")
        os.utime(tmp_path / "logs" / name, (OLD, OLD))
    r = run_python(f"""
        import os, blog
        from blog.lifecycle import consumer_of
        from blogstore.posix import fcntl
        lock = os.open("logs/blog-compaction.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(lock, fcntl.LOCK_EX)       # a compaction runs
        blog.basic_config("logs/app.blog", rotate_bytes=1, keep_files=2, compact="1d")
        rf = blog.RotatingFile("other/app.blog", rotate_bytes=1, compact="1d")
        def compacts():
            return (consumer_of(blog.default_session()).stream.housekeeper.compactions,
                    rf.housekeeper.compactions)
        assert None not in compacts()
        pid = os.fork()
        if pid == 0:
            for i in range(4):
                blog.get_logger().info("worker {{}}", i)
                blog.flush()
            consumer_of(blog.default_session()).stream.wait()
            kept = all(os.path.exists("logs/" + n) for n in {old!r})
            os._exit(0 if compacts() == (None, None) and kept else 1)
        print(os.waitpid(pid, 0)[1])
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]


def test_closing_the_set_does_not_wait_for_its_child(tmp_path):
    # Proves: closing the set (at exit, say) leaves a running child to end by itself.
    fake = _fake(tmp_path, "python-slow", "exec sleep 120")
    _old_set(tmp_path / "logs", 1)
    rf = blog.RotatingFile(tmp_path / "logs" / "app.blog", rotate_bytes=1,
                           compact=blog.Compaction(older_than=60, python=fake))
    rf.close()
    compactions = rf.housekeeper.compactions
    try:
        assert compactions.runs == 1 and compactions.running
        assert compactions.child.poll() is None
    finally:
        compactions.child.kill()
        compactions.wait(120)


@pytest.mark.parametrize("compress", [True, False])
def test_compressed_sets_are_compacted_and_a_pending_crash_buffer_holds_compaction(
        tmp_path, compress):
    # Proves: the child takes .blog.gz originals as .blog ones; while a crash buffer of the
    # set waits for recovery (its process is dead), no child starts: recovery appends to
    # that process's file first.
    logs = tmp_path / "logs"
    originals = _old_set(logs, 3, compress=compress)
    assert all(n.endswith(".gz") == compress for n in originals)
    buffers = buffer_directory(str(logs / "app.blog"))
    os.makedirs(buffers)
    dead = subprocess.Popen(["true"])
    dead.wait()
    open(os.path.join(buffers, f"{dead.pid}-1.meta"), "wb").close()
    rf = _compacting(logs, compact="1h", compress=compress)
    assert rf.housekeeper.compactions.runs == 0
    os.unlink(os.path.join(buffers, f"{dead.pid}-1.meta"))    # recovered
    flushed_one_by_one(rf, 1)
    assert rf.housekeeper.compactions.wait(120) and rf.housekeeper.compactions.runs == 1
    assert len(_compacted(logs)) == 1
    assert not any(os.path.exists(logs / n) for n in originals)
    assert sorted(ev.message for ev in bread.read(str(logs))) == ["e 0", "e 0", "e 1", "e 2"]


def test_compaction_never_takes_a_file_not_yet_shipped(tmp_path):
    # Proves: with on_close, the child compacts only the files the manifest records as
    # shipped; one whose hook failed stays as it is, is shipped at a later pass, and
    # every event is read exactly once locally and reached the bucket.
    logs, bucket = tmp_path / "logs", tmp_path / "bucket"
    bucket.mkdir()
    refused: list[str] = []

    def upload(path: str) -> None:
        if not refused or os.path.basename(path) in refused:
            refused.append(os.path.basename(path))
            raise ConnectionError("bucket unreachable")
        shutil.copy(path, bucket)

    originals = _old_set(logs, 4, on_close=upload)
    assert len(os.listdir(bucket)) == 3
    rf = _compacting(logs, on_close=upload, compact=blog.Compaction(older_than=3600))
    assert refused[0] in os.listdir(logs)                  # not shipped: not compacted
    assert [n for n in originals if os.path.exists(logs / n)] == [refused[0]]
    entry = catalog.load(str(logs))["compacted"][_compacted(logs)[0]]
    assert sorted(entry["replaces"]) == sorted(set(originals) - {refused[0]})
    assert [ev.message for ev in bread.read(str(logs), sort=True)] == [
        f"e {i}" for i in range(4)]
    refused[:] = [""]                                      # the bucket is back:
    flushed_one_by_one(rf, 1)                              # the next pass ships it
    assert sorted(ev.message for ev in bread.read(str(bucket))) == sorted(
        [f"e {i}" for i in range(4)] + ["e 0"])


def test_retention_counts_a_compacted_file_as_one_closed_file_of_the_set(tmp_path):
    # Proves: with compact=, retention takes the set's compacted files in too, in time
    # order (its period's start), each one file of its bytes and age; deleting one drops
    # its catalog entry.
    logs = tmp_path / "logs"
    _old_set(logs, 4)
    rf = _compacting(logs, compact="1h", keep_files=3)
    assert len(_compacted(logs)) == 1 and len(list(bread.read(str(logs)))) == 3
    flushed_one_by_one(rf, 3)              # three new files: the compacted one is the oldest
    assert _compacted(logs) == []
    assert catalog.load(str(logs))["compacted"] == {}
    assert sorted(ev.message for ev in bread.read(str(logs))) == ["e 0", "e 1", "e 2"]


def test_while_a_compaction_runs_no_child_starts_and_retention_waits(tmp_path):
    # Proves: a compaction of the directory (another process's: its lock is held) keeps
    # this set from starting a second one and from deleting what it may be reading; the
    # next pass after it ended does both.
    logs = tmp_path / "logs"
    _old_set(logs, 3)
    fd = os.open(logs / catalog.LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        rf = _compacting(logs, compact="1h", keep_files=2)
        assert rf.housekeeper.compactions.runs == 0
        assert len(members(str(logs), "app")) == 3
    finally:
        os.close(fd)
    flushed_one_by_one(rf, 1)          # a pass: retention (two files left), then the child
    assert rf.housekeeper.compactions.wait(120)
    assert rf.housekeeper.compactions.runs == 1
    assert len(members(str(logs), "app")) == 1 and len(_compacted(logs)) == 1
    assert sorted(ev.message for ev in bread.read(str(logs))) == ["e 0", "e 2"]


def _fake(directory, name: str, body: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_a_failing_child_is_reported_and_logging_goes_on(tmp_path, capsys):
    # Proves: a child that fails (here an interpreter that says why and exits 3) is
    # reported on stderr with its status and what it said, escaped; nothing is compacted.
    fake = _fake(tmp_path, "python-fake", "echo 'no room \x1b[2J left' >&2; exit 3")
    _old_set(tmp_path / "logs", 2)
    rf = _compacting(tmp_path / "logs", compact=blog.Compaction(older_than=60, python=fake))
    assert rf.housekeeper.compactions.failures == 1
    err = capsys.readouterr().err
    assert "compaction of" in err and "exited 3" in err and "no room \\x1b[2J left" in err
    assert "\x1b" not in err
    flushed_one_by_one(rf, 1)
    assert len(list(bread.read(str(tmp_path / "logs")))) == 3
    assert _compacted(tmp_path / "logs") == []


def test_a_directory_the_compactor_refuses_is_reported_and_logging_goes_on(tmp_path, capsys):
    # Proves: the real child's refusal (a directory planted at the compaction lock's name)
    # is reported with its exit status and message; retention and logging go on.
    logs = tmp_path / "logs"
    _old_set(logs, 3)
    os.mkdir(logs / catalog.LOCK)
    rf = _compacting(logs, compact="1h", keep_files=2)
    assert rf.housekeeper.compactions.failures == 1
    err = capsys.readouterr().err
    assert "exited 2" in err and "not a lock file" in err
    flushed_one_by_one(rf, 1)
    assert len(members(str(logs), "app")) == 2 and len(list(bread.read(str(logs)))) == 2


def test_a_child_that_hangs_is_killed_after_the_timeout(tmp_path, capsys):
    fake = _fake(tmp_path, "python-hangs", "exec sleep 60")
    _old_set(tmp_path / "logs", 1)
    rf = _compacting(tmp_path / "logs",
                     compact=blog.Compaction(older_than=60, python=fake, timeout=1))
    assert rf.housekeeper.compactions.failures == 1
    assert "was killed after 1 s" in capsys.readouterr().err


def test_an_executable_that_is_not_a_python_turns_compaction_off_once(tmp_path, capsys,
                                                                     monkeypatch):
    # Proves: an embedded interpreter (uWSGI: sys.executable is the server) is not run;
    # it is said once, and the set goes on without compaction.
    monkeypatch.setattr(sys, "executable", _fake(tmp_path, "uwsgi", "exit 0"))
    _old_set(tmp_path / "logs", 2)
    rf = _compacting(tmp_path / "logs", compact="1h")
    flushed_one_by_one(rf, 1)
    assert rf.housekeeper.compactions.runs == 0
    err = capsys.readouterr().err
    assert err.count("is not a Python") == 1 and "compact=Compaction(python=" in err


@pytest.mark.parametrize("value", ["1x", "", "-1d", 0, -5, 1.5, [1], "0s"])
def test_a_bad_age_is_refused_naming_the_option(tmp_path, value):
    match = "compact must" if isinstance(value, list) else "compact's older_than"
    with pytest.raises(ConfigurationError, match=match):
        blog.RotatingFile(tmp_path / "app.blog", compact=value)
    with pytest.raises(ConfigurationError, match=match):
        blog.basic_config(tmp_path / "app.blog", rotate_bytes=1, compact=value)
    assert os.listdir(tmp_path) == []          # refused before anything was made


def test_compact_options_are_checked(tmp_path):
    with pytest.raises(ConfigurationError, match="nice"):
        blog.Compaction(nice=40)
    with pytest.raises(ConfigurationError, match="columnar"):
        blog.Compaction(columnar="yes")    # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="every"):
        blog.Compaction(every="soon")
    with pytest.raises(ConfigurationError, match="rotated set"):
        blog.basic_config(tmp_path / "app.blog", compact="1d")
    assert blog.Compaction(older_than="2h", period="1h").older_than == 7200


@pytest.mark.slow
def test_basic_config_compacts_in_a_child_and_the_service_loads_no_reader(tmp_path):
    # Proves: basic_config(compact=) compacts the set's old files in a child process; the
    # service itself never imports bread (nor blog's layering: test_architecture).
    script = """
        import glob, os, sys, time
        import blog
        blog.basic_config("logs/app.blog", rotate_bytes=1)
        for i in range(3):
            blog.get_logger().info("e {}", i)
            blog.flush()
        blog.basic_config("logs/app.blog", rotate_bytes=1)   # closes the last file
        for p in glob.glob("logs/app.*.blog"):
            os.utime(p, (time.time() - 86400 * 3,) * 2)
        blog.basic_config("logs/app.blog", rotate_bytes=1, compact="1d")

        def done():    # the compacted file made, and the originals it replaces gone
            c = catalog.load("logs")
            return c is not None and any(
                e["state"] == "done" and not any(os.path.exists("logs/" + n)
                                                 for n in e["replaces"])
                for e in c["compacted"].values())

        from blogstore import catalog
        deadline = time.monotonic() + 120
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
        print(len(glob.glob("logs/app.compacted.*")),
              sorted(m for m in sys.modules if m.split(".")[0] == "bread"))
    """
    r = run_python(script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "1 []"
    assert sorted(ev.message for ev in bread.read(str(tmp_path / "logs"))) == [
        "e 0", "e 1", "e 2"]
    assert manifest.load(str(tmp_path / "logs")) is not None
