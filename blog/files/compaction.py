"""Compaction in a file set's housekeeping (``compact=``): ``bread compact`` on the set's
directory, run as a child process (docs/compaction.md).

A child process, not a call, for three reasons: ``blog`` never imports ``bread``; compacting
takes about a microsecond of CPU per event, and a million events held in the service's
interpreter would stall its logging threads for a second; and its memory (about 70 MB at
peak) is the child's, not the service's. The child is the command a cron job runs, and as
safe beside live writers and other processes: it takes only closed files, under the
directory's compaction lock, in the catalog's transaction (a child killed at any moment is
finished or undone by the next compaction).

``Compactions.run`` is called by housekeeping after each of its passes; it starts a child
when ``Compaction.every`` seconds have passed since the last one started, none is running
(in this process, or in another: the compaction lock is probed), a closed file of the set is
older than ``older_than`` and no crash buffer of the set waits for recovery. The child runs
at a lower priority (``nice``), in a session of its own, its standard error going to an
unlinked temporary file: a watcher thread waits for it (``timeout``: then it is killed) and
reports a failure on stderr with the first ``ERR_BYTES`` of what it said. The watcher is
stopped before a fork of this process and started again in the parent by the next use of
blog after it (``blog.process``; the child runs on meanwhile, its timeout unchanged).
Closing the set does not wait for a child: it runs on to its end by itself.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator

from blogstore import catalog
from blogstore.fileset import open_lock
from blogstore.posix import fcntl

from .. import process
from ..errors import ConfigurationError
from ..report import report

#: What a failing child said that is reported (the head of its standard error).
ERR_BYTES = 2000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The child: ``NICE WHERE bread-arguments...``, run as ``python -P -c`` (the same ``bread
#: compact``; ``-P``: no working directory on its path, whose ``bread/`` would be run).
#: Only if ``bread`` is not on its own path is WHERE (this process's) appended: after the
#: standard library, which no module beside ``bread`` then shadows.
_CHILD = ("import os, sys; os.nice(int(sys.argv.pop(1))); where = sys.argv.pop(1)\n"
          "try:\n import bread\nexcept ImportError:\n sys.path.append(where)\n"
          "sys.argv[0] = 'bread compact'; from bread.cli import main; sys.exit(main())")
#: How often the watcher looks whether the child has ended, in seconds.
_POLL = 0.05
_EXITS = {1: "a bad option", 2: "not a directory, or another compaction running",
          3: "something left as it is", 4: "it failed: an unexpected error"}


def seconds(value: Any, option: str) -> int:
    """``value`` as whole seconds > 0: an int, or a duration like ``30m``, ``12h``, ``1d``,
    ``2w``; a ConfigurationError naming ``option`` for anything else."""
    if isinstance(value, str):
        t = value.strip()
        if len(t) >= 2 and t[-1] in _UNITS and t[:-1].isdigit() and int(t[:-1]) > 0:
            return int(t[:-1]) * _UNITS[t[-1]]
    elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise ConfigurationError(f"{option} must be whole seconds > 0 or a duration like 30m, 12h, "
                             f"1d or 1w, not {value!r}")


@dataclass(frozen=True)
class Compaction:
    """What ``compact=`` asks of housekeeping: ``bread compact DIR --set STEM --older-than
    OLDER_THAN --period PERIOD [--columnar]`` at most every ``every`` seconds, killed after
    ``timeout``.

    Durations are seconds or strings like ``"1d"``. ``python`` is the interpreter that runs
    it (default ``sys.executable``: give one where that is not a Python, as in uWSGI);
    ``nice`` is added to the child's niceness (lower priority). ``starts=False``: this
    process starts no child, another compacts the set (``for_workers``: what a forked or
    spawned worker's set gets); its retention still waits for a running compaction and
    counts the compacted files.
    """

    older_than: int | str = 86400
    period: int | str = 86400
    columnar: bool = True
    every: int | str = 3600
    timeout: int | str = 3600
    python: str | None = None
    nice: int = 10
    starts: bool = True

    def __post_init__(self) -> None:
        for name in ("older_than", "period", "every", "timeout"):
            object.__setattr__(self, name, seconds(getattr(self, name), f"compact's {name}"))
        for name in ("columnar", "starts"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"compact's {name} must be True or False, "
                                         f"not {getattr(self, name)!r}")
        if self.python is not None and not isinstance(self.python, str):
            raise ConfigurationError(f"compact's python must be a path, not {self.python!r}")
        if isinstance(self.nice, bool) or not isinstance(self.nice, int) \
                or not 0 <= self.nice <= 19:
            raise ConfigurationError(f"compact's nice must be an int from 0 to 19, "
                                     f"not {self.nice!r}")

    def for_workers(self) -> "Compaction":
        """The option of the set of a forked or spawned worker: no child of its own (the
        process that configured the set compacts it), retention as beside compaction."""
        return replace(self, starts=False)

    def fields(self) -> dict[str, Any]:
        """Its fields, as JSON holds them (for a spawned worker: ``Compaction(**fields)``)."""
        return asdict(self)


def compaction_option(value: Any) -> Compaction | None:
    """``compact=``'s value as a Compaction: None or False (off), True (the defaults), an age
    (``"1d"``, seconds: ``older_than``, the rest the defaults) or a Compaction."""
    if value is None or value is False:
        return None
    if value is True:
        return Compaction()
    if isinstance(value, Compaction):
        return value
    if isinstance(value, (str, int, float)):
        return Compaction(older_than=value)   # type: ignore[arg-type]  # (a float: refused)
    raise ConfigurationError(f"compact must be an age like '1d', a Compaction, True or None, "
                             f"not {value!r}")


@contextmanager
def compaction_lock(directory: str) -> Iterator[bool]:
    """Hold the directory's compaction lock, if no compaction holds it: yields True if held
    (no compaction runs meanwhile), False if one runs; True too where the lock cannot be
    opened (no compaction can take it either: a child says why). No fork happens meanwhile
    (the child would keep the lock): hold it briefly, and take no ``process.fork_guard``
    inside (it is held: ``is_being_written`` would wait for ever)."""
    with process.fork_guard:
        try:
            fd = open_lock(os.path.join(directory, catalog.LOCK))
        except OSError:
            yield True
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


class Compactions:
    """Starts and watches the compaction children of one set (``stem``) of a directory
    (module docstring); ``runs``, ``failures`` count them."""

    def __init__(self, directory: str, stem: str, option: Compaction) -> None:
        self.directory = directory
        self.stem = stem
        self.option = option
        self.runs = 0            # children started
        self.failures = 0        # children that failed (exit status other than 0, killed)
        self.disabled: str | None = None    # why compaction cannot run here (said once)
        self._last: float | None = None     # time.monotonic() of the last start
        self._watcher: threading.Thread | None = None
        #: The child watched until it ends and its report is made: (child, its standard
        #: error, the time.monotonic() it is killed at), or None.
        self._watched: tuple[Any, Any, float] | None = None
        #: Set to stop the watcher for a fork (blog.process); under _lock with _watcher.
        self._pausing = threading.Event()
        self._lock = threading.Lock()
        #: The last child started (a ``subprocess.Popen``), or None.
        self.child: Any = None

    @property
    def running(self) -> bool:
        return self._watched is not None

    def run(self, oldest_mtime: float | None, shipped_only: bool) -> bool:
        """Start a child if one is due (module docstring); True if one was started.
        ``oldest_mtime``: when the set's oldest closed file was last written (None: none is
        closed); ``shipped_only``: take only files an ``on_close`` hook has shipped."""
        opt = self.option
        if self.disabled is not None or self.running or oldest_mtime is None:
            return False
        if time.time() - oldest_mtime <= float(opt.older_than):
            return False
        if self._last is not None and time.monotonic() - self._last < float(opt.every):
            return False
        with compaction_lock(self.directory) as free:
            if not free:
                return False      # another process's compaction of the directory runs
        argv = self._argv(shipped_only)
        if argv is None:
            return False
        self._last = time.monotonic()
        self._start(argv)
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running child, if any, and its report; True if none runs now."""
        process.restart_threads()     # (after a fork: the watcher)
        end = None if timeout is None else time.monotonic() + timeout
        while self.running:
            w = self._watcher
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            if w is not None and w.is_alive():
                w.join(left)
            else:    # stopped for a fork: started again after it
                time.sleep(_POLL if left is None else min(_POLL, left))
        return not self.running

    def _argv(self, shipped_only: bool) -> list[str] | None:
        """The child's command line; None (said once, compaction off) where it cannot run."""
        opt = self.option
        python = opt.python or sys.executable
        name = os.path.basename(python or "").lower()
        spec = importlib.util.find_spec("bread")
        why = None
        if not python or not os.path.isfile(python) or not os.access(python, os.X_OK):
            why = f"{python!r} is not an executable file"
        elif opt.python is None and "python" not in name and "pypy" not in name:
            why = (f"sys.executable {python!r} is not a Python (an embedded interpreter): give "
                   "compact=Compaction(python=...)")
        elif spec is None or not spec.submodule_search_locations:
            why = "bread is not installed beside blog"
        if why is not None:
            self.disabled = why
            report(f"blog: compaction of {self.directory} is off: {why}")
            return None
        assert spec is not None and spec.submodule_search_locations
        where = os.path.dirname(list(spec.submodule_search_locations)[0])   # bread's parent
        argv = [python, "-P", "-c", _CHILD, str(opt.nice), where, "compact", self.directory,
                "--set", self.stem, "--older-than", f"{opt.older_than}s",
                "--period", f"{opt.period}s"]
        if opt.columnar:
            argv.append("--columnar")
        if shipped_only:
            argv.append("--shipped")
        return argv

    def _start(self, argv: list[str]) -> None:
        import subprocess     # only where compaction is configured: not at import

        err = tempfile.TemporaryFile()
        try:
            with process.fork_guard:
                child = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        except OSError as exc:
            err.close()
            self.failures += 1
            report(f"blog: compaction of {self.directory} could not start: {exc}; it is "
                   f"tried again in {self.option.every} s")
            return
        self.runs += 1
        self.child = child
        self._watched = (child, err, time.monotonic() + float(self.option.timeout))
        with self._lock:
            self._start_watcher()

    def _start_watcher(self) -> None:
        process.track_threads(self)
        self._watcher = threading.Thread(target=self._watch, name="blog-compaction",
                                         daemon=True)
        self._watcher.start()

    def _stop_for_fork(self, deadline: float) -> None:
        """Before a fork (``blog.process``): end the watcher (the child runs on)."""
        with self._lock:
            w = self._watcher
            if w is None or w is threading.current_thread() or not w.is_alive():
                return
            self._pausing.set()
        process.join_for_fork(w, deadline)

    def _after_fork_in_parent(self) -> None:
        """Nothing to arm: the next use of blog restarts the watcher."""

    def _restart_after_fork(self) -> None:
        """After a fork, in the parent: watch the child again, if it was stopped for it."""
        with self._lock:
            self._pausing.clear()
            if self._watched is not None and self._watcher is None:
                self._start_watcher()

    def _watch(self) -> None:
        """Wait for the child (killed after the timeout) and report how it failed; end
        sooner, leaving it watched, when a fork stops the watcher."""
        assert self._watched is not None
        child, err, deadline = self._watched
        killed = False
        while child.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                child.kill()
                child.wait()
                killed = True
                break
            if self._pausing.wait(min(_POLL, left)):
                with self._lock:
                    if self._pausing.is_set():    # (else a fork that did not wait for it)
                        self._watcher = None
                        return
        try:
            self._report(child, err, killed)
        finally:
            self._watched = None

    def _report(self, child: Any, err: Any, killed: bool) -> None:
        """Report how ``child`` failed (if it did), with the head of its ``err``."""
        with err:
            err.seek(0)
            said = err.read(ERR_BYTES + 1)
        status = child.returncode
        if status == 0 and not killed:
            return
        self.failures += 1
        what = (f"was killed after {self.option.timeout} s (the next compaction finishes or "
                "undoes what it did)" if killed else
                f"exited {status} ({_EXITS.get(status, 'failed')})")
        text = said[:ERR_BYTES].decode("utf-8", "replace").strip()
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.replace("\n", "; "))
        report(f"blog: compaction of {self.directory} (bread compact) {what}; it is tried "
               f"again in {self.option.every} s" + (f": {text}" if text else "")
               + (" ..." if len(said) > ERR_BYTES else ""))
