"""The crash buffer: kill -9 loses no event whose log call returned (blog/files/crashbuf.py,
blogstore/recovery.py, docs/format.md 15).

The kill tests fork the test process (blog already imported: a trial costs the time it logs,
not an interpreter's start), log from 4 threads into a file with a crash buffer, and record
in shared memory, after each log call returns, how many calls of each thread have returned.
SIGKILL comes at a random moment; recovery then appends what the buffer kept, and the file
must hold every returned event of each thread exactly once, in order, and nothing else.
"""

from __future__ import annotations

import glob
import gzip
import mmap
import os
import random
import signal
import struct
import subprocess
import textwrap
import threading
import time

import pytest

import blog
import bread
from blog.files.crashbuf import CTL, buffer_directory
from blogstore.recovery import recover

from helpers import (abandon, fresh_signals, python_child, run_cli, run_python, seeded_random,
                     with_crash_buffer)

TRIALS = int(os.environ.get("CRASH_TRIALS", 50))   # per run: the suite runs on both paths
THREADS = 4


def _child(path: str, counters: mmap.mmap, capacity: int, rotating: bool) -> None:
    """In the forked child: log as fast as possible from THREADS threads until killed
    (into a rotated set whose closed files are compressed, with ``rotating``)."""
    try:
        fresh_signals()
        s = blog.Session(name="crash", channel_capacity=capacity)
        stream = (blog.RotatingFile(path, rotate_bytes=256 << 10, compress=True) if rotating
                  else blog.FileOutputStream(path))
        with_crash_buffer(s, path, stream)
        blog.Consumer(s, stream, interval=0.005, flush_bytes=capacity // 2).start()
        log = s.get_logger("t")

        words = memoryview(counters).cast("q")   # one store each (pack_into zeroes first)

        def work(k: int) -> None:
            i = 0
            while True:
                log.info("w {} {}", k, i)
                i += 1
                words[k] = i                       # calls returned so far
        for k in range(THREADS):
            threading.Thread(target=work, args=(k,), daemon=True).start()
        words[THREADS] = 1                         # started
        while True:
            time.sleep(1)
    finally:
        os._exit(1)


def _run_and_kill(path: str, capacity: int, rng: random.Random,
                  rotating: bool = False) -> tuple[list[int], dict]:
    counters = mmap.mmap(-1, 8 * (THREADS + 1))
    pid = os.fork()
    if pid == 0:
        _child(path, counters, capacity, rotating)
    try:
        deadline = time.monotonic() + 30
        while struct.unpack_from("<q", counters, 8 * THREADS)[0] == 0:
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.001)
        time.sleep(rng.uniform(0.02, 0.25))
        ctl = _control(path)           # read just before the kill: a consume in progress?
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    returned = [struct.unpack_from("<q", counters, 8 * k)[0] for k in range(THREADS)]
    return returned, ctl


def _control(path: str) -> dict:
    metas = glob.glob(os.path.join(buffer_directory(path), "*.meta"))
    if not metas:
        return {}
    with open(metas[0], "rb") as f:
        head = f.read(CTL.size)
    if len(head) < CTL.size:
        return {}
    _, _, _, written, writing, *_ = CTL.unpack(head)
    return {"consuming": writing > written}


def _set_files(path: str) -> list[str]:
    """The files of the rotated set ``path`` names, in time order."""
    stem = os.path.basename(path)[:-len(".blog")]
    return sorted(p for p in glob.glob(os.path.join(os.path.dirname(path), f"{stem}.*.pid*.blog*"))
                  if p.endswith((".blog", ".blog.gz")))   # as bread reads a set: no .tmp


def _check(path: str, returned: list[int], rotating: bool = False) -> tuple[int, int]:
    """Every returned event once, in order per thread, nothing else; (events, recovered)."""
    r = bread.read(_set_files(path) if rotating else path)
    seen: dict[int, list[int]] = {k: [] for k in range(THREADS)}
    for ev in r:
        assert ev.category == "t" and ev.format == "w {} {}", ev
        k, i = ev.args
        seen[k].append(i)
    assert r.damage == [], r.damage
    for k in range(THREADS):
        got = seen[k]
        assert got == list(range(len(got))), f"thread {k}: a gap, a repeat or disorder"
        # Every call that returned is there; at most the one in progress beyond it.
        assert returned[k] <= len(got) <= returned[k] + 1, (k, returned[k], len(got))
    recovered = sum(n.events for n in r.notices if type(n).__name__ == "Recovered")
    return sum(map(len, seen.values())), recovered


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing_a_log_call_returned_from(tmp_path):
    # Proves the promise of the crash buffer: TRIALS kills of a process logging from 4
    # threads as fast as it can (small channels: many consumes, some killed in the middle
    # of one), each followed by recovery; and recovery itself killed at random moments and
    # redone. Each trial checks every returned event is read back exactly once, in order
    # per thread, and nothing is invented; the distribution is printed (-s).
    rng = seeded_random("CRASH_SEED")   # printed: replay a failure with CRASH_SEED=<seed>
    stats = {"trials": 0, "during_consume": 0, "recovery_killed": 0, "recovered": []}
    for t in range(TRIALS):
        path = str(tmp_path / f"t{t}.blog")
        returned, ctl = _run_and_kill(path, rng.choice([64 << 10, 256 << 10, 1 << 20]), rng)
        stats["during_consume"] += bool(ctl.get("consuming"))
        if t % 5 == 4:   # kill the recovery too, then recover again
            stats["recovery_killed"] += _kill_a_recovery(path, rng)
        stream = blog.FileOutputStream(path)
        try:
            recover(buffer_directory(path), stream)
        finally:
            stream.close()
        assert not glob.glob(os.path.join(buffer_directory(path), "*")), "buffer left"
        total, recovered = _check(path, returned)
        stats["trials"] += 1
        stats["recovered"].append(recovered)
        os.unlink(path)
    rec = sorted(stats["recovered"])
    print(f"\ncrash buffer: {stats['trials']} kills, {stats['during_consume']} during a "
          f"consume, {stats['recovery_killed']} recoveries killed; events recovered per kill: "
          f"min {rec[0]}, median {rec[len(rec) // 2]}, max {rec[-1]}; lost: 0")
    assert stats["during_consume"] > 0 or TRIALS < 20


@pytest.mark.slow
def test_kill_9_of_a_rotated_set_writer_loses_nothing(tmp_path):
    # Proves the same for a rotated file set whose closed files are compressed (small
    # files: many switches and compressions around the kill): recovery appends to the file
    # the dead process was writing (cutting a write the kill tore), housekeeping leaves
    # that file alone until then, and reading the set gives every returned event once, in
    # order per thread. Some recoveries are killed too, and redone.
    rng = seeded_random("CRASH_SEED")   # printed: replay a failure with CRASH_SEED=<seed>
    recovered_total = 0
    for t in range(max(1, TRIALS * 2 // 5)):
        d = tmp_path / f"t{t}"
        d.mkdir()
        path = str(d / "app.blog")
        returned, _ = _run_and_kill(path, rng.choice([64 << 10, 256 << 10]), rng, rotating=True)
        if t % 4 == 3:
            _kill_a_recovery(path, rng, rotating=True)
        rf = blog.RotatingFile(path, compress=True)   # its housekeeping runs meanwhile
        try:
            if recover(buffer_directory(path), rf):
                rf.housekeeper.sweep()    # as basic_config does: what waited for it goes on
        finally:
            rf.close()
        assert not glob.glob(os.path.join(buffer_directory(path), "*")), "buffer left"
        _, recovered = _check(path, returned, rotating=True)
        recovered_total += recovered
    assert recovered_total > 0


def _kill_a_recovery(path: str, rng: random.Random, rotating: bool = False) -> int:
    """Start a recovery in another process and SIGKILL it at a random moment; 1 if it was
    killed before it finished."""
    code = textwrap.dedent(f"""
        import blog
        from blog.files.crashbuf import buffer_directory
        from blogstore.recovery import recover
        s = blog.{"RotatingFile" if rotating else "FileOutputStream"}({path!r})
        print("go", flush=True)
        recover(buffer_directory({path!r}), s)
        print("done", flush=True)
    """)
    p = subprocess.Popen(python_child("-c", code), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "go"
    time.sleep(rng.uniform(0, 0.05))
    p.kill()
    out = p.communicate()[0]
    return int("done" not in out)


def test_a_clean_shutdown_leaves_no_buffer_and_nothing_to_recover(tmp_path):
    path = str(tmp_path / "x.blog")
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        log = blog.get_logger()
        for i in range(1000):
            log.info("e {{}}", i)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [e.args[0] for e in bread.read(path)] == list(range(1000))
    assert not os.path.exists(buffer_directory(path))     # files and directory gone


def test_the_next_start_recovers_and_says_so(tmp_path):
    # Proves: basic_config(crash_buffer=True) of the same file recovers what a killed
    # process left (and reports it); the file then holds the old events, the recovered
    # ones, marked (a Recovered entry, which bread reports), then the new process's.
    path = str(tmp_path / "app.blog")
    code = textwrap.dedent(f"""
        import os, signal, blog
        blog.basic_config({path!r}, crash_buffer=True, flush_interval=60)
        log = blog.get_logger()
        for i in range(5000):
            log.info("e {{}}", i)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run(python_child("-c", code), capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL
    assert list(bread.read(path)) == []          # nothing was consumed: all in the buffer
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        blog.get_logger().info("new {{}}", 1)
    """, timeout=60)
    assert r.returncode == 0 and "recovered 5000 event(s)" in r.stderr, r.stderr
    rd = bread.read(path)
    assert [e.message for e in rd] == [f"e {i}" for i in range(5000)] + ["new 1"]
    assert [(n.events) for n in rd.notices] == [5000]
    r = subprocess.run(python_child("-m", "bread", path), capture_output=True, text=True)
    assert "5000 event(s) recovered from the crash buffer of process" in r.stderr


def test_bread_recover_appends_once_and_refuses_a_live_file(tmp_path):
    # Proves: while a live writer (no buffer of its own) holds the file a dead writer's
    # events are for, bread --recover refuses (exit 2, the buffer kept); once it lets go,
    # the events are appended once, and a second run finds nothing to recover.
    path = str(tmp_path / "app.blog")
    code = textwrap.dedent(f"""
        import os, signal, threading, blog
        blog.basic_config({path!r}, crash_buffer=True, flush_interval=60)
        log = blog.get_logger()
        def work():
            for i in range(300):
                log.info("t {{}}", i)
        t = threading.Thread(target=work); t.start(); t.join()
        for i in range(300):
            log.info("m {{}}", i)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run(python_child("-c", code), capture_output=True, timeout=60)
    live = blog.FileOutputStream(path)           # a live writer holds it
    try:
        r = subprocess.run(python_child("-m", "bread", "--recover", path),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "live process" in r.stderr
    finally:
        live.close()
    for k in range(2):
        r = subprocess.run(python_child("-m", "bread", "--recover", path),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert ("recovered 600 event(s)" if k == 0 else "no abandoned") in r.stdout
    msgs = [e.message for e in bread.read(path)]
    assert sorted(msgs) == sorted([f"t {i}" for i in range(300)] + [f"m {i}" for i in range(300)])


@pytest.mark.parametrize("shape", ["file", "set", "never written"])
def test_bread_recover_after_a_clean_exit_has_nothing_to_recover_and_exits_0(tmp_path, shape):
    # Proves (issue 37): `bread --recover LOG` run before every start (cron, systemd
    # ExecStartPre) after a clean shutdown says there is nothing to recover and exits 0,
    # whatever LOG is: a plain file, a rotated set's base name (no such file: its files
    # are logs/app.<time>.pid<N>.blog), a log never written in a directory that is there.
    # Before: a set's base name and a log never written were "cannot open", exit 2.
    logs = tmp_path / "logs"
    logs.mkdir()
    path = str(logs / "app.blog")
    if shape != "never written":
        rotate = ", rotate_bytes=1 << 20" if shape == "set" else ""
        r = run_python(f"""
            import blog
            blog.basic_config({path!r}, crash_buffer=True{rotate})
            blog.get_logger().info("e {{}}", 1)
        """, timeout=60)
        assert r.returncode == 0, r.stderr
        assert os.path.exists(path) == (shape == "file")
    before = sorted(os.listdir(logs))
    r = subprocess.run(python_child("-m", "bread", "--recover", path), capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == f"bread: no abandoned crash buffer of {path}" + (
        " (nor a log file of that name)\n" if shape == "never written" else "\n")
    assert sorted(os.listdir(logs)) == before        # nothing made, nothing removed


def test_bread_recover_beside_a_live_writer_with_a_buffer_has_nothing_to_recover(
        tmp_path, capsys):
    # Proves: a cron job's bread --recover while the service runs (its live buffer, and
    # nothing abandoned) exits 0 without touching the file. Before: exit 2 ("being written
    # by a live process"), every time the job ran.
    path = str(tmp_path / "app.blog")
    s = blog.Session(name="live")
    stream = blog.FileOutputStream(path)
    cb = with_crash_buffer(s, path, stream)
    try:
        s.get_logger().info("e {}", 1)
        code, out, err = run_cli(["--recover", path], capsys)
        assert (code, out, err) == (0, f"bread: no abandoned crash buffer of {path}\n", "")
    finally:
        cb.close()
        stream.close()


def test_bread_recover_of_a_set_whose_writer_never_wrote_makes_a_file_of_the_set(tmp_path):
    # Proves: a set's writer killed before its first write (a service whose first start
    # died at once) has its events recovered by `bread --recover BASE` into a new file of
    # the set, as the next start would. Before: "cannot open BASE", exit 2.
    path = str(tmp_path / "app.blog")
    code = textwrap.dedent(f"""
        import os, signal, blog
        blog.basic_config({path!r}, rotate_bytes=1 << 20, crash_buffer=True,
                          flush_interval=60)
        log = blog.get_logger("t")
        for i in range(500):
            log.info("w {{}}", i)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run(python_child("-c", code), timeout=60).returncode == -9
    assert _set_files(path) == []
    r = subprocess.run(python_child("-m", "bread", "--recover", path), capture_output=True,
                       text=True, timeout=60)
    [made] = _set_files(path)
    assert r.returncode == 0, r.stderr
    assert "recovered 500 event(s) of process" in r.stdout and r.stdout.endswith(f" into {made}\n")
    assert [e.args[0] for e in bread.read(made)] == list(range(500))
    assert not os.path.exists(buffer_directory(path))
    assert not os.path.exists(path)


def test_a_recovery_beside_a_starting_writer_leaves_it_its_crash_buffer(tmp_path, monkeypatch):
    # Proves: a recovery (another process's start, bread --recover) that sweeps the buffer
    # directory at the moment a writer makes its control file (made as .new, then locked,
    # then renamed) leaves that file alone: its process is alive. Before, the sweep took it
    # for the file of a writer that died making it (it could take its lock), deleted it,
    # and the writer went on without its crash buffer.
    from blog.files.crashbuf import CrashBuffer
    from blogstore.posix import fcntl
    directory = buffer_directory(str(tmp_path / "app.blog"))
    real = fcntl.flock

    def between_make_and_lock(fd, op):
        monkeypatch.setattr(fcntl, "flock", real)
        recover(directory, lambda: None, str(tmp_path / "app.blog"))   # its sweep, now
        return real(fd, op)
    monkeypatch.setattr(fcntl, "flock", between_make_and_lock)
    cb = CrashBuffer(directory, str(tmp_path / "app.blog"), {})
    monkeypatch.setattr(fcntl, "flock", real)
    assert os.path.exists(cb.path)
    cb.close()


def test_a_write_cut_by_the_kill_is_cut_off_and_its_events_recovered_once(tmp_path):
    # Proves: the consume record. A kill in the middle of a write leaves part of it in the
    # file; recovery cuts that part off and appends the whole consume from the buffer, so
    # no event is in the file twice and none is lost.
    path = str(tmp_path / "x.blog")
    s = blog.Session(name="cut")
    stream = blog.FileOutputStream(path)
    cb = with_crash_buffer(s, path, stream)
    log = s.get_logger("t")
    for i in range(100):
        log.info("a {}", i)
    s.consume(stream)                              # written: not to be recovered
    for i in range(100):
        log.info("b {}", i)

    class Torn:
        """Writes half of what it is given, then the process 'dies'."""

        def write(self, data):
            stream.write(bytes(data[:len(data) // 2]))
            raise SystemExit("killed")
        position = stream.position
    with pytest.raises(SystemExit):
        s.consume(Torn())
    for i in range(50):
        log.info("c {}", i)
    abandon(cb)
    stream.close()
    out = blog.FileOutputStream(path)
    try:
        [got] = recover(buffer_directory(path), out)
    finally:
        out.close()
    assert got.events == 150
    r = bread.read(path)
    msgs = [e.message for e in r]
    assert msgs == ([f"a {i}" for i in range(100)] + [f"b {i}" for i in range(100)]
                    + [f"c {i}" for i in range(50)])
    assert r.damage == []


def test_the_c_and_python_channels_mirror_the_same_bytes(tmp_path, monkeypatch):
    # Proves parity: the same pushes, takes and nested rename give the same channel file
    # bytes in the C channel and in the Python reference.
    from blog import accel
    from blog.pipeline.channel import PyChannel
    from blog.files.crashbuf import Slot
    if accel.speedups is None:
        pytest.skip("the C channel is not built (or turned off)")
    files = []
    for cls in (PyChannel, accel.speedups.Channel):
        slot = Slot(str(tmp_path / f"{cls.__name__}.chan"), 3, 4096, 100)
        ch = cls(4096, 4096, None, 100)
        ch.push_values(1, 105, (1, "two", 3.0))
        ch.use_slot(slot)                           # what it holds goes in first
        ch.push_raw(2, 107, 3, b"\x92\x01\x02")
        ch.take(1)
        ch.push_values(1, 110, (None, True, b"x"))
        ch.take(2)
        ch.push_values(1, 111, ("after",))
        files.append(bytes(slot.map))
    assert files[0] == files[1]


def test_buffer_directories_never_mix_logs(tmp_path):
    # Beside the log, one per log name (a process's own app.pid<N>.blog shares app.blog's:
    # the next start of app.blog recovers it); under a shared crash_dir, two logs of one
    # name in different directories get different ones.
    a, b = str(tmp_path / "a" / "app.blog"), str(tmp_path / "b" / "app.blog")
    assert buffer_directory(a) == str(tmp_path / "a" / ".app.blog.buffers")
    assert buffer_directory(str(tmp_path / "a" / "app.pid123.blog")) == buffer_directory(a)
    assert buffer_directory(str(tmp_path / "a" / "app.pid7-2.blog")) == buffer_directory(a)
    shared = str(tmp_path / "shm")
    assert buffer_directory(a, shared) != buffer_directory(b, shared)
    assert os.path.dirname(buffer_directory(a, shared)) == shared


def test_a_channel_file_that_cannot_be_made_never_fails_a_log_call(tmp_path, capsys):
    # Proves: a crash buffer that cannot make a thread's file (its directory removed by a
    # cleaner, no descriptors left, a full disk) costs that thread its protection, said
    # once on stderr, never an exception in a log call or a lost event.
    import shutil
    path = str(tmp_path / "x.blog")
    s = blog.Session(name="nodir")
    stream = blog.FileOutputStream(path)
    with_crash_buffer(s, path, stream)
    log = s.get_logger("t")
    log.info("main {}", 1)
    shutil.rmtree(buffer_directory(path))

    def work():
        for i in range(3):
            log.info("thread {}", i)
    for _ in range(2):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    s.consume(stream)
    s.use_crash_buffer(None)
    stream.close()
    assert [e.message for e in bread.read(path)] == ["main 1"] + ["thread 0", "thread 1",
                                                                   "thread 2"] * 2
    assert capsys.readouterr().err.count("could not be made") == 1


def test_a_crash_buffer_that_cannot_be_made_leaves_logging_to_the_file(tmp_path):
    # Proves: basic_config(crash_buffer=True) where the buffer cannot be made (a file in
    # the way of its directory) says so and logs to the file all the same.
    path = tmp_path / "x.blog"
    (tmp_path / ".x.blog.buffers").write_text("in the way")
    r = run_python(f"""
        import blog
        blog.basic_config({str(path)!r}, crash_buffer=True)
        blog.get_logger().info("e {{}}", 1)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "crash buffer" in r.stderr and "cannot be used" in r.stderr
    assert [e.message for e in bread.read(str(path))] == ["e 1"]


def test_a_log_that_takes_nothing_keeps_the_buffer_for_the_next_recovery(tmp_path):
    # Proves: a recovery whose log refuses its bytes (writes of 0) fails with OSError
    # instead of spinning, and the buffer stays: the next recovery appends every event.
    path = str(tmp_path / "x.blog")
    s = blog.Session(name="zero")
    stream = blog.FileOutputStream(path)
    cb = with_crash_buffer(s, path, stream)
    for i in range(20):
        s.get_logger("t").info("e {}", i)
    abandon(cb)
    stream.close()

    class Refusing:
        def __init__(self, real):
            self.real = real
            self.position = real.position
            self.truncate = real.truncate

        def write(self, data):
            return 0
    out = blog.FileOutputStream(path)
    try:
        with pytest.raises(OSError, match="accepted no bytes"):
            recover(buffer_directory(path), Refusing(out), path)
        [got] = recover(buffer_directory(path), out)
    finally:
        out.close()
    assert got.events == 20
    assert [e.message for e in bread.read(path)] == [f"e {i}" for i in range(20)]


# --- An output that fails: its events are kept in the crash buffer, not lost -------------


class _Filling(blog.FileOutputStream):
    """A log file on a disk that fills on demand: while ``full``, a write puts half of its
    bytes in the file, then fails with ENOSPC (as a real disk does), so that part of a
    refused write is left in the file."""

    full = False
    attempts = 0

    def write(self, data):
        if not self.full:
            return super().write(data)
        self.attempts += 1
        if self.attempts % 2:         # the first call of a write: half of it lands
            return super().write(bytes(data[:len(data) // 2]))
        raise OSError(28, "No space left on device")


def _held_session(path: str, capacity: int = 1 << 20, overflow: str = "block"):
    s = blog.Session(name="held", channel_capacity=capacity, overflow=overflow)
    stream = _Filling(path)
    with_crash_buffer(s, path, stream)
    return s, stream


def test_a_refused_write_is_kept_retried_once_per_consume_and_written_once(tmp_path, capsys):
    # Proves: with the crash buffer, events whose write the output refuses (a full disk)
    # are kept, not lost: nothing is counted lost, each consume tries the write once (no
    # retry storm), the half that landed in the file is cut off, and once the disk has
    # room every event is in the file exactly once, in order, with no Lost notice.
    path = str(tmp_path / "x.blog")
    s, stream = _held_session(path)
    log = s.get_logger("t")
    log.info("a {}", 0)
    s.consume(stream)
    stream.full = True
    size = os.path.getsize(path)
    for k in range(5):
        for i in range(1000):
            log.info("b {} {}", k, i)
        assert s.consume(stream) == 0
        assert os.path.getsize(path) == size          # the torn half is cut each time
    assert stream.attempts == 2 * 5                   # one write (and its completion) per consume
    assert s.stats.events_lost == 0 and s.stats.events_held == 1000 and s.held
    err = capsys.readouterr().err
    assert err.count("kept in the crash buffer") == 1, err
    stream.full = False
    log.info("c {}", 1)
    s.consume(stream)          # the held write, then what was logged meanwhile
    assert not s.held and s.stats.events_held == 0 and s.stats.events_lost == 0
    rd = bread.read(path)
    want = ["a 0"] + [f"b {k} {i}" for k in range(5) for i in range(1000)] + ["c 1"]
    assert [e.message for e in rd] == want
    assert rd.notices == [] and rd.damage == []
    s.use_crash_buffer(None)
    stream.close()


def test_a_kill_while_the_disk_is_full_loses_nothing(tmp_path):
    # Proves: the held events are in the crash buffer, not only in memory: a process
    # killed while its output refuses writes (and its channels have filled meanwhile) has
    # every event whose log call returned recovered, once, in order.
    path = str(tmp_path / "x.blog")
    pid = os.fork()
    if pid == 0:
        try:
            s, stream = _held_session(path, capacity=64 << 10, overflow="drop")
            log = s.get_logger("t")
            for i in range(100):
                log.info("e {}", i)
            s.consume(stream)
            stream.full = True
            for i in range(100, 1100):
                log.info("e {}", i)
            s.consume(stream)             # refused: held
            for i in range(1100, 1600):
                log.info("e {}", i)       # in the channel's other half
            s.consume(stream)             # refused again: still held, nothing more taken
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert [e.args[0] for e in bread.read(path)] == list(range(100))
    stream = blog.FileOutputStream(path)
    try:
        [r] = recover(buffer_directory(path), stream)
        assert r.events == 1500
    finally:
        stream.close()
    assert [e.args[0] for e in bread.read(path)] == list(range(1600))


def test_a_full_channel_while_held_follows_its_overflow_policy(tmp_path):
    # Proves what happens when the held events fill the buffer: with "drop" a log call
    # returns at once and the event is dropped and counted (the file says how many once
    # it works); with "block" it waits until the output works again, and nothing is lost.
    path = str(tmp_path / "d.blog")
    s, stream = _held_session(path, capacity=64 << 10, overflow="drop")
    c = blog.Consumer(s, stream, interval=0.01).start()
    log = s.get_logger("t")
    stream.full = True
    for i in range(20_000):            # far more than two 64 KiB halves hold
        log.info("e {}", i)
    assert s.stats.events_dropped > 0 or s.pending()
    stream.full = False
    c.stop()
    dropped = s.stats.events_dropped
    assert dropped > 0 and s.stats.events_lost == 0
    rd = bread.read(path)
    got = [e.args[0] for e in rd]
    assert len(got) + dropped == 20_000 and got == sorted(got)
    assert sum(n.count for n in rd.notices) == dropped
    s.use_crash_buffer(None)
    stream.close()

    path = str(tmp_path / "b.blog")
    s, stream = _held_session(path, capacity=64 << 10, overflow="block")
    c = blog.Consumer(s, stream, interval=0.01).start()
    log = s.get_logger("t")
    stream.full = True
    done = threading.Event()

    def work() -> None:
        for i in range(20_000):
            log.info("e {}", i)
        done.set()
    t = threading.Thread(target=work)
    t.start()
    assert not done.wait(0.5)          # blocked: the buffer is full and the disk too
    stream.full = False
    assert done.wait(600)              # bounds a hang: 20,000 pure-path calls at a load of 20
    t.join()
    c.stop()
    assert [e.args[0] for e in bread.read(path)] == list(range(20_000))
    assert s.stats.events_dropped == 0 and s.stats.events_lost == 0
    s.use_crash_buffer(None)
    stream.close()


def test_an_exit_while_the_disk_is_full_leaves_the_events_for_the_next_start(tmp_path):
    # Proves: a process that exits while its output still refuses writes leaves its held
    # events, and those logged since, in the crash buffer (and says so) instead of losing
    # them; the next start of the same file appends them once.
    path = str(tmp_path / "app.blog")
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        log = blog.get_logger()
        for i in range(100):
            log.info("e {{}}", i)
        blog.flush()
        stream = blog.default_session().drainer.stream
        def full(data):
            raise OSError(28, "No space left on device")
        stream.write = full
        for i in range(100, 3000):
            log.info("e {{}}", i)
        blog.flush()
        for i in range(3000, 3500):
            log.info("e {{}}", i)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "3400 event(s) the output refused are left in the crash buffer" in r.stderr, r.stderr
    assert "never written" not in r.stderr
    assert [e.args[0] for e in bread.read(path)] == list(range(100))
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        blog.get_logger().info("e {{}}", 3500)
    """, timeout=60)
    assert r.returncode == 0 and "recovered 3400 event(s)" in r.stderr, r.stderr
    assert [e.args[0] for e in bread.read(path)] == list(range(3501))


def test_a_move_while_the_disk_is_full_writes_the_held_events_to_the_new_output(tmp_path):
    # Proves: basic_config to another file while the first one's disk is full moves the
    # held events with the channels (into the new crash buffer): the new file gets them
    # once, in order, and nothing is left for the old file's next start to append again.
    old, new = str(tmp_path / "old.blog"), str(tmp_path / "new.blog")
    r = run_python(f"""
        import blog
        blog.basic_config({old!r}, crash_buffer=True)
        log = blog.get_logger()
        log.info("e {{}}", 0)
        blog.flush()
        def full(data):
            raise OSError(28, "No space left on device")
        blog.default_session().drainer.stream.write = full
        for i in range(1, 1000):
            log.info("e {{}}", i)
        blog.flush()
        assert blog.default_session().held
        blog.basic_config({new!r}, crash_buffer=True)
        for i in range(1000, 1100):
            log.info("e {{}}", i)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [e.args[0] for e in bread.read(old)] == [0]
    assert [e.args[0] for e in bread.read(new)] == list(range(1, 1100))
    assert not os.path.exists(buffer_directory(old)) and not os.path.exists(buffer_directory(new))


# --- A rotated file set ---------------------------------------------------------------


_TORN_SET_WRITER = """
import os, signal, sys, blog
from blog.files.crashbuf import CrashBuffer, buffer_directory
path = sys.argv[1]
s = blog.Session(name="cut")
stream = blog.RotatingFile(path, compress=True)
s.use_crash_buffer(CrashBuffer(buffer_directory(path), stream.path, s.descriptor))
log = s.get_logger("t")
for i in range(100):
    log.info("a {}", i)
s.consume(stream)
for i in range(100):
    log.info("b {}", i)
real = stream.write
def torn(data):
    real(bytes(data[:len(data) // 2]))
    os.kill(os.getpid(), signal.SIGKILL)
stream.write = torn
s.consume(stream)
"""


def _torn_set(d) -> tuple[str, str]:
    """A set whose writer was killed in the middle of a write: (base path, its file)."""
    path = str(d / "app.blog")
    r = subprocess.run(python_child("-c", _TORN_SET_WRITER, path), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    [dead] = _set_files(path)
    return path, dead


def test_a_rotated_set_writer_killed_mid_write_is_recovered_into_its_own_file(tmp_path):
    # Proves: for a rotated set, recovery finds the file the dead process was writing
    # (by its device and inode), cuts the write the kill tore, and appends the events
    # there; until then no housekeeping (compression) touches that file, after it does.
    path, dead = _torn_set(tmp_path)
    rf = blog.RotatingFile(path, compress=True)
    rf.housekeeper.sweep()
    rf.wait()
    assert _set_files(path) == [dead]            # left alone: its buffer waits for recovery
    try:
        [got] = recover(buffer_directory(path), rf)
    finally:
        rf.close()
    assert got.events == 100 and got.path == dead
    assert rf.files == 0                          # nothing needed a file of its own
    r = bread.read(dead)
    assert [e.message for e in r] == [f"a {i}" for i in range(100)] + [f"b {i}" for i in range(100)]
    assert r.damage == [] and [n.events for n in r.notices] == [100]
    rf = blog.RotatingFile(path, compress=True)
    rf.wait()
    rf.close()
    assert _set_files(path) == [dead + ".gz"]      # recovered: compressed as any closed file


def test_the_next_start_of_a_rotated_set_and_bread_recover_recover_it(tmp_path):
    # Proves the two ways a user recovers a set: basic_config of the same base name with
    # crash_buffer=True (and rotation options) at the next start, and
    # `bread --recover BASE` (the base name of the set, which is no file itself).
    for how in ("start", "bread"):
        d = tmp_path / how
        d.mkdir()
        path, dead = _torn_set(d)
        if how == "start":
            r = run_python(f"""
                import blog
                blog.basic_config({path!r}, rotate_bytes=1 << 20, compress=True,
                                  crash_buffer=True)
                blog.get_logger("t").info("new {{}}", 1)
            """, timeout=60)
            assert r.returncode == 0 and "recovered 100 event(s)" in r.stderr, r.stderr
            assert dead in r.stderr
        else:
            r = subprocess.run(python_child("-m", "bread", "--recover", path),
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "recovered 100 event(s)" in r.stdout, r.stderr
            assert dead in r.stdout
        msgs = [e.message for e in bread.read(_set_files(path))]
        assert msgs[:200] == [f"a {i}" for i in range(100)] + [f"b {i}" for i in range(100)]
        assert msgs[200:] == (["new 1"] if how == "start" else [])
        assert not os.path.exists(buffer_directory(path))


def test_a_forked_child_of_a_rotated_set_has_a_crash_buffer_of_its_own(tmp_path):
    # Proves: a child forked by a process logging to a set with crash_buffer=True logs
    # into its own files with its own buffer, so that the child's kill loses nothing
    # either: the next start recovers its events (here it never wrote: into a new file).
    path = str(tmp_path / "app.blog")
    r = run_python(f"""
        import os, signal, blog
        blog.basic_config({path!r}, rotate_bytes=1 << 20, crash_buffer=True,
                          flush_interval=60)
        log = blog.get_logger("t")
        log.info("parent {{}}", 0)
        pid = os.fork()
        if pid == 0:
            for i in range(2000):
                log.info("child {{}}", i)
            os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, rotate_bytes=1 << 20, crash_buffer=True)
    """, timeout=60)
    assert r.returncode == 0 and "recovered 2000 event(s)" in r.stderr, r.stderr
    msgs = sorted(e.message for e in bread.read(_set_files(path)))
    assert msgs == sorted(["parent 0"] + [f"child {i}" for i in range(2000)])


# --- What a review found: each of these lost or duplicated events before its fix --------


def test_a_refused_write_that_cannot_be_cut_is_cut_by_recovery(tmp_path):
    # Proves: when what a refused write left in the file cannot be cut (the truncate
    # fails too), the record of the write stays, so that a kill then has recovery cut it:
    # every event once.
    path = str(tmp_path / "x.blog")

    class Stuck(blog.FileOutputStream):
        full = False

        def write(self, data):
            if self.full:
                super().write(bytes(data[:len(data) * 3 // 4]))   # whole frames land
                raise OSError(28, "No space left on device")
            return super().write(data)

        def truncate(self, size):
            if self.full:
                raise OSError(5, "Input/output error")
            super().truncate(size)
    s = blog.Session(name="stuck")
    stream = Stuck(path)
    cb = with_crash_buffer(s, path, stream)
    log = s.get_logger("t")

    def work(k: int) -> None:          # a frame per thread: whole ones land before the cut
        for i in range(500):
            log.info("e {} {}", k, i)
    for k in range(4):
        t = threading.Thread(target=work, args=(k,))
        t.start()
        t.join()
    stream.full = True
    assert s.consume(stream) == 0 and s.held
    assert os.path.getsize(path) > 0     # part of the write is in the file
    abandon(cb)
    stream.close()
    out = blog.FileOutputStream(path)
    try:
        recover(buffer_directory(path), out)
    finally:
        out.close()
    r = bread.read(path)
    assert sorted(tuple(e.args) for e in r) == [(k, i) for k in range(4) for i in range(500)]
    assert r.damage == []


def test_a_rotated_set_recovery_killed_after_its_append_is_not_redone(tmp_path):
    # Proves: a recovery killed after appending (in its fsync) into a new file of a set
    # is found finished by the next one, which appends nothing again.
    path = str(tmp_path / "app.blog")
    code = textwrap.dedent(f"""
        import os, signal, blog
        blog.basic_config({path!r}, rotate_bytes=1 << 20, crash_buffer=True, flush_interval=60)
        log = blog.get_logger("t")
        for i in range(1000):
            log.info("w {{}}", i)
        os.kill(os.getpid(), signal.SIGKILL)      # before its first write: no file of its own
    """)
    assert subprocess.run(python_child("-c", code), timeout=60).returncode == -9
    code = textwrap.dedent(f"""
        import os, signal, blog
        def sync(self):
            os.kill(os.getpid(), signal.SIGKILL)  # killed in the fsync after the append
        blog.RotatingFile.sync = sync
        blog.basic_config({path!r}, rotate_bytes=1 << 20, crash_buffer=True)
    """)
    assert subprocess.run(python_child("-c", code), timeout=60).returncode == -9
    r = subprocess.run(python_child("-m", "bread", "--recover", path), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "no abandoned crash buffer" in r.stdout, (r.stdout, r.stderr)
    assert sorted(e.args[0] for e in bread.read(_set_files(path))) == list(range(1000))


def test_recovery_never_writes_into_a_file_that_took_the_dead_files_inode(tmp_path):
    # Proves: the dead writer's file removed (retention, rm) and its inode number given
    # to a new file (a file system reuses a freed inode at once): recovery appends to a
    # new file of the set, never into that one, whether or not it looks like a log file.
    path, dead = _torn_set(tmp_path)
    ino = os.stat(dead).st_ino
    os.unlink(dead)
    taker = None
    for k in range(50):
        for name in (f"app.2000-01-01T00-00-00.000.pid{k + 1}.blog", f"notes{k}.txt"):
            p = tmp_path / name
            p.write_bytes(b"not yours\n" * 100)
            if p.stat().st_ino == ino:
                taker = p
                break
        if taker is not None:
            break
    if taker is None:
        pytest.skip("this file system did not give the freed inode to a new file")
    rf = blog.RotatingFile(path)
    try:
        [got] = recover(buffer_directory(path), rf)
    finally:
        rf.close()
    assert taker.read_bytes() == b"not yours\n" * 100
    assert got.events == 100 and got.path != str(taker)   # the torn write's ("a" are gone)
    assert [e.message for e in bread.read(got.path)] == [f"b {i}" for i in range(100)]


def test_housekeeping_leaves_a_dead_writers_file_under_any_buffer_directory(tmp_path):
    # Proves: the constructor's first sweep already knows where the set's buffers are:
    # beside a base name of any suffix, and under a crash_dir.
    for base, crash_dir in (("app.blog", None), ("app.log", None), ("app.blog", "crash")):
        d = tmp_path / f"{base}-{crash_dir}"
        d.mkdir()
        path = str(d / base)
        cd = str(d / crash_dir) if crash_dir else None
        code = textwrap.dedent(f"""
            import os, signal, blog
            from blog.files.crashbuf import CrashBuffer, buffer_directory
            s = blog.Session(name="cut")
            stream = blog.RotatingFile({path!r}, compress=True)
            s.use_crash_buffer(CrashBuffer(buffer_directory({path!r}, {cd!r}), stream.path,
                                           s.descriptor))
            log = s.get_logger("t")
            log.info("a {{}}", 1)
            s.consume(stream)
            os.kill(os.getpid(), signal.SIGKILL)
        """)
        assert subprocess.run(python_child("-c", code), timeout=60).returncode == -9
        rf = blog.RotatingFile(path, compress=True,
                               crash_dirs=[buffer_directory(path, cd)] if cd else [])
        rf.wait()
        rf.close()
        names = [n for n in os.listdir(d) if ".pid" in n]
        assert len(names) == 1 and not names[0].endswith(".gz"), (base, crash_dir, names)


def test_a_held_write_in_a_rotated_set_is_retried_in_one_file(tmp_path):
    # Proves: a held write larger than rotate_bytes does not open a new (empty) file at
    # each retry (which retention would then count against the files with events); once
    # the output works, it is cut between files as any consume (test_parts_crash.py).
    path = str(tmp_path / "app.blog")

    class Full(blog.RotatingFile):
        full = False

        def write(self, data):
            if self.full:
                raise OSError(28, "No space left on device")
            return super().write(data)
    s = blog.Session(name="held")
    rf = Full(path, rotate_bytes=64 << 10)
    with_crash_buffer(s, path, rf)
    log = s.get_logger("t")
    log.info("a {}", 0)
    s.consume(rf)
    rf.full = True
    for i in range(5000):
        log.info("b {} {}", i, "x" * 100)
    for _ in range(20):
        s.consume(rf)
    assert s.held and rf.files == 1
    rf.full = False
    s.consume(rf)
    s.use_crash_buffer(None)
    rf.close()
    assert rf.files > 5
    msgs = [e.message for e in bread.read(_set_files(path))]
    assert msgs[0] == "a 0" and len(msgs) == 5001


# --- Recovery killed midway, then housekeeping, then recovery again (issue 37) ----------

_DEAD_SET_WRITER = """
import os, signal, sys, blog
blog.basic_config(sys.argv[1], rotate_bytes=int(sys.argv[2]) if sys.argv[2:] else 1 << 20,
                  crash_buffer=True, flush_interval=60)
log = blog.get_logger("t")
if sys.argv[3:]:              # a first event written: a file of its own (else none)
    log.info("w {}", 0)
    blog.flush()
for i in range(len(sys.argv[3:]), 3000):
    log.info("w {}", i)
os.kill(os.getpid(), signal.SIGKILL)
"""

#: A recovery killed when it has written part of what it appends into a file of the set of
#: its own: its frames up to the middle, whole (the fault injected where it writes; the
#: test reads no timing). A torn frame at the end instead: ``torn`` as the second argument.
_HALF_RECOVERY = """
import os, signal, sys, blog
import blogstore.recovery as recovery
from blog.files.crashbuf import buffer_directory
from blogformat.frames import HEADER_SIZE, parse_header

def half_then_killed(stream, data):
    end = 0
    while end < len(data) // 2:
        end += HEADER_SIZE + parse_header(bytes(data[end:end + HEADER_SIZE]))[2]
    stream.write(data[:end] if sys.argv[2] == "whole" else data[:len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)
recovery._write_all = half_then_killed
rf = blog.RotatingFile(sys.argv[1])
recovery.recover(buffer_directory(sys.argv[1]), rf)
"""


@pytest.mark.parametrize("cut", ["whole", "torn"])
@pytest.mark.parametrize("housekeeping", ["compress", "on_close", "compact"])
def test_a_recovery_killed_midway_leaves_a_part_no_housekeeping_takes_for_whole(
        tmp_path, housekeeping, cut):
    # Proves (issue 37): a recovery killed after writing part of its append into a file of
    # its own leaves that file as it is for the next recovery: housekeeping does not
    # compress it, on_close does not ship it, bread compact does not compact it; the next
    # recovery cuts the part off and appends the events once, whether the part ends in
    # whole frames or a torn one. Before the fix the file was compressed (or compacted, or
    # shipped) and every event appended again: the part's events were in the set twice.
    d = tmp_path / "logs"
    d.mkdir()
    path = str(d / "app.blog")
    assert subprocess.run(python_child("-c", _DEAD_SET_WRITER, path), timeout=60).returncode == -9
    half = subprocess.run(python_child("-c", _HALF_RECOVERY, path, cut), timeout=60)
    assert half.returncode == -9
    [part] = _set_files(path)
    before = os.path.getsize(part)
    assert before > 0
    shipped: list[str] = []
    if housekeeping == "compact":
        os.utime(part, (time.time() - 7200, time.time() - 7200))    # old enough to compact
        r = subprocess.run(python_child("-m", "bread", "compact", str(d), "--older-than", "1h"),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode in (0, 3), r.stderr
    else:
        rf = blog.RotatingFile(path, compress=housekeeping == "compress",
                               on_close=shipped.append if housekeeping == "on_close" else None)
        rf.wait()
        rf.close()
    left = _set_files(path), os.path.getsize(part) if os.path.exists(part) else None, shipped[:]
    rf = blog.RotatingFile(path, compress=True, on_close=shipped.append)
    try:
        [got] = recover(buffer_directory(path), rf)
        rf.housekeeper.sweep()
    finally:
        rf.close()
    assert got.events == 3000
    files = _set_files(path)
    assert part + ".gz" not in files          # cut to nothing, and gone: no empty file
    r = bread.read(files)
    assert sorted(e.args[0] for e in r) == list(range(3000))
    assert r.damage == []
    assert left == ([part], before, [])      # the part was left as it was for recovery
    assert sorted(shipped) == files and all(f.endswith(".gz") for f in files)


#: A recovery killed in its ``sys.argv[2]``-th append, when it has written half of it.
_KILLED_IN_APPEND = """
import os, signal, sys, blog
import blogstore.recovery as recovery
from blog.files.crashbuf import buffer_directory

calls = []
write_all = recovery._write_all
def killed_in_append(stream, data):
    calls.append(1)
    if len(calls) == int(sys.argv[2]):
        stream.write(data[:len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    write_all(stream, data)
recovery._write_all = killed_in_append
rf = blog.RotatingFile(sys.argv[1], rotate_bytes=int(sys.argv[3]))
recovery.recover(buffer_directory(sys.argv[1]), rf)
"""


@pytest.mark.parametrize("killed_in", [0, 1, 3])
def test_recovery_into_a_set_keeps_its_rotate_bytes_and_is_idempotent(tmp_path, killed_in):
    # Proves (issue 37): recovery into a rotated set cuts what it appends into files of
    # the set within rotate_bytes, as the writer would (each file with its header and
    # metadata: it reads alone), every event once; and a recovery killed in its first or
    # a later append, then housekeeping (compress), then recovery again, still gives every
    # event once and no file beyond rotate_bytes. Before, recovery appended 3000 events
    # (about 30 KB) into one file of a set with rotate_bytes=6000.
    d = tmp_path / "logs"
    d.mkdir()
    path, limit = str(d / "app.blog"), 6000
    assert subprocess.run(python_child("-c", _DEAD_SET_WRITER, path), timeout=60).returncode == -9
    if killed_in:
        r = subprocess.run(python_child("-c", _KILLED_IN_APPEND, path, str(killed_in),
                                        str(limit)), timeout=60)
        assert r.returncode == -9
        rf = blog.RotatingFile(path, compress=True)
        rf.wait()
        rf.close()
    rf = blog.RotatingFile(path, rotate_bytes=limit, compress=True)
    try:
        recover(buffer_directory(path), rf)
        rf.housekeeper.sweep()
    finally:
        rf.close()
    assert not glob.glob(os.path.join(buffer_directory(path), "*")), "buffer left"
    _check_sizes(path, limit)


def test_bread_recover_keeps_the_rotate_bytes_its_dead_writer_had(tmp_path):
    # Proves: a writer's buffer records its set's rotate_bytes, so that `bread --recover`
    # (which knows no option of the set) cuts what it appends to that size too: into the
    # file the writer was writing, then further files of the set.
    d = tmp_path / "logs"
    d.mkdir()
    path, limit = str(d / "app.blog"), 6000
    assert subprocess.run(python_child("-c", _DEAD_SET_WRITER, path, str(limit), "wrote"),
                          timeout=60).returncode == -9
    r = subprocess.run(python_child("-m", "bread", "--recover", path), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _check_sizes(path, limit)


def _check_sizes(path: str, limit: int) -> None:
    """The set of ``path``: files within ``limit`` bytes, each reading alone (its events
    described by its own metadata), and events 0 to 2999 once."""
    files = _set_files(path)
    assert len(files) >= 5
    seen = []
    for f in files:
        with gzip.open(f) if f.endswith(".gz") else open(f, "rb") as raw:
            size = len(raw.read())
        assert size <= limit, (f, size)
        r = bread.read(f)                    # each alone: header, metadata, events
        got = [(e.format, e.args[0]) for e in r]
        assert r.damage == [] and all(form == "w {}" for form, _ in got)
        seen += [i for _, i in got]
    assert sorted(seen) == list(range(3000))
