"""SideOutputs: the outputs beside a session's main one (``Session.add_output``).

Each gets what the main output got, metadata and events, through an Output of
its own: a new one starts with its header and all metadata, and one that fails
loses its own writes only (reported on stderr); the main output is not affected.
"""

from __future__ import annotations

from typing import Callable, Sequence

from blogformat.entries import Metadata

from .output import Output
from .stats import SessionStats
from .streams import OutputStream


class SideOutputs:
    """A session's side outputs; the list is replaced, never changed, so a consume reads it
    without the session's lock."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._sides: list[tuple[OutputStream, Output]] = []

    def __bool__(self) -> bool:
        return bool(self._sides)

    @property
    def streams(self) -> list[OutputStream]:
        """The streams added, oldest first."""
        return [s for s, _ in self._sides]

    def add(self, stream: OutputStream) -> None:
        """Write to ``stream`` too from the next consume on (once: it may be there already)."""
        if not callable(getattr(stream, "write", None)):
            raise TypeError(f"an output stream needs write(bytes); "
                            f"{type(stream).__name__} has none")
        if any(s is stream for s, _ in self._sides):
            return
        out = Output(SessionStats(), f"{self._name} -> {type(stream).__name__}")
        out.use(stream)
        self._sides = [*self._sides, (stream, out)]

    def remove(self, stream: OutputStream) -> bool:
        """Stop writing to ``stream``; False if it was not one."""
        kept = [(s, o) for s, o in self._sides if s is not stream]
        found = len(kept) != len(self._sides)
        self._sides = kept
        return found

    def write(self, descriptor: dict, meta: list[Metadata], batches: list[bytes], n_events: int,
              taken: Sequence[object], everything: Callable[[], list[Metadata]]) -> None:
        """Write what the main output got (``meta``, ``batches``) to each side output; a new
        one gets ``everything()`` instead of ``meta``: all metadata in force."""
        for _, out in self._sides:
            side_meta = meta if out.started else everything()
            out.write(descriptor, side_meta, batches, n_events, taken)
