"""The backtrace buffer: debug detail kept in memory, written only around an error."""

from __future__ import annotations


import json
import subprocess

import pytest

import blog
import bread

from helpers import in_threads, python_child, run_python


def test_a_backtrace_is_flushed_by_an_error(make_logged):
    # Proves: events below the minimum are not written until an error is logged in
    # their thread; then its last N come first, marked, in time order, with the values
    # they had at the call.
    logged = make_logged(min_severity="info")
    logged.session.use_backtrace(3)
    log = logged.log
    items = []
    for i in range(6):
        items.append(i)
        log.debug("step {} items {}", i, items)   # a list: captured at the call
    log.info("visible")
    log.error("failed {}", "x")
    log.debug("later {}", 1)                       # kept, and never written
    events = logged.read()
    got = [(ev.severity.name, ev.backtrace, ev.message) for ev in events]
    assert got == [("INFO", False, "visible"),
                   ("DEBUG", True, "step 3 items [0, 1, 2, 3]"),
                   ("DEBUG", True, "step 4 items [0, 1, 2, 3, 4]"),
                   ("DEBUG", True, "step 5 items [0, 1, 2, 3, 4, 5]"),
                   ("ERROR", False, "failed x")]
    clocks = [ev.clock for ev in events[1:4]]
    assert clocks == sorted(clocks) and clocks[-1] < events[0].clock


def test_each_thread_keeps_its_own_backtrace(make_logged):
    logged = make_logged(min_severity="warning")
    logged.session.use_backtrace(10, trigger="critical")
    log = logged.log

    def work(t: int) -> None:
        for i in range(3):
            log.info("t{} {}", t, i)
        if t == 1:
            log.error("an error is not the trigger here")
            log.critical("t1 down")

    in_threads(work, 3)
    got = [(ev.backtrace, ev.message) for ev in logged.read()]
    assert got == [(False, "an error is not the trigger here"),
                   (True, "t1 0"), (True, "t1 1"), (True, "t1 2"), (False, "t1 down")]


def test_log_exception_and_log_trigger_and_keep(make_logged):
    logged = make_logged(min_severity="info")
    logged.session.use_backtrace(5, least="debug")
    log = logged.log
    log.trace("not even kept")
    log.log("debug", "kept {}", 1)
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("division")
    events = logged.read()
    assert [(ev.backtrace, ev.message) for ev in events] == [(True, "kept 1"),
                                                             (False, "division")]
    assert events[1].fields["exception"].type == "ZeroDivisionError"


def test_bread_marks_backtrace_events_in_text_and_json(tmp_path):
    s = blog.Session(min_severity="info")
    s.use_backtrace(2)
    out = blog.MemoryOutputStream()
    log = s.get_logger("app")
    log.debug("detail {}", 1)
    log.error("boom")
    s.consume(out)
    path = tmp_path / "x.blog"
    path.write_bytes(out.getvalue())
    for env in ({}, {"BREAD_PURE_PYTHON": "1"}):
        text = subprocess.run(python_child("-m", "bread", "-f", "%S %m", str(path)),
                              capture_output=True, text=True, timeout=60,
                              env={**__import__("os").environ, **env}).stdout
        assert text == "DEBG [backtrace] detail 1\nERRO boom\n"
    lines = subprocess.run(python_child("-m", "bread", "-o", "jsonl", str(path)),
                           capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert [json.loads(x).get("backtrace", False) for x in lines] == [True, False]


def test_turning_it_off_and_bad_settings(make_logged):
    logged = make_logged(min_severity="info")
    logged.session.use_backtrace(5)
    logged.log.debug("dropped when turned off")
    logged.session.use_backtrace(0)
    logged.log.error("no backtrace")
    assert [ev.message for ev in logged.read()] == ["no backtrace"]
    for bad in (-1, 1.5, True, 1 << 20):
        with pytest.raises(ValueError):
            logged.session.use_backtrace(bad)
    with pytest.raises(ValueError):
        logged.session.use_backtrace(5, trigger="loud")


def test_basic_config_backtrace(tmp_path):
    r = run_python("""
        import blog
        blog.basic_config("x.blog", min_severity="info", backtrace=2)
        log = blog.get_logger()
        for i in range(4): log.debug("d {}", i)
        log.error("e")
        blog.shutdown()
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    got = [(ev.backtrace, ev.message) for ev in bread.read(str(tmp_path / "x.blog"))]
    assert got == [(True, "d 2"), (True, "d 3"), (False, "e")]



def test_basic_config_again_keeps_the_backtrace_unless_told(tmp_path):
    r = run_python("""
        import blog
        s = blog.basic_config("x.blog", min_severity="info", backtrace=3)
        blog.basic_config("x.blog", min_severity="info")
        assert s.backtrace is not None and s.backtrace.size == 3
        blog.basic_config("x.blog", min_severity="info", backtrace=0)
        assert s.backtrace is None
        blog.shutdown()
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
