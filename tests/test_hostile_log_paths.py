"""Hostile things at a log's path: a link, a FIFO or a directory put where the file was while
its writer runs (logrotate moved it, a cleanup removed it), or named as the log; for a plain
file, a rotated set's current file and the crash buffer's files (docs/security.md).
Each case runs in a child, so that a writer blocked for good fails the test at its timeout
instead of hanging the run."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

import bread

from helpers import python_child, run_python

#: Bound of a child that must not hang (it takes about a second; the machine may be loaded).
TIMEOUT = 60

VICTIM = b"precious: not a log\n"

#: A service logs, logrotate moves its file, something is put at the path while it logs,
#: then the path is freed and it logs once more.
SWAP = """
import os, blog
blog.basic_config("app.blog", flush_interval=0.005{options})
log = blog.get_logger()
log.info("before {{}}", 1)
blog.flush()
os.rename("app.blog", "app.blog.1")
{plant}
for i in range(3):
    log.info("during {{}}", i)
    blog.flush()
{free}
log.info("after {{}}", 1)
blog.flush()
st = blog.default_session().stats
print(st.events_lost, st.events_written, flush=True)
"""

PLANTS = {
    "link": ('os.symlink("victim", "app.blog")', 'os.unlink("app.blog")', "symbolic link"),
    "dangling link": ('os.symlink("made-by-blog", "app.blog")', 'os.unlink("app.blog")',
                      "symbolic link"),
    "fifo": ('os.mkfifo("app.blog")', 'os.unlink("app.blog")', "FIFO"),
    # A reader waits in the FIFO: its open would not block, its writes would reach it.
    "fifo with a reader": ('os.mkfifo("app.blog"); r = os.open("app.blog", os.O_RDONLY | '
                           'os.O_NONBLOCK)',
                           'got = b""\n'
                           'try:\n    got = os.read(r, 1 << 16)\n'
                           'except BlockingIOError:\n    pass\n'
                           'print("fifo got", len(got), flush=True)\n'
                           'os.unlink("app.blog")', "FIFO"),
    "directory": ('os.mkdir("app.blog")', 'os.rmdir("app.blog")', "directory"),
}


def run_child(code: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    """``code`` in a child in ``cwd``; a failure (not an exception) if it hangs."""
    try:
        if env is None:
            return run_python(code, cwd, timeout=TIMEOUT)
        return subprocess.run(python_child("-c", code), cwd=cwd, capture_output=True,
                              text=True, timeout=TIMEOUT, env={**os.environ, **env})
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung (blocked for good): {exc.stderr!r}")


def messages(path) -> tuple[list[str], int]:
    """The messages of the log at ``path`` and the events its Lost entries count."""
    r = bread.read(str(path))
    got = [e.message for e in r]
    assert r.damage == [] and r.unknown_sources == 0
    return got, sum(n.events for n in r.notices if hasattr(n, "events"))


@pytest.mark.parametrize("plant", list(PLANTS))
@pytest.mark.parametrize("crash_buffer", [False, True], ids=["", "crash_buffer"])
def test_what_is_put_at_a_plain_logs_path_is_never_written_nor_waited_on(
        tmp_path, plant, crash_buffer):
    # Proves: a link put at the path of a running writer's file (after logrotate moved the
    # file) is never followed by the writer's reopen, a FIFO there never blocks it (nor,
    # with a reader waiting in it, gets a byte), a directory there is refused: every log
    # call and flush returns, stderr says why once, and the events logged meanwhile are
    # counted lost and recorded (a Lost entry) in the file made once the path is free, or
    # with the crash buffer kept and written there. Before, the link's target got the
    # frames and the FIFO blocked the consumer, and with it every flush, for good.
    (tmp_path / "victim").write_bytes(VICTIM)
    make, free, why = PLANTS[plant]
    r = run_child(SWAP.format(options=", crash_buffer=True" if crash_buffer else "",
                              plant=make, free=free), tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "victim").read_bytes() == VICTIM
    assert not (tmp_path / "made-by-blog").exists()
    assert "fifo got 0" in r.stdout or "fifo got" not in r.stdout, r.stdout
    assert r.stderr.count(why) == 1, r.stderr
    assert messages(tmp_path / "app.blog.1") == (["before 1"], 0)
    if crash_buffer:
        assert r.stdout.split()[-2:] == ["0", "5"], r.stdout
        assert messages(tmp_path / "app.blog") == (
            ["during 0", "during 1", "during 2", "after 1"], 0)
    else:
        assert r.stdout.split()[-2:] == ["3", "2"], r.stdout
        assert messages(tmp_path / "app.blog") == (["after 1"], 3)


@pytest.mark.parametrize("kind", ["link", "fifo", "directory", "device"])
def test_a_log_path_that_is_no_regular_file_is_refused_at_configuration(tmp_path, kind):
    # Proves: basic_config refuses a path that names a link, a FIFO, a directory or a
    # device with one clear error (a ConfigurationError that is also an OSError), at
    # once, and nothing is configured: a FIFO never blocks the start (before, it waited
    # for a reader for ever) and a link's target is never written (before, it was).
    (tmp_path / "victim").write_bytes(VICTIM)
    path = {"link": "app.blog", "fifo": "app.blog", "directory": "app.blog",
            "device": os.devnull}[kind]
    if kind == "link":
        os.symlink("victim", tmp_path / "app.blog")
    elif kind == "fifo":
        os.mkfifo(tmp_path / "app.blog")
    elif kind == "directory":
        os.mkdir(tmp_path / "app.blog")
    r = run_child(f"""
import blog
from blog.errors import ConfigurationError
try:
    blog.basic_config({path!r})
except ConfigurationError as exc:
    print("refused", isinstance(exc, OSError), exc, flush=True)
print("output", blog.default_session().output, flush=True)
""", tmp_path)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.startswith("refused True ") and path in first, r.stdout
    assert {"link": "symbolic link", "fifo": "FIFO", "directory": "directory",
            "device": "device"}[kind] in first
    assert second == "output None"
    assert (tmp_path / "victim").read_bytes() == VICTIM


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_blog_file_naming_a_link_or_a_fifo_is_refused_naming_the_variable(tmp_path, kind):
    # Proves: BLOG_FILE naming a FIFO or a link is refused as any bad environment setting
    # is (a ConfigurationError naming the variable, before anything is configured):
    # before, a FIFO hung the start and a link's target was written.
    (tmp_path / "victim").write_bytes(VICTIM)
    if kind == "link":
        os.symlink("victim", tmp_path / "app.blog")
    else:
        os.mkfifo(tmp_path / "app.blog")
    r = run_child("""
import blog
blog.basic_config()
blog.get_logger().info("hello")
""", tmp_path, env={"BLOG_FILE": "app.blog"})
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("blog.errors.") and "BLOG_FILE='app.blog'" in last, r.stderr
    assert (tmp_path / "victim").read_bytes() == VICTIM


#: A rotated set: its current file is swapped for a link or a FIFO (its data moved out of
#: the set), then the set rotates past it, compresses and closes.
SET_SWAP = """
import glob, os, blog
blog.basic_config("logs/app.blog", rotate_bytes=4096, compress=True, keep_files=50,
                  flush_interval=0.005)
log = blog.get_logger()
log.info("event {{}}", 0)
blog.flush()
(current,) = glob.glob("logs/app.*.blog")
os.rename(current, "moved.blog")
{plant}
for i in range(1, 400):
    log.info("event {{}}", i)
    if i % 10 == 0:
        blog.flush()
blog.shutdown()
print(current, flush=True)
"""


@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_a_link_or_a_fifo_put_at_a_sets_current_file_is_never_followed_nor_waited_on(
        tmp_path, plant):
    # Proves: a rotated set never reopens a name, and its housekeeping (the manifest's
    # description, compression, retention) never follows a link put at a closed file's
    # name nor waits on a FIFO there: the victim is neither changed nor copied into the
    # log directory (before, compression gzipped the link's target into NAME.blog.gz and
    # removed the link), the process ends (before, a FIFO blocked housekeeping, and the
    # close at exit waited for it for good), and every event is in a file exactly once.
    (tmp_path / "victim").write_bytes(VICTIM)
    (tmp_path / "logs").mkdir()
    make = {"link": "os.symlink(os.path.abspath('victim'), current)",
            "fifo": "os.mkfifo(current)"}[plant]
    r = run_child(SET_SWAP.format(plant=make), tmp_path)
    assert r.returncode == 0, r.stderr
    current = tmp_path / r.stdout.split()[-1]
    assert (tmp_path / "victim").read_bytes() == VICTIM
    assert os.path.islink(current) if plant == "link" else os.path.exists(current)
    assert not os.path.exists(str(current) + ".gz")
    files = [tmp_path / "moved.blog"] + sorted(
        p for p in map(__import__("pathlib").Path, glob.glob(str(tmp_path / "logs/app.*")))
        if p != current)
    got = [m for p in files for m in messages(p)[0]]
    assert sorted(got, key=lambda m: int(m.split()[1])) == [f"event {i}" for i in range(400)]


def test_links_and_fifos_put_at_the_crash_buffers_files_are_never_followed(tmp_path):
    # Proves: the crash buffer's files, swapped for a link to a victim or a FIFO while the
    # process runs, are never followed nor waited on: a new thread's channel file is made
    # anew (O_EXCL) beside them, the clean exit removes the links, never their targets,
    # and every event is in the log.
    (tmp_path / "victim").write_bytes(VICTIM)
    r = run_child("""
import glob, os, threading, blog
blog.basic_config("app.blog", crash_buffer=True, flush_interval=0.005)
log = blog.get_logger()
log.info("main {}", 0)
blog.flush()
victim = os.path.abspath("victim")
for i, name in enumerate(sorted(glob.glob(".app.blog.buffers/*"))):
    os.unlink(name)
    if i % 2:
        os.mkfifo(name)
    else:
        os.symlink(victim, name)
t = threading.Thread(target=lambda: log.info("thread {}", 1))
t.start(); t.join()
log.info("main {}", 2)
blog.flush()
blog.shutdown()
print(sorted(os.listdir(".app.blog.buffers")) if os.path.exists(".app.blog.buffers") else [],
      flush=True)
""", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "victim").read_bytes() == VICTIM
    assert sorted(messages(tmp_path / "app.blog")[0]) == ["main 0", "main 2", "thread 1"]


def test_a_fifo_put_at_a_closed_set_files_name_never_blocks_a_durable_flush(tmp_path):
    # Proves: a durable flush, which fsyncs the files a set closed unsynced (fsync off),
    # opens each without following a link or waiting: a FIFO put at a closed file's name
    # (the file moved away) is passed over, and the flush returns. Before, it blocked in
    # the FIFO's open for good.
    (tmp_path / "logs").mkdir()
    r = run_child("""
import glob, os, blog
blog.basic_config("logs/app.blog", rotate_bytes=4096, flush_interval=60)
log = blog.get_logger()
log.info("event {}", 0)
blog.flush()
(first,) = glob.glob("logs/app.*.blog")
while glob.glob("logs/app.*.blog") == [first]:
    log.info("event {}", 1)
    blog.flush()                       # until the set closes the first file
os.rename(first, "moved.blog")
os.mkfifo(first)
blog.flush(durable=True)
print("flushed", flush=True)
""", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["flushed"]
