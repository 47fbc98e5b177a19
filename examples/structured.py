"""Structured logging with blog: keyword fields, rich values, exceptions, read back as values.

    python examples/structured.py [out.blog]

Each kind of call below costs about what a call with plain values costs (the C
fast path encodes lists, dicts, sets, datetimes, enum members, dataclasses and
named tuples itself; docs/performance.md, "Structured calls"), and each reads
back as a value, with the message exactly as the call would have printed it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import sys
import tempfile
from decimal import Decimal
from typing import NamedTuple
from zoneinfo import ZoneInfo

import blog
import bread


class Side(enum.Enum):
    BUY = "buy"
    SELL = "sell"


@dataclasses.dataclass
class Fill:
    order_id: int
    px: Decimal
    qty: int
    side: Side
    account: str = dataclasses.field(default="acct-7", repr=False)   # kept, not shown


class Leg(NamedTuple):
    symbol: str
    qty: int


def settle(fill: Fill) -> None:
    if fill.qty > 100:
        raise ValueError(f"order {fill.order_id}: qty {fill.qty} over the limit")


def main(path: str) -> None:
    blog.basic_config(path, mode="wb")
    log = blog.get_logger("orders")
    paris = ZoneInfo("Europe/Paris")
    fill = Fill(12345, Decimal("101.25"), 150, Side.BUY)

    log.info("order filled", order_id=fill.order_id, px=fill.px, venue="XNAS")  # fields only
    log.info("order {oid} filled at {px}", oid=fill.order_id, px=fill.px)     # in the format
    log.info("fill {} legs {}", fill, [Leg("AAPL", 100), Leg("MSFT", 50)])
    log.info("tags {} at {:%H:%M %Z}", {"urgent", "retail"},
             dt.datetime(2026, 11, 26, 14, 30, tzinfo=paris))
    try:
        settle(fill)
    except ValueError:
        log.exception("settlement failed for {}", fill.order_id)
    blog.shutdown()

    for ev in bread.read(path):
        print(ev.message, {k: v for k, v in ev.fields.items() if k != "exception"})
        exc = ev.fields.get("exception")
        if exc is not None:      # kept as frames; rendered as Python prints it
            print(exc.traceback, end="")
            print("frames:", [f[2] for f in exc.frames])
        for v in ev.args:
            if isinstance(v, bread.DataclassValue):
                print("  a", v.type, "with fields", v.fields)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mktemp(suffix=".blog"))
