"""``bread compact DIR --older-than 1d``: closed files merged into time-sorted, compressed files.

Many small files become one file per set and period
(``STEM.compacted.<UTC period start>.<n>.blog.gz``), which is what ``bread
-s`` and Spark read fastest. A compacted file holds one stream per process
whose files it replaces, so that every event keeps its origin (host, pid,
program): a header (the process's descriptor, marked ``compacted`` and
listing every original the file replaces), the call sites and writers of all
of that process's files (the same call site in several files is one source),
its events in time order in frames of stretches of at most
``EVENTS_PER_FRAME`` events (one frame per writer of each stretch), and a
Summary.
Event bytes (arguments, texts) are copied as they were written, never
decoded and encoded again; only the source id and the clock delta change, and
the ids of described values (docs/format.md 4.8): an event whose bytes may hold
one is decoded and packed again with the compacted stream's ids (the same type in
several files of a process is one description; an id its own stream does not
describe becomes 0, which none does), its other extension values kept as they were.

Memory stays bounded: events are sorted in runs of ``RUN_EVENTS`` spilled
to temporary files, then merged a block of each run at a time (``runs``); the output
is written a frame at a time. The per-event work (an events frame's walk, the columnar
and row frames' encoding) is in C where it is built (``bread/compact/_compact.c``, loaded by
the first compaction), this package's Python being its reference. The compaction catalog
(``blogstore.catalog``) makes every step crash-safe: see its docstring and
docs/compaction.md.

Only what was carried over is deleted, and only inside the directory: an
original in which reading met damage is moved to ``DIR/damaged/`` instead
(its readable events are in the compacted file); every name read from the
catalog is checked (``catalog.load``), and only regular files (never links)
of those names are removed or moved. Whatever is left alone is said to
``warn`` (``bread compact`` then exits 3).

Modules: ``plan`` (which files, grouped by set and period), ``compactor`` (one
process's files merged into one stream, sorted by ``runs``), ``transaction`` (the
catalog's steps, and finishing what a crash cut), ``locks`` (each original's lock,
held from before it is read until it is deleted: no compression or recovery changes
it meanwhile), ``files`` (removing and moving aside only the directory's own regular
files).
"""

from __future__ import annotations

from .plan import candidates
from .transaction import compact, finish_interrupted, recover

__all__ = ["candidates", "compact", "finish_interrupted", "recover"]
