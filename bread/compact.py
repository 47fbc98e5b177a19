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
to temporary files, then merged. The compaction catalog
(``blogformat.catalog``) makes every step crash-safe: see its docstring and
docs/guide.md ("Compaction").

Only what was carried over is deleted, and only inside the directory: an
original in which reading met damage is moved to ``DIR/damaged/`` instead
(its readable events are in the compacted file); every name read from the
catalog is checked (``catalog.load``), and only regular files (never links)
of those names are removed or moved. Whatever is left alone is said to
``warn`` (``bread compact`` then exits 3).
"""

from __future__ import annotations

import fcntl
import gzip
import heapq
import io
import os
import stat
import sys
import tempfile
import time
from typing import Any, BinaryIO, Callable, Iterator

import msgpack

from blogformat import catalog, manifest
from blogformat.entries import (MAX_METADATA_TEXT, MAX_SOURCE_ID, MAX_WRITERS, BatchHeader,
                                ClockSync, Dropped, EnumMember, EventSource, FileHeader, Lost,
                                Metadata, RecordType, Summary, TypeTable, WriterProp,
                                header_payload, metadata_frames, text_size)
from blogformat.values import may_hold_described, renumber
from blogformat.valuetypes import MAX_TYPE_ID, MAX_TYPE_TEXT, Described
from blogformat.fileset import (create_temp, fsync_dir, is_locked, is_regular, members,
                                open_lock, parse)
from blogformat.frames import FRAME_EVENTS, FRAME_HEADER, frame_bytes

from .entries import iter_entries
from .frames import Damage, Frame, iter_frames
from .inputs import name_text, open_path
from .render import escape_controls

#: Events sorted in memory at once before they are spilled to a run file.
RUN_EVENTS = 200_000
#: Events per events frame of a compacted file (one writer's events of a stretch of time).
EVENTS_PER_FRAME = 4096
_SEC = 1_000_000_000

Warn = Callable[[str], None]


def to_stderr(message: str) -> None:
    """The default ``warn``: a line on standard error."""
    sys.stderr.write(f"bread compact: {escape_controls(name_text(message))}\n")


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
            _remove(directory, n, removed, warn, links=True)
        elif n.startswith(catalog.NAME + ".") and n.endswith(".tmp"):   # under the lock: stale
            _remove(directory, n, removed, warn, links=True)
    if c is None:
        return removed
    changed = bool(bad)
    for name, e in list(c["compacted"].items()):
        if e["state"] == "writing":       # not durable yet: the originals stand
            if name in names:
                gone = [o for o in e["replaces"] if o not in names]
                if gone:                  # then it holds the only copy: never removed
                    warn(f"{_shown(directory, name)}: the catalog says it is being written, "
                         f"but {len(gone)} of its originals are gone: left alone")
                    continue
                _remove(directory, name, removed, warn)
            del c["compacted"][name]
            changed = True
        else:                             # durable: the originals go, if any are left
            damaged = set(e.get("damaged", ()))
            left = [o for o in e["replaces"] if o in names]
            if left and not _holds(directory, name, left):
                warn(f"{_shown(directory, name)}: the catalog says it replaces "
                     f"{len(left)} file(s) still here, but it is not a regular file whose "
                     "header says so: they are left alone")
                continue
            for orig in e["replaces"]:
                if orig not in names:
                    continue
                if orig in damaged:       # never deleted: kept aside
                    _keep(directory, orig, name, warn)
                else:
                    _remove(directory, orig, removed, warn)
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


def _shown(directory: str, name: str) -> str:
    """A path for a message: its name as bread names files, control characters escaped."""
    return escape_controls(name_text(os.path.join(directory, name)))


def _remove(directory: str, name: str, removed: list[str], warn: Warn,
            links: bool = False) -> None:
    """Delete the regular file ``name`` of ``directory`` (with ``links``, a link too: a
    planted one at a temporary name); anything else is said to ``warn`` and left alone."""
    path = os.path.join(directory, name)
    if not (is_regular(directory, name) or links and os.path.islink(path)):
        if os.path.lexists(path):
            warn(f"{path}: not a regular file: left alone")
        return
    try:
        os.unlink(path)
        removed.append(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        warn(f"{path}: cannot remove it ({exc.strerror}): left alone")


def _keep(directory: str, name: str, compacted: str, warn: Warn) -> str | None:
    """Move ``name``, an original that held damage, to ``DIR/damaged/``; where it is now,
    said to ``warn``. If it cannot be moved (not a regular file, ``damaged`` a link or not
    ours) it stays where it is, said too (None): never deleted."""
    where = os.path.join(directory, catalog.DAMAGED)
    try:
        if not is_regular(directory, name):
            raise OSError(0, "not a regular file")
        target = _move_aside(directory, name)
    except OSError as exc:
        warn(f"{os.path.join(directory, name)} held damage; its readable events are in "
             f"{compacted}; left in place, not moved to {where}/ ({exc.strerror or exc})")
        return None
    path = os.path.join(where, target)
    warn(f"{os.path.join(directory, name)} held damage: kept as {path} (its readable events "
         f"are in {compacted})")
    return path


def _move_aside(directory: str, name: str) -> str:
    """Rename ``directory/name`` into its ``damaged`` subdirectory (made if missing, never
    through a link, only if it is this user's) under a name not taken there; that name.
    Both directories are fsynced."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(catalog.DAMAGED, dir_fd=dfd)
        except FileExistsError:
            pass
        sub = os.open(catalog.DAMAGED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                      | os.O_CLOEXEC, dir_fd=dfd)
        try:
            if os.fstat(sub).st_uid != os.geteuid():
                raise PermissionError(0, f"{catalog.DAMAGED}/ is another user's")
            target, k = name, 0
            while _exists(target, sub):
                k += 1
                target = f"{name}.{k}"
            os.rename(name, target, src_dir_fd=dfd, dst_dir_fd=sub)
            os.fsync(sub)
            os.fsync(dfd)
        finally:
            os.close(sub)
    finally:
        os.close(dfd)
    return target


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def candidates(directory: str, older_than_ns: int, now_ns: int,
               warn: Warn = to_stderr) -> list[str]:
    """Closed files of the sets in ``directory`` last written before ``now - older_than``:
    regular files (a link is said to ``warn`` and left alone) that no compacted file
    replaces already (an original a crash left, or one kept for its damage)."""
    out = []
    names = os.listdir(directory)
    replaced = catalog.left_out(directory, names)
    found = [f for f in map(parse, names) if f is not None]
    plain = {f.name for f in found if not f.compressed}
    twins = {f.plain_name for f in found if f.compressed and f.plain_name in plain}
    stems = {f.stem for f in found}
    for stem in sorted(stems):
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
                  and not is_locked(path)):
                out.append(f.name)
    return out


class _Runs:
    """Events sorted in bounded memory: runs spilled to temporary files, merged at the end."""

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir
        self.buf: list[tuple] = []
        self.files: list[BinaryIO] = []

    def add(self, rec: tuple) -> None:
        self.buf.append(rec)
        if len(self.buf) >= RUN_EVENTS:
            self._spill()

    def _spill(self) -> None:
        self.buf.sort(key=lambda r: r[:3])
        f = tempfile.TemporaryFile(dir=self.tmpdir)
        pack = msgpack.Packer(use_bin_type=True).pack
        for r in self.buf:
            f.write(pack(r))
        f.seek(0)
        self.files.append(f)
        self.buf = []

    def merged(self) -> Iterator[tuple]:
        if not self.files:
            self.buf.sort(key=lambda r: r[:3])
            yield from self.buf
            return
        if self.buf:
            self._spill()
        its = [iter(msgpack.Unpacker(f, raw=False, use_list=False, max_buffer_size=1 << 30))
               for f in self.files]
        yield from heapq.merge(*its, key=lambda r: r[:3])

    def close(self) -> None:
        for f in self.files:
            f.close()


class Compactor:
    """Merges the events of some files into one sorted stream (see the module docstring)."""

    def __init__(self, tmpdir: str) -> None:
        self.sources: dict[tuple, EventSource] = {}
        self.writers: dict[tuple, WriterProp] = {}
        self.runs = _Runs(tmpdir)
        self.dropped = 0
        self.lost = 0
        self.damage: list[Damage] = []
        self.tz: tuple[int, str] | None = None
        self.descriptors: list[dict] = []
        self._seq = 0      # events taken in so far
        self._text = 0     # characters of the sources' and writers' text (format.md 9.1)
        self.types: dict[tuple, Described] = {}   # descriptions of value types, by content
        self._type_text = 0

    @property
    def events(self) -> int:
        """The events taken in so far."""
        return self._seq

    def add_file(self, path: str) -> bool:
        """Take in every event of ``path`` (damaged ranges are skipped and kept in
        ``damage``); True if it held damage."""
        before = len(self.damage)
        f = open_path(path)
        try:
            self._add(iter_entries(iter_frames(f, path), path, raw_events=True), path)
            error = getattr(f, "error", None)     # compressed data that did not decode
            if error is not None:
                self.damage.append(Damage(getattr(f, "pos", 0), 0, error, path))
        finally:
            f.close()
        return len(self.damage) > before

    def _add(self, entries: Iterator[Any], path: str) -> None:
        sources: dict[int, EventSource] = {}
        writers: dict[int, WriterProp] = {}
        types = TypeTable()
        sync = (0, _SEC, 0)
        desc: dict = {}
        for e in entries:
            t = type(e)
            if t is Frame and e.kind == FRAME_EVENTS:
                if not e.verified:   # never made checksummed, never deleted: left as it is
                    raise TooBig(f"{path}: a frame cut short by the end of the file holds "
                                 "events that can only be read unverified")
                self._frame(e, sources, writers, types, sync, desc, path)
            elif t is FileHeader:
                sources, writers, sync, desc = {}, {}, (0, _SEC, 0), e.descriptor
                types = TypeTable()
                self.descriptors.append(desc)
            elif t is EventSource:
                sources[e.id] = e
            elif t is WriterProp:
                writers[e.id] = e
            elif t is RecordType or t is EnumMember:
                why = types.add(e)
                if why is not None:
                    self.damage.append(Damage(e.offset, 0, f"metadata beyond the limits: {why}",
                                              path))
            elif t is ClockSync:
                sync = (e.clock_value, e.frequency, e.ns_since_epoch)
                if self.tz is None:
                    self.tz = (e.tz_offset, e.tz_name)
            elif t is Dropped:
                self.dropped += e.count
            elif t is Lost:
                self.lost += e.events
            elif t is Damage:
                self.damage.append(e)

    def _source(self, src: EventSource | None, sid: int) -> int:
        if src is None:
            key: tuple = ("?", sid)
        else:
            key = (src.severity, src.category, src.function, src.file, src.line, src.format,
                   src.arg_tags, src.field_names, src.positional, src.arg_names, src.style,
                   src.flags)
        s = self.sources.get(key)
        if s is None:
            size = text_size(src) if src is not None else 1
            if len(self.sources) >= MAX_SOURCE_ID or self._text + size > MAX_METADATA_TEXT:
                raise TooBig("more sources than one stream holds (format.md 9.1)")
            self._text += size
            if src is None:
                s = EventSource(len(self.sources) + 1, 0, "?", "?", "?", 0, "", "")
            else:
                s = EventSource(len(self.sources) + 1, src.severity, src.category, src.function,
                                src.file, src.line, src.format, src.arg_tags, src.field_names,
                                src.positional, arg_names=src.arg_names, style=src.style,
                                flags=src.flags)
            self.sources[key] = s
        return s.id

    def _type(self, types: TypeTable, tid: Any) -> int:
        """The compacted stream's id of the description ``types`` has under ``tid`` (0, which
        no stream describes, for one it has not)."""
        e = types.get(tid)
        if e is None:
            return 0
        key = ((e.type, e.repr_name, e.fields, e.mask) if type(e) is RecordType
               else (e.type, e.name, e.value, type(e.value), e.style))
        got = self.types.get(key)
        if got is None:
            size = e.text_size()
            if len(self.types) >= MAX_TYPE_ID or self._type_text + size > MAX_TYPE_TEXT:
                raise TooBig("more value types than one stream holds (format.md 9.1)")
            self._type_text += size
            new_id = len(self.types) + 1
            got = self.types[key] = (RecordType(new_id, e.type, e.repr_name, e.fields, e.mask)
                                     if type(e) is RecordType else
                                     EnumMember(new_id, e.type, e.name, e.value, e.style))
        return got.id

    def _writer(self, w: WriterProp | None, wid: int, desc: dict) -> int:
        name = w.name if w is not None else ""
        key = (desc.get("host"), desc.get("pid"), desc.get("start_time_ns"), wid, name)
        nw = self.writers.get(key)
        if nw is None:
            if len(self.writers) >= MAX_WRITERS or self._text + len(name) > MAX_METADATA_TEXT:
                raise TooBig("more writers than one stream holds (format.md 9.1)")
            self._text += len(name)
            pid = w.pid if w is not None and w.pid else desc.get("pid", 0)
            nw = WriterProp(len(self.writers) + 1, name, w.thread_ident if w else 0,
                            w.native_id if w else 0, pid if type(pid) is int else 0)
            self.writers[key] = nw
        return nw.id

    def _frame(self, fr: Frame, sources: dict, writers: dict, types: TypeTable, sync: tuple,
               desc: dict, path: str) -> None:
        u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(fr.payload) + 1)
        u.feed(fr.payload)
        try:     # the file is untrusted: anything but the format is damage of the frame
            head = u.unpack()
            if type(head) is not list or len(head) < 3:
                raise ValueError("batch header is not an array of 3 or more")
            wid, clock, count = head[0], head[1], head[2]
            if type(wid) is not int or type(clock) is not int or type(count) is not int:
                raise ValueError("batch header fields are not integers")
            new_wid = self._writer(writers.get(wid), wid, desc)
            cv, freq, ns0 = sync
            for _ in range(count):
                n = u.read_array_header()
                sid = u.unpack()
                delta = u.unpack()
                if n < 3 or type(sid) is not int or type(delta) is not int:
                    raise ValueError("an event is not [source id, clock delta, args...]")
                clock += delta
                start = u.tell()
                for _ in range(n - 2):
                    u.skip()
                raw = fr.payload[start:u.tell()]
                if may_hold_described(raw):   # ids of this stream's descriptions: the
                    # compacted one's (0, described by none, where this stream has none)
                    raw = renumber(raw, lambda tid: self._type(types, tid))
                ns = ns0 + (clock - cv) * _SEC // freq
                if not -(1 << 63) <= ns < 1 << 63:
                    raise ValueError("a time beyond 64 bits of nanoseconds")
                self._seq += 1
                self.runs.add((ns, new_wid, self._seq, self._source(sources.get(sid), sid),
                               n, raw))
        except (ValueError, TypeError, IndexError, msgpack.OutOfData,
                msgpack.ExtraData, msgpack.FormatError, msgpack.StackError,
                RecursionError) as exc:
            self.damage.append(Damage(fr.offset, fr.size,
                                      f"undecodable frame: {exc}", path))

    def write(self, out: io.BufferedIOBase, replaces: list[str]) -> int:
        """Write the compacted stream to ``out``; the number of events.

        Its descriptor is the first original's (host, pid, program...: the events'
        origin), marked ``compacted`` and listing every original the file replaces.
        """
        descriptor = dict(self.descriptors[0]) if self.descriptors else {}
        descriptor.update(compacted=True, replaces=replaces, compacted_by="bread",
                          compacted_ns=time.time_ns())
        out.write(frame_bytes(FRAME_HEADER, header_payload(descriptor)))
        tz = self.tz or (0, "UTC")
        meta: list[Metadata] = [ClockSync(0, _SEC, 0, tz[0], tz[1]), *self.sources.values(),
                *self.types.values(), *self.writers.values()]
        if self.dropped:
            meta.append(Dropped(0, self.dropped, time.time_ns()))
        if self.lost:
            meta.append(Lost(self.lost, 0, time.time_ns()))
        self._metadata(out, meta)
        counts: dict[int, int] = {}
        n, lo, hi = 0, None, None
        chunk: list[tuple] = []
        for rec in self.runs.merged():
            chunk.append(rec)
            if len(chunk) >= EVENTS_PER_FRAME:
                self._events(out, chunk, counts)
                chunk = []
            n += 1
            lo = rec[0] if lo is None else lo
            hi = rec[0]
        if chunk:
            self._events(out, chunk, counts)
        self._metadata(out, [Summary(n, lo or 0, hi or 0, self.dropped, self.lost, counts,
                                     time.time_ns())])
        self.runs.close()
        return n

    @staticmethod
    def _metadata(out: io.BufferedIOBase, entries: list[Metadata]) -> None:
        for fr in metadata_frames(entries):
            out.write(fr)

    @staticmethod
    def _events(out: io.BufferedIOBase, chunk: list[tuple], counts: dict[int, int]) -> None:
        """One frame per writer of a stretch of sorted events, each in time order."""
        by_writer: dict[int, list[tuple]] = {}
        for rec in chunk:
            by_writer.setdefault(rec[1], []).append(rec)
        pack = msgpack.packb
        for wid, recs in by_writer.items():
            base = prev = recs[0][0]
            parts = []
            for ns, _w, _s, sid, n, raw in recs:
                head_n = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
                parts.append(head_n + pack(sid) + pack(ns - prev) + raw)
                prev = ns
                counts[sid] = counts.get(sid, 0) + 1
            head = BatchHeader(wid, base, len(recs), recs[0][0], recs[-1][0])
            out.write(frame_bytes(FRAME_EVENTS, head.encode() + b"".join(parts)))


def compact(directory: str, older_than_ns: int, *, period_ns: int = 86400 * _SEC,
            now_ns: int | None = None, dry_run: bool = False,
            log: Any = None, warn: Warn = to_stderr) -> list[dict]:
    """Compact the closed files of ``directory`` older than ``older_than_ns``; one compacted
    file per set and period. Returns what was done (or would be, with ``dry_run``): with
    ``kept``, the originals that held damage and where they are now (module docstring).
    What is left alone (such originals, names in the catalog that are not the directory's
    own regular files) is said to ``warn`` (default: standard error).

    Raises BlockingIOError if another compaction of the directory is running.
    """
    now = time.time_ns() if now_ns is None else now_ns
    lock = open_lock(os.path.join(directory, catalog.LOCK))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not dry_run:
            finish_interrupted(directory, warn)
            _forget(directory, [])    # the manifest's stale entries and temporary files
        groups: dict[tuple[str, int], list[str]] = {}
        for name in candidates(directory, older_than_ns, now, warn):
            f = parse(name)
            assert f is not None
            groups.setdefault((f.stem, f.time_ns // period_ns * period_ns), []).append(name)
        done = []
        for (stem, start), names in sorted(groups.items()):
            plan = {"stem": stem, "period_start_ns": start, "replaces": names}
            if not dry_run:
                plan.update(_one(directory, stem, start, names, warn))
            done.append(plan)
            if log is not None:
                log(plan)
        return done
    finally:
        os.close(lock)


class TooBig(RuntimeError):
    """What one process's files hold passes the limits of one stream (format.md 9.1), or
    cannot be copied whole (a frame cut short: its events are unverified)."""


def _one(directory: str, stem: str, start: int, names: list[str], warn: Warn) -> dict:
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
            for pid, group in sorted(by_pid.items()):
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
                events += comp.write(gz, names)
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
            kept[n] = _keep(directory, n, name, warn)
        else:
            _remove(directory, n, [], warn)
    fsync_dir(directory)
    _forget(directory, names)
    return {"compacted": name, "events": events, "damage": [str(d) for d in damage],
            "kept": kept}


def _forget(directory: str, names: list[str]) -> None:
    """Drop the originals' entries from the manifest (made again if it is damaged)."""
    gone = set(names)
    manifest.update(directory, lambda m: [m["files"].pop(n, None) for n in gone],
                    lambda p: not is_locked(p))
