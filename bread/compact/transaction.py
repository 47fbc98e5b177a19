"""The compaction catalog's transaction (``blogstore.catalog``): each compacted file is
announced, written, named durably and marked done before its originals go; what a crash
cut is finished or undone at the next compaction (``finish_interrupted``)."""

from __future__ import annotations

import gzip
import os
import stat
import time
from typing import Any

from blogstore import catalog, manifest
from blogstore.fileset import create_temp, fsync_dir, is_locked, open_lock, parse
from blogstore.posix import fcntl

from ..frames import Damage
from .compactor import Compactor, TooBig
from .files import Warn, keep_damaged, remove, shown, to_stderr
from .locks import hold, release
from .plan import groups

_SEC = 1_000_000_000


def compact(directory: str, older_than_ns: int, *, period_ns: int = 86400 * _SEC,
            now_ns: int | None = None, dry_run: bool = False,
            log: Any = None, warn: Warn = to_stderr, columnar: bool = False,
            shipped_only: bool = False, set_stem: str | None = None) -> list[dict]:
    """Compact the closed files of ``directory`` older than ``older_than_ns``; one compacted
    file per set and period. Returns what was done (or would be, with ``dry_run``): with
    ``kept``, the originals that held damage and where they are now (package docstring).
    What is left alone (such originals, names in the catalog that are not the directory's
    own regular files, an original another process holds locked: ``locks``) is said to
    ``warn`` (default: standard error). ``columnar``: the
    compacted files hold columnar frames (docs/format.md 5.5), smaller once compressed.
    ``shipped_only``: take only originals the manifest records as shipped (a set's
    ``on_close`` hook returned for them): none is deleted before it was shipped.
    ``set_stem``: only that set's files (``bread compact --set``).

    Raises BlockingIOError if another compaction of the directory is running.
    """
    now = time.time_ns() if now_ns is None else now_ns
    lock = open_lock(os.path.join(directory, catalog.LOCK))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not dry_run:
            finish_interrupted(directory, warn)
            _forget(directory, [])    # the manifest's stale entries and temporary files
        done = []
        for stem, start, planned in groups(directory, older_than_ns, period_ns, now, warn,
                                           shipped_only, set_stem):
            held = hold(directory, planned, warn)   # each original's lock, until it is gone
            try:
                names = [n for n in planned if n in held]
                if not names:
                    continue
                plan = {"stem": stem, "period_start_ns": start, "replaces": names}
                if not dry_run:
                    plan.update(_one(directory, stem, start, names, warn, columnar))
            finally:
                release(held)
            done.append(plan)
            if log is not None:
                log(plan)
        return done
    finally:
        os.close(lock)


def _one(directory: str, stem: str, start: int, names: list[str], warn: Warn,
         columnar: bool = False) -> dict:
    period = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(start // _SEC))
    k = 1
    while True:
        name = catalog.compacted_name(stem, period, k)
        if not os.path.lexists(os.path.join(directory, name)):
            break
        k += 1
    path = os.path.join(directory, name)
    c = catalog.load(directory) or catalog.empty()
    c["compacted"][name] = {"state": "writing", "replaces": names, "events": None}
    catalog.write(directory, c)                          # 1. announced: readers ignore it
    by_pid: dict[int, list[str]] = {}
    for n in names:    # one stream per process: the events keep their origin
        by_pid.setdefault(parse(n).pid, []).append(n)  # type: ignore[union-attr]
    events = 0
    damage: list[Damage] = []
    damaged: list[str] = []      # originals that held damage: never deleted
    short = ""                   # an original without damage not copied whole: why
    too_big = None
    fd, tmp = create_temp(path)                          # 2. made, durable, then named
    with os.fdopen(fd, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz:
            for pid, group in sorted(by_pid.items()):  # noqa: B007  (pid: named after it)
                comp = Compactor(directory)
                try:
                    for n in group:
                        p, before = os.path.join(directory, n), comp.events
                        if comp.add_file(p):
                            damaged.append(n)
                            continue
                        expected = max(0, manifest.describe(p)["events"])
                        if comp.events - before != expected and not short:
                            short = f"copied {comp.events - before} event(s) of {expected} of {n}"
                except TooBig as exc:
                    too_big = exc
                    break
                events += comp.write(gz, names, columnar)
                damage += comp.damage
        raw.flush()
        os.fsync(raw.fileno())
    if too_big is not None or short:
        # Never delete what was not copied: the originals stand, the attempt is undone.
        os.unlink(tmp)
        del c["compacted"][name]
        catalog.write(directory, c)
        why = f"pid {pid} has {too_big}" if too_big is not None else short
        raise RuntimeError(f"compaction of {len(names)} file(s) into {name}: {why}: "
                           "nothing changed")
    os.replace(tmp, path)
    fsync_dir(directory)                                 # named durably before anything goes
    c["compacted"][name] = {"state": "done", "replaces": names, "events": events}
    if damaged:
        c["compacted"][name]["damaged"] = damaged
    catalog.write(directory, c)                          # 3. done: readers switch to it
    for d in damage:
        warn(str(d))
    kept: dict[str, str | None] = {}
    for n in names:                                      # 4. only now the originals go,
        if n in damaged:                                 # but those that held damage
            kept[n] = keep_damaged(directory, n, name, warn)
        else:
            remove(directory, n, [], warn)
    fsync_dir(directory)
    _forget(directory, names)
    return {"compacted": name, "events": events, "damage": [str(d) for d in damage],
            "kept": kept}


def _forget(directory: str, names: list[str]) -> None:
    """Drop the originals' entries from the manifest (made again if it is damaged)."""
    gone = set(names)
    manifest.update(directory, lambda m: [m["files"].pop(n, None) for n in gone],
                    lambda p: not is_locked(p))


def finish_interrupted(directory: str, warn: Warn = to_stderr) -> list[str]:
    """Finish or undo compactions a crash cut; the paths removed. Run under the lock.

    Catalog entries that name anything but the directory's own files are said to ``warn``
    and dropped; names that are not regular files there are said and left alone."""
    bad: list[str] = []
    c = catalog.load(directory, bad)
    for why in bad:
        warn(why)
    removed: list[str] = []
    names = set(os.listdir(directory))
    for n in names:
        if catalog.is_temporary(n):                                # never finished
            remove(directory, n, removed, warn, links=True)
        elif n.startswith(catalog.NAME + ".") and n.endswith(".tmp"):   # under the lock: stale
            remove(directory, n, removed, warn, links=True)
    if c is None:
        return removed
    changed = bool(bad)
    for name, e in list(c["compacted"].items()):
        if e["state"] == "writing":       # not durable yet: the originals stand
            if name in names:
                gone = [o for o in e["replaces"] if not catalog.with_twins([o]) & names]
                if gone:                  # then it holds the only copy: never removed
                    warn(f"{shown(directory, name)}: the catalog says it is being written, "
                         f"but {len(gone)} of its originals are gone: left alone")
                    continue
                remove(directory, name, removed, warn)
            del c["compacted"][name]
            changed = True
        else:                             # durable: the originals go, if any are left
            damaged = set(e.get("damaged", ()))
            # (an original's other form too: compressed by another process once copied)
            here = [(o, n) for o in e["replaces"] for n in sorted(catalog.with_twins([o]))
                    if n in names]
            left = sorted({o for o, _ in here})
            if left and not _holds(directory, name, left):
                warn(f"{shown(directory, name)}: the catalog says it replaces "
                     f"{len(left)} file(s) still here, but it is not a regular file whose "
                     "header says so: they are left alone")
                continue
            for orig, n in here:
                if orig in damaged:       # never deleted: kept aside
                    keep_damaged(directory, n, name, warn)
                else:
                    remove(directory, n, removed, warn)
    if changed:
        catalog.write(directory, c)
    if removed:
        fsync_dir(directory)
    return removed


#: The old name of finish_interrupted (``recover`` is the crash buffers': blogformat.crashfiles).
recover = finish_interrupted


def _holds(directory: str, name: str, originals: list[str]) -> bool:
    """True if the compacted file ``name`` is a regular file of ``directory`` whose own
    header says it replaces every one of ``originals`` (what the catalog says is input)."""
    path = os.path.join(directory, name)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    said = catalog.header_replaces(path)
    return said is not None and set(originals) <= set(said)
