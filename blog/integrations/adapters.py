"""``blog.adapt``: log an application's own class as structured fields.

    blog.adapt(Order, fields=["id", "side", "qty", "price"])
    log.info("placed {}", order)      # the message shows str(order), as at the call

The reader gets a structured value back (``bread.DataclassValue``: the type's name
and its fields, never an unpickled object), as for dataclasses and named tuples,
which need no adapting (nor do enums). The Spark data source and ``bread -o
jsonl`` show the fields (``{"$dataclass": type, "fields": {...}}``).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from typing import Any, Callable, Sequence

from blogformat.valueencoding import adapt_names, adapt_with
from blogformat.values import PLAIN_TYPES


def adapt(cls: type, fields: Sequence[str] | Callable[[Any], dict]) -> type:
    """Log instances of exactly ``cls`` as a record of ``fields``: a list of attribute
    names (described once per stream, each event holds the values only), or a function
    of an instance returning a dict of fields (str keys). Returns ``cls``.

    A name the class has no trace of (not an attribute, property, annotation or slot,
    nor set by one of its methods) raises ValueError.
    """
    if not isinstance(cls, type):
        raise TypeError(f"blog.adapt takes a class, not {type(cls).__name__}")
    if cls in PLAIN_TYPES or issubclass(cls, (enum.Enum, BaseException)) or cls in (
            list, tuple, dict, set, frozenset):
        raise ValueError(f"blog.adapt: {cls.__qualname__} is logged as it is; "
                         "adapt an application class")
    if callable(fields):
        adapt_with(cls, fields)
        return cls
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
        raise TypeError("blog.adapt: fields must be a non-empty list of attribute names, "
                        "or a function of an instance returning a dict")
    names = tuple(fields)
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise ValueError(f"blog.adapt({cls.__qualname__}): field {n!r} is not a name")
    if len(set(names)) != len(names):
        raise ValueError(f"blog.adapt({cls.__qualname__}): a field is named twice in {names}")
    known = _known_attributes(cls)
    missing = [n for n in names if n not in known]
    if missing:
        raise ValueError(f"blog.adapt({cls.__qualname__}): no field {missing[0]!r}: the class "
                         f"has no such attribute, property, annotation or slot, and none of "
                         f"its methods sets it")
    adapt_names(cls, names)
    return cls


def _known_attributes(cls: type) -> set[str]:
    """The attribute names a class shows a trace of."""
    known = set(dir(cls))
    for c in cls.__mro__:
        known.update(c.__dict__.get("__annotations__", {}))
        slots = c.__dict__.get("__slots__", ())
        known.update((slots,) if isinstance(slots, str) else slots)
        for member in c.__dict__.values():
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            code = getattr(inspect.unwrap(member) if callable(member) else None, "__code__",
                           None)
            if code is not None:
                known.update(code.co_names)     # self.x = ... stores a name of the code
    if dataclasses.is_dataclass(cls):
        known.update(f.name for f in dataclasses.fields(cls))
    return known


__all__ = ["adapt"]
