"""Inputs: what bread reads. Paths, globs, directories, ``-`` for standard input; gzip by content.

A directory stands for its log files (names ending ``.blog`` or ``.blog.gz``)
in name order, which for a rotated set is time order (``blogstore.fileset``);
of ``x.blog`` and ``x.blog.gz`` (a compression under way) only ``x.blog`` is read.
Of compacted files and the originals they replace (``bread compact``), one
or the other is read, never both (``blogstore.catalog``). Reading a time
window, files that the directory's manifest
(``blogstore.manifest``) shows to be outside it are not opened (``prune``). A pattern is expanded
here too (for shells that do not, and for the library); a path that exists is
never taken for a pattern. A rotated set's base name (``logs/app.blog``, the name given to
``blog.basic_config``), which names no file, stands for the set's files by the same rules
(``set_files``). A gzip-compressed input is recognized by its first
bytes, not its name, and read through ``gzip``; a compressed stream cut short
ends the input and is reported as damage. A URL (``s3://``, ``gs://``, ``hdfs://``,
``file://``) is read from its store by ``bread.objectstore``, by the same rules.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
import sys
import zlib
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Mapping

from blogstore import catalog, manifest
from blogstore.fileset import LOG_SUFFIXES, is_regular, members, split_base
from blogstore.posix import O_CLOEXEC, O_NOFOLLOW, O_NONBLOCK

if TYPE_CHECKING:
    from .objectstore import Store

#: The schemes of the URLs read from object storage (``bread.objectstore``).
URL_SCHEMES = ("s3", "gs", "gcs", "hdfs", "file")
GZIP_MAGIC = b"\x1f\x8b"
_PIECE = 4096   # compressed bytes per zlib call
STDIN = "-"


def is_url(name: object) -> bool:
    """True for a URL of object storage (``s3://bucket/logs/``; ``URL_SCHEMES``)."""
    if not isinstance(name, str):
        return False
    scheme, sep, _ = name.partition("://")
    return bool(sep) and scheme.lower() in URL_SCHEMES


def object_store(names: Iterable[Any], options: Mapping[str, Any] | None = None
                 ) -> Store | None:
    """The store (``bread.objectstore.Store``, with ``options`` for its file systems) of the
    URLs among ``names``; None if there is none (then nothing of it is imported)."""
    if not any(is_url(n) for n in names):
        return None
    from .objectstore import Store
    return Store(options)


def expand(names: Iterable[str | os.PathLike], store: Store | None = None) -> list[str]:
    """The files that ``names`` stand for, in order; ``-`` (standard input) stays; a URL's
    files are found by ``store`` (``object_store``).

    Raises FileNotFoundError for a pattern that matches nothing and for a
    directory without log files (naming it), so that nothing is silently read.
    """
    out: list[str] = []
    for n in names:
        name = os.fspath(n)
        if name == STDIN:
            out.append(name)
        elif is_url(name):
            out.extend(_store(store, name).expand(name))
        elif os.path.isdir(name):
            out.extend(_directory(name))
        elif not os.path.lexists(name) and (found := set_files(name)):
            out.extend(found)
        elif not os.path.exists(name) and glob.has_magic(name):
            # Found, not named: only directories and regular files, never through a link
            # (a FIFO would hang bread in open(), a device feed it for ever, a planted link
            # show a file from elsewhere), as in a directory's listing.
            matches = _compaction(sorted(m for m in glob.glob(name) if _kind(m) in "dr"))
            if not matches:
                raise FileNotFoundError(errno.ENOENT, "no file matches the pattern", name)
            for m in matches:
                out.extend(_directory(m) if _kind(m) == "d" else [m])
        else:
            out.append(name)
    return out


def set_files(base: str) -> list[str]:
    """The files of the rotated set whose base name is ``base`` (``logs/app.blog``: the
    set ``app`` of ``logs``), as its directory gives them (``_directory``'s rules:
    compacted files or their originals, no link); empty if there are none."""
    try:
        directory, stem = split_base(base)
    except ValueError:          # "logs/.blog" names no set
        return []
    if not os.path.isdir(directory):
        return []
    own = {f.name for f in members(directory, stem)}
    own.update(f.name for f, _ in catalog.compacted_files(directory, stem))
    if not own:
        return []
    try:
        listed = _directory(directory)
    except FileNotFoundError:
        return []
    return [p for p in listed if os.path.basename(p) in own]


def name_text(name: object) -> str:
    """An input's name as bread shows and stores it (messages, columns, JSON): valid UTF-8.

    ``os.fsdecode(name)`` (bytes too), each lone surrogate in it replaced by U+FFFD: a
    file name whose bytes are not UTF-8 (``b"bad\\xff.blog"``, which Python names
    ``"bad\\udcff.blog"``) is ``"bad\\ufffd.blog"``, which an Arrow column, a JSON line
    and a UTF-8 stream all take. Anything else (a file object's number) as ``str`` has it.
    """
    try:
        text = os.fsdecode(name)  # type: ignore[arg-type]
    except TypeError:
        return str(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def prune(paths: list[str], since: int | None, until: int | None,
          manifests: dict | None = None, store: Store | None = None
          ) -> tuple[list[str], list[str]]:
    """``paths`` without the files that the manifest of their directory shows to hold no
    event in ``[since, until)`` (ns): (kept, skipped). A file is skipped only if its
    manifest entry matches it (same size): the files win over the manifest, and a file
    without an entry is kept. ``manifests`` caches the manifests loaded, by directory;
    the URLs' are the ``store``'s (those that found them: ``expand``)."""
    if since is None and until is None:
        return list(paths), []
    cache = {} if manifests is None else manifests
    kept, skipped = [], []
    for p in paths:
        if p == STDIN or (is_url(p) and not _store(store, p).outside(p, since, until)):
            kept.append(p)
            continue
        if is_url(p):
            skipped.append(p)
            continue
        directory, name = os.path.split(p)
        directory = directory or "."
        if directory not in cache:
            cache[directory] = manifest.load(directory)
        m = cache[directory]
        e = m["files"].get(name) if m is not None else None
        if (e is not None and manifest.outside(e, since, until)
                and manifest.usable(directory, name, e)):
            skipped.append(p)
        else:
            kept.append(p)
    return kept, skipped


def _compaction(paths: list[str]) -> list[str]:
    """The matches of a pattern, by the rules of a directory: no file being made
    (``.tmp``, ``.new``), no ``x.blog.gz`` beside its ``x.blog``, compacted files or
    the originals they replace, never both (``blogstore.catalog.left_out``), and not
    the ``damaged`` directory of originals compaction kept (their readable events are in
    a compacted file; named alone, it is read)."""
    by_dir: dict[str, list[str]] = {}
    for p in paths:
        d, n = os.path.split(p)
        by_dir.setdefault(d, []).append(n)
    skip: set[str] = set()
    for d, ns in by_dir.items():
        have = set(os.listdir(d or "."))
        skip |= {os.path.join(d, n) for n in catalog.left_out(d or ".", ns)}
        skip |= {os.path.join(d, n) for n in ns if n.endswith((".tmp", ".new"))
                 or (n.endswith(".blog.gz") and n[:-3] in have)
                 or (n == catalog.DAMAGED and os.path.isdir(os.path.join(d, n)))}
    return [p for p in paths if p not in skip]


def _kind(path: str) -> str:
    """``"d"`` for a directory, ``"r"`` for a regular file, else ``"-"``: the entry itself,
    never what a link at it leads to."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "-"
    return "d" if stat.S_ISDIR(mode) else "r" if stat.S_ISREG(mode) else "-"


def _directory(path: str) -> list[str]:
    names = set(os.listdir(path))
    # ``x.blog`` beside ``x.blog.gz``: a compression not yet finished (blog.files.housekeeping);
    # both are complete copies, so only the original is read.
    skip = catalog.left_out(path, names)     # compaction: originals or compacted, never both
    files = sorted(f for f in names if f.endswith(LOG_SUFFIXES) and f not in skip
                   and not (f.endswith(".gz") and f[:-3] in names)
                   and is_regular(path, f))      # (never a link: it may lead anywhere)
    if not files:
        raise FileNotFoundError(errno.ENOENT, "no log files (*.blog, *.blog.gz) in the directory",
                                path)
    return [os.path.join(path, f) for f in files]


class GzipInput:
    """A gzip stream (one member or several) read as the bytes it holds.

    Damage or a stream cut short ends it, with everything decompressed
    before it given out, and is kept in ``error``. If it does not decode
    from its very start (bytes that only looked like gzip's header) and the
    file can go back, it is read as it is instead.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._start = raw.tell() if seekable(raw) else None
        self._d = zlib.decompressobj(31)      # 31: a gzip header and trailer
        self._fed = False                      # the current member has begun
        self._fed_any = False                  # any compressed byte has been given to zlib
        self._first_piece = True
        self._buf = bytearray()
        self._eof = False
        self._plain = False
        self.error: str | None = None
        self.pos = 0           # bytes given out so far (offsets in bread are of these)
        self.name = getattr(raw, "name", "<gzip>")

    def read(self, n: int = -1) -> bytes:
        if self._plain:
            return self._raw.read(n)
        want = n if n >= 0 else 1 << 62
        while len(self._buf) < want and not self._eof:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                self._eof = True
                # (a stream that failed, an object whose store failed: its own reason)
                self.error = getattr(self._raw, "error", None) or (
                    "compressed data cut short" if self._fed else None)
                break
            # In pieces: zlib gives nothing of a call that fails, so the piece with the
            # damage is inflated again, in small steps, from a copy of the state before it
            # (a copy costs about 2% of inflating the piece).
            for k in range(0, len(chunk), _PIECE):
                piece = chunk[k:k + _PIECE]
                before, held = self._d.copy(), len(self._buf)
                try:
                    self._inflate(piece)
                except zlib.error as exc:
                    self._eof = True
                    if len(self._buf) == held:   # (else a member ended in it: kept that)
                        self._salvage(before, piece)
                    # Nothing came out of the first piece: it was never gzip (bytes that
                    # only looked like its header), if the file can go back.
                    if (self.pos == 0 and not self._buf and self._start is not None
                            and self._first_piece):
                        self._raw.seek(self._start)    # not gzip after all
                        self._plain = True
                        return self._raw.read(n)
                    self.error = f"compressed data damaged ({exc})"
                    break
        out = bytes(self._buf[:want])
        del self._buf[:want]
        self.pos += len(out)
        return out

    def _salvage(self, d: Any, piece: bytes) -> None:
        """A piece failed: inflate it again with ``d`` (the state before it) in small steps,
        keeping what came out before the damage (zlib gives nothing of a call that fails)."""
        try:
            for j in range(0, len(piece), 64):
                self._buf += d.decompress(piece[j:j + 64])
                if d.eof:
                    break
        except zlib.error:
            pass

    def _inflate(self, chunk: bytes) -> None:
        self._first_piece = not self._fed_any
        self._fed_any = True
        self._fed = True
        self._buf += self._d.decompress(chunk)
        while self._d.eof:                     # a member ended; another may follow
            rest = self._d.unused_data
            self._d = zlib.decompressobj(31)
            self._fed = bool(rest)
            if not rest:
                return
            self._buf += self._d.decompress(rest)

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def seekable(f: BinaryIO) -> bool:
    try:
        return bool(f.seekable())
    except Exception:
        return False


class _Prefixed:
    """The bytes already read from a stream that cannot go back, then the rest of it."""

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head = head
        self._raw = raw
        self.name = getattr(raw, "name", "<stream>")

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0:
                data, self._head = self._head + self._raw.read(), b""
                return data
            data, self._head = self._head[:n], self._head[n:]
            if len(data) < n:
                data += self._raw.read(n - len(data))
            return data
        return self._raw.read(n)

    @property
    def error(self) -> str | None:
        """What ended the stream early (a GzipInput's damage), None if nothing did."""
        return getattr(self._raw, "error", None)

    @property
    def pos(self) -> int:
        """Bytes given out so far, where the stream counts them (a GzipInput)."""
        return getattr(self._raw, "pos", 0) - len(self._head)

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def peek(f: BinaryIO, n: int) -> tuple[bytes, BinaryIO]:
    """The first ``n`` bytes of ``f`` (fewer at its end), and ``f`` to read from its start
    again: ``f`` itself gone back if it can seek, else the bytes read then the rest of it."""
    head = f.read(n)   # read, not peek: a pipe may have fewer bytes buffered so far
    if seekable(f):
        f.seek(-len(head), os.SEEK_CUR)
        return head, f
    return head, _Prefixed(head, f)  # type: ignore[return-value]


def decompressing(f: BinaryIO) -> BinaryIO:
    """``f``, or a GzipInput over it if it starts with gzip's magic bytes."""
    head, f = peek(f, 4)
    # gzip's magic, the deflate method, and no reserved flag bit set
    gz = len(head) == 4 and head[:3] == GZIP_MAGIC + b"\x08" and not head[3] & 0xE0
    return GzipInput(f) if gz else f   # type: ignore[return-value]


def open_path(name: str, store: Store | None = None, *, found: bool = False) -> BinaryIO:
    """A path (or ``-``, or a URL: read by ranges from ``store``) opened for reading,
    decompressed if it is gzip. ``found``: a file found in a directory or by a pattern,
    not named: only a regular file, opened without waiting nor following a link (a FIFO
    or a link put at its name since it was listed is OSError, never a reader blocked for
    good)."""
    if name == STDIN:
        return decompressing(sys.stdin.buffer)
    if is_url(name):
        return decompressing(_store(store, name).open(name))  # type: ignore[arg-type]
    if not found:
        return decompressing(open(name, "rb"))
    fd = os.open(name, os.O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (it was when its directory was "
                      "listed)", name)
    return decompressing(open(fd, "rb"))


def store_error(f: Any) -> str | None:
    """Why the store failed a read of an object opened by ``open_path`` (a
    ``bread.objectstore.RangedFile``, or the gzip stream over one); None if none did."""
    return getattr(f._raw if isinstance(f, GzipInput) else f, "error", None)


def _store(store: Store | None, url: str) -> Store:
    """``store``, or one without options for a URL met without one."""
    return store if store is not None else object_store([url])  # type: ignore[return-value]


def spool(f: BinaryIO) -> BinaryIO:
    """A seekable copy of a stream that cannot go back (standard input, a pipe): on disk,
    so that memory stays bounded however long the stream."""
    import shutil   # (here: it imports bz2 and lzma; tempfile imports random)
    import tempfile
    tmp = tempfile.TemporaryFile()
    shutil.copyfileobj(f, tmp, 1 << 20)
    tmp.seek(0)
    return tmp
