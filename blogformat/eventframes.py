"""Events frames: the batch header and the events it counts (docs/format.md section 5).

The writer packs a ``BatchHeader`` and each event's ``event_prefix``; readers decode with
``batch_start`` and ``decode_events``. Decoders take untrusted input: a field of the wrong
type raises ``BadEntry`` (the reader turns it into damage), never anything else.
"""

from __future__ import annotations

from blogformat.typinglite import TYPE_CHECKING, final
from .plainclass import Frozen, Plain
from .values import pack_plain
from .valuetypes import BadEntry, TypeTable
from .valuetypes import int_field as _int

if TYPE_CHECKING:
    from typing import Any, Iterator

#: Array headers of an event with 0 to 15 elements (an event has 3 or 4).
_ARRAY_HEADERS = [bytes([0x90 | n]) for n in range(16)]


@final
class BatchHeader(Frozen):
    """What precedes the events of an events frame (5.1)."""

    writer_id: int
    base_clock: int
    count: int
    min_clock: int
    max_clock: int

    def __init__(self, writer_id: int, base_clock: int, count: int, min_clock: int,
                 max_clock: int) -> None:   # (one per frame: not the generic one)
        self.__dict__.update(writer_id=writer_id, base_clock=base_clock, count=count,
                             min_clock=min_clock, max_clock=max_clock)

    def encode(self) -> bytes:
        return pack_plain([self.writer_id, self.base_clock, self.count, self.min_clock,
                           self.max_clock])


@final
class RawEvent(Plain):
    """An event as stored: source and writer ids, clock, argument values and captured texts."""

    __slots__ = ("offset", "writer_id", "source_id", "clock", "args", "texts")
    offset: int              # of the frame that holds it
    writer_id: int
    source_id: int
    clock: int
    args: list
    texts: dict

    def __init__(self, offset: int, writer_id: int, source_id: int, clock: int, args: list,
                 texts: dict | None = None) -> None:
        self.offset = offset
        self.writer_id = writer_id
        self.source_id = source_id
        self.clock = clock
        self.args = args
        self.texts = {} if texts is None else texts


#: Elements of an event array: [source id, clock delta, args] or [..., texts] (5.2).
EVENT_FIELDS = 3
EVENT_FIELDS_WITH_TEXTS = 4
#: The most bytes ``event_prefix`` gives: an array header and two 9-byte ints.
MAX_EVENT_PREFIX = 19


def event_prefix(nelems: int, sid: int, delta: int) -> bytes:
    """The array header, source id and clock delta of an event with ``nelems`` elements.

    The writer appends the args array (and the texts map) already packed.
    ``blog/pipeline/_channel.c`` (begin_event) writes the same bytes.
    """
    return _ARRAY_HEADERS[nelems] + pack_plain(sid) + pack_plain(delta)


def complete_events(payload: bytes) -> tuple[bytes, int] | None:
    """The first part of an events payload cut short (a torn frame, 5.4) as a payload of its
    own: the batch header with the count of the events wholly present, then those events.
    None if not even the batch header is whole."""
    from .valuedecoding import unpacker   # (the reader's: the writer never loads it)
    u = unpacker(payload)
    try:
        head = u.unpack()
    except Exception:
        return None
    if type(head) is not list or len(head) < 3 or type(head[2]) is not int:
        return None
    start = end = u.tell()
    count = 0
    while count < head[2]:
        try:
            ev = u.unpack()
        except Exception:   # the cut (or damage): what follows is not read
            break
        if (type(ev) is not list or len(ev) < 3 or type(ev[0]) is not int
                or type(ev[1]) is not int or type(ev[2]) is not list):
            break
        count += 1
        end = u.tell()
    try:
        head = pack_plain([head[0], head[1], count, *head[3:]])
    except (TypeError, ValueError, OverflowError):
        return None
    return head + payload[start:end], count


def batch_start(head: Any) -> tuple[int, int, int]:
    """(writer id, base clock, event count) of an unpacked batch header (5.1); BadEntry where
    it is not one."""
    if type(head) is not list or len(head) < 3:
        raise BadEntry("events batch header is not an array of 3 or more")
    return _int(head[0]), _int(head[1]), _int(head[2])


def decode_events(payload: bytes, offset: int, types: TypeTable | None = None
                  ) -> Iterator[RawEvent]:
    """The events of an events frame's payload, clocks reconstructed (5.3); described
    values with the descriptions of ``types`` (the stream's)."""
    from .valuedecoding import begin_event, unpacker   # (the reader's, as above)
    u = unpacker(payload, types)
    wid, prev, count = batch_start(u.unpack())
    for _ in range(count):
        begin_event()
        ev = u.unpack()
        if type(ev) is not list or len(ev) < 3:
            raise BadEntry("event is not an array of 3 or more")
        sid, delta, args = ev[0], ev[1], ev[2]
        if type(sid) is not int or type(delta) is not int or type(args) is not list:
            raise BadEntry("event fields have the wrong types")
        prev += delta
        texts = ev[3] if len(ev) > 3 and type(ev[3]) is dict else {}
        yield RawEvent(offset, wid, sid, prev, args, texts)
