"""msgpack to argument values (docs/format.md 7): the reader's side of ``blogformat.values``.

``unpackb`` and ``unpacker`` decode values with the format's extensions (``ext_hook``),
described ones (extensions 15 and 16) with the descriptions of the stream; a value that
does not decode stays an ``ExtValue``, never an error. The text decoding one event makes
is bounded (``MAX_DECODED_TEXT``). ``renumber`` gives described values new ids, for a
file that merges streams (``bread compact``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re

import msgpack

from blogformat import tracebacks
from blogformat.lazy import pattern
from blogformat.typinglite import TYPE_CHECKING
from blogformat.values import (ENUM_NAMED, ENUM_TEXT, ENUM_VALUE, EXT_BIGINT, EXT_DATACLASS,
                               EXT_DATE, EXT_DATETIME, EXT_DECIMAL, EXT_ENUM, EXT_EXCEPTION,
                               EXT_FROZENSET, EXT_MEMBER, EXT_OPAQUE, EXT_RECORD, EXT_SET,
                               EXT_TIME, EXT_TIMEDELTA, EXT_TUPLE, EXT_UUID, MAX_DECODE_DEPTH,
                               RAW_EXT, UNPACK_OPTIONS, pack_plain, thread_state, type_name)
from blogformat.valuetypes import EnumMember, RecordType, TypeTable

if TYPE_CHECKING:
    from typing import Any

    from blogformat.valueclasses import EnumValue, ExceptionValue

_ZONE_KEY = r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*\Z"

#: blogformat.valueclasses (it imports dataclasses, which with inspect costs as much as
#: starting Python) and blogformat.boundedtext, imported with the first extension value
#: decoded or text made: a file of plain values, read as text, loads neither.
_classes: Any = None
_bounded: Any = None


def _valueclasses() -> Any:
    global _classes
    from blogformat import valueclasses
    _classes = valueclasses
    return valueclasses


def _boundedtext() -> Any:
    global _bounded
    from blogformat import boundedtext
    _bounded = boundedtext
    return boundedtext


def _fixed_tz(tz: list | None) -> _dt.tzinfo | None:
    if tz is None:
        return None
    us, name = (list(tz) + [None, None])[:2]
    off = _dt.timedelta(microseconds=us)
    return _dt.timezone(off, name) if isinstance(name, str) else _dt.timezone(off)


@functools.cache
def _uuid_type() -> Any:
    """uuid.UUID, imported with the first UUID decoded (uuid imports platform: a start-up
    cost no file without one should pay)."""
    import uuid
    return uuid.UUID


def _zone(tz: list | None) -> _dt.tzinfo | None:
    """The named zone (``Europe/Paris``) of an encoded tz, if this machine knows it."""
    key = tz[2] if tz is not None and len(tz) > 2 else None
    if not (isinstance(key, str) and len(key) < 64 and pattern(_ZONE_KEY).match(key)):
        return None
    try:
        import zoneinfo
        return zoneinfo.ZoneInfo(key)
    except Exception:
        pass
    try:  # machines without a system tz database
        import pytz
        return pytz.timezone(key)
    except Exception:
        return None


def hashable(value: Any) -> Any:
    """``value`` if it can be a dict key or set member, else an OpaqueValue of its repr
    (made within the event's text budget: ``decoded_text``)."""
    try:
        hash(value)
        return value
    except TypeError:
        return (_classes or _valueclasses()).OpaqueValue(type_name(type(value)),
                                                         decoded_text(value, "r"))


#: Characters of text that decoding one event may make (the reprs of set members and
#: map keys that cannot be hashed, tracebacks, the text of a crafted file's non-str
#: fields): a value's text can be far larger than its bytes (a list of references to a
#: record type with a long name repeats it per reference). Past it, a text is cut.
MAX_DECODED_TEXT = 1 << 20
DECODE_CUT = "[... cut]"


def begin_event() -> None:
    """A new event is decoded on this thread: its texts have the whole MAX_DECODED_TEXT."""
    thread_state.text_left = MAX_DECODED_TEXT


def decoded_text(value: Any, conversion: str | None = None) -> str:
    """``str`` (or with ``"r"``, ``repr``) of a decoded value, within what is left of the
    event's text budget; cut with DECODE_CUT past it."""
    if type(value) is str and conversion is None:
        text = value
    else:
        left = getattr(thread_state, "text_left", MAX_DECODED_TEXT)
        text = (_bounded or _boundedtext()).bounded_text(value, conversion, left)
    return _take_text(text)


def _take_text(text: str) -> str:
    left = getattr(thread_state, "text_left", MAX_DECODED_TEXT)
    if len(text) > left:
        text = text[:left] + DECODE_CUT
    thread_state.text_left = max(0, left - len(text))
    return text


def map_pairs(pairs: list) -> dict:
    """msgpack's map hook: a key Python cannot hash (a decoded dataclass, say) is kept as text."""
    try:
        return dict(pairs)
    except TypeError:
        return {hashable(k): v for k, v in pairs}


def unpackb(data: bytes, types: TypeTable | None = None) -> Any:
    """Decode one msgpack value with blog's extensions; described values (extensions 15
    and 16) with the descriptions of ``types`` (the stream's)."""
    return msgpack.unpackb(data, ext_hook=ext_hook if types is None else _hook_with(types),
                           use_list=True, object_pairs_hook=map_pairs, **UNPACK_OPTIONS)


def _hook_with(types: TypeTable) -> Any:
    """ext_hook, with ``types`` the descriptions in force while it runs (nested values too)."""
    def hook(code: int, data: bytes) -> Any:
        old = getattr(thread_state, "types", None)
        thread_state.types = types
        try:
            return ext_hook(code, data)
        finally:
            thread_state.types = old
    return hook


def unpacker(payload: bytes, types: TypeTable | None = None) -> msgpack.Unpacker:
    """An Unpacker over one frame's payload, decoding values with blog's extensions (and
    the descriptions of ``types``).

    Its buffer is bounded by the payload, so no length inside can make it allocate more.
    """
    u = msgpack.Unpacker(None, ext_hook=ext_hook if types is None else _hook_with(types),
                         object_pairs_hook=map_pairs,
                         max_buffer_size=max(len(payload), 1), **UNPACK_OPTIONS)
    u.feed(payload)
    return u


#: Matches the header of every extension 15 or 16 (and some other bytes): data that does
#: not match holds no described value.
_DESCRIBED_EXT = re.compile(rb"[\xd4-\xd8][\x0f\x10]|\xc7[\s\S][\x0f\x10]"
                            rb"|\xc8[\s\S]{2}[\x0f\x10]|\xc9[\s\S]{4}[\x0f\x10]")


def may_hold_described(data: bytes) -> bool:
    """False if ``data`` (msgpack values) certainly holds no extension 15 or 16."""
    return _DESCRIBED_EXT.search(data) is not None


def renumber(data: bytes, new_id: Any) -> bytes:
    """``data`` (msgpack values back to back: an event's args and texts) with the ids of
    its described values (extensions 15 and 16, nested ones too) given by ``new_id(old)``;
    everything else as it was, but packed again. Raises what msgpack raises on bad bytes."""
    def hook(code: int, payload: bytes) -> msgpack.ExtType:
        if code in RAW_EXT:
            return msgpack.ExtType(code, payload)
        try:
            value = msgpack.unpackb(payload, ext_hook=hook, **UNPACK_OPTIONS)
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
            if code == EXT_MEMBER or code == EXT_RECORD:   # no id: one no stream describes
                return msgpack.ExtType(code, pack_plain(0 if code == EXT_MEMBER else [0]))
            return msgpack.ExtType(code, payload)   # not msgpack (a newer code): as it is
        if code == EXT_MEMBER:
            value = new_id(value)
        elif code == EXT_RECORD and type(value) is list and value:
            value[0] = new_id(value[0])
        return msgpack.ExtType(code, pack_plain(value))
    u = msgpack.Unpacker(None, ext_hook=hook, max_buffer_size=max(len(data), 1),
                         **UNPACK_OPTIONS)
    u.feed(data)
    return b"".join(pack_plain(v) for v in u)


def ext_hook(code: int, data: bytes) -> Any:
    """Turn a blog extension back into a Python value.

    Never raises: an unknown code, a payload that does not decode, or one
    nested deeper than MAX_DECODE_DEPTH stays an ``ExtValue``, so one bad value
    cannot cost the rest of its frame.
    """
    depth = getattr(thread_state, "depth", 0)
    if depth >= MAX_DECODE_DEPTH:
        return (_classes or _valueclasses()).ExtValue(code, bytes(data))
    thread_state.depth = depth + 1
    try:
        return _decode_ext(code, data)
    except Exception:
        return (_classes or _valueclasses()).ExtValue(code, bytes(data))
    finally:
        thread_state.depth = depth


#: Source lines of tracebacks, read where the files are (bounded: blogformat.tracebacks).
_SOURCE = tracebacks.SourceLines()


def _enum_value(t: str, name: str, value: Any, style: Any) -> EnumValue:
    if style not in (ENUM_NAMED, ENUM_VALUE) or (
            style == ENUM_VALUE and type(value) is not int and type(value) is not str):
        style = ENUM_TEXT
    return (_classes or _valueclasses()).EnumValue(t, name, value, style)


def _member_value(e: Any) -> EnumValue:
    return _enum_value(e.type, e.name, e.value, e.style)


def _shown(e: Any) -> tuple:
    return e.shown


def _frames(frames: Any) -> tuple:
    """Decoded traceback frames as tuples: (file, line, function[, source[, positions]]);
    the last MAX_FRAMES (a writer keeps no more)."""
    if not isinstance(frames, list):
        return ()
    return tuple(tuple(f[:5]) for f in frames[-tracebacks.MAX_FRAMES:]
                 if isinstance(f, list) and len(f) >= 3)


def _public_frames(frames: tuple) -> tuple:
    """Frames as ``ExceptionValue`` shows them: (file, line, function[, source]), the
    positions (rendered as markers) left out, and a source the writer did not keep."""
    return tuple(f[:4] if len(f) > 3 and isinstance(f[3], str) else f[:3] for f in frames)


def _strs(items: Any) -> tuple:
    return tuple(_str(x) for x in items) if isinstance(items, list) else ()


def _str(x: Any) -> str:
    """A text field: a str as it is; a crafted file's other value as ``str`` shows it,
    within the event's text budget."""
    return x if type(x) is str else decoded_text(x)


def _exception(items: list, left: list, depth: int) -> ExceptionValue:
    """An exception (extension 13's data, or a group's member: the same shape) with its
    text as ``traceback`` prints it, a never raised one's too (``KeyError: 'k'``), and its
    group's members (``left``: how many exceptions may still be made, MAX_EXCEPTIONS)."""
    t, msg, tb = items[:3]
    frames, notes, chain, group, syntax = (items[3:8] + [None] * 5)[:5]
    frames, notes = _frames(frames), _strs(notes)
    chain = tuple((_str(c[0]), _str(c[1]), _frames(c[2]), _strs(c[3]), c[4], *c[5:7])
                  for c in chain[-tracebacks.MAX_CHAIN:] if isinstance(c, list) and len(c) >= 5
                  ) if isinstance(chain, list) else ()
    chain_shown = tuple((c[0], c[1], _public_frames(c[2]), c[3], c[4]) for c in chain)
    t, msg = _str(t), _str(msg)
    syntax = tuple(syntax[:7]) if isinstance(syntax, list) else ()
    if not (isinstance(group, list) and len(group) >= 2 and type(group[0]) is int
            and isinstance(group[1], list)):
        group = None
    if not isinstance(tb, str):
        tb = _take_text(tracebacks.render(
            t, msg, frames, notes, chain, _SOURCE,
            min(tracebacks.MAX_TRACEBACK_TEXT,
                getattr(thread_state, "text_left", MAX_DECODED_TEXT)), group, syntax))
    members: list = []
    if group is not None and depth < tracebacks.MAX_GROUP_DEPTH:
        for m in group[1][:tracebacks.MAX_MEMBERS]:
            if left[0] <= 0:
                break
            if isinstance(m, list) and len(m) >= 3:
                left[0] -= 1
                members.append(_exception(m, left, depth + 1))
    return (_classes or _valueclasses()).ExceptionValue(
        t, msg, tb, _public_frames(frames), notes, chain_shown, tuple(members), syntax)


def _decode_ext(code: int, data: bytes) -> Any:
    if code == EXT_TUPLE:
        return tuple(unpackb(data))
    if code == EXT_BIGINT:
        return int.from_bytes(data, "little", signed=True)
    vc = _classes or _valueclasses()
    if code == EXT_SET:
        return vc.SetValue(map(hashable, unpackb(data)))
    if code == EXT_FROZENSET:
        return vc.FrozenSetValue(map(hashable, unpackb(data)))
    if code == EXT_DATETIME:
        y, mo, d, h, mi, s, us, fold, tz = unpackb(data)[:9]
        value = _dt.datetime(y, mo, d, h, mi, s, us, tzinfo=_fixed_tz(tz), fold=fold)
        zone = _zone(tz)
        if zone is None:
            return value
        named = value.astimezone(zone)
        # In its zone, unless this machine's zone rules give it another offset or name
        # than the writer's did: the logged text is the fixed form's (values.reproducible).
        if (named.utcoffset(), named.tzname()) != (value.utcoffset(), value.tzname()):
            return value
        return named
    if code == EXT_DATE:
        return _dt.date(*unpackb(data)[:3])
    if code == EXT_TIME:
        h, mi, s, us, fold, tz = unpackb(data)[:6]
        return _dt.time(h, mi, s, us, tzinfo=_fixed_tz(tz), fold=fold)
    if code == EXT_TIMEDELTA:
        return _dt.timedelta(*unpackb(data)[:3])
    if code == EXT_DECIMAL:
        from decimal import Decimal   # (no file of plain values loads it)
        return Decimal(data.decode("ascii"))
    if code == EXT_UUID:
        return _uuid_type()(bytes=bytes(data))
    if code == EXT_MEMBER:
        table = getattr(thread_state, "types", None)
        tid = unpackb(data)
        if table is not None and type(table.get(tid)) is EnumMember:
            return table.decoded(tid, _member_value)
        return vc.ExtValue(code, bytes(data))
    if code == EXT_RECORD:
        table = getattr(thread_state, "types", None)
        items = unpackb(data)
        e = table.get(items[0]) if table is not None else None
        if table is None or type(e) is not RecordType or len(items) != len(e.fields) + 1:
            return vc.ExtValue(code, bytes(data))
        fields = dict(zip(e.fields, items[1:]))
        if e.repr_name is None:
            return vc.DataclassValue(e.type, fields)
        return vc.DataclassValue(e.type, fields, e.repr_name, table.decoded(e.id, _shown))
    if code == EXT_ENUM:
        items = unpackb(data)
        t, name, value = items[:3]
        return _enum_value(_str(t), _str(name), value, items[3] if len(items) > 3 else 0)
    if code == EXT_DATACLASS:
        items = unpackb(data)
        t, fields = items[:2]
        fields = dict(fields)
        repr_name, mask = (items[2:4] + [None, None])[:2]
        if isinstance(repr_name, str) and type(mask) is int and mask >= 0:
            shown = tuple(k for i, k in enumerate(fields) if mask >> i & 1)
            return vc.DataclassValue(_str(t), fields, repr_name, shown)
        return vc.DataclassValue(_str(t), fields)
    if code == EXT_EXCEPTION:
        return _exception(unpackb(data), [tracebacks.MAX_EXCEPTIONS], 0)
    if code == EXT_OPAQUE:
        t, text = unpackb(data)[:2]
        return vc.OpaqueValue(_str(t), _str(text))
    return vc.ExtValue(code, bytes(data))
