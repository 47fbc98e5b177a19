"""``bread.read``: paths or binary file objects -> events, with damage and notices collected."""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO, Iterable, Iterator, Union

from .entries import iter_entries
from .events import Event, EventStream
from .frames import Damage, iter_frames
from .lines import LineRenderer
from .render import PrettyPrinter

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
            stream = self._stream(iter_entries(iter_frames(f, name), name))
            try:
                yield from stream
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

    def _files(self) -> Iterator[tuple[BinaryIO, str]]:
        for inp in self._inputs:
            if hasattr(inp, "read"):
                if isinstance(inp, io.TextIOBase):
                    raise TypeError("bread needs a binary file object (open the file with 'rb')")
                yield inp, str(getattr(inp, "name", "<stream>"))
            else:
                name = os.fspath(inp)
                with open(name, "rb") as f:
                    yield f, str(name)

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
