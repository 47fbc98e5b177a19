"""read_batches of columnar frames (docs/format.md 5.5): the C fast path builds the columns
from the frame's columns (bread/decode/_decode.c, ``Renderer.columnar``), giving what the
events payloads the frame stands for give on the Python path, and what the same events
give read from row frames."""

from __future__ import annotations

import io
import math
import os
import threading

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import blog
import bread
from blogformat.frames import FRAME_COLUMNS, frame_bytes
from bread import accel
from bread.compact.compactor import Compactor
from bread.frames import iter_frames

SYMBOLS = ["AAPL", "MSFT", "", "GOOG"]
#: Each argument kind the columnar codings take (INTS, PLAIN, DECIMALS, DOUBLES, STRINGS,
#: PACKED), and mixes of them.
KINDS = {
    "int": st.integers(-10**6, 10**6),
    "huge": st.integers(-2**63, 2**64 - 1),
    "price": st.floats(0, 500).map(lambda f: round(f, 2)),
    "float": st.floats(),                               # NaN, infinities, -0.0
    "symbol": st.sampled_from(SYMBOLS),
    "text": st.text(max_size=6),
    "any": st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3),
                     st.lists(st.integers(), max_size=2)),
}


@st.composite
def streams(draw):
    """Call sites (a format, its argument kinds, maybe a keyword field) and the events of
    up to three writers."""
    sites = []
    for k in range(draw(st.integers(1, 3))):
        kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), max_size=3))
        field = draw(st.one_of(st.none(), st.sampled_from(sorted(KINDS))))
        sites.append((f"s{k} " + " ".join("{}" for _ in kinds), kinds, field))
    events = []
    for _ in range(draw(st.integers(1, 60))):
        site = draw(st.integers(0, len(sites) - 1))
        fmt, kinds, field = sites[site]
        events.append((draw(st.integers(0, 2)), site, [draw(KINDS[k]) for k in kinds],
                       None if field is None else draw(KINDS[field])))
    return sites, events


def write(path: str, sites, events) -> None:
    s = blog.Session()
    logs = [s.get_logger(f"c{k % 2}") for k in range(len(sites))]
    stream = blog.FileOutputStream(path, mode="wb")
    c = blog.Consumer(s, stream).start()

    def work(w: int) -> None:
        s.writer().name = f"w{w}"
        for writer, site, args, field in events:
            if writer == w:
                fields = {} if field is None else {"f": field}
                (logs[site].warning if site % 2 else logs[site].info)(sites[site][0], *args,
                                                                       **fields)

    for w in range(3):   # one after another: each writer's events in the order drawn
        t = threading.Thread(target=work, args=(w,))
        t.start()
        t.join()
    c.stop()
    stream.close()


def compacted(src: str, columnar: bool) -> bytes:
    c = Compactor(os.path.dirname(src))
    c.add_file(src)
    out = io.BytesIO()
    c.write(out, [], columnar)
    return out.getvalue()


def table(data: bytes, batch_size: int = 65536, pure: bool = False) -> tuple[pa.Table, list]:
    saved = accel.speedups
    if pure:
        accel.speedups = None
    try:
        r = bread.read(io.BytesIO(data))
        batches = list(r.batches(batch_size=batch_size))
        t = pa.Table.from_batches(batches) if batches else pa.table({"time": []})
    finally:
        accel.speedups = saved
    return t, [(d.offset, d.reason) for d in r.damage]


def by_writer(t: pa.Table) -> pa.Table:
    """Rows in each writer's order (a compacted file's frames interleave writers as they
    please; each writer's events keep their order)."""
    t = t.append_column("at", pa.array(range(t.num_rows), pa.int64()))
    return t.sort_by([("writer_id", "ascending"), ("clock", "ascending"), ("at", "ascending")]
                     ).drop_columns(["at"])


def same(a: pa.Table, b: pa.Table) -> bool:
    if a.equals(b):
        return True
    for name in a.column_names:   # NaN equals itself here: compare the args' JSON text
        x, y = a[name].to_pylist(), b[name].to_pylist()
        if x != y and not all(u == v or (isinstance(u, float) and math.isnan(u)
                                         and math.isnan(v)) for u, v in zip(x, y)):
            return False
    return a.schema == b.schema


@settings(max_examples=40, deadline=None)
@given(streams(), st.sampled_from([65536, 1, 7]))
def test_columnar_batches_equal_those_of_the_row_frames_and_of_the_python_path(
        tmp_path_factory, stream, batch_size):
    # Proves (issue 30): every column of read_batches of a columnar-compacted file equals
    # that of the same events in row frames (each writer's events in order), for every
    # argument coding (ints, huge ints, decimals, doubles with NaN and infinities, strings
    # with empty ones, packed values and None), keyword fields, several writers and sites,
    # in batches of any size; and the C path's batches are exactly the pure-Python path's.
    d = tmp_path_factory.mktemp("cb")
    src = str(d / "src.blog")
    write(src, *stream)
    rows, cols = compacted(src, False), compacted(src, True)
    assert FRAME_COLUMNS in {f.kind for f in iter_frames(io.BytesIO(cols))}
    t_rows, dmg_rows = table(rows, batch_size)
    t_cols, dmg_cols = table(cols, batch_size)
    assert dmg_rows == dmg_cols == []
    assert t_cols.num_rows == len(stream[1])
    assert same(by_writer(t_cols), by_writer(t_rows))
    t_pure, _ = table(cols, batch_size, pure=True)
    assert same(t_cols, t_pure)


def test_the_fast_path_builds_a_columnar_frame_without_events_payloads(tmp_path, monkeypatch):
    # Proves: on the C path a columnar frame's batch is made by Renderer.columnar, never by
    # expanding the frame into events payloads (blogformat.columnframes.events_payloads).
    if accel.speedups is None:
        pytest.skip("the C fast path")
    src = str(tmp_path / "src.blog")
    write(src, [("a {} {}", ["int", "price"], None)], [(0, 0, [i, i / 4], None)
                                                       for i in range(500)])
    cols = compacted(src, True)
    import blogformat.columnframes as cf

    def refuse(payload):
        raise AssertionError("expanded")
    monkeypatch.setattr(cf, "events_payloads", refuse)
    t, damage = table(cols)
    assert damage == [] and t.num_rows == 500
    assert t["message"][499].as_py() == "a 499 124.75" and t["args"][1].as_py() == "[1,0.25]"


def _crafted(cols: bytes, payload: bytes) -> bytes:
    """The file ``cols`` with its columnar frame's payload replaced (a valid checksum)."""
    out = io.BytesIO()
    for f in iter_frames(io.BytesIO(cols)):
        out.write(frame_bytes(f.kind, payload if f.kind == FRAME_COLUMNS else f.payload))
    return out.getvalue()


@pytest.fixture(scope="module")
def small_columnar(tmp_path_factory) -> bytes:
    src = str(tmp_path_factory.mktemp("cc") / "src.blog")
    write(src, [("a {} {} {}", ["int", "price", "symbol"], "text"), ("b {}", ["any"], None)],
          [(i % 2, i % 2, [i, i / 4, SYMBOLS[i % 4]] if i % 2 == 0 else [None], "x")
           for i in range(40)])
    return compacted(src, True)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_crafted_columnar_frame_reads_as_on_the_python_path(small_columnar, data):
    # Proves: a columnar frame whose payload was changed (counts, lengths, codings, any
    # byte; its checksum valid) gives on the C path the rows and the damage the Python
    # path gives: C takes a frame only where it decodes as Python decodes it, and leaves
    # any other to Python (which reports it as damage), never reading beyond its bytes.
    [payload] = [f.payload for f in iter_frames(io.BytesIO(small_columnar))
                 if f.kind == FRAME_COLUMNS]
    mutated = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    crafted = _crafted(small_columnar, bytes(mutated))
    t_c, dmg_c = table(crafted)
    t_py, dmg_py = table(crafted, pure=True)
    assert dmg_c == dmg_py
    assert same(t_c, t_py)


@pytest.mark.parametrize("count", [1 << 20, 41, 39, 0, -1])
def test_a_columnar_frame_with_a_wrong_count_is_damage(small_columnar, count):
    # Proves: counts beyond the events (up to the format's limit) are damage on both paths,
    # refused before anything is allocated for them (the C decode checks the bytes first).
    import msgpack
    [payload] = [f.payload for f in iter_frames(io.BytesIO(small_columnar))
                 if f.kind == FRAME_COLUMNS]
    head = msgpack.unpackb(payload, strict_map_key=False)
    head[2] = count
    t, damage = table(_crafted(small_columnar, msgpack.packb(head, use_bin_type=True)))
    assert t.num_rows == 0 and len(damage) == 1 and "undecodable frame" in damage[0][1]


@pytest.mark.parametrize("options", [{"min_severity": "warning"}, {"categories": "c0"},
                                     "window", {"until": 1}])
def test_filters_keep_the_same_rows_of_columnar_and_row_frames(tmp_path, options):
    # Proves: read_batches' filters (severity, category, time window) keep the same events
    # of a columnar file as of the same events in row frames, and as the Python path does.
    src = str(tmp_path / "src.blog")
    write(src, [("a {}", ["int"], None), ("b {}", ["symbol"], "price")],
          [(i % 3, i % 2, [i] if i % 2 == 0 else [SYMBOLS[i % 4]], None if i % 2 == 0 else 1.5)
           for i in range(90)])
    if options == "window":   # the middle third of the events' times
        ns = sorted(e.ns for e in bread.read(src))
        options = {"since": ns[30], "until": ns[60]}
    got = {}
    for name, data in (("rows", compacted(src, False)), ("cols", compacted(src, True))):
        for pure in (False, True):
            saved = accel.speedups
            if pure:
                accel.speedups = None
            try:
                batches = list(bread.read_batches(io.BytesIO(data), **options))
            finally:
                accel.speedups = saved
            t = pa.Table.from_batches(batches) if batches else None
            got[name, pure] = [] if t is None else by_writer(
                t.drop_columns(["path"]).set_column(0, "time", t["clock"])).to_pylist()
    assert got["cols", False] == got["cols", True] == got["rows", False] == got["rows", True]
    assert 0 < len(got["rows", False]) < 90 or options == {"until": 1}


@pytest.mark.parametrize("value", [0.0, 100.0, -0.5, 0.0001, 0.00012, 0.00001, 1e-4 * 3,
                                   123456789012.345, 1234567890123.456, 9007199254740991.0,
                                   4503599627370497.5, 1e15 + 0.25, 101.25, 0.1 + 0.2, 1e300])
def test_a_float_column_s_text_is_repr(tmp_path, value):
    # Proves: the message and args of a float column (decimals written from their digits,
    # doubles) are repr of each float, as for row frames: at the edges of fixed notation,
    # of 15 significant digits and of 2**53.
    src = str(tmp_path / "src.blog")
    write(src, [("v {}", ["float"], None)], [(0, 0, [v], None) for v in (value, value * 2, 1.5)])
    t, damage = table(compacted(src, True))
    assert damage == [] and t["message"].to_pylist() == [f"v {v!r}" for v in (value, value * 2,
                                                                              1.5)]
    assert t["args"].to_pylist() == [f"[{v!r}]" for v in (value, value * 2, 1.5)]


def _with_clocks(small_columnar: bytes, clocks_column) -> bytes:
    """``small_columnar`` with its frame's clocks column replaced (a function of the
    frame's clocks), its min_clock and max_clock widened to all 64 bits (clocks outside
    a frame's own bounds are damage)."""
    import msgpack

    import blogformat.columnframes as cf
    [payload] = [f.payload for f in iter_frames(io.BytesIO(small_columnar))
                 if f.kind == FRAME_COLUMNS]
    head = msgpack.unpackb(payload, strict_map_key=False)
    head[6] = clocks_column([e[2] for e in cf.decode(payload)])
    head[3], head[4] = -(1 << 63), (1 << 63) - 1
    return _crafted(small_columnar, msgpack.packb(head, use_bin_type=True))


def _deltas(v: list[int]) -> list[int]:
    return [c - p for p, c in zip([0] + v, v)]


@pytest.mark.parametrize("coding", [8, 1], ids=["deltas", "delta-of-delta"])
def test_both_codings_of_the_clocks_read_alike_on_both_paths(small_columnar, coding,
                                                            monkeypatch):
    # Proves: a columnar frame's clocks as deltas less a base (coding 8, written now) or
    # as deltas of deltas (coding 1, written before) give the same rows, C and Python
    # alike; the C path reads both itself (Renderer.columnar), never as events payloads.
    import blogformat.columnframes as cf

    def column(clocks):
        if coding == 1:
            return [1, cf._put_varints(_deltas(_deltas(clocks)))]
        return [8, -3, cf._put_varints([d + 3 for d in _deltas(clocks)])]
    crafted = _with_clocks(small_columnar, column)
    want, _ = table(small_columnar, pure=True)
    t, damage = table(crafted, pure=True)
    assert damage == [] and same(t, want)
    if accel.speedups is not None:
        monkeypatch.setattr(cf, "events_payloads", lambda payload: _refuse())
        t, damage = table(crafted)
        assert damage == [] and same(t, want)


def _refuse():
    raise AssertionError("expanded into events payloads")


@pytest.mark.parametrize("clocks", [
    lambda c: [8, 0, _clock_varints([(1 << 63) - 1, 1] + [0] * (len(c) - 2))],   # past 2**63
    lambda c: [8, 0, _clock_varints([-(1 << 63), -1] + [0] * (len(c) - 2))],     # below
    lambda c: [8, (1 << 63) - 1, _clock_varints([0] * len(c))],                  # by the base
    lambda c: [8, 0, _clock_varints(_deltas(c))[:-1]],                           # a varint short
    lambda c: [8, 0, _clock_varints(_deltas(c)) + b"\x00"],                      # one too many
    lambda c: [8, 0, b"\x80" * len(c)],                                          # left open
    lambda c: [8, 0, b"\xff" * 9 + b"\x02" + b"\x00" * (len(c) - 1)],            # 65 bits
    lambda c: [8, 0],                                                            # no varints
    lambda c: [0, _clock_varints(_deltas(c))],                                   # not clocks'
    lambda c: [7, 0, _clock_varints(c)]],                                        # not clocks'
    ids=["over", "under", "base", "short", "long", "open", "wide", "none", "ints", "plain"])
def test_a_clocks_column_of_deltas_beyond_its_bytes_or_64_bits_is_damage(small_columnar,
                                                                        clocks):
    # Proves: clock deltas that overflow 64 bits (with their base too), or that are fewer
    # or more than the frame's count, or a coding not the clocks', are damage of the frame
    # on both paths, no row of it read.
    crafted = _with_clocks(small_columnar, clocks)
    for pure in (False, True):
        t, damage = table(crafted, pure=pure)
        assert t.num_rows == 0 and len(damage) == 1 and "undecodable frame" in damage[0][1]


def _clock_varints(v: list[int]) -> bytes:
    from blogformat.columnframes import _put_varints
    got = _put_varints(v)
    assert got is not None
    return got


@pytest.mark.parametrize("wide", [0, 1, 7, 8, 9, 15, 16, 31, 38, 39])
@pytest.mark.parametrize("extra", [b"", b"\x02" * 8, b"\x02" * 9])
def test_clock_varints_of_one_byte_and_more_anywhere_read_alike_on_both_paths(
        small_columnar, wide, extra, monkeypatch):
    # Proves: the clocks' varints, one byte each but the one at `wide` (two bytes), read as
    # their values on both paths wherever the wider one sits among the runs of eight the C
    # path reads at once (itself: never as events payloads); varints past the count (eight
    # or more of one byte) are damage.
    import blogformat.columnframes as cf
    deltas = [1 + (k % 50) for k in range(40)]
    deltas[wide] = 300
    crafted = _with_clocks(small_columnar, lambda c: [8, 0, _clock_varints(deltas) + extra])
    for pure in (False, True):
        with monkeypatch.context() as m:
            if not extra and not pure and accel.speedups is not None:
                m.setattr(cf, "events_payloads", lambda payload: _refuse())
            t, damage = table(crafted, pure=pure)
        if extra:
            assert t.num_rows == 0 and len(damage) == 1
        else:
            clocks = [sum(deltas[:k + 1]) for k in range(40)]
            assert damage == [] and sorted(t["clock"].to_pylist()) == clocks


#: Ints at every count of digits and its edges; a column of decimals of one scale, as the
#: columnar coding takes them (m / 10**k: 0 to 15 places, 1 to 16 digits).
EDGE_INTS = st.one_of(st.sampled_from([0, -1, 1, 9, 10, 99, 100, -(1 << 63), (1 << 63) - 1]),
                      st.integers(0, 19).map(lambda k: 10 ** k - 1),
                      st.integers(0, 18).map(lambda k: -(10 ** k)),
                      st.integers(-2**63, 2**63 - 1))
MANTISSAS = st.one_of(st.integers(-10**15, 10**15), st.integers(0, 15).map(lambda k: 10 ** k),
                      st.integers(1, 15).map(lambda k: 10 ** k - 1))
COLUMNS_OF_ONE_SCALE = st.integers(0, 15).flatmap(lambda k: st.lists(
    st.tuples(EDGE_INTS, MANTISSAS.map(lambda m: m / 10 ** k)), min_size=1, max_size=40))


@settings(max_examples=80, deadline=None)
@given(COLUMNS_OF_ONE_SCALE)
def test_ints_and_decimals_of_every_length_read_as_their_text(tmp_path_factory, values):
    # Proves: the columnar path's text of an int and of a decimal (made a column at a
    # time, two digits a step) is the text the row frames and the Python path give (str
    # and repr), in the message, the args and with ints' and floats' signs, zeros and
    # lengths of 1 to 20 digits, and decimals of 0 to 15 places.
    d = tmp_path_factory.mktemp("digits")
    src = str(d / "src.blog")
    write(src, [("v {} {}", ["int", "float"], None)], [(0, 0, list(v), None) for v in values])
    rows, cols = compacted(src, False), compacted(src, True)
    t_cols, damage = table(cols)
    assert damage == []
    assert t_cols["message"].to_pylist() == [f"v {i} {f!r}" for i, f in values]
    assert same(t_cols, table(cols, pure=True)[0]) and same(t_cols, table(rows)[0])


#: Words of a string column's dictionary whose text and JSON are made once per word: JSON's
#: escapes, control characters, non-ASCII, braces, a lone surrogate, the empty string.
WORDS = ["", "AAPL", 'say "hi"', "back\\slash", "tab\there\nnl", "\x00\x1f\x7f", "é中𝄞",
         "{}", "{{x}}", "\ud800 lone", "x" * 300]
LITERALS = st.sampled_from(["", "a", " ", "{{", "}}", "{{}}", "\\", '"', "é", "\t", "%s"])
PLACES = st.sampled_from(["{}", "{f}", "{!r}", "{:>4}"])
ANY = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(),
                st.sampled_from(WORDS), st.text(max_size=4), st.lists(st.integers(), max_size=2))


@st.composite
def templated(draw):
    """A format of literal parts (braces escaped, escapes) and placeholders (positional, the
    keyword field f, a conversion, a spec), and the events of one call site of it."""
    parts = draw(st.lists(st.tuples(LITERALS, PLACES), max_size=8))
    fmt = "".join(lit + place for lit, place in parts) + draw(LITERALS)
    npos = sum(1 for _, place in parts if place != "{f}")
    kind = draw(st.sampled_from([st.sampled_from(WORDS), ANY, st.integers(-2**63, 2**63 - 1),
                                 st.floats(0, 1e6).map(lambda f: round(f, 3))]))
    events = [(draw(st.integers(0, 2)), 0, draw(st.lists(kind, min_size=npos, max_size=npos)),
               draw(kind.filter(lambda v: v is not None)) if "{f}" in fmt else None)
              for _ in range(draw(st.integers(1, 30)))]   # (a field of None: none passed)
    return [(fmt, ["any"] * npos, None)], events


@settings(max_examples=80, deadline=None)
@given(templated())
def test_messages_made_from_a_columnar_frame_s_columns_are_those_of_each_event(
        tmp_path_factory, stream):
    # Proves: a message assembled from a template's literal parts and its value columns'
    # text made once (ints, decimals, doubles, dictionary words with escapes and empty
    # ones, packed values, keyword fields, conversions and specs left to Python) is the
    # message, args and fields each event gives: from row frames and on the Python path.
    d = tmp_path_factory.mktemp("tpl")
    src = str(d / "src.blog")
    write(src, *stream)
    rows, cols = compacted(src, False), compacted(src, True)
    t_cols, damage = table(cols)
    assert damage == [] and t_cols.num_rows == len(stream[1])
    assert same(by_writer(t_cols), by_writer(table(rows)[0]))
    assert same(t_cols, table(cols, pure=True)[0])


def test_a_message_of_dictionary_words_past_the_bound_is_cut_as_on_the_python_path(tmp_path):
    # Proves: a message whose words (text made once per word) pass MAX_MESSAGE is cut
    # where the Python path cuts it, its args' JSON whole.
    from blogformat.placeholders import CUT_MARK, MAX_MESSAGE
    word = "w" * (MAX_MESSAGE // 2 + 1)
    src = str(tmp_path / "src.blog")
    write(src, [("{} {}", ["any", "any"], None)], [(0, 0, [word, w], None)
                                                   for w in (word, "", word, "")])
    cols = compacted(src, True)
    t, damage = table(cols)
    assert damage == [] and same(t, table(cols, pure=True)[0])
    assert same(t, table(compacted(src, False))[0])
    assert t["message"][1].as_py() == word + " "
    assert t["message"][0].as_py() == (word + " " + word)[:MAX_MESSAGE] + CUT_MARK
