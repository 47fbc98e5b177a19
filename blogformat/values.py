"""Argument values <-> msgpack, and the msgpack options of the whole format.

Plain values (None, bool, int, float, str, bytes, list, dict) are native
msgpack. Everything else is a msgpack extension whose payload is itself
msgpack; ``docs/format.md`` section 7 lists the codes. Values are never
pickled: types the format does not know are captured as their rendered text.

Every packer and unpacker of the format is made here (``PACK_OPTIONS``,
``UNPACK_OPTIONS``), so that writer and reader cannot disagree on them.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as _dt
import enum
import re
import reprlib
import threading
import types
import uuid
from decimal import Decimal
from functools import partial
from typing import Any, Callable
from zoneinfo import ZoneInfo

import msgpack

from blogformat import boundedtext, tracebacks, valuetypes
from blogformat.guard import owned_by_value
from blogformat.valuetypes import DESCRIBABLE_VALUES, EnumMember, RecordType, TypeTable
from blogformat.valueclasses import (ENUM_NAMED, ENUM_TEXT, ENUM_VALUE,  # noqa: F401
                                     DataclassValue, EnumValue, ExceptionValue, ExtValue,
                                     FrozenSetValue, OpaqueValue, SetValue)

EXT_TUPLE = 1
EXT_BIGINT = 2
EXT_SET = 3
EXT_FROZENSET = 4
EXT_DATETIME = 5
EXT_DATE = 6
EXT_TIME = 7
EXT_TIMEDELTA = 8
EXT_DECIMAL = 9
EXT_UUID = 10
EXT_ENUM = 11
EXT_DATACLASS = 12
EXT_EXCEPTION = 13
EXT_OPAQUE = 14
EXT_MEMBER = 15
EXT_RECORD = 16

# Strings may hold lone surrogates; "surrogatepass" keeps them exactly.
UNICODE_ERRORS = "surrogatepass"

#: How every part of a file is packed: bytes as bin, str as UTF-8 (surrogates kept).
PACK_OPTIONS: dict[str, Any] = {"use_bin_type": True, "unicode_errors": UNICODE_ERRORS}
#: How every part of a file is unpacked; maps may have any key (an int, a tuple...).
UNPACK_OPTIONS: dict[str, Any] = {"raw": False, "strict_map_key": False,
                                  "unicode_errors": UNICODE_ERRORS}


#: Per enum class: (type name, style, {member name: described id}), for the C call paths
#: too (blog/_encode.c). Classes are kept (a class is long-lived); at most MAX_TYPES.
ENUM_TYPES: dict[type, tuple[str, int, dict]] = {}
MAX_TYPES = 4096


def enum_type(cls: type) -> tuple[str, int, dict]:
    """(type name, style, member ids) of an enum class (ENUM_TYPES)."""
    got = ENUM_TYPES.get(cls)
    if got is None:
        got = (type_name(cls), _enum_style(cls), {})
        if len(ENUM_TYPES) < MAX_TYPES:
            got = ENUM_TYPES.setdefault(cls, got)
    return got


def member_id(cls: type, info: tuple, name: Any, value: Any, style: int) -> int | None:
    """The id of an enum member's description (docs/format.md 4.9), made the first time;
    None where its value is not a plain scalar (it then describes itself, extension 11)."""
    ids = info[2]
    tid = ids.get(name) if type(name) is str else None
    if tid is None:
        if type(name) is not str or type(value) not in DESCRIBABLE_VALUES or (
                type(value) is int and not -(1 << 63) <= value < 1 << 64):
            return None
        tid = valuetypes.describe((cls, name), lambda i: EnumMember(i, info[0], name, value,
                                                                    style))
        ids[name] = False if tid is None else tid   # False: not describable, not tried again
    return tid or None


#: Per dataclass or named tuple class: (type name, repr name or None, field names, shown
#: mask, is a named tuple, how its fields are read (FIELDS_IN_*), described id or None),
#: for the C call paths too. The repr name is None unless the class shows its instances
#: by the generated repr (and str and format are object's).
RECORD_TYPES: dict[type, tuple] = {}


def record_type(cls: Any) -> tuple | None:
    """RECORD_TYPES' entry of a dataclass or named tuple class; None for another class."""
    got = RECORD_TYPES.get(cls)
    if got is None:
        got = _record_type(cls)
        if got is None:
            return None
        if len(RECORD_TYPES) < MAX_TYPES:
            name, repr_name, names, mask = got[:4]
            tid = valuetypes.describe(cls, lambda i: RecordType(i, name, repr_name, names, mask))
            got = RECORD_TYPES.setdefault(cls, (*got, tid))
        else:
            got = (*got, None)
    return got


#: Classes logged as structured values by ``blog.adapt``: class -> a function of an
#: instance giving its fields as a dict, or None where the fields are named (the class
#: then has a RECORD_TYPES entry, made by ``adapt_names``).
ADAPTED: dict[type, Callable[[Any], dict] | None] = {}


def adapt_names(cls: type, names: tuple[str, ...]) -> None:
    """Log instances of exactly ``cls`` as a record of the attributes ``names`` (described
    once, as a dataclass is); the message keeps their ``str()`` (no generated repr)."""
    name, mask = type_name(cls), (1 << len(names)) - 1
    tid = valuetypes.describe((cls, "adapt", names),
                              lambda i: RecordType(i, name, None, names, mask))
    RECORD_TYPES[cls] = (name, None, names, mask, False, FIELDS_IN_PYTHON, tid)
    ADAPTED[cls] = None


def adapt_with(cls: type, fields: Callable[[Any], dict]) -> None:
    """Log instances of exactly ``cls`` as a record of the fields ``fields(instance)``
    returns (a dict of str keys; it describes itself in each event)."""
    RECORD_TYPES.pop(cls, None)
    ADAPTED[cls] = fields


#: How the C path reads a dataclass's fields: from the instance dict, through slots (member
#: descriptors), or not at all (the Python path's): where reading one could run Python
#: code (a property, a class's own __getattribute__ or __getattr__), which could change
#: what is being encoded.
FIELDS_IN_PYTHON, FIELDS_IN_DICT, FIELDS_IN_SLOTS = 0, 1, 2


def _field_access(cls: type, names: tuple) -> int:
    if cls.__getattribute__ is not object.__getattribute__ or hasattr(cls, "__getattr__"):
        return FIELDS_IN_PYTHON
    found = [_static(cls, n) for n in names]
    if "__slots__" not in cls.__dict__ and not any(hasattr(type(d), "__get__") for d in found):
        return FIELDS_IN_DICT
    if all(type(d) is types.MemberDescriptorType for d in found):
        return FIELDS_IN_SLOTS
    return FIELDS_IN_PYTHON


def _static(cls: type, name: str) -> Any:
    """What the class (its MRO) holds under ``name``, without running descriptors."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return c.__dict__[name]
    return None


def _record_type(cls: Any) -> tuple | None:
    if issubclass(cls, enum.Enum) or cls is msgpack.ExtType:
        return None       # an enum member (even of a dataclass mixin), msgpack's own type
    try:
        plain = cls.__str__ is object.__str__ and cls.__format__ is object.__format__
        rep = cls.__repr__
        if issubclass(cls, tuple) and type(getattr(cls, "_fields", None)) is tuple:
            names = cls._fields
            if not all(type(n) is str for n in names):
                return None
            generated = plain and getattr(rep, "__code__", None) is not None \
                and rep.__code__.co_filename == collections.__file__
            return (type_name(cls), cls.__name__ if generated else None, names,
                    (1 << len(names)) - 1, True, FIELDS_IN_PYTHON)
        if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
            return None
        fields = dataclasses.fields(cls)
        inner = getattr(rep, "__wrapped__", None)
        generated = (plain and getattr(cls, "__dataclass_params__", None) is not None
                     and getattr(cls, "__dataclass_params__").repr and inner is not None
                     and getattr(rep, "__code__", None) is not None
                     and rep.__code__.co_filename in (dataclasses.__file__, reprlib.__file__)
                     and getattr(inner, "__qualname__", "").startswith("__create_fn__."))
        mask = sum(1 << i for i, f in enumerate(fields) if f.repr)
        names = tuple(f.name for f in fields)
        return (type_name(cls), cls.__qualname__ if generated else None, names, mask,
                False, _field_access(cls, names))
    except Exception:
        return None


def _enum_style(cls: Any) -> int:
    """ENUM_NAMED if its members show as ``Enum``'s do, ENUM_VALUE as ``IntEnum``'s or
    ``StrEnum``'s do, else ENUM_TEXT (a Flag, an override of __str__, __format__, __repr__)."""
    try:
        if issubclass(cls, enum.Flag) or cls.__repr__ is not enum.Enum.__repr__:
            return ENUM_TEXT
        shown = (cls.__str__, cls.__format__)
    except Exception:
        return ENUM_TEXT
    if shown == (enum.Enum.__str__, enum.Enum.__format__):
        return ENUM_NAMED
    if shown in ((int.__repr__, int.__format__), (str.__str__, str.__format__)):
        # Shown as the member itself is (an int, a str): that is its value's text only
        # where its value is that int or str (a __new__ may set another _value_).
        base = int if shown[0] is int.__repr__ else str
        try:
            if all(type(m._value_) is base and m._value_ == base.__new__(base, m)
                   for m in cls):
                return ENUM_VALUE
        except Exception:
            pass
    return ENUM_TEXT


def type_name(t: type) -> str:
    """``module.QualName`` of a type (just the name for builtins)."""
    mod = getattr(t, "__module__", None)
    qual = getattr(t, "__qualname__", t.__name__)
    return qual if mod in (None, "builtins") else f"{mod}.{qual}"


def safe_str(value: Any) -> str:
    """``str(value)``, or a placeholder if its ``__str__`` raises."""
    try:
        return str(value)
    except Exception as exc:  # a broken __str__ must not break the log call
        if not owned_by_value(exc):
            raise
        return f"<unprintable {type_name(type(value))}: {type(exc).__name__}>"


# --- encoding (writer side) -------------------------------------------------

def _tz(tz: _dt.tzinfo | None, sample: Any) -> list | None:
    if tz is None:
        return None
    off = tz.utcoffset(sample)
    if off is None:
        return None
    name = tz.tzname(sample)
    key = getattr(tz, "key", None) or getattr(tz, "zone", None)  # zoneinfo, pytz
    if type(tz) is _dt.timezone:
        # A datetime.timezone is rebuilt exactly: keep the name only if it was given.
        if name == _dt.timezone(off).tzname(None):
            name = None
        key = None
    us = (off.days * 86400 + off.seconds) * 1_000_000 + off.microseconds
    return [us, name, key if isinstance(key, str) else None]


def _default(obj: Any) -> object:
    """msgpack's hook for everything that is not plain msgpack."""
    depth = getattr(_state, "depth", 0)
    if depth >= MAX_DEPTH:  # readers decode nested extensions only so deep
        return msgpack.ExtType(EXT_OPAQUE, pack_plain([type_name(type(obj)), safe_str(obj)]))
    _state.depth = depth + 1
    try:
        return _encode_ext(obj)
    finally:
        _state.depth = depth


def _encode_ext(obj: Any) -> msgpack.ExtType:
    t = type(obj)
    if t is tuple:
        return msgpack.ExtType(EXT_TUPLE, packb(list(obj)))
    if t is int:  # only reached when out of msgpack's 64-bit range
        n = (obj.bit_length() + 8) // 8
        return msgpack.ExtType(EXT_BIGINT, obj.to_bytes(n, "little", signed=True))
    if isinstance(obj, enum.Enum):
        info = enum_type(t)
        value = obj._value_
        style = info[1]
        if style == ENUM_VALUE and type(value) is not int and type(value) is not str:
            style = ENUM_TEXT
        tid = member_id(t, info, obj._name_, value, style)
        if tid is not None:
            return msgpack.ExtType(EXT_MEMBER, pack_plain(tid))
        return msgpack.ExtType(EXT_ENUM, packb([info[0], obj._name_, value, style]))
    if t is set or t is frozenset or isinstance(obj, (set, frozenset)):
        code = EXT_FROZENSET if isinstance(obj, frozenset) else EXT_SET
        return msgpack.ExtType(code, packb(list(obj)))
    if isinstance(obj, _dt.datetime):
        return msgpack.ExtType(EXT_DATETIME, packb([
            obj.year, obj.month, obj.day, obj.hour, obj.minute, obj.second,
            obj.microsecond, obj.fold, _tz(obj.tzinfo, obj)]))
    if isinstance(obj, _dt.date):
        return msgpack.ExtType(EXT_DATE, packb([obj.year, obj.month, obj.day]))
    if isinstance(obj, _dt.time):
        return msgpack.ExtType(EXT_TIME, packb([
            obj.hour, obj.minute, obj.second, obj.microsecond, obj.fold, _tz(obj.tzinfo, None)]))
    if isinstance(obj, _dt.timedelta):
        return msgpack.ExtType(EXT_TIMEDELTA, packb([obj.days, obj.seconds, obj.microseconds]))
    if isinstance(obj, Decimal):
        return msgpack.ExtType(EXT_DECIMAL, str(obj).encode("ascii"))
    if isinstance(obj, uuid.UUID):
        return msgpack.ExtType(EXT_UUID, obj.bytes)
    if isinstance(obj, BaseException):
        # Structured frames, not text: nothing is read or formatted at the call.
        lines = getattr(_state, "source_lines", False)
        return msgpack.ExtType(EXT_EXCEPTION, packb([
            type_name(t), safe_str(obj), None, tracebacks.frames(obj.__traceback__, lines),
            tracebacks.notes(obj, safe_str), tracebacks.chain(obj, type_name, safe_str, lines)]))
    if t in ADAPTED:
        fields = ADAPTED[t]
        if fields is not None:   # blog.adapt(cls, function): the fields it gives now
            got = fields(obj)
            if type(got) is not dict or not all(type(k) is str for k in got):
                raise TypeError(f"blog.adapt: the fields function of {type_name(t)} returned "
                                f"{type(got).__name__}, not a dict with str keys")
            return msgpack.ExtType(EXT_DATACLASS, packb([type_name(t), got, None,
                                                         (1 << len(got)) - 1]))
    rec = record_type(t) if (dataclasses.is_dataclass(obj) and not isinstance(obj, type)) \
        or (issubclass(t, tuple) and hasattr(t, "_fields")) or t in ADAPTED else None
    if rec is not None:
        name, repr_name, names, mask, is_tuple = rec[:5]
        values = list(obj) if is_tuple else [getattr(obj, n) for n in names]
        if rec[6] is not None and len(values) == len(names):
            # Described once (docs/format.md 4.8): only its field values here.
            return msgpack.ExtType(EXT_RECORD, packb([rec[6], *values]))
        shown = dict(zip(names, obj)) if is_tuple else {n: getattr(obj, n) for n in names}
        return msgpack.ExtType(EXT_DATACLASS, packb([name, shown, repr_name, mask]))
    # Subclasses of plain types (numpy scalars, str subclasses...) keep their base value.
    for base in (bool, int, float, str, bytes):
        if isinstance(obj, base):
            return base(obj)  # type: ignore[arg-type]
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if t is list or t is dict:  # only reached for subclasses with strict types
        return obj  # pragma: no cover
    if isinstance(obj, list):
        return list(obj)
    if isinstance(obj, dict):
        return dict(obj)
    return msgpack.ExtType(EXT_OPAQUE, packb([type_name(t), safe_str(obj)]))


#: A Packer whose output reached this size is not kept (its buffer would be kept too).
_POOLED_MAX = 1 << 20


def _pooled(**options: Any) -> Any:
    """A ``packb(obj)`` like msgpack's, with the same ``options``, that reuses its Packers.

    ``msgpack.packb`` makes a Packer per call, and a Packer allocates its buffer (a MiB)
    when it is made: that was most of what a value beyond the plain scalars cost. Each
    thread keeps its own Packers, free ones in a list: a nested pack (the hook encoding
    an extension's data, a finalizer logging meanwhile) takes another one. A Packer
    whose pack raised may hold a part of it: it is dropped.
    """
    pool = threading.local()

    def packb(obj: Any) -> bytes:
        free = getattr(pool, "free", None)
        if free is None:
            free = pool.free = []
        p = free.pop() if free else msgpack.Packer(autoreset=True, **options)
        out = p.pack(obj)        # if it raises, p is dropped
        if len(out) < _POOLED_MAX:   # one that grew for a large value goes with it
            free.append(p)
        return out
    return packb


#: Packs the format's own structures (entries, headers): ints, strs, arrays and maps only.
pack_plain = _pooled(**PACK_OPTIONS)
#: Packs one argument value, extensions included (a tuple is EXT_TUPLE, not an array).
packb = _pooled(default=_default, strict_types=True, **PACK_OPTIONS)
#: Packs a tuple of plain scalars as the args array of an event (big ints through the hook).
pack_args = _pooled(default=_default, **PACK_OPTIONS)


#: The header of a msgpack array of n elements.
pack_array_header = msgpack.Packer(**PACK_OPTIONS).pack_array_header


def plain_packer() -> msgpack.Packer:
    """A reusable Packer that packs as ``pack_plain`` does (no hook: an int beyond 64 bits raises)."""
    return msgpack.Packer(**PACK_OPTIONS)


def encode(value: Any, source_lines: bool = False) -> bytes:
    """Encode one value; a value that cannot be encoded is captured as its text. With
    ``source_lines``, an exception's frames keep their source lines (read now).

    A container another thread changes while it is packed (the hook runs Python code,
    and the GIL passes) can give bytes whose counts do not match their items: those are
    checked, packed again, and if still not whole, captured as text; never queued."""
    try:
        if source_lines:
            _state.source_lines = True
            try:
                data = packb(value)
            finally:
                _state.source_lines = False
        else:
            data = packb(value)
        # An exception's data is built of fresh lists of its own (nothing another thread
        # holds): whole, unchecked.
        if (type(value) in PLAIN_TYPES or isinstance(value, BaseException) or _whole(data)
                or _whole(data := packb(value))):
            return data
        raise _Changed("changed while it was logged")
    except Exception as exc:  # a broken value (a dataclass with an unset field...) never raises here
        if not owned_by_value(exc) and not isinstance(exc, _Changed):
            raise
        # Self-referencing containers and similar: keep what the user would have seen.
        return packb(msgpack.ExtType(EXT_OPAQUE, packb([type_name(type(value)), safe_str(value)])))


class _Changed(Exception):
    """A value whose packed bytes are not whole: another thread changed it meanwhile."""


#: Extension codes whose data is not msgpack (big int, Decimal, UUID: raw bytes).
_RAW_EXT = frozenset({EXT_BIGINT, EXT_DECIMAL, EXT_UUID})


def _check_ext(code: int, payload: bytes) -> None:
    if code not in _RAW_EXT:
        msgpack.unpackb(payload, strict_map_key=False, raw=True, use_list=False,
                        ext_hook=_check_ext)


def _whole(data: bytes) -> bool:
    """True if ``data`` is exactly one msgpack value, its extensions' data too."""
    try:
        msgpack.unpackb(data, strict_map_key=False, raw=True, use_list=False,
                        ext_hook=_check_ext)
        return True
    except (ValueError, msgpack.UnpackException):   # not whole; anything else (a signal
        return False                                # handler's exception) is the caller's


#: Immutable scalars: queued as they are, encoded without capture.
PLAIN_TYPES = frozenset({type(None), bool, int, float, str, bytes})
_PLAIN_ATOMS = PLAIN_TYPES | {Decimal, uuid.UUID, _dt.date, _dt.timedelta}


def all_plain(values: tuple) -> bool:
    """True if every value is an immutable scalar of exactly a PLAIN_TYPES type."""
    for v in values:
        if type(v) not in PLAIN_TYPES:
            return False
    return True


def reproducible(value: Any, conversion: str | None = None, spec: str = "",
                 _depth: int = 0, _key: bool = False) -> bool:
    """True if a reader renders ``value`` from the file as the writer renders it now, with
    ``conversion`` and any spec. Otherwise the writer keeps the text it rendered at call
    time next to the value.

    Sets and frozensets (of such values) are: the reader shows them in the logged order
    (SetValue). So are enum members of a known style (EnumValue), and dataclasses and
    named tuples shown by their generated repr, but not with a spec. A datetime in a
    zoneinfo zone is at the top of a placeholder, but not under ``!r`` or ``!a`` (its
    repr names the zone's tzinfo, which the reader may not have), nor inside a
    container (shown by repr).
    """
    t = type(value)
    if t in _PLAIN_ATOMS:
        return True
    if conversion == "%":       # printf-style: %s, %r and %a as str, repr and ascii;
        kind = spec[-1:]        # a number conversion of anything but the atoms: text kept
        if kind not in ("s", "r", "a") or issubclass(t, enum.Enum):   # str() of a member
            return False                                             # may not be its format()
        conversion, spec = (None if kind == "s" else kind), ""
    if _depth > 32:
        return False
    # A set's elements and a dict's keys are read back as hashable values: a record
    # (its fields a dict) or an enum member of a value that is not would come back as
    # an OpaqueValue, shown otherwise.
    # Containers are looked at through a copy (made in one step): another thread may
    # change them meanwhile, and iterating a dict or set that changes raises.
    if t is tuple:
        return all(reproducible(v, None, "", _depth + 1, _key) for v in value)
    if t is list:
        return not _key and all(reproducible(v, None, "", _depth + 1) for v in value.copy())
    if t is set or t is frozenset:
        return (t is frozenset or not _key) and \
            all(reproducible(v, None, "", _depth + 1, True) for v in tuple(value))
    if t is dict:
        return not _key and all(reproducible(k, None, "", _depth + 1, True)
                                and reproducible(v, None, "", _depth + 1)
                                for k, v in list(value.items()))
    if issubclass(t, tuple) or dataclasses.is_dataclass(t):   # by the generated repr
        info = record_type(t)
        if info is None or info[1] is None or spec or _key:
            return False
        names, mask = info[2], info[3]
        try:
            values = tuple(value) if info[4] else [getattr(value, n) for n in names]
        except Exception as exc:     # a field deleted, a property or __iter__ that raises
            if not owned_by_value(exc):
                raise
            return False
        return all(reproducible(v, None, "", _depth + 1)
                   for i, v in enumerate(values) if mask >> i & 1)
    if issubclass(t, enum.Enum):         # shown by its class's style, its value by repr
        style = enum_type(t)[1]
        v = value._value_
        if _key and type(v) not in PLAIN_TYPES:
            return False
        return (style == ENUM_NAMED or (style == ENUM_VALUE and type(v) in (int, str))) \
            and reproducible(v, None, "", _depth + 1)
    if t is _dt.datetime or t is _dt.time:
        tz = value.tzinfo
        if tz is None or type(tz) is _dt.timezone:
            return True
        return (t is _dt.datetime and type(tz) is ZoneInfo and _depth == 0
                and conversion not in ("r", "a"))
    return False


# --- decoding (reader side) -------------------------------------------------

_ZONE_KEY = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*\Z")


def _fixed_tz(tz: list | None) -> _dt.tzinfo | None:
    if tz is None:
        return None
    us, name = (list(tz) + [None, None])[:2]
    off = _dt.timedelta(microseconds=us)
    return _dt.timezone(off, name) if isinstance(name, str) else _dt.timezone(off)


def _zone(tz: list | None) -> _dt.tzinfo | None:
    """The named zone (``Europe/Paris``) of an encoded tz, if this machine knows it."""
    key = tz[2] if tz is not None and len(tz) > 2 else None
    if not (isinstance(key, str) and len(key) < 64 and _ZONE_KEY.match(key)):
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
        return OpaqueValue(type_name(type(value)), decoded_text(value, "r"))


#: Characters of text that decoding one event may make (the reprs of set members and
#: map keys that cannot be hashed, tracebacks, the text of a crafted file's non-str
#: fields): a value's text can be far larger than its bytes (a list of references to a
#: record type with a long name repeats it per reference). Past it, a text is cut.
MAX_DECODED_TEXT = 1 << 20
DECODE_CUT = "[... cut]"


def begin_event() -> None:
    """A new event is decoded on this thread: its texts have the whole MAX_DECODED_TEXT."""
    _state.text_left = MAX_DECODED_TEXT


def decoded_text(value: Any, conversion: str | None = None) -> str:
    """``str`` (or with ``"r"``, ``repr``) of a decoded value, within what is left of the
    event's text budget; cut with DECODE_CUT past it."""
    if type(value) is str and conversion is None:
        text = value
    else:
        left = getattr(_state, "text_left", MAX_DECODED_TEXT)
        text = boundedtext.bounded_text(value, conversion, left)
    return _take_text(text)


def _take_text(text: str) -> str:
    left = getattr(_state, "text_left", MAX_DECODED_TEXT)
    if len(text) > left:
        text = text[:left] + DECODE_CUT
    _state.text_left = max(0, left - len(text))
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
        old = getattr(_state, "types", None)
        _state.types = types
        try:
            return ext_hook(code, data)
        finally:
            _state.types = old
    return hook


#: Decodes the format's own structures where no value can occur (the header frame).
unpack_plain = partial(msgpack.unpackb, **UNPACK_OPTIONS)


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
        if code in _RAW_EXT:
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


#: Extension values inside extension values decode this deep; deeper ones stay ExtValue.
#: (Each level costs a C stack frame of the msgpack decoder: an unbounded depth in a
#: hostile file would overflow the stack.) The writer never nests deeper than MAX_DEPTH.
MAX_DECODE_DEPTH = 40
MAX_DEPTH = 32
class _State(threading.local):
    """Per thread: the extension nesting depth (encoding or decoding), whether an
    exception's source lines are kept, the descriptions decoded values refer to. Class
    defaults: a lookup never misses (a miss raises inside getattr, ~0.6 us)."""

    depth = 0
    source_lines = False
    types: TypeTable | None = None


_state = _State()


def ext_hook(code: int, data: bytes) -> Any:
    """Turn a blog extension back into a Python value.

    Never raises: an unknown code, a payload that does not decode, or one
    nested deeper than MAX_DECODE_DEPTH stays an ``ExtValue``, so one bad value
    cannot cost the rest of its frame.
    """
    depth = getattr(_state, "depth", 0)
    if depth >= MAX_DECODE_DEPTH:
        return ExtValue(code, bytes(data))
    _state.depth = depth + 1
    try:
        return _decode_ext(code, data)
    except Exception:
        return ExtValue(code, bytes(data))
    finally:
        _state.depth = depth


#: Source lines of tracebacks, read where the files are (bounded: blogformat.tracebacks).
_SOURCE = tracebacks.SourceLines()


def _enum_value(t: str, name: str, value: Any, style: Any) -> EnumValue:
    if style not in (ENUM_NAMED, ENUM_VALUE) or (
            style == ENUM_VALUE and type(value) is not int and type(value) is not str):
        style = ENUM_TEXT
    return EnumValue(t, name, value, style)


def _member_value(e: Any) -> EnumValue:
    return _enum_value(e.type, e.name, e.value, e.style)


def _shown(e: Any) -> tuple:
    return e.shown


def _frames(frames: Any) -> tuple:
    """Decoded traceback frames as tuples: (file, line, function[, source]); the last
    MAX_FRAMES (a writer keeps no more)."""
    if not isinstance(frames, list):
        return ()
    return tuple(tuple(f[:4]) for f in frames[-tracebacks.MAX_FRAMES:]
                 if isinstance(f, list) and len(f) >= 3)


def _strs(items: Any) -> tuple:
    return tuple(_str(x) for x in items) if isinstance(items, list) else ()


def _str(x: Any) -> str:
    """A text field: a str as it is; a crafted file's other value as ``str`` shows it,
    within the event's text budget."""
    return x if type(x) is str else decoded_text(x)


def _decode_ext(code: int, data: bytes) -> Any:
    if code == EXT_TUPLE:
        return tuple(unpackb(data))
    if code == EXT_BIGINT:
        return int.from_bytes(data, "little", signed=True)
    if code == EXT_SET:
        return SetValue(map(hashable, unpackb(data)))
    if code == EXT_FROZENSET:
        return FrozenSetValue(map(hashable, unpackb(data)))
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
        return Decimal(data.decode("ascii"))
    if code == EXT_UUID:
        return uuid.UUID(bytes=bytes(data))
    if code == EXT_MEMBER:
        table = getattr(_state, "types", None)
        tid = unpackb(data)
        if table is not None and type(table.get(tid)) is EnumMember:
            return table.decoded(tid, _member_value)
        return ExtValue(code, bytes(data))
    if code == EXT_RECORD:
        table = getattr(_state, "types", None)
        items = unpackb(data)
        e = table.get(items[0]) if table is not None else None
        if table is None or type(e) is not RecordType or len(items) != len(e.fields) + 1:
            return ExtValue(code, bytes(data))
        fields = dict(zip(e.fields, items[1:]))
        if e.repr_name is None:
            return DataclassValue(e.type, fields)
        return DataclassValue(e.type, fields, e.repr_name, table.decoded(e.id, _shown))
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
            return DataclassValue(_str(t), fields, repr_name, shown)
        return DataclassValue(_str(t), fields)
    if code == EXT_EXCEPTION:
        items = unpackb(data)
        t, msg, tb = items[:3]
        frames, notes, chain = (items[3:6] + [None] * 3)[:3]
        frames, notes = _frames(frames), _strs(notes)
        chain = tuple((_str(c[0]), _str(c[1]), _frames(c[2]), _strs(c[3]), c[4])
                      for c in chain[-tracebacks.MAX_CHAIN:] if isinstance(c, list) and len(c) >= 5
                      ) if isinstance(chain, list) else ()
        t, msg = _str(t), _str(msg)
        if not isinstance(tb, str):
            tb = (_take_text(tracebacks.render(
                t, msg, frames, notes, chain, _SOURCE,
                min(tracebacks.MAX_TRACEBACK_TEXT, getattr(_state, "text_left", MAX_DECODED_TEXT))))
                if frames or chain else None)
        return ExceptionValue(t, msg, tb, frames, notes, chain)
    if code == EXT_OPAQUE:
        t, text = unpackb(data)[:2]
        return OpaqueValue(_str(t), _str(text))
    return ExtValue(code, bytes(data))
