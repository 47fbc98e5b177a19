"""blogformat.typinglite: what the start-up modules use of ``typing`` at run time behaves as
``typing``'s own (a NamedTuple class as typing.NamedTuple makes it)."""

from __future__ import annotations

import pickle
import typing

import pytest

from blogformat import typinglite
from blogstore.fileset import SetFile


class Point(typinglite.NamedTuple):
    """A point."""

    x: int
    y: int = 0
    count: int = 1     # hides tuple.count, as blog.pipeline.channel's Taken does

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def moved(self, dx: int) -> Point:
        return self._replace(x=self.x + dx)


class TypedPoint(typing.NamedTuple):
    """A point."""

    x: int
    y: int = 0
    count: int = 1


def test_a_named_tuple_class_is_typings():
    p = Point(1)
    t = TypedPoint(1)
    assert p == (1, 0, 1) == t and repr(p) == "Point(x=1, y=0, count=1)"
    assert isinstance(p, tuple) and Point.__mro__[1:] == (tuple, object)
    assert Point._fields == TypedPoint._fields and Point._field_defaults == t._field_defaults
    assert p.moved(2) == Point(3, 0, 1) and p.norm1 == 1 and p.count == 1
    assert Point.__doc__ == "A point." and Point.__module__ == __name__
    assert Point.__qualname__ == "Point" and list(Point.__annotations__) == ["x", "y", "count"]
    assert pickle.loads(pickle.dumps(Point(4, 5))) == Point(4, 5)
    assert Point(y=2, x=1)._asdict() == {"x": 1, "y": 2, "count": 1}
    f = SetFile("a.blog", "a", 1, 2, False)     # one of the project's
    assert f.plain_name == "a.blog" and f._replace(pid=3).pid == 3


def test_a_named_tuple_class_refuses_what_typings_refuses():
    with pytest.raises(TypeError):
        class Bad(typinglite.NamedTuple):
            x: int = 0
            y: int
    with pytest.raises(AttributeError):
        class Worse(typinglite.NamedTuple):
            x: int

            def _asdict(self):
                return {}


def test_the_other_names_return_what_they_are_given():
    assert typinglite.cast(int, "x") == "x"
    assert typinglite.final(len) is len
    assert typinglite.dataclass_transform(frozen_default=True)(Point) is Point
    assert typinglite.Protocol is object
    assert typinglite.TYPE_CHECKING is False
