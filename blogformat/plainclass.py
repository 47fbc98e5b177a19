"""Classes of named fields written by hand: compared, shown and (when frozen) hashed as a
dataclass's are, without the cost of ``dataclasses`` at import (the module, with
``inspect``, and the code it generates per class: together about the cost of starting
Python, paid by every ``import blog`` and every ``bread`` run).

A subclass names its fields in ``_FIELDS``, in the order of its ``__init__``'s
parameters (its ``__match_args__``), those in ``_HIDDEN`` neither compared, hashed nor
shown (a dataclass's ``field(repr=False, compare=False)``); its ``__init__`` sets them, a
``Frozen`` one's through ``self.__dict__`` (its ``__setattr__`` refuses).
"""

from __future__ import annotations

from typing import Any, ClassVar


class Plain:
    """``==`` between instances of the same class and ``repr`` by the fields not hidden;
    unhashable, as a dataclass that is compared and not frozen."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _HIDDEN: ClassVar[tuple[str, ...]] = ()
    _COMPARED: ClassVar[tuple[str, ...]] = ()
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        setattr(cls, "__match_args__", cls._FIELDS)   # (mypy refuses an assignment)
        cls._COMPARED = tuple(n for n in cls._FIELDS if n not in cls._HIDDEN)

    def _compared(self) -> tuple:
        return tuple([getattr(self, n) for n in self._COMPARED])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def _replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return self.__class__(**{**{n: getattr(self, n) for n in self._FIELDS}, **changes})

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._COMPARED)
        return f"{self.__class__.__qualname__}({shown})"


class Frozen(Plain):
    """A Plain class whose fields are set once (in ``__init__``, through ``__dict__``):
    hashable by the fields not hidden, and assigning or deleting a field raises AttributeError,
    as a frozen dataclass's does."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._compared())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")
