"""The manifest's journal: shipping marks appended between two rewrites of the manifest.

``DIR/blog-manifest.journal`` (docs/format.md section 14) holds lines of JSON: a header
``{"journal_version": 1, "id": HEX}`` (a new random id each time the journal is made
anew), then records, each a change of one manifest entry::

    {"claim": NAME, "pid": PID}     process PID ships NAME now ("shipping": PID)
    {"release": NAME}               its hook failed: nobody ships it ("shipping" removed)
    {"shipped": NAME}               its hook returned ("shipped": true, "shipping" removed)

Records are appended (one ``write`` each) under the manifest's lock; a reader applies
them in order to the entries of the manifest. A line that is not a whole record (torn by
a crash, damaged) is passed over. Each record sets what it says, so applying one twice
changes nothing: a journal already folded into the manifest, read again after a crash,
is harmless. Rewriting the manifest folds the journal in, then deletes it
(``blogstore.manifest``); the next record makes it anew, with a new id.
"""

from __future__ import annotations

import errno
import os
import stat

from . import posix
from blogformat.typinglite import TYPE_CHECKING, NamedTuple
from .fileset import replace_durably

if TYPE_CHECKING:
    from typing import Any

NAME = "blog-manifest.journal"
VERSION = 1
#: A journal larger than this is taken for damaged (the manifest's own limit).
MAX_BYTES = 64 << 20
_PID_LIMIT = 1 << 31


class Read(NamedTuple):
    """What ``read`` found: the journal's id (None: no journal, or none with a header),
    the offset read to (the end of its last whole line), its records, and whether they
    follow on from the offset asked for (False: read from the start)."""

    id: str | None
    end: int
    records: list[dict]
    follows: bool


def read(directory: str, since: tuple[str | None, int] = (None, 0)) -> Read:
    """The records of the directory's journal: those after ``since`` (an id and offset a
    previous ``read`` returned) if the journal is still that one, else all of them."""
    try:
        fd = os.open(os.path.join(directory, NAME),
                     os.O_RDONLY | posix.O_NONBLOCK | posix.O_NOFOLLOW | posix.O_CLOEXEC)
    except OSError:
        return Read(None, 0, [], False)
    try:
        jid, body, size = _head(fd)
        if jid is None:
            return Read(None, 0, [], False)
        follows = jid == since[0] and body <= since[1] <= size
        start = since[1] if follows else body
        raw = _pread_all(fd, size - start, start)
    except OSError:
        return Read(None, 0, [], False)
    finally:
        os.close(fd)
    whole = raw[:raw.rfind(b"\n") + 1]       # a torn last line is no record (yet)
    return Read(jid, start + len(whole), [r for line in whole.splitlines()
                                          if (r := _record(line)) is not None], follows)


def append(directory: str, record: dict, *, durable: bool) -> tuple[str, int]:
    """Append ``record`` (under the manifest's lock); with ``durable``, fsync it before
    returning. Makes the journal anew if it is missing or has no header. Returns the
    journal's id and its end (what ``read`` would return as ``since``)."""
    import json   # (imported where a journal is written or read: bread reading a file never)
    line = json.dumps(record, sort_keys=True).encode() + b"\n"
    path = os.path.join(directory, NAME)
    flags = os.O_RDWR | os.O_APPEND | posix.O_NONBLOCK | posix.O_NOFOLLOW | posix.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:          # missing; or a link, a directory...: never followed
        fd = -1
    try:
        jid = _head(fd)[0] if fd >= 0 else None
        if jid is None:
            if fd >= 0:
                os.close(fd)
                fd = -1
            jid = make(directory)
            fd = os.open(path, flags)
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            line = b"\n" + line   # after a torn line: that one stays apart, passed over
        if os.write(fd, line) != len(line):   # (the disk full): a torn line, passed over
            raise OSError(errno.ENOSPC, "the manifest's journal was cut short", path)
        if durable:
            os.fsync(fd)
        return jid, end + len(line)
    finally:
        if fd >= 0:
            os.close(fd)


def make(directory: str) -> str:
    """Make the journal anew, empty (its header only), durably (under the manifest's
    lock): its new id."""
    jid = os.urandom(16).hex()
    replace_durably(directory, NAME,
                    _dumps({"journal_version": VERSION, "id": jid}).encode() + b"\n")
    return jid


def remove(directory: str) -> None:
    """Delete the journal (under the manifest's lock, once the manifest holds what it said;
    not durably: found again after a power loss, it is applied again, harmlessly)."""
    try:
        os.unlink(os.path.join(directory, NAME))
    except OSError:   # gone; or a directory planted there: left alone (never read)
        pass


def apply(files: dict[str, dict], records: list[dict]) -> None:
    """Apply ``records`` in order to a manifest's ``files`` (a record naming no entry is
    passed over)."""
    for r in records:
        if "claim" in r:
            e = files.get(r["claim"])
            if e is not None:
                e["shipping"] = r["pid"]
        elif "release" in r:
            e = files.get(r["release"])
            if e is not None:
                e.pop("shipping", None)
        else:
            e = files.get(r["shipped"])
            if e is not None:
                e.pop("shipping", None)
                e["shipped"] = True


def _head(fd: int) -> tuple[str | None, int, int]:
    """The open journal's id (None unless it is a regular file with a header), where its
    records start, and its size."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
        return None, 0, 0
    first = os.pread(fd, 256, 0)
    cut = first.find(b"\n")
    h = _json(first[:cut]) if cut > 0 else None
    if (type(h) is dict and h.get("journal_version") == VERSION and type(h.get("id")) is str
            and len(h) == 2):
        return str(h["id"]), cut + 1, st.st_size
    return None, 0, 0


def _record(line: bytes) -> dict | None:
    """A record of the right shape (input: anything else is passed over)."""
    r = _json(line)
    if type(r) is not dict:
        return None
    if len(r) == 2 and type(r.get("claim")) is str:
        pid = r.get("pid")
        return r if type(pid) is int and 0 < pid < _PID_LIMIT else None
    if len(r) == 1 and (type(r.get("release")) is str or type(r.get("shipped")) is str):
        return r
    return None


def _dumps(obj: Any) -> str:
    import json
    return json.dumps(obj)


def _json(line: bytes) -> Any:
    try:
        import json
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        b = os.pread(fd, min(n, 1 << 20), offset)
        if not b:
            break
        parts.append(b)
        n -= len(b)
        offset += len(b)
    return b"".join(parts)
