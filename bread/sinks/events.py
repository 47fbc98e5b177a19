"""The Events sink: events as Event objects, what ``bread.read`` gives."""

from __future__ import annotations

import datetime as _dt
import sys

from blogformat.typinglite import TYPE_CHECKING

from .. import accel
from ..decode.decoder import Native
from ..events import Event
from ..frames import Frame

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

    from .._speedups import Renderer

_UTC = _dt.timezone.utc


class EventSink:
    """Events as Event objects (``bread.decode.decoder.Sink``): chunks that ``itertools.chain``
    flattens (lists from the C renderer, a generator per frame from Python); for the merge,
    one item per event, the Event itself."""

    #: Events per call of the C renderer. Small on purpose: the events a caller has
    #: already dropped are freed before the collector counts them, so it rarely runs
    #: (with 4096, a third of the time went to the cyclic GC).
    CHUNK = 32
    metadata = None

    def __init__(self) -> None:
        self.native: Native | None = EventsNative(self.CHUNK)

    def item(self, ev: Event) -> Event:
        return ev

    def python(self, events: Iterator[Event]) -> tuple[Iterator[Event]]:
        return (events,)

    def finish(self) -> tuple:
        return ()


class EventsNative(Native):
    """Its C side: the Renderer's ``events`` call, ``chunk`` Events per call (keyed: a
    frame's all, which the merge holds)."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        c = accel.speedups.Renderer([], fallback, False)  # type: ignore[union-attr]
        c.set_event_type(Event, _UTC)
        c.max_rows = sys.maxsize if keyed else self.chunk
        return c

    def step(self, c: Any) -> Callable[[Frame | None], list[Event]]:
        return c.events
