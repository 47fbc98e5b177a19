"""SideOutputs: the outputs beside a session's main one (``Session.add_output``).

Each gets what the main output got, metadata and events, through an Output of
its own: a new one starts with its header and all metadata, and one that fails
loses its own writes only (reported on stderr); the main output is not affected.
A callable is called with each event instead (``blog.pipeline.calloutput``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from blogformat.entries import Metadata
from blogformat.severity import Severity

from .output import Output
from .stats import SessionStats
from .streams import OutputStream


class SideOutputs:
    """A session's side outputs; the list is replaced, never changed, so a consume reads it
    without the session's lock."""

    def __init__(self, name: str, stats: SessionStats) -> None:
        self._name = name
        self._stats = stats     # the session's (a callable output counts its errors there)
        self._sides: list[tuple[Any, Output]] = []   # (what was added, its Output)

    def __bool__(self) -> bool:
        return bool(self._sides)

    @property
    def streams(self) -> list[Any]:
        """The streams and callables added, oldest first."""
        return [s for s, _ in self._sides]

    def add(self, output: OutputStream | Callable[[Any], Any],
            min_severity: Severity | int | str | None = None) -> None:
        """Write to ``output`` too from the next consume on (once: it may be there already);
        a callable without ``write`` is called with each event at or above
        ``min_severity`` (a stream filters, if it does, by its own options)."""
        if any(s is output for s, _ in self._sides):
            return
        stream: Any = output
        label = type(output).__name__
        if not callable(getattr(output, "write", None)):
            if not callable(output):
                raise TypeError(f"an output stream needs write(bytes), an output function is "
                                f"called with each event; {type(output).__name__} is neither")
            from .calloutput import CallOutput   # with the first one (start-up)
            stream = CallOutput(output, self._stats, Severity.TRACE if min_severity is None
                                else min_severity)
            label = repr(stream)
        elif min_severity is not None:
            raise TypeError("min_severity is a callable output's; an output stream filters "
                            "by its own options (blog.TextStream's min_severity)")
        out = Output(SessionStats(), f"{self._name} -> {label}")
        out.use(stream)
        self._sides = [*self._sides, (output, out)]

    def remove(self, output: object) -> bool:
        """Stop writing to ``output``; False if it was not one."""
        kept = [(s, o) for s, o in self._sides if s is not output]
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
