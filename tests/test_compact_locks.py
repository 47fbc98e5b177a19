"""bread compact holds each original's lock (the writer's ``flock``, which compression and a
crash buffer's recovery take too) from before it reads it until it is deleted: no other
process changes an original under a running compaction (issue 30, review findings 2 and 6)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess

import pytest

import bread
from blog.files.housekeeping import compress
from bread.compact import compact, transaction

from helpers import aged_set_dir, python_child


def _originals(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith("app.") and ".compacted." not in n)


def _events(d: str) -> list[str]:
    return sorted(e.message for e in bread.read(d))


def _cli_lines(d: str) -> int:
    p = subprocess.run(python_child("-m", "bread", "-f", "%m", d), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return len(p.stdout.splitlines())


def _expected(files: int = 2, n: int = 50) -> list[str]:
    return sorted(f"e {k} {i}" for k in range(files) for i in range(n))


def test_a_compression_after_the_copy_waits_for_the_compaction(tmp_path, monkeypatch):
    # Proves: a housekeeper compressing an original the compaction has copied but not yet
    # deleted finds it locked and leaves it (before: x.blog.gz stayed beside the compacted
    # file replacing x.blog, and every event of it was read twice).
    d = aged_set_dir(tmp_path, files=2)
    said: list[str | None] = []

    class Compactor(transaction.Compactor):
        def add_file(self, path):   # right after an original is copied, before it is deleted
            out = super().add_file(path)
            said.append(compress(d, os.path.basename(path)))
            return out

    monkeypatch.setattr(transaction, "Compactor", Compactor)
    compact(d, 60 * 10**9, warn=lambda m: None)
    assert said == [None, None]
    assert _originals(d) == []
    assert _events(d) == _expected()
    assert _cli_lines(d) == 100


def test_a_compression_before_the_copy_leaves_the_file_for_the_next_compaction(
        tmp_path, monkeypatch):
    # Proves: an original compressed by another process between planning and copying is
    # skipped, said, and taken (as its .gz) by the next compaction; nothing crashes (before:
    # FileNotFoundError) and no event is read twice.
    d = aged_set_dir(tmp_path, files=2)
    first = _originals(d)[0]
    real = transaction.groups

    def groups(*args, **kwargs):
        out = real(*args, **kwargs)
        assert compress(d, first) is not None
        return out

    monkeypatch.setattr(transaction, "groups", groups)
    warned: list[str] = []
    [plan] = compact(d, 60 * 10**9, warn=warned.append)
    assert first not in plan["replaces"] and len(plan["replaces"]) == 1
    assert any(first in w and "next compaction" in w for w in warned)
    assert _originals(d) == [first + ".gz"]
    assert _events(d) == _expected()
    monkeypatch.setattr(transaction, "groups", real)
    [plan] = compact(d, 60 * 10**9, warn=warned.append)
    assert plan["replaces"] == [first + ".gz"]
    assert _originals(d) == []
    assert _events(d) == _expected()
    assert _cli_lines(d) == 100


def test_a_file_another_process_holds_is_skipped_and_taken_next_time(tmp_path, monkeypatch):
    # Proves: an original locked by another process when the compaction comes to it (a
    # writer, a compression, a recovery) is not read nor deleted: it is said, also by a dry
    # run, and the next compaction takes it once it is free.
    d = aged_set_dir(tmp_path, files=2)
    first, second = _originals(d)
    held = os.open(os.path.join(d, first), os.O_RDONLY)
    real = transaction.groups

    def groups(*args, **kwargs):   # locked after planning: the compaction must see it
        out = real(*args, **kwargs)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return out

    monkeypatch.setattr(transaction, "groups", groups)
    try:
        warned: list[str] = []
        [plan] = compact(d, 60 * 10**9, dry_run=True, warn=warned.append)
        assert plan["replaces"] == [second]
        assert any(first in w and "locked by another process" in w for w in warned)
        [plan] = compact(d, 60 * 10**9, warn=warned.append)
        assert plan["replaces"] == [second]
        assert _originals(d) == [first]
        assert _events(d) == _expected()
    finally:
        os.close(held)
    monkeypatch.setattr(transaction, "groups", real)
    [plan] = compact(d, 60 * 10**9, warn=warned.append)
    assert plan["replaces"] == [first]
    assert _originals(d) == []
    assert _events(d) == _expected()


def _left_by_an_older_compactor(tmp_path, compressed: bool) -> tuple[str, str]:
    """A set compacted whole while another process compressed its original (or, with
    ``compressed``, one compacted from ``x.blog.gz`` and ``x.blog`` made again): the
    catalog says the compacted file replaces one form, the other is still there."""
    import gzip
    import shutil
    d = aged_set_dir(tmp_path, files=1)
    [orig] = _originals(d)
    if compressed:
        assert compress(d, orig) is not None
    [orig] = _originals(d)
    keep = str(tmp_path / "copy")
    shutil.copyfile(os.path.join(d, orig), keep)
    compact(d, 60 * 10**9, warn=lambda m: None)
    assert _originals(d) == []
    if compressed:
        twin = orig[:-3]
        with gzip.open(keep, "rb") as f, open(os.path.join(d, twin), "wb") as g:
            shutil.copyfileobj(f, g)
    else:
        twin = orig + ".gz"
        with open(keep, "rb") as f, gzip.open(os.path.join(d, twin), "wb") as g:
            shutil.copyfileobj(f, g)
    return d, twin


@pytest.mark.parametrize("compressed", [False, True])
def test_an_original_s_other_form_beside_its_compacted_file_is_read_once(tmp_path, compressed):
    # Proves: x.blog.gz beside the compacted file that replaces x.blog (what a compression
    # racing an older compactor left) is left out of every read, and the next compaction
    # removes it; the same for x.blog beside one replacing x.blog.gz (before: each event
    # of it was read twice, by bread.read and bread DIR).
    d, twin = _left_by_an_older_compactor(tmp_path, compressed)
    assert _originals(d) == [twin]
    assert _events(d) == _expected(files=1)
    assert _cli_lines(d) == 50
    assert len(list(bread.read(os.path.join(d, "app.*")))) == 50
    compact(d, 60 * 10**9, warn=lambda m: None)
    assert _originals(d) == []
    assert _events(d) == _expected(files=1)


def test_a_crash_buffer_is_never_recovered_into_a_file_being_compacted(tmp_path, monkeypatch):
    # Proves: a recovery during a compaction does not append into the dead writer's file
    # the compaction holds (it writes to a file of its own, read once), so no recovered
    # event is deleted with the original (before: the 100 recovered events went into the
    # original after it was copied, and were deleted with it).
    path = _killed_writer(tmp_path)
    [dead] = [str(tmp_path / n) for n in _originals(str(tmp_path))]
    t = os.path.getmtime(dead) - 3600
    os.utime(dead, (t, t))
    got: list[str] = []

    class Compactor(transaction.Compactor):
        def add_file(self, p):   # right after the original is copied, before it is deleted
            out = super().add_file(p)
            r = subprocess.run(python_child("-c", _RECOVER, path), capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            got.append(r.stdout)
            return out

    monkeypatch.setattr(transaction, "Compactor", Compactor)
    # A compaction planned before the writer was killed: the plan of one started now leaves
    # a file whose buffer waits for recovery (bread.compact.plan, waits_for_recovery).
    from bread.compact import plan
    monkeypatch.setattr(plan, "waits_for_recovery", lambda *a, **k: False)
    compact(str(tmp_path), 60 * 10**9, warn=lambda m: None)
    [events, where] = got[0].split()
    assert events == "100" and where != dead
    assert sorted(e.message for e in bread.read(str(tmp_path))) == sorted(
        [f"a {i}" for i in range(100)] + [f"b {i}" for i in range(100)])



def test_a_recovery_that_gets_the_lock_once_the_file_is_deleted_writes_elsewhere(
        tmp_path, monkeypatch):
    # Proves: a recovery that opened the dead writer's file and got its lock only once the
    # holder (a compaction, a compression) had deleted it appends to a file of its own, not
    # into the deleted one (before: the recovered events were lost with it).
    import blog
    from blog.files.crashbuf import buffer_directory
    from blogstore import recoverytarget
    from blogstore.recovery import recover
    path = _killed_writer(tmp_path)

    class DeletedMeanwhile(recoverytarget.LockedFile):
        def __init__(self, p: str, *args, **kwargs) -> None:
            super().__init__(p, *args, **kwargs)
            os.unlink(p)          # as the lock's holder did before it let go

    monkeypatch.setattr(recoverytarget, "LockedFile", DeletedMeanwhile)
    rf = blog.RotatingFile(path)
    try:
        [r] = recover(buffer_directory(path), rf)
    finally:
        rf.close()
    assert r.events == 100 and os.path.exists(r.path)
    assert [e.message for e in bread.read(str(tmp_path))] == [f"b {i}" for i in range(100)]

_KILLED = """
import os, signal, sys, blog
from blog.files.crashbuf import CrashBuffer, buffer_directory
s, out = blog.Session(name="killed"), blog.RotatingFile(sys.argv[1])
s.use_crash_buffer(CrashBuffer(buffer_directory(sys.argv[1]), out.path, s.descriptor))
log = s.get_logger("t")
[log.info("a {}", i) for i in range(100)]
s.consume(out)
[log.info("b {}", i) for i in range(100)]
os.kill(os.getpid(), signal.SIGKILL)     # the b events only in its crash buffer
"""


def _killed_writer(tmp_path) -> str:
    """A set ``tmp_path/app.blog`` whose writer was killed with events only in its crash
    buffer: the set's path."""
    path = str(tmp_path / "app.blog")
    r = subprocess.run(python_child("-c", _KILLED, path), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    return path


_RECOVER = """
import sys, blog
from blog.files.crashbuf import buffer_directory
from blogstore.recovery import recover
rf = blog.RotatingFile(sys.argv[1])
try:
    [r] = recover(buffer_directory(sys.argv[1]), rf)
finally:
    rf.close()
print(r.events, r.path)
"""


def test_more_originals_than_may_be_held_open_are_taken_in_turns(tmp_path, monkeypatch):
    # Proves: a compaction takes no more originals than it may hold locked (each is an open
    # file) and leaves the rest, said, for the next one (before this bound, a set of more
    # files than the descriptor limit would fail each one past it).
    from bread.compact import locks
    d = aged_set_dir(tmp_path, files=3)
    monkeypatch.setattr(locks, "_room", lambda: 2)
    warned: list[str] = []
    [plan] = compact(d, 60 * 10**9, warn=warned.append)
    assert len(plan["replaces"]) == 2 and len(_originals(d)) == 1
    assert any("hold open at once" in w and "next compaction" in w for w in warned)
    [plan] = compact(d, 60 * 10**9, warn=warned.append)
    assert len(plan["replaces"]) == 1 and _originals(d) == []
    assert _events(d) == _expected(files=3)


def test_retention_never_deletes_an_original_locked_after_it_was_listed(tmp_path, monkeypatch):
    # Proves: retention deletes a file only while it holds the file's lock itself. One that
    # a compaction (any process: bread compact from cron) locked between retention's
    # listing and its deletion stays: the compaction reads it, and deletes it when done.
    import blog
    import blog.files.housekeeping as hk
    d = aged_set_dir(tmp_path)
    oldest, second = sorted(n for n in os.listdir(d) if n.startswith("app."))[:2]
    held: list = []
    expired = hk.expired

    def then_locked(files, policy, now):
        doomed = expired(files, policy, now)
        if not held:                                   # a compaction takes it just now
            held.append(open(os.path.join(d, oldest), "rb"))
            fcntl.flock(held[0].fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return doomed
    monkeypatch.setattr(hk, "expired", then_locked)
    rf = blog.RotatingFile(os.path.join(d, "app.blog"), keep_files=1)
    rf.wait()
    rf.close()
    for f in held:
        f.close()
    left = sorted(n for n in os.listdir(d) if n.startswith("app."))
    assert oldest in left                       # locked when its turn came: kept
    assert second not in left                   # not locked: retention deleted it
