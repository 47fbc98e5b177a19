"""Bytes per event on disk: blog's file against the stdlib's text log, raw and gzip-compressed.

    python benchmarks/compressed_size.py [--events N]

The same events go to both: ``log.info("order {} filled at {} qty {}", i,
px, sym)`` and a warning every 50th, from one thread. The stdlib's log uses
a common format (``%(asctime)s %(levelname)s %(name)s %(message)s``). Both are
compressed the way blog's housekeeping compresses a closed file (gzip level 6).
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import blog  # noqa: E402


def gz_size(path: str) -> int:
    with open(path, "rb") as f:
        return len(gzip.compress(f.read(), compresslevel=6, mtime=0))


def events(n: int):
    rng = random.Random(7)
    syms = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA"]
    for i in range(n):
        yield i, round(100 + rng.random() * 50, 2), rng.choice(syms), i % 50 == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    args = p.parse_args()
    d = tempfile.mkdtemp()
    bpath, tpath = os.path.join(d, "b.blog"), os.path.join(d, "t.log")

    blog.basic_config(bpath, mode="wb")
    log = blog.get_logger("orders")
    for i, px, sym, warn in events(args.events):
        log.info("order {} filled at {} qty {}", i, px, sym)
        if warn:
            log.warning("order {} slow fill {}", i, px)
    blog.shutdown()

    std = logging.getLogger("orders")
    std.propagate = False
    h = logging.FileHandler(tpath, mode="w")
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    std.addHandler(h)
    std.setLevel(logging.INFO)
    for i, px, sym, warn in events(args.events):
        std.info("order %s filled at %s qty %s", i, px, sym)
        if warn:
            std.warning("order %s slow fill %s", i, px)
    h.close()

    n = args.events + args.events // 50
    rows = [("blog (binary)", os.path.getsize(bpath), gz_size(bpath)),
            ("stdlib logging (text)", os.path.getsize(tpath), gz_size(tpath))]
    print(f"{n:,} events")
    print(f"{'log':<24}{'bytes/event':>14}{'gzip bytes/event':>18}")
    for name, raw, gz in rows:
        print(f"{name:<24}{raw / n:>14.1f}{gz / n:>18.1f}")
    print(f"blog / stdlib: raw {rows[0][1] / rows[1][1]:.2f}x, "
          f"compressed {rows[0][2] / rows[1][2]:.2f}x")


if __name__ == "__main__":
    main()
