"""An event's arguments in mserialize's encoding -> Python objects, driven by their tags.

The tags (the EventSource's argument tags, one per ``{}``): ``y`` bool, ``c`` char,
``b s i l`` / ``B S I L`` signed / unsigned 8 to 64 bits, ``f d D`` float, double, long
double (x86's 80 bits in 16 bytes), ``[T`` a sequence (``u32`` count; ``[c`` a string),
``(T...)`` a tuple, ``<T...>`` a variant (``u8`` index; ``0`` the empty option: None),
``/T`Name'hex`Enumerator'...\\`` an enum, ``{Name`field'T...}`` a struct (``{Name}`` an
empty struct, or one defined earlier in the same tag: recursive structures).

Values are ints, floats, bools, str (``c`` and ``[c``), lists, tuples, None, and
``Struct`` / ``Enum`` for the named types; a sequence of more than 32 values that take
no byte (empty structs) is one ``Repeated``, never a list of that many.
"""

from __future__ import annotations

import math
import struct
from decimal import Context, Decimal
from functools import lru_cache
from typing import Any, Callable, NamedTuple, Sequence

from .entries import BinlogError, Payload, text

#: How deep tags nest before the value is refused (the C++ reader's limit is 2048): a
#: value this deep still renders, as text and JSON, within Python's recursion limit.
MAX_DEPTH = 100

_ARITHMETIC = {c: struct.Struct("<" + f) for c, f in
               zip("ycbsilBSILfd", "?cbhiqBHIQfd")}
_U32 = struct.Struct("<I")
_LONG_DOUBLE = struct.Struct("<QH6x")
_EXACT = Context(prec=20000)


class Struct(NamedTuple):
    """A C++ structure: its name, its fields' tag (``{Name`` ... ``}`` without either end:
    what tells special types apart), and its fields as (name, value) pairs (a base class is
    a field without a name)."""

    name: str
    tag: str
    fields: tuple

    def json_object(self, text: Callable[[str], str], value: Callable[[Any], Any]) -> dict:
        """Itself as JSON (``bread.sinks.json``: ``text`` takes each str, ``value`` each
        value, within the budget of the event's JSON)."""
        return {"$struct": text(self.name),
                "fields": [[text(k), value(x)] for k, x in self.fields]}


class Enum(NamedTuple):
    """A C++ enum value: the type's name, the enumerator's name ("" for a value the type does
    not name), the value, and the value as the library writes it in hex."""

    name: str
    enumerator: str
    value: int
    hex: str

    def json_object(self, text: Callable[[str], str], value: Callable[[Any], Any]) -> dict:
        """Itself as JSON (as ``Struct.json_object``)."""
        return {"$enum": text(self.name), "name": text(self.enumerator), "value": self.value}


class Repeated(NamedTuple):
    """A sequence of ``times`` equal values that take no byte (``times`` over 32)."""

    value: Any
    times: int

    def json_object(self, text: Callable[[str], str], value: Callable[[Any], Any]) -> dict:
        """Itself as JSON (as ``Struct.json_object``)."""
        return {"$repeated": value(self.value), "times": self.times}


class Nothing:
    """The option of a variant whose index names no tag: no value at all (printed as
    nothing)."""

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING = Nothing()


#: Tags up to this long have their walks kept (a call site's tags are walked per event),
#: the last 256 of each kind.
_KEPT = 4096


def split_tags(tags: str) -> Sequence[str]:
    """The concatenated tags, one per value (in one pass: a tag of millions of characters
    is split in time proportional to it)."""
    return _kept_split(tags) if len(tags) <= _KEPT else _split(tags)


def _split(tags: str) -> tuple[str, ...]:
    out = []
    i = 0
    while i < len(tags):
        n = first_size(tags, i)
        out.append(tags[i:i + n])
        i += n
    return tuple(out)


_kept_split = lru_cache(maxsize=256)(_split)


_CLOSE = {"(": ")", "<": ">", "{": "}", "/": "\\"}


def first_size(tags: str, start: int = 0) -> int:
    """The length of the first tag of ``tags[start:]`` (brackets balanced, or to the end)."""
    i = start
    while i < len(tags) and tags[i] == "[":
        i += 1
    if i == len(tags):
        return i - start
    close = _CLOSE.get(tags[i])
    if close is None:
        return i + 1 - start
    return _matching(tags, i + 1, tags[i], close) - start


def _matching(tags: str, j: int, opening: str, close: str) -> int:
    """The index after the ``close`` that balances an ``opening`` just before ``j`` (the
    end of ``tags`` if none does)."""
    depth = 1
    while j < len(tags):
        c = tags[j]
        if c == opening:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


def fields(tags: str) -> Sequence[tuple[str, str]]:
    """A struct's fields tag (```a'i`b'[c``) as (label, tag) pairs, in one pass."""
    return _kept_fields(tags) if len(tags) <= _KEPT else _fields(tags)


def _fields(tags: str) -> tuple[tuple[str, str], ...]:
    out = []
    i = 0
    while i < len(tags):
        end = tags.find("'", i + 1)
        label, i = (tags[i + 1:], len(tags)) if end < 0 else (tags[i + 1:end], end + 1)
        n = first_size(tags, i)
        out.append((label, tags[i:i + n]))
        i += n
    return tuple(out)


_kept_fields = lru_cache(maxsize=256)(_fields)


def _label(tags: str) -> tuple[str, str]:
    """The label at the start of ``tags`` (```name'``) and the rest."""
    end = tags.find("'", 1)
    if end < 0:
        return tags[1:], ""
    return tags[1:end], tags[end + 1:]


def resolve(full: str, intro: str) -> str:
    """The fields of struct ``intro`` (``{Name``) as defined elsewhere in ``full``: a
    recursive structure names itself without its fields; "" for an empty struct."""
    return _kept_resolve(full, intro) if len(full) <= _KEPT else _resolve(full, intro)


def _resolve(full: str, intro: str) -> str:
    if not intro:
        return ""
    at = 0
    while at < len(full):
        i = full.find(intro, at)
        if i < 0:
            return ""
        at = i + len(intro)
        if at == len(full) or full[at] == "}":
            return ""
        if full[at] == "`":
            return full[at:_matching(full, at, "{", "}") - 1]
    return ""


_kept_resolve = lru_cache(maxsize=256)(_resolve)


class Decoder(Payload):
    """Reads the values of one event's arguments from ``data``."""

    __slots__ = ("full",)

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.full = ""

    def value(self, full: str, tag: str) -> Any:
        """The value of ``tag``, a tag of the argument tag ``full``."""
        self.full = full
        return self._value(tag, MAX_DEPTH)

    def _value(self, tag: str, depth: int) -> Any:
        if depth == 0:
            raise BinlogError(f"Recursion limit exceeded while visiting tag: {self.full}")
        if not tag:
            return NOTHING
        c = tag[0]
        if c == "[":
            return self._sequence(tag[1:], depth - 1)
        if c == "(":
            return tuple(v for v in self._each(tag[1:-1], depth - 1) if v is not NOTHING)
        if c == "<":
            return self._variant(tag[1:-1], depth - 1)
        if c == "{":
            return self._struct(tag[:-1], depth - 1)
        if c == "/":
            return self._enum(tag[1:-1])
        return self._arithmetic(c)

    def _arithmetic(self, c: str) -> Any:
        if c == "D":
            mantissa, top = _LONG_DOUBLE.unpack(self.take(16))
            return long_double(mantissa, top)
        fmt = _ARITHMETIC.get(c)
        if fmt is None:
            raise BinlogError(f"Invalid arithmetic tag: {c}")
        v = fmt.unpack(self.take(fmt.size))[0]
        return text(v) if c == "c" else v

    def _each(self, tags: str, depth: int) -> list:
        return [self._value(t, depth) for t in split_tags(tags)]

    def _sequence(self, tags: str, depth: int) -> Any:
        size = _U32.unpack(self.take(4))[0]
        elem = tags[:first_size(tags)]
        if elem == "c":
            return text(self.take(size))
        if size > 32 and singular(self.full, elem, depth):
            return Repeated(self._value(elem, depth), size)
        return [self._value(elem, depth) for _ in range(size)]

    def _variant(self, tags: str, depth: int) -> Any:
        index = self.take(1)[0]
        options = split_tags(tags)
        option = options[index] if index < len(options) else ""
        return None if option == "0" else self._value(option, depth)

    def _struct(self, tag: str, depth: int) -> Struct:
        cut = tag.find("`")
        intro, fields_tag = (tag, "") if cut < 0 else (tag[:cut], tag[cut:])
        if not fields_tag:
            fields_tag = resolve(self.full, intro)
        values = tuple((name, self._value(t, depth)) for name, t in fields(fields_tag))
        return Struct(intro[1:], fields_tag, values)

    def _enum(self, tag: str) -> Enum:
        if not tag:
            raise BinlogError("Invalid enum tag: ''")
        if tag[0] in "fdD":   # an enum's underlying type is integral (or a NaN is one)
            raise BinlogError(f"Invalid enum tag: {tag[0]}")
        value = self._arithmetic(tag[0])
        number = ord(value) if isinstance(value, str) else int(value)
        if isinstance(value, str) and number > 127:   # a char is signed
            number -= 256
        digits = f"{abs(number):X}"
        hexa = "-" + digits if number < 0 else digits
        rest = tag[2:]
        cut = rest.find("'")
        name, rest = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
        at = rest.find(f"'{hexa}`")
        enumerator = _label(rest[at + len(hexa) + 1:])[0] if at >= 0 else ""
        return Enum(name, enumerator, number, hexa)


def singular(full: str, tag: str, depth: int) -> bool:
    """True if a value of ``tag`` takes no byte (empty tuples and structs of such)."""
    if depth == 0:
        raise BinlogError(f"Recursion limit exceeded while visiting tag: {full}")
    if not tag:
        return True
    if tag[0] == "(":
        return all(singular(full, t, depth - 1) for t in split_tags(tag[1:-1]))
    if tag[0] == "{":
        body = tag[:-1]
        cut = body.find("`")    # no fields here: defined elsewhere (as ``_struct`` finds it)
        rest = resolve(full, body) if cut < 0 else body[cut:]
        return not rest or all(singular(full, t, depth - 1) for _, t in fields(rest))
    return False


def long_double(mantissa: int, top: int) -> float | Decimal:
    """x86's 80-bit long double: a float where it is one exactly, else an exact Decimal."""
    sign = -1 if top & 0x8000 else 1
    exp = top & 0x7FFF
    if exp == 0x7FFF:
        return math.copysign(math.nan, sign) if mantissa & ((1 << 63) - 1) else sign * math.inf
    e = (exp or 1) - 16383 - 63
    if mantissa == 0:
        return sign * 0.0
    shift = (mantissa & -mantissa).bit_length() - 1    # trailing zero bits
    if mantissa >> shift < (1 << 53) and -1074 <= e + shift and e + mantissa.bit_length() <= 1024:
        return sign * math.ldexp(float(mantissa), e)
    scale = _EXACT.power(Decimal(2), e)
    return _EXACT.multiply(Decimal(sign * mantissa), scale)


def decode(tags: str, data: bytes) -> tuple:
    """The values of ``data``, one per tag of ``tags``."""
    d = Decoder(data)
    return tuple(d.value(tags, t) for t in split_tags(tags))
