"""What the modules of a first log call and of a first read use of ``typing`` at run time,
without importing it. By callgrind's count of a whole process: importing ``typing`` (with
the ``re`` it imports) is about 20 M instructions and making the start-up paths' 10
NamedTuple classes with it 16.5 M more; a first event took 158.5 M with them, 122 M with
this module (``python -c pass``: 38 M; ``logging``'s first event: 98 M).

Type checkers see ``typing``'s own names. At run time, ``class C(NamedTuple)`` with its
fields annotated makes a ``collections.namedtuple`` with the class's methods, as
``typing.NamedTuple`` does; ``Protocol`` and ``Any`` (which a field's annotation names:
``typing.get_type_hints`` resolves it) are ``object``; ``final`` and
``dataclass_transform(...)`` return what they decorate; ``cast`` returns its value. The
modules that use these name ``typing``'s other names in annotations only, which are
never evaluated (``from __future__ import annotations``), imported ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any as Any
    from typing import NamedTuple as NamedTuple
    from typing import Protocol as Protocol
    from typing import cast as cast
    from typing import dataclass_transform as dataclass_transform
    from typing import final as final
else:
    #: A NamedTuple class may not define these (typing's rule): namedtuple makes them.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleMeta(type):
        def __new__(mcs, name, bases, namespace):
            if namespace.get("_base_of_named_tuples"):    # NamedTuple itself
                return super().__new__(mcs, name, bases, namespace)
            if bases != (NamedTuple,):
                raise TypeError("can only inherit from a NamedTuple type")
            fields = namespace.get("__annotations__", {})
            defaults = []
            for f in fields:
                if f in namespace:
                    defaults.append(namespace[f])
                elif defaults:
                    raise TypeError(f"non-default namedtuple field {f} cannot follow "
                                    "default field(s)")
            cls = collections.namedtuple(name, list(fields), defaults=defaults,
                                         module=namespace["__module__"])
            cls.__annotations__ = dict(fields)
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in fields:
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        _base_of_named_tuples = True

    Protocol = object
    Any = object    # (a field typed Any, as get_type_hints resolves it: any object)

    def final(f):
        return f

    def cast(typ, val):
        return val

    def dataclass_transform(**kwargs):
        return final
