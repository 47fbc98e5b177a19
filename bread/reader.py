"""``bread.read``: paths or binary file objects -> events, with damage and notices collected."""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO, Iterable, Iterator, Union

from .entries import iter_entries
from .events import Event, EventStream
from .frames import Damage, iter_frames

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
        for inp in self._inputs:
            if hasattr(inp, "read"):
                yield from self._read(inp, getattr(inp, "name", "<stream>"))
            else:
                name = os.fspath(inp)
                with open(name, "rb") as f:
                    yield from self._read(f, name)

    def _read(self, f: BinaryIO, name: Any) -> Iterator[Event]:
        if isinstance(f, io.TextIOBase):
            raise TypeError("bread needs a binary file object (open the file with 'rb')")
        stream = EventStream(iter_entries(iter_frames(f, str(name)), str(name)))
        stream.damage = self.damage
        stream.notices = self.notices
        stream.headers = self.headers
        try:
            yield from stream
        finally:
            self.unknown_sources += stream.unknown_sources


def read(source: Source) -> Reader:
    """Read events from a path, a list of paths, or a binary file object, in file order.

    Never raises on damaged input: damaged ranges are skipped and listed in
    the returned reader's ``damage``. Opening a missing file raises OSError.
    """
    return Reader(source)
