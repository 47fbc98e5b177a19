"""blog.testing: an application's tests check what it logged."""

from __future__ import annotations

import io
import logging

import pytest

import blog
import blog.testing
import bread


def checkout(order_id: int) -> None:
    """Application code under test: logs through the default session."""
    log = blog.get_logger("shop")
    with blog.context(request_id=f"r-{order_id}"):
        log.info("order {} filled at {}", order_id, 101.25)
        logging.getLogger("payments").warning("card %s declined", "visa")


def test_the_capture_fixture_sees_what_the_test_logged(blog_capture):
    # The fixture comes from blog's pytest plugin (entry point pytest11).
    handler = blog.stdlib.BlogHandler()
    logging.getLogger("payments").addHandler(handler)
    try:
        checkout(42)
    finally:
        logging.getLogger("payments").removeHandler(handler)
    assert blog_capture.messages() == ["order 42 filled at 101.25", "card visa declined"]
    first = blog_capture[0]
    assert (first.category, first.args, first.fields) == ("shop", (42, 101.25),
                                                          {"request_id": "r-42"})
    assert blog_capture[1].severity == blog.Severity.WARNING


def test_the_capture_fixture_sees_logging_records_with_no_setup(blog_capture):
    # Proves: code under test that logs through `logging`, with no BlogHandler anywhere (as
    # in most applications' tests), is captured by the fixture alone.
    logging.getLogger("payments").warning("card %s declined", "visa")
    assert blog_capture.messages() == ["card visa declined"]
    assert blog_capture[0].category == "payments"


def test_capture_takes_logging_records_as_logging_emits_them_and_once():
    # Proves: records are captured at the levels logging would emit them (root's WARNING:
    # an unconfigured logger's info is not emitted), from the root logger too; a record
    # that a BlogHandler of the session on its way wrote is not captured twice; the
    # handler goes with the capture; logging=False takes none.
    before = list(logging.getLogger().handlers)
    with blog.testing.capture() as captured:
        logging.getLogger("payments").warning("card %s declined", "visa")
        logging.getLogger("payments").info("not emitted by logging")
        logging.warning("root %d", 1)
        handler = blog.stdlib.BlogHandler()
        logging.getLogger("shop.cart").addHandler(handler)
        try:
            logging.getLogger("shop.cart").error("once %s", "only")
        finally:
            logging.getLogger("shop.cart").removeHandler(handler)
    assert captured.messages() == ["card visa declined", "root 1", "once only"]
    assert [e.category for e in captured] == ["payments", "root", "shop.cart"]
    assert logging.getLogger().handlers == before
    with blog.testing.capture(logging=False) as off:
        logging.getLogger("payments").warning("not captured")
    assert off.messages() == []


def test_logging_routed_into_blog_during_a_capture_stays_routed_after_it():
    # Proves: blog.stdlib.capture() called by the code under test while a capture runs
    # (an application's start-up in a test) adds its own BlogHandler, which outlives the
    # capture; each record is captured once meanwhile. Before, it took the capture's
    # handler for its own, which the capture's end removed: logging was no longer routed.
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        with blog.testing.capture() as captured:
            routed = blog.stdlib.capture()
            logging.getLogger("payments").warning("card %s declined", "visa")
        assert captured.messages() == ["card visa declined"]
        assert routed in root.handlers
    finally:
        root.handlers[:] = before
        root.setLevel(level)


def test_capture_holds_only_what_was_logged_inside_it():
    log = blog.get_logger("shop")
    log.info("before")
    with blog.testing.capture() as logged:
        log.info("inside {}", 1)
        assert logged.messages() == ["inside 1"]     # readable while capturing
        log.debug("inside {}", 2)
    log.info("after")
    assert [ev.message for ev in logged] == ["inside 1", "inside 2"]
    assert len(logged) == 2
    # The default session has no output in these tests: what is still queued ("after";
    # "before" went with the capture, as the guide says of a session without an output)
    # is taken off it, or its exit report would say it was never written.
    out = blog.MemoryOutputStream()
    blog.default_session().consume(out)
    assert [ev.message for ev in bread.read(io.BytesIO(out.getvalue()))] == ["after"]


def test_capture_of_a_private_session_and_a_minimum():
    s = blog.Session()
    with blog.testing.capture(s, min_severity="warning") as logged:
        s.get_logger().info("no")
        s.get_logger().error("yes {}", 1)
    assert logged.messages() == ["yes 1"]
    with pytest.raises(TypeError, match="needs a blog.Session"):
        blog.testing.capture(object())


def test_a_capture_of_a_session_written_by_hand_leaves_its_output_whole(tmp_path):
    # A review found: with no consumer, the capture wrote the session into a stream of
    # its own, which then became the session's output: the events logged meanwhile
    # never reached the user's file.
    s = blog.Session()
    out = blog.FileOutputStream(str(tmp_path / "x.blog"), mode="wb")
    log = s.get_logger()
    log.info("before {}", 1)
    s.consume(out)
    with blog.testing.capture(s) as logged:
        log.info("during {}", 2)
    log.info("after {}", 3)
    s.consume(out)
    out.close()
    assert logged.messages() == ["during 2"]
    assert [ev.message for ev in bread.read(str(tmp_path / "x.blog"))] == [
        "before 1", "during 2", "after 3"]


def test_a_capture_is_strict_so_that_a_test_finds_a_format_that_does_not_fit(blog_capture):
    # Proves: inside the fixture and blog.testing.capture a literal format that does not
    # fit its call raises (in production it is logged as text); the session is as it was
    # after, and capture(strict=False) logs it as text.
    log = blog.get_logger("shop")
    with pytest.raises(blog.CallSiteError, match="1 {} placeholder"):
        log.info("fixture {}")
    s = blog.Session()
    with pytest.raises(blog.CallSiteError, match="2 {} placeholder"):
        with blog.testing.capture(s):
            s.get_logger().info("{} and {}", 1)
    assert s.strict is False
    with blog.testing.capture(s, strict=False) as logged:
        s.get_logger().info("lenient {}")
    assert logged.messages() == ["lenient {} [format does not fit the call]"]
