"""bread -F: a live file followed as tail -F does, across rotation and truncation; a rotated
set (its base name, or its directory) followed across rotations and new processes."""

from __future__ import annotations

import fcntl
import gzip
import os
import select
import signal
import subprocess
import threading
import time

import pytest

import blog
import bread
from blogstore.crashlayout import buffer_directory
from blogstore.fileset import file_name, members
from bread.inputs.follow import Watch
from bread.cli.recover import Log, recover_into
from bread.inputs.tail import Growing, Stopped

from helpers import fresh_signals, python_child, with_crash_buffer


class Writer:
    """A session appending to a path; ``rotate`` / ``truncate`` as a log rotation would."""

    def __init__(self, path) -> None:
        self.path = path
        self.session = blog.Session()
        self.log = self.session.get_logger("main")
        self.stream = blog.FileOutputStream(path)

    def write(self, *msgs: str) -> None:
        for m in msgs:
            self.log.info("{}", m)
        self.session.consume(self.stream)

    def reopen(self) -> None:
        self.stream.close()
        self.stream = blog.FileOutputStream(self.path)   # a new stream: header, metadata again


def lines_of(proc, n: int, timeout: float = 20) -> list[str]:
    out: list[str] = []
    deadline = time.time() + timeout
    buf = b""
    while len(out) < n and time.time() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            out += [d.decode() for d in done]
    return out


def start(path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(python_child("-m", "bread", "-F", "-f", "%m", *args, str(path)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_follow_across_rotation_and_truncation_then_ctrl_c(tmp_path):
    path = tmp_path / "app.blog"
    w = Writer(path)
    w.write("one", "two")
    p = start(path)
    try:
        assert lines_of(p, 2) == ["one", "two"]
        w.write("three")                                   # as the consumer writes
        assert lines_of(p, 1) == ["three"]
        os.rename(path, tmp_path / "app.1.blog")           # rotation: a new file at the path
        w.write("four")                                    # still the old file, then:
        w.reopen()
        w.write("five")
        assert lines_of(p, 2) == ["four", "five"]
        os.truncate(path, 0)                               # copytruncate
        w.reopen()
        w.write("six")
        assert lines_of(p, 1) == ["six"]
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
        assert b"Traceback" not in err
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("form", ["file", "directory"])
def test_follow_into_a_closed_pipe_ends_quietly(tmp_path, form):
    path = tmp_path / "app.blog"
    w = Writer(path)
    w.write(*[f"m{i}" for i in range(5)])
    p = start(path if form == "file" else tmp_path)
    try:
        assert lines_of(p, 5)[:2] == ["m0", "m1"]
        p.stdout.close()                                   # `bread -F x | head -n 2`
        for i in range(50):
            w.write(f"more {i}" * 100)
            if p.poll() is not None:
                break
            time.sleep(0.1)
        p.wait(timeout=20)
        assert p.returncode == 0
        assert b"Traceback" not in p.stderr.read()
    finally:
        p.kill()
        p.wait()


def test_follow_takes_one_file(tmp_path, capsys):
    from bread import cli
    assert cli.main(["-F", str(tmp_path / "a"), str(tmp_path / "b")]) == cli.EXIT_USAGE
    assert cli.main(["-F", "-s", str(tmp_path / "a")]) == cli.EXIT_USAGE
    assert "-F/--follow takes one file" in capsys.readouterr().err


def test_following_a_file_that_is_not_blog_says_so(tmp_path):
    # Proves (issue 26): bread -F notes.txt says it is not a blog file, exit 2, at once
    # (following, the reader would wait for more bytes).
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 100)
    r = subprocess.run(python_child("-m", "bread", "-F", str(notes)), capture_output=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode() == f"bread: {notes}: not a blog log file (its first 600 bytes " \
                                "hold no blog frame)\n"


#: A service's process: logs ``TAG i`` for i < GATE into a rotated set (about 10 events a
#: file, closed files compressed), says "gate" and waits for a line on stdin, logs on to N;
#: with "fork", forks first and its child logs ``TAGc i`` (i < N) at the same time.
SERVICE = """
import os, sys, blog
path, tag, n, gate, fork = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \\
    sys.argv[5] == "fork"
blog.basic_config(path, rotate_bytes=1500, compress=True, flush_interval=0.005)
log = blog.get_logger()

def run(tag, lo, hi):
    for i in range(lo, hi):
        log.info("{} {} {}", tag, i, "x" * 60)
        blog.flush()

run(tag, 0, gate)
print("gate", flush=True)
sys.stdin.readline()
kid = os.fork() if fork else None
if kid == 0:
    run(tag + "c", 0, n)
    blog.shutdown()
    os._exit(0)
run(tag, gate, n)
if kid:
    os.waitpid(kid, 0)
blog.shutdown()
"""


def service(base, tag: str, n: int, gate: int, fork: bool = False) -> subprocess.Popen:
    p = subprocess.Popen(python_child("-c", SERVICE, str(base), tag, str(n), str(gate),
                                      "fork" if fork else "-"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert lines_of(p, 1) == ["gate"]
    return p


def go_on(p: subprocess.Popen) -> None:
    """Let a service log the rest, and wait for it to end."""
    p.stdin.write(b"go\n")
    p.stdin.close()
    assert p.wait(timeout=60) == 0


def tagged(lines: list[str], tag: str) -> list[str]:
    return [x for x in lines if x.split()[0] == tag]


def expected(tag: str, lo: int, hi: int) -> list[str]:
    return [f"{tag} {i} {'x' * 60}" for i in range(lo, hi)]


@pytest.mark.parametrize("form", ["base name", "directory"])
def test_follow_a_rotated_set_across_rotations_and_new_processes(tmp_path, form):
    # Proves (issue 26): bread -F logs/app.blog (the set's base name, no such file) and
    # bread -F logs/ print every event of a rotated, compressed set exactly once: the
    # files there at the start, those the writer rotates into while followed, then those
    # of a restarted service and of its forked child (files written at the same time:
    # each one's events in order). Before: "cannot open", and stopping at a rotation.
    logs = tmp_path / "logs"
    base = logs / "app.blog"
    a = service(base, "a", 60, 20)
    p = start(base if form == "base name" else logs)
    try:
        assert lines_of(p, 20) == expected("a", 0, 20)      # files closed, then the live one
        go_on(a)
        assert lines_of(p, 40) == expected("a", 20, 60)     # rotated into while followed
        go_on(service(base, "b", 30, 10, fork=True))        # a restart, then a fork
        got = lines_of(p, 60)
        assert tagged(got, "b") == expected("b", 0, 30)
        assert tagged(got, "bc") == expected("bc", 0, 30)
        assert len(got) == 60
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0 and err == b""              # nothing more, no damage
    finally:
        p.kill()
        p.wait()
    sets = members(str(logs), "app")
    assert len({f.pid for f in sets}) == 3 and len(sets) >= 10
    assert any(f.compressed for f in sets)


def test_bread_read_follows_a_directory_as_bread_f_does(tmp_path):
    # Proves: the library takes the same inputs: bread.read(DIR, follow=True) gives the
    # events of the files there and of those that come, never ending.
    logs = tmp_path / "logs"
    a = service(logs / "app.blog", "a", 30, 10)
    code = ("import sys, bread\n"
            "for ev in bread.read(sys.argv[1], follow=True):\n"
            "    print(ev.message, flush=True)\n")
    p = subprocess.Popen(python_child("-c", code, str(logs)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert lines_of(p, 10) == expected("a", 0, 10)
        go_on(a)
        assert lines_of(p, 20) == expected("a", 10, 30)
    finally:
        p.kill()
        p.wait()


def test_follow_takes_a_file_a_directory_or_a_set_base_name(tmp_path):
    with pytest.raises(FileNotFoundError):
        bread.read(tmp_path / "nothing" / "app.blog", follow=True)
    with pytest.raises(ValueError):
        bread.read([str(tmp_path)], follow=True)
    with pytest.raises(ValueError):
        bread.read(str(tmp_path), follow=True, sort=True)


def test_a_file_deleted_under_its_reader_is_read_to_its_end_once_its_writer_lets_go(tmp_path):
    # Proves: a set's file is read by its descriptor: deleted (or compressed, then deleted)
    # while read, it is read on; it ends only once its writer releases its flock, and
    # what was written before that is read; a stop ends the reading where it is.
    path = tmp_path / file_name("app", 1_000_000_000_000_000_000, 42)
    w = open(path, "ab", buffering=0)
    fcntl.flock(w.fileno(), fcntl.LOCK_EX)             # as a RotatingFile holds its file
    w.write(b"one")
    stop = threading.Event()
    g = Growing(open(path, "rb"), str(path), in_set=True, stop=stop, interval=0.01)
    assert g.read() == b"one"
    os.unlink(path)
    w.write(b"two")
    assert g.read() == b"two" and not g.finished()
    w.write(b"three")
    w.close()                                          # the writer lets go
    assert g.read() == b"three" and g.read() == b"" and g.read() == b""
    stop.set()
    with pytest.raises(Stopped):
        g.read()
    g.close()


def test_a_plain_file_is_finished_only_once_it_has_no_name(tmp_path):
    # Proves: a file that is not a set's (app.blog) may be appended to again by a restarted
    # writer: it ends only once nothing holds it and its last name is gone.
    path = tmp_path / "app.blog"
    path.write_bytes(b"x")
    g = Growing(open(path, "rb"), str(path), in_set=False, interval=0.01)
    assert g.read() == b"x" and not g.finished()
    os.unlink(path)
    assert g.finished() and g.read() == b""
    g.close()


def test_each_file_of_a_watched_directory_is_given_once(tmp_path):
    # Proves: a set's x.blog.gz is x.blog (compressed under the follower, it is not read
    # again), a renamed plain file is the same file, a compacted file made later is left
    # out (its events came from the originals); with a stem, only that set's files.
    one = file_name("app", 1_000_000_000_000_000_000, 42)
    (tmp_path / one).write_bytes(b"1")
    (tmp_path / "plain.blog").write_bytes(b"2")
    (tmp_path / file_name("worker", 1_000_000_000_000_000_000, 7)).write_bytes(b"3")
    (tmp_path / "notes.txt").write_bytes(b"4")
    w, app = Watch(str(tmp_path)), Watch(str(tmp_path), "app")
    assert [os.path.basename(f.path) for f in w.new()] == [
        one, "plain.blog", file_name("worker", 1_000_000_000_000_000_000, 7)]
    assert [os.path.basename(f.path) for f in app.new()] == [one]
    (tmp_path / (one + ".gz")).write_bytes(gzip.compress(b"1"))
    os.unlink(tmp_path / one)                          # housekeeping compressed it
    os.rename(tmp_path / "plain.blog", tmp_path / "plain.1.blog")
    (tmp_path / "app.compacted.2026-11-25T00-00-00.1.blog.gz").write_bytes(b"5")
    assert w.new() == [] and app.new() == []
    two = file_name("app", 1_000_000_001_000_000_000, 43)
    (tmp_path / two).write_bytes(b"6")                 # a new process's file
    assert [os.path.basename(f.path) for f in w.new()] == [two]
    assert [os.path.basename(f.path) for f in app.new()] == [two]


#: A service's process with the crash buffer: logs ``a i`` for i < 30 into a rotated set
#: (written: flushed), says "ready" and waits for a line; then logs ``a i`` for i < 230,
#: which no consume writes (flush_interval of an hour: they are in its crash buffer only),
#: says "logged" and waits to be killed.
KILLED = """
import sys, blog
blog.basic_config(sys.argv[1], rotate_bytes=1500, crash_buffer=True, flush_interval=3600)
log = blog.get_logger()
for i in range(30):
    log.info("{} {} {}", "a", i, "x" * 60)
    blog.flush()
print("ready", flush=True)
sys.stdin.readline()
for i in range(30, 230):
    log.info("{} {} {}", "a", i, "x" * 60)
print("logged", flush=True)
sys.stdin.readline()
"""


def let_go(p: subprocess.Popen, path: str, seconds: float = 2) -> None:
    """Wait until follower ``p`` closed ``path`` (took it for finished), ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            fds = os.listdir(f"/proc/{p.pid}/fd")
        except OSError:          # no /proc: as long as it takes to look a few times
            time.sleep(seconds)
            return
        held = set()
        for fd in fds:
            try:
                held.add(os.readlink(f"/proc/{p.pid}/fd/{fd}"))
            except OSError:
                pass
        if path not in held:
            return
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["next start", "bread --recover", "followed after the kill"])
def test_follow_prints_what_recovery_appends_to_a_killed_writers_file(tmp_path, how):
    # Proves (issue 37): bread -F BASE keeps following the file of a set whose writer was
    # killed with events in its crash buffer, until recovery (the next start, or bread
    # --recover) has appended them there, and prints each of them once; the files that
    # writer had closed before are read at once. Before: the dead writer's unlocked file
    # was taken for finished, and the recovered events were never printed (4,555 events
    # missed in 23 recoveries).
    logs = tmp_path / "logs"
    base = logs / "app.blog"
    w = subprocess.Popen(python_child("-c", KILLED, str(base)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    p = None
    try:
        assert lines_of(w, 1) == ["ready"]
        if how != "followed after the kill":
            p = start(base)
            assert lines_of(p, 30) == expected("a", 0, 30)
        w.stdin.write(b"go\n")
        w.stdin.flush()
        assert lines_of(w, 1) == ["logged"]
        w.kill()
        assert w.wait(timeout=20) == -signal.SIGKILL
        files = members(str(logs), "app")
        dead = files[-1].name
        if p is None:
            p = start(base)
            assert lines_of(p, 30) == expected("a", 0, 30)    # its files, the last too
        assert len(files) > 1
        let_go(p, str(logs / dead))
        if how == "next start":
            r = subprocess.run(python_child("-c", f"""if True:
                import blog
                blog.basic_config({str(base)!r}, rotate_bytes=1500, crash_buffer=True)
                blog.get_logger().info("{{}} {{}} {{}}", "b", 0, "x" * 60)
            """), capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "recovered 200 event(s)" in r.stderr, r.stderr
        else:
            r = subprocess.run(python_child("-m", "bread", "--recover", str(base)),
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "recovered 200 event(s)" in r.stdout, r.stdout
        got = lines_of(p, 201 if how == "next start" else 200)
        assert tagged(got, "a") == expected("a", 30, 230)
        assert tagged(got, "b") == (expected("b", 0, 1) if how == "next start" else [])
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0 and out == b""               # nothing twice, nothing more
        said = err.decode().splitlines()    # no damage; recovery keeps rotate_bytes, so its
        told = f" event(s) recovered from the crash buffer of process {w.pid},"  # appends
        assert all(line.startswith("bread: ") and told in line for line in said)  # may be
        assert sum(int(line.split()[1]) for line in said) == 200     # several files' parts
    finally:
        w.kill()
        w.wait()
        if p is not None:
            p.kill()
            p.wait()


def test_a_set_file_is_not_finished_while_a_dead_writers_buffer_waits_to_be_recovered_into_it(
        tmp_path):
    # Proves: a set's file that nobody holds, but that a crash buffer records as the last
    # file its process wrote (the process killed; here not yet reaped, a zombie whose pid
    # still looks alive), is not finished: recovery appends there. Once recovery has
    # appended and removed the buffer it is, and what was appended is read.
    base = str(tmp_path / "app.blog")
    pid = os.fork()
    if pid == 0:
        try:
            fresh_signals()
            s = blog.Session(name="dead")
            rf = blog.RotatingFile(base, rotate_bytes=1 << 20)
            with_crash_buffer(s, base, rf)
            log = s.get_logger()
            log.info("written {}", 1)
            s.consume(rf)
            log.info("buffered {}", 2)                 # in the crash buffer only
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)    # dead, not reaped
        [f] = members(str(tmp_path), "app")
        path = str(tmp_path / f.name)
        g = Growing(open(path, "rb"), path, in_set=True, buffers=buffer_directory(base),
                    interval=0.01)
        got = g.read()
        assert got and not g.finished()
        log = Log(base)
        try:
            [r] = recover_into(log, buffer_directory(base), print)
        finally:
            log.close()
        assert (r.events, r.path) == (1, path)
        assert g.finished()
        while data := g.read():
            got += data
        g.close()
        with open(path, "rb") as whole:
            assert got == whole.read()
        assert [e.message for e in bread.read(path)] == ["written 1", "buffered 2"]
    finally:
        os.waitpid(pid, 0)
