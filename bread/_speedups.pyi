# bread._speedups, the C fast path of reading (bread/decode/_speedups.c and the files
# bread/decode/_extension.h lists). Its Python twins are bread/decode/decoder.py and the
# sinks (bread/sinks/lines.py, bread/sinks/rows.py, bread/sinks/events.py,
# bread/sinks/batches.py, bread/sinks/typed.py);
# the types are the contract both paths keep, so code checked against them runs on either.
# tests/test_c_stubs.py checks these names against the built module (mypy.stubtest).

from collections.abc import Sequence
from datetime import tzinfo
from typing import Any, Callable, Final, final

from typing_extensions import Buffer, Self

from blogformat.entries import EventSource, WriterProp
from bread.events import Event, Origin
from bread.frames import Frame

# The longest message C renders (blogformat.placeholders.MAX_MESSAGE): Python cuts a longer one.
MAX_MESSAGE: Final[int]
# Characters of JSON an event's values make at most (bread.sinks.json.MAX_JSON): values that
# might pass it are Python's to cut.
MAX_JSON: Final[int]

# ---- _native.c: the Renderer (bread/decode/decoder.py: Decoder, Native) ----
# An item of an event format or message: literal UTF-8, or a code
# (bread/decode/_extension.h).
_Items = Sequence[bytes | int]

@final
class Renderer:
    # Bytes of text one render() returns at most (about); Events one events() makes, rows
    # the column buffers hold before columns() stops.
    max_out: int
    max_rows: int
    # columns(): render the message column; the args and fields columns (JSON).
    want_message: int
    want_json: int
    # render() and keyed(): a text line (0), a JSON line (1) or a CSV row (2) per event
    # (bread/sinks/rows.py); CSV rows: a ' before a text cell a spreadsheet would run.
    form: int
    quote_formulas: int
    def __new__(
        cls, date_items: _Items, fallback: Callable[[bytes, int, int], Any], escape: bool
    ) -> Self: ...
    # After each call: 0 the frame is done, 1 more to come (call again with None), 2 Python
    # reads the frame from event `rendered` on (bread.decode.decoder's DONE, MORE, PYTHON).
    @property
    def state(self) -> int: ...
    @property
    def rendered(self) -> int: ...
    def add_source(
        self,
        id: int,
        items: _Items,
        message_items: _Items | None,
        nnames: int,
        source: EventSource = ...,
        field_names: tuple[str, ...] = ...,
        skip: bool = ...,
        pre: bytes = ...,
        post: bytes = ...,
        /,
    ) -> None: ...
    def add_writer(
        self, id: int, name: bytes, id_text: bytes, writer: WriterProp = ..., skip: bool = ..., /
    ) -> None: ...
    def set_sync(
        self,
        clock_value: int,
        frequency: int,
        ns_since_epoch: int,
        tz_offset: int,
        tz_name: bytes,
        tz: tzinfo = ...,
        /,
    ) -> None: ...
    def set_window(self, since: int, until: int, /) -> None: ...
    def set_origin(self, origin: Origin, /) -> None: ...
    def set_event_type(self, event_type: type[Event], utc: tzinfo, /) -> None: ...
    # zone(secs) -> (the ISO time's text before the ns, after) or None: JSON lines' and CSV
    # rows' times in --tz's zone (bread.sinks.json.iso_parts); None: in the sync's offset.
    def set_zone(self, zone: Callable[[int], tuple[bytes, bytes] | None] | None, /) -> None: ...
    def reset(self) -> None: ...
    # Each begins a frame, or with None goes on with the one begun; then see state.
    def render(self, frame: Frame | None, /) -> bytes: ...
    def events(self, frame: Frame | None, /) -> list[Event]: ...
    def keyed(self, frame: Frame | None, /) -> tuple[int, bytes | list[Event], bytes] | None: ...
    def columns(self, frame: Frame | None, /) -> int: ...
    def columnar(self, frame: Frame | None, /) -> int: ...
    def typed(self, frame: Frame | None, /) -> int: ...
    # (rows, clock, ns, source id, writer id, message data, offsets, args data, offsets,
    # fields data, offsets): int64 and text columns, each a read-only buffer.
    def take_columns(
        self,
    ) -> tuple[
        int, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer
    ]: ...
    # kinds None: the kinds mode; take_typed() gives one shape per mode (bread/sinks/_tables.c).
    def set_typed(
        self, kinds: bytes | None, positional: int, field_names: tuple[str, ...], /
    ) -> None: ...
    def take_typed(self) -> tuple[Any, ...]: ...

# ---- _events.c: bread/events.py, bread/sinks/events.py ----

@final
class MessageGetter:
    def __new__(cls, event_type: type[Event], fallback: Callable[[Event], str], /) -> Self: ...
    def __call__(self, event: Event, /) -> str: ...

# None where Python renders it (bread.events.render_message).
def message(
    plan: tuple[str | int, ...],
    args: tuple[Any, ...],
    fields: dict[str, Any],
    names: tuple[str, ...],
    /,
) -> str | None: ...

# ---- _batches.c: bread/sinks/batches.py ----

# (values, offsets or None, validity or None), each a read-only buffer; None where a text
# column would not fit an Arrow string array.
def gather(
    ids: Buffer, table: dict[int, bytes | int | None], default: bytes | int | None, text: bool, /
) -> tuple[Buffer, Buffer | None, Buffer | None] | None: ...
