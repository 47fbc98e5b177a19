"""A consume cut between the files of a size-rotated set with a crash buffer
(blog/pipeline/parts.py, blog/pipeline/heldwrites.py, docs/format.md 15): files keep their
size, and a SIGKILL at any step of a cut consume loses no event and repeats none.

The kill tests fork the test process (blog already imported): the child logs from two
threads, joins them (every call has returned), and writes it all in one consume cut into
several parts, with one step of that consume made to kill the process at its n-th call.
Recovery then runs as at the next start; the set must hold every event once, in order.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

import blog
import bread
from blog.files.crashbuf import CrashBuffer, Slot, buffer_directory
from blog.pipeline.output import Output
from blogstore.crashlayout import HALF, HALF_AT, PAGE, SPLIT, SPLIT_AT
from blogstore.fileset import members
from blogstore.recovery import recover

from helpers import check_sizes, fresh_signals, run_cli, start_size, with_crash_buffer

N = 400          # events per thread
ROOM = 4000      # bytes of events per file: a consume of the two threads takes 5 parts or so


def _log(log, n: int = N, first: int = 0) -> None:
    """Events ``first`` to ``first + n`` from each of two threads, both joined: every call
    has returned."""
    def work(k: int) -> None:
        for i in range(first, first + n):
            log.info("w {} {} {}", k, i, "p" * (i % 17))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _set(d) -> list[str]:
    return [os.path.join(d, f.name) for f in members(str(d), "app")]


def _events(d) -> list[tuple[int, int]]:
    """(thread, number) of every event of the set, checked undamaged and in order per
    thread."""
    r = bread.read(_set(d))
    got = [(e.args[0], e.args[1]) for e in r]
    assert r.damage == [] and r.unknown_sources == 0, r.damage
    for k in range(2):
        mine = [i for j, i in got if j == k]
        assert mine == sorted(mine), f"thread {k} out of order"
    return got


def test_with_a_crash_buffer_files_keep_their_size(tmp_path):
    # Proves: with crash_buffer=True a consume larger than a file is cut between files too
    # (before: written whole into one file, 10x rotate_bytes here): each file holds at most
    # rotate_bytes before its Summary frame, every event once, and the buffer's halves
    # hold no cut state once the consume is written.
    s = blog.Session(name="parts")
    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=ROOM + start_size(s))
    cb = with_crash_buffer(s, str(tmp_path / "app.blog"), rf)
    log = s.get_logger("t")
    first = 0
    for burst in (N, 3, N // 2):
        _log(log, burst, first)
        first += burst
        s.consume(rf)
        for slot in list(cb._slots.values()):
            assert bytes(slot.map[SPLIT_AT:SPLIT_AT + 2 * SPLIT.size]) == bytes(32)
    s.use_crash_buffer(None)
    s.finish(rf)
    rf.close()
    assert rf.files > 4
    check_sizes(_set(tmp_path), rf.rotate_bytes)
    assert sorted(_events(tmp_path)) == [(k, i) for k in range(2) for i in range(first)]


# Each step of a cut consume: (what is patched, its attribute, kill before or after the
# call). "torn" tears a write: half of it, then the kill. Writes count when recorded in
# the buffer (a part's or a Summary's), Summaries alone in "summary ...".
STEPS = {
    "before rest": (CrashBuffer, "leaves", "before"),
    "rest stored": (CrashBuffer, "leaves", "after"),
    "write recorded": (CrashBuffer, "writing", "after"),
    "write torn": (blog.RotatingFile, "write", "torn"),
    "write whole": (blog.RotatingFile, "write", "after"),
    "one from stored": (Slot, "split", "after"),
    "part covered": (CrashBuffer, "covered", "after"),
    "summary torn": (blog.RotatingFile, "write", "torn"),
    "summary whole": (blog.RotatingFile, "write", "after"),
    "before the switch": (blog.RotatingFile, "rotate", "before"),
    "after the switch": (blog.RotatingFile, "rotate", "after"),
    "before written": (CrashBuffer, "written", "before"),
    "before unsplit": (CrashBuffer, "unsplit", "before"),
}


def _kill_at(step: str, nth: int) -> None:
    """Patch the call of ``step`` (in the forked child) to SIGKILL the process at its
    ``nth`` call counted (Slot.split: the stores of ``from`` only)."""
    owner, attr, how = STEPS[step]
    real = getattr(owner, attr)
    calls = [0]
    armed = [attr != "write"]      # a write counts once its record (or Summary) began
    arming, arming_attr = ((Output, "finish") if step.startswith("summary")
                           else (CrashBuffer, "writing"))
    arms = getattr(arming, arming_attr)

    def arm(self, *args):
        armed[0] = True
        return arms(self, *args)
    if attr == "write":
        setattr(arming, arming_attr, arm)

    def patched(self, *args):
        counted = args[2] if attr == "split" else armed[0]
        armed[0] = attr != "write"
        calls[0] += counted
        if calls[0] == nth and counted:
            if how == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "torn":
                data = bytes(args[0])
                real(self, data[:len(data) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
            got = real(self, *args)
            os.kill(os.getpid(), signal.SIGKILL)
            return got
        return real(self, *args)
    setattr(owner, attr, patched)


def _killed_writer(d, step: str, nth: int) -> bool:
    """A child that writes one cut consume into the set ``d/app.blog`` killed at ``step``'s
    ``nth`` call; False if it got to the end without (the step has fewer calls)."""
    path = str(d / "app.blog")
    pid = os.fork()
    if pid == 0:
        try:
            fresh_signals()
            s = blog.Session(name="cut")
            rf = blog.RotatingFile(path, rotate_bytes=ROOM + start_size(s))
            with_crash_buffer(s, path, rf)
            log = s.get_logger("t")
            s.consume(rf)                      # the file's start: the cut consume is next
            _log(log)
            _kill_at(step, nth)
            s.consume(rf)
        finally:
            os._exit(7)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status):
        assert os.WEXITSTATUS(status) == 7
        return False
    assert os.WTERMSIG(status) == signal.SIGKILL
    return True


def _recover(d) -> None:
    """Recover the set ``d/app.blog`` as the next start does."""
    path = str(d / "app.blog")
    rf = blog.RotatingFile(path)
    try:
        recover(buffer_directory(path), rf)
    finally:
        rf.close()


@pytest.mark.parametrize("step", list(STEPS))
def test_a_kill_at_any_step_of_a_cut_consume_loses_nothing_and_repeats_nothing(
        tmp_path, step):
    # Proves, for a SIGKILL at each call of each step of a consume cut between files with a
    # crash buffer (before and after a half's rest is stored, the write recorded, torn,
    # whole, a half's from stored, the part covered, the Summary closing a file torn or
    # whole, the switch of files, the consume marked written and its cut state
    # cleared): recovery at the next start appends
    # exactly the events no file holds whole, so the set holds each event once, in
    # order, with no damage; nothing is left to recover a second time.
    killed = 0
    for nth in range(1, 9):
        d = tmp_path / str(nth)
        d.mkdir()
        if not _killed_writer(d, step, nth):
            break
        killed += 1
        _recover(d)
        got = _events(d)
        assert sorted(got) == [(k, i) for k in range(2) for i in range(N)], (step, nth)
        rf = blog.RotatingFile(d / "app.blog")
        try:
            assert recover(buffer_directory(str(d / "app.blog")), rf) == []
        finally:
            rf.close()
    assert killed >= (1 if step.startswith(("before w", "before u")) else 3), step


def test_bread_recover_finishes_a_cut_consume_killed_between_parts(tmp_path, capsys):
    # Proves: `bread --recover BASE` does what the next start does for a consume killed
    # between two parts: only the events no file holds are appended.
    assert _killed_writer(tmp_path, "part covered", 2)
    code, out, err = run_cli(["--recover", str(tmp_path / "app.blog")], capsys)
    assert code == 0 and "recovered" in out, (out, err)
    assert sorted(_events(tmp_path)) == [(k, i) for k in range(2) for i in range(N)]


def test_a_part_refused_is_held_and_only_the_rest_written_again(tmp_path):
    # Proves: a part the file refuses (a full disk) holds what is left of the consume from
    # that part on: the parts before stay written, the retry writes the rest (cut again),
    # a side output gets each event once, and the files keep their size.
    path = str(tmp_path / "app.blog")
    parts: list[int] = []

    class FillsUp(blog.RotatingFile):
        def write(self, data):
            parts.append(len(data))
            if len(parts) == 3:
                raise OSError(28, "No space left on device")
            return super().write(data)
    s = blog.Session(name="held")
    rf = FillsUp(path, rotate_bytes=ROOM + start_size(s))
    with_crash_buffer(s, path, rf)
    seen: list[tuple[int, int]] = []
    s.add_output(lambda e: seen.append((e.args[0], e.args[1])))
    log = s.get_logger("t")
    _log(log)
    assert s.consume(rf) == 0 and s.held
    assert 0 < s.stats.events_held < 2 * N
    s.consume(rf)
    assert not s.held
    s.use_crash_buffer(None)
    s.finish(rf)
    rf.close()
    check_sizes(_set(tmp_path), rf.rotate_bytes)
    everything = [(k, i) for k in range(2) for i in range(N)]
    assert sorted(_events(tmp_path)) == everything
    assert sorted(seen) == everything


def test_a_buffer_of_the_old_layout_recovers_as_before(tmp_path):
    # Proves: a buffer whose halves' from and rest are zero (all a writer before them
    # stored, and what a consume written whole still stores) recovers as before: a
    # write the kill tore is cut, and its events appended once.
    assert _killed_writer(tmp_path, "write torn", 1)
    directory = buffer_directory(str(tmp_path / "app.blog"))
    for chan in [n for n in os.listdir(directory) if n.endswith(".chan")]:
        with open(os.path.join(directory, chan), "r+b") as f:
            head = bytearray(f.read(PAGE))
            head[SPLIT_AT:SPLIT_AT + 2 * SPLIT.size] = bytes(2 * SPLIT.size)
            f.seek(0)
            f.write(head)
    _recover(tmp_path)
    assert sorted(_events(tmp_path)) == [(k, i) for k in range(2) for i in range(N)]


def _crafted_split(d, change, field: int = 0) -> list[str]:
    """The buffer of a writer killed between two parts, each taken half's ``from`` (field 0;
    1: ``rest``) replaced by ``change(from, len)``, then recovered as the next start does:
    what it said."""
    directory = buffer_directory(str(d / "app.blog"))
    for chan in [n for n in os.listdir(directory) if n.endswith(".chan")]:
        with open(os.path.join(directory, chan), "r+b") as f:
            head = bytearray(f.read(PAGE))
            for h in (0, 1):
                n, _, seq = HALF.unpack_from(head, HALF_AT + HALF.size * h)
                done, rest = SPLIT.unpack_from(head, SPLIT_AT + SPLIT.size * h)
                if seq and done:
                    split = [done, rest]
                    split[field] = change(done, n)
                    SPLIT.pack_into(head, SPLIT_AT + SPLIT.size * h, *split)
            f.seek(0)
            f.write(head)
    said: list[str] = []
    rf = blog.RotatingFile(d / "app.blog")
    try:
        recover(directory, rf, warn=said.append)
    finally:
        rf.close()
    return said


def test_a_crafted_from_is_damage_never_a_crash_nor_a_loss(tmp_path):
    # Proves (docs/security.md): a half's `from` beyond its length is damage and
    # the half is read whole (nothing lost); one within an event is damage and that event
    # is recovered (nothing lost, nothing repeated); either way the buffer is reported
    # and set aside, and no exception leaves recovery.
    everything = [(k, i) for k in range(2) for i in range(N)]
    crafted = (("beyond", lambda done, n: n + 1), ("within", lambda done, n: done + (done < n)))
    for name, change in crafted:
        d = tmp_path / name
        d.mkdir()
        assert _killed_writer(d, "part covered", 2)
        said = _crafted_split(d, change)
        assert said and "is damaged" in said[0], said
        if name == "within":
            assert sorted(_events(d)) == everything
        else:          # read whole: the events of the parts written are there twice
            assert {(e.args[0], e.args[1]) for e in bread.read(_set(d))} == set(everything)


@pytest.mark.parametrize("rest", [lambda n: n, lambda n: n + 1, lambda n: (1 << 64) - 1],
                         ids=["overlapping from", "beyond", "negative"])
def test_a_crafted_rest_of_a_write_that_ended_is_damage_never_a_loss_nor_a_silent_repeat(
        tmp_path, rest):
    # Proves (docs/format.md 15): where the write in progress reached its file whole, a
    # half's `rest` beyond its length, or with `from` beyond it (no writer stores that:
    # the write would end before it began), is damage, reported and set aside, and the
    # half read whole (nothing lost). Before, one beyond was reported but the half's events
    # that no file held were lost, and one overlapping `from` made the events of the
    # parts written appended again without a word.
    everything = [(k, i) for k in range(2) for i in range(N)]
    assert _killed_writer(tmp_path, "write whole", 2)
    said = _crafted_split(tmp_path, lambda done, n: rest(n), field=1)
    assert said and "is damaged" in said[0] and "recovered whole" in said[0], said
    assert {(e.args[0], e.args[1]) for e in bread.read(_set(tmp_path))} == set(everything)
    rf = blog.RotatingFile(tmp_path / "app.blog")
    try:      # set aside: the next start recovers nothing again
        assert recover(buffer_directory(str(tmp_path / "app.blog")), rf) == []
    finally:
        rf.close()


def test_a_held_rest_left_in_the_buffer_or_moved_is_written_once(tmp_path):
    # Proves: what is left of a cut consume whose third part the disk refused is written
    # once, whether the session moves to another crash buffer (the rest goes along) or
    # lets go of the buffer (the rest stays on disk, with each half's from: the next
    # start appends only what no file holds).
    everything = [(k, i) for k in range(2) for i in range(N)]
    for how in ("moved", "left"):
        d = tmp_path / how
        d.mkdir()
        path = str(d / "app.blog")
        writes: list[int] = []

        class FillsUp(blog.RotatingFile):
            def write(self, data):
                writes.append(len(data))
                if len(writes) >= 3 and self.full:
                    raise OSError(28, "No space left on device")
                return super().write(data)
        s = blog.Session(name="held")
        rf = FillsUp(path, rotate_bytes=ROOM + start_size(s))
        rf.full = True
        with_crash_buffer(s, path, rf)
        _log(s.get_logger("t"))
        assert s.consume(rf) == 0 and s.held
        if how == "moved":
            s.use_crash_buffer(CrashBuffer(buffer_directory(path), rf.path, s.descriptor))
            rf.full = False
            s.consume(rf)
            assert not s.held
        s.use_crash_buffer(None)
        s.finish(rf)
        rf.close()
        if how == "left":
            _recover(d)
        assert sorted(_events(d)) == everything, how
