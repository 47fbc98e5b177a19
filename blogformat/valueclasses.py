"""The values bread decodes where Python's own type is not at hand: an enum member, a
dataclass or named tuple, an exception, an opaque object, an unknown extension, and sets
shown in the order they were logged in (docs/format.md 7).

Each shows (``str``, ``repr``, ``format``) what the writer's value showed, from what the
file holds; ``blogformat.valuedecoding`` decodes them, ``blogformat.boundedtext`` gives their
text within a budget.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from blogformat.values import ENUM_NAMED, ENUM_TEXT, ENUM_VALUE   # (their values' styles)


@dataclasses.dataclass(frozen=True)
class EnumValue:
    """An enum member as logged: its class's qualified name, member name and value; and
    ``style``, how its class shows its members (ENUM_NAMED, ENUM_VALUE), from which
    ``str``, ``repr`` and ``format`` give what the writer's gave (0: not known)."""

    type: str
    name: str
    value: Any
    style: int = dataclasses.field(default=ENUM_TEXT, compare=False)

    def __str__(self) -> str:
        if self.style == ENUM_VALUE:
            return str(self.value)
        return f"{self.type.rsplit('.', 1)[-1]}.{self.name}"

    def __repr__(self) -> str:
        if self.style in (ENUM_NAMED, ENUM_VALUE):
            return f"<{self.type.rsplit('.', 1)[-1]}.{self.name}: {self.value!r}>"
        return (f"EnumValue(type={self.type!r}, name={self.name!r}, value={self.value!r})")

    def __format__(self, spec: str) -> str:
        if self.style == ENUM_VALUE:
            return format(self.value, spec)
        if self.style == ENUM_NAMED:
            return format(str(self), spec)
        return object.__format__(self, spec)


@dataclasses.dataclass(frozen=True)
class DataclassValue:
    """A dataclass instance or a named tuple as logged: its class's qualified name and
    its fields; and, where its class's repr is the generated one, the name that repr
    shows and the fields it shows (``str`` and ``repr`` then give what the writer's did)."""

    type: str
    fields: dict
    repr_name: str | None = dataclasses.field(default=None, compare=False)
    shown: tuple = dataclasses.field(default=(), compare=False)

    def __str__(self) -> str:
        if self.repr_name is not None:
            inner = ", ".join(f"{k}={self.fields[k]!r}" for k in self.shown)
            return f"{self.repr_name}({inner})"
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"{self.type.rsplit('.', 1)[-1]}({inner})"

    def __repr__(self) -> str:
        if self.repr_name is not None:
            return str(self)
        return f"DataclassValue(type={self.type!r}, fields={self.fields!r})"


@dataclasses.dataclass(frozen=True)
class ExceptionValue:
    """An exception as logged: type name, ``str(exc)`` and its text as
    ``traceback.format_exception`` gives it (``ValueError: boom`` for one never raised).

    ``frames`` are the traceback's ``(file, line, function[, source])``, most recent call
    last; ``notes`` its ``__notes__``; ``chain`` the exceptions printed before it (causes
    and contexts), oldest first, each ``(type, message, frames, notes, link)``;
    ``exceptions`` a group's exceptions (the first MAX_MEMBERS), each an ExceptionValue
    whose traceback is its own text; ``syntax`` a SyntaxError's ``(msg, filename, lineno,
    offset, text, end_lineno, end_offset)``. Files written since frames are kept render
    ``traceback`` from them (``blogformat.tracebacks``); older files stored the text.
    """

    type: str
    message: str
    traceback: str | None = None
    frames: tuple = ()
    notes: tuple = ()
    chain: tuple = ()
    exceptions: tuple = ()
    syntax: tuple = ()

    def __str__(self) -> str:
        return self.message


@dataclasses.dataclass(frozen=True)
class OpaqueValue:
    """A value of a type the format does not know: its type name and its text at call time."""

    type: str
    text: str

    def __str__(self) -> str:
        return self.text


class SetValue(set):
    """A set as logged: equal to the set, and shown (``str``, ``repr``, ``format``, iterated)
    in the order its elements were logged in, which is the order the writer's ``str()``
    showed them in. Mutated after decoding, it is shown as any set."""

    __slots__ = ("_order",)

    def __init__(self, items: Any = ()) -> None:
        order = tuple(dict.fromkeys(items))
        super().__init__(order)
        self._order = order

    def _logged(self) -> bool:
        return len(self._order) == len(self) and all(x in self for x in self._order)

    def __iter__(self) -> Any:
        return iter(self._order) if self._logged() else super().__iter__()

    def __repr__(self) -> str:
        if not self._logged():
            return set.__repr__(set(self))
        return "{" + ", ".join(map(repr, self._order)) + "}" if self._order else "set()"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if spec:
            raise TypeError("unsupported format string passed to set.__format__")
        return repr(self)

    def __reduce__(self) -> Any:
        return (SetValue, (list(self),))


class FrozenSetValue(frozenset):
    """A frozenset as logged: equal to it, shown in the order its elements were logged in."""

    __slots__ = ("_order",)
    _order: tuple

    def __new__(cls, items: Any = ()) -> "FrozenSetValue":
        order = tuple(dict.fromkeys(items))
        self = super().__new__(cls, order)
        self._order = order
        return self

    def __iter__(self) -> Any:
        return iter(self._order)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self._order))
        return f"frozenset({{{inner}}})" if self._order else "frozenset()"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if spec:
            raise TypeError("unsupported format string passed to frozenset.__format__")
        return repr(self)

    def __reduce__(self) -> Any:
        return (FrozenSetValue, (list(self),))


@dataclasses.dataclass(frozen=True)
class ExtValue:
    """An extension value bread does not decode: an unknown code, bad data, or nested too deep."""

    code: int
    data: bytes
