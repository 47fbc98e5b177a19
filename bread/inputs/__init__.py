"""Inputs: what bread reads, found once, opened, and said what it is.

``Inputs`` finds what a source stands for (``bread.read``'s: paths, patterns,
directories, sets' base names, ``-`` for standard input, URLs of object storage,
binary file objects), once, in order (``expand``); each is an ``Input``, which opens it
(decompressed if it is gzip) and, by its first bytes, says what it is (``kind_of``): a
blog file, or a C++ binlog file (``bread.cxx``). The command line, ``Reader`` and the
Spark data source all find, open and judge their inputs here.

A directory stands for its log files (names ending ``.blog`` or ``.blog.gz``) in name
order, which for a rotated set is time order (``blogstore.fileset``); of ``x.blog`` and
``x.blog.gz`` (a compression under way) only ``x.blog`` is read. Of compacted files and
the originals they replace (``bread compact``), one or the other is read, never both
(``blogstore.catalog``). Reading a time window, files that the directory's manifest
(``blogstore.manifest``) shows to be outside it are not opened (``Inputs.kept``). A
pattern is expanded here too (for shells that do not, and for the library); a path that
exists is never taken for a pattern. A rotated set's base name (``logs/app.blog``, the
name given to ``blog.basic_config``), which names no file, stands for the set's files by
the same rules (``set_files``).

A gzip-compressed input is recognized by its first bytes, not its name, and read
through ``zlib`` (``compressed``); a compressed stream cut short ends the input and is
reported as damage. A URL (``s3://``, ``gs://``, ``hdfs://``, ``file://``) is read from
its store (``objectstore``, its listings bounded by ``lister``), by the same rules.
Following (``bread -F``): ``follow`` (a directory, a set) and ``tail`` (a file as it grows).
"""

from __future__ import annotations

import errno
import glob
import io
import os
import re
import stat
import sys

from blogformat.typinglite import TYPE_CHECKING
from blogformat.frames import MAGIC
from blogstore import catalog, manifest
from blogstore.fileset import LOG_SUFFIXES, is_regular, members, split_base
from blogstore.posix import O_CLOEXEC, O_NOFOLLOW, O_NONBLOCK

from ..errors import ListingCut
from ..frames import Damage
from .compressed import GzipInput, decompressing, peek, seekable

if TYPE_CHECKING:
    from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Union

    from .objectstore import Store

#: The schemes of the URLs read from object storage (``bread.inputs.objectstore``).
URL_SCHEMES = ("s3", "gs", "gcs", "hdfs", "file")
STDIN = "-"
#: What an input is, by its first bytes (``kind_of``): a blog file, or a C++ binlog file.
#: Anything else is read as a blog file (its damage; ``NotABlogFile`` if it was named).
BLOG, CXX = "blog", "cxx"
#: The first bytes that tell them apart (``bread.cxx.entries.is_binlog`` reads 12).
HEAD = 12

#: What bread reads: a path (a file, a directory of log files, a glob pattern, or "-" for
#: standard input), a URL of object storage (``s3://``, ``gs://``, ``hdfs://``, ``file://``:
#: a file, a prefix, a pattern), a binary file object, or a list of them. gzip is read
#: transparently. (A type checker's name: typing is not imported when bread runs.)
if TYPE_CHECKING:
    Source = Union[str, "os.PathLike[str]", BinaryIO,
                   Iterable[Union[str, "os.PathLike[str]", BinaryIO]]]


def kind_of(head: bytes) -> str:
    """What the input whose first bytes are ``head`` is: ``BLOG`` or ``CXX``. The C++
    reading (``bread.cxx.entries``) is loaded only for an input that does not begin as a
    blog file does (its frame marker)."""
    if head[:len(MAGIC)] == MAGIC:
        return BLOG
    from ..cxx.entries import is_binlog
    return CXX if is_binlog(head) else BLOG


def sniff(f: BinaryIO) -> tuple[str, BinaryIO]:
    """The ``kind_of`` an opened input, and the input to read from its start again."""
    head, f = peek(f, HEAD)
    return kind_of(head), f


class Input:
    """One input, found: a file (its path), standard input (``-``), an object of object
    storage (its URL, read through ``store``) or a binary file object.

    ``name`` is its name as bread shows it (``paths.name_text``: valid UTF-8). ``named``:
    it was given itself, not found in a directory, by a pattern or in a listing; one that
    is not a blog file is then an error (``NotABlogFile``), not damage, and a file found is
    opened only if it is a regular file, never through a link (``open_path``).
    """

    __slots__ = ("source", "named", "store", "name", "url", "_reopen")

    def __init__(self, source: str | BinaryIO, named: bool, store: Store | None = None, *,
                 name: str | None = None, start: int | None = None) -> None:
        self.source = source
        self.named = named
        self.store = store
        stream = not isinstance(source, str)
        self.name = name if name is not None else name_text(
            getattr(source, "name", "<stream>") if stream else source)
        self.url = is_url(source)
        #: For ``again``: the start of a stream that each ``open`` reads from again.
        self._reopen = start

    def open(self) -> BinaryIO:
        """Its bytes from the start, decompressed if it is gzip (OSError if it does not
        open). A path or a URL is opened anew at each call; standard input and a file
        object are the one stream they are (``again``: an input that opens again)."""
        src = self.source
        if self._reopen is not None:
            return _Reopened(src, self._reopen)   # type: ignore[arg-type, return-value]
        if not isinstance(src, str):
            if isinstance(src, io.TextIOBase):
                raise TypeError("bread needs a binary file object (open the file with 'rb')")
            return decompressing(src)
        if src == STDIN:
            return decompressing(sys.stdin.buffer)
        return open_path(src, self.store, found=not self.named)

    def opened(self, damage: list[Damage]) -> BinaryIO | None:
        """``open``; None for an object listed that does not open (deleted since, its store
        failing): noted in ``damage``, naming it, so that the other inputs are read."""
        try:
            return self.open()
        except OSError as exc:
            if not self.url:
                raise
            damage.append(Damage(0, 0, f"the object does not open: {exc.strerror}", self.name))
            return None

    def close(self, f: BinaryIO) -> None:
        """Close what ``open`` gave, unless it is standard input or a caller's file object."""
        if isinstance(self.source, str) and self.source != STDIN:
            f.close()

    def again(self) -> Input:
        """This input, opened again at each ``open`` from its start (sorting reads each input
        twice): itself for a path or a URL; a stream that cannot go back (standard input, a
        pipe) copied first to a temporary file."""
        src = self.source
        if isinstance(src, str):
            if src != STDIN:
                return self
            raw = spool(sys.stdin.buffer)
        else:
            if isinstance(src, io.TextIOBase):
                raise TypeError("bread needs a binary file object (open the file with 'rb')")
            raw = src if seekable(src) else spool(src)
        return Input(raw, self.named, self.store, name=self.name, start=raw.tell())

    def kind(self) -> str:
        """What it is (``kind_of``) by its first bytes, read through a path's or URL's own
        opening, closed after; standard input is peeked, left unread (gzip there is not
        looked into: a blog file)."""
        if self.source == STDIN:
            stdin = sys.stdin.buffer
            look = getattr(stdin, "peek", None)
            return kind_of(look(HEAD)[:HEAD] if look is not None else b"")
        f = self.open()
        try:
            return kind_of(f.read(HEAD))
        finally:
            self.close(f)

    def check(self) -> None:
        """OSError if it does not open (a FIFO is not waited on): a path's, found early."""
        if isinstance(self.source, str) and self.source != STDIN and not self.url:
            os.close(os.open(self.source, os.O_RDONLY | O_NONBLOCK | O_CLOEXEC))

    def ended(self, f: BinaryIO) -> Damage | None:
        """The damage that ended ``f`` (what ``open`` gave) early: a gzip stream's, a URL's
        read that failed; None if nothing did."""
        if isinstance(f, (GzipInput, _Reopened)) or self.url:
            error: str | None = getattr(f, "error", None)
            if error is not None:
                return Damage(getattr(f, "pos", 0), 0, error, self.name)
        return None

    def store_error(self, f: BinaryIO) -> str | None:
        """Why the store failed a read of this object opened (``f``, or the gzip stream over
        it); None for a file, or if it did not."""
        if not self.url:
            return None
        return getattr(f._raw if isinstance(f, GzipInput) else f, "error", None)


class Inputs:
    """The inputs ``source`` (what ``bread.read`` takes) stands for, in order: iterate for
    each ``Input``, with a URL's listing that was cut at its bounds (``ListingCut``, not
    raised) in its place. Found anew at each iteration (``paths.expand``); ``found()``
    finds them once for good. ``kept(since, until)`` leaves out the files that their
    directory's manifest shows to hold no event in that window (listed in ``skipped``).

    TypeError (at once) for what bread cannot read: bytes, a str, a text file object.
    """

    def __init__(self, source: Source, store: Store | None = None,
                 storage_options: Any = None) -> None:
        if isinstance(source, (str, os.PathLike)) or hasattr(source, "read"):
            sources: list[Any] = [source]
        elif isinstance(source, (bytes, bytearray, memoryview)):
            raise TypeError("bread.read takes a path or a binary file object; "
                            "wrap bytes in io.BytesIO")
        else:
            sources = list(source)
            for s in sources:
                if not isinstance(s, (str, os.PathLike)) and not hasattr(s, "read"):
                    raise TypeError(f"cannot read from {type(s).__name__}")
        self.sources = sources
        #: The store of the URLs among them (None if there is none: nothing of it loaded).
        self.store = store if store is not None else object_store(sources, storage_options)
        self.skipped: list[str] = []     # files left unread: outside the time window
        self._manifests: dict = {}
        self._found: list[Input | ListingCut] | None = None

    @classmethod
    def of(cls, found: list[Input | ListingCut], store: Store | None = None) -> Inputs:
        """Inputs found before, elsewhere (``bread stats``: one reader per file)."""
        return cls([inp.source for inp in found if isinstance(inp, Input)], store)._as(found)

    def __iter__(self) -> Iterator[Input | ListingCut]:
        if self._found is not None:
            yield from self._found
            return
        for s in self.sources:
            if hasattr(s, "read"):
                yield Input(s, True, self.store)
                continue
            try:
                paths = expand([s], self.store)
            except ListingCut as cut:     # (a store's listing that never ends: its damage)
                yield cut
                continue
            named = len(paths) == 1 and paths[0] == os.fspath(s)
            for p in paths:
                yield Input(p, named, self.store)

    def found(self) -> Inputs:
        """These inputs found now, once: each iteration gives them again."""
        return self._as(list(self))

    def _as(self, found: list[Input | ListingCut]) -> Inputs:
        self._found = list(found)
        return self

    def check(self) -> Inputs:
        """OSError if an input found does not open (``Input.check``); these inputs."""
        for inp in self:
            if isinstance(inp, Input):
                inp.check()
        return self

    def each(self, since: int | None, until: int | None, damage: list[Damage]
             ) -> Iterator[Input]:
        """The inputs ``kept``; a URL's listing cut at its bounds is noted in ``damage``."""
        for inp in self.kept(since, until):
            if isinstance(inp, ListingCut):   # (a store's listing that never ends)
                damage.append(Damage(0, 0, inp.strerror or "", name_text(inp.filename)))
                continue
            yield inp

    def opened(self, since: int | None, until: int | None, damage: list[Damage]
               ) -> Iterator[tuple[Input, str, BinaryIO]]:
        """Each input of ``each``, opened (``Input.opened``), with what it is (``sniff``)
        and its stream from its start; once the caller is done with it, what ended it
        early is noted in ``damage`` (``Input.ended``) and it is closed."""
        for inp in self.each(since, until, damage):
            f = inp.opened(damage)
            if f is None:
                continue
            try:
                kind, g = sniff(f)
                yield inp, kind, g
                ended = inp.ended(f)
                if ended is not None:
                    damage.append(ended)
            finally:
                inp.close(f)

    def kept(self, since: int | None, until: int | None) -> Iterator[Input | ListingCut]:
        """The inputs but the files outside ``[since, until)`` (ns) by their directory's
        manifest, or a URL's by the store's (noted in ``skipped``). A file is left out only
        if its manifest entry matches it (same size): the files win over the manifest, and
        a file without an entry is kept."""
        for inp in self:
            if (isinstance(inp, Input) and (since is not None or until is not None)
                    and self._outside(inp, since, until)):
                self.skipped.append(inp.source)   # type: ignore[arg-type]
                continue
            yield inp

    def _outside(self, inp: Input, since: int | None, until: int | None) -> bool:
        p = inp.source
        if not isinstance(p, str) or p == STDIN:
            return False
        if inp.url:
            return store_of(self.store, p).outside(p, since, until)
        directory, name = os.path.split(p)
        directory = directory or "."
        if directory not in self._manifests:
            self._manifests[directory] = manifest.load(directory)
        m = self._manifests[directory]
        e = m["files"].get(name) if m is not None else None
        return (e is not None and manifest.outside(e, since, until)
                and manifest.usable(directory, name, e))

    def all_cxx(self) -> bool:
        """True if every input is a C++ binlog file (``Input.kind``), the first a local one."""
        found = [inp for inp in self if isinstance(inp, Input)]
        return bool(found) and not found[0].url and all(inp.kind() == CXX for inp in found)


def open_path(name: str, store: Store | None = None, *, found: bool = False) -> BinaryIO:
    """A path (or ``-``, or a URL: read by ranges from ``store``) opened for reading,
    decompressed if it is gzip. ``found``: a file found in a directory or by a pattern,
    not named: only a regular file, opened without waiting nor following a link (a FIFO
    or a link put at its name since it was listed is OSError, never a reader blocked for
    good)."""
    if name == STDIN:
        return decompressing(sys.stdin.buffer)
    if is_url(name):
        return decompressing(store_of(store, name).open(name))  # type: ignore[arg-type]
    if not found:
        return decompressing(open(name, "rb"))
    fd = os.open(name, os.O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (it was when its directory was "
                      "listed)", name)
    return decompressing(open(fd, "rb"))


def spool(f: BinaryIO) -> BinaryIO:
    """A seekable copy of a stream that cannot go back (standard input, a pipe): on disk,
    so that memory stays bounded however long the stream."""
    import shutil   # (here: it imports bz2 and lzma; tempfile imports random)
    import tempfile
    tmp = tempfile.TemporaryFile()
    shutil.copyfileobj(f, tmp, 1 << 20)
    tmp.seek(0)
    return tmp


class _Reopened:
    """A seekable stream opened again from its start; closing it leaves it open."""

    def __init__(self, raw: BinaryIO, start: int) -> None:
        raw.seek(start)
        self._f = decompressing(raw)
        self.name = getattr(raw, "name", "<stream>")

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    @property
    def error(self) -> str | None:
        return getattr(self._f, "error", None)

    @property
    def pos(self) -> int:
        return getattr(self._f, "pos", 0)

    def close(self) -> None:
        pass


# --- names -> files ---------------------------------------------------------------

def is_url(name: object) -> bool:
    """True for a URL of object storage (``s3://bucket/logs/``; ``URL_SCHEMES``)."""
    if not isinstance(name, str):
        return False
    scheme, sep, _ = name.partition("://")
    return bool(sep) and scheme.lower() in URL_SCHEMES


def object_store(names: Iterable[Any], options: Mapping[str, Any] | None = None
                 ) -> Store | None:
    """The store (``bread.inputs.objectstore.Store``, with ``options`` for its file systems) of the
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
            out.extend(store_of(store, name).expand(name))
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


def store_of(store: Store | None, url: str) -> Store:
    """``store``, or one without options for a URL met without one."""
    return store if store is not None else object_store([url])  # type: ignore[return-value]
