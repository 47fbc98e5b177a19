"""SideOutputs: the outputs beside a session's main one (``Session.add_output``).

Each gets what the main output got, metadata and events, through an Output of
its own: a new one starts with its header and all metadata, and one that fails
loses its own writes only (reported on stderr); the main output is not affected.
A callable is called with each event instead (``blog.pipeline.calloutput``).
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import Metadata
from blogformat.severity import Severity

from ..report import report
from .output import Output
from .stats import SessionStats
from .streams import OutputStream

if TYPE_CHECKING:
    from typing import Any, Callable, Sequence


class SideOutputs:
    """A session's side outputs; the list is replaced, never changed, so a consume reads it
    without the session's lock."""

    def __init__(self, name: str, stats: SessionStats, echo_ids: set[int]) -> None:
        self._name = name
        self._echo_ids = echo_ids   # writers of what is logged inside outputs: not fed back
        self._stats = stats     # the session's (a callable output counts its errors there)
        self._sides: list[tuple[Any, Output, str]] = []   # (what was added, its Output, label)
        self._writing: str | None = None   # the label of the output being written now
        self.undelivered = 0     # events not given to them: one did not return at exit
        self._told = 0

    def __bool__(self) -> bool:
        return bool(self._sides)

    @property
    def streams(self) -> list[Any]:
        """The streams and callables added, oldest first."""
        return [s for s, _, _ in self._sides]

    def add(self, output: OutputStream | Callable[[Any], Any],
            min_severity: Severity | int | str | None = None) -> None:
        """Write to ``output`` too from the next consume on (once: it may be there already);
        a callable without ``write`` is called with each event at or above
        ``min_severity`` (a stream filters, if it does, by its own options)."""
        if any(s is output for s, _, _ in self._sides):
            return
        stream: Any = output
        label = type(output).__name__
        if not callable(getattr(output, "write", None)):
            if not callable(output):
                raise TypeError(f"an output stream needs write(bytes), an output function is "
                                f"called with each event; {type(output).__name__} is neither")
            from .calloutput import CallOutput   # with the first one (start-up)
            stream = CallOutput(output, self._stats, Severity.TRACE if min_severity is None
                                else min_severity, skip=self._echo_ids)
            label = repr(stream)
        elif min_severity is not None:
            raise TypeError("min_severity is a callable output's; an output stream filters "
                            "by its own options (blog.TextStream's min_severity)")
        out = Output(SessionStats(), f"{self._name} -> {label}")
        out.use(stream)
        self._sides = [*self._sides, (output, out, label)]

    def remove(self, output: object) -> bool:
        """Stop writing to ``output``; False if it was not one."""
        kept = [t for t in self._sides if t[0] is not output]
        found = len(kept) != len(self._sides)
        self._sides = kept
        return found

    def write(self, descriptor: dict, meta: list[Metadata], batches: list[bytes], n_events: int,
              taken: Sequence[object], everything: Callable[[], list[Metadata]]) -> None:
        """Write what the main output got (``meta``, ``batches``) to each side output; a new
        one gets ``everything()`` instead of ``meta``: all metadata in force."""
        if self.undelivered:     # one was left behind: nothing is given to them any more
            self.skipped(n_events)
            return
        for _, out, label in self._sides:
            side_meta = meta if out.started else everything()
            self._writing = label
            out.write(descriptor, side_meta, batches, n_events, taken)
        self._writing = None

    def skipped(self, n_events: int, timeout: float | None = None) -> None:
        """``n_events`` written to the main output are not given to these outputs: one of
        them has not returned as the process ends (within ``timeout`` seconds); the first
        time, stderr says which, and how many (``tell`` the rest)."""
        self.undelivered += n_events
        if self._told == 0 and timeout is not None:
            report(f"blog: the output {self._writing or '?'} has not returned within "
                   f"{timeout:g} s as the process ends: it is left behind; the outputs beside "
                   f"the file ({', '.join(label for _, _, label in self._sides)}) miss up to "
                   f"{self.undelivered} event(s) the file has")
            self._told = self.undelivered

    def tell(self) -> None:
        """Say on stderr how many more events were not given to them since last told."""
        if self._told and self.undelivered > self._told:
            report(f"blog: the outputs beside the file miss up to "
                   f"{self.undelivered - self._told} more event(s) the file has (one of them "
                   "did not return)")
            self._told = self.undelivered
