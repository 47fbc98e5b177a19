"""Capturing argument values at call time, for events that are not plain scalars.

Plain scalar arguments (None, bool, int, float, str, bytes) are immutable and
are queued as they are; the consumer encodes them later. Anything else is
encoded here, on the calling thread, so that mutating a logged list after the
call cannot change what was logged. Where the reader could not reproduce a
placeholder's text from the decoded value (sets, enums, dataclasses, custom
``__format__``...), the text rendered now is kept beside the value.
"""

from __future__ import annotations

from typing import Any, Sequence

import msgpack

from blogformat.entries import EVENT_FIELDS, EVENT_FIELDS_WITH_TEXTS
from blogformat.placeholders import Template, render_safe
from blogformat.values import all_plain, encode, pack_args, packb, reproducible

_array_header = msgpack.Packer().pack_array_header


def capture(tpl: Template | None, values: Sequence[Any], field_names: Sequence[str]) -> bytes:
    """Encode an event's values now.

    Returns the element count of the event array (3, or 4 with texts) as the
    first byte, then the msgpack args array and, if any, the texts map
    ``{placeholder index: text}``.
    """
    texts: dict[int, str] = {}
    if tpl is not None:
        positional = len(values) - len(field_names)
        for i, ph in enumerate(tpl.placeholders):
            key = ph.key
            v = values[key] if isinstance(key, int) else values[positional + field_names.index(key)]
            if not reproducible(v):
                texts[i] = render_safe(v, ph.conversion, ph.spec)
    body = _array_header(len(values)) + b"".join([encode(v) for v in values])
    if texts:
        return bytes([EVENT_FIELDS_WITH_TEXTS]) + body + packb(texts)
    return bytes([EVENT_FIELDS]) + body


def encode_values(tpl: Template | None, values: tuple,
                  field_names: Sequence[str]) -> tuple[int, bytes]:
    """(element count, encoded elements after the clock delta) for an event's values."""
    if all_plain(values):
        return EVENT_FIELDS, pack_args(values)
    b = capture(tpl, values, field_names)
    return b[0], b[1:]
