"""Any sink for the merge: its outputs as runs ``(writer id, items, keys)`` of its items
(``Sink.item``: a text line, an Event), keyed by time, made in C (``Renderer.keyed``) or
from the Events Python makes."""

from __future__ import annotations

import array

from blogformat.typinglite import TYPE_CHECKING

from ..decode.decoder import Native, Sink
from ..events import Event, clamp64
from ..frames import Frame

if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator

    from .._speedups import Renderer

#: About how many bytes of text a run holds at most (a frame's lines beyond it: several).
RUN_BYTES = 1 << 20


def runs(events: Iterable[Event], item: Callable[[Event], Any], text: bool) -> Iterator[tuple]:
    """Events of one writer as runs ``(writer id, items, keys)`` of their items (``item(ev)``)
    keyed by time: with ``text`` the items are lines joined in one bytes object, keys the
    Merger's int64 pairs (time, end of the line), a run about ``RUN_BYTES`` at most; else a
    list, keys (time, 0), one run."""
    items: list[Any] = []
    keys = array.array("q")
    end = wid = 0
    for ev in events:
        if text or not items:   # (a run of items is its first event's writer's)
            wid = ev.writer_prop.id
        x = item(ev)
        items.append(x)
        keys.append(clamp64(ev.ns))
        if not text:
            keys.append(0)
            continue
        end += len(x)
        keys.append(end)
        if end >= RUN_BYTES:
            yield wid, b"".join(items), keys.tobytes()
            items, keys, end = [], array.array("q"), 0
    if items:
        yield (wid, b"".join(items) if text else items, keys.tobytes())


class Keyed:
    """``sink`` wrapped for the merge (``bread.decode.decoder.Sink``): its outputs are runs
    ``(writer id, items, keys)`` of its items (``sink.item``, one per event; ``text``: lines,
    bytes), by C (``Renderer.keyed``) or from the Events Python makes (``runs``); the
    decoder (``keyed``) gives each events frame's offset before its runs."""

    metadata = item = None

    def __init__(self, sink: Sink, text: bool) -> None:
        self.sink = sink
        self.text = text
        inner = sink.native
        self.native: Native | None = None if inner is None else _KeyedNative(inner)

    def python(self, events: Iterator[Event]) -> Iterator[tuple]:
        return runs(events, self.sink.item, self.text)  # type: ignore[arg-type]

    def finish(self) -> tuple:
        return ()


class _KeyedNative(Native):
    """A sink's C side, its Renderer's ``keyed`` call: a frame's runs."""

    def __init__(self, inner: Native) -> None:
        self.inner = inner
        self.decorate = inner.decorate

    def renderer(self, fallback: Callable[[bytes, int, int], Any], keyed: bool) -> Renderer:
        return self.inner.renderer(fallback, True)

    def step(self, c: Any) -> Callable[[Frame | None], Any]:
        return c.keyed

    def fallback(self, ev: Event) -> Any:
        return self.inner.fallback(ev)

    def source_items(self, src: Any, origin: Any) -> list:
        return self.inner.source_items(src, origin)

    def writer_text(self, w: Any) -> bytes:
        return self.inner.writer_text(w)
