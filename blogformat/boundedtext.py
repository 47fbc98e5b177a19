"""The text of a decoded value (``str``, ``repr``, ``ascii``), given out only up to a budget.

A crafted file can make a small value's text huge: a list of 40,000 references
to one record type whose repr name (described once, in the metadata) is
128 KiB long shows that name 40,000 times, 5 GB of text from a few hundred KB
of file. ``repr()`` would build all of it before the message's cut at
``MAX_MESSAGE``. ``bounded_text`` builds the same text piece by piece and stops
once the budget is spent: what it gives is always a prefix of what ``str``,
``repr`` or ``ascii`` would give, and the whole text when that is within the
budget (a property test checks both against Python's own).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from blogformat.valueclasses import (ENUM_NAMED, ENUM_VALUE, DataclassValue, EnumValue,
                                     ExceptionValue, ExtValue, FrozenSetValue, OpaqueValue,
                                     SetValue)

#: Containers and decoded values whose text is made of their parts' texts.
_COMPOSITE = frozenset({list, tuple, dict, set, frozenset, SetValue, FrozenSetValue,
                        DataclassValue, EnumValue, OpaqueValue, ExceptionValue, ExtValue})
#: Decoded values shown with the repr dataclasses generate.
_PLAIN_DATACLASSES = frozenset({OpaqueValue, ExceptionValue, ExtValue})


class Spent(Exception):
    """The budget is spent: the text so far is all that is given."""


class TextBudget:
    """Pieces of text, and how many characters they hold: ``put`` raises ``Spent`` once
    they pass ``budget``. ``put_str`` puts a value's ``str``, piece by piece."""

    __slots__ = ("pieces", "size", "budget", "ascii")

    def __init__(self, budget: int, ascii_only: bool = False) -> None:
        self.pieces: list[str] = []
        self.size = 0
        self.budget = budget
        self.ascii = ascii_only

    def put(self, text: str) -> None:
        if self.ascii and not text.isascii():   # as ascii() escapes repr()'s text
            text = text.encode("ascii", "backslashreplace").decode("ascii")
        self.pieces.append(text)
        self.size += len(text)
        if self.size > self.budget:
            raise Spent

    def put_str(self, value: Any) -> None:
        _str(value, self)

    def text(self) -> str:
        """The pieces so far, at most ``budget + 1`` characters."""
        return "".join(self.pieces)[:self.budget + 1]


def is_composite(value: Any) -> bool:
    """True if ``value``'s text is made of its parts' (``bounded_text`` is for it)."""
    return type(value) in _COMPOSITE


def bounded_text(value: Any, conversion: str | None, budget: int) -> str:
    """``str(value)`` (conversion None or ``"s"``), ``repr(value)`` (``"r"``) or
    ``ascii(value)`` (``"a"``), at most ``budget + 1`` characters: more than ``budget``
    means the text was cut."""
    out = TextBudget(budget, conversion == "a")
    try:
        if conversion in ("r", "a"):
            _repr(value, out)
        else:
            _str(value, out)
    except Spent:
        return out.text()
    return "".join(out.pieces)


def _str(v: Any, out: TextBudget) -> None:
    t = type(v)
    if t is DataclassValue:
        if v.repr_name is not None:
            _record(v.repr_name, [(k, v.fields[k]) for k in v.shown], out)
        else:
            _record(v.type.rsplit(".", 1)[-1], list(v.fields.items()), out)
    elif t is EnumValue:
        if v.style == ENUM_VALUE:
            _str(v.value, out)
        else:
            out.put(v.type.rsplit(".", 1)[-1])
            out.put(".")
            out.put(v.name)
    elif t is OpaqueValue:
        out.put(v.text)
    elif t is ExceptionValue:
        out.put(v.message)
    elif t in _COMPOSITE:   # containers and the rest: their str is their repr
        _repr(v, out)
    else:
        out.put(str(v))


def _repr(v: Any, out: TextBudget) -> None:
    t = type(v)
    if t is list:
        _items("[", v, "]", out)
    elif t is tuple:
        if len(v) == 1:
            out.put("(")
            _repr(v[0], out)
            out.put(",)")
        else:
            _items("(", v, ")", out)
    elif t is dict:
        out.put("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.put(", ")
            _repr(k, out)
            out.put(": ")
            _repr(x, out)
        out.put("}")
    elif t is set or (t is SetValue and not v._logged()):
        if v:
            _items("{", set(v) if t is SetValue else v, "}", out)
        else:
            out.put("set()")
    elif t is SetValue:
        if v:
            _items("{", v._order, "}", out)
        else:
            out.put("set()")
    elif t is frozenset or t is FrozenSetValue:
        if v:
            _items("frozenset({", v, "})", out)
        else:
            out.put("frozenset()")
    elif t is DataclassValue:
        if v.repr_name is not None:
            _str(v, out)
        else:
            out.put("DataclassValue(type=")
            _repr(v.type, out)
            out.put(", fields=")
            _repr(v.fields, out)
            out.put(")")
    elif t is EnumValue:
        if v.style in (ENUM_NAMED, ENUM_VALUE):
            out.put("<")
            out.put(v.type.rsplit(".", 1)[-1])
            out.put(".")
            out.put(v.name)
            out.put(": ")
            _repr(v.value, out)
            out.put(">")
        else:
            _record("EnumValue", [("type", v.type), ("name", v.name), ("value", v.value)], out)
    elif t in _PLAIN_DATACLASSES:
        _record(t.__qualname__, [(f.name, getattr(v, f.name))
                                 for f in dataclasses.fields(v) if f.repr], out)
    else:
        out.put(repr(v))


def _items(opening: str, items: Any, closing: str, out: TextBudget) -> None:
    out.put(opening)
    for i, x in enumerate(items):
        if i:
            out.put(", ")
        _repr(x, out)
    out.put(closing)


def _record(name: str, fields: list[tuple[str, Any]], out: TextBudget) -> None:
    """``name(k=repr(v), ...)``, as a generated dataclass repr shows an instance."""
    out.put(name)
    out.put("(")
    for i, (k, x) in enumerate(fields):
        if i:
            out.put(", ")
        _str(k, out)   # as f"{k}=": a crafted record's field names need not be str
        out.put("=")
        _repr(x, out)
    out.put(")")
