#!/usr/bin/env python3
"""Structured hot path: keyword fields and rich values against the positional call and the stdlib.

The table of issue 8: each call shape as its own loop (the call written out, as
in application code), its cost per call on the calling thread (best of
repeats), its ratio to blog's positional call with as many values, and the
stdlib's FileHandler beside it; then process CPU per event, end to end (calling
thread plus consumer, until ``flush()`` returns), of a mixed workload of those
calls against the stdlib doing the same. ``benchmarks/hot_path.py`` runs it
after its own tables; alone:

    python benchmarks/structured.py [--quick] [--json out.json]

The values logged (a list, a datetime, a dataclass instance...) are built once
before the loop, as an application has them before it logs them: the targets
are about what logging them costs. The rows of the issue's table that write a
literal in the call (a list, a dict, a set) are measured too, without a target:
there the literal's construction is part of the call. The exception rows raise
and catch through 10 frames in the loop, for blog and the stdlib alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import enum
import gc
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from decimal import Decimal
from typing import Any, Callable, NamedTuple
from zoneinfo import ZoneInfo

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import blog  # noqa: E402
from timedloop import timed_loop  # noqa: E402  (beside this file)

perf_ns = time.perf_counter_ns
process_ns = time.process_time_ns


class Color(enum.Enum):
    RED = 1
    GREEN = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float


@dataclasses.dataclass
class Fill:
    order_id: int
    price: float
    qty: int
    symbol: str
    venue: str
    side: str
    account: int
    urgent: bool


class Leg(NamedTuple):
    symbol: str
    qty: int


AWARE = dt.datetime(2026, 11, 26, 14, 30, 5, 123456, tzinfo=ZoneInfo("Europe/Paris"))
DATE = dt.date(2026, 11, 26)
TIME = dt.time(14, 30, 5, 123456)
DELTA = dt.timedelta(seconds=3, microseconds=250)
DEC = Decimal("101.25")
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
POINT = Point(1, 2.0)
FILL = Fill(12345, 101.25, 100, "AAPL", "XNAS", "buy", 7, False)
LEG = Leg("AAPL", 100)


def _raise(depth: int) -> None:
    if depth <= 1:
        raise ValueError("bad fill")
    _raise(depth - 1)


# --- the loops: one per call shape, the call written out (timedloop.py compiles it into the
# loop's body) ----------------------------------------------------------------------------

LEGS = [1, 2, 3]
LEGS16 = list(range(1, 17))
DICT = {"a": 1, "b": 2}
SET = {1, 2, 3}
#: The exception rows' call: raise and catch through 10 frames, then the statement given.
CATCHING = "try:\n    _raise(10)\nexcept ValueError:\n    {}"


def _loop(name: str, stmt: str, before: str = "", arg: str = "log") -> Callable[[int, Any], int]:
    """``name(n, log)``: ``stmt`` ``n`` times (after ``before``, outside the clock); wall ns."""
    return timed_loop(globals(), name, stmt, arg=arg, before=before)


#: (row, loop, values it passes (for the ratio to the positional call of as many), target
#: as a ratio to that call, or None). The targets are issue 8's.
ROWS: list[tuple[str, Callable[[int, Any], int], int, float | None]] = [
    ('log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")',
     _loop("b_positional", 'log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")'),
     3, None),
    ('log.info("order {} filled at {}", 12345, 101.25)',
     _loop("b_positional2", 'log.info("order {} filled at {}", 12345, 101.25)'), 2, None),
    ('log.info("legs {}", 12345)', _loop("b_positional1", 'log.info("legs {}", 12345)'), 1, None),
    ('log.info("started")', _loop("b_started", 'log.info("started")'), 0, None),
    ('log.info("order {oid} filled at {px}", oid=12345, px=101.25)',
     _loop("b_kw_in_format", 'log.info("order {oid} filled at {px}", oid=12345, px=101.25)'),
     2, 1.5),
    ('log.info("order filled", oid=12345, px=101.25, sym="AAPL")',
     _loop("b_kw_fields", 'log.info("order filled", oid=12345, px=101.25, sym="AAPL")'), 3, 1.5),
    ('log.info("legs {}", legs)  (a list of 3 ints)',
     _loop("b_list_built", 'log.info("legs {}", v)', "v = LEGS"), 1, 2.0),
    ('log.info("legs {}", legs)  (a list of 16 ints)',
     _loop("b_list16_built", 'log.info("legs {}", v)', "v = LEGS16"), 1, 2.0),
    ('log.info("legs {}", (1, 2, 3))', _loop("b_tuple", 'log.info("legs {}", (1, 2, 3))'), 1, 2.0),
    ('log.info("d {}", d)  (a dict of 2)',
     _loop("b_dict_built", 'log.info("d {}", v)', "v = DICT"), 1, 2.0),
    ('log.info("s {}", s)  (a set of 3)',
     _loop("b_set_built", 'log.info("s {}", v)', "v = SET"), 1, 2.0),
    ('log.info("legs {}", [1, 2, 3])  (literal built in the call)',
     _loop("b_list", 'log.info("legs {}", [1, 2, 3])'), 1, None),
    ('log.info("legs {}", [16 ints])  (literal)',
     _loop("b_list16", 'log.info("legs {}", '
                       '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])'),
     1, None),
    ('log.info("d {}", {"a": 1, "b": 2})  (literal)',
     _loop("b_dict", 'log.info("d {}", {"a": 1, "b": 2})'), 1, None),
    ('log.info("s {}", {1, 2, 3})  (literal)',
     _loop("b_set", 'log.info("s {}", {1, 2, 3})'), 1, None),
    ('log.info("at {}", aware_datetime)',
     _loop("b_datetime", 'log.info("at {}", v)', "v = AWARE"), 1, 2.0),
    ('log.info("on {}", date)', _loop("b_date", 'log.info("on {}", v)', "v = DATE"), 1, 2.0),
    ('log.info("at {}", time)', _loop("b_time", 'log.info("at {}", v)', "v = TIME"), 1, 2.0),
    ('log.info("took {}", timedelta)',
     _loop("b_timedelta", 'log.info("took {}", v)', "v = DELTA"), 1, 2.0),
    ('log.info("px {}", Decimal)', _loop("b_decimal", 'log.info("px {}", v)', "v = DEC"), 1, 2.0),
    ('log.info("id {}", UUID)', _loop("b_uuid", 'log.info("id {}", v)', "v = UID"), 1, 2.0),
    ('log.info("c {}", c)  (an Enum member)',
     _loop("b_enum", 'log.info("c {}", v)', "v = Color.RED"), 1, 2.0),
    ('log.info("c {}", Color.RED)  (the member looked up in the call)',
     _loop("b_enum_attr", 'log.info("c {}", Color.RED)'), 1, None),
    ('log.info("p {}", Point(1, 2.0))  (dataclass)',
     _loop("b_dataclass", 'log.info("p {}", v)', "v = POINT"), 1, 3.0),
    ('log.info("f {}", Fill(8 fields))  (dataclass)',
     _loop("b_dataclass8", 'log.info("f {}", v)', "v = FILL"), 1, 3.0),
    ('log.info("leg {}", Leg("AAPL", 100))  (NamedTuple)',
     _loop("b_namedtuple", 'log.info("leg {}", v)', "v = LEG"), 1, 3.0),
    ('log.exception("boom"), 10-frame traceback',
     _loop("b_exception", CATCHING.format('log.exception("boom")')), 1, None),
]
s_positional = _loop("s_positional",
                     'lg.info("order %s filled at %s qty %s", 12345, 101.25, "AAPL")', arg="lg")
s_exception = _loop("s_exception", CATCHING.format('lg.exception("boom")'), arg="lg")
raise_only = _loop("raise_only", CATCHING.format("pass"), arg="_")
STDLIB = "stdlib FileHandler: logger.info(%-format, 3 values)"
STDLIB_EXC = "stdlib FileHandler: logger.exception, 10-frame traceback"
RAISE = "(raise and catch through 10 frames alone)"


#: The mixed workload, one round: blog's calls beside the stdlib's doing the same.
MIXED = [
    ('log.info("order {} filled at {} qty {}", 12345, 101.25, "AAPL")',
     'lg.info("order %s filled at %s qty %s", 12345, 101.25, "AAPL")'),
    ('log.info("order filled", oid=12345, px=101.25, sym="AAPL")',
     'lg.info("order filled oid=%s px=%s sym=%s", 12345, 101.25, "AAPL")'),
    ('log.info("legs {}", [1, 2, 3])', 'lg.info("legs %s", [1, 2, 3])'),
    ('log.info("d {}", {"a": 1, "b": 2})', 'lg.info("d %s", {"a": 1, "b": 2})'),
    ('log.info("at {}", AWARE)', 'lg.info("at %s", AWARE)'),
    ('log.info("c {}", Color.RED)', 'lg.info("c %s", Color.RED)'),
    ('log.info("p {}", POINT)', 'lg.info("p %s", POINT)'),
    ('log.info("leg {}", LEG)', 'lg.info("leg %s", LEG)'),
    (CATCHING.format('log.exception("boom")'), CATCHING.format('lg.exception("boom")')),
]
MIXED_EVENTS = len(MIXED)
#: ``n`` rounds of the mixed workload (the time they return is not used: process CPU is).
mixed_blog = _loop("mixed_blog", "\n".join(b for b, _ in MIXED))
mixed_stdlib = _loop("mixed_stdlib", "\n".join(s for _, s in MIXED), arg="lg")


def _stdlib(path: str) -> tuple[logging.Logger, logging.Handler]:
    lg = logging.getLogger("bench.structured")
    lg.handlers.clear()
    lg.propagate = False
    lg.setLevel(logging.INFO)
    h = logging.FileHandler(path, mode="w", encoding="utf-8")
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    lg.addHandler(h)
    return lg, h


def run(cfg: dict, tmp: str) -> dict:
    """Measure every row and the mixed workload; the figures as a dict."""
    path = os.path.join(tmp, "structured.blog")
    blog.basic_config(path, mode="wb")
    log = blog.get_logger("bench")
    lg, h = _stdlib(os.path.join(tmp, "structured.log"))
    cases: list[tuple[str, Callable, Any, int]] = [
        (name, loop, log, cfg["n"]) for name, loop, _, _ in ROWS]
    cases += [(STDLIB, s_positional, lg, cfg["n_stdlib"]),
              (STDLIB_EXC, s_exception, lg, cfg["n_stdlib"]),
              (RAISE, raise_only, None, cfg["n_stdlib"])]
    times: dict[str, list[float]] = {name: [] for name, *_ in cases}
    for _name, loop, obj, _ in cases:
        loop(500, obj)                    # registration, specialization
    blog.flush()
    for _ in range(cfg["repeats"]):       # round-robin: a slow spell falls on every row
        for name, loop, obj, n in cases:
            gc.collect()
            times[name].append(loop(n, obj) / n)
            blog.flush()
            h.flush()
    per_call = {name: {"ns_per_call": min(t), "all": [round(x, 1) for x in t]}
                for name, t in times.items()}

    e2e: dict[str, list[float]] = {"blog": [], "stdlib": []}
    for _ in range(cfg["e2e_repeats"]):
        for who, fn, obj, flush, m in (("blog", mixed_blog, log, blog.flush, cfg["n_mixed"]),
                                       ("stdlib", mixed_stdlib, lg, h.flush,
                                        cfg["n_mixed_stdlib"])):
            gc.collect()
            c0 = process_ns()
            fn(m, obj)
            flush()
            e2e[who].append((process_ns() - c0) / (m * MIXED_EVENTS))
    h.close()
    lg.removeHandler(h)
    blog.shutdown()
    return {"per_call": per_call,
            "e2e": {k: {"cpu_ns_per_event": min(v), "all": [round(x, 1) for x in v]}
                    for k, v in e2e.items()}}


def report(res: dict) -> list[dict]:
    """Print the table and the targets; return the targets."""
    pc = res["per_call"]
    std = pc[STDLIB]["ns_per_call"]
    by_values = {k: pc[ROWS[i][0]]["ns_per_call"] for i, k in ((0, 3), (1, 2), (2, 1))}
    by_values[0] = pc[ROWS[3][0]]["ns_per_call"]
    w = max(len(r[0]) for r in ROWS) + 2
    print()
    print("Structured calls: ns per call on the calling thread (best of repeats, loop included)")
    print()
    print(f"{'call':<{w}}{'ns/call':>10}{'x positional':>14}{'x stdlib':>10}{'target':>9}")
    print("-" * (w + 43))
    targets = []
    for name, _, nvalues, target in ROWS:
        x = pc[name]["ns_per_call"]
        pos = by_values.get(nvalues, by_values[1])
        print(f"{name:<{w}}{x:>10,.1f}{x / pos:>13.2f}x{x / std:>9.3f}x"
              f"{'' if target is None else f'<= {target:.1f}x':>9}")
        if target is not None:
            targets.append({"target": f"{name} <= {target}x positional",
                            "pass": x / pos <= target,
                            "detail": f"{x:,.1f} ns vs {pos:,.1f} ns: {x / pos:.2f}x"})
    for name in (STDLIB, STDLIB_EXC, RAISE):
        x = pc[name]["ns_per_call"]
        print(f"{name:<{w}}{x:>10,.1f}{'':>14}{x / std:>9.3f}x")
    p = pc[ROWS[0][0]]["ns_per_call"]
    targets.insert(0, {"target": "positional call <= 0.01x the stdlib FileHandler",
                       "pass": p / std <= 0.01,
                       "detail": f"{p:,.1f} ns vs {std:,.1f} ns: {p / std:.4f}x"})
    exc, std_exc = pc[ROWS[-1][0]]["ns_per_call"], pc[STDLIB_EXC]["ns_per_call"]
    targets.append({"target": "log.exception (10 frames) <= 0.1x the stdlib's logger.exception",
                    "pass": exc / std_exc <= 0.1,
                    "detail": f"{exc:,.1f} ns vs {std_exc:,.1f} ns: {exc / std_exc:.3f}x "
                              f"(raising and catching alone: {pc[RAISE]['ns_per_call']:,.1f} ns)"})
    e = res["e2e"]
    b, s = e["blog"]["cpu_ns_per_event"], e["stdlib"]["cpu_ns_per_event"]
    print()
    print(f"Mixed workload ({MIXED_EVENTS} calls of the rows above per round), process CPU per "
          f"event until flush() returns: blog {b:,.1f} ns, stdlib {s:,.1f} ns ({b / s:.3f}x)")
    targets.append({"target": "mixed workload end-to-end CPU <= 0.05x the stdlib's",
                    "pass": b / s <= 0.05, "detail": f"{b:,.1f} ns vs {s:,.1f} ns: {b / s:.3f}x"})
    print()
    print("Targets (issue 8)")
    print()
    for t in targets:
        print(f"  [{'PASS' if t['pass'] else 'FAIL'}] {t['target']}: {t['detail']}")
    return targets


def config(quick: bool) -> dict:
    if quick:
        return dict(n=5_000, n_stdlib=1_000, repeats=3, n_mixed=2_000, n_mixed_stdlib=300,
                    e2e_repeats=1)
    return dict(n=30_000, n_stdlib=3_000, repeats=7, n_mixed=20_000, n_mixed_stdlib=2_000,
                e2e_repeats=3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N: a smoke run")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    args = ap.parse_args(argv)
    cfg = config(args.quick)
    print(f"structured benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()}; config {cfg}")
    with tempfile.TemporaryDirectory(prefix="blog-structured-") as tmp:
        res = run(cfg, tmp)
    res["targets"] = report(res)
    res["config"] = cfg
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
