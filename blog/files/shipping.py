"""Shipping a file set's closed files: ``on_close(path)`` once each file is final.

A file set may be given a hook (``basic_config(..., on_close=upload)``): housekeeping
calls it, on its own thread, with the path of each closed file of the set once the file
is final (compressed, when the set compresses; never one whose writer's crash buffer
waits for recovery, which appends to it first, nor one a recovery died appending to,
which holds a part of that append until the next recovery). Delivery is at least once:

* a hook that raises is reported on stderr, and the file is tried again at the next
  pass (the next rotation, the next start); a hook that runs on is reported once it has
  run for ``SLOW_HOOK`` seconds. Logging never waits for it: only housekeeping does
  (compression and retention of the set wait behind a hook that hangs); closing the set
  (at exit) waits ``AT_CLOSE`` seconds at most, and says so if the hook runs on.
* retention deletes no file of the set before its hook returned.
* one file at a time: the shipper claims a file (``"shipping": pid``), calls the hook,
  and records its return (``"shipped": true``, fsynced) before it claims the next; each
  mark is a line of the manifest's journal (``blogstore.journal``), not a rewrite of the
  manifest, so the first file of any backlog is shipped at once and the whole backlog in
  time linear in its length. The processes of one set (forked workers, a restart) ship
  each file once: a file recorded shipped is never shipped again, and a live process's
  claim is left to it. A dead process's claim is taken over at the next pass, which goes
  on where it stopped: the file it was on (at most one per dead shipper, whose hook was
  called but its return not recorded) is shipped again, as is every file after the
  manifest and its journal are lost or rebuilt: a hook must take a file twice without
  harm (an upload to the same object name does).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterable

from blogstore import manifest
from blogstore.crashlayout import alive, pending_in, waits_for_recovery
from blogstore.fileset import SetFile

from ..report import report

#: A hook still running after this many seconds is reported (once per file).
SLOW_HOOK = 60.0
#: When the set is closed (at exit, say), its hook is waited for this long at most.
AT_CLOSE = 30.0

OnClose = Callable[[str], object]


class Shipper:
    """Calls ``hook`` for the final closed files of a set, each once (module docstring).

    ``ship`` runs on the housekeeping thread; ``keeps`` tells retention which files it
    must leave; ``check`` (any thread) reports a hook that runs on.
    """

    def __init__(self, directory: str, hook: OnClose, *, compressed: bool,
                 buffers: Iterable[str], is_closed: Callable[[str], bool]) -> None:
        if not callable(hook):
            raise TypeError(f"on_close must be a callable taking a path, not {hook!r}")
        self.directory = directory
        self.hook = hook
        self.compressed = compressed        # only compressed files are final
        self.buffers = list(buffers)
        self.is_closed = is_closed          # of a path: no process writes it (a rebuild's)
        self.shipped: set[str] = set()     # names shipped, by this process or another
        self.marks = manifest.Marks(directory, is_closed)   # the manifest's, and its journal
        self.failures = 0                   # calls of the hook that raised
        self._running: tuple[str, float] | None = None
        self._reported: set[str] = set()   # names whose slow hook was reported

    def keeps(self, name: str) -> bool:
        """True if retention must leave ``name``: it was not shipped yet."""
        return name not in self.shipped

    def ship(self, files: Iterable[SetFile]) -> None:
        """Call the hook for each of the closed ``files`` that is final and not shipped,
        claiming each just before its call (so the first is called at once, whatever the
        backlog), and recording its return before the next (module docstring)."""
        waiting = pending_in(self.buffers)
        pending = [f for f in files if f.name not in self.shipped and self._final(f, waiting)]
        for f in pending:
            if not self._claim(f.name):
                continue
            path = os.path.join(self.directory, f.name)
            self._running = (f.name, time.monotonic())
            try:
                self.hook(path)
            except Exception as exc:   # the hook's failure, never housekeeping's
                self.failures += 1
                report(f"blog: on_close({path!r}) failed: {type(exc).__name__}: {exc}; "
                       "it is called again at the next rotation and the file is kept")
                self._mark(f.name, shipped=False)
                continue
            finally:
                self._running = None
            self.shipped.add(f.name)
            self._mark(f.name, shipped=True)

    def check(self) -> None:
        """Report (once per file) a hook that has run for ``SLOW_HOOK`` seconds or more."""
        running = self._running
        if running is None or running[0] in self._reported:
            return
        name, since = running
        if time.monotonic() - since >= SLOW_HOOK:
            self._reported.add(name)
            report(f"blog: on_close({os.path.join(self.directory, name)!r}) has run for "
                   f"{time.monotonic() - since:.0f} s; the set's compression and retention "
                   "wait for it (logging does not)")

    def _final(self, f: SetFile, waiting: tuple[set[int], set[tuple[int, int]]]) -> bool:
        """True if ``f`` is final: compressed if the set compresses, and not a file that
        waits for recovery (``waiting``: ``crashlayout.pending_in`` of the set's buffers)."""
        if self.compressed and not f.compressed:
            return False
        return not waits_for_recovery(self.buffers, os.path.join(self.directory, f.name),
                                      waiting)

    def _claim(self, name: str) -> bool:
        """Under the manifest's lock: True if this process may ship ``name`` now (it is
        marked as shipping it); False if it was shipped, or a live process ships it.
        The mark is a line of the manifest's journal, not fsynced: it counts only while
        this process lives, and a power loss ends every process that made one."""
        me = os.getpid()
        with self.marks.locked() as files:
            e = files.get(name)
            if e is None:
                return False     # not recorded yet: the next pass, once it is
            if e.get("shipped") is True:
                self.shipped.add(name)
                return False
            other = e.get("shipping")   # input, as all the manifest says: a pid, or not
            if type(other) is int and 0 < other < (1 << 31) and other != me and alive(other):
                return False
            self.marks.append({"claim": name, "pid": me}, durable=False)
            return True

    def _mark(self, name: str, *, shipped: bool) -> None:
        """Record that the hook returned for ``name`` (durably, before the next file is
        claimed), or that it failed (the claim let go)."""
        with self.marks.locked():
            self.marks.append({"shipped": name} if shipped else {"release": name},
                              durable=shipped)
