"""The C renderer (bread/decode/_speedups.c) and the Python one (bread/sinks/lines.py) print
the same bytes.

Files are built here from blogformat's entries, so that every corner the
format allows (any format string, any value, any clock, damage) is reached,
not only what blog writes. Each test renders with both and compares the
bytes and the damage reported.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgpack import ExtType

import bread
from blogformat import TEXT_VERSION
from blogformat import frames as fmt
from blogformat.entries import ClockSync, EventSource, WriterProp, encode_metadata, header_payload
from blogformat.eventframes import BatchHeader
from blogformat.valueencoding import packb
from bread import accel
from bread.sinks import lines
from bread.render import DEFAULT_FORMAT, PrettyPrinter
from helpers import count_reader_fallbacks, texts_kept

C = accel.speedups
needs_c = pytest.mark.skipif(C is None, reason="compares the C reader with Python: it is off "
                                               "(BREAD_PURE_PYTHON=1) or not built")


def build(sources: list[EventSource], events: list[list], *, clock0: int = 1_700_000_000 * 10**9,
          sync: ClockSync | None = None, writers=(WriterProp(1, "main"),),
          events_per_frame: int = 7, descriptor: dict | None = None) -> bytes:
    """A file: header, metadata, then the events (source id, delta, args[, texts]) in frames."""
    meta = [sync or ClockSync(clock0, 10**9, clock0 + 123_456_789, 3600, "CET"), *sources,
            *writers]
    out = [fmt.frame_bytes(fmt.FRAME_HEADER, header_payload(descriptor or {"host": "h"})),
           fmt.frame_bytes(fmt.FRAME_METADATA, b"".join(encode_metadata(e) for e in meta))]
    for k in range(0, len(events), events_per_frame):
        chunk = events[k:k + events_per_frame]
        head = BatchHeader(1, clock0, len(chunk), clock0, clock0).encode()
        out.append(fmt.frame_bytes(fmt.FRAME_EVENTS, head + b"".join(packb(e) for e in chunk)))
    return b"".join(out)


def render(data: bytes, printer: PrettyPrinter, escape: bool, use_c: bool,
           max_out: int | None = None) -> tuple[bytes, list]:
    with pytest.MonkeyPatch.context() as m:
        if not use_c:
            m.setattr(accel, "speedups", None)
        if max_out is not None:
            m.setattr(lines, "MAX_BLOCK", max_out)
        r = bread.read(io.BytesIO(data))
        try:
            out = b"".join(r.text(printer, escape=escape))
        except bread.NotABlogFile as exc:   # damage at the very start can make one
            return b"", [str(exc)]
        return out, [(d.offset, d.length, d.reason) for d in r.damage] + [r.unknown_sources]


def both(data: bytes, fmt_: str = "%S %C [%d] %n %m (%G:%L) %u %r %t %I %T %P",
         date: str = "%Y-%m-%d %H:%M:%S.%N %z %Z", escape: bool = False,
         max_out: int | None = None, color: bool = False, traceback: bool | None = None) -> bytes:
    printer = PrettyPrinter(fmt_, date, color=color, traceback=traceback)
    c = render(data, printer, escape, True, max_out)
    py = render(data, printer, escape, False)
    assert c == py
    return c[0]


# --- values ------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\x00\x07\n\r\t\x1b[31m", "\x85\x9f\xa0", "ü€𝄞", "\ud800", "a\udfffb", "{}", "%m",
     "\u202ea\u2066\u2069\u061c\u200e\u200f\u202a", "\u202f\u2065\u206a\u200d\u061b\u2029"])
_scalar = (st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.integers()
           | st.floats() | st.sampled_from([0.0, -0.0, 1e-4, 9.9999e-5, 1e15, 1e16, 2.0**53,
                                            101.25, 0.1, 1 / 3, 123456789.123, -5e-324])
           | _text | st.binary(max_size=6))
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(_text, inner, max_size=2) | st.tuples(inner), max_leaves=5)


#: Exceptions as blog encodes them (extension 13): never raised, and with frames and a
#: message whose lines and control characters a traceback shows.
_exception = st.sampled_from([
    ExtType(13, packb(["builtins.KeyError", "'k'", None, None, None, None])),
    ExtType(13, packb(["app.Bad", "two\nlines \x1b[2J\u202e", None,
                       [["/p/x.py", 3, "f"], ["/p/y.py", 9, "g", "raise Bad()"]],
                       ["a note"], [["builtins.OSError", "", None, None, 1]]])),
    ExtType(13, packb(["builtins.ValueError", "old text", "Traceback ...\nValueError: old\n"])),
    ExtType(13, packb(["ExceptionGroup", "eg (2 sub-exceptions)", None, [["/p/x.py", 3, "f"]],
                       None, None, [2, [["ValueError", "1", None, None, None, None],
                                        ["SyntaxError", "bad", None, None, None, None, None,
                                         ["bad", "m.py", 2, 5, "x = = 1\n", 2, 6]]]]])),
    ExtType(13, packb(["NoneType", "None", None, None, None, None]))])
_rich = _value | _exception

_plain = (st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats()
          | st.sampled_from([101.25, 0.1, -0.0, 1e16, 12.0]) | _text)


@st.composite
def a_file(draw) -> bytes:
    """Sources of any format; events whose arguments mostly fit them (so that the C
    renderer renders most), and sometimes not (missing, extra, rich, texts)."""
    nsrc = draw(st.integers(1, 4))
    sources = []
    for sid in range(1, nsrc + 1):
        names = tuple(draw(st.lists(st.sampled_from(["a", "b", "px"]), max_size=2, unique=True)))
        parts = []
        for _ in range(draw(st.integers(0, 4))):
            parts.append(draw(_text).replace("{", "{{").replace("}", "}}"))
            key = draw(st.sampled_from(["", "", ""] + [n for n in names] + ["zz"]))
            conv = draw(st.sampled_from(["", "", "", "!r"]))
            spec = draw(st.sampled_from(["", "", "", ":>6", ":.2f"]))
            parts.append("{" + key + conv + spec + "}")
        parts.append(draw(_text).replace("{", "{{").replace("}", "}}"))
        form = draw(st.sampled_from(["".join(parts)] * 6 + ["{", "bad {0}"]))
        sources.append(EventSource(sid, draw(st.sampled_from([0x20, 0x80, 0x400, 7])),
                                   draw(_text), draw(_text), "/p/" + draw(_text), 12,
                                   form, "int", names, 0))
    events = []
    for _ in range(draw(st.integers(0, 20))):
        sid = draw(st.integers(1, nsrc + 1))          # nsrc + 1: a source nobody defined
        src = sources[sid - 1] if sid <= nsrc else None
        if src is not None and draw(st.integers(0, 4)):   # mostly: what the format wants
            npos = src.format.count("{") - src.format.count("{{") * 2
            args = draw(st.lists(_plain, min_size=npos, max_size=npos))
            args += draw(st.lists(_plain, min_size=len(src.field_names),
                                  max_size=len(src.field_names)))
            if not draw(st.integers(0, 5)):
                args[draw(st.integers(0, max(0, len(args) - 1))):] = [draw(_rich)]
        else:
            args = draw(st.lists(_rich, max_size=4))
        ev = [sid, draw(st.integers(-10**12, 10**12)), args]
        if draw(st.integers(0, 9)) == 0:
            ev.append(draw(st.sampled_from([{0: "captured"}, "not a map", {}])))
        events.append(ev)
    clock0 = 1_700_000_000 * 10**9
    sync = draw(st.sampled_from([None, ClockSync(clock0, 10**6, 5, -7200, ""),
                                 ClockSync(clock0, 3, 2**62, 0, "UTC")]))
    return build(sources, events, events_per_frame=draw(st.integers(1, 8)), sync=sync,
                 descriptor=draw(st.sampled_from([None, {"text_version": TEXT_VERSION}])))


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=a_file(), escape=st.booleans(), color=st.booleans())
def test_random_files_render_the_same_in_c_and_python(data, escape, color):
    both(data, escape=escape, color=color)
    both(data, fmt_="%m", escape=escape, color=color)
    both(data, fmt_="%m", escape=escape, color=color, traceback=True)
    both(data, fmt_="%m", escape=escape, color=color, traceback=False)
    both(data, fmt_=DEFAULT_FORMAT, escape=escape, color=color)


#: Every character the escaping turns into \uNNNN, and their neighbours in UTF-8, kept.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
BIDI_NEIGHBOURS = "\u061b\u061d\u200d\u2010\u2029\u202f\u2065\u206a\u0080\u00a0"


@needs_c
@pytest.mark.parametrize("where", ["format", "argument", "category"])
def test_bidirectional_format_characters_escape_the_same(where):
    # Proves: escaping, C and Python show each bidi mark, embedding, override and isolate
    # (and only them, not their neighbours in UTF-8) as \uNNNN, wherever it is in the line.
    text = "x" + "y".join(BIDI) + "|" + BIDI_NEIGHBOURS + BIDI[-1]
    form = text.replace("{", "{{") + " {}" if where == "format" else "{}"
    cat = text if where == "category" else "c"
    data = build([EventSource(1, 0x80, cat, "f", "x.py", 1, form, "str")],
                 [[1, 0, [text]], [1, 1, ["a\u202eb"]]])
    out = both(data, fmt_="%C %m", escape=True).decode()
    escaped = "x" + "y".join(f"\\u{ord(c):04x}" for c in BIDI) + "|" \
        + "\\x80".join(BIDI_NEIGHBOURS.split("\x80")) + "\\u2069"
    assert escaped in out.split("\n")[0]   # (splitlines would split at U+2029)
    assert not any(c in out for c in BIDI)
    assert both(data, fmt_="%C %m", escape=False).decode().count("\u202e") >= 2


def test_the_writing_process_renders_the_same_per_stream():
    # Proves: %h %p %a show the host, pid and program of each stream's file header (a
    # header later in the input changes them), empty where it does not say, escaped as any
    # text of the file, the same in C and Python.
    src = [EventSource(1, 0x80, "c", "f", "x.py", 1, "m {}", "int")]
    first = build(src, [[1, 0, [1]], [1, 1, [2]]],
                  descriptor={"host": "db\x1b1", "pid": 4242, "program": "app.py"})
    second = build(src, [[1, 0, [3]]], descriptor={"host": "h2", "pid": "not an int"})
    out = (both(first + second, fmt_="%h|%p|%a %m", escape=True) if C is not None else
           render(first + second, PrettyPrinter("%h|%p|%a %m"), True, False)[0])
    assert out.decode().splitlines() == ["db\\x1b1|4242|app.py m 1",
                                         "db\\x1b1|4242|app.py m 2", "h2|| m 3"]


@needs_c
@settings(max_examples=200, deadline=None)
@given(xs=st.lists(st.floats(), min_size=1, max_size=50))
def test_floats_render_as_repr(xs):
    data = build([EventSource(1, 0x80, "c", "f", "x.py", 1, "{}", "float")],
                 [[1, 0, [x]] for x in xs])
    out = both(data, fmt_="%m")
    assert out.decode().splitlines() == [repr(x) for x in xs]


@needs_c
@settings(max_examples=100, deadline=None)
@given(clock0=st.integers(-2**63, 2**63 - 1), freq=st.integers(1, 2**40),
       ns=st.integers(-2**63, 2**63 - 1), tzo=st.integers(-86400 * 2, 86400 * 2),
       deltas=st.lists(st.integers(-2**62, 2**62), max_size=5))
def test_any_clock_and_sync_render_the_same(clock0, freq, ns, tzo, deltas):
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {}", "int")
    data = build([src], [[1, d, [d]] for d in deltas], clock0=clock0,
                 sync=ClockSync(clock0, freq, ns, tzo, "Z"))
    both(data, fmt_="%d|%u|%r|%m", date="%Y %y %m %d %H %M %S %N %z %Z")


@needs_c
def test_the_first_and_last_nanosecond_of_64_bits_render_the_same():
    # Proves: an event at -2**63 ns (1677) renders as on the Python path. The C split of its
    # time into seconds and nanoseconds multiplied past 64 bits on the way (undefined
    # behaviour, right only where the compiler wraps: make sanitize, built without
    # -fwrapv, stops on it).
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "v {}", "int")
    for ns in (-2**63, -2**63 + 1, -10**9 - 1, -1, 0, 2**63 - 1):
        data = build([src], [[1, 0, [0]]], clock0=0, sync=ClockSync(0, 10**9, ns, 0, "Z"))
        out = both(data, fmt_="%d|%u|%m", date="%Y-%m-%d %H:%M:%S.%N")
        assert out.endswith(b"|v 0\n"), out


@needs_c
def test_a_frame_of_much_text_comes_in_parts_and_the_same(monkeypatch):
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "x" * 300 + " {} {}", "int,str")
    data = build([src], [[1, 1, [i, "y" * (i % 50)]] for i in range(2000)],
                 events_per_frame=2000)
    assert both(data, max_out=1000).count(b"\n") == 2000


@needs_c
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=a_file(), cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                     min_size=1, max_size=4),
       truncate=st.integers(0, 10**6))
def test_damaged_files_render_and_report_the_same(data, cuts, truncate):
    b = bytearray(data)
    for pos, byte in cuts:
        b[pos % len(b)] = byte
    b = b[:max(1, truncate % (len(b) + 1))]
    both(bytes(b))


@needs_c
def test_events_the_c_renderer_leaves_to_python_are_few_on_a_plain_file(monkeypatch):
    # The benchmark's event: int, float, str into "{}" placeholders. None of them
    # should need the fallback, or the fast path is not fast.
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "order {} filled at {} qty {}", "")
    data = build([src], [[1, 1000, [i, 101.25 + i, "AAPL"]] for i in range(500)],
                 events_per_frame=100)
    calls = count_reader_fallbacks(monkeypatch)
    both(data)
    assert calls == []


@needs_c
def test_the_c_renderer_shows_plain_fields_itself_and_as_python_does(monkeypatch):
    # Proves: %K (the default format's fields) of ints, floats, None, bools and str that
    # need no quotes is rendered in C; a str it would quote, a rich value or an exception
    # goes to Python; the bytes are the same either way.
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "disk {} at {}%", "str,float,str",
                      ("host", "n", "ok", "x", "my name"), 2)
    plain = [[1, 1000, ["/", 93.5, "db1", i, None, True, 2.5]] for i in range(100)]
    rich = [[1, 1000, ["/", 1.0, "two words", 1, 2, [1], "é"]],
            [1, 1000, ["/", 1.0, "", 1, 2, 3,
                       ExtType(13, packb(["builtins.KeyError", "'k'", None]))]]]
    data = build([src], plain, descriptor={"text_version": TEXT_VERSION})
    calls = count_reader_fallbacks(monkeypatch)
    out = both(data, fmt_=DEFAULT_FORMAT).decode()
    assert calls == []
    assert out.splitlines()[0].endswith(
        "disk / at 93.5% host=db1 n=0 ok=None x=True 'my name'=2.5 (x.py:1)")
    out = both(build([src], rich, descriptor={"text_version": TEXT_VERSION}),
               fmt_="%m%K").decode()
    assert len(calls) == 2
    assert out == ("disk / at 1.0% host='two words' n=1 ok=2 x=[1] 'my name'=é\n"
                   "disk / at 1.0% host='' n=1 ok=2 x=3 'my name'=KeyError('k')\n"
                   "    KeyError: 'k'\n")


# --- bread.read: the C decoder gives the Events EventStream gives --------------------

def events(data: bytes, use_c: bool) -> tuple[list, list, int]:
    with pytest.MonkeyPatch.context() as m:
        if not use_c:
            m.setattr(accel, "speedups", None)
        r = bread.read(io.BytesIO(data))
        try:
            out = [(e.source, e.writer_prop, e.clock, e.ns, e.tz, repr(e.args), repr(e.fields),
                    texts_kept(e), e.message, e.offset, type(e)) for e in r]
        except bread.NotABlogFile as exc:   # damage at the very start can make one
            return [], [str(exc)], 0
        return out, [(d.offset, d.length, d.reason) for d in r.damage], r.unknown_sources


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=a_file(), cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                     max_size=3))
def test_read_gives_the_same_events_with_the_c_decoder(data, cuts):
    b = bytearray(data)
    for pos, byte in cuts:
        b[pos % len(b)] = byte
    assert events(bytes(b), True) == events(bytes(b), False)


@needs_c
def test_the_c_decoder_renders_the_benchmark_event_without_python():
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "order {} filled at {} qty {}", "")
    data = build([src], [[1, 1000, [i, 101.25 + i, "AAPL"]] for i in range(100)])
    with pytest.MonkeyPatch.context() as m:
        calls = count_reader_fallbacks(m)
        msgs = [e.message for e in bread.read(io.BytesIO(data))]
    assert calls == [] and msgs[-1] == "order 99 filled at 200.25 qty AAPL"


@needs_c
def test_short_strings_shared_by_the_c_decoder_are_the_texts_logged():
    # The C decoder shares a short str between events holding the same text (a cache of
    # 256): more distinct texts than that, repeats, non-ASCII, surrogates and a long one.
    src = EventSource(1, 0x80, "c", "f", "x.py", 1, "{} {} {:>3}", "")
    texts = [f"s{k % 700}" for k in range(3000)] + ["é", "\ud800", "AAPL" * 20, "", "AAPL"]
    evs = [[1, 1, [t, t.upper(), t[:1]]] for t in texts]
    data = build([src], evs, events_per_frame=50)
    got, damage, _ = events(data, True)
    assert (got, damage) == events(data, False)[:2]
    assert [g[5] for g in got] == [repr((t, t.upper(), t[:1])) for t in texts]
    assert got[0][8] == "s0 S0   s"
