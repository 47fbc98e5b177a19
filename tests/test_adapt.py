"""blog.adapt: an application's class logged as structured fields, read back as a
structured value (never an unpickled object), its message as str() gave it."""

from __future__ import annotations

import io
import json

import pytest

import blog
import bread


class Order:
    def __init__(self, oid: int, qty: int, price: float) -> None:
        self.id, self.qty, self.price = oid, qty, price

    def __str__(self) -> str:
        return f"Order#{self.id} {self.qty}@{self.price}"


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a, self.b = 1, [2]

    @property
    def total(self) -> int:
        return self.a + len(self.b)


class Point:
    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y


blog.adapt(Order, fields=["id", "qty", "price"])
blog.adapt(Slotted, fields=["a", "b", "total"])
blog.adapt(Point, lambda p: {"x": p.x, "y": p.y})


def test_an_adapted_class_reads_back_as_its_fields(logged):
    for i in range(3):
        logged.log.info("placed {} then {!r}", Order(i, 10, 1.5), Slotted(), p=Point(1, 2))
    events = logged.read()
    for i, ev in enumerate(events):
        order, slotted = ev.args
        assert ev.message.startswith(f"placed Order#{i} 10@1.5 then <")
        assert (order.type, order.fields) == (f"{__name__}.Order",
                                              {"id": i, "qty": 10, "price": 1.5})
        assert slotted.fields == {"a": 1, "b": [2], "total": 2}
        assert ev.fields["p"].fields == {"x": 1, "y": 2}
        assert isinstance(order, bread.DataclassValue)
    logged.consume()
    data = logged.out.getvalue()
    assert data.count(b"price") == 1        # named once per stream, not per event


def test_json_and_the_batch_columns_show_the_fields(logged):
    logged.log.info("placed {}", Order(7, 1, 2.5))
    logged.consume()
    (batch,) = bread.read_batches(io.BytesIO(logged.out.getvalue()), columns=["args"])
    args = batch["args"] if isinstance(batch, dict) else batch.column("args").to_pylist()
    assert json.loads(args[0]) == [{"$dataclass": f"{__name__}.Order",
                                    "fields": {"id": 7, "qty": 1, "price": 2.5}}]


def test_a_broken_adapted_value_never_breaks_the_call(logged):
    o = Order(1, 2, 3.0)
    del o.price                             # its field is gone: kept as its text
    blog.adapt(Point, lambda p: ["not", "a", "dict"])
    try:
        logged.log.info("a {} b {}", o, Point(0, 0))
    finally:
        blog.adapt(Point, lambda p: {"x": p.x, "y": p.y})
    (ev,) = logged.read()
    assert ev.message.startswith("a {!AttributeError: 'Order' object has no attribute "
                                  "'price'} b <test_adapt.Point object at ")
    assert type(ev.args[0]).__name__ == "OpaqueValue" and ev.args[0].type.endswith("Order")
    assert type(ev.args[1]).__name__ == "OpaqueValue"


def test_only_the_adapted_class_itself_is_adapted(logged):
    class Sub(Order):
        pass

    logged.log.info("{}", Sub(1, 1, 1.0))
    (ev,) = logged.read()
    assert type(ev.args[0]).__name__ == "OpaqueValue"      # adapt each class you log


def test_bad_adaptations_raise_clear_errors():
    with pytest.raises(ValueError, match=r"no field 'prise'"):
        blog.adapt(Order, fields=["id", "prise"])
    with pytest.raises(TypeError, match="takes a class"):
        blog.adapt(Order(1, 1, 1.0), fields=["id"])
    with pytest.raises(ValueError, match="is logged as it is"):
        blog.adapt(int, fields=["real"])
    with pytest.raises(TypeError, match="non-empty list"):
        blog.adapt(Order, fields="id")
    with pytest.raises(ValueError, match="named twice"):
        blog.adapt(Order, fields=["id", "id"])
