"""Inputs in object storage: ``s3://``, ``gs://``, ``hdfs://`` and ``file://`` URLs of files,
prefixes and patterns, read through ``pyarrow.fs``.

``pyarrow.fs`` is the one file-system layer: well kept, already a dependency of the
``spark`` extra (and of ``read_batches``), with native ranged reads and S3, GCS and HDFS
behind one interface (``fsspec`` would be one more dependency). Credentials are the
store's usual ones (``AWS_*`` variables, ``~/.aws``, ``GOOGLE_APPLICATION_CREDENTIALS``,
Hadoop's configuration); ``options`` are passed to the file system's constructor
(``pyarrow.fs.S3FileSystem(endpoint_override=..., region=...)``).

A prefix stands for its log files as a directory does (``bread.inputs``), and a URL that
exists is never taken for a pattern, as a path is not; every name a listing gives is data:
only a direct child of the prefix with a log file's name is read, nothing it names is
followed elsewhere. A file is read by ranges (``RangedFile``): what
the reader asks for, ahead of it as it reads on, so that a part of a large object (a
Spark partition) costs its byte range plus the metadata frames before it. The prefix's
``blog-manifest.json`` skips objects outside a time window without opening them.

Faults of the store after the listing are the object's damage, never wrong bytes: a
``RangedFile`` whose read fails (a 5xx, a request timed out, an object deleted) ends
there, its reason in ``error`` (``bread.read`` reports it in ``damage`` with the URL);
each store's first object is checked to answer a ranged read with the bytes asked
(a server that ignores ``Range``: every object of it is damage). S3 requests time out
(``timeouts``). A prefix of S3 or GCS is listed by a child process, bounded in keys,
memory and time (``bread.inputs.lister``: a listing that never ends is cut, ``ListingCut``).
A URL with credentials in it (``s3://KEY:SECRET@bucket/``) is refused,
never shown (``check_url``).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
from typing import Any, Mapping

from blogstore import manifest
from blogstore.catalog import DAMAGED
from blogstore.fileset import LOG_SUFFIXES

from ..errors import ListingCut, OptionError
from .lister import listed

#: Names of files being made (left out of a pattern's matches, as in a directory).
_MAKING = (".tmp", ".new")
#: Bytes fetched at least per request, and at most ahead of a reader reading on.
MIN_BLOCK = 1 << 12
MAX_BLOCK = 8 << 20
_MAGIC = "*?["
#: S3's timeouts (seconds): to connect, and for a request that receives nothing
#: (``BREAD_STORE_TIMEOUT`` sets the latter, whole seconds; the connection's is then at
#: most it). pyarrow's own ``connect_timeout`` and ``request_timeout`` options win.
CONNECT_TIMEOUT = 10
REQUEST_TIMEOUT = 30
TIMEOUT_VARIABLE = "BREAD_STORE_TIMEOUT"
#: Stores whose listings come in pages (listed by ``bread.inputs.lister``, bounded).
PAGED = ("s3", "gcs")
#: Bytes of a store's first object read again from offset 1 (``RangedFile.check_ranges``).
_PROBE = 64
NEEDS = ("reading a URL ({url}) needs pyarrow.fs: pip install 'blog-bread[spark]' "
         "(or pyarrow alone)")


def _fs_module(url: str) -> Any:
    try:
        import pyarrow.fs
    except ImportError:
        raise ImportError(NEEDS.format(url=url)) from None
    return pyarrow.fs


class Store:
    """The file systems of the URLs one reader reads, with what their listings and
    manifests said (sizes, time ranges), so that each is asked once."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self._fs: dict[str, Any] = {}       # by the URLs' root: s3://, hdfs://host:port
        self._sizes: dict[str, int] = {}
        self._manifests: dict[str, dict | None] = {}
        self._ranged: set[str] = set()      # roots whose ranged reads were checked
        #: What each URL stood for (or the cut of its listing): listed once per store.
        self._expanded: dict[str, list[str] | ListingCut] = {}

    def _split(self, url: str) -> tuple[Any, str, str]:
        """(file system, its path of the URL, the URL's prefix before that path)."""
        check_url(url)
        scheme, _, rest = url.partition("://")
        scheme = scheme.lower()
        host, _, key = rest.partition("/")
        if scheme in ("s3", "gs", "gcs"):
            root, path = f"{scheme}://", f"{host}/{key}".rstrip("/")
        else:                              # hdfs://host:port/path, file:///path
            root, path = f"{scheme}://{host}", "/" + key.rstrip("/")
        if root not in self._fs:
            self._fs[root] = self._make(scheme, url)
        return self._fs[root], path, root

    def _make(self, scheme: str, url: str) -> Any:
        fs = _fs_module(url)
        opts = self.options
        try:
            if scheme == "s3":   # the endpoint of the AWS tools' variables, as from_uri's
                endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
                    "AWS_ENDPOINT_URL")
                if endpoint and "endpoint_override" not in opts:
                    opts = {**opts, "endpoint_override": endpoint}
                return fs.S3FileSystem(**{**timeouts(), **opts})
            if scheme == "file":     # (options are for the object stores)
                return fs.LocalFileSystem()
            if not opts:
                return fs.FileSystem.from_uri(url)[0]
            if scheme in ("gs", "gcs"):
                return fs.GcsFileSystem(**opts)
            host, _, port = url.partition("://")[2].partition("/")[0].partition(":")
            return fs.HadoopFileSystem(host, int(port or 8020), **opts)
        except TypeError as exc:   # an option this file system does not have
            raise OptionError(f"storage options for {scheme}:// URLs: {exc}") from None
        except OSError as exc:   # (HDFS without libhdfs, a store that cannot be set up)
            raise _named(exc, url) from None

    def expand(self, url: str) -> list[str]:
        """The files a URL stands for: itself, the log files of a prefix, or the matches of
        a pattern; FileNotFoundError (naming the URL) if none. As a local path, a URL that
        exists is never taken for a pattern (``a[1].blog`` is that object). Listed once:
        asked again, the store gives what it found (or the cut of its listing) again."""
        known = self._expanded.get(url)
        if isinstance(known, ListingCut):
            raise known
        if known is not None:
            return list(known)
        try:
            out = self._expand(url)
        except ListingCut as cut:
            self._expanded[url] = cut
            raise
        self._expanded[url] = out
        return list(out)

    def _expand(self, url: str) -> list[str]:
        fs, path, root = self._split(url)
        magic = any(c in path for c in _MAGIC)
        try:
            info = _asked(fs.get_file_info, path, url)
        except OSError:
            if not magic:
                raise
            info = None           # (a name the store refuses, a bucket's: the pattern's)
        kind = info.type.name if info is not None else "NotFound"
        if kind == "File":
            self._sizes[root + path] = info.size
            out = [root + path]
        elif kind == "Directory":
            out = self._directory(fs, path, root)
        elif magic:
            out = self._matches(fs, path, root)
        else:
            raise FileNotFoundError(errno.ENOENT, "no such file or prefix", url)
        if not out:
            raise FileNotFoundError(errno.ENOENT, "no log files (*.blog, *.blog.gz) at the URL",
                                    url)
        return out

    def _children(self, fs: Any, path: str, url: str, recursive: bool = False) -> list[Any]:
        """The entries under ``path`` (of ``url``): only those whose name is below it (a
        listing's names are data; anything else it gives is left out). A paged store's
        listing is bounded (``bread.inputs.lister``): ListingCut naming ``url`` past its bounds."""
        pafs = _fs_module(path)
        if fs.type_name in PAGED:    # (a listing that never ends stops: bread.inputs.lister)
            infos = [pafs.FileInfo(p, pafs.FileType[kind], size=size)
                     for p, kind, size in listed(fs, path, recursive, url)]
        else:
            infos = _asked(fs.get_file_info, pafs.FileSelector(path, recursive=recursive),
                           url)
        base = path.rstrip("/") + "/"
        out = []
        for info in infos:
            rel = info.path[len(base):] if info.path.startswith(base) else ""
            parts = rel.split("/")
            if rel and all(p not in ("", ".", "..") for p in parts):
                out.append(info)
        return out

    def _directory(self, fs: Any, path: str, root: str) -> list[str]:
        """A prefix's log files, by the rules of a directory (``bread.inputs``): name
        order, ``x.blog.gz`` left out beside its ``x.blog``."""
        files = {i.base_name: i for i in self._children(fs, path, root + path)
                 if i.type.name == "File"}
        out = []
        for name in sorted(files):
            if (name.endswith(LOG_SUFFIXES)
                    and not (name.endswith(".gz") and name[:-3] in files)):
                self._sizes[f"{root}{path}/{name}"] = files[name].size
                out.append(f"{root}{path}/{name}")
        return out

    def _matches(self, fs: Any, pattern: str, root: str) -> list[str]:
        """A pattern's matches: each part of the path matched by ``fnmatch`` (``*`` within
        one part), below the longest part without a pattern."""
        parts = pattern.split("/")
        fixed = next(i for i, p in enumerate(parts) if any(c in p for c in _MAGIC))
        if fixed == 0:
            raise OptionError(f"a pattern in a bucket's name is not read: {root}{pattern}")
        base = "/".join(parts[:fixed]) or "/"
        want = parts[fixed:]
        found = self._children(fs, base, root + base, recursive=len(want) > 1)
        have = {i.path for i in found}
        out: list[str] = []
        for info in sorted(found, key=lambda i: i.path):
            rel = info.path[len(base.rstrip("/")) + 1:].split("/")
            name = rel[-1]
            if (len(rel) != len(want)
                    or not all(fnmatch.fnmatchcase(r, w) for r, w in zip(rel, want))
                    or name.endswith(_MAKING) or name == DAMAGED
                    or (name.endswith(".blog.gz") and info.path[:-3] in have)):
                continue
            if info.type.name == "Directory":
                out.extend(self._directory(fs, info.path, root))
            elif info.type.name == "File":
                self._sizes[root + info.path] = info.size
                out.append(root + info.path)
        return out

    def outside(self, url: str, since: int | None, until: int | None) -> bool:
        """True if the manifest of the URL's prefix shows its file to hold no event in
        ``[since, until)`` and the listing's size matches its entry (the files win)."""
        prefix, _, name = url.rpartition("/")
        if prefix not in self._manifests:
            self._manifests[prefix] = self._manifest(prefix)
        m = self._manifests[prefix]
        e = m["files"].get(name) if m is not None else None
        size = self._sizes.get(url)
        return (e is not None and size is not None and manifest.outside(e, since, until)
                and manifest.matches(e, size))

    def _manifest(self, prefix: str) -> dict | None:
        """The prefix's manifest, checked (``blogstore.manifest.checked``); None if missing,
        larger than a manifest may be, or not one."""
        fs, path, _ = self._split(prefix)
        path = f"{path}/{manifest.NAME}"
        try:
            info = fs.get_file_info(path)
            if info.type.name != "File" or info.size > manifest.MAX_BYTES:
                return None
            with fs.open_input_file(path) as f:
                raw = f.read(manifest.MAX_BYTES + 1)
            return manifest.checked(json.loads(raw))
        except (OSError, ValueError, RecursionError):
            return None

    def open(self, url: str) -> "RangedFile":
        """The file at ``url`` for reading by ranges; FileNotFoundError naming it if none,
        OSError naming it if its store does not answer ranged reads with the bytes asked."""
        fs, path, root = self._split(url)
        raw = _asked(fs.open_input_file, path, url)
        f = RangedFile(raw, url)
        if root not in self._ranged and not root.startswith("file:"):
            try:
                f.check_ranges()
            except OSError:
                f.close()
                raise
            self._ranged.add(root)
        return f


def check_url(url: str) -> None:
    """Refuse a URL with credentials in it (``s3://KEY:SECRET@bucket/``, a user of
    ``hdfs://``): OSError naming it with them left out (``redacted``), never their text.
    A secret may hold ``/``: any ``@`` or ``:`` where a bucket's name is (an ``@``, or a
    port that is no number, where a host is) counts."""
    scheme, _, rest = url.partition("://")
    authority = rest.partition("/")[0]
    host, port = authority, ""
    if scheme.lower() in ("hdfs", "file") and ":" in authority:   # host:port
        host, _, port = authority.rpartition(":")
    if "@" in authority or ":" in host or not (port.isdigit() or port == ""):
        raise OSError(errno.EINVAL, "a URL with credentials in it is refused: give them as "
                      "the store's usual credentials (AWS_* variables, ~/.aws)", redacted(url))


def redacted(url: str) -> str:
    """``url`` without what may be credentials: what its authority holds up to the last
    ``@`` of the URL (all of it without one)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://...@{rest.rpartition('@')[2]}" if "@" in rest else f"{scheme}://..."


def timeouts() -> dict[str, float]:
    """S3's ``connect_timeout`` and ``request_timeout`` (``REQUEST_TIMEOUT``, or
    ``BREAD_STORE_TIMEOUT``'s whole seconds: under one second curl would have none)."""
    text = os.environ.get(TIMEOUT_VARIABLE)
    if not text:
        return {"connect_timeout": CONNECT_TIMEOUT, "request_timeout": REQUEST_TIMEOUT}
    if not text.strip().isdigit() or int(text) < 1:
        raise OptionError(f"{TIMEOUT_VARIABLE} must be whole seconds, at least 1, "
                          f"not {text!r}")
    return {"connect_timeout": min(CONNECT_TIMEOUT, int(text)), "request_timeout": int(text)}


def _asked(call: Any, arg: Any, url: str) -> Any:
    """``call(arg)``; an error of the store as an OSError naming ``url`` (bread's messages
    say which input did not open), with the first line of the store's message."""
    try:
        return call(arg)
    except OSError as exc:
        raise _named(exc, url) from None


def _named(exc: OSError, url: str) -> OSError:
    if isinstance(exc, FileNotFoundError):
        return FileNotFoundError(errno.ENOENT, "no such file or prefix", url)
    return OSError(errno.EIO, (str(exc).splitlines() or ["error"])[0][:300], url)


class RangedFile:
    """A binary file over a pyarrow random-access file: each read fetches at least
    ``MIN_BLOCK`` bytes from where it begins, and a reader reading on gets twice as much
    ahead each time (up to ``MAX_BLOCK``); a seek away starts small again. Within the
    range a reader says it reads whole (``read_range``), reads fetch ``MAX_BLOCK`` at once
    and never past the range's end. A part of a large object so costs its range, what its
    last frame needs past it, and whatever the skim of the frames before it reads
    (``bread.frames.span_frames``: their headers and metadata).

    A read the store fails (an error, a timeout) ends the file there: it and every later
    read give what was held before, then nothing; ``error`` says why and ``pos`` where
    (the object's damage, ``bread.reader``)."""

    def __init__(self, f: Any, name: str) -> None:
        self._f = f
        self.name = name
        self.error: str | None = None
        self.pos = 0          # where a failed read began
        self._size = f.size()
        self._buf = b""
        self._at = 0          # offset of _buf[0]
        self._pos = 0
        self._block = MIN_BLOCK
        self._whole = (0, 0)  # the range read whole (read_range)

    def check_ranges(self) -> None:
        """Its store's ranged reads checked, on its first block (kept, as the first read's)
        and a few bytes read again from offset 1: OSError naming it unless they are the
        same bytes (a server that ignores ``Range`` and answers 206 with the object's start
        would have every later read misread; one that answers 200 with the whole object
        fails in pyarrow)."""
        n = min(MIN_BLOCK, self._size)
        if n < 2:
            return
        first = _asked(lambda at: self._f.read_at(n, at), 0, self.name)
        again = _asked(lambda at: self._f.read_at(min(n, _PROBE) - 1, at), 1, self.name)
        if again != first[1:min(n, _PROBE)]:
            raise OSError(errno.EIO, "the store answers a ranged read with other bytes than "
                          "those asked (it ignores Range): none of its objects is read",
                          self.name)
        self._buf, self._at = first, 0

    def read_range(self, start: int, end: int) -> None:
        """Say that the reader reads ``[start, end)`` whole, in order: reads that begin in it
        fetch up to ``MAX_BLOCK`` at once and nothing ahead past ``end``; a read that
        begins at or past ``end`` fetches what it asks, no more (the rest of the range's
        last frame)."""
        self._whole = (max(0, start), max(0, min(end, self._size)))

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            return b""
        pos, size = self._pos, self._size
        n = max(0, size - pos) if n is None or n < 0 else max(0, min(n, size - pos))
        start, end = pos - self._at, self._at + len(self._buf)
        if start >= 0 and pos + n <= end:
            self._pos = pos + n
            return self._buf[start:start + n]
        if n == 0:                    # at or past the end: nothing, as from a file
            return b""
        if self._at <= pos <= end:    # reading on: what is held, then more ahead
            head = self._buf[start:]
            self._block = min(self._block * 2, MAX_BLOCK)
        else:
            head, self._block = b"", MIN_BLOCK
        at = pos + len(head)
        lo, hi = self._whole
        block = min(MAX_BLOCK, hi - at) if lo <= at < hi else (
            0 if lo < hi <= at else self._block)
        try:
            more = self._f.read_at(min(max(n - len(head), block), size - at), at)
        except OSError as exc:
            self.error = f"reading the object failed: {_named(exc, self.name).strerror}"
            self.pos, more = at, b""
        self._buf, self._at = more, at
        data = head + more[:n - len(head)]
        self._pos = pos + len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._size)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()
        self._buf = b""
