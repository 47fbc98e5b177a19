"""Classes of named fields declared as a dataclass's are, compared, shown, hashed (when
frozen) and matched as a dataclass's are, without the cost of ``dataclasses`` at import
(the module, with ``inspect``, and the code it generates per class: together about the
cost of starting Python, paid by every ``import blog`` and every ``bread`` run).

A subclass of ``Plain`` or ``Frozen`` lists its fields as class annotations, in order,
with their defaults; ``field(hidden=True)`` marks one neither compared, hashed nor shown
(a dataclass's ``field(repr=False, compare=False)``), ``field(default_factory=dict)`` a
default made per instance. Its ``__init__`` takes them by position or name, as the one a
dataclass generates; a class built in a hot loop writes its own (``RawEvent``).
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING, dataclass_transform

if TYPE_CHECKING:
    from typing import Any, Callable, ClassVar

_MISSING: Any = object()


class _Field:
    __slots__ = ("default", "factory", "hidden")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, hidden: bool) -> None:
        self.default, self.factory, self.hidden = default, factory, hidden


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
          hidden: bool = False) -> Any:
    """A field's default (a value, or a factory called per instance), or that it is
    hidden: not compared, hashed nor shown."""
    return _Field(default, default_factory, hidden)


class _Fields:
    """What Plain and Frozen share (two bases, as a type checker sees them: a frozen
    dataclass cannot derive from one that is not)."""

    __slots__ = ()
    if TYPE_CHECKING:   # (typing's names, which get_type_hints resolves, exist only there)
        _FIELDS: ClassVar[tuple[str, ...]]
        _COMPARED: ClassVar[tuple[str, ...]]
        #: Per field with a default: the default; or the factory that makes it.
        _DEFAULTS: ClassVar[dict[str, Any]]
        _FACTORIES: ClassVar[dict[str, Callable[[], Any]]]
        __hash__: ClassVar[None]  # type: ignore[assignment]
    _FIELDS = _COMPARED = ()
    _DEFAULTS = _FACTORIES = {}   # (each subclass's own, made by __init_subclass__)
    __hash__ = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [n for n, t in cls.__dict__.get("__annotations__", {}).items()
               if not str(t).startswith("ClassVar")]
        names = [*cls._FIELDS, *[n for n in own if n not in cls._FIELDS]]   # a base's first
        defaults = dict(cls._DEFAULTS)
        factories = dict(cls._FACTORIES)
        hidden = set(cls._FIELDS) - set(cls._COMPARED)
        slots = cls.__dict__.get("__slots__", ())
        for n in own:
            d = _MISSING if n in slots else cls.__dict__.get(n, _MISSING)   # (no default)
            if type(d) is _Field:     # as a dataclass does: the class keeps a plain default
                if d.hidden:
                    hidden.add(n)
                if d.factory is not None:
                    factories[n] = d.factory
                d = d.default
                if d is _MISSING:
                    delattr(cls, n)
                else:
                    setattr(cls, n, d)
            if d is not _MISSING:
                defaults[n] = d
        cls._FIELDS = tuple(names)
        cls._COMPARED = tuple(n for n in names if n not in hidden)
        cls._DEFAULTS = defaults
        cls._FACTORIES = factories
        setattr(cls, "__match_args__", cls._FIELDS)   # (mypy refuses an assignment)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self._FIELDS
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, "
                            f"{len(args)} given")
        values = dict(zip(names, args))
        for n, v in kwargs.items():
            if n not in names or n in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated "
                                f"argument {n!r}")
            values[n] = v
        for n in names:
            if n not in values:
                d = self._DEFAULTS.get(n, _MISSING)
                if d is _MISSING and n in self._FACTORIES:
                    d = self._FACTORIES[n]()
                elif d is _MISSING:
                    raise TypeError(f"{type(self).__name__}() missing argument {n!r}")
                values[n] = d
        self._set(values)

    def _set(self, values: dict[str, Any]) -> None:
        for n, v in values.items():
            setattr(self, n, v)

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


@dataclass_transform(field_specifiers=(field,))
class Plain(_Fields):
    """``==`` between instances of the same class and ``repr`` by the fields not hidden;
    unhashable, as a dataclass that is compared and not frozen."""

    __slots__ = ()


@dataclass_transform(field_specifiers=(field,), frozen_default=True)
class Frozen(_Fields):
    """Compared and shown as Plain, and its fields set once, by ``__init__``: hashable by
    the fields not hidden, and assigning or deleting a field raises AttributeError, as a
    frozen dataclass's does."""

    __slots__ = ()

    def _set(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._compared())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")
