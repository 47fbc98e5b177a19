"""Durability: the fsync policy, durable flushes (sync and async) and their shared fsyncs.

fsync itself is replaced by a recorder (``os.fsync`` of the test process): what is proved
is when blog asks for stable storage and what it tells its callers, not what the disk does.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import blog
import bread
from blog.files.durability import GroupSync, fsync_policy

from helpers import in_threads, python_child


class Fsyncs:
    """os.fsync, recorded: the size of each log file synced (housekeeping's syncs of its
    manifest and directory are not counted); ``gate`` (when set) holds calls until opened;
    ``fail`` makes calls raise EIO. ``dirs`` records the writer's syncs of a directory:
    (its path, the log files it names then)."""

    def __init__(self, monkeypatch) -> None:
        self.real = os.fsync
        self.sizes: list[int] = []
        self.dirs: list[tuple[str, set[str]]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.fail = False
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.isdir(path):
            if threading.current_thread().name != "blog-housekeeping":
                self.dirs.append((path, {n for n in os.listdir(path) if ".blog" in n}))
            return self.real(fd)
        if ".blog" not in path:
            return self.real(fd)
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        self.sizes.append(os.fstat(fd).st_size)
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")


def consumer(tmp_path, fsync=False, fsync_interval=None, interval=60.0):
    s = blog.Session(name="durable")
    stream = blog.FileOutputStream(tmp_path / "x.blog", fsync=fsync)
    c = blog.Consumer(s, stream, interval=interval, fsync_interval=fsync_interval).start()
    return s, c


def test_fsync_policies_are_checked():
    assert fsync_policy(False) == fsync_policy("never") == ("never", None)
    assert fsync_policy(True) == fsync_policy("flush") == ("flush", None)
    assert fsync_policy("rotation") == ("rotation", None)
    assert fsync_policy(0.05) == ("rotation", 0.05)
    for bad in ("sometimes", 0, -1, float("nan"), float("inf"), None, [1]):
        with pytest.raises(ValueError, match="fsync"):
            fsync_policy(bad)
    with pytest.raises(ValueError, match="fsync"):
        blog.FileOutputStream(os.devnull, fsync=0.5)   # an interval is the consumer's
    with pytest.raises(ValueError, match="fsync_interval"):
        blog.Consumer(blog.Session(), blog.MemoryOutputStream(), fsync_interval=0)


@pytest.mark.parametrize("policy, at_flush, at_close", [
    (False, 0, 0), ("never", 0, 0), ("rotation", 0, 1), (True, 1, 1), ("flush", 1, 1)])
def test_each_policy_syncs_when_it_says(tmp_path, monkeypatch, policy, at_flush, at_close):
    # Proves: "never" never syncs, "rotation" only when the file closes, "flush" after
    # every consume that wrote (and at close), each after the bytes were written.
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path, fsync=policy)
    log = s.get_logger("d")
    for k in range(3):
        log.info("e {}", k)
        c.flush()
    assert len(fs.sizes) == 3 * at_flush
    c.stop()
    c.stream.close()
    size = os.path.getsize(tmp_path / "x.blog")
    assert len(fs.sizes) == 3 * at_flush + at_close
    if at_close:
        assert fs.sizes[-1] == size     # the last sync covers the whole file


def test_a_rotated_set_syncs_each_file_it_closes(tmp_path, monkeypatch):
    fs = Fsyncs(monkeypatch)
    s = blog.Session(name="rot")
    stream = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1, fsync="rotation")
    log = s.get_logger("d")
    for k in range(3):
        log.info("e {}", k)
        s.consume(stream)       # a file per consume (rotate_bytes=1)
    s.finish(stream)
    stream.close()
    assert stream.files == 3 and len(fs.sizes) == 3


def test_group_commit_syncs_at_most_every_interval_while_there_are_writes(tmp_path,
                                                                        monkeypatch):
    # Proves: with fsync_interval, the consumer syncs while the file grows, about once per
    # interval (never once per consume), and not at all while nothing is written.
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path, fsync_interval=0.2, interval=0.01)
    log = s.get_logger("d")
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < 1.0:
        log.info("e {}", n)
        n += 1
        time.sleep(0.001)
    busy = len(fs.sizes)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)                       # idle: nothing new to sync
    idle = len(fs.sizes) - busy
    c.stop()
    assert 2 <= busy <= elapsed / 0.2 + 2, busy    # about 5, and far fewer than consumes
    assert idle <= 1                                # at most the one for the last writes
    assert len(list(bread.read(str(tmp_path / "x.blog")))) == n


def test_flush_durable_syncs_after_writing_what_was_logged(tmp_path, monkeypatch):
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    for k in range(100):
        log.info("e {}", k)
    c.flush(durable=True)
    assert len(fs.sizes) == 1 and fs.sizes[0] == os.path.getsize(tmp_path / "x.blog")
    assert len(list(bread.read(str(tmp_path / "x.blog")))) == 100
    c.stop()


def test_a_durable_flush_makes_a_new_files_name_durable_once(tmp_path, monkeypatch):
    # Proves: whatever the policy ("never" here), the first flush(durable=True) into a file
    # just made also syncs its directory (the file's name: without it, the synced data
    # is not found after a power loss) before it returns; once per file: the durable
    # flushes after it, sync or async, sync the data alone.
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    log.info("e {}", 0)
    assert fs.dirs == []
    c.flush(durable=True)
    assert fs.dirs == [(str(tmp_path), {"x.blog"})] and len(fs.sizes) == 1
    for k in range(1, 4):
        log.info("e {}", k)
        c.flush(durable=True) if k % 2 else c.flush_async(durable=True).result(10)
    assert len(fs.dirs) == 1 and len(fs.sizes) == 4
    c.stop()
    assert [e.args[0] for e in bread.read(str(tmp_path / "x.blog"))] == [0, 1, 2, 3]


@pytest.mark.parametrize("policy, named", [("never", 0), ("rotation", 1), (True, 1)])
def test_a_file_made_with_fsync_on_has_its_name_synced_when_made(tmp_path, monkeypatch,
                                                                policy, named):
    # Proves: with fsync on ("rotation", True), a file's name is synced when the file is
    # made (the stream's start, and the file made again after an rm), once: never again
    # at a flush or at close; with "never", not at all (until a durable flush asks).
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path, fsync=policy)
    assert fs.dirs == [(str(tmp_path), {"x.blog"})] * named
    log = s.get_logger("d")
    for k in range(3):
        log.info("e {}", k)
        c.flush()
    assert len(fs.dirs) == named
    os.unlink(tmp_path / "x.blog")        # an rm: the next consume makes the file again
    log.info("e {}", 3)
    c.flush()
    assert c.stream.reopened == 1 and fs.dirs == [(str(tmp_path), {"x.blog"})] * (2 * named)
    c.stop()
    c.stream.close()
    assert len(fs.dirs) == 2 * named
    assert [e.args[0] for e in bread.read(str(tmp_path / "x.blog"))] == [3]


@pytest.mark.parametrize("policy", ["rotation", True])
def test_each_file_of_a_rotated_set_has_its_name_synced_when_made(tmp_path, monkeypatch,
                                                                  policy):
    # Proves: with fsync on, each file a rotation makes has its directory synced once it
    # bears its final name (never under its temporary NAME.new), before the consume that
    # made it returns; one directory sync per file, none at close.
    fs = Fsyncs(monkeypatch)
    s = blog.Session(name="rot")
    stream = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1, fsync=policy)
    log = s.get_logger("d")
    for k in range(3):
        log.info("e {}", k)
        s.consume(stream)                  # a file per consume (rotate_bytes=1)
        assert len(fs.dirs) == k + 1
        where, names = fs.dirs[-1]
        assert where == str(tmp_path) and os.path.basename(stream.current) in names
        assert not any(n.endswith(".new") for n in names)
    s.finish(stream)
    stream.close()
    assert stream.files == 3 and len(fs.dirs) == 3


def test_a_durable_flush_makes_the_names_of_a_rotated_set_durable(tmp_path, monkeypatch):
    # Proves: with fsync "never", files rotated out unsynced have their data and their
    # names synced by the next durable flush: one directory sync for all of them.
    fs = Fsyncs(monkeypatch)
    s = blog.Session(name="rot")
    stream = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1)
    c = blog.Consumer(s, stream, interval=60).start()
    log = s.get_logger("d")
    for k in range(3):
        log.info("e {}", k)
        c.flush()
    assert fs.dirs == [] and fs.sizes == []
    c.flush(durable=True)
    files = {os.path.basename(f) for f in _set_files(tmp_path)}
    assert len(files) == 3 and len(fs.sizes) == 3
    assert len(fs.dirs) == 1 and fs.dirs[0][1] >= files
    c.flush(durable=True)                  # nothing new: nothing to sync
    assert len(fs.dirs) == 1 and len(fs.sizes) == 3
    log.info("e {}", 3)                    # a fourth file (rotate_bytes=1): its name too
    c.flush(durable=True)                  # (and the third's Summary, written at its close)
    assert len(fs.dirs) == 2 and fs.sizes[-1] == os.path.getsize(_set_files(tmp_path)[-1])
    c.stop()
    stream.close()


def _set_files(directory):
    from blogstore.fileset import members
    return [os.path.join(directory, f.name) for f in members(str(directory), "app")]


def test_flush_async_never_blocks_and_concurrent_waiters_share_one_fsync(tmp_path,
                                                                        monkeypatch):
    # Proves: flush_async returns while an fsync is held (it never waits for one); 40
    # threads asking at once while one fsync runs are all answered by one more fsync;
    # each future completes only after an fsync that covers its events.
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    log.info("first {}", 0)
    fs.gate = threading.Event()
    first = c.flush_async(durable=True)      # its fsync will hold at the gate
    assert fs.entered.wait(10) and not first.done()
    futures = []

    def ask(k):
        log.info("e {}", k)
        futures.append(c.flush_async(durable=True))
    in_threads(ask, 40)                      # every flush_async returned: none waited
    assert len(futures) == 40 and not any(f.done() for f in futures)
    fs.gate.set()
    first.result(10)
    for f in futures:
        f.result(10)
    assert len(fs.sizes) == 2, fs.sizes      # the held one, then one for all 40
    assert fs.sizes[-1] == os.path.getsize(tmp_path / "x.blog")
    c.stop()
    assert len(list(bread.read(str(tmp_path / "x.blog")))) == 41


def test_flush_async_is_awaitable(tmp_path, monkeypatch):
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path)
    log = s.get_logger("d")

    async def main():
        log.info("from a coroutine {}", 1)
        await asyncio.wrap_future(c.flush_async(durable=True))
        return os.path.getsize(tmp_path / "x.blog")
    size = asyncio.run(main())
    assert fs.sizes == [size]
    assert [e.message for e in bread.read(str(tmp_path / "x.blog"))] == ["from a coroutine 1"]
    c.stop()


def test_a_failed_sync_is_told_to_durable_callers_only(tmp_path, monkeypatch, capsys):
    # Proves: an fsync that fails (EIO) makes flush(durable=True) raise OSError and a
    # durable future fail, and every later durable flush too (after a failed fsync the
    # data written before it may be gone, whatever later fsyncs say); non-durable flushes
    # still succeed; logging goes on and every event is written.
    fs = Fsyncs(monkeypatch)
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    log.info("e {}", 1)
    fs.fail = True
    with pytest.raises(OSError, match="could not be synced"):
        c.flush(durable=True)
    log.info("e {}", 2)
    with pytest.raises(OSError, match="could not be synced"):
        c.flush_async(durable=True).result(10)
    log.info("e {}", 3)
    c.flush()
    assert c.flush_async().result(10) is None
    fs.fail = False
    with pytest.raises(OSError, match="could not be synced"):
        c.flush(durable=True)                  # the device works again: still not trusted
    c.stop()
    assert [e.args[0] for e in bread.read(str(tmp_path / "x.blog"))] == [1, 2, 3]


class Broken:
    """A stream that refuses every write."""

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_flushes_fail_while_the_output_fails(monkeypatch, capsys):
    s = blog.Session(name="broken")
    c = blog.Consumer(s, Broken(), interval=60).start()
    s.get_logger("d").info("e {}", 1)
    with pytest.raises(OSError, match="output failed"):
        c.flush_async().result(10)
    s.get_logger("d").info("e {}", 2)
    with pytest.raises(OSError, match="output failed"):
        c.flush(durable=True)
    c.flush()                                 # a plain flush never raises
    c.stop()
    assert s.stats.events_lost == 2
    capsys.readouterr()


def _waiting(thread: threading.Thread) -> bool:
    """True once ``thread`` waits in a Condition (for the sync that runs to end)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code is threading.Condition.wait.__code__:
            return True
        frame = frame.f_back
    return False


def test_group_sync_never_hides_a_failure():
    # After a failed fsync a later one may succeed though the data is gone (Linux drops
    # the dirty pages): every caller from then on is told, including one that arrived
    # while the failing sync ran and then ran a sync of its own that succeeded.
    calls = []
    entered, go = threading.Event(), threading.Event()

    def sync():
        calls.append(1)
        if len(calls) == 1:
            entered.set()
            assert go.wait(10)
            raise OSError(errno.EIO, "EIO")
    g = GroupSync(sync)
    errors = []

    def call():
        try:
            g.sync()
        except OSError as exc:
            errors.append(exc)
    first = threading.Thread(target=call)
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=call)     # arrives while the failing sync runs
    second.start()
    deadline = time.monotonic() + 10
    while not _waiting(second):                # (not a sleep: it may come late under load)
        assert time.monotonic() < deadline, "the second caller never waited"
        time.sleep(0.001)
    go.set()
    first.join()
    second.join()
    assert len(errors) == 2 and len(calls) == 2 and g.failed
    with pytest.raises(OSError):
        g.sync()


def test_the_default_session_flushes_durably(tmp_path):
    code = textwrap.dedent("""
        import asyncio, os, blog
        import stat
        calls, dirs = [], []
        real = os.fsync
        def fsync(fd):
            st = os.fstat(fd)
            (dirs if stat.S_ISDIR(st.st_mode) else calls).append(st.st_size)
            real(fd)
        os.fsync = fsync
        blog.basic_config("x.blog", flush_interval=60, fsync="rotation")
        log = blog.get_logger("d")
        log.info("a {}", 1)
        blog.flush(durable=True)
        assert calls == [os.path.getsize("x.blog")], calls
        log.info("b {}", 2)
        async def main():
            await asyncio.wrap_future(blog.flush_async(durable=True))
        asyncio.run(main())
        assert len(calls) == 2 and calls[-1] == os.path.getsize("x.blog"), calls
        blog.shutdown()
        assert len(calls) == 3                   # "rotation": the file closed
        assert len(dirs) == 1                    # its name: once, when it was made
        assert blog.flush_async(durable=True).result() is None   # no output, nothing queued
        log.info("after {}", 3)
        try:
            blog.flush(durable=True)
        except OSError as e:
            print("refused:", e)
        assert isinstance(blog.flush_async(durable=True).exception(), OSError)
        try:
            blog.basic_config("y.blog", fsync="sometimes")
        except ValueError as e:
            print("refused:", e)
    """)
    r = subprocess.run(python_child("-c", code), cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "refused: blog: no output: 1 event(s) are queued" in r.stdout
    assert "refused: fsync must be" in r.stdout
    assert [e.message for e in bread.read(str(tmp_path / "x.blog"))] == ["a 1", "b 2"]


def test_flush_async_asked_while_stopping_is_answered(tmp_path):
    # Proves: futures asked for while stop() runs are answered by its last consume (or
    # told what was not written), never left pending; after stop they are answered at once.
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    futures = []
    asking, done = threading.Event(), threading.Event()

    def ask():
        while not done.is_set():
            log.info("e {}", 1)
            futures.append(c.flush_async())
            asking.set()
    t = threading.Thread(target=ask)
    t.start()
    assert asking.wait(10)       # stop() comes while it asks, however loaded the machine
    c.stop()
    done.set()
    t.join()
    for f in futures:
        f.exception(10)          # each one answered (a TimeoutError here would fail)
    assert all(f.done() for f in futures)
    late = c.flush_async()
    assert late.done()


def test_a_callback_that_raises_never_stops_the_consumer(tmp_path, capsys):
    s, c = consumer(tmp_path)
    log = s.get_logger("d")
    log.info("e {}", 1)
    f1 = c.flush_async()
    f1.add_done_callback(lambda f: sys.exit(3))
    f2 = c.flush_async()
    assert f1.result(10) is None and f2.result(10) is None
    log.info("e {}", 2)
    assert c.flush_async().result(10) is None and c.thread.is_alive()
    c.stop()
    assert "flush_async callback raised SystemExit" in capsys.readouterr().err
