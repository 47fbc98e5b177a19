"""The one place that opens an input and says what it is.

``Inputs`` finds what a source stands for (``bread.read``'s: paths, patterns,
directories, sets' base names, ``-``, URLs, binary file objects), once, in
order (``bread.inputs.paths``); each is an ``Input``, which opens it
(decompressed if it is gzip, ``bread.inputs.compressed``) and, by its first
bytes, says what it is (``kind_of``): a blog file, or a C++ binlog file
(``bread.cxx``). The command line, ``Reader`` and the Spark data source all
find, open and judge their inputs here.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator, Union

from blogformat.frames import MAGIC
from blogstore import manifest
from blogstore.posix import O_CLOEXEC, O_NOFOLLOW, O_NONBLOCK

from ..errors import ListingCut
from ..frames import Damage
from .compressed import GzipInput, decompressing, peek, seekable
from .paths import STDIN, expand, is_url, name_text, object_store, store_of

if TYPE_CHECKING:
    from .objectstore import Store

#: What an input is, by its first bytes (``kind_of``): a blog file, or a C++ binlog file.
#: Anything else is read as a blog file (its damage; ``NotABlogFile`` if it was named).
BLOG, CXX = "blog", "cxx"
#: The first bytes that tell them apart (``bread.cxx.entries.is_binlog`` reads 12).
HEAD = 12

#: What bread reads: a path (a file, a directory of log files, a glob pattern, or "-" for
#: standard input), a URL of object storage (``s3://``, ``gs://``, ``hdfs://``, ``file://``:
#: a file, a prefix, a pattern), a binary file object, or a list of them. gzip is read
#: transparently.
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
