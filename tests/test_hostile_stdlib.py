"""The stdlib bridge on hostile records: arguments, messages and ``extra`` whose
``__str__``/``__repr__``/``__format__`` raise, recurse, return huge or non-str values
(docs/security.md). Nothing raises into the application; every record is read
back."""

from __future__ import annotations

import io
import logging

import pytest

import blog
import blog.stdlib
import bread


class Raising:
    def __str__(self):
        raise RuntimeError("str")

    __repr__ = __format__ = __str__


class Recursing:
    def __str__(self):
        return str(self)

    def __repr__(self):
        return repr(self)


class NotText:
    def __str__(self):
        return 5

    def __repr__(self):
        return b"x"


class Huge:
    def __str__(self):
        return "x" * (4 << 20)

    __repr__ = __str__


class RaisingKey(str):
    def __str__(self):
        raise RuntimeError("key")

    __hash__ = str.__hash__


HOSTILE = [Raising(), Recursing(), NotText(), Huge()]


@pytest.fixture
def bridged(hot_path):
    session, out = blog.Session(), blog.MemoryOutputStream()
    logger = logging.Logger("hostile", logging.DEBUG)
    logger.addHandler(blog.stdlib.BlogHandler(session=session))

    def read() -> list[bread.Event]:
        session.consume(out)
        reader = bread.read(io.BytesIO(out.getvalue()))
        events = list(reader)
        assert reader.damage == []
        return events

    return logger, read


def test_an_extra_key_whose_str_raises_keeps_the_record(bridged, capsys):
    logger, read = bridged
    logger.warning("keyed", extra={RaisingKey("k"): 1, Raising(): 2})
    (ev,) = read()
    assert ev.message == "keyed" and sorted(ev.fields.values()) == [1, 2]
    assert "Logging error" not in capsys.readouterr().err


class OwnNameKey(str):
    """An extra key named as the record's exception field, whose str methods raise."""
    def __str__(self):
        return self

    def rstrip(self, *chars):
        raise RuntimeError("rstrip")

    def __add__(self, other):
        raise RuntimeError("add")

    __hash__ = str.__hash__


def test_an_extra_key_of_the_exception_field_s_name_whose_methods_raise(bridged, capsys):
    # Proves: the key is kept as its own field beside the record's exception, its methods
    # never called.
    logger, read = bridged
    logger.error("keyed", exc_info=KeyError("k"), extra={OwnNameKey("exception"): 1})
    (ev,) = read()
    assert ev.fields["exception_"] == 1 and ev.fields["exception"].type == "KeyError"
    assert "Logging error" not in capsys.readouterr().err


def test_hostile_messages_arguments_and_extras_never_raise_and_read_back(bridged, capsys):
    logger, read = bridged
    n = 0
    for v in HOSTILE:
        calls = (("%s", (v,)), ("%r", (v,)), ("%d", (v,)), (v, ()), ("%(a)s", ({"a": v},)))
        for msg, args in calls:
            logger.error(msg, *args)
            logger.info("extra", extra={"k": v})
            n += 2
    try:
        raise ValueError(Raising())
    except ValueError:
        logger.exception("failed")
    events = read()
    assert len(events) == n + 1
    assert events[-1].fields["exception"].type == "ValueError"
    assert "Logging error" not in capsys.readouterr().err


@pytest.mark.parametrize("lineno", [10**30, 1 << 64, -(1 << 63) - 1])
def test_a_record_whose_line_is_past_64_bits_never_stops_logging(bridged, lineno):
    logger, read = bridged
    logger.handle(logging.makeLogRecord({"name": "hostile", "levelno": logging.INFO,
                                         "levelname": "INFO", "pathname": "x.py",
                                         "lineno": lineno, "msg": "crafted"}))
    logger.info("after")
    events = read()      # before: the source's metadata failed every consume from here on
    assert [ev.message for ev in events] == ["crafted", "after"] and events[0].line == 0
