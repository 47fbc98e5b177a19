"""Values whose text a crafted file makes huge are rendered only up to the message's cut:
``blogformat.boundedtext`` gives exactly Python's text (a prefix of it once cut), and
reading such a file stays within a small, fixed amount of memory."""

from __future__ import annotations

import io
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

import msgpack

import bread
from blogformat.boundedtext import bounded_text, is_composite
from blogformat.placeholders import CUT_MARK, MAX_MESSAGE, render_safe
from blogformat.entries import EventSource
from blogformat.valuetypes import RecordType
from blogformat.valueclasses import (ENUM_NAMED, ENUM_TEXT, ENUM_VALUE, DataclassValue, EnumValue,
                                     ExceptionValue, ExtValue, FrozenSetValue, OpaqueValue,
                                     SetValue)
from blogformat.valueencoding import packb
from blogformat.values import EXT_RECORD
from helpers import format_cache

_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
                  st.binary(max_size=4))
_name = st.text(min_size=1, max_size=8)


def _composite(inner):
    hashable = st.one_of(st.none(), st.integers(), st.text(max_size=4))
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(hashable, inner, max_size=3),
        st.lists(hashable, max_size=4).map(SetValue),
        st.lists(hashable, max_size=4).map(FrozenSetValue),
        st.sets(hashable, max_size=3),
        st.frozensets(hashable, max_size=3),
        st.builds(lambda t, f, named: DataclassValue(t, f, t.rsplit(".", 1)[-1] if named else None,
                                                     tuple(f)),
                  _name, st.dictionaries(_name, inner, max_size=3), st.booleans()),
        st.builds(EnumValue, _name, _name, inner, st.sampled_from([ENUM_TEXT, ENUM_NAMED,
                                                                   ENUM_VALUE])),
        st.builds(OpaqueValue, _name, st.text(max_size=5)),
        st.builds(ExceptionValue, _name, st.text(max_size=5), st.none() | st.text(max_size=5),
                  st.lists(st.tuples(_name, st.integers(), _name), max_size=2).map(tuple)),
        st.builds(ExtValue, st.integers(-128, 127), st.binary(max_size=4)),
    )


_values = st.recursive(_leaf, _composite, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=_values, conversion=st.sampled_from([None, "s", "r", "a"]),
       budget=st.integers(0, 60))
def test_the_text_is_pythons_or_a_prefix_of_it_once_cut(value, conversion, budget):
    whole = {None: str, "s": str, "r": repr, "a": ascii}[conversion](value)
    assert bounded_text(value, conversion, 10**9) == whole
    got = bounded_text(value, conversion, budget)
    assert got == whole[:budget + 1]   # more than budget characters: it was cut


@settings(max_examples=100, deadline=None)
@given(value=_values, conversion=st.sampled_from([None, "r", "s", "a", "%"]),
       spec=st.sampled_from(["", ">12", ".3", "<4.2"]))
def test_render_safe_renders_as_before(value, conversion, spec):
    from blogformat.placeholders import render_one
    if conversion == "%":
        spec = spec + "sra"[len(spec) % 3]
    try:
        want = render_one(value, conversion, spec)
    except Exception as exc:
        want = f"{{!{type(exc).__name__}: {exc}}}"
    assert render_safe(value, conversion, spec, decoded=True) == want
    assert render_safe(value, conversion, spec) == want


def test_plain_values_are_not_composite():
    assert not is_composite("x") and not is_composite(1) and not is_composite(b"")
    assert is_composite([]) and is_composite(SetValue()) and is_composite(OpaqueValue("t", "x"))


def a_huge_by_reference_log(n: int = 2_000) -> bytes:
    """170 KB: a record type whose repr name (written once, in the metadata) is 128 Ki
    characters, and events that log lists of n instances of it: the text of each list is
    n * 128 Ki characters (256 MB; 5 GB with 40,000 in a file of 800 KB)."""
    from test_render_parity import build
    rec = msgpack.ExtType(EXT_RECORD, packb([1]))
    sources = [RecordType(1, "m.R", "R" * (128 << 10), (), 0),
               EventSource(1, 0x20, "f", "x", "/p/a.py", 1, "{}", "", (), 0),
               EventSource(2, 0x20, "f", "x", "/p/a.py", 2, "{!r:.20} and {!a} and", "", ("f",),
                           0),
               EventSource(3, 0x20, "f", "x", "/p/a.py", 3, "after", "", (), 0)]
    events = [[1, 1, [[rec] * n]], [2, 1, [[rec] * n, [rec] * n, [rec] * n]], [3, 1, []]]
    return build(sources, events)


def test_a_value_whose_text_is_huge_is_cut_without_building_it():
    # Proves the message's cut bounds the memory: before, repr() built all of it first.
    data = a_huge_by_reference_log()
    assert len(data) < 1 << 20
    tracemalloc.start()
    try:
        msgs = [ev.message for ev in bread.read(io.BytesIO(data))]
        text = b"".join(bread.read(io.BytesIO(data)).text(bread.render.PrettyPrinter("%m %k")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    name = "R" * (128 << 10)
    assert msgs[0] == ("[" + ", ".join([name + "()"] * 9))[:MAX_MESSAGE] + CUT_MARK
    assert msgs[1].startswith("[" + "R" * 19 + " and [") and msgs[1].endswith(CUT_MARK)
    assert msgs[2] == "after"
    lines = text.decode().splitlines()
    assert len(lines) == 3 and lines[2] == "after "
    assert lines[0].startswith("[RRR") and CUT_MARK in lines[0]
    assert lines[1].endswith(CUT_MARK)   # the fields (%k) are cut too


def a_huge_json_log(n: int = 2_000) -> bytes:
    """As a_huge_by_reference_log, the long name as the record's type, which JSON names
    per instance (``{"$dataclass": type, ...}``): n * 128 Ki characters of JSON."""
    from test_render_parity import build
    rec = msgpack.ExtType(EXT_RECORD, packb([1]))
    sources = [RecordType(1, "T" * (128 << 10), None, (), 0),
               EventSource(1, 0x20, "f", "x", "/p/a.py", 1, "{} {}", "", ("k",), 0),
               EventSource(2, 0x20, "f", "x", "/p/a.py", 2, "after {}", "", (), 0)]
    events = [[1, 1, [7, [rec] * n, [rec] * n]], [2, 1, [[rec] * 2]]]
    return build(sources, events)


def test_json_of_values_huge_by_reference_is_cut_without_building_it():
    # Proves -o jsonl, the args and fields columns (Spark, Parquet) stay within MAX_JSON
    # per event: before, json built all n * 128 Ki characters of each value.
    from bread.sinks.json import MAX_JSON, event_object, json_text, jsonl
    import json
    data = a_huge_json_log()
    tracemalloc.start()
    try:
        evs = list(bread.read(io.BytesIO(data)))
        lines = list(jsonl(evs))
        arg_texts = [json_text(list(ev.args)) for ev in evs]
        field_texts = [json_text(ev.fields) for ev in evs]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak   # 2000 * 128 Ki would be 256 MiB
    first = json.loads(lines[0])
    cut = {"$cut": "list", "limit": MAX_JSON}
    assert first["args"] == [7, cut] and first["fields"] == {"k": cut}
    assert json.loads(arg_texts[0]) == [7, cut] and json.loads(field_texts[0]) == {"k": cut}
    # A value within the limit is whole, and the next event is not affected.
    assert json.loads(lines[1])["args"] == [[{"$dataclass": "T" * (128 << 10), "fields": {}}] * 2]
    assert event_object(evs[1])["args"] == json.loads(arg_texts[1])


def test_json_of_values_that_expand_per_reference_is_cut_as_it_is_made():
    # An enum member described once with 96 KiB of bytes as its value: each 3-byte
    # reference would be 128 KiB of base64. The cut must come before that is made.
    from blogformat.valuetypes import EnumMember
    from blogformat.values import EXT_MEMBER
    from bread.sinks.json import MAX_JSON, json_text, jsonl
    import json
    mem = msgpack.ExtType(EXT_MEMBER, packb(1))
    from test_render_parity import build
    data = build([EnumMember(1, "m.E", "A", b"\xff" * (96 << 10), 1),
                  EventSource(1, 0x20, "f", "x", "/p/a.py", 1, "{!r:.10}", "", ("k",), 0)],
                 [[1, 1, [[mem] * 600, [mem] * 600]]])
    [ev] = list(bread.read(io.BytesIO(data)))
    tracemalloc.start()
    try:
        line = json.loads(next(iter(jsonl([ev]))))
        args = json.loads(json_text(list(ev.args)))
        cols = next(iter(bread.read_batches(io.BytesIO(data), ["args", "fields"], arrow=False)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_JSON, peak   # 600 references would make 77 MB each, 154 MB both
    cut = {"$cut": "list", "limit": MAX_JSON}
    assert line["args"] == [cut] and line["fields"] == {"k": cut}
    assert args == [cut]
    # args and fields within one MAX_JSON together, in the columns as in -o jsonl
    assert json.loads(cols["args"][0]) == [cut] and json.loads(cols["fields"][0]) == {"k": cut}


def test_json_of_deep_nesting_is_cut_at_a_depth_not_a_crash(tmp_path):
    from bread.sinks.json import MAX_JSON_DEPTH, json_text
    import json
    v = 1
    for _ in range(600):
        v = [v]
    from test_render_parity import build
    data = build([EventSource(1, 0x80, "c", "f", "x.py", 1, "{}", "", (), 0)], [[1, 0, [v]]])
    [ev] = list(bread.read(io.BytesIO(data)))
    got = json.loads(json_text(list(ev.args)))
    for _ in range(MAX_JSON_DEPTH):   # the args' list, then 99 levels of the value
        [got] = got
    assert got == [{"$cut": "list", "depth": MAX_JSON_DEPTH}]
    p = tmp_path / "deep.blog"
    p.write_bytes(data)
    from bread import cli
    assert cli.main(["-o", "jsonl", str(p)]) == 0


def test_a_record_with_names_that_are_not_str_renders_as_python_does():
    # A crafted extension 12 gives a dataclass field names that are ints: as f"{k}=".
    from blogformat.values import EXT_DATACLASS
    from test_render_parity import build
    dc = msgpack.ExtType(EXT_DATACLASS, packb(["m.P", [[1, 2], [3, 4]], "P", 3]))
    data = build([EventSource(1, 0x20, "f", "x", "/p/a.py", 1, "v={} {!a}", "", (), 0)],
                 [[1, 1, [dc, dc]]])
    [ev] = list(bread.read(io.BytesIO(data)))
    assert ev.message == f"v={ev.args[0]} {ascii(ev.args[0])}" == "v=P(1=2, 3=4) P(1=2, 3=4)"


def test_the_cache_of_parsed_formats_is_bounded_by_characters(monkeypatch):
    # A stream can describe source 1 again and again, each time with a new format of up to
    # 2 Mi characters: the formats parsed are cached, within _CACHE_CHARS characters.
    from test_render_parity import build
    held = format_cache(monkeypatch, 8 << 20)   # (64 Mi: this file would be big)
    parts = []
    for i in range(10):
        fmt = f"{i:04d}" + "a" * ((2 << 20) - 100) + "{:>3}"
        parts.append(build([EventSource(1, 0x20, "f", "x", "/p/a.py", 1, fmt, "", (), 0)],
                           [[1, 1, [i]]]))
    data = parts[0] + b"".join(p[p.index(b"\x9eBLG\x02"):] for p in parts[1:])
    msgs = [ev.message for ev in bread.read(io.BytesIO(data))]
    assert [m[:4] for m in msgs] == [f"{i:04d}" for i in range(10)]
    assert all(m.endswith(CUT_MARK) for m in msgs)
    assert held() <= 8 << 20, held()


def test_texts_made_while_decoding_stay_within_the_events_budget():
    # A set whose member is a list (no hash: kept as the text of its repr), and the text
    # fields of an opaque value and an enum that a crafted file makes lists: each list of
    # 2,000 references to a record type with a 128 Ki-character repr name (256 MB).
    from blogformat.valuedecoding import DECODE_CUT, MAX_DECODED_TEXT
    from blogformat.values import EXT_ENUM, EXT_OPAQUE, EXT_SET
    from test_render_parity import build
    rec = msgpack.ExtType(EXT_RECORD, packb([1]))
    inner = [rec] * 2_000
    vals = [msgpack.ExtType(EXT_SET, packb([inner])),
            msgpack.ExtType(EXT_OPAQUE, packb([inner, "x"])),
            msgpack.ExtType(EXT_ENUM, packb(["t", inner, 1, 1]))]
    src = [RecordType(1, "m.R", "R" * (128 << 10), (), 0),
           EventSource(1, 0x80, "c", "f", "x.py", 1, "hi", "", (), 0)]
    data = build(src, [[1, 0, [v]] for v in vals] + [[1, 0, [inner[:2]]]])
    tracemalloc.start()
    try:
        evs = list(bread.read(io.BytesIO(data)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 << 20, peak
    [member] = evs[0].args[0]
    assert member.text.endswith(DECODE_CUT) and member.text.startswith("[RRR")
    assert len(member.text) == MAX_DECODED_TEXT + len(DECODE_CUT)
    assert evs[1].args[0].type.endswith(DECODE_CUT)
    assert evs[2].args[0].name.endswith(DECODE_CUT)
    assert repr(evs[3].args[0]) == "[" + ", ".join(["R" * (128 << 10) + "()"] * 2) + "]"


def test_a_traceback_is_rendered_within_the_budget_however_many_long_lines(tmp_path):
    # Frames may name any .py file on the reader's machine: 2,000 frames of a 100 KB line
    # (alternating functions, so that no run collapses) would be 200 MB of traceback.
    from blogformat.tracebacks import CUT, MAX_FRAMES
    from blogformat.valuedecoding import MAX_DECODED_TEXT
    from blogformat.values import EXT_EXCEPTION
    from test_render_parity import build
    py = tmp_path / "long.py"
    py.write_text("x = 1\n" + "y = '" + "z" * 100_000 + "'\n")
    frames = [[str(py), 2, "ab"[i % 2]] for i in range(2_000)]
    exc = msgpack.ExtType(EXT_EXCEPTION, packb(["ValueError", "boom", None, frames, None, None]))
    data = build([EventSource(1, 0x80, "c", "f", "x.py", 1, "hi", "", ("exception",), 0)],
                 [[1, 0, [exc]]])
    tracemalloc.start()
    try:
        [ev] = list(bread.read(io.BytesIO(data)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 << 20, peak
    tb = ev.fields["exception"].traceback
    assert len(ev.fields["exception"].frames) == MAX_FRAMES
    assert tb.startswith("Traceback (most recent call last):\n  File ")
    assert tb.endswith(CUT.format(MAX_DECODED_TEXT)) and len(tb) < MAX_DECODED_TEXT + 100
