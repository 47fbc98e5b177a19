"""Housekeeping of a file set's closed files: compress them, age them out, finish what a crash cut,
start their compaction (``compact=``: a child process, ``blog.files.compaction``).

It runs on its own thread (never the consumer's: logging is never blocked by it), stopped
before a fork between two tasks (or two files of a sweep) and started again after it in the
parent (``blog.process``). No fork happens while it holds a lock for a moment (a probe, the
manifest's): the child would hold the lock as long as it lives. Only files of the set (their
names parse as ``blogstore.fileset`` names of the set's stem, in its directory) that no
process is writing are touched: a writer holds an exclusive ``flock`` on the file it writes
for as long as it writes it, and the kernel releases it when the process dies, even by
SIGKILL.

Every step leaves only complete files, whenever it is cut (docs/file-sets.md,
"Crash-safe switching"):

* compress ``x.blog``: write ``x.blog.gz.tmp`` (made anew: whatever had the name, a
  stale copy or a planted link, is unlinked, never followed), fsync, rename it to
  ``x.blog.gz``, fsync the directory, then delete ``x.blog``. A ``.gz.tmp``
  is incomplete and is deleted at the next start; ``x.blog`` beside
  ``x.blog.gz`` means the deletion was cut: the ``.gz`` is complete (it was
  renamed only once durable), so ``x.blog`` is deleted. Readers meanwhile
  read ``x.blog`` and leave its twin alone.
* open a new file: made as ``x.blog.new``, locked, then renamed to ``x.blog``
  (a ``.new`` file nobody holds is a writer that died in between: deleted).
* retention deletes whole closed files, oldest first.
"""

from __future__ import annotations

import gzip
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Sequence

from blogstore import catalog, manifest
from blogstore.crashlayout import alive, pending, waits_for_recovery
from blogstore.fileset import (COMPRESSED, NEW, SUFFIX, SetFile, create_new, fsync_dir,
                               is_locked, members, open_regular, parse, remove, unlink_unheld)
from blogstore.posix import fcntl

from .. import process
from ..report import report
from . import shipping
from .compaction import Compaction, Compactions, compaction_lock
from .shipping import OnClose, Shipper

TMP = ".tmp"

#: Put in a housekeeper's queue to end its thread for a fork (``Housekeeper._stop_for_fork``).
_PAUSE = ("pause", "")

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Retention:
    """How many closed files to keep: by count, by age (days since last written), by total bytes.

    None keeps without limit. The files being written never count and are never deleted.
    """

    keep_files: int | None = None
    keep_days: float | None = None
    keep_bytes: int | None = None

    @property
    def active(self) -> bool:
        return (self.keep_files is not None or self.keep_days is not None
                or self.keep_bytes is not None)


def is_being_written(path: str) -> bool:
    """True if a process holds the file's writer lock (or the file cannot be opened to check)."""
    # No fork meanwhile: a child would inherit the open file description, and with it the
    # lock, for its life (blog.process.fork_guard).
    with process.fork_guard:
        return is_locked(path)


def compress(directory: str, name: str, level: int = 6) -> str | None:
    """Compress ``directory/name`` to ``name.gz`` crash-safely (module docstring); its path.

    Returns None, touching nothing, if a process is writing or compressing the
    file (it holds its lock), the file is gone, or something else is at its name (a
    link, never followed; a FIFO, never waited on).
    """
    src = os.path.join(directory, name)
    dst = src + COMPRESSED
    tmp = dst + TMP
    try:
        f = open_regular(src)   # a link or a FIFO put at its name: not the set's file
    except FileNotFoundError:
        return None
    if f is None:
        return None
    with f:
        try:   # held while compressing: another process's housekeeper keeps off
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        if not os.path.exists(src):       # compressed meanwhile by another process
            return None
        if not os.path.exists(dst):
            with os.fdopen(create_new(tmp), "wb") as raw:   # never through a planted link
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level,
                                   mtime=0) as gz:
                    while chunk := f.read(_CHUNK):
                        gz.write(chunk)
                raw.flush()
                os.fsync(raw.fileno())
            st = os.fstat(f.fileno())
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))   # its age is the original's
            os.replace(tmp, dst)
            fsync_dir(directory)
        os.unlink(src)     # only now: the .gz is complete and durable
        fsync_dir(directory)
    return dst


def finish_interrupted(directory: str, stem: str) -> list[str]:
    """Finish or undo compressions a crash cut, and remove files a writer died making
    (module docstring); the paths removed."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    have = set(names)
    for n in names:
        if n.endswith(SUFFIX + NEW):
            f = parse(n[:-len(NEW)])
            # A writer that died between making and naming it (it holds no event); one
            # still alive is making it now (unless it is old: a pid taken again).
            path = os.path.join(directory, n)
            if f is not None and f.stem == stem and (not alive(f.pid) or _age(path) > 60) \
                    and not is_being_written(path):
                remove(path, removed)
        elif n.endswith(COMPRESSED + TMP):
            plain = n[:-len(COMPRESSED + TMP)]
            f = parse(plain)
            # The original is still there and nobody is compressing it: the copy was cut.
            if (f is not None and f.stem == stem and plain in have
                    and not is_being_written(os.path.join(directory, plain))):
                remove(os.path.join(directory, n), removed)
    for f in members(directory, stem):
        if f.compressed and f.plain_name in have:
            plain = os.path.join(directory, f.plain_name)
            if not is_being_written(plain):
                remove(plain, removed)
    if removed:
        fsync_dir(directory)
    return removed


#: The old name of finish_interrupted (``recover`` is the crash buffers': blogstore.recovery).
recover = finish_interrupted


def _age(path: str) -> float:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def closed_files(directory: str, stem: str) -> list[tuple[SetFile, os.stat_result]]:
    """The set's files that no process is writing, oldest first, with their stat."""
    out = []
    for f in members(directory, stem):
        path = os.path.join(directory, f.name)
        if is_being_written(path):
            continue
        try:
            out.append((f, os.stat(path)))
        except FileNotFoundError:
            continue
    return out


def expired(files: list[tuple[SetFile, os.stat_result]], policy: Retention,
            now: float) -> list[SetFile]:
    """Which of ``files`` (oldest first) the policy deletes."""
    doomed: list[SetFile] = []
    keep = list(files)
    if policy.keep_days is not None:
        limit = now - policy.keep_days * 86400
        doomed += [f for f, st in keep if st.st_mtime < limit]
        keep = [(f, st) for f, st in keep if st.st_mtime >= limit]
    if policy.keep_files is not None and len(keep) > policy.keep_files:
        cut = len(keep) - policy.keep_files
        doomed += [f for f, _ in keep[:cut]]
        keep = keep[cut:]
    if policy.keep_bytes is not None:
        total = sum(st.st_size for _, st in keep)
        while keep and total > policy.keep_bytes:
            f, st = keep.pop(0)
            doomed.append(f)
            total -= st.st_size
    return doomed


class Housekeeper:
    """A thread that compresses closed files of a set, applies its retention, keeps the
    directory's manifest (``blogstore.manifest``) up to date and, with ``compaction``,
    starts ``bread compact`` children after its passes (``blog.files.compaction``).

    ``closed(name)`` hands it a file the writer has just closed; ``sweep()`` asks for a pass
    over the whole directory (done at start: files left by earlier runs, steps a crash cut).
    ``wait()`` returns when it is idle. Errors are reported on stderr (``report``) and never
    raised.
    """

    def __init__(self, directory: str, stem: str, *, compress: bool, retention: Retention,
                 manifest: bool = True, buffers: Sequence[str] = (),
                 on_close: OnClose | None = None, compaction: Compaction | None = None) -> None:
        self.directory = directory
        self.stem = stem
        self.compress = compress
        self.retention = retention
        self.manifest = manifest
        self.compressed = 0        # files compressed so far
        self.deleted = 0           # files deleted so far
        self.errors = 0
        self._known: dict[str, dict] = {}   # manifest entries of files we closed, by name
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Stopping for a fork (blog.process): asked (_pausing), done (_paused: the thread
        # ended for it); the tasks it took meanwhile (_later) come first after it.
        self._pausing = False
        self._paused = False
        self._later: list[tuple[str, str]] = []
        #: Where crash buffers of the set may be (beside it, and a ``crash_dir``): the files
        #: of a process whose buffer waits for recovery are not compressed.
        self.buffers = list(buffers)
        #: Calls ``on_close`` for each final closed file (``blog.files.shipping``); it needs
        #: the manifest, where the files shipped are recorded.
        self.shipper = None if on_close is None else Shipper(
            directory, on_close, compressed=compress, buffers=self.buffers,
            is_closed=lambda path: not is_being_written(path))
        if self.shipper is not None:
            self.manifest = True
        #: The set is compacted (here or by the parent of this worker): retention counts the
        #: compacted files and waits while a compaction runs.
        self.compacted = compaction is not None
        #: Runs ``bread compact`` on the set as a child process (``blog.files.compaction``);
        #: None in a worker (``Compaction.starts`` False).
        self.compactions = (None if compaction is None or not compaction.starts
                            else Compactions(directory, stem, compaction))

    @property
    def needed(self) -> bool:
        return (self.compress or self.retention.active or self.manifest
                or self.compactions is not None)

    def closed(self, name: str) -> None:
        """``name`` (in the directory) was closed by its writer."""
        if self.needed:
            self._put(("closed", name))
        if self.shipper is not None:
            self.shipper.check()

    def sweep(self) -> None:
        """Recover, compress and apply retention over the whole set; bring the manifest up to
        date."""
        if self.needed:
            self._put(("sweep", ""))

    def wait(self) -> None:
        """Block until everything handed over so far is done."""
        process.restart_threads()     # (after a fork: the thread that does it)
        self._queue.join()

    def stop(self) -> None:
        """Finish what was handed over, then end the thread. An ``on_close`` hook is waited
        for ``shipping.AT_CLOSE`` seconds at most: a hook that hangs never keeps the
        process from ending (its file is shipped again at the next start)."""
        process.restart_threads()
        if self._paused:     # stopped for another thread's fork: ends after it, when done
            self._queue.put(None)
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(None if self.shipper is None else shipping.AT_CLOSE)
            if self._thread.is_alive():
                report(f"blog: on_close of {self.directory}/{self.stem}.* was still running "
                       f"{shipping.AT_CLOSE:g} s after the set was closed; what it did not "
                       "finish is shipped at the next start")
        self._thread = None

    def _put(self, task: tuple[str, str]) -> None:
        """Hand ``task`` to the thread (started if needed). Where no thread can be started
        (Python 3.12+ in an exit handler: a set opened again for late events), it is left
        for the next start's sweep, which does whatever a task would have."""
        process.restart_threads()
        with self._lock:
            if not self._paused and (self._thread is None or not self._thread.is_alive()):
                try:
                    self._start()
                except RuntimeError:      # "can't create new thread at interpreter shutdown"
                    self._thread = None
                    return
        self._queue.put(task)

    def _start(self) -> None:
        process.track_threads(self)
        self._thread = threading.Thread(target=self._run, name="blog-housekeeping",
                                        daemon=True)
        self._thread.start()

    def _stop_for_fork(self, deadline: float) -> None:
        """Before a fork (``blog.process``): end the thread once its current task is done
        (a sweep stops between two files: the rest is done after the fork), if that is
        by ``deadline``; the tasks waiting are kept for the next thread."""
        with self._lock:
            t = self._thread
            if t is None or t is threading.current_thread() or not t.is_alive():
                return
            self._pausing = True
        self._queue.put(_PAUSE)
        process.join_for_fork(t, deadline)

    def _after_fork_in_parent(self) -> None:
        """Nothing to arm: a task handed over restarts the thread."""

    def _restart_after_fork(self) -> None:
        """After a fork, in the parent: a new thread goes on with the tasks waiting."""
        with self._lock:
            self._pausing = False
            if self._paused:     # (else it never ended: busy past the deadline, it goes on)
                self._paused = False
                self._start()

    def _next(self) -> tuple[str, str] | None:
        """The next task; None: the thread ends (stopped, or stopped for a fork)."""
        while True:
            later = bool(self._later) and not self._pausing
            task = self._later.pop(0) if later else self._queue.get()
            if task is _PAUSE:
                self._queue.task_done()
                with self._lock:
                    if self._pausing:       # (else a fork that did not wait for it)
                        self._paused = True
                        return None
            elif self._pausing and task is not None:   # done after the fork, in order
                self._later.insert(0 if later else len(self._later), task)
            else:
                return task

    def _run(self) -> None:
        while True:
            task = self._next()
            if task is None and self._paused:
                return
            try:
                if task is None:
                    return
                kind, name = task
                if kind == "sweep":
                    finish_interrupted(self.directory, self.stem)
                    self._retain()       # before compressing what retention deletes anyway
                    if self.compress:
                        for f, _ in closed_files(self.directory, self.stem):
                            if self._pausing:     # a fork waits: the rest after it
                                self._queue.put(("sweep", ""))
                                break
                            if not f.compressed:
                                self._compress(f.name)
                else:
                    # Described from its frames (a skim), not from the Summary: a file may
                    # hold several streams (an output that failed and recovered) or none.
                    if self.manifest:
                        try:
                            self._known[name] = manifest.describe(
                                os.path.join(self.directory, name))
                        except OSError:
                            pass
                    if self.compress:
                        self._compress(name)
                self._retain()
                if self.manifest:
                    self._record()
                if self.shipper is not None:
                    self.shipper.ship(f for f, _ in closed_files(self.directory, self.stem))
                    self._retain()       # what was kept for its hook may go now
                if self.compactions is not None:
                    self._compact()
            except Exception as exc:   # never raise on a thread of ours
                self.errors += 1
                report(f"blog: housekeeping of {self.directory}/{self.stem}.* failed: "
                       f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    def _compress(self, name: str) -> None:
        if waits_for_recovery(self.buffers, os.path.join(self.directory, name)):
            return       # its process died with events in its crash buffer, or a recovery
                         # died appending to it: recovery cuts and appends this file first
                         # (a later pass compresses it)
        done = compress(self.directory, name)
        if done is not None:
            self.compressed += 1
            old = self._known.pop(name, None)
            if old is not None:
                self._known[os.path.basename(done)] = dict(
                    old, state="compressed", bytes=os.path.getsize(done))

    def _compact(self) -> None:
        """Start a compaction child if one is due (``Compactions.run``): with ``on_close``, of
        the files shipped only; never while a crash buffer of the set waits for recovery
        (which appends to its dead writer's file first)."""
        assert self.compactions is not None
        if any(pids or files for pids, files in map(pending, self.buffers)):
            return
        files = closed_files(self.directory, self.stem)
        self.compactions.run(min((st.st_mtime for _, st in files), default=None),
                             shipped_only=self.shipper is not None)

    def _retain(self) -> None:
        if not self.retention.active:
            return
        if not self.compacted:
            files = closed_files(self.directory, self.stem)
            with process.fork_guard:   # (a child would keep a lock _expire takes meanwhile)
                self._expire(files, set())
            return
        extra = catalog.compacted_files(self.directory, self.stem)   # each one closed file
        files = sorted(closed_files(self.directory, self.stem) + extra,
                       key=lambda fs: fs[0].time_ns)
        # Never beside a compaction (of any process): it may be reading what would go.
        with compaction_lock(self.directory) as free:
            if free:        # (else the next pass applies it)
                self._expire(files, {f.name for f, _ in extra})

    def _expire(self, files: list[tuple[SetFile, os.stat_result]], compacted: set[str]) -> None:
        """Delete what retention says of ``files`` (oldest first), ``compacted`` among them.
        Called holding ``process.fork_guard`` (itself, or ``compaction_lock``)."""
        shipper = self.shipper
        doomed = expired(files, self.retention, time.time())
        self.deleted += len(catalog.delete_done(self.directory,
                                             [f.name for f in doomed if f.name in compacted]))
        for f in doomed:
            if f.name in compacted:
                continue
            if shipper is not None and shipper.keeps(f.name):
                continue     # not shipped yet: kept until its hook returns
            # (held since it was listed: a compaction reads it, and deletes it when done)
            self.deleted += unlink_unheld(os.path.join(self.directory, f.name))

    def _record(self) -> None:
        """Make the manifest's entries of this set those of its closed files."""
        known = self._known
        closed: set[str] = set()

        def change(m: dict) -> None:
            closed.update(f.name for f, _ in closed_files(self.directory, self.stem))
            files = m["files"]
            for n in [n for n in files if (p := parse(n)) is not None
                      and p.stem == self.stem and n not in closed]:
                del files[n]
            for n in closed:
                e = files.get(n)
                if e is not None and manifest.usable(self.directory, n, e):
                    continue
                e = known.get(n)
                try:
                    if e is None or not manifest.usable(self.directory, n, e):
                        e = manifest.describe(os.path.join(self.directory, n))
                except OSError:     # gone meanwhile (another process's housekeeping)
                    files.pop(n, None)
                    continue
                files[n] = e

        manifest.update(self.directory, change, lambda path: not is_being_written(path))
        for n in [n for n in known if n not in closed]:
            del known[n]
