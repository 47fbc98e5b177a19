"""The manifest of a log directory: its closed files, each with its time range and event count.

``DIR/blog-manifest.json`` (docs/format.md section 14) lists the closed files
of every file set in the directory::

    {"manifest_version": 1, "format_version": 1,
     "files": {"app.2026-11-26T10-00-00.123.pid42.blog.gz":
               {"state": "compressed", "bytes": 81234, "events": 50000,
                "first_ns": 1764151200123000000, "last_ns": 1764151260000000000}}}

Writers (``blog``'s housekeeping) change it under an exclusive ``flock`` of
``DIR/blog-manifest.lock`` and replace it crash-safely (write a temporary
file, fsync, rename, fsync the directory). Between two rewrites, the shipping
marks of its entries (``blog.files.shipping``) are appended to its journal
(``blogstore.journal``): ``load`` applies it, a rewrite folds it in, and
``Marks`` reads it a line at a time. Readers trust an entry only if
its file exists with exactly the size recorded: the files win over the
manifest. A missing or damaged manifest is rebuilt from the files (each
described by its frames: ``describe``). The manifest is a hint for skipping
files by time; nothing is lost without it.
"""

from __future__ import annotations

import os
import stat
import threading
from contextlib import contextmanager

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import BadEntry, ClockSync, decode_metadata_frame
from blogformat.frames import (EVENT_FRAMES, FLAG_ESCAPED, FORMAT_VERSION, FRAME_EVENTS,
                               FRAME_HEADER, FRAME_METADATA, HEADER_SIZE, MAX_PAYLOAD, check_crc,
                               parse_header, unescape)
from blogformat.valuedecoding import unpacker
from blogformat.values import unpack_plain

from . import journal, posix
from .fileset import (is_bare_name, members, open_lock, open_regular, parse,
                      replace_durably)

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

NAME = "blog-manifest.json"
LOCK = "blog-manifest.lock"
VERSION = 1
#: A manifest larger than this is taken for damaged (it would list millions of files).
MAX_BYTES = 64 << 20
_STATES = ("closed", "compressed")


def empty() -> dict:
    return {"manifest_version": VERSION, "format_version": FORMAT_VERSION, "files": {}}


def read_json(path: str) -> Any:
    """A small JSON file of a log directory, or None (missing, a link, not a regular file,
    too large, not JSON, nested too deep)."""
    try:
        # (O_NONBLOCK: a FIFO must not block)
        fd = os.open(path, os.O_RDONLY | posix.O_NONBLOCK | posix.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    import json   # (imported where there is a file to read: reading a log without one never)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def load(directory: str) -> dict | None:
    """The directory's manifest, checked, its journal applied; None if it is missing,
    damaged or of another version."""
    m = checked(read_json(os.path.join(directory, NAME)))
    if m is not None:
        journal.apply(m["files"], journal.read(directory).records)
    return m


def checked(m: Any) -> dict | None:
    """A manifest's parsed JSON (from a directory, or an object store's prefix) checked: its
    entries of the right shape, naming files of a set; None if it is of another version."""
    if (type(m) is not dict or m.get("manifest_version") != VERSION
            or type(m.get("files")) is not dict):
        return None
    files = {}
    for name, e in m["files"].items():
        if _entry_ok(name, e):
            files[name] = e
    m["files"] = files
    return m


def _entry_ok(name: Any, e: Any) -> bool:
    if not is_bare_name(name) or parse(name) is None or type(e) is not dict:
        return False
    if e.get("state") not in _STATES or type(e.get("bytes")) is not int:
        return False
    if type(e.get("events")) is not int:
        return False
    for k in ("first_ns", "last_ns"):
        if e.get(k) is not None and type(e.get(k)) is not int:
            return False
    return True


def usable(directory: str, name: str, entry: dict) -> bool:
    """True if the file an entry describes is there with the size recorded (files win)."""
    try:
        return matches(entry, os.stat(os.path.join(directory, name)).st_size)
    except OSError:
        return False


def matches(entry: dict, size: int) -> bool:
    """True if a file of ``size`` bytes is the one its entry describes (``usable``, for a
    size found elsewhere: an object store's listing)."""
    return size == entry["bytes"]


def outside(entry: dict, since: int | None, until: int | None) -> bool:
    """True if no event of the entry's file can be in ``[since, until)`` (ns)."""
    if entry["events"] == 0:
        return True
    first, last = entry.get("first_ns"), entry.get("last_ns")
    if since is not None and last is not None and last < since:
        return True
    if until is not None and first is not None and first >= until:
        return True
    return False


def write(directory: str, m: dict) -> None:
    """Replace the manifest crash-safely."""
    write_json(directory, NAME, m)


def write_json(directory: str, name: str, obj: Any) -> None:
    """Replace ``directory/name`` by ``obj`` as JSON crash-safely
    (``fileset.replace_durably``): the manifest, the compaction catalog."""
    import json
    replace_durably(directory, name, json.dumps(obj, indent=0, sort_keys=True).encode())


# The lock is a POSIX record lock (lockf): a forked child does not inherit it, so a fork
# while this process holds it cannot leave it held. Such locks do not exclude the threads
# of one process: this lock does.
_in_process = threading.Lock()


def reset_after_fork() -> None:
    """In a forked child (blog.process calls it): a thread of the parent may have held the
    in-process lock."""
    global _in_process
    _in_process = threading.Lock()


@contextmanager
def locked(directory: str) -> Iterator[None]:
    """Hold the manifest's lock (every change of the manifest or its journal does)."""
    fcntl = posix.fcntl   # reading needs no lock; a change, NeedsPosix where there are none
    with _in_process:
        fd = open_lock(os.path.join(directory, LOCK))
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)   # releases the lock


def update(directory: str, change: Callable[[dict], object],
           is_closed: Callable[[str], bool]) -> dict:
    """Change the manifest under its lock: load it (or rebuild it from the files), drop
    entries whose file is gone, apply ``change``, write it back (its journal folded in).
    Returns it."""
    with locked(directory):
        return _update(directory, change, is_closed)


def _update(directory: str, change: Callable[[dict], object],
            is_closed: Callable[[str], bool]) -> dict:
    """``update``, the lock held."""
    for n in os.listdir(directory):   # under the lock, any temporary one is a writer's
        if n.endswith(".tmp") and n.startswith((NAME + ".", journal.NAME + ".")):   # that
            try:                                                            # died: stale
                os.unlink(os.path.join(directory, n))
            except OSError:   # gone, or a directory: passed over by create_temp
                pass
    m = load(directory)
    if m is None:
        m = rebuild(directory, is_closed)
        journal.apply(m["files"], journal.read(directory).records)
    present = set(os.listdir(directory))
    m["files"] = {n: e for n, e in m["files"].items() if n in present}
    change(m)
    write(directory, m)
    journal.remove(directory)       # only now: the manifest holds what it said
    return m


class Marks:
    """The entries of a directory's manifest as its journal brings them up to date, for
    the shipper (``blog.files.shipping``): read and changed ``with marks.locked():``.
    Each line of the journal is read once; the whole manifest again only once it was
    rewritten. A change is a journal record (``append``); once the journal has grown as
    large as the manifest (``FOLD_BYTES`` at least), the manifest is rewritten."""

    #: The journal is folded into the manifest once it is this large, or the manifest's size.
    FOLD_BYTES = 256 << 10

    def __init__(self, directory: str, is_closed: Callable[[str], bool]) -> None:
        self.directory = directory
        self.is_closed = is_closed
        self.files: dict[str, dict] = {}
        self._seen: tuple[int, ...] | None = None      # the manifest read: dev, ino, size...
        self._at: tuple[str | None, int] = (None, 0)     # the journal read: id, offset

    @contextmanager
    def locked(self) -> Iterator[dict[str, dict]]:
        """Hold the manifest's lock; ``files`` (yielded) are up to date meanwhile."""
        with locked(self.directory):
            self._refresh()
            yield self.files

    def append(self, record: dict, *, durable: bool) -> None:
        """Record a change (``blogstore.journal``'s records) while ``locked``."""
        self._at = journal.append(self.directory, record, durable=durable)
        journal.apply(self.files, [record])
        if self._seen is not None and self._at[1] > max(self.FOLD_BYTES, self._seen[2]):
            _update(self.directory, lambda m: None, self.is_closed)
            self._seen = None       # read again at the next ``locked``

    def _refresh(self) -> None:
        seen = self._manifest_id()
        if seen is not None and seen == self._seen:
            r = journal.read(self.directory, self._at)
            if r.follows:
                journal.apply(self.files, r.records)
                self._at = r.id, r.end
                return
        m = checked(read_json(os.path.join(self.directory, NAME)))
        if m is None:         # missing or damaged: rebuilt (and the journal folded in)
            m = _update(self.directory, lambda m: None, self.is_closed)
            seen = self._manifest_id()
        r = journal.read(self.directory)
        journal.apply(m["files"], r.records)
        self.files, self._seen, self._at = m["files"], seen, (r.id, r.end)

    def _manifest_id(self) -> tuple[int, ...] | None:
        """What tells a rewritten manifest (a new file) from the one read."""
        try:
            st = os.lstat(os.path.join(self.directory, NAME))
        except OSError:
            return None
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def rebuild(directory: str, is_closed: Callable[[str], bool]) -> dict:
    """A manifest from the files: every closed file of every set in the directory, described."""
    m = empty()
    stems = {f.stem for f in map(parse, os.listdir(directory)) if f is not None}
    for stem in sorted(stems):
        for f in members(directory, stem):
            path = os.path.join(directory, f.name)
            if not is_closed(path):
                continue
            try:
                m["files"][f.name] = describe(path)
            except OSError:   # gone meanwhile
                continue
    return m


def describe(path: str) -> dict:
    """The entry of a file, from its frames: the events and time bounds its batch headers
    give (converted with the clock sync in force). Damage ends the description there and
    leaves the bounds open (None): a reader then reads the file."""
    raw = open_regular(path)      # OSError: gone; never a link followed, a FIFO waited on
    if raw is None:
        raise OSError(f"{path} is not a regular file")
    size = os.fstat(raw.fileno()).st_size
    compressed = path.endswith(".gz")
    events, lo, hi, complete = 0, None, None, True
    sync = (0, 1_000_000_000, 0)
    if compressed:
        import gzip   # (here: reading a directory's manifest does not need it)
    with raw, (gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw) as f:
        try:
            for kind, payload in _frames(f):
                if kind == FRAME_HEADER:
                    sync = (0, 1_000_000_000, 0)
                elif kind == FRAME_METADATA:
                    for e in decode_metadata_frame(payload, 0):
                        if isinstance(e, ClockSync):
                            sync = (e.clock_value, e.frequency, e.ns_since_epoch)
                elif kind in EVENT_FRAMES:   # a batch header's fields, or the same in 5.5
                    head = next(iter(unpacker(payload)))
                    count = head[2]
                    if type(count) is not int or count < 0:
                        raise BadEntry("bad batch header")
                    events += count
                    if count and len(head) >= 5 and type(head[3]) is int \
                            and type(head[4]) is int:
                        a, b = (_ns(sync, head[3]), _ns(sync, head[4]))
                        lo = a if lo is None else min(lo, a)
                        hi = b if hi is None else max(hi, b)
                    elif count:
                        complete = False
        except Exception:   # damage of any kind (zlib, msgpack, a map for an array...)
            complete = False
    info = {"state": "compressed" if compressed else "closed", "bytes": size, "events": events,
            "first_ns": lo if complete else None, "last_ns": hi if complete else None}
    if not complete and events == 0:
        info["events"] = -1    # unknown: never skipped
    return info


def _ns(sync: tuple[int, int, int], clock: int) -> int:
    clock_value, freq, ns = sync
    return ns + (clock - clock_value) * 1_000_000_000 // freq


def _frames(f: Any) -> Iterator[tuple[int, bytes]]:
    """(kind, payload) of each frame, events payloads cut to their batch header. Raises
    ValueError at the first damage."""
    while True:
        head = f.read(HEADER_SIZE)
        if not head:
            return
        fields = parse_header(head) if len(head) == HEADER_SIZE else None
        if fields is None or fields[2] > MAX_PAYLOAD:
            raise ValueError("damaged frame")
        kind, flags, length, crc = fields
        if kind == FRAME_EVENTS:   # an escaped head may take twice the bytes
            payload = f.read(min(length, 128 if flags & FLAG_ESCAPED else 64))
            f.seek(length - len(payload), os.SEEK_CUR)
            yield kind, unescape(flags, payload)[1]
            continue
        payload = f.read(length)
        if len(payload) != length or not check_crc(payload, crc):
            raise ValueError("damaged frame")
        payload = unescape(flags, payload)[1]
        if kind == FRAME_HEADER:
            unpack_plain(payload)
        yield kind, payload
