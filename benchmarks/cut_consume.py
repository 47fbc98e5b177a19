#!/usr/bin/env python3
"""The consumer's CPU time with a crash buffer into a size-rotated set: consumes that fit
the file, and consumes cut between files (issue 26). Prints seconds of consumer thread
CPU time (``time.thread_time`` around ``Session.consume``) for each.

    python benchmarks/cut_consume.py [--no-crash-buffer]

Run it from two checkouts in turn (PYTHONPATH=<checkout>) and compare the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import blog  # noqa: E402
from blog.files.crashbuf import CrashBuffer, buffer_directory  # noqa: E402


def run(rotate_bytes: int, per: int, consumes: int, crash: bool) -> float:
    """Consumer CPU seconds of ``consumes`` consumes of ``per`` events each."""
    d = tempfile.mkdtemp()
    try:
        path = os.path.join(d, "app.blog")
        s = blog.Session(name="bench", channel_capacity=1 << 24)
        rf = blog.RotatingFile(path, rotate_bytes=rotate_bytes)
        if crash:
            s.use_crash_buffer(CrashBuffer(buffer_directory(path), rf.path, s.descriptor))
        log = s.get_logger("t")
        spent = 0.0
        for _ in range(consumes):
            for i in range(per):
                log.info("order {} filled at {}", i, 101.25)
            t = time.thread_time()
            s.consume(rf)
            spent += time.thread_time() - t
        s.use_crash_buffer(None)
        s.finish(rf)
        rf.close()
        return spent
    finally:
        shutil.rmtree(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-crash-buffer", action="store_true")
    crash = not ap.parse_args().no_crash_buffer
    fit = run(64 << 20, 1000, 1000, crash)
    cut = run(256 << 10, 20000, 10, crash)
    print(f"fit {fit:.4f} s (1,000 consumes of 1,000 events)  "
          f"cut {cut:.4f} s (10 consumes of 20,000 events, 256 KiB files)")


if __name__ == "__main__":
    main()
