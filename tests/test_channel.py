"""Channels: the C one and the Python reference hold the same bytes for the same events."""

from __future__ import annotations

import enum

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blog.pipeline.channel import PyChannel
from helpers import interrupt_encoding

try:   # both channels in every run, whichever hot path the run uses
    from blog._speedups import Channel as C
except ImportError:  # pragma: no cover - built without a C compiler
    C = None
needs_c = pytest.mark.skipif(C is None, reason="the C fast path is not built here")

EVENTS = [
    (1, 1_000, (12345, 101.25, "AAPL")),
    (2, 1_003, ()),
    (1, 999, (None, True, False, b"\x00\xff", "ü" * 40, -1, -33, -129, -32769)),
    (3, 10**12, (2**63 - 1, 2**64 - 1, -2**63, float("inf"), -0.0, "x" * 300, b"y" * 70000)),
    (1, 10**12 - 5, tuple(range(20))),
]


def decode(taken: tuple) -> list[tuple[int, int, list]]:
    data, count, base, lo, hi, marks = taken
    out, clock = [], base
    for sid, delta, args in msgpack.Unpacker(__import__("io").BytesIO(data), raw=False):
        clock += delta
        out.append((sid, clock, args))
    assert len(out) == count
    return out


@needs_c
def test_c_and_python_channels_hold_the_same_bytes():
    a, b = PyChannel(1 << 20, 1 << 20, None, 500), C(1 << 20, 1 << 20, None, 500)
    for ch in (a, b):
        for sid, clock, values in EVENTS:
            assert ch.push_values(sid, clock, values)
        assert ch.push_raw(9, 2_000, 3, msgpack.packb([1, [2]]))
        ch.mark([2, 1, "renamed"])
        assert ch.push_raw(9, 2_001, 4, msgpack.packb([7]) + msgpack.packb({0: "t"}))
    ta, tb = a.take(), b.take()
    assert ta == tb
    assert ta[2:5] == (500, 999, 10**12)           # base, least, greatest clock
    assert [e[1] for e in decode((ta[0][:ta[5][0][0]], 6) + ta[2:])] == \
        [c for _, c, _ in EVENTS] + [2_000]


@pytest.mark.parametrize("make", [PyChannel, C], ids=["python", "c"])
def test_a_take_and_its_marks_carry_their_fields_by_name(make):
    # Proves (issue 39): what crosses from either channel is read by name, as by position:
    # a take's fields, and each mark's (where the rename applies from).
    if make is None:
        pytest.skip("the C fast path is not built here")
    ch = make(1 << 20, 1 << 20, None, 500)
    assert ch.push_values(1, 510, (1,))
    ch.mark([2, 1, "renamed"])
    assert ch.push_values(1, 520, (2,))
    t = ch.take()
    [m] = t.marks
    assert (t.count, t.base, t.lo, t.hi) == (2, 500, 510, 520)
    assert (m.offset, m.count, m.prev, m.entry) == (len(msgpack.packb([1, 10, [1]])), 1, 510,
                                                     [2, 1, "renamed"])
    assert tuple(m) == (m.offset, m.count, m.prev, m.entry)


@pytest.mark.parametrize("make", [PyChannel, C], ids=["python", "c"])
def test_limit_refuses_without_appending(make):
    if make is None:
        pytest.skip("the C fast path is not built here")
    ch = make(64, 64, None, 0)
    assert ch.push_values(1, 1, ("x" * 10,))
    before = ch.nbytes
    assert not ch.push_values(1, 2, ("x" * 60,))
    assert ch.nbytes == before and ch.count == 1
    assert ch.push_raw(1, 3, 3, msgpack.packb(["x" * 60]), force=True)
    assert ch.count == 2


@pytest.mark.parametrize("make", [PyChannel, C], ids=["python", "c"])
def test_inside_an_output_every_push_is_refused_even_after_a_take(make):
    # Proves: while the owning thread writes the outputs (``inside``), a take by another
    # thread keeps every push refused (the fast paths hand them to the writer, which routes
    # them to its "in an output" writer); set back, the limit is the one the state gives:
    # the wake-up length after a take, the capacity once the consumer was woken. Before,
    # a take reset the limit to the wake-up length and the caller restored a stale copy.
    if make is None:
        pytest.skip("the C fast path is not built here")
    ch = make(256, 64, None, 0)
    ch.woken, ch.limit = True, ch.capacity     # as the back-pressure leaves it once woken
    ch.inside = True
    assert ch.inside and ch.limit == -1 and not ch.push_values(1, 1, (1,))
    ch.take()
    assert ch.limit == -1 and not ch.push_values(1, 2, (1,)) and ch.nbytes == 0
    assert ch.push_raw(1, 3, 3, msgpack.packb([1]), force=True)   # the echo's way in
    ch.inside = False
    assert not ch.inside and (ch.limit, ch.woken) == (64, False)  # as the take left it
    ch.woken = True
    ch.inside = True
    ch.inside = False
    assert ch.limit == 256                      # woken, not taken since: the capacity
    assert ch.push_values(1, 4, ("x" * 100,))


def test_a_push_in_the_middle_of_a_push_keeps_clocks_right():
    # As a signal handler that logs would: a second push starts while the first is
    # between encoding its clock delta and appending. Both clocks must decode exactly.
    ch = PyChannel(1 << 20, 1 << 20, None, 0)

    def handler() -> None:
        assert ch.push_values(2, 150, ("from handler",))

    interrupt_encoding(ch, handler)
    assert ch.push_values(1, 100, ("outer",))
    assert ch.push_values(1, 200, ("after",))
    assert decode(ch.take()) == [(1, 100, ["outer"]), (2, 150, ["from handler"]),
                                 (1, 200, ["after"])]


# --- parity at the edges: a property test -----------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**63, 2**64 - 1),                     # what msgpack encodes natively
    st.integers(2**64, 2**70), st.integers(-2**70, -2**63 - 1),   # neither channel encodes
    st.sampled_from([0, -1, 127, 128, -32, -33, 255, 256, 2**16, 2**32, -2**31 - 1]),
    st.floats(allow_nan=False), st.sampled_from([float("inf"), -0.0]),
    st.text(max_size=80), st.binary(max_size=80),
)


class _Level(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


#: Values that are not a plain scalar of an exact type: both channels refuse them (a
#: tuple would read back as a list, a subclass as its base value).
_not_plain = st.one_of(st.lists(_scalars, max_size=2).map(tuple), st.lists(_scalars, max_size=2),
                       st.text(max_size=5).map(_Text), st.just(_Level.ONE),
                       st.dictionaries(st.text(max_size=3), _scalars, max_size=2))
_ops = st.one_of(
    st.tuples(st.just("values"), st.integers(1, 2**40), st.integers(-2**40, 2**40),
              st.lists(st.one_of(_scalars, _scalars, _not_plain), max_size=6).map(tuple)),
    st.tuples(st.just("raw"), st.integers(1, 2**40), st.integers(-2**40, 2**40),
              st.lists(_scalars.filter(lambda v: not (type(v) is int and not
                                                      -2**63 <= v < 2**64)), max_size=6),
              st.booleans()),
    st.tuples(st.just("open")),      # the back-pressure's first overflow: limit = capacity
    st.tuples(st.just("take")),
    st.tuples(st.just("inside"), st.booleans()),   # the thread writes the outputs, or not
)


def _taken(ch) -> tuple:
    t = ch.take()
    return (t.data, t.count, t.base, t.lo, t.hi, t.marks)


@needs_c
@settings(max_examples=400, deadline=None)
@given(capacity=st.integers(64, 600), wake=st.integers(1, 600),
       ops=st.lists(_ops, max_size=40))
def test_c_and_python_channels_accept_and_refuse_the_same_pushes(capacity, wake, ops):
    py, c = PyChannel(capacity, wake, None, 7), C(capacity, wake, None, 7)
    for op in ops:
        before = py.nbytes
        if op[0] == "values":
            _, sid, clock, values = op
            ok = py.push_values(sid, clock, values)
            assert ok == c.push_values(sid, clock, values), op
        elif op[0] == "raw":
            _, sid, clock, values, force = op
            tail = msgpack.packb(values, use_bin_type=True)
            ok = py.push_raw(sid, clock, 3, tail, force)
            assert ok == c.push_raw(sid, clock, 3, tail, force), op
            ok = ok and not force
        elif op[0] == "open":
            for ch in (py, c):
                ch.woken, ch.limit = True, ch.capacity
            ok = False
        elif op[0] == "inside":
            for ch in (py, c):
                ch.inside = op[1]
            assert (py.inside, py.woken) == (c.inside, c.woken)
            ok = False
        else:
            assert _taken(py) == _taken(c)
            ok = False
        assert (py.nbytes, py.count, py.limit) == (c.nbytes, c.count, c.limit)
        if ok:   # an accepted push (not forced) keeps the channel within its limit
            assert py.nbytes <= py.limit
        elif op[0] in ("values", "raw") and not (op[0] == "raw" and op[-1]):
            assert py.nbytes == before   # a refused push appends nothing
    assert _taken(py) == _taken(c)


def test_values_not_of_an_exact_plain_type_are_refused_and_leave_the_channel_as_it_was():
    # The pure-Python channel once packed a tuple as a list and an IntEnum or a str
    # subclass as its base value (its caller, the stdlib bridge's common case, relied on
    # it to refuse them, as the C channel does): they are the rich values'
    # (blog.pipeline.richvalues).
    for ch in (PyChannel(1 << 20, 1 << 20, None, 0),) + ((C(1 << 20, 1 << 20, None, 0),)
                                                         if C is not None else ()):
        assert ch.push_values(1, 1, (1, "a"))
        for values in [((1, 2),), (1, [1]), (_Level.ONE,), (_Text("v"),), ({"a": 1},)]:
            assert not ch.push_values(1, 2, values), values
        assert decode(_taken(ch)) == [(1, 1, [1, "a"])]


@needs_c
def test_a_string_that_fits_exactly_is_accepted_by_both():
    # The case that once split them: 64 bytes of capacity, a 40-character string.
    for ch in (PyChannel(64, 64, None, 0), C(64, 64, None, 0)):
        assert ch.push_values(1, 1, ("x" * 40,))
        assert not ch.push_values(1, 2, ("x" * 40,))


def test_a_channel_calls_nothing_back_and_knows_no_writer():
    # Proves: a channel's only way back is the overflow callback it was given, which the
    # fast paths call with a push it refused; it never calls it itself, and neither twin
    # points back to a writer (the writer -> channel -> writer circle is gone).
    called = []

    def on_overflow(*push: object) -> None:
        called.append(push)

    for ch in (PyChannel(64, 64, on_overflow, 0),) + ((C(64, 64, on_overflow, 0),)
                                                      if C is not None else ()):
        assert ch.on_overflow is on_overflow and not hasattr(ch, "writer")
        assert ch.push_values(1, 1, ("x" * 40,))
        assert not ch.push_values(1, 2, ("x" * 40,))     # refused: the caller's to hand on
        assert not ch.push_raw(1, 3, 3, b"\x91" + b"\xa1x" * 70)
    assert called == []
