"""A consume cut between the files of a size-rotated set (blog/pipeline/parts.py): no file
passes ``rotate_bytes`` but by its closing Summary frame, every event is in one file once."""

from __future__ import annotations

import os
import random
from typing import Any, Callable

import blog
import bread
from blogstore.fileset import members

from helpers import check_sizes, frame_sizes, start_size


def _written(d, events_bytes: int, log_into: Callable[[Any, Callable[[], object], int], None]):
    """The files of a set that ``log_into(logger, consume, rotate_bytes)`` wrote (consumed
    once more, then closed cleanly), and the set's RotatingFile. Its files have room for
    ``events_bytes`` besides the header and metadata they start with (in the suite, these
    grow with the value types registered before)."""
    s = blog.Session(name="parts")
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=events_bytes + start_size(s))
    log_into(s.get_logger("t"), lambda: s.consume(rf), rf.rotate_bytes)
    s.consume(rf)
    s.finish(rf)
    rf.close()
    return [os.path.join(d, f.name) for f in members(str(d), "app")], rf


def test_files_keep_their_size_and_every_event_reads_once_in_order(tmp_path):
    # Proves: consumes of any size are cut between files at event boundaries: each file
    # holds at most rotate_bytes before its Summary frame, and the set reads every event
    # once, in order (each file reads on its own: header and metadata in each).
    rng = random.Random(7)
    n = 3000

    def log_into(log, consume, rotate_bytes):
        i = 0
        while i < n:
            for _ in range(min(n - i, rng.choice((1, 3, 40, 400)))):
                log.info("e {} pad {}", i, "x" * rng.randrange(40))
                i += 1
            consume()
    files, rf = _written(tmp_path, 3000, log_into)
    assert len(files) == rf.files > 30
    check_sizes(files, rf.rotate_bytes)
    for path in files:
        r = bread.read(path)
        n_read = len(list(r))
        assert r.damage == [] and r.unknown_sources == 0 and r.summaries[0].events == n_read
    assert [e.args[0] for e in bread.read(files)] == list(range(n))


def test_a_burst_much_larger_than_rotate_bytes_is_spread_over_files(tmp_path):
    # Proves: one consume of many times rotate_bytes (before: one file of that size) fills
    # files of rotate_bytes each; the Summary of each, and the manifest, count its events
    # and give their time range.
    from blogstore import manifest

    def log_into(log, consume, rotate_bytes):
        for i in range(5000):
            log.info("burst {} {}", i, "y" * 60)
    files, rf = _written(tmp_path, 4000, log_into)
    assert len(files) > 5000 * 60 // rf.rotate_bytes        # events of > 60 bytes each
    check_sizes(files, rf.rotate_bytes)
    assert max(os.path.getsize(p) for p in files) < rf.rotate_bytes + 1000
    entries = manifest.load(str(tmp_path))["files"]
    seen = []
    for path in files:
        r = bread.read(path)
        evs = list(r)
        [summ] = r.summaries
        assert summ.events == len(evs) > 0
        assert (summ.first_clock, summ.last_clock) == (min(e.clock for e in evs),
                                                       max(e.clock for e in evs))
        e = entries[os.path.basename(path)]
        assert e["events"] == len(evs)
        assert (e["first_ns"], e["last_ns"]) == (min(x.ns for x in evs), max(x.ns for x in evs))
        seen += [e.args[0] for e in evs]
    assert seen == list(range(5000))


def test_an_event_larger_than_rotate_bytes_has_a_file_of_its_own(tmp_path):
    # Proves: an event larger than rotate_bytes is never cut: a file holds it alone (with
    # the header and metadata), and the events around it go to the files before and after.
    def log_into(log, consume, rotate_bytes):
        for i in range(10):
            log.info("small {}", i)
        log.info("big {}", "z" * rotate_bytes)
        for i in range(10, 20):
            log.info("small {}", i)
    files, rf = _written(tmp_path, 2000, log_into)
    by_file = [[e.message for e in bread.read(p)] for p in files]
    assert by_file == [[f"small {i}" for i in range(10)], ["big " + "z" * rf.rotate_bytes],
                       [f"small {i}" for i in range(10, 20)]]


def test_a_consume_that_fits_is_written_whole_as_before(tmp_path):
    # Proves: no cut where none is needed: a consume that fits the rest of the file is one
    # write, one events frame.
    def log_into(log, consume, rotate_bytes):
        for i in range(100):
            log.info("e {}", i)
    [path], _ = _written(tmp_path, 1 << 20, log_into)
    assert [k for k, _ in frame_sizes(path)].count(3) == 1


def test_a_part_the_file_refuses_loses_its_events_only(tmp_path):
    # Proves: a write refused in the middle of a cut consume counts its own events lost; the
    # parts before and after are written, each file reads on its own, and the next file
    # records the loss (a Lost entry).
    class Refusing(blog.RotatingFile):
        writes = 0

        def write(self, data):
            self.writes += 1        # a part, then a Summary, per file: the third part
            if self.writes == 5:
                raise OSError(28, "No space left on device")
            return super().write(data)
    s = blog.Session(name="refused")
    rf = Refusing(tmp_path / "app.blog", rotate_bytes=3000 + start_size(s))
    log = s.get_logger("t")
    for i in range(2000):
        log.info("e {} {}", i, "w" * 20)
    s.consume(rf)
    s.finish(rf)
    rf.close()
    files = [os.path.join(tmp_path, f.name) for f in members(str(tmp_path), "app")]
    got = [e.args[0] for p in files for e in bread.read(p)]
    lost = s.stats.events_lost
    assert 0 < lost < 2000 and len(got) == 2000 - lost
    assert got == sorted(got) and got[0] == 0 and got[-1] == 1999
    r = bread.read(files[2])       # the file refused once: the part after it records it
    list(r)
    assert [n.events for n in r.notices if hasattr(n, "events")] == [lost]


def test_the_c_and_python_walks_of_a_take_agree(monkeypatch):
    # Proves parity: where each event of a take ends and its clock are the same from C
    # (_speedups.event_bounds) and from msgpack-python, for values of every kind.
    from blog import accel
    from blog.pipeline import parts
    from blog.pipeline.parts import _Rest
    s = blog.Session(name="walk")
    log = s.get_logger("t")
    for i in range(300):
        log.info("{} {} {} {}", i, -i * 1.5, "ü" * (i % 70), [i, None, b"\x9eBLG"],
                 big=1 << 70, neg=-(1 << 40))
    [w] = s.writers.all
    t = w.channel.take(0)
    if accel.speedups is None:
        return                     # the pure-Python run: one walk only
    c = _Rest(t)
    monkeypatch.setattr(parts, "event_bounds", parts.py_event_bounds)
    py = _Rest(t)
    assert (c.ends, c.clocks) == (py.ends, py.clocks) and len(c.ends) == 300
    assert c.ends[-1] == len(t.data)


def test_a_writer_renamed_inside_a_cut_take_keeps_each_events_name(tmp_path):
    # Proves: a rename queued between a thread's events (in-band metadata) goes with the
    # part its events are in: each event read from the set carries the name it was
    # logged under, whichever file it landed in.
    s = blog.Session(name="renames")
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=3000 + start_size(s))
    log, w = s.get_logger("t"), s.writer()
    for i in range(1500):
        if i % 100 == 0:
            w.name = f"name {i // 100}"
        log.info("e {} {}", i, "r" * 30)
    s.consume(rf)
    s.finish(rf)
    rf.close()
    files = [os.path.join(tmp_path, f.name) for f in members(str(tmp_path), "app")]
    assert len(files) > 10
    evs = [e for p in files for e in bread.read(p)]
    assert [(e.args[0], e.writer) for e in evs] == [(i, f"name {i // 100}") for i in range(1500)]
