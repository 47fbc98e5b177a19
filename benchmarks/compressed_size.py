"""Bytes per event on disk: blog's file against the stdlib's text log, raw and compressed.

    python benchmarks/compressed_size.py [--events N]

The same events go to both: ``log.info("order {} filled at {} qty {}", i,
px, sym)`` and a warning every 50th, from one thread. The stdlib's log uses
a common format (``%(asctime)s %(levelname)s %(name)s %(message)s``). Each is
compressed the way blog's housekeeping compresses a closed file (gzip level 6),
and with the standard library's stronger bz2 and lzma (their defaults). blog's file
is also shown compacted as ``bread compact`` writes it, in row frames and in
columnar frames (``--columnar``, docs/format.md 5.5).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
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

    from bread.compact.compactor import Compactor
    paths = [("blog (binary)", bpath)]
    for columnar in (False, True):
        c = Compactor(d)
        c.add_file(bpath)
        path = os.path.join(d, f"compacted-{columnar}.blog")
        with open(path, "wb") as out:
            c.write(out, [], columnar)
        paths.append((f"blog compacted{', columnar' if columnar else ''}", path))
    paths.append(("stdlib logging (text)", tpath))

    n = args.events + args.events // 50
    sizes = {}
    for name, path in paths:
        with open(path, "rb") as f:
            data = f.read()
        sizes[name] = [len(data), len(gzip.compress(data, compresslevel=6, mtime=0)),
                       len(bz2.compress(data)), len(lzma.compress(data))]
    print(f"{n:,} events; bytes per event, and against the stdlib's text with the same "
          "compressor")
    print(f"{'log':<28}{'raw':>14}{'gzip':>14}{'bz2':>14}{'lzma':>14}")
    std = sizes["stdlib logging (text)"]
    for name, got in sizes.items():
        print(f"{name:<28}" + "".join(f"{x / n:>7.2f} {x / s:>6.3f}x" for x, s in zip(got, std)))


if __name__ == "__main__":
    main()
