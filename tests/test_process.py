"""The process's live objects and hooks (blog/process.py): a forked child runs the
after-fork steps in the stated order, whatever order the modules were imported in."""

from __future__ import annotations

import glob
import json
import os

import pytest
from helpers import run_python

import bread


def test_a_forked_child_runs_the_after_fork_steps_in_the_stated_order(tmp_path):
    # Proves: the order of blog.process's docstring (codec state, file streams, rotated
    # sets, crash buffers, sessions, the default session), whatever order the objects
    # were made in.
    r = run_python("""
        import os, sys
        import blogstore.manifest, blogformat.valuetypes
        from blog import process
        done = []

        class Live:
            def __init__(self, kind):
                self.kind = kind
                process.track(kind, self)

            def _forked(self):
                done.append(self.kind)
        for name in ("blogformat.valuetypes", "blogstore.manifest"):
            sys.modules[name].reset_after_fork = lambda name=name: done.append(name)
        objects = [Live(k) for k in (process.SESSION, process.CRASH_BUFFER, process.ROTATING,
                                     process.STREAM, process.SESSION)]
        process.after_fork_last(lambda: done.append("default session"))
        pid = os.fork()
        if pid == 0:
            with open("order", "w") as f:
                f.write(",".join(done))
            os._exit(0)
        os.waitpid(pid, 0)
        assert done == [], done   # the parent runs none of them
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "order").read_text().split(",") == [
        "blogformat.valuetypes", "blogstore.manifest", "file stream", "rotated file set",
        "crash buffer", "session", "session", "default session"]


#: Import orders: the options' modules before the default session's, and after it (a
#: configuration imports them when it asks for rotation or a crash buffer).
IMPORT_ORDERS = {
    "options first": ("import blog.files.crashbuf, blog.files.rotating, blog.files.housekeeping,"
                      " blog.default"),
    "default first": "import blog.default, blog.pipeline.session, blog.pipeline.streams",
}


def _fork(tmp_path, order: str, options: str, child_end: str) -> int:
    """In a child Python that imports blog's modules in ``order`` and calls
    ``basic_config("app.blog", <options>)``: log "parent 0", fork a child that logs
    "child 0" to "child 99" and runs ``child_end``, then log "parent 1". The child's pid."""
    r = run_python(f"""
        import os, signal
        {IMPORT_ORDERS[order]}
        import blog
        blog.basic_config("app.blog", {options})
        log = blog.get_logger("t")
        log.info("parent {{}}", 0)
        blog.flush()
        pid = os.fork()
        if pid == 0:
            for i in range(100):
                log.info("child {{}}", i)
            {child_end}
        log.info("parent {{}}", 1)
        os.waitpid(pid, 0)
        blog.shutdown()
        print(pid)
    """, tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return int(r.stdout)


CHILD = [f"child {i}" for i in range(100)]


@pytest.mark.parametrize("order", sorted(IMPORT_ORDERS))
def test_a_forked_child_logs_into_its_own_file_whatever_the_import_order(tmp_path, order):
    # Proves: the child's new file is its own (a step after the default session's would
    # close it), and the parent's file is untouched by the child.
    child = _fork(tmp_path, order, "flush_interval=60", "blog.shutdown(); os._exit(0)")
    assert [e.message for e in bread.read(tmp_path / "app.blog")] == ["parent 0", "parent 1"]
    assert [e.message for e in bread.read(tmp_path / f"app.pid{child}.blog")] == CHILD


@pytest.mark.parametrize("order", sorted(IMPORT_ORDERS))
def test_a_killed_forked_child_of_a_rotated_set_loses_nothing_whatever_the_import_order(
        tmp_path, order):
    # Proves: the child's file set and crash buffer are its own (a step after the default
    # session's would let go of them): its events, never written when it is killed, are
    # recovered by the next start; the parent's files hold only the parent's events.
    child = _fork(tmp_path, order, "rotate_bytes=1 << 20, crash_buffer=True, flush_interval=60",
                  "os.kill(os.getpid(), signal.SIGKILL)")
    files = glob.glob(str(tmp_path / "app.*.blog*"))
    assert [e.message for e in bread.read([f for f in files if f".pid{child}." not in f])] \
        == ["parent 0", "parent 1"]
    r = run_python("""
        import blog
        blog.basic_config("app.blog", rotate_bytes=1 << 20, crash_buffer=True)
        blog.shutdown()
    """, tmp_path)
    assert r.returncode == 0 and "recovered 100 event(s)" in r.stderr, r.stderr
    assert sorted(e.message for e in bread.read(glob.glob(str(tmp_path / "app.*.blog*")))) \
        == sorted(["parent 0", "parent 1", *CHILD])


#: Options of basic_config, and the threads of blog's they start (the compaction's watcher
#: runs while its child runs: a fake interpreter that waits for a file "done").
THREADED = {
    "plain file": ("", ["blog-consumer"]),
    "crash buffer, group commit": ("crash_buffer=True, fsync=0.01", ["blog-consumer"]),
    "rotated set": ("rotate_bytes=1 << 20", ["blog-consumer", "blog-housekeeping"]),
    "every housekeeping option": (
        "rotate_bytes=1 << 20, compress=True, keep_files=5, crash_buffer=True, "
        "on_close=shipped.append", ["blog-consumer", "blog-housekeeping"]),
    "compaction": ("rotate_bytes=1 << 20, compact=blog.Compaction(older_than=60, "
                   "python=os.path.abspath('python-waits'))",
                   ["blog-compaction", "blog-consumer", "blog-housekeeping"]),
}


@pytest.mark.parametrize("name", sorted(THREADED))
def test_no_thread_of_blog_runs_at_a_fork_and_nothing_is_lost_across_it(tmp_path, name):
    # Proves: at the fork (a hook of the application's, which runs after blog's), only the
    # thread that forks is alive, so Python 3.12+ has nothing to warn of (no warning, on
    # every Python); after it the parent's next log call starts its threads again (a
    # flush_async is answered by the consumer's thread, the compaction's child is watched
    # to its end), and every event is written once, in order: the parent's in its files,
    # the child's in its own.
    options, threads = THREADED[name]
    (tmp_path / "python-waits").write_text(
        "#!/bin/sh\nwhile [ ! -e done ]; do sleep 0.02; done\n")
    (tmp_path / "python-waits").chmod(0o755)
    r = run_python(f"""
        import json, os, threading, time, warnings

        def others():
            return sorted(t.name for t in threading.enumerate()
                          if t is not threading.current_thread())
        at_fork = []
        os.register_at_fork(before=lambda: at_fork.append(others()))   # runs after blog's

        import blog
        from blog.lifecycle import consumer_of
        shipped = []
        os.mkdir("logs")
        for i in range(2):   # old closed files: a compaction is due at once
            with open(f"logs/app.2020-01-01T00-00-0{{i}}.000.pid1.blog", "wb"):
                pass
            os.utime(f"logs/app.2020-01-01T00-00-0{{i}}.000.pid1.blog", (1e9, 1e9))
        blog.basic_config("logs/app.blog", {options})
        log = blog.get_logger("t")
        for i in range(50):
            log.info("parent {{}}", i)
        stream = consumer_of(blog.default_session()).stream
        while others() != {threads!r}:    # housekeeping starts its child
            time.sleep(0.01)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pid = os.fork()
        if pid == 0:
            log.info("child {{}}", os.getpid())
            blog.shutdown()
            os._exit(0)
        log.info("parent {{}}", 50)      # starts blog's threads again
        deadline = time.monotonic() + 60
        while others() != {threads!r} and time.monotonic() < deadline:
            time.sleep(0.01)
        after = others()
        for i in range(51, 100):
            log.info("parent {{}}", i)
        blog.flush_async().result(60)    # answered by the consumer's thread only
        open("done", "w").close()
        compactions = getattr(getattr(stream, "housekeeper", None), "compactions", None)
        assert compactions is None or compactions.wait(60)
        assert os.waitpid(pid, 0)[1] == 0
        blog.shutdown()
        print(json.dumps(dict(child=pid, at_fork=at_fork, after=after,
                              warnings=[str(w.message) for w in caught])))
    """, tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = json.loads(r.stdout)
    assert out["at_fork"] == [[]] and out["warnings"] == [], out
    assert out["after"] == threads, out
    child = out["child"]
    files = [f for f in glob.glob(str(tmp_path / "logs" / "app.*blog*"))
             if not os.path.basename(f).startswith("app.2020-01-01")]
    mine = [f for f in files if f"pid{child}." in f]
    assert [e.message for e in bread.read([f for f in files if f not in mine])] == [
        f"parent {i}" for i in range(100)]
    assert [e.message for e in bread.read(mine)] == [f"child {child}"]


@pytest.mark.parametrize("options", ["", "rotate_bytes=1 << 20"])
def test_a_forked_child_forks_again_and_forks_in_a_row_log_everything_once(tmp_path, options):
    # Proves: the child's own threads (not the parent's, which it forgets) are stopped when
    # it forks in turn, and forks in a row with no log call between them (a pre-fork
    # server starting its workers) stop and start nothing twice: no warning in any
    # process, and each event once, in the file (set) of the process that logged it.
    r = run_python(f"""
        import os, threading, traceback, warnings
        warnings.simplefilter("error", DeprecationWarning)
        at_fork = []
        os.register_at_fork(before=lambda: at_fork.append(threading.active_count()))
        import blog
        blog.basic_config("app.blog", {options})
        log = blog.get_logger("t")

        def fork(body):
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    body()
                    assert at_fork == [1] * len(at_fork), at_fork
                    blog.shutdown()
                    status = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(status)
            return pid

        def child():
            log.info("child {{}}", os.getpid())
            pid = fork(lambda: log.info("grandchild {{}}", os.getpid()))
            log.info("child again {{}}", os.getpid())
            assert os.waitpid(pid, 0)[1] == 0
        log.info("parent {{}}", 0)
        pids = [fork(child) for _ in range(3)]
        log.info("parent {{}}", 1)
        assert [os.waitpid(pid, 0)[1] for pid in pids] == [0, 0, 0]
        assert at_fork == [1, 1, 1], at_fork
        blog.shutdown()
        print(*pids)
    """, tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    events = [e.message for e in bread.read(glob.glob(str(tmp_path / "app.*blog*")))]
    children = r.stdout.split()
    assert len(events) == 2 + 3 * 3 and len(set(events)) == len(events), events
    for pid in children:
        assert f"child {pid}" in events and f"child again {pid}" in events
    assert sum(e.startswith("grandchild ") for e in events) == 3
