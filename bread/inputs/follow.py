"""Following (``bread -F``, ``bread.read(..., follow=True)``): what a path stands for, as it grows.

A file is followed at its path, as ``tail -F`` does (``bread.inputs.tail.Tail``). A
directory, or a set's base name (``logs/app.blog``, which names no file: the
set's files are ``blogstore.fileset`` names), stands for its log files, those
there now and those that appear later (a rotation, a new or forked process):

* the files already finished when following starts (their writer closed them,
  or they are compressed) are read first, whole, in name order, as ``bread
  DIR`` reads them;
* then each file that is being written or appears later is read as it grows
  (``bread.inputs.tail.Growing``) until its writer closes it: the files of one
  process of a set one after another, in the order it wrote them, on a thread
  of their own; a plain file (not a set's) on its own, for as long as it has a name;
* the outputs of files read at the same time (several processes) come
  interleaved as they are read, each file's in its order; never sorted across
  files (``bread -s`` the finished files for that).

A file is read by its descriptor, so compressed (``x.blog`` -> ``x.blog.gz``),
renamed or deleted under the reader it is read on to its end, once; its
``.gz`` twin is the same file, never read again. A file compressed before it
was opened is read from its ``.gz``; one that retention deleted before it
could be opened is reported as damage. Compacted files (``bread compact``)
are read only if they are there when following starts (else their events came
from the originals already). Files of the directory are never named inputs: one
that is not a blog file is damage, as in ``bread DIR``.
"""

from __future__ import annotations

import collections
import errno
import io
import os
import queue
import stat
import threading
import time
from typing import Any, BinaryIO, Callable, Hashable, Iterator, NamedTuple, cast

from blogstore import catalog
from blogstore.crashlayout import buffer_directory
from blogstore.fileset import COMPRESSED, LOG_SUFFIXES, SUFFIX, members, parse, split_base
from blogstore.posix import O_NOFOLLOW

from ..errors import OptionError
from ..frames import CHUNK, Damage, check_begins
from . import STDIN, name_text, open_path
from .compressed import decompressing
from .tail import INTERVAL, Growing, Stopped, Tail

#: Outputs read ahead of the consumer (one per frame, or per block of a frame's lines).
QUEUE = 64

#: One input decoded: its outputs (``Reader``'s sink's), in file order.
Decode = Callable[[BinaryIO, str], Iterator[Any]]


def follower(source: Any, interval: float = INTERVAL) -> Tail | Follower:
    """What following ``source`` reads: a ``Tail`` for a file, a ``Follower`` for a
    directory or a set's base name. OSError if it is none of them (FileNotFoundError
    naming it); OptionError for a FIFO or a device (never waited on nor read);
    NotABlogFile for a file that does not begin as one (judged at once: following, the
    reader would wait for more bytes)."""
    if not isinstance(source, (str, os.PathLike)) or os.fspath(source) in (STDIN, ""):
        raise OptionError("follow takes one path: a file, a directory, or a set's base name")
    path = os.fspath(source)
    if os.path.isdir(path):
        return Follower(Watch(path), interval)
    if os.path.exists(path):
        if not os.path.isfile(path):     # never waiting on a FIFO, never reading a device
            raise OptionError(f"follow reads a regular file, a directory or a set's base "
                              f"name: {name_text(path)} is none of them")
        f = open_path(path)
        try:
            check_begins(f.read(CHUNK), name_text(path))
        finally:
            f.close()
        return Tail(path, interval)
    try:
        directory, stem = split_base(path)
    except ValueError:        # a name that is no set's ("logs/.blog")
        directory = stem = ""
    if stem and os.path.isdir(directory) and (path.endswith(SUFFIX) or members(directory, stem)):
        return Follower(Watch(directory, stem), interval)
    raise FileNotFoundError(errno.ENOENT, "no such file, directory or file set", path)


class Found(NamedTuple):
    """A log file of a followed directory, as its name says."""

    path: str
    key: Hashable       # the same file whatever its name: a set's by name, another by inode
    chain: Hashable     # the files read one after another: a set's of one process
    in_set: bool
    compressed: bool


class Watch:
    """The log files of ``directory`` (of the set ``stem`` only, if given), each given once
    by ``new``: a set's file by its name (``x.blog.gz`` is ``x.blog``), another by its
    inode (renamed, it is the same file)."""

    def __init__(self, directory: str, stem: str | None = None) -> None:
        self.directory = directory
        self.stem = stem
        self._seen: set[Hashable] = set()
        self._first = True

    def new(self) -> list[Found]:
        """The files not given before, in name order."""
        try:
            names = set(os.listdir(self.directory))
        except OSError:
            return []          # removed for now: its files may come back
        if self._first:        # compacted files or their originals, never both
            skip = catalog.left_out(self.directory, names)
        else:                  # compacted later: their events came from the originals
            skip = {n for n in names if catalog.is_compacted(n)}
        self._first = False
        found = []
        for name in sorted(names - skip):
            f = self._found(name, names)
            if f is not None and f.key not in self._seen:
                self._seen.add(f.key)
                found.append(f)
        return found

    def _found(self, name: str, names: set[str]) -> Found | None:
        compressed = name.endswith(COMPRESSED)
        if not name.endswith(LOG_SUFFIXES) or (compressed and name[:-3] in names):
            return None        # x.blog beside x.blog.gz: a compression under way
        path = os.path.join(self.directory, name)
        f = parse(name)
        if f is not None:
            if self.stem is not None and f.stem != self.stem:
                return None
            return Found(path, f.plain_name, (f.stem, f.pid), True, compressed)
        if self.stem is not None:
            return None
        try:
            st = os.lstat(path)     # a link is no file of the directory: it may lead anywhere
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        ino = (st.st_dev, st.st_ino)
        return Found(path, ino, ino, False, compressed)


class Follower:
    """The outputs of a ``Watch``'s files as they are written (the module's docstring)."""

    def __init__(self, watch: Watch, interval: float = INTERVAL) -> None:
        self.watch = watch
        self.interval = interval

    def outputs(self, decode: Decode, damage: list[Damage]) -> Iterator[Any]:
        """What ``decode`` gives of each file, until the caller stops taking them."""
        run = _Run(decode, damage, self.interval)
        try:
            waiting: set[Hashable] = set()     # chains with a file being written
            later: list[Found] = []
            for found in self.watch.new():     # those finished now, whole, in name order
                if found.chain not in waiting:
                    opened = run.open(found)
                    if opened is None:
                        continue
                    if _finished(opened[0]):
                        yield from run.read(*opened)
                        continue
                    run.held[found.key] = opened   # read as it grows, on its chain's thread
                waiting.add(found.chain)
                later.append(found)
            for found in later:
                run.start(found)
            while True:
                yield from run.drain(self.interval)
                for found in self.watch.new():
                    run.start(found)
        finally:
            run.stop.set()


def _finished(f: BinaryIO) -> bool:
    return not isinstance(f, Growing) or f.finished()


class _Failed(NamedTuple):
    """What a reader thread raised, raised again by the follower."""

    exc: BaseException


class _Run:
    """One following: its reader threads (one per chain of files), what they hand over."""

    def __init__(self, decode: Decode, damage: list[Damage], interval: float) -> None:
        self.decode = decode
        self.damage = damage
        self.interval = interval
        self.stop = threading.Event()
        self.out: queue.Queue[Any] = queue.Queue(QUEUE)
        #: The files of each chain that has a thread: the one it reads, then those to come.
        self.chains: dict[Hashable, collections.deque[Found]] = {}
        #: Files opened before their thread started (kept open: nothing can take them away).
        self.held: dict[Hashable, tuple[BinaryIO, str]] = {}
        self._lock = threading.Lock()

    def open(self, found: Found) -> tuple[BinaryIO, str] | None:
        """``found`` opened to be read as it grows (compressed: as it is), and its name;
        None if it is gone (said in ``damage``)."""
        path, compressed = found.path, found.compressed
        f = _open_regular(path)
        if f is None and found.in_set and not compressed:   # compressed since: finished
            path, compressed = path + COMPRESSED, True
            f = _open_regular(path)
        name = name_text(path)
        if not isinstance(f, io.BufferedReader):   # why not: a vanished file is the usual
            self.damage.append(Damage(0, 0, f or "removed before it could be read", name))
            return None
        if compressed:
            return decompressing(f), name
        growing = Growing(f, name, in_set=found.in_set, buffers=_buffers(found.path),
                          stop=self.stop, interval=self.interval)
        return cast(BinaryIO, growing), name

    def read(self, f: BinaryIO, name: str) -> Iterator[Any]:
        try:
            yield from self.decode(f, name)
        finally:
            f.close()

    def start(self, found: Found) -> None:
        """Hand ``found`` to the thread of its chain (started if none runs)."""
        with self._lock:
            files = self.chains.get(found.chain)
            if files is not None:
                files.append(found)
                return
            self.chains[found.chain] = collections.deque([found])
        try:
            threading.Thread(target=self._run, args=(found.chain,), daemon=True,
                             name="bread-follow").start()
        except RuntimeError as exc:   # no thread left: thousands of files written at once
            with self._lock:
                del self.chains[found.chain]
            held = self.held.pop(found.key, None)
            if held is not None:
                held[0].close()
            self.damage.append(Damage(0, 0, f"cannot be followed: {exc}",
                                      name_text(found.path)))

    def _run(self, chain: Hashable) -> None:
        """A chain's files, one after another; ends when none is left."""
        try:
            while True:
                with self._lock:
                    files = self.chains[chain]
                    if not files:
                        del self.chains[chain]
                        return
                    found = files[0]
                opened = self.held.pop(found.key, None) or self.open(found)
                if opened is not None:
                    for item in self.read(*opened):
                        self._put(item)
                with self._lock:
                    files.popleft()
        except Stopped:
            pass
        except BaseException as exc:    # the follower raises it
            try:
                self._put(_Failed(exc))
            except Stopped:
                pass

    def _put(self, item: Any) -> None:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                self.out.put(item, timeout=self.interval)
                return
            except queue.Full:
                continue

    def drain(self, seconds: float) -> Iterator[Any]:
        """What the threads hand over for ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                item = self.out.get(timeout=left)
            except queue.Empty:
                return
            if type(item) is _Failed:
                raise item.exc
            yield item


def _buffers(path: str) -> str | None:
    """The crash buffer directory of the set whose file ``path`` is (None if it is no set's):
    beside the set's base name, where its writers keep them unless given a ``crash_dir``."""
    f = parse(os.path.basename(path))
    return None if f is None else buffer_directory(os.path.join(os.path.dirname(path),
                                                                f.stem + SUFFIX))


def _open_regular(path: str) -> io.BufferedReader | str | None:
    """``path`` opened for reading if it is a regular file (never waiting on a FIFO, never
    through a link); else None if nothing is there, or why it cannot be read (a link; out
    of file descriptors: more files than ``ulimit -n`` allows to follow at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be followed: {exc.strerror}"
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return "cannot be followed: not a regular file"
    return open(fd, "rb")
