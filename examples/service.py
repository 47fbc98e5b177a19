"""A long-running service: a master and forked workers, with rotation, retention and compression.

    python examples/service.py logs/ [seconds]
    bread -s logs/                 # every process's set, merged by time
    bread stats logs/              # counts, and which files were closed cleanly
    bread --since 10s logs/        # the manifest skips the files before the window
    bread compact logs/ --older-than 1s   # merged into one sorted file per day

The master configures logging once; each worker it forks goes on logging into
a file set of its own (``logs/service.<time>.pid<N>.blog``) with the same
options. Files switch every 64 KiB or every 10 seconds, whichever comes
first; closed files are gzipped in the background and only the newest 20 of
them are kept. The master's housekeeping also compacts closed files older than a
day (``compact="1d"``: ``bread compact logs/ --older-than 1d --columnar`` in a child
process, at most hourly; the workers leave it to the master). A real service would
rotate at ``64 << 20`` bytes and ``rotate_at="00:00"`` in its zone, and keep days
rather than files.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time

import blog


def worker(n: int, until: float) -> None:
    log = blog.get_logger("worker")
    rng = random.Random(n)
    log.info("worker {} started", n)
    served = 0
    while time.time() < until:
        order = rng.randrange(1_000_000)
        latency_us = rng.expovariate(1 / 250)
        log.info("served order {} in {} us", order, round(latency_us, 1), worker=n)
        if latency_us > 1500:
            log.warning("slow order {}: {} us", order, round(latency_us, 1))
        served += 1
        time.sleep(0.0005)
    log.info("worker {} served {} orders", n, served)
    blog.shutdown()      # a forked worker that leaves with os._exit flushes first


def main(directory: str, seconds: float) -> None:
    blog.basic_config(os.path.join(directory, "service.blog"),
                      rotate_bytes=64 << 10, rotate_every="10s", tz="UTC",
                      keep_files=20, compress=True, compact="1d")
    log = blog.get_logger("master")
    until = time.time() + seconds
    pids = []
    for n in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                worker(n, until)
            finally:
                os._exit(0)
        pids.append(pid)
        log.info("forked worker {} as pid {}", n, pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        log.info("worker pid {} exited with status {}", pid, os.waitstatus_to_exitcode(status))
    log.info("master done")
    blog.shutdown()
    logs = [n for n in os.listdir(directory) if n.startswith("service.")]
    print(f"wrote {len(logs)} log files in {directory}; read them with: bread -s {directory}")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main(sys.argv[1] if len(sys.argv) > 1 else "logs",
         float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
