"""Rotation, retention and compression of file sets, as a long-running service uses them."""

from __future__ import annotations

import collections
import datetime as _dt
import fcntl
import gzip
import os
import subprocess
import textwrap
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

import blog
import bread
from blog.files.housekeeping import Retention, compress, expired, recover
from blog.files.schedule import Schedule
from blog.pipeline.summary import py_tally
from blogstore.fileset import file_name, members, parse

from helpers import flushed_one_by_one, python_child, run_python, start_size


def _session(stream, **kw):
    s = blog.Session(**kw)
    c = blog.Consumer(s, stream, interval=0.005).start()
    return s, c


def _close(c, stream):
    c.stop()
    stream.close()


def _switch(s, rf) -> None:
    """End ``rf``'s current file now (its Summary); the next consume starts the next one
    (rotate_bytes cuts a consume between files: it makes a file per event, not per batch)."""
    s.finish(rf)
    rf.rotate()


def _files(d, stem="app"):
    return [os.path.join(d, f.name) for f in members(str(d), stem)]


def test_eight_threads_through_a_hundred_rotations_lose_and_repeat_nothing(tmp_path):
    # Proves: across >= 100 switches, each cutting a consume between files, every event
    # of 8 threads is in exactly one file, in its writer's order; each file reads on its
    # own (header and all metadata again), with no damage and no unknown source; each
    # ends with a Summary that counts exactly its events per source.
    s = blog.Session()      # ~2000 bytes of events per file, besides its metadata:
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=2000 + start_size(s))
    c = blog.Consumer(s, rf, interval=0.005).start()
    log = s.get_logger("t")
    rounds, per_round = 110, 25
    n = rounds * per_round
    gate = threading.Barrier(9)

    def work(k):
        for r in range(rounds):
            for i in range(r * per_round, (r + 1) * per_round):
                log.info("w {} i {} pad {}", k, i, "x" * 20)
            gate.wait()            # then logs on while the main thread consumes

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for _ in range(rounds):        # each consume holds > rotate_bytes: a switch each time
        gate.wait()
        c.flush()
    for t in threads:
        t.join()
    _close(c, rf)
    files = _files(tmp_path)
    assert len(files) >= 100 and len(files) == rf.files
    seen: dict[int, list[int]] = {k: [] for k in range(8)}
    for path in files:
        r = bread.read(path)
        evs = list(r)
        assert r.damage == [] and r.unknown_sources == 0 and r.notices == []
        assert len(r.headers) == 1 and len(r.summaries) == 1
        summ = r.summaries[0]
        by_source: dict[int, int] = {}
        for e in evs:
            by_source[e.source.id] = by_source.get(e.source.id, 0) + 1
            k, i = e.args[0], e.args[1]
            seen[k].append(i)
        assert summ.events == len(evs) and summ.sources == by_source
        if evs:
            assert summ.first_clock == min(e.clock for e in evs)
            assert summ.last_clock == max(e.clock for e in evs)
    assert all(seen[k] == list(range(n)) for k in range(8))
    # The directory reads as one log, in order of the files.
    assert sum(1 for _ in bread.read(str(tmp_path))) == 8 * n


def test_file_names_sort_by_time_and_carry_the_pid(tmp_path):
    rf = blog.RotatingFile(tmp_path / "logs" / "app.blog", rotate_bytes=1)
    flushed_one_by_one(rf, 5)
    names = sorted(n for n in os.listdir(tmp_path / "logs") if not n.startswith("blog-manifest"))
    parsed = [parse(n) for n in names]
    assert all(p is not None and p.stem == "app" and p.pid == os.getpid() for p in parsed)
    times = [p.time_ns for p in parsed]
    assert times == sorted(times) and len(set(times)) == len(times)   # never the same name
    assert [e.message for e in bread.read(str(tmp_path / "logs"))] == [f"e {i}" for i in range(5)]
    assert [e.message for e in bread.read(str(tmp_path / "logs" / "app.*"))] == \
        [f"e {i}" for i in range(5)]


def test_the_name_scheme_round_trips():
    t = 1_764_151_200_123_000_000   # 2025-11-26T10:00:00.123Z
    name = file_name("app.v2", t, 4242)
    assert name == "app.v2.2025-11-26T10-00-00.123.pid4242.blog"
    p = parse(name)
    assert p is not None and (p.stem, p.time_ns, p.pid, p.compressed) == ("app.v2", t, 4242, False)
    assert parse(name + ".gz").compressed and parse(name + ".gz").plain_name == name
    for other in ("app.blog", "app.2025-11-26T10-00-00.pid1.blog", "app.x.pid1.blog",
                  name + ".gz.tmp", "app.2025-13-26T10-00-00.123.pid1.blog"):
        assert parse(other) is None


# --- the Summary entry --------------------------------------------------------------


def test_a_cleanly_closed_file_ends_with_a_summary_and_a_killed_one_does_not(tmp_path):
    # Proves: shutdown ends the file with a Summary of what it holds (per source, clocks,
    # drops); a SIGKILLed writer leaves none, which is how a reader tells.
    code = textwrap.dedent("""
        import os, signal, sys, blog
        blog.basic_config(sys.argv[1], flush_interval=0.001)
        log = blog.get_logger()
        for i in range(300):
            log.info("a {}", i)
        for i in range(200):
            log.warning("b {}", i)
        blog.flush()
        if sys.argv[2] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    for how in ("clean", "kill"):
        path = tmp_path / f"{how}.blog"
        subprocess.run(python_child("-c", code, str(path), how), timeout=60)
        r = bread.read(path)
        evs = list(r)
        assert len(evs) == 500
        if how == "kill":
            assert r.summaries == []
            continue
        (summ,) = r.summaries
        ids = {e.message.split()[0]: e.source.id for e in evs}
        assert summ.sources == {ids["a"]: 300, ids["b"]: 200}
        assert (summ.events, summ.dropped, summ.lost) == (500, 0, 0)
        assert summ.first_clock == evs[0].clock and summ.last_clock == evs[-1].clock


def test_old_readers_skip_the_summary():
    # Proves: the Summary is a metadata entry of a new tag, which a reader that does not
    # know it skips (format.md 11): the independent spec decoder, which knows tags 1-5
    # only, reads such a file to the same events.
    from test_format_spec import decode
    out = blog.MemoryOutputStream()
    s, c = _session(out)
    s.get_logger().info("x {}", 1)
    c.stop()
    data = out.getvalue()
    assert b"\x96\x06" in data or b"\x98\x06" in data   # a tag-6 entry array is there
    mine = decode(data)
    assert [e["args"] for e in mine["events"]] == [(1,)]


def test_summary_counts_are_the_same_in_c_and_in_python():
    from blog import accel
    if accel.speedups is None:
        pytest.skip("pure-Python run: the C counter is not built or not used")
    sp = accel.speedups

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.tuples(st.integers(1, 70000),
                              st.lists(st.one_of(st.integers(-2**63, 2**64 - 1), st.floats(),
                                                 st.text(max_size=40), st.binary(max_size=300),
                                                 st.lists(st.integers(-2**63, 2**64 - 1),
                                                          max_size=20),
                                                 st.dictionaries(st.text(max_size=5),
                                                                 st.none(), max_size=5)),
                                       max_size=6),
                              st.booleans()), max_size=50))
    def check(events):
        import msgpack
        data = b"".join(msgpack.packb([sid, -5, args, {0: "t"}] if texts else [sid, 7, args])
                        for sid, args, texts in events)
        c_counts: dict[int, int] = {}
        sp.tally(data, len(events), c_counts)
        py_counts: dict[int, int] = {}
        py_tally(data, len(events), py_counts)
        expect: dict[int, int] = {}
        for sid, _, _ in events:
            expect[sid] = expect.get(sid, 0) + 1
        assert c_counts == py_counts == expect

    check()
    with pytest.raises(ValueError):
        sp.tally(b"\x93\x01", 1, {})          # cut short: refused, not read past the end


# --- rotation by time -------------------------------------------------------------------


def test_rotate_every_switches_on_the_boundaries_of_the_zone():
    london = Schedule(every="1h", tz="Europe/London")
    t = int(_dt.datetime(2026, 7, 1, 10, 20, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
    nxt = london.next_after(t)
    assert nxt == int(_dt.datetime(2026, 7, 1, 11, 0, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
    six = Schedule(every="6h", tz="Asia/Kolkata")   # UTC+5:30: boundaries at local 00, 06...
    nxt = six.next_after(t)
    local = _dt.datetime.fromtimestamp(nxt / 1e9, _dt.timezone(_dt.timedelta(hours=5.5)))
    assert (local.hour, local.minute) == (18, 0)
    seven = Schedule(every="7h", tz="UTC")          # starts afresh at midnight
    t2 = int(_dt.datetime(2026, 7, 1, 22, 0, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
    assert seven.next_after(t2) == int(_dt.datetime(2026, 7, 2, tzinfo=_dt.timezone.utc)
                                       .timestamp()) * 10**9


def _utc(*a):
    return int(_dt.datetime(*a, tzinfo=_dt.timezone.utc).timestamp()) * 10**9


def test_rotate_at_is_right_on_daylight_saving_days():
    # London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT.
    midnight = Schedule(at="00:00", tz="Europe/London")
    assert midnight.next_after(_utc(2026, 3, 28, 12)) == _utc(2026, 3, 29, 0)       # GMT
    assert midnight.next_after(_utc(2026, 3, 29, 12)) == _utc(2026, 3, 29, 23)      # BST
    assert midnight.next_after(_utc(2026, 10, 25, 12)) == _utc(2026, 10, 26, 0)     # GMT again
    gap = Schedule(at="01:30", tz="Europe/London")   # does not exist on 29 March: the jump
    assert gap.next_after(_utc(2026, 3, 28, 12)) == _utc(2026, 3, 29, 1)
    twice = Schedule(at="01:30", tz="Europe/London")  # twice on 25 October: the first only
    assert twice.next_after(_utc(2026, 10, 24, 12)) == _utc(2026, 10, 25, 0, 30)
    assert twice.next_after(_utc(2026, 10, 25, 0, 30)) == _utc(2026, 10, 26, 1, 30)
    both = Schedule(every="1d", at=["06:00", "18:00"], tz="UTC")   # any combination: the soonest
    assert both.next_after(_utc(2026, 1, 1, 7)) == _utc(2026, 1, 1, 18)
    ny = Schedule(at="02:30", tz="America/New_York")  # 2026-03-08 02:00 EST -> 03:00 EDT
    assert ny.next_after(_utc(2026, 3, 7, 12)) == _utc(2026, 3, 8, 7)
    six = Schedule(every="6h", tz="Europe/London")    # on the wall clock, DST days too
    t, got = _utc(2026, 3, 28, 22), []
    for _ in range(4):
        t = six.next_after(t)
        got.append(t)
    assert got == [_utc(2026, 3, 29, 0), _utc(2026, 3, 29, 5), _utc(2026, 3, 29, 11),
                   _utc(2026, 3, 29, 17)]
    lord_howe = Schedule(every="1h", tz="Australia/Lord_Howe")    # UTC+10:30: on its hour
    assert lord_howe.next_after(_utc(2026, 7, 1)) == _utc(2026, 7, 1, 0, 30)


def test_rotate_every_switches_files_while_logging(tmp_path):
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_every=1)
    s, c = _session(rf)
    log = s.get_logger()
    end = time.time() + 2.3
    i = 0
    while time.time() < end:
        log.info("e {}", i)
        i += 1
        time.sleep(0.002)
    _close(c, rf)
    files = _files(tmp_path)
    assert len(files) >= 3
    got = [e.args[0] for f in files for e in bread.read(f)]
    assert got == list(range(i))
    for f in files[:-1]:      # each file's events end before the next second begins
        last = max(e.clock for e in bread.read(f))
        assert last // 10**9 < (parse(os.path.basename(f)).time_ns // 10**9) + 2


# --- retention and compression ------------------------------------------------------------


def _make_closed(d, stem, k, size=100, pid=1, age_days=0.0):
    name = file_name(stem, 1_700_000_000_000_000_000 + k * 10**9, pid)
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(b"x" * size)
    t = time.time() - age_days * 86400
    os.utime(p, (t, t))
    return p


def test_retention_by_count_age_and_bytes_deletes_only_closed_files_of_the_set(tmp_path):
    d = str(tmp_path)
    files = [_make_closed(d, "app", k, size=100, age_days=10 - k) for k in range(10)]
    foreign = [os.path.join(d, n) for n in ("app.blog", "notes.txt", "other.2026-01-01T00-00-00"
                                             ".000.pid1.blog", "app.backup.blog")]
    for p in foreign:
        open(p, "w").close()
    held = open(files[0], "rb")       # another process writing it: holds its lock
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    try:
        from blog.files.housekeeping import closed_files
        closed = closed_files(d, "app")
        assert [f.name for f, _ in closed] == [os.path.basename(p) for p in files[1:]]
        now = time.time()
        by_age = expired(closed, Retention(keep_days=5.5), now)
        assert [f.name for f in by_age] == [os.path.basename(p) for p in files[1:5]]
        by_count = expired(closed, Retention(keep_files=3), now)
        assert len(by_count) == 6 and by_count[-1].name == os.path.basename(files[6])
        by_bytes = expired(closed, Retention(keep_bytes=250), now)
        assert [f.name for f in by_bytes] == [os.path.basename(p) for p in files[1:8]]
        # Through a RotatingFile: at start, the oldest closed files beyond 3 go.
        rf = blog.RotatingFile(tmp_path / "app.blog", keep_files=3)
        rf.wait()
        left = sorted(os.listdir(d))
        assert os.path.basename(files[0]) in left          # held: never touched
        assert all(os.path.basename(p) in left for p in foreign)
        kept = [p for p in files[1:] if os.path.basename(p) in left]
        assert kept == files[-3:]
        rf.close()
    finally:
        held.close()


def test_closed_files_are_compressed_in_the_background_and_read_transparently(tmp_path):
    s = blog.Session()      # ~3000 bytes of events per file, besides its metadata:
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=3000 + start_size(s),
                           compress=True)
    c = blog.Consumer(s, rf, interval=0.005).start()
    log = s.get_logger()
    for i in range(3000):
        log.info("order {} filled at {}", i, 101.25)
        if i % 200 == 0:
            c.flush()
    _close(c, rf)             # waits for the housekeeping of the closed files
    names = sorted(n for n in os.listdir(tmp_path) if not n.startswith("blog-manifest"))
    assert len(names) >= 5 and all(n.endswith(".blog.gz") for n in names)
    assert not any(n.endswith(".tmp") for n in names)
    r = bread.read(str(tmp_path))
    assert [e.args[0] for e in r] == list(range(3000)) and r.damage == []
    assert sum(x.events for x in r.summaries) == 3000


def test_an_interrupted_compression_is_finished_or_undone_at_the_next_start(tmp_path):
    d = str(tmp_path)
    a = _make_closed(d, "app", 1)
    b = _make_closed(d, "app", 2)
    with open(a + ".gz.tmp", "wb") as f:            # cut while writing the copy
        f.write(gzip.compress(b"x" * 100)[:20])
    compress(d, os.path.basename(b))               # cut after the rename: both exist
    with open(b, "wb") as f:
        f.write(b"x" * 100)
    assert sorted(os.listdir(d)) == sorted([os.path.basename(p) for p in
                                            (a, a + ".gz.tmp", b, b + ".gz")])
    assert bread.inputs.expand([d]) == [a, b]      # meanwhile, each file is read once
    removed = recover(d, "app")
    assert sorted(removed) == sorted([a + ".gz.tmp", b])
    assert sorted(os.listdir(d)) == sorted([os.path.basename(a), os.path.basename(b) + ".gz"])



def test_a_link_planted_at_a_compression_temporary_name_is_never_followed(tmp_path):
    # Proves: compressing x.blog through x.blog.gz.tmp never writes through a link planted
    # at that name: its target outside the directory is untouched, and x.blog.gz holds
    # x.blog's bytes.
    d = tmp_path / "logs"
    d.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    a = _make_closed(str(d), "app", 1)
    (other / "precious").write_bytes(b"precious")
    os.symlink(other / "precious", a + ".gz.tmp")
    assert compress(str(d), os.path.basename(a)) == a + ".gz"
    assert (other / "precious").read_bytes() == b"precious"
    assert gzip.decompress((d / (os.path.basename(a) + ".gz")).read_bytes()) == b"x" * 100


# --- bad configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("kw, needle", [
    (dict(rotate_bytes=-1), "rotate_bytes"),
    (dict(rotate_bytes=0), "rotate_bytes"),
    (dict(rotate_at="25:00"), "rotate_at"),
    (dict(rotate_at="12:61"), "rotate_at"),
    (dict(rotate_every="often"), "rotate_every"),
    (dict(rotate_every=0.5), "rotate_every"),
    (dict(rotate_every="1h", tz="Mars/Olympus"), "tz"),
    (dict(tz="UTC"), "tz"),
    (dict(keep_files=0), "keep_files"),
    (dict(keep_days=-2), "keep_days"),
    (dict(keep_bytes=1.5), "keep_bytes"),
    (dict(compress="yes"), "compress"),
    (dict(rotate_every=float("inf")), "rotate_every"),
    (dict(rotate_bytes=1, fsync="no"), "fsync"),
])
def test_bad_rotation_options_are_refused_naming_the_option_before_anything_is_opened(
        tmp_path, kw, needle):
    with pytest.raises(ValueError, match=needle):
        blog.RotatingFile(tmp_path / "logs" / "app.blog", **kw)
    with pytest.raises(ValueError, match=needle):
        blog.basic_config(str(tmp_path / "logs" / "app.blog"), **kw)
    assert not (tmp_path / "logs").exists()


def test_a_log_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        blog.RotatingFile(tmp_path / "file" / "app.blog", rotate_bytes=100)
    with pytest.raises(TypeError, match="path"):
        blog.basic_config(blog.MemoryOutputStream(), rotate_bytes=100)


def test_a_directory_removed_while_running_is_made_again_and_nothing_is_lost(tmp_path):
    import shutil
    d = tmp_path / "logs"
    s = blog.Session()
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=2000 + start_size(s))
    c = blog.Consumer(s, rf, interval=0.005).start()
    log = s.get_logger()
    for i in range(300):
        log.info("e {}", i)
        if i == 100:
            c.flush()
            rf.wait()
            shutil.rmtree(d)      # an operator cleans up at the wrong moment
        if i % 20 == 0:
            c.flush()
    _close(c, rf)
    got = [e.args[0] for e in bread.read(str(d))]
    assert got[-1] == 299 and got == list(range(got[0], 300))
    assert s.stats.events_lost == 0


# --- processes -------------------------------------------------------------------------


def test_a_forked_child_logs_into_its_own_file_set(tmp_path):
    # Proves: after fork, the child goes on in a set of its own (its pid, same options),
    # the parent's file is never written by the child, and nothing is duplicated.
    r = run_python("""
        import os, blog
        blog.basic_config("logs/app.blog", rotate_bytes=4000, flush_interval=0.005)
        log = blog.get_logger()
        for i in range(50):
            log.info("parent {}", i)
        kids = []
        for k in range(3):
            pid = os.fork()
            if pid == 0:
                for i in range(400):
                    log.info("child {} {}", k, i)
                blog.shutdown()
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        log.info("parent {}", "after")
        blog.shutdown()
        print(*kids)
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    kids = [int(x) for x in r.stdout.split()]
    d = tmp_path / "logs"
    by_pid: dict[int, list[str]] = {}
    for f in members(str(d), "app"):
        for e in bread.read(str(d / f.name)):
            assert e.pid == f.pid
            by_pid.setdefault(f.pid, []).append(e.message)
    assert len(by_pid) == 4 and set(kids) < set(by_pid)
    for k, pid in enumerate(kids):
        assert by_pid[pid] == [f"child {k} {i}" for i in range(400)]
    parent = next(p for p in by_pid if p not in kids)
    assert by_pid[parent] == [f"parent {i}" for i in range(50)] + ["parent after"]


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_multiprocessing_children_log_with_the_same_configuration(tmp_path, method):
    (tmp_path / "work.py").write_text(textwrap.dedent("""
        import blog
        log = blog.get_logger("work")
        def job(k):
            for i in range(100):
                log.debug("below min_severity {}", i)
                log.info("job {} {}", k, i)
    """))
    # The options reach the child as they are (a str Enum as its value, a Severity, a
    # timedelta): a child whose configuration fails logs nothing to the set.
    r = run_python(f"""
        import datetime, enum, multiprocessing as mp, os, sys
        sys.path.insert(0, os.getcwd())
        import blog, work
        class Overflow(str, enum.Enum):
            DROP = "drop"
        if __name__ == "__main__":
            blog.basic_config("logs/app.blog", rotate_bytes=1 << 20, compress=True,
                              overflow=Overflow.DROP, min_severity=blog.Severity.INFO,
                              rotate_every=datetime.timedelta(days=1))
            ctx = mp.get_context("{method}")
            ps = [ctx.Process(target=work.job, args=(k,)) for k in range(2)]
            for p in ps: p.start()
            for p in ps: p.join()
            work.log.info("parent done")
            blog.shutdown()
            print(*[p.pid for p in ps])
    """, tmp_path)
    assert r.returncode == 0 and "blog:" not in r.stderr, r.stderr
    kids = [int(x) for x in r.stdout.split()]
    d = tmp_path / "logs"
    by_pid: dict[int, list[str]] = {}
    for f in members(str(d), "app"):
        by_pid.setdefault(f.pid, []).extend(e.message for e in bread.read(str(d / f.name)))
    for k, pid in enumerate(kids):
        assert by_pid.get(pid) == [f"job {k} {i}" for i in range(100)], (method, by_pid.keys())
    assert [m for p, ms in by_pid.items() if p not in kids for m in ms] == ["parent done"]


# --- the manifest ----------------------------------------------------------------------

def test_the_manifest_lists_each_closed_file_with_its_range_and_count(tmp_path):
    from blogstore import manifest
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1 << 20, compress=True)
    s = blog.Session()   # consumed only by flush: one file per batch however slow the machine
    c = blog.Consumer(s, rf, interval=3600).start()
    log = s.get_logger()
    for h in range(4):
        for i in range(50):
            log.info("batch {} event {}", h, i)
        c.flush()
        if h < 3:
            _switch(s, rf)
    _close(c, rf)
    m = manifest.load(str(tmp_path))
    assert m is not None and m["manifest_version"] == 1 and m["format_version"] == 1
    files = members(str(tmp_path), "app")
    assert sorted(m["files"]) == sorted(f.name for f in files) and len(files) == 4
    for f in files:
        e = m["files"][f.name]
        evs = list(bread.read(str(tmp_path / f.name)))
        assert e["state"] == "compressed" and e["bytes"] == os.path.getsize(tmp_path / f.name)
        assert e["events"] == len(evs) == 50
        assert (e["first_ns"], e["last_ns"]) == (min(x.ns for x in evs), max(x.ns for x in evs))
    # A damaged manifest is rebuilt from the files at the next start, to the same entries.
    (tmp_path / manifest.NAME).write_text("{not json")
    assert manifest.load(str(tmp_path)) is None
    rf2 = blog.RotatingFile(tmp_path / "app.blog")
    rf2.wait()
    rf2.close()
    assert manifest.load(str(tmp_path))["files"] == m["files"]


def test_reading_a_time_window_skips_files_the_manifest_puts_outside_it(tmp_path):
    from blogstore import manifest
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1 << 20)
    s, c = _session(rf)
    log = s.get_logger()
    for h in range(4):
        for i in range(20):
            log.info("batch {} event {}", h, i)
        c.flush()
        if h < 3:
            _switch(s, rf)
        time.sleep(0.05)
    _close(c, rf)
    files = [f.name for f in members(str(tmp_path), "app")]
    m = manifest.load(str(tmp_path))
    since = m["files"][files[2]]["first_ns"]           # from the third file on
    r = bread.read(str(tmp_path), since=since)
    got = [e.message for e in r]
    assert got == [f"batch {h} event {i}" for h in (2, 3) for i in range(20)]
    assert [os.path.basename(p) for p in r.skipped] == files[:2]
    until = m["files"][files[1]]["last_ns"] + 1        # up to the second file
    r = bread.read(str(tmp_path), until=until)
    assert [e.message for e in r][-1] == "batch 1 event 19"
    assert [os.path.basename(p) for p in r.skipped] == files[2:]
    # The files win: an entry whose size does not match its file is not trusted.
    with open(tmp_path / files[0], "ab") as f:
        f.write(b"\0")
    r = bread.read(str(tmp_path), since=since)
    assert [e.message for e in r] == got and len(r.damage) == 1   # read, found nothing in it
    assert [os.path.basename(p) for p in r.skipped] == files[1:2]
    # The CLI reads through the same reader.
    iso = (_dt.datetime.fromtimestamp(since // 10**9, _dt.timezone.utc)
           + _dt.timedelta(microseconds=since % 10**9 // 1000)).isoformat()
    out = subprocess.run(python_child("-m", "bread", "-f", "%m", "--since", iso,
                          str(tmp_path)), capture_output=True, text=True)
    assert out.stdout.split("\n")[:2] == ["batch 2 event 0", "batch 2 event 1"]


def test_the_service_example_runs_as_documented(tmp_path):
    # Proves: examples/service.py (a master and 3 forked workers) leaves one set per
    # process, every file closed cleanly and compressed, which bread -s merges by time.
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "service.py")
    r = subprocess.run(python_child(example, str(tmp_path / "logs"), "1"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    files = members(str(tmp_path / "logs"), "service")
    assert len({f.pid for f in files}) == 4 and all(f.compressed for f in files)
    rd = bread.read(str(tmp_path / "logs"), sort=True)
    evs = list(rd)
    assert rd.damage == [] and len(rd.summaries) == len(files)
    assert [e.ns for e in evs] == sorted(e.ns for e in evs)
    assert evs[-1].message == "master done"
    assert sum(e.message.startswith("worker") and e.message.endswith("orders")
               for e in evs) == 3


# --- found by review: each once a defect --------------------------------------------------

def test_a_file_whose_output_failed_midway_is_still_found_by_a_time_window(tmp_path):
    # Proves: the manifest describes a file from its frames, not from the Summary of its
    # last stream: events before an output failure (a new stream in the same file) and a
    # file closed without a Summary are not skipped by a time window.
    class Flaky(blog.RotatingFile):
        fail = 0

        def write(self, data):
            if self.fail:
                self.fail -= 1
                raise OSError(28, "No space left on device")
            return super().write(data)

    rf = Flaky(tmp_path / "app.blog")
    s, c = _session(rf)
    log = s.get_logger()
    log.info("A {}", 1)
    c.flush()
    t_mid = time.time_ns()
    rf.fail = 1
    log.info("lost {}", 2)
    c.flush()
    time.sleep(0.01)
    log.info("C {}", 3)
    c.flush()
    _close(c, rf)
    r = bread.read(str(tmp_path), until=t_mid)
    assert [e.message for e in r] == ["A 1"] and r.skipped == []


def test_patterns_read_like_directories(tmp_path):
    d = str(tmp_path)
    a = _make_closed(d, "app", 1)
    os.unlink(a)
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1)
    flushed_one_by_one(rf, 3)
    first = _files(tmp_path)[0]
    with open(first, "rb") as f:            # a compression cut after its rename
        data = f.read()
    with open(first + ".gz", "wb") as f:
        f.write(gzip.compress(data))
    open(first + ".gz.tmp", "wb").close()
    open(os.path.join(d, "app.2026-01-01T00-00-00.000.pid1.blog.new"), "wb").close()
    want = [f"e {i}" for i in range(3)]
    assert [e.message for e in bread.read(str(tmp_path / "app.*"))] == want
    assert [e.message for e in bread.read(d)] == want


def test_a_set_is_read_by_the_name_it_was_configured_with(tmp_path, capsys):
    # Proves: `bread logs/app.blog` (the name given to basic_config, which names no file)
    # reads the set's files, compressed ones too, in time order, and no other set's of the
    # directory; `bread.read` the same; a base name with no set is still "no such file".
    flushed_one_by_one(blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1), 3)
    first = _files(tmp_path)[0]
    with open(first, "rb") as f:
        data = f.read()
    with open(first + ".gz", "wb") as f:
        f.write(gzip.compress(data))
    os.unlink(first)
    flushed_one_by_one(blog.RotatingFile(tmp_path / "other.blog", rotate_bytes=1), 2)
    base = str(tmp_path / "app.blog")
    assert not os.path.lexists(base)
    assert [e.message for e in bread.read(base)] == [f"e {i}" for i in range(3)]
    assert bread.cli.main(["-f", "%m", base]) == 0
    assert capsys.readouterr().out.splitlines() == [f"e {i}" for i in range(3)]
    assert bread.cli.main(["-f", "%m", str(tmp_path / "none.blog")]) == 2
    assert "none.blog" in capsys.readouterr().err


def test_recovery_leaves_a_file_another_live_process_is_making(tmp_path):
    d = str(tmp_path)
    mine = file_name("app", 1_700_000_000_000_000_000, os.getpid()) + ".new"
    dead = file_name("app", 1_700_000_001_000_000_000, 2**22 + 7) + ".new"
    other = file_name("app.x", 1_700_000_001_000_000_000, 2**22 + 7) + ".new"
    for n in (mine, dead, other):
        open(os.path.join(d, n), "wb").close()
    removed = recover(d, "app")
    assert [os.path.basename(p) for p in removed] == [dead]
    assert sorted(os.listdir(d)) == sorted([mine, other])


def test_compression_keeps_the_age_of_a_file_for_retention(tmp_path):
    d = str(tmp_path)
    old = [_make_closed(d, "app", k, age_days=30) for k in range(3)]
    new = _make_closed(d, "app", 9, age_days=1)
    rf = blog.RotatingFile(tmp_path / "app.blog", keep_days=7, compress=True)
    rf.wait()
    rf.close()
    left = sorted(n for n in os.listdir(d) if not n.startswith("blog-"))
    assert left == [os.path.basename(new) + ".gz"]
    assert 0.9 < (time.time() - os.stat(os.path.join(d, left[0])).st_mtime) / 86400 < 1.1
    del old


def test_a_relative_path_is_taken_where_it_was_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rf = blog.RotatingFile("logs/app.blog", rotate_bytes=1)
    s, c = _session(rf)
    log = s.get_logger()
    log.info("one {}", 1)
    c.flush()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    log.info("two {}", 2)
    c.flush()
    _close(c, rf)
    assert not (tmp_path / "elsewhere" / "logs").exists()
    assert [e.message for e in bread.read(str(tmp_path / "logs"))] == ["one 1", "two 2"]


def test_the_configuration_reaches_multiprocessing_children_only(tmp_path):
    # Proves: a program run by the service (a subprocess, not a multiprocessing child)
    # that imports multiprocessing does not take the service's configuration.
    (tmp_path / "tool.py").write_text(textwrap.dedent("""
        import multiprocessing.managers, multiprocessing.shared_memory, blog
        blog.get_logger().info("tool {}", 1)
        blog.basic_config("tool.blog")
    """))
    r = run_python("""
        import subprocess, sys, blog
        blog.basic_config("svc/app.blog", rotate_bytes=1 << 20)
        subprocess.run([sys.executable, "tool.py"], check=True)
        blog.shutdown()
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    pids = {f.pid for f in members(str(tmp_path / "svc"), "app")}
    assert len(pids) <= 1              # the service's own file, if any; none of the tool's
    assert [e.message for e in bread.read(str(tmp_path / "tool.blog"))] == ["tool 1"]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_multiprocessing_child_that_configures_its_own_file_loses_nothing(tmp_path, method):
    # Proves: a Process or a Pool worker that calls basic_config itself is flushed when
    # multiprocessing ends it with os._exit (no atexit): every event it logged is written.
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import os, blog
        def job(k):
            blog.basic_config(f"own{os.getpid()}.blog", flush_interval=60)
            log = blog.get_logger()
            for i in range(2000):
                log.info("job {} {}", k, i)
            return k
    """))
    r = run_python(f"""
        import multiprocessing as mp, os, sys
        sys.path.insert(0, os.getcwd())
        import job
        if __name__ == "__main__":
            ctx = mp.get_context("{method}")
            p = ctx.Process(target=job.job, args=(0,))
            p.start(); p.join()
            with ctx.Pool(2) as pool:
                assert pool.map(job.job, [1, 2]) == [1, 2]
                pool.close(); pool.join()
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    got = collections.Counter()
    for f in tmp_path.glob("own*.blog"):
        for e in bread.read(str(f)):
            got[e.args[0]] += 1
    assert got == {0: 2000, 1: 2000, 2: 2000}
