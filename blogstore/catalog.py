"""The compaction catalog of a log directory: which compacted file replaces which originals.

``bread compact`` merges closed files of a directory into time-sorted,
compressed files named ``STEM.compacted.<UTC period start>.<n>.blog.gz``
(docs/format.md section 14). ``DIR/blog-compaction.json`` records each::

    {"catalog_version": 1,
     "compacted": {"app.compacted.2026-11-25T00-00-00.1.blog.gz":
                   {"state": "done", "replaces": ["app.2026-11-25T...pid42.blog.gz", ...],
                    "events": 123456}}}

A compacted file is listed as ``"writing"`` before it is made (under a
temporary name, fsynced, then renamed) and marked ``"done"`` only once it is
durable; the originals are deleted after that. So a reader reads either the
originals or the compacted file, never both: the compacted file only when its
entry is ``"done"``, and then not the originals it replaces. Its header
descriptor also lists them (``"replaces"``), which is what a reader goes by
when the catalog is missing or damaged (a compacted file exists under its
final name only once complete).

An original in which the compaction met damage is never deleted: the entry
lists it under ``"damaged"`` too, and it is moved to ``DIR/damaged/`` (outside
the set: no reader of the directory reads it again, no compaction takes it
again), its readable events being in the compacted file.

The catalog is input: an entry is used only if its name is a compacted file's
name and every original it names is a file name of a set (``fileset.parse``) of
the compacted file's stem, each a bare name of the directory itself
(``fileset.is_bare_name``); any other entry is ignored (and said, to ``bad``).
"""

from __future__ import annotations

import os
import re

from blogformat.typinglite import TYPE_CHECKING
from blogformat.frames import (FRAME_HEADER, HEADER_SIZE, MAX_PAYLOAD, check_crc, parse_header,
                               unescape)
from blogformat.values import unpack_plain

from .fileset import COMPRESSED, SetFile, is_bare_name, name_seconds, parse
from .manifest import read_json, write_json

if TYPE_CHECKING:
    from typing import Any, Iterable

NAME = "blog-compaction.json"
LOCK = "blog-compaction.lock"
#: The subdirectory where originals that held damage are kept once compacted.
DAMAGED = "damaged"
VERSION = 1
_COMPACTED = re.compile(r"^(?P<stem>.+)\.compacted\.(?P<t>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)"
                        r"\.(?P<n>\d+)\.blog\.gz$")


_TEMPORARY = re.compile(_COMPACTED.pattern[:-1] + r"(\.[0-9a-f]+)?\.tmp$")


def is_compacted(name: str) -> bool:
    """True if ``name`` is a compacted file's name."""
    return _COMPACTED.match(name) is not None


def is_temporary(name: str) -> bool:
    """True if ``name`` is a compacted file being written (``CNAME.<random>.tmp``)."""
    return _TEMPORARY.match(name) is not None


def compacted_name(stem: str, period_start: str, n: int) -> str:
    return f"{stem}.compacted.{period_start}.{n}.blog.gz"


def empty() -> dict:
    return {"catalog_version": VERSION, "compacted": {}}


def load(directory: str, bad: list[str] | None = None) -> dict | None:
    """The catalog, checked; None if missing, damaged or of another version. Entries of the
    wrong shape, or naming anything but files of the directory's sets, are left out (and
    said in ``bad``)."""
    c = read_json(os.path.join(directory, NAME))
    if type(c) is not dict or c.get("catalog_version") != VERSION \
            or type(c.get("compacted")) is not dict:
        return None
    good = {}
    for name, e in c["compacted"].items():
        if (type(e) is dict and e.get("state") in ("writing", "done")
                and originals_ok(name, e.get("replaces"))
                and originals_ok(name, e.get("damaged", []))
                and set(e.get("damaged", [])) <= set(e["replaces"])):
            good[name] = e
        elif bad is not None:
            bad.append(f"{os.path.join(directory, NAME)}: ignored the entry {name!r}: it "
                       "names something other than a compacted file of the directory and "
                       "originals of its set")
    c["compacted"] = good
    return c


def originals_ok(name: Any, originals: Any) -> bool:
    """True if ``name`` is a compacted file's bare name and ``originals`` a list of bare
    names of files of its set (only such names are ever read, moved or deleted)."""
    m = _COMPACTED.match(name) if is_bare_name(name) else None
    if m is None or type(originals) is not list:
        return False
    for r in originals:
        f = parse(r) if is_bare_name(r) else None
        if f is None or f.stem != m["stem"]:
            return False
    return True


def write(directory: str, c: dict) -> None:
    """Replace the catalog crash-safely (temporary file, fsync, rename, fsync the directory)."""
    write_json(directory, NAME, c)


def header_replaces(path: str) -> list[str] | None:
    """The originals a compacted file's header says it replaces; None if it cannot tell."""
    import gzip   # (here: reading a directory's catalog does not need it)
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(HEADER_SIZE)
            fields = parse_header(head) if len(head) == HEADER_SIZE else None
            if fields is None or fields[0] != FRAME_HEADER or fields[2] > min(MAX_PAYLOAD, 1 << 24):
                return None
            payload = f.read(fields[2])
            if len(payload) != fields[2] or not check_crc(payload, fields[3]):
                return None
            payload = unescape(fields[1], payload)[1]
        descriptor = unpack_plain(payload)[1]
        names = descriptor.get("replaces") if isinstance(descriptor, dict) else None
    except Exception:   # a damaged or crafted file: cannot tell
        return None
    if not originals_ok(os.path.basename(path), names):
        return None
    return names


def with_twins(originals: Iterable[str]) -> set[str]:
    """``originals`` and the other form of each: ``x.blog.gz`` for ``x.blog`` and the
    reverse (a compression in another process may have made it once the original was
    copied: the compacted file holds its events too)."""
    out = set(originals)
    out.update([n[:-len(COMPRESSED)] if n.endswith(COMPRESSED) else n + COMPRESSED
                for n in out])
    return out


def left_out(directory: str, names: Iterable[str]) -> set[str]:
    """Of the file names in ``directory``, those a reader must leave out: compacted files
    not yet done, and the originals that done ones replace (catalog, else their header),
    compressed or not (``with_twins``)."""
    names = list(names)
    compacted = [n for n in names if is_compacted(n)]
    if not compacted:
        return set()
    c = load(directory)
    entries: dict[str, Any] = c["compacted"] if c is not None else {}
    leave: set[str] = set()
    for n in compacted:
        e = entries.get(n)
        if e is not None and e["state"] != "done":
            leave.add(n)
            continue
        replaces = e["replaces"] if e is not None else header_replaces(os.path.join(directory, n))
        if replaces is None:
            continue          # cannot tell: read it (its originals, if any, are read too)
        leave.update(with_twins(replaces))
    return leave


def compacted_files(directory: str, stem: str) -> list[tuple[SetFile, os.stat_result]]:
    """The set's compacted files, oldest first, as a set's retention sees them: each as a
    SetFile of its period's start (pid 0), with its stat."""
    out = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    for n in names:
        m = _COMPACTED.match(n)
        seconds = name_seconds(m["t"]) if m is not None and m["stem"] == stem else None
        if seconds is None:
            continue
        try:
            st = os.stat(os.path.join(directory, n))
        except OSError:
            continue
        out.append((SetFile(n, stem, seconds * 1_000_000_000, 0, True), st))
    return out


def delete_done(directory: str, names: list[str]) -> list[str]:
    """Delete the compacted files ``names`` that the catalog says are done, and their
    entries; the names deleted. Run under the compaction lock (``LOCK``)."""
    gone: list[str] = []
    c = load(directory) if names else None
    if c is None:
        return gone
    entries = c["compacted"]
    for n in names:
        if entries.get(n, {}).get("state") != "done":
            continue
        try:
            os.unlink(os.path.join(directory, n))
        except FileNotFoundError:
            pass
        del entries[n]
        gone.append(n)
    if gone:
        write(directory, c)
    return gone
