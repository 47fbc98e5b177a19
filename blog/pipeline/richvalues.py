"""Rich values: argument values that are not plain scalars, encoded at call time.

Plain scalar arguments (None, bool, int, float, str, bytes) are encoded
straight into the channel by the hot path. Anything else is encoded here, on
the calling thread too, so that mutating a logged list after the call cannot
change what was logged. Where the reader could not reproduce a
placeholder's text from the decoded value (sets, enums, dataclasses, custom
``__format__``...), the text rendered now is kept beside the value.
"""

from __future__ import annotations

from msgpack import ExtType

from blogformat.typinglite import TYPE_CHECKING
from blogformat.eventframes import EVENT_FIELDS, EVENT_FIELDS_WITH_TEXTS
from blogformat.placeholders import Template, render_safe
from blogformat.valueencoding import encode, pack_args, packb, reproducible
from blogformat.values import (EXT_OPAQUE, all_plain, pack_array_header, pack_plain, safe_str,
                               type_name)

if TYPE_CHECKING:
    from typing import Any, Sequence


def encode_with_texts(tpl: Template | None, values: Sequence[Any],
                      field_names: Sequence[str], source_lines: bool = False) -> tuple[int, bytes]:
    """Encode an event's values now: (element count of the event array, what follows the delta).

    What follows the clock delta is the msgpack args array and, if any
    placeholder's text had to be kept, the texts map ``{placeholder index: text}``.
    With ``source_lines``, an exception's frames keep their source lines.
    """
    texts: dict[int, str] = {}
    if tpl is not None:
        positional = len(values) - len(field_names)
        for i, ph in enumerate(tpl.placeholders):
            key = ph.key
            v = values[key] if isinstance(key, int) else values[positional + field_names.index(key)]
            if not reproducible(v, ph.conversion, ph.spec):
                texts[i] = render_safe(v, ph.conversion, ph.spec)
    body = pack_array_header(len(values)) + b"".join([encode(v, source_lines) for v in values])
    if texts:
        return EVENT_FIELDS_WITH_TEXTS, body + packb(texts)
    return EVENT_FIELDS, body


def encode_values(tpl: Template | None, values: tuple, field_names: Sequence[str],
                  source_lines: bool = False) -> tuple[int, bytes]:
    """(element count, encoded elements after the clock delta) for an event's values."""
    if all_plain(values):
        return EVENT_FIELDS, pack_args(values)
    return encode_with_texts(tpl, values, field_names, source_lines)


#: What is kept of a value cut because its event is larger than a whole channel.
CUT_TEXT = 1024


def cut(values: Sequence[Any], capacity: int) -> tuple:
    """``values`` with each one too large for an event of ``capacity`` bytes replaced by
    an opaque value (extension 14): its type, the first CUT_TEXT characters of its text
    and a marker saying how large it was. The event is then logged, never dropped for
    its size."""
    budget = max(capacity // (2 * max(len(values), 1)), 64)
    out = []
    for v in values:
        size = len(encode(v))            # encoded bytes (a str of emoji: 4 each)
        if size <= budget:
            out.append(v)
            continue
        text = v if type(v) is str else safe_str(v) if not isinstance(v, bytes) else repr(v)
        keep = min(CUT_TEXT, budget // 8)
        out.append(ExtType(EXT_OPAQUE, pack_plain([
            type_name(type(v)),
            f"{text[:keep]}... [cut by blog: {size} bytes, more than an event may hold]"])))
    return tuple(out)
