"""PlainWrites: the session's writes when no crash buffer mirrors its channels.

What the channels hold is taken and written once; a write the output refuses is lost,
counted in the stats and recorded in the file once the output works again. It answers
the Session as ``blog.pipeline.heldwrites.HeldWrites`` does (``take``, ``write``,
``write_parts``, ``done``), so that a consume reads the same with or without a buffer.
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import Metadata

from .output import Output
from .streams import OutputStream

if TYPE_CHECKING:
    from typing import Callable

    from .channel import AnyTaken
    from .heldwrites import Takes
    from .writer import SessionWriter


class PlainWrites:
    """The consumes of a session into its outputs, with nothing mirrored."""

    #: No crash buffer (``HeldWrites.buffer`` is one).
    buffer = None
    #: Nothing is ever held: a refused write is lost.
    held = False
    #: The parts of a held write that were written: none, nothing being held.
    parted: tuple[list[bytes], list[AnyTaken]] = ([], [])

    def new_stream(self) -> None:
        """Nothing to forget: no write is held."""

    def take(self, writers: list[SessionWriter],
             stream: OutputStream) -> tuple[Takes, bool]:
        """What the channels hold; never a write tried again."""
        return [(w, w.channel.take(0)) for w in writers], False

    def write(self, out: Output, stream: OutputStream, descriptor: dict,
              meta: list[Metadata], batches: list[bytes], taken: Takes,
              n_events: int) -> int:
        """``out.write`` of what ``take`` gave: the bytes written (0 if refused: lost)."""
        return out.write(descriptor, meta, batches, n_events, [t for _, t in taken])

    def write_parts(self, out: Output, stream: OutputStream, descriptor: dict,
                    taken: Takes, cut: Callable[[], tuple[int, int]]) -> tuple[int, int]:
        """Write what ``take`` gave cut between files: ``cut()`` is ``parts.write_parts``.
        Returns (bytes written, bytes of the first part)."""
        return cut()

    def done(self, retired: list[SessionWriter]) -> None:
        """Nothing to free."""
