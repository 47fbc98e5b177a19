"""Planning a compaction: which closed files of a directory are old enough, grouped by
set and period (one compacted file each)."""

from __future__ import annotations

import os
import stat

from blogstore import catalog, manifest
from blogstore.crashlayout import set_buffers, waits_for_recovery
from blogstore.fileset import is_locked, members, parse

from .files import Warn, to_stderr


def candidates(directory: str, older_than_ns: int, now_ns: int,
               warn: Warn = to_stderr, shipped_only: bool = False,
               set_stem: str | None = None) -> list[str]:
    """Closed files of the sets in ``directory`` last written before ``now - older_than``:
    regular files (a link is said to ``warn`` and left alone) that no compacted file
    replaces already (an original a crash left, or one kept for its damage), and that
    no crash buffer beside the set waits to be recovered into (``waits_for_recovery``);
    ``shipped_only``: only those the manifest records as shipped (``on_close``);
    ``set_stem``: only those of that set (no other set's file is looked at)."""
    out = []
    names = os.listdir(directory)
    shipped = _shipped(directory) if shipped_only else None
    replaced = catalog.left_out(directory, names)
    found = [f for f in map(parse, names) if f is not None]
    plain = {f.name for f in found if not f.compressed}
    twins = {f.plain_name for f in found if f.compressed and f.plain_name in plain}
    stems = {f.stem for f in found if set_stem is None or f.stem == set_stem}
    for stem in sorted(stems):
        buffers = set_buffers(directory, stem)
        for f in members(directory, stem):
            path = os.path.join(directory, f.name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                warn(f"{path}: not a regular file: left alone")
            elif f.plain_name in twins:     # its compression was cut: housekeeping's to settle
                warn(f"{path}: both compressed and not (a compression cut short): left for "
                     "the set's next start")
            elif (st.st_mtime_ns < now_ns - older_than_ns and f.name not in replaced
                  and (shipped is None or f.name in shipped) and not is_locked(path)
                  and not waits_for_recovery(buffers, path)):
                out.append(f.name)
    return out


def _shipped(directory: str) -> set[str]:
    """The files the directory's manifest records as shipped (none if it is missing)."""
    m = manifest.load(directory)
    files = m["files"] if m is not None else {}
    return {n for n, e in files.items() if e.get("shipped") is True}


def groups(directory: str, older_than_ns: int, period_ns: int, now_ns: int,
           warn: Warn = to_stderr, shipped_only: bool = False, set_stem: str | None = None
           ) -> list[tuple[str, int, list[str]]]:
    """The ``candidates`` by set and period: (stem, period start in ns, names), in order."""
    out: dict[tuple[str, int], list[str]] = {}
    for name in candidates(directory, older_than_ns, now_ns, warn, shipped_only, set_stem):
        f = parse(name)
        assert f is not None
        out.setdefault((f.stem, f.time_ns // period_ns * period_ns), []).append(name)
    return [(stem, start, names) for (stem, start), names in sorted(out.items())]
