"""``bread.read``: paths or binary file objects -> events, with damage and notices collected."""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO, Iterable, Iterator, Sequence, Union

from .batches import BatchReader, check_columns, has_arrow
from .entries import iter_entries
from .events import Event, EventStream
from .frames import Damage, iter_frames
from .inputs import STDIN, GzipInput, decompressing, expand, open_path
from . import accel
from .lines import LineRenderer
from .native import EventDecoder
from .render import PrettyPrinter

#: What bread reads: a path (a file, a directory of log files, a glob pattern, or "-" for
#: standard input), a binary file object, or a list of paths. gzip is read transparently.
Source = Union[str, "os.PathLike[str]", BinaryIO, Iterable[Union[str, "os.PathLike[str]"]]]


class Reader:
    """Iterates the events of one or more inputs in file order.

    After (or during) iteration, ``damage`` lists skipped byte ranges,
    ``notices`` the drops and losses the writer recorded, ``headers`` the
    descriptors of the files read.
    """

    def __init__(self, source: Source) -> None:
        if isinstance(source, (str, os.PathLike)):
            self._inputs: list[Any] = [source]
        elif hasattr(source, "read"):
            self._inputs = [source]
        elif isinstance(source, (bytes, bytearray, memoryview)):
            raise TypeError("bread.read takes a path or a binary file object; "
                            "wrap bytes in io.BytesIO")
        else:
            self._inputs = list(source)
            for s in self._inputs:
                if not isinstance(s, (str, os.PathLike)) and not hasattr(s, "read"):
                    raise TypeError(f"cannot read from {type(s).__name__}")
        self.damage: list[Damage] = []
        self.notices: list[Any] = []
        self.headers: list[Any] = []
        self.unknown_sources = 0

    def __iter__(self) -> Iterator[Event]:
        for f, name in self._files():
            if accel.speedups is None:
                stream = self._stream(iter_entries(iter_frames(f, name), name))
                events: Iterable[Event] = stream
            else:
                stream = self._stream(())
                events = EventDecoder(stream, name).events(
                    iter_entries(iter_frames(f, name), name, raw_events=True))
            try:
                yield from events
            finally:
                self.unknown_sources += stream.unknown_sources

    def text(self, printer: PrettyPrinter, *, escape: bool = False) -> Iterator[bytes]:
        """The events as text lines rendered by ``printer``, in UTF-8 blocks (what ``bread`` prints).

        ``escape`` replaces control characters (``render.escape_controls``).
        Faster than rendering each Event: the C fast path renders whole frames.
        """
        for f, name in self._files():
            stream = self._stream(())
            lines = LineRenderer(stream, printer, escape=escape, source=name)
            try:
                yield from lines.blocks(iter_entries(iter_frames(f, name), name,
                                                     raw_events=lines.uses_c))
            finally:
                self.unknown_sources += stream.unknown_sources

    def batches(self, columns: Sequence[str] | None = None, batch_size: int = 65536, *,
                arrow: bool | None = None) -> Iterator[Any]:
        """The events as batches of columns (``bread.batches``), at most ``batch_size`` rows each.

        ``columns`` picks some of ``bread.batches.COLUMNS`` (default: all); only
        those are decoded. With ``arrow`` (default: if pyarrow is installed) each
        batch is a ``pyarrow.RecordBatch``, else a dict of column name -> values.
        """
        cols = check_columns(columns)
        if arrow is None:
            arrow = has_arrow()
        elif arrow and not has_arrow():
            raise ImportError("arrow=True needs pyarrow: pip install 'blog-bread[arrow]'")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        for f, name in self._files():
            stream = self._stream(())
            b = BatchReader(stream, cols, batch_size, arrow=arrow, source=name)
            try:
                yield from b.batches(iter_entries(iter_frames(f, name), name, raw_events=b.uses_c))
            finally:
                self.unknown_sources += stream.unknown_sources

    def _files(self) -> Iterator[tuple[BinaryIO, str]]:
        """Each input, opened and decompressed as needed, with its name."""
        for inp in self._inputs:
            if hasattr(inp, "read"):
                if isinstance(inp, io.TextIOBase):
                    raise TypeError("bread needs a binary file object (open the file with 'rb')")
                name = str(getattr(inp, "name", "<stream>"))
                f = decompressing(inp)
                yield f, name
                self._after(f, name)
                continue
            for path in expand([inp]):
                f = open_path(path)
                try:
                    yield f, path
                    self._after(f, path)
                finally:
                    if path != STDIN:
                        f.close()

    def _after(self, f: BinaryIO, name: str) -> None:
        if isinstance(f, GzipInput) and f.error is not None:
            self.damage.append(Damage(f.pos, 0, f.error, name))

    def _stream(self, entries: Iterable[Any]) -> EventStream:
        stream = EventStream(entries)
        stream.damage = self.damage
        stream.notices = self.notices
        stream.headers = self.headers
        return stream


def read(source: Source) -> Reader:
    """Read events from a path, a list of paths, or a binary file object, in file order.

    Never raises on damaged input: damaged ranges are skipped and listed in
    the returned reader's ``damage``. Opening a missing file raises OSError.
    """
    return Reader(source)


def read_batches(source: Source, columns: Sequence[str] | None = None, batch_size: int = 65536,
                 *, arrow: bool | None = None) -> Iterator[Any]:
    """``bread.read(source).batches(...)``: the events as batches of columns."""
    return Reader(source).batches(columns, batch_size, arrow=arrow)
