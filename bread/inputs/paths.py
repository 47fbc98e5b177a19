"""Names -> the files they stand for: paths, patterns, directories, sets' base names, ``-``
and URLs, expanded by the rules the package's docstring (``bread.inputs``) states."""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from blogstore import catalog
from blogstore.fileset import LOG_SUFFIXES, is_regular, members, split_base

if TYPE_CHECKING:
    from .objectstore import Store

#: The schemes of the URLs read from object storage (``bread.inputs.objectstore``).
URL_SCHEMES = ("s3", "gs", "gcs", "hdfs", "file")
STDIN = "-"


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
