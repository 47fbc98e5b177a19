#!/usr/bin/env python3
"""Events lost by kill -9, with and without the crash buffer, side by side.

Each trial forks a process that logs from 4 threads as fast as it can (recording in
shared memory how many log calls of each thread have returned), SIGKILLs it at a random
moment, recovers (with the crash buffer), and counts the returned events missing from
the file. Prints the distribution of the loss per kill for both.

    python benchmarks/kill_loss.py [--trials 50] [--capacity 4194304]
"""

from __future__ import annotations

import argparse
import mmap
import os
import platform
import random
import signal
import struct
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import blog  # noqa: E402
import bread  # noqa: E402
from blog.files.crashbuf import CrashBuffer, buffer_directory  # noqa: E402
from blogstore.recovery import recover  # noqa: E402

THREADS = 4


def child(path: str, counters: mmap.mmap, capacity: int, crash: bool) -> None:
    try:
        s = blog.Session(name="kill", channel_capacity=capacity)
        stream = blog.FileOutputStream(path)
        if crash:
            s.use_crash_buffer(CrashBuffer(buffer_directory(path), stream.path, s.descriptor))
        blog.Consumer(s, stream).start()          # the defaults: 20 ms, 1 MiB
        log = s.get_logger("t")

        words = memoryview(counters).cast("q")   # one store each (pack_into zeroes first)

        def work(k: int) -> None:
            i = 0
            while True:
                log.info("w {} {}", k, i)
                i += 1
                words[k] = i
        for k in range(THREADS):
            threading.Thread(target=work, args=(k,), daemon=True).start()
        words[THREADS] = 1
        while True:
            time.sleep(1)
    finally:
        os._exit(1)


def trial(tmp: str, n: int, capacity: int, crash: bool, rng: random.Random) -> int:
    path = os.path.join(tmp, f"{'c' if crash else 'p'}{n}.blog")
    counters = mmap.mmap(-1, 8 * (THREADS + 1))
    pid = os.fork()
    if pid == 0:
        child(path, counters, capacity, crash)
    while struct.unpack_from("<q", counters, 8 * THREADS)[0] == 0:
        time.sleep(0.001)
    time.sleep(rng.uniform(0.1, 1.0))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    returned = [struct.unpack_from("<q", counters, 8 * k)[0] for k in range(THREADS)]
    if crash:
        stream = blog.FileOutputStream(path)
        try:
            recover(buffer_directory(path), stream)
        finally:
            stream.close()
    got = [0] * THREADS
    for ev in bread.read(path):
        got[ev.args[0]] += 1
    os.unlink(path)
    return sum(max(0, r - g) for r, g in zip(returned, got))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--capacity", type=int, default=4 << 20)
    args = p.parse_args()
    rng = random.Random(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; "
          f"python {platform.python_version()}; blog hot path "
          f"{'C' if blog.accel.speedups is not None else 'Python'}")
    print(f"{args.trials} kills each, 4 threads logging as fast as they can, "
          f"channel_capacity {args.capacity}, flush_interval 20 ms")
    with tempfile.TemporaryDirectory() as tmp:
        for crash in (False, True):
            lost = sorted(trial(tmp, n, args.capacity, crash, rng) for n in range(args.trials))
            pct = lambda q: lost[min(len(lost) - 1, int(q * len(lost)))]  # noqa: E731
            print(f"crash buffer {'on ' if crash else 'off'}: events lost per kill: "
                  f"min {lost[0]:,}, median {pct(0.5):,}, 90th {pct(0.9):,}, max {lost[-1]:,}; "
                  f"kills that lost something: {sum(x > 0 for x in lost)} of {len(lost)}")


if __name__ == "__main__":
    main()
