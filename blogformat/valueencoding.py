"""Argument values to msgpack (docs/format.md 7): the writer's side of ``blogformat.values``.

``encode`` packs one value, extensions included (``packb``), and captures as its text a
value it cannot pack. What the encoder learns of a class once is kept per class, for the
C call paths too (``_valueencoding.c`` beside this module): an enum's style and its
members' described ids (``ENUM_TYPES``), a dataclass's or named tuple's fields
(``RECORD_TYPES``), the classes ``blog.adapt`` names (``ADAPTED``). ``reproducible``
says whether a reader renders a value as the writer does now (else the writer keeps the
text it rendered).
"""

from __future__ import annotations

import collections
import datetime as _dt
import enum
import reprlib
import types

import msgpack

from blogformat.typinglite import TYPE_CHECKING, NamedTuple
from blogformat import valuetypes
from blogformat.guard import owned_by_value
from blogformat.lazy import loaded
from blogformat.values import (ENUM_NAMED, ENUM_TEXT, ENUM_VALUE, EXT_BIGINT, EXT_DATACLASS,
                               EXT_DATE, EXT_DATETIME, EXT_DECIMAL, EXT_ENUM, EXT_EXCEPTION,
                               EXT_FROZENSET, EXT_MEMBER, EXT_OPAQUE, EXT_RECORD, EXT_SET,
                               EXT_TIME, EXT_TIMEDELTA, EXT_TUPLE, EXT_UUID, MAX_DEPTH,
                               PACK_OPTIONS, PLAIN_TYPES, RAW_EXT, pack_plain, pooled, safe_str,
                               thread_state, type_name)
from blogformat.valuetypes import DESCRIBABLE_VALUES, EnumMember, RecordType

if TYPE_CHECKING:
    from typing import Any, Callable


class EnumInfo(NamedTuple):
    """What the encoders know of an enum class (an ENUM_TYPES entry). The C path reads it by
    position: _valueencoding.c's ENUM_* indices name these fields in this order."""
    type_name: str
    style: int         # ENUM_NAMED, ENUM_VALUE or ENUM_TEXT
    member_ids: dict   # member name -> described id, or False where it cannot be


#: Per enum class, for the C call paths too (_valueencoding.c). Classes are kept (a class is
#: long-lived); at most MAX_TYPES.
ENUM_TYPES: dict[type, EnumInfo] = {}
MAX_TYPES = 4096


def enum_type(cls: type) -> EnumInfo:
    """The ENUM_TYPES entry of an enum class, made the first time."""
    got = ENUM_TYPES.get(cls)
    if got is None:
        got = EnumInfo(type_name(cls), _enum_style(cls), {})
        if len(ENUM_TYPES) < MAX_TYPES:
            got = ENUM_TYPES.setdefault(cls, got)
    return got


def member_id(cls: type, info: EnumInfo, name: Any, value: Any, style: int) -> int | None:
    """The id of an enum member's description (docs/format.md 4.9), made the first time;
    None where its value is not a plain scalar (it then describes itself, extension 11)."""
    ids = info.member_ids
    tid = ids.get(name) if type(name) is str else None
    if tid is None:
        if type(name) is not str or type(value) not in DESCRIBABLE_VALUES or (
                type(value) is int and not -(1 << 63) <= value < 1 << 64):
            return None
        tid = valuetypes.describe((cls, name), lambda i: EnumMember(i, info.type_name, name, value,
                                                                    style))
        ids[name] = False if tid is None else tid   # False: not describable, not tried again
    return tid or None


#: What ``dataclasses.is_dataclass`` looks for on a class (without importing dataclasses).
_DATACLASS = "__dataclass_fields__"

class RecordInfo(NamedTuple):
    """What the encoders know of a dataclass or named tuple class (a RECORD_TYPES entry),
    for the C call paths too: _valueencoding.c's RECORD_* indices name these fields in this
    order."""
    type_name: str
    repr_name: str | None   # None unless shown by the generated repr (str, format object's)
    names: tuple[str, ...]  # its fields
    mask: int               # bit i: field i is shown in its repr
    is_tuple: bool          # a named tuple
    access: int             # how the C path reads its fields (FIELDS_IN_*)
    type_id: int | None     # its description's id (docs/format.md 4.8); None: not described


RECORD_TYPES: dict[type, RecordInfo] = {}


def record_type(cls: Any) -> RecordInfo | None:
    """RECORD_TYPES' entry of a dataclass or named tuple class; None for another class."""
    got = RECORD_TYPES.get(cls)
    if got is None:
        got = _record_type(cls)
        if got is None:
            return None
        if len(RECORD_TYPES) < MAX_TYPES:
            name, repr_name, names, mask = got.type_name, got.repr_name, got.names, got.mask
            tid = valuetypes.describe(cls, lambda i: RecordType(i, name, repr_name, names, mask))
            got = RECORD_TYPES.setdefault(cls, got._replace(type_id=tid))
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
    RECORD_TYPES[cls] = RecordInfo(name, None, names, mask, False, FIELDS_IN_PYTHON, tid)
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


def _record_type(cls: Any) -> RecordInfo | None:
    """The class's RecordInfo, not described yet (type_id None)."""
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
            return RecordInfo(type_name(cls), cls.__name__ if generated else None, names,
                              (1 << len(names)) - 1, True, FIELDS_IN_PYTHON, None)
        if not hasattr(cls, _DATACLASS) or not isinstance(cls, type):
            return None
        import dataclasses   # (loaded: cls is a dataclass)
        fields = dataclasses.fields(cls)
        inner = getattr(rep, "__wrapped__", None)
        generated = (plain and getattr(cls, "__dataclass_params__", None) is not None
                     and getattr(cls, "__dataclass_params__").repr and inner is not None
                     and getattr(rep, "__code__", None) is not None
                     and rep.__code__.co_filename in (dataclasses.__file__, reprlib.__file__)
                     and getattr(inner, "__qualname__", "").startswith("__create_fn__."))
        mask = sum(1 << i for i, f in enumerate(fields) if f.repr)
        names = tuple(f.name for f in fields)
        return RecordInfo(type_name(cls), cls.__qualname__ if generated else None, names,
                          mask, False, _field_access(cls, names), None)
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
    depth = getattr(thread_state, "depth", 0)
    if depth >= MAX_DEPTH:  # readers decode nested extensions only so deep
        return msgpack.ExtType(EXT_OPAQUE, pack_plain([type_name(type(obj)), safe_str(obj)]))
    thread_state.depth = depth + 1
    try:
        return _encode_ext(obj)
    finally:
        thread_state.depth = depth


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
        style = info.style
        if style == ENUM_VALUE and type(value) is not int and type(value) is not str:
            style = ENUM_TEXT
        tid = member_id(t, info, obj._name_, value, style)
        if tid is not None:
            return msgpack.ExtType(EXT_MEMBER, pack_plain(tid))
        return msgpack.ExtType(EXT_ENUM, packb([info.type_name, obj._name_, value, style]))
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
    decimal_type = loaded("decimal", "Decimal")
    if decimal_type is not None and isinstance(obj, decimal_type):
        return msgpack.ExtType(EXT_DECIMAL, str(obj).encode("ascii"))
    uuid_type = loaded("uuid", "UUID")
    if uuid_type is not None and isinstance(obj, uuid_type):
        return msgpack.ExtType(EXT_UUID, obj.bytes)
    if isinstance(obj, BaseException):
        # Structured frames, not text: nothing is read or formatted at the call.
        from blogformat import tracebacks   # (with the first exception logged: start-up)
        lines = getattr(thread_state, "source_lines", False)
        return msgpack.ExtType(EXT_EXCEPTION, packb(
            tracebacks.exception(obj, type_name, safe_str, lines)))
    # (NO_EXCEPTION is made with blogformat.tracebacks, its data just after it)
    no_exception_data = loaded("blogformat.tracebacks", "NO_EXCEPTION_DATA")
    if no_exception_data is not None and obj is loaded("blogformat.tracebacks", "NO_EXCEPTION"):
        return msgpack.ExtType(EXT_EXCEPTION, packb(no_exception_data))
    if t in ADAPTED:
        fields = ADAPTED[t]
        if fields is not None:   # blog.adapt(cls, function): the fields it gives now
            got = fields(obj)
            if type(got) is not dict or not all(type(k) is str for k in got):
                raise TypeError(f"blog.adapt: the fields function of {type_name(t)} returned "
                                f"{type(got).__name__}, not a dict with str keys")
            return msgpack.ExtType(EXT_DATACLASS, packb([type_name(t), got, None,
                                                         (1 << len(got)) - 1]))
    rec = record_type(t) if (hasattr(t, _DATACLASS) and not isinstance(obj, type)) \
        or (issubclass(t, tuple) and hasattr(t, "_fields")) or t in ADAPTED else None
    if rec is not None:
        name, repr_name, names, mask, is_tuple, _, tid = rec
        values = list(obj) if is_tuple else [getattr(obj, n) for n in names]
        if tid is not None and len(values) == len(names):
            # Described once (docs/format.md 4.8): only its field values here.
            return msgpack.ExtType(EXT_RECORD, packb([tid, *values]))
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


#: Packs one argument value, extensions included (a tuple is EXT_TUPLE, not an array).
packb = pooled(default=_default, strict_types=True, **PACK_OPTIONS)
#: Packs a tuple of plain scalars as the args array of an event (big ints through the hook).
pack_args = pooled(default=_default, **PACK_OPTIONS)


def encode(value: Any, source_lines: bool = False) -> bytes:
    """Encode one value; a value that cannot be encoded is captured as its text. With
    ``source_lines``, an exception's frames keep their source lines (read now).

    A container another thread changes while it is packed (the hook runs Python code,
    and the GIL passes) can give bytes whose counts do not match their items: those are
    checked, packed again, and if still not whole, captured as text; never queued."""
    try:
        if source_lines:
            thread_state.source_lines = True
            try:
                data = packb(value)
            finally:
                thread_state.source_lines = False
        else:
            data = packb(value)
        # An exception's data is built of fresh lists of its own (nothing another thread
        # holds): whole, unchecked.
        if (type(value) in PLAIN_TYPES or isinstance(value, BaseException) or _whole(data)
                or _whole(data := packb(value))):
            return data
        raise _Changed("changed while it was logged")
    except Exception as exc:  # a broken value (a dataclass with an unset field...) never raises
        if not owned_by_value(exc) and not isinstance(exc, _Changed):
            raise
        # Self-referencing containers and similar: keep what the user would have seen.
        return packb(msgpack.ExtType(EXT_OPAQUE, packb([type_name(type(value)), safe_str(value)])))


class _Changed(Exception):
    """A value whose packed bytes are not whole: another thread changed it meanwhile."""


def _check_ext(code: int, payload: bytes) -> None:
    if code not in RAW_EXT:
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


_PLAIN_ATOMS = PLAIN_TYPES | {_dt.date, _dt.timedelta}   # and decimal.Decimal, uuid.UUID


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
    if t in _PLAIN_ATOMS or (t.__name__ == "UUID" and t is loaded("uuid", "UUID")) or (
            t.__name__ == "Decimal" and t is loaded("decimal", "Decimal")):
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
    if issubclass(t, tuple) or hasattr(t, _DATACLASS):   # by the generated repr
        info = record_type(t)
        if info is None or info.repr_name is None or spec or _key:
            return False
        names, mask = info.names, info.mask
        try:
            values = tuple(value) if info.is_tuple else [getattr(value, n) for n in names]
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
        return (t is _dt.datetime and type(tz) is loaded("zoneinfo", "ZoneInfo")
                and _depth == 0 and conversion not in ("r", "a"))
    return False
