"""bread compact: closed files merged into time-sorted compressed files, crash-safely."""

from __future__ import annotations

import collections
import fcntl
import itertools
import os
import pathlib
import shutil
import struct
import subprocess
import textwrap
import time

import pytest
from hypothesis import given, settings, strategies as st

import blog
import bread
from blogformat.frames import FRAME_EVENTS, HEADER_SIZE
from blogstore import catalog, manifest
from blogstore.fileset import members, parse
from bread import cli
from bread.compact import compact

from helpers import python_child, start_size

_FMT = "%S %C %n %m %r %F %L %P"


def _text(path, *opts) -> list[str]:
    p = subprocess.run(python_child("-m", "bread", "-f", _FMT, *opts, str(path)),
                       capture_output=True, text=True, timeout=60)
    return p.stdout.splitlines()


def _write_set(d, threads=3, n=2000, forks=1):
    code = textwrap.dedent(f"""
        import os, threading, time, blog
        blog.basic_config("{d}/app.blog", rotate_bytes=8000, flush_interval=0.002)
        log = blog.get_logger("x")
        def work(k):
            for i in range({n}):
                log.info("t{{}} {{}}", k, i, pad=[i, "x" * (i % 7)], when=1.5 * i)
                if i % 500 == 0:
                    log.warning("w{{}} at {{}}", k, i)
                if i % 250 == 0:
                    time.sleep(0.01)     # the consumer writes (and switches files) meanwhile
        ts = [threading.Thread(target=work, args=(k,), name=f"w{{k}}") for k in range({threads})]
        [t.start() for t in ts]; [t.join() for t in ts]
        for _ in range({forks}):
            pid = os.fork()
            if pid == 0:
                for i in range(500):
                    log.error("child {{}}", i)
                blog.shutdown(); os._exit(0)
            os.waitpid(pid, 0)
        blog.shutdown()
    """)
    subprocess.run(python_child("-c", code), check=True, timeout=60)


def _old(d, seconds=3600):
    """Make every file of the directory look last written ``seconds`` ago."""
    t = time.time() - seconds
    for n in os.listdir(d):
        os.utime(os.path.join(d, n), (t, t))


def test_compaction_keeps_every_event_and_sorts_them(tmp_path):
    # Proves: compacting a directory of several processes' sets changes nothing a sorted
    # read shows (writer names, messages, raw clocks, call sites); the compacted file is
    # in time order, closed with a Summary; the originals and their manifest entries go.
    d = tmp_path / "logs"
    _write_set(d)
    before = _text(d, "-s")
    originals = [f.name for f in members(str(d), "app")]
    assert len(before) == 3 * 2000 + 3 * 4 + 500
    assert len({f.pid for f in members(str(d), "app")}) == 2
    _old(d)
    done = compact(str(d), 60 * 10**9)
    assert [x["events"] for x in done] == [len(before)] and done[0]["damage"] == []
    name = done[0]["compacted"]
    assert sorted(done[0]["replaces"]) == sorted(originals)
    assert sorted(n for n in os.listdir(d) if n.endswith((".blog", ".gz"))) == [name]
    assert _text(d, "-s") == before
    r = bread.read(str(d))
    evs = list(r)
    # One stream per process (events keep their pid); in each, stretches of
    # EVENTS_PER_FRAME events in time order, one frame per writer in each stretch.
    from bread.compact.compactor import EVENTS_PER_FRAME
    pids = [h.descriptor["pid"] for h in r.headers]
    assert len(pids) == 2 and [s.events for s in r.summaries] == [6012, 500]
    assert r.damage == []
    for pid in pids:
        mine = [e for e in evs if e.pid == pid]
        for w in {e.writer for e in mine}:
            ns = [e.ns for e in mine if e.writer == w]
            assert ns == sorted(ns)
        for k in range(0, len(mine) - EVENTS_PER_FRAME, EVENTS_PER_FRAME):
            assert max(e.ns for e in mine[k:k + EVENTS_PER_FRAME]) <= \
                min(e.ns for e in mine[k + EVENTS_PER_FRAME:k + 2 * EVENTS_PER_FRAME])
    assert r.headers[0].descriptor["replaces"] == done[0]["replaces"]
    c = catalog.load(str(d))
    assert c["compacted"][name] == {"state": "done", "replaces": done[0]["replaces"],
                                    "events": len(before)}
    assert manifest.load(str(d))["files"] == {}


def test_columnar_compaction_reads_back_as_every_reader_read_the_originals(tmp_path):
    # Proves: a columnar compacted file (docs/format.md 5.5) gives every event back with its
    # values, fields, writer and clock: sorted text, JSON lines and Events as the row
    # compaction of the same files gives them, on this run's reader path; the manifest
    # and bread stats count its events; it is smaller once compressed.
    rows, cols = tmp_path / "rows", tmp_path / "cols"
    _write_set(rows, threads=2, n=1500)
    shutil.copytree(rows, cols)
    before = _text(rows, "-s")
    for d, columnar in ((rows, False), (cols, True)):
        _old(d)
        assert cli.main(["compact", str(d), "--older-than", "1m"]
                        + (["--columnar"] if columnar else [])) == 0
    assert _text(cols, "-s") == _text(rows, "-s") == before
    assert _text(cols, "-s", "-o", "jsonl") == _text(rows, "-s", "-o", "jsonl")   # ids too
    strip = lambda e: (e.pid, e.writer, e.clock, e.format, e.args, e.fields)  # noqa: E731
    assert sorted(map(strip, bread.read(str(cols)))) == sorted(map(strip, bread.read(str(rows))))
    [name] = [n for n in os.listdir(cols) if n.endswith(".gz")]
    [row_name] = [n for n in os.listdir(rows) if n.endswith(".gz")]
    assert manifest.describe(str(cols / name))["events"] == len(before)
    assert os.path.getsize(cols / name) < 0.8 * os.path.getsize(rows / row_name)


def test_dry_run_lists_what_it_would_do(tmp_path, capsys):
    # Proves (issue 26): bread compact --dry-run lists each set and period and the files it
    # would compact (it said only how many), and changes nothing.
    d = tmp_path / "logs"
    _write_set(d, threads=1, n=600, forks=0)
    files = [f.name for f in members(str(d), "app")]
    _old(d)
    before = sorted(n for n in os.listdir(d) if ".blog" in n)
    assert cli.main(["compact", str(d), "--older-than", "1m", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    heads = [line for line in out if not line.startswith("  ")]   # one per period (a day)
    assert heads and all(h.startswith("would compact ") and " file(s) of set app, period from "
                         in h and h.endswith("T00:00:00Z, into one:") for h in heads)
    assert [line for line in out if line.startswith("  ")] == [f"  {n}" for n in files]
    assert sorted(n for n in os.listdir(d) if ".blog" in n) == before


def test_only_closed_files_older_than_the_age_are_compacted(tmp_path):
    d = tmp_path / "logs"
    _write_set(d, threads=1, n=3000, forks=0)
    files = [f.name for f in members(str(d), "app")]
    _old(d)
    os.utime(d / files[-1])                       # written just now: too young
    held = open(d / files[0], "rb")               # still being written by someone
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    try:
        assert compact(str(d), 60 * 10**9, dry_run=True)[0]["replaces"] == files[1:-1]
        assert sorted(os.listdir(d)) == sorted(os.listdir(d))  # dry run: nothing changed
        (done,) = compact(str(d), 60 * 10**9)
        assert done["replaces"] == files[1:-1]
        left = sorted(n for n in os.listdir(d) if n.endswith((".blog", ".gz")))
        assert left == sorted([files[0], files[-1], done["compacted"]])
    finally:
        held.close()
    msgs = [e.args[1] for e in bread.read(str(d), sort=True) if e.message.startswith("t0")]
    assert msgs == list(range(3000))              # each event once, across the three


def test_shipped_takes_only_the_files_the_manifest_records_as_shipped(tmp_path, capsys):
    # Proves: --shipped (what blog's compact= runs for a set with on_close) leaves every
    # file the manifest does not record as shipped, whatever its age.
    d = tmp_path / "logs"
    _write_set(d, threads=1, n=1500, forks=0)
    files = [f.name for f in members(str(d), "app")]
    _old(d)

    def ship(m: dict) -> None:
        for n in files[1::2]:
            m["files"][n]["shipped"] = True

    manifest.update(str(d), ship, lambda p: True)
    assert cli.main(["compact", str(d), "--older-than", "1m", "--shipped", "--dry-run"]) == 0
    listed = [line.strip() for line in capsys.readouterr().out.splitlines()
              if line.startswith("  ")]
    assert listed == files[1::2]
    assert cli.main(["compact", str(d), "--older-than", "1m", "--shipped"]) == 0
    assert [n for n in files if os.path.exists(d / n)] == files[0::2]
    assert len(list(bread.read(str(d)))) == 1500 + 3


def test_a_reader_reads_the_originals_or_the_compacted_file_never_both(tmp_path):
    d = tmp_path / "logs"
    _write_set(d, threads=1, n=1500, forks=0)
    _old(d)
    keep = {n: (d / n).read_bytes() for n in os.listdir(d) if n.endswith(".blog")}
    (done,) = compact(str(d), 60 * 10**9)
    name = done["compacted"]
    for n, data in keep.items():                  # a crash before the originals went
        (d / n).write_bytes(data)
    count = lambda: sum(1 for _ in bread.read(str(d)))  # noqa: E731
    assert count() == 1503                         # 1500 events and 3 warnings
    assert sum(1 for _ in bread.read(str(d / "app.*"))) == 1503     # a pattern too
    (d / catalog.NAME).write_text("{damaged")        # the compacted file's header says
    assert count() == 1503
    c = catalog.empty()                              # announced, not yet done: originals
    c["compacted"][name] = {"state": "writing", "replaces": list(keep), "events": None}
    catalog.write(str(d), c)
    assert count() == 1503
    assert [e.args[1] for e in bread.read(str(d)) if e.message[0] == "t"] == list(range(1500))
    # The next compaction recovers: the unfinished one is undone, then done again.
    _old(d)
    (again,) = compact(str(d), 60 * 10**9)
    assert name not in os.listdir(d) or again["compacted"] == name
    assert count() == 1503 and catalog.load(str(d))["compacted"][again["compacted"]][
        "state"] == "done"


# A zygote forks one compaction per trial, on its own copy of a directory, and kills it
# with SIGKILL after a random moment: before, during and after each step of the catalog.
ZYGOTE = textwrap.dedent("""
    import os, random, signal, sys, time
    from bread.compact import compact
    rng = random.Random(int(sys.argv[1]))
    for d in sys.argv[2:]:
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            compact(d, 60 * 10**9)
            os._exit(0)
        time.sleep(rng.uniform(0.0, float(os.environ["SPAN"])))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(d, flush=True)
""")


def test_sigkill_anywhere_in_a_compaction_loses_and_doubles_nothing(tmp_path):
    # Proves: whenever a compaction is killed (24 trials at random moments), reading the
    # directory gives every event exactly once (originals or compacted file), and after
    # the next compaction's recovery, still exactly once, with nothing temporary left.
    def events(d):
        return collections.Counter((e.writer, e.message, e.clock, e.line, e.pid)
                                   for e in bread.read(d))

    src = tmp_path / "src"
    _write_set(src, threads=2, n=1500, forks=1)
    _old(src)
    want = events(str(src))
    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    t = time.perf_counter()
    compact(str(probe), 60 * 10**9)
    span = (time.perf_counter() - t) * 1.3
    dirs = []
    for k in range(24):
        shutil.copytree(src, tmp_path / f"t{k}")
        _old(tmp_path / f"t{k}")
        dirs.append(str(tmp_path / f"t{k}"))
    env = dict(os.environ, SPAN=str(span))
    out = subprocess.run(python_child("-c", ZYGOTE, "7", *dirs), env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) == 24
    states = collections.Counter()
    for dd in dirs:
        c = catalog.load(dd)
        states["done" if c and any(e["state"] == "done" for e in c["compacted"].values())
               else "writing" if c and c["compacted"] else "none"] += 1
        got = events(dd)
        assert got == want, dd
        compact(dd, 60 * 10**9)
        assert events(dd) == want, dd
        assert not any(n.endswith(".tmp") for n in os.listdir(dd)), os.listdir(dd)
        assert [n for n in os.listdir(dd) if n.endswith(".blog")] == []
    assert len(states) >= 2, states      # the kills landed in more than one state


def test_compact_cli_checks_its_options(tmp_path, capsys):
    d = tmp_path / "logs"
    d.mkdir()
    assert cli.main(["compact", str(d)]) == 1                       # --older-than required
    assert cli.main(["compact", str(d), "--older-than", "soon"]) == 1
    assert "--older-than" in capsys.readouterr().err
    assert cli.main(["compact", str(d), "--older-than", "1d", "--period", "0d"]) == 1
    assert cli.main(["compact", str(tmp_path / "none"), "--older-than", "1d"]) == 2
    lock = os.open(d / catalog.LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        assert cli.main(["compact", str(d), "--older-than", "1d"]) == 2
        assert "another compaction" in capsys.readouterr().err
    finally:
        os.close(lock)
    assert cli.main(["compact", str(d), "--older-than", "1d"]) == 0


def test_blog_session_directory_with_nothing_to_compact(tmp_path):
    rf = blog.RotatingFile(tmp_path / "app.blog")
    rf.close()
    assert compact(str(tmp_path), 10**9) == []


def test_compaction_of_damaged_files_never_raises_nor_writes_damage(tmp_path):
    # Proves: a file of the directory is untrusted input: with bytes flipped anywhere in
    # it, compaction finishes, reports what it skipped, and writes a file that reads
    # with no damage, holding every event bread reads from the damaged originals.
    import random
    src = tmp_path / "src"
    _write_set(src, threads=1, n=800, forks=0)
    rng = random.Random(5)
    for k in range(12):
        d = tmp_path / f"m{k}"
        shutil.copytree(src, d)
        victim = d / rng.choice([f.name for f in members(str(d), "app")])
        data = bytearray(victim.read_bytes())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        victim.write_bytes(bytes(data))
        want = collections.Counter((e.message, e.clock) for e in bread.read(str(d)))
        _old(d)
        compact(str(d), 60 * 10**9)
        r = bread.read(str(d))
        got = collections.Counter((e.message, e.clock) for e in r)
        assert r.damage == [] and got == want, k


def test_compaction_past_the_limits_of_a_stream_changes_nothing(tmp_path, monkeypatch):
    # Proves: a process whose files hold more distinct sources than one stream may
    # (format.md 9.1; limit lowered to 3 here) is not compacted into a file a reader would
    # find damaged: compact raises saying why, and every original is still there and read.
    import pytest
    import bread.compact.compactor as compact_mod
    d = tmp_path / "logs"
    _write_set(d, threads=1, n=600, forks=0)
    before = _text(d, "-s")
    names = sorted(os.listdir(d))
    _old(d)
    monkeypatch.setattr(compact_mod, "MAX_SOURCE_ID", 1)
    with pytest.raises(RuntimeError, match="more sources than one stream holds.*nothing changed"):
        compact(str(d), 60 * 10**9)
    assert set(names) <= set(os.listdir(d))
    assert not any(n.endswith(".tmp") for n in os.listdir(d))
    assert _text(d, "-s") == before


def test_a_file_cut_short_is_never_compacted(tmp_path):
    # Proves: compaction never turns the unverified events of a frame cut short (a crash
    # mid-write) into checksummed ones, nor deletes them: the file is left as it is, and
    # the command says why (exit 3).
    import glob
    import subprocess
    import blog
    d = tmp_path / "logs"
    s = blog.Session()
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1 << 20)
    log = s.get_logger("a")
    for i in range(60):
        log.info("order {} filled", i)
    s.consume(rf)
    rf.close()
    (f,) = glob.glob(str(d / "app.*.blog"))
    with open(f, "r+b") as fh:
        fh.truncate(os.path.getsize(f) - 3)
    _old(d)
    r = subprocess.run(python_child("-m", "bread", "compact", str(d), "--older-than", "1m"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "cut short" in r.stderr and "nothing changed" in r.stderr
    assert os.path.exists(f)
    evs = list(bread.read(f))
    assert len(evs) == 59 and not any(e.verified for e in evs)


# --- trust: only what was carried over is deleted, only inside the directory ----------------


def _small_set(d, n=600, rotate_bytes=2000, compress=False):
    """A set of a few files, several frames each, written in this process: ``rotate_bytes``
    of events each, besides the header and metadata each starts with (in the suite, they
    grow with the value types registered before)."""
    s = blog.Session()
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=rotate_bytes + start_size(s),
                           compress=compress)
    log = s.get_logger("a")
    for i in range(n):
        log.info("order {} filled", i)
        if i % 40 == 39:
            s.consume(rf)
    s.consume(rf)
    rf.close()
    return [f.name for f in members(str(d), "app")]


def _period(name):
    """The UTC day of a set's file, as its compacted file's name gives it."""
    return time.strftime("%Y-%m-%dT00-00-00", time.gmtime(parse(name).time_ns // 10**9))


def _snapshot(d):
    """What a directory holds: each name, with its bytes (or where its link points)."""
    return {n: os.readlink(d / n) if os.path.islink(d / n) else (d / n).read_bytes()
            for n in sorted(os.listdir(d))}


def _messages(path, **kw):
    return collections.Counter(e.message for e in bread.read(str(path), **kw))


def test_catalog_names_outside_the_directory_are_never_deleted(tmp_path, capsys):
    # Proves: the catalog is input: entries naming a compacted file by `../`, by an absolute
    # path, or through a link in the directory, and originals that are links, make bread
    # compact delete nothing outside the directory (nor the links): each is said on stderr
    # and left alone (exit 3), and the directory's own set is compacted as usual.
    d = tmp_path / "logs"
    names = _small_set(d)
    other = tmp_path / "other"
    other.mkdir()
    t = "2026-01-01T00-00-00"
    for n in (f"x.compacted.{t}.1.blog.gz", f"app.compacted.{t}.7.blog.gz",
              "app.2026-01-01T00-00-00.000.pid1.blog", "app.2026-01-01T00-00-00.000.pid2.blog"):
        (other / n).write_bytes(b"not the log's own: " + n.encode())
    os.symlink(other / f"app.compacted.{t}.7.blog.gz", d / f"app.compacted.{t}.7.blog.gz")
    os.symlink(other / "app.2026-01-01T00-00-00.000.pid2.blog",
               d / "app.2026-01-01T00-00-00.000.pid2.blog")
    writing = {"state": "writing", "replaces": [], "events": None}
    c = catalog.empty()
    c["compacted"] = {
        f"../other/x.compacted.{t}.1.blog.gz": writing,
        str(other / f"x.compacted.{t}.1.blog.gz"): writing,
        f"app.compacted.{t}.7.blog.gz": writing,                    # a link in the directory
        f"app.compacted.{t}.8.blog.gz": {"state": "done", "events": 1, "replaces": [
            "../other/app.2026-01-01T00-00-00.000.pid1.blog",
            str(other / "app.2026-01-01T00-00-00.000.pid1.blog")]},
        f"app.compacted.{t}.9.blog.gz": {"state": "done", "events": 1, "replaces": [
            "app.2026-01-01T00-00-00.000.pid2.blog"]},               # an original that is a link
    }
    catalog.write(str(d), c)
    outside = _snapshot(other)
    links = {n: os.readlink(d / n) for n in os.listdir(d) if os.path.islink(d / n)}
    _old(d)
    status = cli.main(["compact", str(d), "--older-than", "1m"])
    err = capsys.readouterr().err
    assert _snapshot(other) == outside
    assert {n: os.readlink(d / n) for n in os.listdir(d) if os.path.islink(d / n)} == links
    assert status == 3
    assert "../other/x.compacted" in err and str(other / "x.compacted") in err
    assert err.count("not a regular file: left alone") >= 2
    assert not any(os.path.exists(d / n) for n in names)          # the set itself: compacted
    assert _messages(d) == collections.Counter(f"order {i} filled" for i in range(600))


def _flip(path, at=0.5):
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x10
    path.write_bytes(bytes(data))


def _in_events(path) -> float:
    """Where the middle of a plain file's first events frame is, as a share of its size (the
    metadata grows with the value types registered before, and files keep their size).
    Of a compressed file, the first of 0.9, 0.85, ... 0.3 of its size where a flipped bit
    loses events and leaves the metadata whole (a bit flipped early in a gzip stream may
    garble only the metadata, which the value types registered before make larger: its
    events then read, with their messages unknown)."""
    data = path.read_bytes()
    pos = 0
    while path.suffix != ".gz" and pos < len(data):
        kind, length = data[pos + 4], struct.unpack_from("<I", data, pos + 8)[0]
        if kind == FRAME_EVENTS:
            return (pos + HEADER_SIZE + length // 2) / len(data)
        pos += HEADER_SIZE + length
    whole = sum(_messages(path).values())
    try:
        for at in (x / 100 for x in range(90, 25, -5)):
            _flip(path, at)
            got = _messages(path)
            path.write_bytes(data)
            if 0 < sum(got.values()) < whole and "" not in got:
                return at
    finally:
        path.write_bytes(data)
    raise AssertionError(f"no bit flipped in {path} loses events")


@pytest.mark.parametrize("compress", [False, True])
def test_an_original_that_held_damage_is_kept_and_its_readable_events_compacted(
        tmp_path, capsys, compress):
    # Proves: one flipped bit in an original (plain, or gzip-compressed) never makes
    # compaction delete it: it is moved, byte for byte, to DIR/damaged/; the compacted file
    # holds every event that could be read from it; bread compact exits 3 naming it; the
    # directory (and -s, and a pattern) reads each readable event once; the next
    # compaction takes it no more, and one cut before the move moves it, never deletes it.
    d = tmp_path / "logs"
    names = _small_set(d, compress=compress)
    assert len(names) >= 3
    victim = d / names[1]
    _flip(victim, _in_events(victim))
    kept = victim.read_bytes()
    want = _messages(d)
    assert 0 < sum(want.values()) < 600
    _old(d)
    status = cli.main(["compact", str(d), "--older-than", "1m"])
    err = capsys.readouterr().err
    assert (d / "damaged" / names[1]).read_bytes() == kept and not victim.exists()
    assert status == 3 and f"{victim} held damage: kept as {d / 'damaged' / names[1]}" in err
    assert sorted(os.listdir(d / "damaged")) == [names[1]]
    assert not any(os.path.exists(d / n) for n in names)
    (name,) = [n for n in os.listdir(d) if catalog.is_compacted(n)]
    assert _messages(d / name) == want                  # what could be read, carried over
    assert _messages(d) == want and _messages(d, sort=True) == want
    assert _messages(d / "*") == want
    assert catalog.load(str(d))["compacted"][name]["damaged"] == [names[1]]
    _old(d)                                             # the next compaction: nothing to do
    assert cli.main(["compact", str(d), "--older-than", "1m"]) == 0
    assert [n for n in os.listdir(d) if catalog.is_compacted(n)] == [name]
    assert _messages(d) == want
    os.rename(d / "damaged" / names[1], victim)         # cut before the move: recovery
    assert compact(str(d), 60 * 10**9, warn=lambda m: None) == []
    assert (d / "damaged" / names[1]).read_bytes() == kept and not victim.exists()
    assert _messages(d) == want


def test_compaction_names_its_file_durably_before_any_original_goes(tmp_path, monkeypatch):
    # Proves: the directory is fsynced after the compacted file is renamed to its name and
    # before any original is deleted or moved; an original kept for its damage is moved
    # to damaged/, then both directories are fsynced.
    d = tmp_path / "logs"
    names = _small_set(d)
    _flip(d / names[0])
    _old(d)
    calls = []
    real = {k: getattr(os, k) for k in ("fsync", "replace", "rename", "unlink")}

    def record(op):
        def call(*a, **kw):
            if op == "fsync":
                calls.append(("fsync", os.readlink(f"/proc/self/fd/{a[0]}")))
            else:
                calls.append((op, os.path.basename(os.fspath(a[-1 if op != "unlink" else 0]))))
            return real[op](*a, **kw)
        return call

    for op in real:
        monkeypatch.setattr(os, op, record(op))
    (done,) = compact(str(d), 60 * 10**9)
    monkeypatch.undo()
    named = calls.index(("replace", done["compacted"]))
    gone = [calls.index(("unlink", n)) for n in names[1:]]
    moved = calls.index(("rename", names[0]))
    assert ("fsync", str(d)) in calls[named:min(gone + [moved])]
    assert {("fsync", str(d)), ("fsync", str(d / "damaged"))} <= set(calls[moved:])


def test_links_planted_at_temporary_names_are_never_followed(tmp_path, monkeypatch):
    # Proves: links planted at the temporary names of the manifest, the catalog and the
    # compacted file (after the directory was listed: here hidden from the listing) leave
    # their targets untouched, and dangling links at the lock files create nothing; the
    # compaction completes.
    d = tmp_path / "logs"
    names = _small_set(d)
    _old(d)
    other = tmp_path / "other"
    other.mkdir()
    pid, t = os.getpid(), _period(names[0])
    temporary = [f"{manifest.NAME}.{pid}.tmp", f"{catalog.NAME}.{pid}.tmp",
                 f"app.compacted.{t}.1.blog.gz.tmp"]
    for n in temporary:
        (other / n).write_bytes(b"precious")
        os.symlink(other / n, d / n)
    for n in (manifest.LOCK, catalog.LOCK):
        if os.path.lexists(d / n):
            os.unlink(d / n)
        os.symlink(other / n, d / n)
    outside = _snapshot(other)
    real = os.listdir
    monkeypatch.setattr(os, "listdir",
                        lambda p=".": [n for n in real(p) if n not in temporary])
    (done,) = compact(str(d), 60 * 10**9, now_ns=time.time_ns())
    monkeypatch.undo()
    assert _snapshot(other) == outside
    assert done["events"] == 600 and not any(os.path.exists(d / n) for n in names)


def test_a_stale_temporary_name_never_blocks_the_next_compaction(tmp_path, capsys):
    # Proves: a directory (which no unlink removes) sitting at the temporary names of the
    # manifest, the catalog and the compacted file does not make compaction fail: it is said
    # and left alone, and the set is compacted.
    d = tmp_path / "logs"
    t = _period(_small_set(d)[0])
    for n in (f"{manifest.NAME}.{os.getpid()}.tmp", f"{catalog.NAME}.{os.getpid()}.tmp",
              f"app.compacted.{t}.1.blog.gz.tmp"):
        (d / n).mkdir()
    _old(d)
    assert cli.main(["compact", str(d), "--older-than", "1m"]) == 3
    assert "not a regular file: left alone" in capsys.readouterr().err
    assert _messages(d) == collections.Counter(f"order {i} filled" for i in range(600))
    assert not any(n.endswith(".blog") for n in os.listdir(d))


def test_damage_in_one_original_excuses_no_missing_event_in_another(tmp_path, monkeypatch):
    # Proves: the count check is per original: an original without damage whose events
    # were not all copied makes the compaction undo itself (nothing changed), even when
    # another original of the same compaction held damage.
    import bread.compact.transaction as compact_mod
    d = tmp_path / "logs"
    names = _small_set(d)
    _flip(d / names[0])
    before = _snapshot(d)
    real = manifest.describe

    def describe(path):                      # one event more than was written
        e = real(path)
        return dict(e, events=e["events"] + 1) if path.endswith(names[1]) else e

    monkeypatch.setattr(compact_mod.manifest, "describe", describe)
    _old(d)
    with pytest.raises(RuntimeError, match=f"event.s. of .* of {names[1]}: nothing changed"):
        compact(str(d), 60 * 10**9)
    assert {n: v for n, v in _snapshot(d).items() if n.startswith("app.")} == \
        {n: v for n, v in before.items() if n.startswith("app.")}


# --- clocks and times at and beyond 64 bits -------------------------------------------------

_SEC = 10**9
_EXTREME_CLOCKS = {   # (ClockSync's clock value, frequency, ns), each events frame's clocks
    "times at both ends": ((0, _SEC, 0), [[-2**63 + 5, -2**63 + 6], [2**63 - 5, 2**63 - 4]]),
    "base clock past 64 bits": ((2**63, _SEC, 0), [[1, 2], [2**63 + 5, 2**63 + 9], [3, 4]]),
    "delta past 64 bits": ((2**63, _SEC, 0), [[1, 2], [5, 2**64 - 7, 2**64 - 6], [3, 4]]),
    "time past 64 bits": ((0, _SEC, 0), [[1, 2], [2**64 - 1, 2**64 - 1], [3, 4]]),
    "time past by a delta": ((0, _SEC, 0), [[1, 2], [2**63 - 2, 2**63 + 1], [3, 4]]),
    "time below by a delta": ((0, _SEC, 0), [[1, 2], [-2**63, -2**63 - 1], [3, 4]]),
    "sync far out": ((0, 1, 2**63 - 100), [[1, 2, 3]]),
    "frequency of 1 Hz": ((0, 1, 0), [[1, 2], [2**40, 2**40 + 1], [3, 4]]),
}


def _crafted(path, sync, frames):
    """A blog file of one writer and one call site (message ``e N``, N counting the events),
    an events frame per list of ``frames`` (its events' clocks), with ClockSync ``sync``."""
    import msgpack
    from blogformat.entries import (ClockSync, EventSource, WriterProp, header_payload,
                                    metadata_frames)
    from blogformat.frames import FRAME_HEADER, frame_bytes
    out = [frame_bytes(FRAME_HEADER, header_payload({"pid": 7, "host": "h"})),
           *metadata_frames([ClockSync(*sync, 0, "UTC"), WriterProp(1, "w"),
                             EventSource(1, 2, "c", "f", "a.py", 1, "e {}", "i")])]
    n = 0
    for clocks in frames:
        events, prev = [], clocks[0]
        for c in clocks:
            events.append(msgpack.packb([1, c - prev, [n]]))
            prev, n = c, n + 1
        lo, hi = max(min(clocks), -2**63), min(max(clocks), 2**64 - 1)   # (msgpack's ints)
        head = msgpack.packb([1, clocks[0], len(clocks), lo, hi])
        out.append(frame_bytes(FRAME_EVENTS, head + b"".join(events)))
    path.write_bytes(b"".join(out))


def _times(path) -> collections.Counter:
    return collections.Counter((e.message, e.ns) for e in bread.read(str(path)))


def _compacts_exactly_or_keeps(d, sync, frames, columnar) -> None:
    """Compact a directory of one crafted file (``_crafted``): its times carried exactly
    where they all fit in 64 bits (exit 0), its original kept as damage otherwise (exit 3);
    every event read before is read after, in the compacted file or the kept original."""
    d.mkdir()
    _crafted(d / "app.2026-01-01T00-00-00.000.pid7.blog", sync, frames)
    want = _times(d)
    assert sum(want.values()) == sum(map(len, frames))
    fits = all(-2**63 <= ns < 2**63 for _, ns in want)
    _old(d)
    status = cli.main(["compact", str(d), "--older-than", "1m", *columnar])
    compacted = _times(d)
    kept = _times(d / "damaged") if (d / "damaged").exists() else collections.Counter()
    assert compacted <= want                 # no time made up
    assert want <= compacted + kept          # none lost
    if fits:
        assert status == 0 and compacted == want and not kept
    else:
        assert status == 3 and kept == want


@pytest.mark.parametrize("columnar", [[], ["--columnar"]])
@pytest.mark.parametrize("case", sorted(_EXTREME_CLOCKS))
def test_clocks_and_times_beyond_64_bits_are_carried_exactly_or_kept_as_damage(
        tmp_path, case, columnar):
    # Proves: crafted clocks, clock deltas and ClockSyncs at and beyond 64 bits never make
    # bread compact raise nor change a time: clocks beyond 64 bits whose times fit are
    # carried exactly (exit 0, as the pure-Python path did where C handed back -1 for a
    # base clock beyond 64 bits); a frame holding a time beyond 64-bit ns (docs/format.md
    # 4.3, 5.3: damage) is damage, its original kept in DIR/damaged/ (exit 3); every event
    # readable before is read after, in the compacted file or the kept original.
    _compacts_exactly_or_keeps(tmp_path / "logs", *_EXTREME_CLOCKS[case], columnar)


_wide = st.one_of(st.integers(-2**63, -2**63 + 9), st.integers(-9, 9),   # what msgpack holds
                  st.integers(2**63 - 9, 2**63 + 9), st.integers(2**64 - 9, 2**64 - 1))
_clocks = st.builds(lambda base, deltas: list(itertools.accumulate(deltas, initial=base)),
                    _wide, st.lists(_wide, max_size=3))   # a frame's: its base, its deltas


@settings(max_examples=100, deadline=None)
@given(st.tuples(_wide, st.sampled_from([1, 3, 10**9, 2**64 - 1]), _wide),
       st.lists(_clocks, min_size=1, max_size=4), st.sampled_from([[], ["--columnar"]]))
def test_no_clock_sync_nor_clocks_make_compaction_raise_or_lose_an_event(sync, frames, columnar):
    # Proves: clocks, deltas and ClockSyncs near and past both ends of 64 bits, in any mix,
    # are compacted as the cases above: never an exception, no time changed, none lost.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        _compacts_exactly_or_keeps(pathlib.Path(tmp) / "logs", sync, frames, columnar)
