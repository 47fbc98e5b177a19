"""Shipping closed files (``on_close``): each final file once, kept until shipped, again
after a failure, never twice across processes that share the set."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest

import blog
import bread
from blog.errors import ConfigurationError
from blogstore import journal, manifest
from blogstore.fileset import file_name, members

from helpers import flushed_one_by_one, python_child, run_python


def test_each_closed_file_is_shipped_once_compressed_and_holds_every_event(tmp_path):
    # Proves: the hook gets every file of the set once, once it is final (.gz), on the
    # housekeeping thread; what was shipped holds every event; the manifest says shipped.
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    shipped: list[str] = []

    def upload(path: str) -> None:
        shipped.append(path)
        shutil.copy(path, bucket)

    rf = blog.RotatingFile(tmp_path / "logs" / "app.blog", rotate_bytes=1, compress=True,
                           on_close=upload)
    flushed_one_by_one(rf, 5)
    names = [os.path.basename(p) for p in shipped]
    assert len(names) == 5 == len(set(names))
    assert all(n.endswith(".blog.gz") for n in names)
    assert sorted(names) == sorted(f.name for f in members(str(tmp_path / "logs"), "app"))
    assert sorted(ev.message for ev in bread.read(str(bucket), sort=True)) == [
        f"e {i}" for i in range(5)]
    files = manifest.load(str(tmp_path / "logs"))["files"]
    assert {n: e.get("shipped") for n, e in files.items()} == {n: True for n in names}


def test_a_failing_hook_is_reported_the_file_kept_and_shipped_at_the_next_rotation(
        tmp_path, capsys):
    # Proves: a hook that raises costs nothing but its file's delay: it is said on
    # stderr, retention (one file kept) does not delete the file meanwhile, and the next
    # rotation calls the hook again for it; logging went on throughout.
    calls: list[str] = []

    def flaky(path: str) -> None:
        calls.append(os.path.basename(path))
        if len(calls) == 1:
            raise ConnectionError("bucket unreachable")

    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1, keep_files=1,
                           on_close=flaky)
    flushed_one_by_one(rf, 3)
    first = calls[0]
    assert calls.count(first) == 2                    # failed, then shipped again
    assert len(set(calls)) == 3                       # and every other file once
    err = capsys.readouterr().err
    assert "on_close(" in err and "bucket unreachable" in err
    left = [f.name for f in members(str(tmp_path), "app")]
    assert first not in left and len(left) == 1       # deleted only once shipped


def test_a_restart_ships_what_the_last_run_did_not_and_nothing_twice(tmp_path):
    # Proves: the manifest remembers what was shipped: a second run of the service
    # (another process) ships only the files it has not seen shipped.
    script = """
        import os
        import blog
        out = "shipped.txt"
        def record(path):
            with open(out, "a") as f:
                f.write(os.path.basename(path) + "\\n")
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=record)
        log = blog.get_logger()
        for i in range(3):
            log.info("e {}", i)
            blog.flush()
    """
    for _ in range(2):
        r = run_python(script, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    shipped = (tmp_path / "shipped.txt").read_text().split()
    assert len(shipped) == len(set(shipped)) == len(members(str(tmp_path / "logs"), "app"))


def test_on_close_needs_a_rotated_set_and_a_function(tmp_path):
    with pytest.raises(ConfigurationError, match="rotated set"):
        blog.basic_config(tmp_path / "app.blog", on_close=print)
    with pytest.raises(ConfigurationError, match="on_close must be a function"):
        blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=10, on_close="s3://bucket")


def test_a_hook_that_hangs_never_keeps_the_process_from_ending(tmp_path):
    # Proves (a review's finding): a stuck upload delays the end of the process by
    # AT_CLOSE seconds at most, says so, and the file is shipped at the next start.
    r = run_python("""
        import time
        import blog
        import blog.files.shipping as shipping
        shipping.AT_CLOSE = 0.5
        def stuck(path):
            time.sleep(3600)
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=stuck)
        log = blog.get_logger()
        log.info("e {}", 1)
        blog.flush()
    """, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "was still running 0.5 s after the set was closed" in r.stderr
    first = [f.name for f in members(str(tmp_path / "logs"), "app")]
    assert first
    r = run_python("""
        import os
        import blog
        def record(path):
            with open("shipped.txt", "a") as f:
                f.write(os.path.basename(path) + "\\n")
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=record)
        blog.shutdown()
    """, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(first) <= set((tmp_path / "shipped.txt").read_text().split())


@pytest.mark.parametrize("claim", [-1, 0, 2**40, "42", [1]])
def test_a_planted_claim_in_the_manifest_never_stops_shipping(tmp_path, claim):
    # Proves: "shipping" in a manifest entry is input: a value that is no live process's
    # pid (a negative one, which kill() takes for every process, a huge one, not an int)
    # is taken for no claim, and the file is shipped.
    shipped: list[str] = []
    d = tmp_path / "logs"
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1)
    flushed_one_by_one(rf, 2)

    def plant(m: dict) -> None:
        for e in m["files"].values():
            e["shipping"] = claim
    manifest.update(str(d), plant, lambda path: True)
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1, on_close=shipped.append)
    flushed_one_by_one(rf, 1)
    assert len(shipped) == 3


def _backlog(directory, n: int) -> list[str]:
    """``n`` compressed closed files of ``app`` in ``directory`` (copies of one, under names
    of one dead process), all in the manifest, none shipped: a backlog after an outage."""
    one = directory / "one"
    rf = blog.RotatingFile(one / "app.blog", rotate_bytes=1 << 30, compress=True)
    flushed_one_by_one(rf, 1)
    (src,) = [f.name for f in members(str(one), "app")]
    t0 = 1_764_151_200_000_000_000
    names = [file_name("app", t0 + i * 1_000_000_000, 4242) + ".gz" for i in range(n)]
    for name in names:
        shutil.copy(one / src, directory / name)
    shutil.rmtree(one)
    manifest.update(str(directory), lambda m: None, lambda path: True)
    return names


def _count_rewrites(monkeypatch, limit: int, over: threading.Event) -> list[int]:
    """Counts the manifest's rewrites (in a one-item list); the one after ``limit`` raises
    and sets ``over`` (a quadratic shipper fails at once rather than after minutes)."""
    count = [0]
    write = manifest.write

    def counted(directory: str, m: dict) -> None:
        count[0] += 1
        if count[0] > limit:
            over.set()
            raise AssertionError(f"the manifest rewritten {count[0]} times")
        write(directory, m)

    monkeypatch.setattr(manifest, "write", counted)
    return count


@pytest.mark.slow
def test_a_backlog_ships_its_first_file_at_once_and_all_without_a_rewrite_per_file(
        tmp_path, monkeypatch):
    # Proves (issue 37): a set started over 2,000 pending files calls the hook for the
    # first after a bounded number of rewrites of the manifest (it was claimed alone,
    # not after every file was claimed by a rewrite each), and ships them all with a
    # bounded number in all (the marks are a journal's lines), each file once.
    d = tmp_path / "logs"
    names = _backlog(d, 2000)
    done = threading.Event()
    rewrites = _count_rewrites(monkeypatch, 20, done)
    calls: list[str] = []
    at_first: list[int] = []

    def hook(path: str) -> None:
        if not calls:
            at_first.append(rewrites[0])
        calls.append(os.path.basename(path))
        if len(calls) == len(names):
            done.set()

    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1 << 30, compress=True, on_close=hook)
    try:
        assert done.wait(120) and rewrites[0] <= 20, f"{len(calls)} files shipped"
    finally:
        rf.close()
    assert at_first and at_first[0] <= 2            # the start's own pass, no more
    assert sorted(calls) == sorted(names)           # each once
    assert rewrites[0] <= 10
    files = manifest.load(str(d))["files"]
    assert all(files[n].get("shipped") is True for n in names)


SHIPPER = """
    import os, time
    import blog
    def upload(path):
        with open("calls.txt", "a") as f:
            f.write(os.path.basename(path) + "\\n")
        print("shipped", flush=True)
    blog.RotatingFile("logs/app.blog", rotate_bytes=1 << 30, compress=True, on_close=upload)
    time.sleep(3600)
"""


def test_a_shipper_killed_mid_backlog_is_taken_over_and_nothing_recorded_is_shipped_again(
        tmp_path, monkeypatch):
    # Proves (issue 37): a shipper killed by SIGKILL after it shipped k files of a backlog
    # leaves claims a restart takes over at once: the restart ships its first file after
    # a bounded number of rewrites (not after claiming the rest again), ships every file
    # not recorded shipped, and none that was; the killed one shipped at most one file
    # whose return it did not record (the one it was on).
    d = tmp_path / "logs"
    names = _backlog(d, 200)
    child = subprocess.Popen(python_child("-c", textwrap.dedent(SHIPPER)), cwd=tmp_path,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        for _ in range(20):          # it has shipped 20 files (or more, by now)
            assert child.stdout.readline() == "shipped\n"
    finally:
        child.kill()
        child.wait(60)
    first = (tmp_path / "calls.txt").read_text().split()
    recorded = {n for n, e in manifest.load(str(d))["files"].items() if e.get("shipped")}
    assert 20 <= len(first) < len(names)
    assert recorded <= set(first) and len(set(first) - recorded) <= 1

    done = threading.Event()
    rewrites = _count_rewrites(monkeypatch, 20, done)
    calls: list[str] = []
    at_first: list[int] = []

    def hook(path: str) -> None:
        if not calls:
            at_first.append(rewrites[0])
        calls.append(os.path.basename(path))
        if len(calls) == len(names) - len(recorded):
            done.set()

    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1 << 30, compress=True, on_close=hook)
    try:
        assert done.wait(60) and rewrites[0] <= 20, f"{len(calls)} files shipped"
    finally:
        rf.close()
    assert at_first and at_first[0] <= 2
    assert sorted(calls) == sorted(set(names) - recorded)     # the rest, each once
    assert all(e.get("shipped") is True for e in manifest.load(str(d))["files"].values())


MARKED = Path(__file__).parent / "data" / "manifest"
A, B, C, D = (f"app.2026-11-26T10-0{i}-00.{ms}.pid42.blog.gz"
              for i, ms in ((0, "123"), (1, "000"), (2, "000"), (3, "000")))


def test_a_manifest_with_its_journal_reads_as_the_spec_says(tmp_path):
    # Proves (docs/format.md section 14): tests/data/manifest holds a manifest written by
    # the blog before the journal (its bytes unchanged since: shipping marks in its
    # entries) and a journal written by hand to the spec, with damage of every kind (a
    # torn last line, not JSON, wrong types, a pid that is none, names of no entry).
    # load() applies the whole records in order and passes over the rest; a rewrite folds
    # them in and deletes the journal; an append after the torn line stays apart from it.
    def marks(files: dict) -> dict:
        return {n: {k: e[k] for k in ("shipped", "shipping") if k in e}
                for n, e in files.items() if n.endswith(".gz")}

    d = tmp_path / "logs"
    shutil.copytree(MARKED, d)
    old = manifest.checked(manifest.read_json(str(d / manifest.NAME)))
    assert marks(old["files"]) == {A: {"shipped": True}, B: {"shipping": 42}, C: {}, D: {}}
    want = {A: {"shipped": True}, B: {"shipping": 78}, C: {"shipped": True}, D: {}}
    assert marks(manifest.load(str(d))["files"]) == want

    journal.append(str(d), {"shipped": D}, durable=True)
    want[D] = {"shipped": True}
    assert marks(manifest.load(str(d))["files"]) == want
    for name in want:                    # (a rewrite keeps the entries of files there)
        (d / name).write_bytes(b"")
    assert marks(manifest.update(str(d), lambda m: None, lambda path: True)["files"]) == want
    assert not (d / journal.NAME).exists()
    assert marks(manifest.load(str(d))["files"]) == want


@pytest.mark.parametrize("planted", ["link", "fifo", "no header"])
def test_a_journal_planted_at_its_name_is_never_followed_nor_read(tmp_path, planted):
    # Proves: the journal's name is input like the manifest's: a link there is replaced,
    # never written through; a FIFO never blocks a reader or the shipper; records under
    # no header are never applied (a shipped mark planted there ships the file anyway).
    d = tmp_path / "logs"
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1)
    flushed_one_by_one(rf, 2)
    names = list(manifest.load(str(d))["files"])
    target = tmp_path / "outside"
    target.write_text("")
    j = d / journal.NAME
    if planted == "link":
        j.symlink_to(target)
    elif planted == "fifo":
        os.mkfifo(j)
    else:
        j.write_text("".join(json.dumps({"shipped": n}) + "\n" for n in names))
    assert not any(e.get("shipped") for e in manifest.load(str(d))["files"].values())
    shipped: list[str] = []
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1, on_close=shipped.append)
    flushed_one_by_one(rf, 1)
    assert len(shipped) == 3 and target.read_text() == ""
    assert not j.is_symlink()


TWIN = """
    import os, sys, time
    import blog
    from blogstore import manifest
    def upload(path):
        with open(sys.argv[1], "a") as f:
            f.write(os.path.basename(path) + "\\n")
    rf = blog.RotatingFile("logs/app.blog", rotate_bytes=1 << 30, compress=True,
                           on_close=upload)
    print("started", flush=True)
    while not all(e.get("shipped") for e in manifest.load("logs")["files"].values()):
        time.sleep(0.05)
    rf.close()
"""


def test_two_processes_shipping_one_backlog_ship_each_file_once(tmp_path):
    # Proves: the journal's marks exclude each other across live processes as the
    # manifest's rewrites did: two processes started together over one backlog (a restart
    # beside a worker) ship every file, none twice.
    d = tmp_path / "logs"
    names = _backlog(d, 100)
    twins = [subprocess.Popen(python_child("-c", textwrap.dedent(TWIN), f"calls{i}.txt"),
                              cwd=tmp_path, stdout=subprocess.PIPE, text=True)
             for i in range(2)]
    for t in twins:
        t.communicate(timeout=120)
        assert t.returncode == 0
    calls = [(tmp_path / f"calls{i}.txt").read_text().split() if
             (tmp_path / f"calls{i}.txt").exists() else [] for i in range(2)]
    assert sorted(calls[0] + calls[1]) == sorted(names)


def test_a_manifest_rewritten_during_every_hook_loses_no_mark(tmp_path):
    # Proves: the shipper reads the whole manifest again once another writer rewrote it
    # (here, during every hook: another process's housekeeping, say, folding the journal
    # each time) and goes on from there: each file shipped once, every mark kept.
    d = tmp_path / "logs"
    names = _backlog(d, 30)
    calls: list[str] = []

    def hook(path: str) -> None:
        calls.append(os.path.basename(path))
        manifest.update(str(d), lambda m: None, lambda path: True)

    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1 << 30, compress=True, on_close=hook)
    rf.wait()
    rf.close()
    assert sorted(calls) == sorted(names)
    files = manifest.load(str(d))["files"]
    assert all(files[n].get("shipped") is True for n in names)


def test_marks_fold_the_journal_into_the_manifest_once_it_outgrows_it(tmp_path, monkeypatch):
    # Proves: the journal is folded into the manifest (one rewrite) once it is larger than
    # the manifest, and read on from its new start (each claim sees the release before it):
    # the manifest alone then holds the marks folded, the manifest with its journal every
    # mark.
    monkeypatch.setattr(manifest.Marks, "FOLD_BYTES", 0)
    d = tmp_path / "logs"
    names = _backlog(d, 30)
    rewrites = _count_rewrites(monkeypatch, 100, threading.Event())
    marks = manifest.Marks(str(d), lambda path: True)
    for n in names:                      # (tried and failed twice: a journal the larger)
        for last in ({"release": n}, {"release": n}, {"shipped": n}):
            with marks.locked() as files:
                assert files[n].get("shipped") is None and files[n].get("shipping") is None
                marks.append({"claim": n, "pid": os.getpid()}, durable=False)
            with marks.locked():
                marks.append(last, durable=True)
    assert rewrites[0] >= 1
    alone = manifest.checked(manifest.read_json(str(d / manifest.NAME)))["files"]
    assert 0 < sum(alone[n].get("shipped") is True for n in names) < len(names)
    assert all(e.get("shipped") is True for e in manifest.load(str(d))["files"].values())


@pytest.mark.parametrize("end", ["SIGTERM", "SIGKILL"])
def test_the_next_start_ships_a_file_whose_dead_writer_left_nothing_to_recover(tmp_path, end):
    # Proves (found by tests/lifecycle_soak.py): a writer stopped by SIGTERM (flushed, then
    # ended by the signal: its crash buffer stays, empty) or killed with nothing pending
    # leaves its file to the next start, which compresses and ships it once its buffer is
    # gone. Before, a recovery that appended nothing queued no second pass: the file
    # stayed uncompressed and unshipped until yet another start.
    script = """
        import os, signal, sys
        import blog
        def record(path):
            with open("shipped.txt", "a") as f:
                f.write(os.path.basename(path) + "\\n")
        blog.basic_config("logs/app.blog", rotate_bytes=1 << 20, compress=True,
                          crash_buffer=True, on_close=record)
        if sys.argv[1:] != ["again"]:
            for i in range(10):
                blog.get_logger().info("e {}", i)
            blog.flush()
            os.kill(os.getpid(), signal.%s)
    """ % end
    r = subprocess.run(python_child("-c", textwrap.dedent(script)), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == -getattr(signal, end), r.stderr
    [first] = [f.name for f in members(str(tmp_path / "logs"), "app")]
    r = subprocess.run(python_child("-c", textwrap.dedent(script), "again"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    shipped = (tmp_path / "shipped.txt").read_text().split()
    assert first + ".gz" in shipped
    assert [f.name for f in members(str(tmp_path / "logs"), "app")
            if not f.compressed] == []
    assert [e.message for e in bread.read(str(tmp_path / "logs" / (first + ".gz")))] == [
        f"e {i}" for i in range(10)]
