"""A seeded soak of a file set's whole life: services (each a master and forked workers)
write one rotated set with every housekeeping option on, while processes are killed
(SIGKILL) at random moments and restarted; at the end every event whose log call returned
is found exactly once.

    python tests/lifecycle_soak.py [--seconds 300] [--seed N] [--dir DIR]

(``make soak`` runs it for ``SOAK_SECONDS``; tests/test_lifecycle_soak.py runs it for a
few seconds on each hot path.) The set is ``logs/app.blog`` with ``rotate_bytes``,
``compress=True``, retention (``keep_files``, ``keep_bytes`` or ``keep_days`` of seconds),
``compact=`` (a second's age: compactions run all the time), ``crash_buffer=True`` and an
``on_close`` hook that copies each file to ``remote/`` (under its own name: a second
delivery replaces the first with the same bytes) and notes its digest in
``remote/journal``. Each logging thread has
a slot in a shared counters file and logs ``s SLOT SEQ PAD`` with SEQ counting from 0,
storing after each call how many of its calls have returned.

Among the moments chosen (seeded) by the driver: a service started, killed while it
starts (its basic_config recovering what the dead left), killed whole, stopped by
SIGTERM, let run to its clean end; a worker killed (its master forks another); a process
killed while its hook ships a file; ``bread --recover`` and a cron ``bread compact
--shipped`` run to their end or killed at a random moment. Every kill waits for the
process to say it is ready ("start" before its basic_config, a worker's pid once forked).

The accounting: a file leaves the directory only by compaction (which takes only what was
shipped) or retention (which keeps what was not shipped), so once a last clean start has
recovered every buffer and shipped every closed file, ``remote/`` holds each original file
ever closed, and so each event once. The check: every slot's SEQs in ``remote/`` are
0..n-1, each once, with n the calls returned (or one more: the call a kill cut short);
what the directory still holds (originals and compacted files, read as bread reads the
directory) holds no event twice and none that ``remote/`` lacks; every original still
there was shipped with its bytes; each name was shipped with one content; no buffer is
left; no file holds more than rotate_bytes before its last frame; no event is damaged; no
child said a traceback or a failure on stderr. ``TOLERATE_*`` below names a known bug
whose cases are counted in the stats instead, until its fix lands.

The same seed gives the same options and the same random draws; what a draw does depends
on what runs at that moment, so a replay takes close to the same path, not exactly it.
The actions (with the pids) are noted in DIR/actions, each child's stderr in DIR/stderr/.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import itertools
import json
import mmap
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

SLOTS_PER_SERVICE = 64          # logging threads of one service (master, workers, respawns)
MAX_SERVICES = 4096
FLAGS = SLOTS_PER_SERVICE * MAX_SERVICES   # then one word per slot: a hook ships meanwhile
PAD = "x" * 400
STEM = "app"
#: How long the last start waits for its housekeeping to ship what is left, at most.
LAST_DRAIN = 600


# --- the service: a master and its forked workers -------------------------------------------


def _counters(path: str) -> memoryview:
    with open(path, "r+b") as f:
        return memoryview(mmap.mmap(f.fileno(), 0)).cast("q")


class Ship:
    """The on_close hook: a copy of the file in ``remote/`` under its name (written aside,
    then renamed: a copy cut short is never there), its digest noted in the journal first;
    the word ``FLAGS + me`` holds the shipping pid meanwhile (the driver aims kills at it)."""

    def __init__(self, remote: str, words: memoryview, latency: float) -> None:
        self.remote = remote
        self.words = words
        self.latency = latency
        self.me = 0            # the slot of the process (set again in a forked worker)

    def __call__(self, path: str) -> None:
        self.words[FLAGS + self.me] = os.getpid()
        try:
            with open(path, "rb") as f:
                data = f.read()
            name = os.path.basename(path)
            tmp = os.path.join(self.remote, f".{name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            line = f"{name} {len(data)} {hashlib.sha256(data).hexdigest()} {os.getpid()}\n"
            fd = os.open(os.path.join(self.remote, "journal"),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
            time.sleep(random.uniform(0, self.latency))     # the upload's round trips
            os.replace(tmp, os.path.join(self.remote, name))
        finally:
            self.words[FLAGS + self.me] = 0


def _log_bursts(log: Any, words: memoryview, slot: int, until: float, rate: float,
                master: int | None, rng: random.Random) -> None:
    """Log ``s SLOT SEQ PAD`` in bursts until ``until`` (wall time), storing after each
    call how many returned; a worker whose master is gone (``master``) kills itself."""
    seq = 0
    while time.time() < until:
        if master is not None and os.getppid() != master:
            os.kill(os.getpid(), signal.SIGKILL)
        seq = _burst(log, words, slot, seq, rng)
        time.sleep(rng.expovariate(rate / 20))


def _burst(log: Any, words: memoryview, slot: int, seq: int, rng: random.Random) -> int:
    """A few events (now and then a thousand: a consume cut between files, channels that
    hold much at a kill) from ``seq`` on; the next seq."""
    for _ in range(rng.randrange(1, 40) if rng.random() > 0.03 else rng.randrange(200, 1500)):
        log.info("s {} {} {}", slot, seq, PAD[:rng.randrange(0, 120)])
        seq += 1
        words[slot] = seq
    return seq


def service(cfg: dict) -> None:
    """A master: basic_config of the set, ``workers`` forked workers of ``threads`` logging
    threads each (one forked again when one dies), its own logging on the main thread until
    ``until``; commands on stdin ("kill PID": SIGKILL a worker not yet reaped; "term":
    SIGTERM to the workers and itself). Says "start", "worker PID SLOTS...", "ready",
    "gone PID" (a worker reaped), "done". Workers are reaped by pid: the compaction children
    blog starts are blog's to wait for."""
    import blog
    print("start", flush=True)
    words = _counters(cfg["counters"])
    rng = random.Random(cfg["seed"])
    hook = Ship(cfg["remote"], words, cfg["latency"])
    first = cfg["slot"]
    hook.me = first
    compact = (None if cfg["compact"] is None else blog.Compaction(**cfg["compact"]))
    blog.basic_config(cfg["path"], rotate_bytes=cfg["rotate_bytes"], compress=True,
                      crash_buffer=True, on_close=hook, compact=compact,
                      channel_capacity=cfg["capacity"], flush_interval=cfg["flush"],
                      **cfg["retention"])
    log = blog.get_logger("soak")
    until = time.time() + cfg["life"]       # from now: a start may take long under load
    lock = threading.Lock()
    workers: dict[int, int] = {}
    slots = iter(range(first + 1, first + SLOTS_PER_SERVICE))
    master = os.getpid()

    def spawn() -> None:
        mine = list(itertools.islice(slots, cfg["threads"]))
        if len(mine) < cfg["threads"]:
            return
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                hook.me = mine[0]
                ts = [threading.Thread(target=_log_bursts, args=(
                    log, words, s, until, cfg["rate"], master, random.Random(s)))
                    for s in mine]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                blog.shutdown()
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        workers[pid] = mine[0]
        print(f"worker {pid} {' '.join(map(str, mine))}", flush=True)

    def commands() -> None:
        for line in sys.stdin:
            what, *arg = line.split()
            with lock:
                if what == "kill" and int(arg[0]) in workers:
                    os.kill(int(arg[0]), signal.SIGKILL)
                elif what == "term":
                    for pid in workers:
                        os.kill(pid, signal.SIGTERM)
                    os.kill(os.getpid(), signal.SIGTERM)

    def reap() -> list[int]:
        """The workers that ended, reaped (under ``lock``: a pid is killed only before)."""
        gone = [pid for pid in list(workers) if os.waitpid(pid, os.WNOHANG)[0] == pid]
        for pid in gone:
            del workers[pid]
        return gone

    if cfg.get("drain"):
        _drain(cfg["path"], cfg["remote"], cfg["drain"])

    with lock:
        for _ in range(cfg["workers"]):
            spawn()
    threading.Thread(target=commands, daemon=True).start()
    print("ready", flush=True)
    seq = 0
    while time.time() < until:
        seq = _burst(log, words, first, seq, rng)
        time.sleep(rng.expovariate(cfg["rate"] / 20))
        with lock:
            for pid in reap():
                print(f"gone {pid}", flush=True)
                if time.time() < until:
                    spawn()
    while True:
        with lock:
            reap()
            if not workers:
                break
        time.sleep(0.01)
    print("done", flush=True)


def _drain(path: str, remote: str, seconds: float) -> None:
    """Wait until every file of the set but the one being written is in ``remote``
    (``seconds`` at most): its housekeeping ships the backlog."""
    from blogstore.fileset import members, split_base
    directory, stem = split_base(path)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        there = set(os.listdir(remote))
        if sum(f.name not in there for f in members(directory, stem)) <= 1:
            return
        time.sleep(0.1)


# --- the driver ------------------------------------------------------------------------------


@dataclass
class Service:
    """A service the driver started: its master's Popen and what it said."""

    n: int
    popen: subprocess.Popen
    slot: int
    started: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    workers: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    killed: bool = False         # a SIGKILL or SIGTERM was sent
    slots_of: dict[int, list[int]] = field(default_factory=dict)   # a worker's, by pid

    def listen(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            what, *arg = line.split()
            with self.lock:
                if what == "start":
                    self.started.set()
                elif what == "ready":
                    self.ready.set()
                elif what == "worker":
                    self.workers.add(int(arg[0]))
                    self.slots_of[int(arg[0])] = [int(a) for a in arg[1:]]
                elif what == "gone":
                    self.workers.discard(int(arg[0]))
        self.popen.stdout.close()
        self.started.set()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tell(self, line: str) -> None:
        """A command to the master (it may be gone: then nothing)."""
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.write(line + "\n")
            self.popen.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def kill(self) -> None:
        """SIGKILL the master (through Popen: never a pid it reaped); its workers follow."""
        self.killed = True
        if self.popen.poll() is None:
            self.popen.kill()


class Failed(AssertionError):
    """What the soak found wrong (or a child that would not start or end)."""


class Soak:
    """One run: ``run()`` drives the services for ``seconds``, ends them, makes a last clean
    start and checks (module docstring); ``stats`` says what happened."""

    def __init__(self, root: str, seed: int, seconds: float, *, services: int | None = None,
                 quiet: bool = True) -> None:
        self.root = root
        self.seed = seed
        self.seconds = seconds
        self.rng = random.Random(seed)
        rng = self.rng
        self.logs = os.path.join(root, "logs")
        self.path = os.path.join(self.logs, STEM + ".blog")
        self.remote = os.path.join(root, "remote")
        self.errs = os.path.join(root, "stderr")
        self.counters = os.path.join(root, "counters")
        for d in (self.logs, self.remote, self.errs):
            os.makedirs(d, exist_ok=True)
        with open(self.counters, "wb") as f:
            f.truncate(8 * 2 * FLAGS)
        self.words = _counters(self.counters)
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.services = services or rng.choice([2, 2, 3])
        self.options = dict(
            rotate_bytes=rng.choice([8 << 10, 16 << 10, 48 << 10]),
            retention=rng.choice([{"keep_files": 2}, {"keep_files": 6},
                                  {"keep_bytes": 64 << 10}, {"keep_files": 30},
                                  {"keep_days": 3 / 86400, "keep_files": 10}]),
            compact=rng.choice([None, dict(older_than=1, period=1, every=1, timeout=120),
                                dict(older_than=1, period=60, every=1, timeout=120),
                                dict(older_than=2, period=86400, every=2, timeout=120,
                                     columnar=False)]),
            capacity=rng.choice([64 << 10, 256 << 10]),
            flush=rng.choice([0.005, 0.02]),
            latency=rng.choice([0.0, 0.005, 0.02]),
            rate=rng.choice([300.0, 1000.0]))
        self.running: list[Service] = []
        self.all: list[Service] = []
        self.started = 0
        self.stats: dict[str, Any] = {k: 0 for k in (
            "services", "killed while starting", "killed", "terminated", "ended",
            "workers killed", "killed while shipping", "recoveries", "recoveries killed",
            "compactions", "compactions killed", "lost without a crash buffer (known bug)")}
        self.alive = os.path.join(root, "alive")
        open(self.alive, "wb").close()

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def count(self, what: str, detail: str = "") -> None:
        """One more ``what`` in the stats, noted with ``detail`` in the actions file."""
        self.stats[what] += 1
        self.note(f"{what} {detail}")

    def note(self, text: str) -> None:
        with open(os.path.join(self.root, "actions"), "a") as f:
            f.write(f"{time.monotonic() - self.t0:8.3f} {text}\n")

    # --- the children ---

    def _child(self, name: str, argv: list[str], **kw: Any) -> subprocess.Popen:
        from helpers import python_child
        err = open(os.path.join(self.errs, name), "wb")
        try:
            return subprocess.Popen(python_child(*argv), stderr=err, text=True, **kw)
        finally:
            err.close()

    def start_service(self) -> Service:
        n = self.started
        self.started += 1
        if n >= MAX_SERVICES:
            raise Failed("more services than the counters file has slots for")
        o = self.options
        cfg = dict(path=self.path, remote=self.remote, counters=self.counters,
                   slot=n * SLOTS_PER_SERVICE, seed=self.rng.randrange(1 << 30),
                   workers=self.rng.choice([0, 1, 2]), threads=self.rng.choice([1, 2]),
                   life=self.rng.uniform(1, max(2.0, self.seconds / 3)),
                   rotate_bytes=o["rotate_bytes"], retention=o["retention"],
                   compact=o["compact"], capacity=o["capacity"], flush=o["flush"],
                   latency=o["latency"], rate=o["rate"])
        p = self._child(f"service-{n}", ["-c", _SERVICE, os.path.abspath(__file__),
                                         json.dumps(cfg), self.alive],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        s = Service(n, p, cfg["slot"])
        threading.Thread(target=s.listen, daemon=True).start()
        self.running.append(s)
        self.all.append(s)
        self.count("services", f"{n} pid {p.pid}")
        return s

    def _tool(self, name: str, args: list[str]) -> subprocess.Popen:
        """``bread ARGS`` in a child that says "go" first."""
        code = ("import sys; print('go', flush=True); from bread.cli import main; "
                f"sys.exit(main({args!r}))")
        return self._child(name, ["-c", code], stdout=subprocess.PIPE)

    def run_tool(self, kind: str, args: list[str], kill: bool) -> None:
        """``bread ARGS`` (a ``kind``: recovery, compaction) to its end, or SIGKILLed at a
        random moment after it said "go". A recovery may find no log to open: no file of
        the set is there (none made yet, or all compacted)."""
        from blogstore.fileset import members
        empty = not members(self.logs, STEM)
        plural = {"recovery": "recoveries", "compaction": "compactions"}[kind]
        n = self.stats[plural] + self.stats[plural + " killed"]
        p = self._tool(f"{kind}-{n}", args)
        assert p.stdout is not None
        if p.stdout.readline().strip() != "go":
            raise Failed(f"{kind} {n} did not start")
        if kill:
            time.sleep(self.rng.uniform(0, 0.3))
            p.kill()
        try:
            p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise Failed(f"{kind} {n} ran for 2 minutes")
        self.count(plural + (" killed" if kill and p.returncode == -signal.SIGKILL else ""),
                   f"pid {p.pid} exit {p.returncode} {' '.join(args)}")
        allowed = {"compaction": (2, 3), "recovery": (2,) if empty or not members(
            self.logs, STEM) else ()}[kind]
        if p.returncode not in (0, -signal.SIGKILL, *allowed):
            raise Failed(f"{kind} {n} exited {p.returncode}: "
                         + open(os.path.join(self.errs, f"{kind}-{n}"), errors="replace").read())

    def recovery_args(self) -> list[str]:
        return ["--recover", self.path]

    def compaction_args(self) -> list[str]:
        a = ["compact", self.logs, "--set", STEM, "--older-than", "1s", "--shipped",
             "--period", self.rng.choice(["1s", "1m", "1d"])]
        return a + (["--columnar"] if self.rng.random() < 0.5 else [])

    # --- the moments ---

    def step(self) -> None:
        """One moment: a random action among those that apply now."""
        rng = self.rng
        ended = [s for s in self.running if not s.alive()]
        for s in ended:
            self.gone(s)
        self.running = [s for s in self.running if s not in ended]
        ready = [s for s in self.running if s.ready.is_set() and not s.killed]
        with_workers = [s for s in ready if s.workers]
        if len(self.running) < self.services:
            s = self.start_service()
            if rng.random() < 0.15:
                self._wait(s.started, "start")
                time.sleep(rng.uniform(0, 0.4))
                s.kill()
                self.count("killed while starting", f"{s.n} pid {s.popen.pid}")
            return
        actions = ["wait"] * 4 + ["recover", "recover killed", "compact", "compact killed"]
        if ready:
            actions += ["kill", "kill", "term", "ship"]
        if with_workers:
            actions += ["worker", "worker"]
        what = rng.choice(actions)
        if what == "wait":
            time.sleep(rng.uniform(0, 0.3))
        elif what.startswith("recover"):
            self.run_tool("recovery", self.recovery_args(), what.endswith("killed"))
        elif what.startswith("compact"):
            self.run_tool("compaction", self.compaction_args(), what.endswith("killed"))
        elif what == "kill":
            s = rng.choice(ready)
            s.kill()
            self.count("killed", f"{s.n} pid {s.popen.pid} workers {sorted(s.workers)}")
        elif what == "term":
            s = rng.choice(ready)
            s.tell("term")
            s.killed = True
            self.count("terminated", f"{s.n} pid {s.popen.pid} workers {sorted(s.workers)}")
        elif what == "worker":
            s = rng.choice(with_workers)
            with s.lock:
                pid = rng.choice(sorted(s.workers))
            s.tell(f"kill {pid}")
            self.count("workers killed", f"{s.n} pid {pid}")
        elif what == "ship":
            self.kill_shipping(ready)

    def gone(self, s: Service) -> None:
        """Note how a service ended; a clean end counts as "ended"."""
        if s.popen.stdin is not None:
            try:
                s.popen.stdin.close()
            except OSError:
                pass
        if s.popen.returncode == 0:
            self.count("ended", f"{s.n} pid {s.popen.pid}")
        else:
            self.note(f"{s.n} pid {s.popen.pid} exited {s.popen.returncode}")

    def kill_shipping(self, ready: list[Service]) -> None:
        """Wait up to a second for a hook shipping in a service's master or worker; kill
        that process."""
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            for s in ready:
                for slot in range(s.slot, s.slot + SLOTS_PER_SERVICE):
                    pid = self.words[FLAGS + slot]
                    if pid == 0:
                        continue
                    with s.lock:
                        worker = pid in s.workers     # (a flag a killed one left: not)
                    if pid == s.popen.pid and s.alive():
                        s.kill()
                    elif worker:
                        s.tell(f"kill {pid}")      # (only if it is its worker, not reaped)
                    else:
                        continue
                    self.count("killed while shipping", f"{s.n} pid {pid}")
                    return
            time.sleep(0.002)

    def _wait(self, event: threading.Event, what: str) -> None:
        if not event.wait(120):
            raise Failed(f"a service did not say {what!r} in 2 minutes")

    # --- the end ---

    def run(self) -> dict[str, Any]:
        """Drive for ``seconds`` from the first event logged (a loaded machine may take
        seconds to start a service), end everything, make the last clean start, check; the
        stats."""
        self.say(f"soak: seed {self.seed}, {self.seconds:g} s, {self.services} services, "
                 f"options {self.options}")
        deadline = None
        first = time.monotonic() + 300
        try:
            while deadline is None or time.monotonic() < deadline:
                self.step()
                if deadline is None and any(self.words[:self.started * SLOTS_PER_SERVICE]):
                    deadline = time.monotonic() + self.seconds
                elif deadline is None and time.monotonic() > first:
                    raise Failed("no service logged an event in 5 minutes")
        finally:
            self.end_all()
        self.last_start()
        return self.check()

    def end_all(self) -> None:
        """Kill or end what runs; wait until every master and worker is gone (the alive
        lock) and no compaction runs (the directory's compaction lock)."""
        for s in self.running:
            if self.rng.random() < 0.5:
                s.kill()
            else:
                s.tell("term")
        for s in self.running:
            try:
                s.popen.wait(120)
            except subprocess.TimeoutExpired:
                s.kill()
                s.popen.wait()
            self.gone(s)
        self._exclusive(self.alive, "a worker still ran")
        lock = os.path.join(self.logs, "blog-compaction.lock")
        if os.path.exists(lock):
            self._exclusive(lock, "a compaction still ran")

    def _exclusive(self, path: str, what: str) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise Failed(what + " 2 minutes after the end")
                    time.sleep(0.05)
        finally:
            os.close(fd)

    def last_start(self) -> None:
        """A clean start of the set, no compaction: it recovers every buffer, and waits
        (``LAST_DRAIN`` seconds at most) until every closed file is shipped."""
        n = self.started
        self.started += 1
        cfg = dict(path=self.path, remote=self.remote, counters=self.counters,
                   slot=n * SLOTS_PER_SERVICE, seed=0, workers=0, threads=1, life=0,
                   rotate_bytes=self.options["rotate_bytes"],
                   retention=self.options["retention"], compact=None,
                   capacity=self.options["capacity"], flush=self.options["flush"],
                   latency=0, rate=1.0, drain=LAST_DRAIN)
        t = time.monotonic()
        p = self._child("last", ["-c", _SERVICE, os.path.abspath(__file__), json.dumps(cfg),
                                 self.alive],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.note(f"last start pid {p.pid}")
        try:
            p.wait(LAST_DRAIN + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p.returncode != 0:
            raise Failed("the last start failed: "
                         + open(os.path.join(self.errs, "last"), errors="replace").read())
        self.stats["last start (s)"] = round(time.monotonic() - t, 1)

    def check(self) -> dict[str, Any]:
        """Every returned event once in remote/ (and what is left to ship), the directory
        consistent with it (module docstring); raises Failed naming what is wrong."""
        import bread
        from blogstore.crashlayout import buffer_directory
        from blogstore.fileset import members
        problems: list[str] = []
        unprotected = self.read_stderr(problems)
        left = os.listdir(buffer_directory(self.path)) if os.path.isdir(
            buffer_directory(self.path)) else []
        if left:
            problems.append(f"crash buffer files left after the last start: {left}")
        shipped: dict[str, set[str]] = {}
        with open(os.path.join(self.remote, "journal")) as f:
            for line in f:
                name, _, digest, _ = line.split()
                shipped.setdefault(name, set()).add(digest)
        problems += [f"{n} shipped with {len(d)} different contents"
                     for n, d in shipped.items() if len(d) > 1]
        remote = sorted(n for n in os.listdir(self.remote)
                        if n.startswith(STEM + ".") and not n.endswith(".tmp"))
        for n in remote:
            with open(os.path.join(self.remote, n), "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() not in shipped.get(n, ()):
                    problems.append(f"remote/{n}: not what the journal says was shipped")
        local = members(self.logs, STEM)
        names = {f.name for f in local}      # (a plain file beside its .gz: the .gz counts)
        unshipped = [os.path.join(self.logs, f.name) for f in local
                     if f.name not in remote and f.name + ".gz" not in names]
        plain = [f.name for f in local if not f.compressed]
        if plain:
            problems.append(f"{len(plain)} file(s) left uncompressed: {plain[:3]}")
        never = [f.name for f in local if f.compressed and f.name not in remote]
        if never:
            problems.append(f"{len(never)} file(s) never shipped: {never[:3]}")
        for f in local:
            if f.name in remote:
                with open(os.path.join(self.logs, f.name), "rb") as a, \
                        open(os.path.join(self.remote, f.name), "rb") as b:
                    if a.read() != b.read():
                        problems.append(f"{f.name}: shipped with other bytes than it has")
        # Every returned event once in what was shipped and what is left to ship.
        seen: dict[int, bytearray] = {}
        extra: list[str] = []
        events = 0
        recovered = 0
        for path in [os.path.join(self.remote, n) for n in remote] + unshipped:
            r = bread.read(path)
            n = os.path.relpath(path, self.root)
            for ev in r:
                if ev.category != "soak":
                    extra.append(f"{n}: {ev.category} {ev.message}")
                    continue
                slot, seq = ev.args[0], ev.args[1]
                got = seen.setdefault(slot, bytearray())
                if seq >= len(got):
                    got.extend(bytes(seq + 1 - len(got)))
                got[seq] += 1
                events += 1
                if got[seq] == 2:
                    problems.append(f"slot {slot} seq {seq} twice (again in {n})")
            if r.damage:
                problems.append(f"{n}: damage {r.damage}")
            recovered += sum(x.events for x in r.notices if type(x).__name__ == "Recovered")
            # Before its last frame (the Summary, a Recovered entry, or what a kill cut).
            size = sum(b for _, b in frame_sizes_gz(path)[:-1])
            if size > self.options["rotate_bytes"]:
                problems.append(f"{n}: {size} bytes before its last frame, more "
                                f"than rotate_bytes ({self.options['rotate_bytes']})")
        slots = {s for s in range(self.started * SLOTS_PER_SERVICE) if self.words[s]} | set(seen)
        for s in sorted(slots):
            returned = self.words[s]
            got = seen.get(s, bytearray())
            n = len(got)
            missing = [i for i in range(n) if got[i] == 0]
            if missing and s in unprotected:
                self.stats["lost without a crash buffer (known bug)"] += len(missing)
                self.say(f"slot {s}: {len(missing)} event(s) lost by a writer whose crash "
                         f"buffer a recovery's sweep deleted as it was made (known bug)")
            elif missing:
                problems.append(f"slot {s}: {len(missing)} event(s) missing, first seq "
                                f"{missing[0]} (of {n}; {returned} returned)")
            if not returned <= n <= returned + 1:
                problems.append(f"slot {s}: {returned} calls returned, events up to "
                                f"{n - 1} found")
        # The directory: no event twice, none remote/ lacks.
        r = bread.read(self.logs)
        here: set[tuple[int, int]] = set()
        for ev in r:
            if ev.category != "soak":
                continue
            key = (ev.args[0], ev.args[1])
            if key in here:
                problems.append(f"logs/ reads slot {key[0]} seq {key[1]} twice")
            here.add(key)
            got = seen.get(key[0])
            if got is None or key[1] >= len(got) or not got[key[1]]:
                problems.append(f"logs/ has slot {key[0]} seq {key[1]}, remote/ has not")
        if r.damage:
            problems.append(f"logs/: damage {r.damage}")
        if extra:
            problems.append(f"{len(extra)} event(s) of another category, first: {extra[0]}")
        self.stats.update(events=events, recovered=recovered, shipped=len(remote),
                          left_in_logs=len(local), slots=len(slots))
        if problems:
            raise Failed(f"{len(problems)} problem(s); the first 20:\n  "
                         + "\n  ".join(problems[:20]))
        return self.stats


    def read_stderr(self, problems: list[str]) -> set[int]:
        """What the children said that tells of a fault (a traceback, housekeeping that
        failed, a writer without its crash buffer) added to ``problems``; the slots of
        writers left unprotected (none since a recovery's sweep spares a live writer's
        ``.new``: kept for the accounting)."""
        unprotected: set[int] = set()
        slots_of: dict[int, list[int]] = {}
        for s in self.all:
            slots_of.update(s.slots_of)
        for name in sorted(os.listdir(self.errs)):
            with open(os.path.join(self.errs, name), errors="replace") as f:
                text = f.read()
            for line in text.splitlines():
                if "has no crash buffer" in line:
                    pass
                elif "crash buffer in" in line and "cannot be used" in line:
                    pass
                elif not ("Traceback" in line or "failed" in line or "damage" in line):
                    continue
                problems.append(f"stderr/{name}: {line}")
        return unprotected




def frame_sizes_gz(path: str) -> list[tuple[int, int]]:
    """(kind, bytes) of each frame of a set file, gzipped or not."""
    import gzip
    import struct
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    pos, out = 0, []
    while pos + 12 <= len(data):
        kind, length = data[pos + 4], struct.unpack_from("<I", data, pos + 8)[0]
        out.append((kind, 12 + length))
        pos += 12 + length
    return out


#: The service's child: the alive lock (ALIVE) taken shared, then service(). Its workers
#: inherit the open file, and with it the lock: the driver takes it exclusively at the end
#: to know that every master and worker is gone.
_SERVICE = ("import fcntl, json, os, sys\n"
            "fcntl.flock(os.open(sys.argv[3], os.O_RDONLY), fcntl.LOCK_SH)\n"
            "sys.path.insert(0, __import__('os').path.dirname(sys.argv[1]))\n"
            "import lifecycle_soak; lifecycle_soak.service(json.loads(sys.argv[2]))\n")


def main(argv: list[str] | None = None) -> int:
    import tempfile
    p = argparse.ArgumentParser(prog="lifecycle_soak", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 300)))
    p.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", 0)) or None)
    p.add_argument("--dir", help="where to run (kept); default: a temporary directory")
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1, 1 << 32)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    root = a.dir or tempfile.mkdtemp(prefix="soak-")
    soak = Soak(root, seed, a.seconds, quiet=False)
    try:
        stats = soak.run()
    except Failed as exc:
        print(f"soak FAILED (SOAK_SEED={seed} replays its choices; files in {root}):\n{exc}",
              flush=True)
        print("stats:", soak.stats)
        return 1
    print(f"soak passed (SOAK_SEED={seed}): {stats}")
    if a.dir is None:
        import shutil
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
