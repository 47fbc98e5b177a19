"""Outputs beside the main one: ``add_output``, ``blog.TextStream`` on the console while
the file has everything."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import blog
import bread

from helpers import CountingDrainer, python_child, run_python


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_text_stream_shows_warnings_while_the_file_has_everything(tmp_path):
    # Proves: one session writes every event to its file and the ones at or above the
    # text stream's minimum, rendered with bread's placeholders, to a text stream.
    s = blog.Session()
    main = blog.MemoryOutputStream()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%S %C %m", min_severity="warning"))
    log = s.get_logger("disk")
    log.info("checked {}", "/")
    log.warning("disk {} at {}%", "/var", 93.5)
    log.debug("detail {}", 1)
    log.error("write failed: {!r}", "no space\x1b[2J")
    s.consume(main)
    assert console.getvalue() == ("WARN disk disk /var at 93.5%\n"
                                  "ERRO disk write failed: 'no space\\x1b[2J'\n")
    assert [ev.message for ev in bread.read(io.BytesIO(main.getvalue()))] == [
        "checked /", "disk /var at 93.5%", "detail 1", "write failed: 'no space\\x1b[2J'"]


def test_a_text_stream_shows_the_writing_process():
    # Proves: %h %p %a show the session's host, pid and program, as bread shows them.
    import os

    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%h %p %a %m"))
    s.get_logger().info("up")
    main = blog.MemoryOutputStream()
    s.consume(main)
    assert console.getvalue() == f"{os.uname().nodename} {os.getpid()} " \
        f"{os.path.basename(sys.argv[0]) or 'python'} up\n"
    printer = bread.render.PrettyPrinter("%h %p %a %m")
    assert [printer(ev) for ev in bread.read(io.BytesIO(main.getvalue()))] == [
        console.getvalue()[:-1]]


def test_text_stream_lines_across_many_writes_keep_their_sources_and_types(tmp_path):
    import dataclasses

    @dataclasses.dataclass
    class Fill:
        qty: int

    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%m"))
    log = s.get_logger()
    for i in range(3):
        log.info("fill {}", Fill(i))
        s.consume(blog.MemoryOutputStream())    # one write per consume: state carried on
    assert console.getvalue().splitlines() == [f"fill {Fill(i)!r}" for i in range(3)]


def test_text_stream_escapes_controls_and_bidirectional_format_characters():
    # Proves: a logged string cannot drive the console nor reorder its line: control
    # characters and the bidi marks, embeddings, overrides and isolates are escapes.
    s = blog.Session()
    console = io.StringIO()
    s.add_output(blog.TextStream(console, format="%C %m"))
    log = s.get_logger("a\u202eb")
    log.info("x {}", "\x1b[2J\u2066y\u2069\u200e\u061c\n")
    s.consume(blog.MemoryOutputStream())
    assert console.getvalue() == "a\\u202eb x \\x1b[2J\\u2066y\\u2069\\u200e\\u061c\\n\n"


def test_colour_on_a_terminal_only():
    for file, coloured in ((Tty(), True), (io.StringIO(), False)):
        s = blog.Session()
        s.add_output(blog.TextStream(file, format="%m"))
        s.get_logger().error("bad")
        s.consume(blog.MemoryOutputStream())
        assert (file.getvalue() == "\x1b[31mbad\x1b[0m\n") is coloured, file.getvalue()


def test_a_failing_side_output_loses_only_its_own_writes():
    class Broken:
        def write(self, data):
            raise OSError("console gone")

    s = blog.Session()
    main = blog.MemoryOutputStream()
    s.add_output(Broken())
    s.get_logger().info("kept {}", 1)
    s.consume(main)
    assert [ev.message for ev in bread.read(io.BytesIO(main.getvalue()))] == ["kept 1"]
    assert s.stats.events_lost == 0


def test_remove_output_and_bad_outputs():
    s = blog.Session()
    side = blog.MemoryOutputStream()
    s.add_output(side)
    s.add_output(side)                     # once only
    assert s.outputs == [side]
    log = s.get_logger()
    log.info("one")
    s.consume(blog.MemoryOutputStream())
    assert s.remove_output(side) and not s.remove_output(side)
    log.info("two")
    s.consume(blog.MemoryOutputStream())
    assert [ev.message for ev in bread.read(io.BytesIO(side.getvalue()))] == ["one"]
    with pytest.raises(TypeError, match="needs write"):
        s.add_output(object())
    with pytest.raises(TypeError, match="needs a text file"):
        blog.TextStream(object())
    with pytest.raises(ValueError):
        blog.TextStream(io.StringIO(), min_severity="loud")


def test_the_default_session_shows_warnings_on_stderr_beside_its_file(tmp_path):
    r = run_python("""
        import sys, blog
        blog.basic_config("app.blog")
        blog.add_output(blog.TextStream(sys.stderr, format="%S %m", min_severity="warning"))
        log = blog.get_logger("app")
        log.info("started")
        log.warning("low disk {}%", 7)
        blog.shutdown()
    """, tmp_path, timeout=60)
    assert r.returncode == 0
    assert r.stderr == "WARN low disk 7%\n"
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == [
        "started", "low disk 7%"]


# --- callable outputs ----------------------------------------------------------------------


def test_a_callable_output_gets_each_event_decoded_with_its_fields():
    # Proves: add_output(func, min_severity=...) calls func with each event at or above the
    # minimum, decoded (severity, category, time, message, args, fields, exception), while
    # the file gets every event.
    import datetime

    s = blog.Session()
    got = []
    s.add_output(got.append, min_severity="info")
    log = s.get_logger("orders")
    log.debug("detail {}", 1)
    log.info("order {} filled at {}", 42, 101.25, user="bob")
    try:
        {}["k"]
    except KeyError:
        log.exception("lookup failed for {}", "k")
    main = blog.MemoryOutputStream()
    s.consume(main)
    assert [ev.message for ev in got] == ["order 42 filled at 101.25", "lookup failed for k"]
    info, error = got
    assert isinstance(info, blog.LiveEvent)
    assert (info.severity, info.category, info.args, info.fields) == (
        blog.Severity.INFO, "orders", (42, 101.25), {"user": "bob"})
    assert info.exception is None and info.exception_text is None
    assert abs(info.time - datetime.datetime.now(datetime.timezone.utc)) < \
        datetime.timedelta(minutes=5)
    assert info.writer and info.file == __file__ and info.function == \
        "test_a_callable_output_gets_each_event_decoded_with_its_fields"
    assert error.severity == blog.Severity.ERROR and error.exception.type.endswith("KeyError")
    assert error.exception_text.startswith("Traceback (most recent call last):")
    assert error.exception_text.endswith("KeyError: 'k'\n")
    assert [ev.message for ev in bread.read(io.BytesIO(main.getvalue()))] == [
        "detail 1", "order 42 filled at 101.25", "lookup failed for k"]


def test_a_raising_callable_costs_only_its_own_calls(capfd):
    # Proves: a callable that raises is counted and reported once on stderr; it is still
    # called with the next events, and the file and the other outputs get everything.
    s = blog.Session()
    calls = []

    def alert(ev):
        calls.append(ev.message)
        if ev.args[0] % 2:
            raise RuntimeError("pager down")

    side = blog.MemoryOutputStream()
    s.add_output(alert)
    s.add_output(side)
    log = s.get_logger()
    main = blog.MemoryOutputStream()
    for i in range(4):
        log.warning("disk {}", i)
        s.consume(main)
    assert calls == ["disk 0", "disk 1", "disk 2", "disk 3"]
    assert s.stats.callable_errors == 2
    assert (s.stats.events_lost, s.stats.write_errors) == (0, 0)
    err = capfd.readouterr().err
    assert err.count("raised RuntimeError: pager down") == 1 and "callable_errors" in err
    for out in (main, side):
        assert [ev.message for ev in bread.read(io.BytesIO(out.getvalue()))] == [
            "disk 0", "disk 1", "disk 2", "disk 3"]


def test_callable_outputs_filter_and_come_off():
    s = blog.Session()
    warnings, everything = [], []

    def everything_seen(ev):
        everything.append(ev.severity)

    s.add_output(warnings.append, min_severity="warning")
    s.add_output(everything_seen)
    log = s.get_logger()
    log.trace("t")
    log.info("i")
    log.warning("w")
    log.critical("c")
    s.consume(blog.MemoryOutputStream())
    assert [ev.message for ev in warnings] == ["w", "c"]
    assert everything == [blog.Severity.TRACE, blog.Severity.INFO, blog.Severity.WARNING,
                          blog.Severity.CRITICAL]
    assert s.remove_output(everything_seen) and not s.remove_output(everything_seen)
    log.error("e")
    s.consume(blog.MemoryOutputStream())
    assert [ev.message for ev in warnings] == ["w", "c", "e"] and len(everything) == 4
    with pytest.raises(TypeError, match="min_severity is a callable output's"):
        s.add_output(blog.MemoryOutputStream(), min_severity="error")
    with pytest.raises(ValueError):
        s.add_output(print, min_severity="loud")


def test_the_default_session_calls_a_function_on_its_consumer_thread(tmp_path):
    r = run_python("""
        import threading, blog
        seen, called = [], threading.Event()

        def alert(ev):
            seen.append((threading.current_thread().name, ev.message, ev.fields))
            called.set()

        blog.basic_config("app.blog")
        blog.add_output(alert, min_severity="warning")
        log = blog.get_logger("app")
        log.info("started")
        log.warning("low disk {}%", 7, mount="/")
        assert called.wait(60)      # written by the consumer, not by shutdown's last consume
        blog.shutdown()
        print(seen)
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[('blog-consumer', 'low disk 7%', {'mount': '/'})]\n"
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == [
        "started", "low disk 7%"]


# --- before any output: the last resort ----------------------------------------------------


def test_before_configuration_warnings_go_to_stderr_as_text(tmp_path):
    # Proves: with no setup at all, a warning is shown on stderr as text (as logging's last
    # resort shows it), an info is not, and the program ends well.
    r = run_python("""
        import blog
        log = blog.get_logger()
        log.info("quiet {}", 0)
        log.warning("x {}", 1)
        log.log("error", "disk {} full", "/var\\x1b[2J")
        try:
            {}["k"]
        except KeyError:
            log.exception("lookup failed")
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[:4] == ["WARN main x 1", "ERRO main disk /var\\x1b[2J full",
                         "ERRO main lookup failed", "Traceback (most recent call last):"]
    assert lines[-2] == "KeyError: 'k'" and "quiet" not in r.stderr
    assert "4 event(s) were logged but never written" in lines[-1]   # (said at exit)


def test_events_logged_before_configuration_reach_the_output_configured_later(tmp_path):
    # Proves: what was queued before basic_config is written to its file, warnings included
    # (shown on stderr meanwhile); once configured, the file alone shows them, and the level
    # methods are the fast ones again.
    r = run_python("""
        import blog

        def kind(method):     # the C Method, or a Python function and the code it runs
            return type(method).__name__, getattr(method, "__code__", None)

        log = blog.get_logger("app")
        log.info("early {}", 1)
        log.warning("early warning {}", 2)
        assert kind(log.warning) != kind(log.info)      # the Python path, meanwhile
        blog.basic_config("app.blog")
        assert kind(log.warning) == kind(log.info) == kind(log.critical)
        log.warning("late {}", 3)
        blog.shutdown()
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "WARN app early warning 2\n"
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == [
        "early 1", "early warning 2", "late 3"]


def test_only_the_default_session_has_a_last_resort(capfd):
    s = blog.Session()
    s.get_logger().warning("kept {}", 1)
    s.consume(blog.MemoryOutputStream())
    assert capfd.readouterr().err == ""


# --- callable outputs at the process's end, logging and forking ----------------------------


def test_a_callable_output_that_never_returns_does_not_keep_the_process_from_exiting(tmp_path):
    # Proves: at exit blog waits for the outputs beside the file at most exit_timeout
    # seconds; one that never returns is left behind and stderr says which and how many
    # events it was not given; the file has every event. Before, the process never exited.
    start = time.monotonic()
    r = run_python("""
        import threading, time, blog

        def stuck(ev):
            print("stuck", flush=True)
            threading.Event().wait()

        blog.basic_config("app.blog")
        blog.default_session().exit_timeout = 1
        blog.add_output(stuck, min_severity="error")
        blog.get_logger().error("boom {}", 1)
        blog.get_logger().info("after {}", 2)
    """, tmp_path, timeout=30)
    assert time.monotonic() - start < 25
    assert r.returncode == 0, r.stderr
    assert "blog: the output stuck has not returned within 1 s as the process ends" in r.stderr
    assert "the outputs beside the file (stuck) miss up to" in r.stderr
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == ["boom 1", "after 2"]


def test_the_outputs_are_written_at_exit_where_python_starts_no_thread(tmp_path):
    # Proves: where Python refuses to start a thread in an exit handler (3.12: "can't
    # create new thread at interpreter shutdown"; refused here as 3.12 does), blog's exit
    # still gives the outputs beside the file their last events, in the exiting thread,
    # and ends the file cleanly. Before, the bounded wait's helper thread raised
    # RuntimeError out of blog's exit handler: a traceback, the callable never given the
    # last events, the file left without its Summary.
    r = run_python("""
        import atexit, threading
        got = []
        atexit.register(lambda: print("got", got, flush=True))   # runs after blog's
        import blog

        def no_thread(self):
            raise RuntimeError("can't create new thread at interpreter shutdown")

        def ending():   # runs before blog's: the last event, then Python 3.12's refusal
            blog.get_logger().info("last {}", 2)
            threading.Thread.start = no_thread

        blog.basic_config("app.blog", flush_interval=60)
        blog.add_output(lambda ev: got.append(ev.message))
        blog.get_logger().info("first {}", 1)
        atexit.register(ending)
    """, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "got ['first 1', 'last 2']" in r.stdout, (r.stdout, r.stderr)
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == ["first 1",
                                                                           "last 2"]
    from bread.stats import collect
    [closing] = collect(str(tmp_path / "app.blog"))["files"]
    assert closing["closed_cleanly"] and closing["summary_events"] == 2


def test_what_a_callable_output_logs_is_written_but_not_fed_back():
    # Proves: an event logged from inside a callable output (on the thread that writes) is
    # written to the outputs as an event of a writer of its own ("... (in an output)"),
    # but never given to a callable output: no call logs more calls, without end. Before,
    # each consume fed the last one's events back.
    s = blog.Session()
    got = []

    def echo(ev):
        got.append(ev.message)
        s.get_logger("alerts").warning("alerted for {}", ev.message)

    s.add_output(echo, min_severity="warning")
    main = blog.MemoryOutputStream()
    s.get_logger().warning("disk {}", 1)
    for _ in range(5):
        s.consume(main)
    assert got == ["disk 1"]
    evs = list(bread.read(io.BytesIO(main.getvalue())))
    assert [ev.message for ev in evs] == ["disk 1", "alerted for disk 1"]
    assert evs[1].writer.endswith("(in an output)")
    assert s.pending() == 0


def test_what_a_callable_output_logs_after_another_thread_takes_its_channel_is_not_fed_back():
    # Proves: a consume from another thread while a callable output runs (the outputs are
    # written after the consume lock is let go) takes the writing thread's channel too, and
    # what the output logs after it still goes to the writer "... (in an output)": written,
    # never given to the callable. And once the output returns, that thread's log calls
    # wake the consumer when they reach the wake-up length, then fill the channel, as before.
    # Before, the take reset the channel's limit: the output's event was fed back to it,
    # and the limit restored on the way out (stale) left the channel woken at its wake-up
    # length, so the next log calls were dropped without filling it.
    s = blog.Session(channel_capacity=4096, overflow="drop")
    drainer = CountingDrainer()
    s.attach(drainer, wake_bytes=256)
    log = s.get_logger("alerts")
    main_thread = threading.current_thread()
    go, taken = threading.Event(), threading.Event()

    class Stream(blog.MemoryOutputStream):
        def write(self, b):
            n = super().write(b)
            if threading.current_thread() is not main_thread:
                taken.set()      # the other thread's consume took the channels and writes
            return n

    main = Stream()
    got = []

    def alert(ev):
        got.append(ev.message)
        if ev.message == "disk 1":
            log.warning("before the take")
            go.set()
            assert taken.wait(20)
            log.warning("after the take {}", "x" * 300)   # past the wake-up length

    s.add_output(alert, min_severity="warning")
    other = threading.Thread(target=lambda: go.wait(20) and s.consume(main))
    other.start()
    log.warning("disk 1")
    s.consume(main)
    other.join(20)
    assert not other.is_alive() and taken.is_set()
    wakes = drainer.wakes
    ch = s.writer().channel
    for i in range(30):          # about 30 bytes each: past 256, within 4096
        log.warning("later {} {}", i, "y" * 20)
        if drainer.wakes == wakes:
            assert ch.nbytes <= 256, i
    assert drainer.wakes == wakes + 1 and ch.dropped == 0
    for _ in range(3):
        s.consume(main)
    later = [f"later {i} {'y' * 20}" for i in range(30)]
    assert got == ["disk 1"] + later
    evs = list(bread.read(io.BytesIO(main.getvalue())))
    assert sorted(ev.message for ev in evs) == sorted(
        ["disk 1", "before the take", "after the take " + "x" * 300] + later)
    assert {ev.writer for ev in evs if "the take" in ev.message} == {
        f"{main_thread.name} (in an output)"}
    assert s.pending() == 0 and s.stats.events_dropped == 0


FORKING_OUTPUT = """
    import os, sys, threading, blog

    done = threading.Event()

    def forker(ev):
        if ev.message != "spawn":
            return
        pid = os.fork()
        if pid == 0:
            blog.get_logger("child").info("in child {}", 1)
            if sys.argv[1] == "exit":
                sys.exit(0)
            return
        print("child", pid, os.waitpid(pid, 0)[1], flush=True)
        done.set()

    blog.basic_config("app.blog")
    blog.add_output(forker)
    blog.get_logger().info("spawn")
    assert done.wait(20)
"""


@pytest.mark.parametrize("how", ["return", "exit"])
def test_a_callable_output_that_forks_leaves_a_child_that_ends(tmp_path, how):
    # Proves: a child forked by a callable output (on the consumer's thread) that returns
    # from it, or raises SystemExit, writes what it logged into its own file and ends (exit
    # status 0), instead of going on as a copy of blog's consumer that never ends.
    r = subprocess.run(python_child("-c", textwrap.dedent(FORKING_OUTPUT), how), cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    child, status = r.stdout.split()[1:]
    assert status == "0"
    assert [ev.message for ev in bread.read(str(tmp_path / "app.blog"))] == ["spawn"]
    assert [ev.message for ev in bread.read(str(tmp_path / f"app.pid{child}.blog"))] == [
        "in child 1"]
