"""Argument values and msgpack: the extension codes, the msgpack options of the whole
format, and what encoding and decoding share.

Plain values (None, bool, int, float, str, bytes, list, dict) are native
msgpack. Everything else is a msgpack extension whose payload is itself
msgpack; ``docs/format.md`` section 7 lists the codes. Values are never
pickled: types the format does not know are captured as their rendered text
(``blogformat.valueencoding``); a reader turns extensions back into values
(``blogformat.valuedecoding``), of the classes of ``blogformat.valueclasses``.

Every packer and unpacker of the format is made from the options here
(``PACK_OPTIONS``, ``UNPACK_OPTIONS``), so that writer and reader cannot disagree on
them.
"""

from __future__ import annotations

import threading
from functools import partial

import msgpack

from blogformat.typinglite import TYPE_CHECKING
from blogformat.guard import owned_by_value
from blogformat.valuetypes import TypeTable

if TYPE_CHECKING:
    from typing import Any

EXT_TUPLE = 1
EXT_BIGINT = 2
EXT_SET = 3
EXT_FROZENSET = 4
EXT_DATETIME = 5
EXT_DATE = 6
EXT_TIME = 7
EXT_TIMEDELTA = 8
EXT_DECIMAL = 9
EXT_UUID = 10
EXT_ENUM = 11
EXT_DATACLASS = 12
EXT_EXCEPTION = 13
EXT_OPAQUE = 14
EXT_MEMBER = 15
EXT_RECORD = 16

#: How an enum's members show (docs/format.md 7, extension 11's ``style``): 0 as the
#: writer's text (kept per call), 1 as ``Enum`` shows them (``Color.RED``, formatted as
#: that text), 2 as their value (``IntEnum``, ``StrEnum``: ``str`` and ``format`` of it).
ENUM_TEXT, ENUM_NAMED, ENUM_VALUE = 0, 1, 2

# Strings may hold lone surrogates; "surrogatepass" keeps them exactly.
UNICODE_ERRORS = "surrogatepass"

#: How every part of a file is packed: bytes as bin, str as UTF-8 (surrogates kept).
PACK_OPTIONS: dict[str, Any] = {"use_bin_type": True, "unicode_errors": UNICODE_ERRORS}
#: How every part of a file is unpacked; maps may have any key (an int, a tuple...).
UNPACK_OPTIONS: dict[str, Any] = {"raw": False, "strict_map_key": False,
                                  "unicode_errors": UNICODE_ERRORS}


#: Extension codes whose data is not msgpack (big int, Decimal, UUID: raw bytes).
RAW_EXT = frozenset({EXT_BIGINT, EXT_DECIMAL, EXT_UUID})

#: Extension values inside extension values decode this deep; deeper ones stay ExtValue.
#: (Each level costs a C stack frame of the msgpack decoder: an unbounded depth in a
#: hostile file would overflow the stack.) The writer never nests deeper than MAX_DEPTH.
MAX_DECODE_DEPTH = 40
MAX_DEPTH = 32


class ThreadState(threading.local):
    """Per thread: the extension nesting depth (encoding or decoding), whether an
    exception's source lines are kept, the descriptions decoded values refer to. Class
    defaults: a lookup never misses (a miss raises inside getattr, ~0.6 us)."""

    depth = 0
    source_lines = False
    types: TypeTable | None = None


thread_state = ThreadState()


def type_name(t: type) -> str:
    """``module.QualName`` of a type (just the name for builtins)."""
    mod = getattr(t, "__module__", None)
    qual = getattr(t, "__qualname__", t.__name__)
    return qual if mod in (None, "builtins") else f"{mod}.{qual}"


def safe_str(value: Any) -> str:
    """``str(value)``, or a placeholder if its ``__str__`` raises."""
    try:
        return str(value)
    except Exception as exc:  # a broken __str__ must not break the log call
        if not owned_by_value(exc):
            raise
        return f"<unprintable {type_name(type(value))}: {type(exc).__name__}>"


#: A Packer whose output reached this size is not kept (its buffer would be kept too).
_POOLED_MAX = 1 << 20


def pooled(**options: Any) -> Any:
    """A ``packb(obj)`` like msgpack's, with the same ``options``, that reuses its Packers.

    ``msgpack.packb`` makes a Packer per call, and a Packer allocates its buffer (a MiB)
    when it is made: that was most of what a value beyond the plain scalars cost. Each
    thread keeps its own Packers, free ones in a list: a nested pack (the hook encoding
    an extension's data, a finalizer logging meanwhile) takes another one. A Packer
    whose pack raised may hold a part of it: it is dropped.
    """
    pool = threading.local()

    def packb(obj: Any) -> bytes:
        free = getattr(pool, "free", None)
        if free is None:
            free = pool.free = []
        p = free.pop() if free else msgpack.Packer(autoreset=True, **options)
        out = p.pack(obj)        # if it raises, p is dropped
        if len(out) < _POOLED_MAX:   # one that grew for a large value goes with it
            free.append(p)
        return out
    return packb


#: Packs the format's own structures (entries, headers): ints, strs, arrays and maps only.
pack_plain = pooled(**PACK_OPTIONS)


#: The header of a msgpack array of n elements.
pack_array_header = msgpack.Packer(**PACK_OPTIONS).pack_array_header


def plain_packer() -> msgpack.Packer:
    """A reusable Packer that packs as ``pack_plain`` does (no hook: an int beyond 64 bits
    raises)."""
    return msgpack.Packer(**PACK_OPTIONS)


#: Decodes the format's own structures where no value can occur (the header frame).
unpack_plain = partial(msgpack.unpackb, **UNPACK_OPTIONS)


#: Immutable scalars: queued as they are, encoded without capture.
PLAIN_TYPES = frozenset({type(None), bool, int, float, str, bytes})


def all_plain(values: tuple) -> bool:
    """True if every value is an immutable scalar of exactly a PLAIN_TYPES type."""
    for v in values:
        if type(v) not in PLAIN_TYPES:
            return False
    return True
