"""Crafted state: a crash buffer's control and channel files are input, never an instruction
(docs/security.md; blogstore/; manifests and catalogs: test_hostile_catalogs).

Each test plants state a local attacker (or a damaged disk) could leave where blog and bread
look, runs what an operator runs (``basic_config(crash_buffer=True)``, ``bread --recover``,
recovery itself), and checks by snapshots that nothing outside the log's own directory was
created, written, truncated or deleted, that no exception escaped, and that every event that
was readable before is still readable after.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import struct
import subprocess
import textwrap

import pytest

import blog
import bread
from blog.files.crashbuf import CTL, buffer_directory
from blogformat.errors import UnsafeBufferDirectory
from blogstore.crashlayout import CHAN, HALF, HALF_AT, PAGE, PATH_AT, REC
from blogstore.recovery import recover

from crafted import log_to, snapshot, victims
from helpers import abandon, python_child, run_python, seeded_random, with_crash_buffer

EVENTS = 200      # what the dead writer logged and never wrote (two threads, 100 each)


@pytest.fixture(scope="module")
def dead_writer(tmp_path_factory) -> str:
    """A directory holding ``app.blog`` and the crash buffer its writer left when SIGKILL
    ended it: 200 events logged, none written (a template: copy it, never change it)."""
    d = str(tmp_path_factory.mktemp("dead"))
    path = os.path.join(d, "app.blog")
    code = textwrap.dedent(f"""
        import os, signal, threading, blog
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        blog.basic_config({path!r}, crash_buffer=True, flush_interval=60)
        log = blog.get_logger()
        def work(tag):
            for i in range(100):
                log.info("{{}} {{}}", tag, i)
        t = threading.Thread(target=work, args=("t",)); t.start(); t.join()
        work("m")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run(python_child("-c", code), capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert glob.glob(os.path.join(buffer_directory(path), "*.meta"))
    return d


def _copy(dead_writer: str, root: str) -> str:
    """The dead writer's log and buffer copied to ``root/logs``; the log's path."""
    logs = os.path.join(root, "logs")
    shutil.copytree(dead_writer, logs, symlinks=True)
    return os.path.join(logs, "app.blog")


def _control_file(path: str) -> str:
    [meta] = glob.glob(os.path.join(buffer_directory(path), "*.meta"))
    return meta


def _aim_at(meta: str, target: str) -> None:
    """Make a control file name ``target`` as the log, and its device and inode as the file
    its process was writing (and was appending to when a recovery of it died), with a
    write in progress over all of it: every field recovery once believed."""
    st = os.stat(target)
    with open(meta, "r+b") as f:
        head = bytearray(f.read(PAGE))
        magic, version, pid, written, _, _, _, _, _ = CTL.unpack_from(head, 0)
        CTL.pack_into(head, 0, magic, version, pid, written, written + 1, st.st_dev, st.st_ino,
                      0, st.st_size + 100)
        REC.pack_into(head, 64, 1, st.st_dev, st.st_ino, 0, st.st_size + 100)
        raw = target.encode()
        struct.pack_into("<H", head, PATH_AT, len(raw))
        head[PATH_AT + 2:PATH_AT + 2 + len(raw)] = raw
        f.seek(0)
        f.write(head)


def _messages(path: str) -> list[str]:
    return [e.message for e in bread.read(path)]


def _expected() -> list[str]:
    return [f"t {i}" for i in range(100)] + [f"m {i}" for i in range(100)]


@pytest.mark.parametrize("how", ["basic_config", "bread --recover"])
def test_a_buffer_naming_a_file_outside_the_log_is_recovered_into_the_log_only(
        dead_writer, tmp_path, how):
    # Proves: the log path, device, inode and offsets a control file records are not
    # instructions. A buffer that names a file in another directory (as the file its
    # process wrote, was cutting and was appending to) makes recovery touch nothing there:
    # its events go to the log recovery was asked to recover, once.
    outside, victim = victims(str(tmp_path))
    path = _copy(dead_writer, str(tmp_path))
    _aim_at(_control_file(path), victim)
    before = snapshot(outside)
    if how == "basic_config":
        r = run_python(f"""
            import blog
            blog.basic_config({path!r}, crash_buffer=True)
            blog.get_logger().info("after {{}}", 1)
        """)
        assert r.returncode == 0, r.stderr
        assert f"recovered {EVENTS} event(s)" in r.stderr, r.stderr
        assert sorted(_messages(path)) == sorted(_expected() + ["after 1"])
    else:
        r = subprocess.run(python_child("-m", "bread", "--recover", path),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"recovered {EVENTS} event(s)" in r.stdout
        assert sorted(_messages(path)) == sorted(_expected())
    assert snapshot(outside) == before
    assert _messages(victim) == [f"victim {i}" for i in range(50)]


def _refused_directory_case(dead_writer: str, tmp_path, spoil) -> None:
    """A buffer directory ``spoil`` made untrustworthy is refused by the next start (which
    says why and logs to the file without a buffer) and by ``bread --recover`` (exit 2);
    nothing outside the log's directory changes, nor anything in the refused directory."""
    outside, victim = victims(str(tmp_path))
    path = _copy(dead_writer, str(tmp_path))
    directory = buffer_directory(path)
    _aim_at(_control_file(path), victim)
    why = spoil(directory)
    before, planted = snapshot(outside), snapshot(directory)
    r = subprocess.run(python_child("-m", "bread", "--recover", path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        blog.get_logger().info("after {{}}", 1)
    """)
    assert r.returncode == 0, r.stderr
    assert why in r.stderr and "without it" in r.stderr, r.stderr
    assert _messages(path) == ["after 1"]          # logging went on, unprotected
    assert snapshot(outside) == before
    assert snapshot(directory) == planted          # the planted buffer: left alone


def test_a_buffer_directory_others_may_write_is_refused(dead_writer, tmp_path):
    def spoil(directory: str) -> str:
        os.chmod(directory, 0o777)
        return "writable by group or others"
    _refused_directory_case(dead_writer, tmp_path, spoil)


def test_a_buffer_directory_that_is_a_link_is_refused(dead_writer, tmp_path):
    def spoil(directory: str) -> str:
        real = directory + ".real"
        os.rename(directory, real)
        os.symlink(real, directory)
        return "not a directory"
    _refused_directory_case(dead_writer, tmp_path, spoil)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's directory needs root")
def test_a_buffer_directory_of_another_user_is_refused(dead_writer, tmp_path):
    # Proves the attack the issue reproduced: a buffer directory another user planted in a
    # shared crash_dir (or handed to a root bread --recover) makes root append nothing.
    def spoil(directory: str) -> str:
        for d, _, files in os.walk(directory):
            for n in [d] + [os.path.join(d, f) for f in files]:
                os.lchown(n, 65534, 65534)
        return "owned by uid 65534"
    _refused_directory_case(dead_writer, tmp_path, spoil)


def test_a_planted_directory_in_a_shared_crash_dir_is_never_taken_over(tmp_path):
    # Proves: a process that finds its (predictable) buffer directory already made by
    # someone else, open to all, does not use it: it says why and logs without a buffer.
    path, shared = str(tmp_path / "logs" / "app.blog"), str(tmp_path / "shared")
    directory = buffer_directory(path, shared)
    os.makedirs(directory)
    os.mkdir(os.path.dirname(path))
    os.chmod(directory, 0o777)
    r = run_python(f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True, crash_dir={shared!r})
        blog.get_logger().info("x {{}}", 1)
    """)
    assert r.returncode == 0 and "writable by group or others" in r.stderr, r.stderr
    assert os.listdir(directory) == []
    assert _messages(path) == ["x 1"]


def test_a_new_buffer_directory_is_private(tmp_path):
    path = str(tmp_path / "app.blog")
    r = run_python(f"""
        import os, blog
        os.umask(0o002)
        blog.basic_config({path!r}, crash_buffer=True)
        blog.get_logger().info("x {{}}", 1)
        print(oct(os.stat({buffer_directory(path)!r}).st_mode & 0o777))
    """)
    assert r.returncode == 0 and r.stdout.strip() == "0o700", (r.stdout, r.stderr)


def _chan_files(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(buffer_directory(path), "*.chan")))


def test_a_length_beyond_its_file_is_damage_reported_not_a_crash_at_every_start(
        dead_writer, tmp_path):
    # Proves: a channel file whose length word says 2**40 (today: MemoryError in
    # basic_config and in bread --recover, at every start) is reported as damage; the
    # other channel's events are recovered; the damaged files are moved aside; the next
    # start is clean.
    path = _copy(dead_writer, str(tmp_path))
    first, second = _chan_files(path)
    with open(first, "r+b") as f:
        head = bytearray(f.read(PAGE))
        _, _, half, active = CHAN.unpack_from(head, 0)
        _, base, seq = HALF.unpack_from(head, HALF_AT + HALF.size * active)
        HALF.pack_into(head, HALF_AT + HALF.size * active, 1 << 40, base, seq)
        f.seek(0)
        f.write(head)
    code = f"""
        import blog
        blog.basic_config({path!r}, crash_buffer=True)
        blog.get_logger().info("after {{}}", 1)
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "is damaged" in r.stderr and "100 readable event(s) recovered" in r.stderr, r.stderr
    kept = sorted(os.listdir(buffer_directory(path)))
    assert kept and all(n.endswith(".damaged") for n in kept), kept
    got = _messages(path)
    assert len(got) == 101 and got[-1] == "after 1"
    assert {m.split()[0] for m in got[:100]} in ({"t"}, {"m"})
    r = run_python(code)
    assert r.returncode == 0 and r.stderr == "", r.stderr       # the next start: clean
    r = subprocess.run(python_child("-m", "bread", "--recover", path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "no abandoned" in r.stdout, r.stderr


# --- The fuzz test: random crafted buffers against recovery --------------------------------

FIELDS = 9 + 5          # the control page's words: CTL then REC


def _mutate(rng: random.Random, path: str, targets: list[str]) -> bool:
    """One random hostile change of the dead writer's buffer of ``path``: a control word, a
    channel word, a cut, random bytes, a link in place of a file, or a path in the page.
    False if it may have changed what an event says (random bytes)."""
    directory = buffer_directory(path)
    meta = _control_file(path)
    files = [meta] + _chan_files(path)
    if any(os.path.islink(p) for p in files):
        return True        # (the test itself must not write through a link it planted)
    kind = rng.randrange(8 if os.geteuid() == 0 else 7)
    victim = os.stat(rng.choice(targets))
    values = [0, 1, 2, rng.getrandbits(64), (1 << 64) - 1, 1 << 40, PAGE, victim.st_dev,
              victim.st_ino, victim.st_size, rng.randrange(1 << 20)]
    if kind == 0:      # a word of the control page (CTL's and REC's, after the magic)
        with open(meta, "r+b") as f:
            f.seek(8 + 8 * rng.randrange(FIELDS - 1) if rng.random() < 0.9 else 8)
            f.write(struct.pack("<Q", rng.choice(values)))
    elif kind == 1:    # a word of a channel file's header
        with open(rng.choice(files[1:]), "r+b") as f:
            f.seek(8 * rng.randrange(1, 14))     # up to the halves' from and rest
            f.write(struct.pack("<Q", rng.choice(values)))
    elif kind == 2:    # a file cut short
        p = rng.choice(files)
        os.truncate(p, rng.randrange(os.path.getsize(p) + 1))
    elif kind == 3:    # random bytes somewhere
        p = rng.choice(files)
        with open(p, "r+b") as f:
            f.seek(rng.randrange(os.path.getsize(p)))
            f.write(rng.randbytes(rng.randrange(1, 64)))
        return False
    elif kind == 4:    # a link in place of a buffer file, to a file outside
        p = rng.choice(files)
        os.unlink(p)
        os.symlink(rng.choice(targets), p)
    elif kind == 5:    # a log path elsewhere, and that file's place
        _aim_at(meta, rng.choice(targets))
    elif kind == 7:    # a buffer file of another user (root only)
        os.lchown(rng.choice(files), 65534, 65534)
    else:              # a file of the log's set that is a link to one outside
        name = f"app.2026-01-01T00-00-00.000.pid{os.path.basename(meta).split('-')[0]}.blog"
        link = os.path.join(os.path.dirname(directory), name)
        if not os.path.lexists(link):
            os.symlink(rng.choice(targets), link)
    return True


def test_crafted_buffers_never_touch_anything_outside_the_log(dead_writer, tmp_path):
    # Proves, for random crafted buffers (lengths, offsets, device and inode of files
    # outside, paths, links, cuts, random bytes, files of another user where the test runs
    # as root; one to three changes each): recovery
    # raises nothing but OSError, changes nothing outside the log's directory, keeps every
    # event the log held, and never repeats one (nor makes one up, where no event's bytes
    # were changed); a second recovery finds nothing to do.
    rng = seeded_random("HOSTILE_SEED", 2024)   # replay: HOSTILE_SEED=<seed>
    outside, victim = victims(str(tmp_path))
    targets = [victim, os.path.join(outside, "passwd")]
    before = snapshot(outside)
    for trial in range(40):
        root = str(tmp_path / f"t{trial}")
        path = _copy(dead_writer, root)
        s = blog.Session(name="earlier")
        out = blog.FileOutputStream(path)
        for i in range(10):
            s.get_logger("e").info("earlier {}", i)
        s.consume(out)
        intact = all([_mutate(rng, path, targets) for _ in range(rng.randrange(1, 4))])
        said: list[str] = []
        try:
            recover(buffer_directory(path), out, path, warn=said.append)
            failed = False
        except OSError:
            failed = True
        finally:
            out.close()
        got = _messages(path)
        assert got[:10] == [f"earlier {i}" for i in range(10)], (trial, said)
        rest = [tuple(e.args) for e in list(bread.read(path))[10:]]   # (a cut can lose formats)
        if intact:     # (random bytes may change what an event says: not its count)
            assert len(rest) == len(set(rest)), (trial, said)
            assert set(rest) <= {(m.split()[0], int(m.split()[1])) for m in _expected()}
        if not failed:
            again = blog.FileOutputStream(path)
            try:
                assert recover(buffer_directory(path), again, path, warn=said.append) == []
            finally:
                again.close()
        assert snapshot(outside) == before, (trial, said)


def test_recover_refuses_an_unsafe_directory_before_reading_it(dead_writer, tmp_path):
    path = _copy(dead_writer, str(tmp_path))
    os.chmod(buffer_directory(path), 0o757)
    out = blog.FileOutputStream(path)
    try:
        with pytest.raises(UnsafeBufferDirectory):
            recover(buffer_directory(path), out)
    finally:
        out.close()
    assert _messages(path) == []


# --- Review findings: honest processes' own files, lengths and clocks a buffer claims -----


def _killed(path: str, own: str | None = None, threads: int = 1, before: int = 0):
    """A session writing ``own`` (default ``path``) with a crash buffer for ``path``:
    ``before`` events written, then 10 per thread (main first) left in the buffer as if
    the process had been killed. Returns the stream's path."""
    import threading
    s = blog.Session(name="dead")
    stream = blog.FileOutputStream(own or path)
    log = s.get_logger("t")
    for i in range(before):
        log.info("written {}", i)
    s.consume(stream)
    cb = with_crash_buffer(s, path, stream)
    for k in range(threads):
        work = lambda k=k: [log.info("w{} {}", k, i) for i in range(10)]   # noqa: E731
        if k == 0:
            work()
        else:
            t = threading.Thread(target=work)
            t.start()
            t.join()
    abandon(cb)                           # as if killed: the lock goes, the files stay
    stream.close()
    return stream.path


def _recover_into(path: str, said: list[str]) -> list:
    out = blog.FileOutputStream(path)
    try:
        return recover(buffer_directory(path), out, path, warn=said.append)
    finally:
        out.close()


@pytest.mark.parametrize("name", ["app.pid{}.blog", "app.pid{}-2.blog"])
def test_a_dead_processs_own_pid_file_is_recovered_into_once(tmp_path, name):
    # Proves: a process that wrote its own app.pid<N>[-k].blog beside app.blog (another
    # had app.blog) and died right after a write reached its file whole, before recording
    # it, has that write recognised in its own file: recovery appends nothing twice there.
    path = str(tmp_path / "app.blog")
    own = str(tmp_path / name.format(os.getpid()))
    s = blog.Session(name="p")
    stream = blog.FileOutputStream(own)
    cb = with_crash_buffer(s, path, stream)
    log = s.get_logger("t")
    for i in range(10):
        log.info("a {}", i)
    s.consume(stream)
    for i in range(10):
        log.info("b {}", i)

    class Whole:      # writes all it is given, then the process "dies" before recording it
        position = stream.position

        def write(self, data):
            stream.write(bytes(data))
            raise SystemExit("killed")
    with pytest.raises(SystemExit):
        s.consume(Whole())
    abandon(cb)
    stream.close()
    said: list[str] = []
    assert _recover_into(path, said) == [] and said == []
    msgs = [e.message for e in bread.read(own)]
    assert msgs == [f"a {i}" for i in range(10)] + [f"b {i}" for i in range(10)]
    assert os.path.getsize(path) == 0


def test_a_recorded_write_longer_than_the_buffer_never_cuts_the_log(tmp_path):
    # Proves: a control file saying a write of 2**40 bytes from offset 0 was in progress
    # (damage, or a crafted file) does not cut the log: its 100 events stay; the buffer's
    # events are recovered; the damage is said and the files set aside.
    path = str(tmp_path / "app.blog")
    _killed(path, before=100)
    meta = _control_file(path)
    st = os.stat(path)
    with open(meta, "r+b") as f:
        magic, ver, pid, written, *_ = CTL.unpack(f.read(CTL.size))
        f.seek(0)
        f.write(CTL.pack(magic, ver, pid, written, written + 1, st.st_dev, st.st_ino, 0,
                         1 << 40))
    said: list[str] = []
    [r] = _recover_into(path, said)
    assert r.events == 10 and "not cut" in said[0], said
    assert _messages(path) == [f"written {i}" for i in range(100)] + [f"w0 {i}" for i in range(10)]


def test_a_cut_never_takes_another_processs_stream(tmp_path):
    # Proves: a recorded write that would begin at another process's stream (its header
    # names another pid) is not cut, whatever length it claims.
    path = str(tmp_path / "app.blog")
    log_to(path, "other", 30)
    _killed(path)
    meta = _control_file(path)
    st = os.stat(path)
    with open(meta, "r+b") as f:      # the dead process: another pid than the stream's
        magic, ver, pid, written, *_ = CTL.unpack(f.read(CTL.size))
        f.seek(0)
        f.write(CTL.pack(magic, ver, pid + 1, written, written + 1, st.st_dev, st.st_ino, 0,
                         st.st_size + 10))
    said: list[str] = []
    _recover_into(path, said)
    assert _messages(path)[:30] == [f"other {i}" for i in range(30)]


def test_a_clock_past_64_bits_loses_only_what_follows_it(tmp_path):
    # Proves: one crafted event whose clock delta leaves the batch header's range is
    # damage of its channel from there on; every readable event of the buffer is recovered.
    import msgpack
    path = str(tmp_path / "app.blog")
    _killed(path, threads=2)
    last = _chan_files(path)[-1]
    with open(last, "r+b") as f:
        head = f.read(PAGE)
        _, _, half, active = CHAN.unpack_from(head, 0)
        n, base, seq = HALF.unpack_from(head, HALF_AT + HALF.size * active)
        ev = msgpack.packb([1, (1 << 64) - 1, []])
        f.seek(PAGE + active * half + n)
        f.write(ev)
        f.seek(HALF_AT + HALF.size * active)
        f.write(HALF.pack(n + len(ev), base, seq))
    said: list[str] = []
    [r] = _recover_into(path, said)
    assert r.events == 20 and "unreadable" in said[0], said
    assert sorted(_messages(path)) == sorted([f"w0 {i}" for i in range(10)]
                                             + [f"w1 {i}" for i in range(10)])


def test_a_sparse_half_claiming_a_gigabyte_is_read_only_as_far_as_it_decodes(tmp_path):
    # Proves: a channel file whose half claims 1 GiB (a sparse file: holes read as zeros)
    # is read piece by piece and ends at the first byte that is no event: its 10 events
    # are recovered and the rest reported, with no gigabyte held in memory.
    path = str(tmp_path / "app.blog")
    _killed(path)
    [chan] = _chan_files(path)
    with open(chan, "r+b") as f:
        head = bytearray(f.read(PAGE))
        magic, wid, half, active = CHAN.unpack_from(head, 0)
        n, base, seq = HALF.unpack_from(head, HALF_AT + HALF.size * active)
        big = 1 << 30
        f.seek(PAGE)
        data = f.read(2 * half)
        CHAN.pack_into(head, 0, magic, wid, big, 0)
        HALF.pack_into(head, HALF_AT, big - 1, base, 0)     # its events, then holes
        f.seek(0)
        f.write(head)
        f.seek(PAGE)
        f.write(data[active * half:active * half + n])
        f.truncate(PAGE + 2 * big)               # sparse: no blocks behind it
    said: list[str] = []
    [r] = _recover_into(path, said)
    assert r.events == 10 and "unreadable" in said[0], said


def test_a_control_file_shorter_than_its_page_is_set_aside_and_said(tmp_path):
    path = str(tmp_path / "app.blog")
    _killed(path)
    meta = _control_file(path)
    os.truncate(meta, 100)
    said: list[str] = []
    assert _recover_into(path, said) == []
    assert "shorter than its control page" in said[0], said
    assert all(n.endswith(".damaged") for n in os.listdir(buffer_directory(path)))


def test_a_buffer_directory_replaced_after_its_check_changes_nothing_elsewhere(
        tmp_path, monkeypatch):
    # Proves: recovery reaches the buffer's files through the directory it checked. A
    # directory swapped for a link to another of the user's directories between the check
    # and the work (another user's rename in a shared crash_dir) loses nothing there.
    path = str(tmp_path / "app.blog")
    _killed(path)
    victim = tmp_path / "home"
    victim.mkdir()
    for n in ("notes.meta", "job.new", "cache.chan"):
        (victim / n).write_bytes(b"mine")
    from blogstore import recovery
    real_open = recovery.open_directory

    def open_then_swap(d):
        fd = real_open(d)
        os.rename(d, d + ".moved")
        os.symlink(str(victim), d)
        return fd
    monkeypatch.setattr(recovery, "open_directory", open_then_swap)
    said: list[str] = []
    [r] = _recover_into(path, said)
    assert r.events == 10
    assert sorted(os.listdir(victim)) == ["cache.chan", "job.new", "notes.meta"]
    assert all((victim / n).read_bytes() == b"mine" for n in os.listdir(victim))
