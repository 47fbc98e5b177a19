"""``bread export --parquet OUT_DIR FILE...``: the events table and a typed table per call site.

OUT_DIR gets:

- ``events.parquet``: one row per event, the columns of ``bread.sinks.batches``
  (time in microseconds, UTC; ``clock`` keeps every tick);
- ``sources/NNNN.parquet``: per call site (``bread.sinks.tables.site``), its events
  with one typed column per argument (``bread.sinks.tables``);
- ``sources.json``: which call site each of those files holds, and its columns.

Each file is made anew (``O_EXCL | O_NOFOLLOW``) after unlinking whatever had its name,
and ``sources`` is reached without following a link: a link planted in OUT_DIR (at
``events.parquet``, ``sources`` or a table's name) is replaced, never written through.

Readable by ``spark.read.parquet``, pyarrow, pandas and DuckDB. Three passes
over the inputs: the events table (the C batch reader), the column types of
each call site, then the typed tables. Memory: one batch of rows per call site.
"""

from __future__ import annotations

import json
import os
import stat
import time
from typing import Any, BinaryIO, Sequence, TextIO

from blogformat.frames import EVENT_FRAMES
from blogformat.valuedecoding import unpacker
from blogstore.posix import O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW

from ..frames import Skim
from ..inputs import expand, open_path
from ..inputs.compressed import GzipInput
from ..reader import Reader
from ..sinks import tables
from ..sinks.batches import COLUMNS, portable

ROWS = 65536


class Progress:
    """The pass (of ``passes``, each over every event), the events it has done (of
    ``total``), events/s and an ETA of all passes, on one line of a terminal (nothing
    elsewhere), at most once per ``every`` seconds."""

    def __init__(self, total: int | None, out: TextIO | None, passes: int = 3,
                 every: float = 0.5) -> None:
        self.total = total
        self.out = out
        self.passes = passes
        self.every = every
        self.done = 0      # events of this pass
        self.work = 0      # events of all passes so far (the rate and the ETA)
        self.what = ""     # this pass
        self.number = 0    # its number, from 1
        self.start = self._last = time.monotonic()

    def add(self, n: int, what: str) -> None:
        if what != self.what:   # the next pass: its events are the same ones again
            self.what, self.number, self.done = what, self.number + 1, 0
        self.done += n
        self.work += n
        now = time.monotonic()
        if self.out is None or now - self._last < self.every:
            return
        self._last = now
        rate = self.work / max(now - self.start, 1e-9)
        of = f" of {self.total:,}" if self.total else ""
        line = (f"\rexport: {what} ({self.number}/{self.passes}): {self.done:,} events{of}, "
                f"{rate:,.0f}/s")
        if self.total:
            left = max(self.total * self.passes - self.work, 0) / max(rate, 1e-9)
            line += f", ETA {int(left) // 60}:{int(left) % 60:02d}"
        self.out.write(line + "   ")
        self.out.flush()

    def end(self) -> None:
        if self.out is not None:
            self.out.write("\n")


def count(paths: Sequence[str]) -> int | None:
    """How many events the files hold, by their batch headers (None if a file is
    compressed or damaged: no ETA then)."""
    total = 0
    for path in paths:
        f = open_path(path)
        try:
            if isinstance(f, GzipInput):
                return None
            skim = Skim(f, 0)
            for fr in skim.frames():
                if fr.kind in EVENT_FRAMES:   # its count where a batch header has it
                    try:
                        n = unpacker(fr.payload).unpack()[2]
                    except Exception:    # a damaged batch header: the count is unknown
                        return None
                    total += n if type(n) is int and n > 0 else 0
            if not skim.clean:
                return None
        finally:
            f.close()
    return total


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC
_DIR = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
#: POSIX: names are made relative to an open directory (``dir_fd``), so a directory
#: swapped for a link after its check changes nothing; elsewhere (Windows) by path.
_AT = {os.open, os.mkdir, os.unlink, os.stat} <= os.supports_dir_fd

#: A directory: open (``_AT``), or its path.
Directory = int | str


def _at(directory: Directory, name: str) -> tuple[str, dict]:
    """``name`` of ``directory`` as os functions take it: the name and ``dir_fd``, or a path."""
    if isinstance(directory, int):
        return name, {"dir_fd": directory}
    return os.path.join(directory, name), {}


def _create(directory: Directory, name: str) -> BinaryIO:
    """``name`` in ``directory`` made anew for writing: what had the name (a planted link,
    an older export) is unlinked first, a link never followed."""
    path, at = _at(directory, name)
    try:
        os.unlink(path, **at)
    except FileNotFoundError:
        pass
    return open(os.open(path, _NEW, 0o666, **at), "wb")


def _subdirectory(directory: Directory, name: str) -> Directory:
    """The directory ``name`` in ``directory``, made if missing, reached without following
    a link (a link at its name is removed and the directory made)."""
    path, at = _at(directory, name)
    try:
        os.mkdir(path, **at)
    except FileExistsError:
        if stat.S_ISLNK(os.stat(path, follow_symlinks=False, **at).st_mode):
            os.unlink(path, **at)
            os.mkdir(path, **at)
    return os.open(path, _DIR, **at) if _AT else path


def _close(directory: Directory) -> None:
    if isinstance(directory, int):
        os.close(directory)


def export(inputs: Sequence[str], out_dir: str, progress: TextIO | None = None) -> dict:
    """Write the Parquet tables of ``inputs`` into ``out_dir``; a summary of what was written."""
    import pyarrow.parquet as pq

    paths = list(expand(inputs))
    os.makedirs(out_dir, exist_ok=True)
    out: Directory = os.open(out_dir, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC) if _AT \
        else out_dir       # named: followed
    try:
        sources = _subdirectory(out, "sources")
        try:
            return _tables(pq, paths, out, sources, progress)
        finally:
            _close(sources)
    finally:
        _close(out)


def _tables(pq: Any, paths: list[str], out: Directory, sources: Directory,
            progress: TextIO | None) -> dict:
    bar = Progress(count(paths), progress)
    reader = Reader(paths)
    writer = f = None
    n = 0
    try:
        for b in reader.batches(COLUMNS, ROWS, arrow=True):
            b = portable(b)
            if writer is None:
                f = _create(out, "events.parquet")
                writer = pq.ParquetWriter(f, b.schema)
            writer.write_batch(b)
            n += b.num_rows
            bar.add(b.num_rows, "events table")
    finally:
        if writer is not None:
            writer.close()
        if f is not None:
            f.close()
    typers: dict[tuple, tables.Typer] = {}
    for k, ev in enumerate(Reader(paths)):
        key = tables.site(ev.source)
        typer = typers.get(key)
        if typer is None:
            typer = typers[key] = tables.Typer(ev.source)
        typer.add(ev)
        if k % 4096 == 4095:
            bar.add(4096, "column types")
    names = {key: f"{i:04d}.parquet" for i, key in enumerate(typers)}
    pending: dict[tuple, list] = {key: [] for key in typers}
    writers: dict[tuple, Any] = {}
    files: list[BinaryIO] = []

    def flush(key: tuple) -> None:
        t = typers[key]
        b = tables.batch(t.names, t.kinds, pending[key])
        if key not in writers:
            files.append(_create(sources, names[key]))
            writers[key] = pq.ParquetWriter(files[-1], b.schema)
        writers[key].write_batch(b)
        pending[key] = []

    late = 0    # events the type pass did not see (a file still being written)
    try:
        for k, ev in enumerate(Reader(paths)):
            key = tables.site(ev.source)
            typer = typers.get(key)
            if typer is None or not typer.fits(ev):
                late += 1
                continue
            rows = pending[key]
            rows.append(tables.common_values(ev) + typer.row(ev))
            if len(rows) >= ROWS:
                flush(key)
            if k % 4096 == 4095:
                bar.add(4096, "typed tables")
        for key in typers:
            if pending[key] or key not in writers:
                flush(key)
    finally:
        for w in writers.values():
            w.close()
        for f in files:
            f.close()
        bar.end()
    index = [{"file": f"sources/{names[key]}", "category": key[0], "function": key[1],
              "source_file": key[2], "line": key[3], "format": key[4],
              "columns": dict(zip(t.names, t.kinds))} for key, t in typers.items()]
    with _create(out, "sources.json") as f:
        f.write(json.dumps(index, indent=1).encode())
    return {"events": n, "sources": len(index), "late": late,
            "damage": [str(d) for d in reader.damage]}
