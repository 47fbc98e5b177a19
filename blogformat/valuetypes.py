"""Value types described once per stream (docs/format.md 4.8, 4.9, 7).

What is a property of a type or an enum member, not of a call (a dataclass's field
names and how its repr shows it; an enum member's class, name, value and style), is
written once, as a metadata entry, as the C++ binlog writes a struct's field names and
an enum's enumerators once in its EventSource. Each call then holds only the entry's
id (and a record's field values).

Writer: ``describe`` gives ids process-wide and tells every listening session, which
writes the entries ahead of the first event that needs them (and into every new
stream). Reader: a ``TypeTable`` per stream keeps the entries in force, bounded.
"""

from __future__ import annotations

import threading
import weakref

from blogformat.typinglite import TYPE_CHECKING, Any, Protocol, final
from .errors import BadEntry
from .plainclass import Frozen, field

if TYPE_CHECKING:
    from typing import Callable, Hashable

ENTRY_RECORD_TYPE = 8
ENTRY_ENUM_MEMBER = 9

#: Ids of described types run from 1 to MAX_TYPE_ID in a stream.
MAX_TYPE_ID = 65_535
#: Characters of text the descriptions in force in one stream hold together.
MAX_TYPE_TEXT = 16 << 20
#: Characters of any one text of a source, writer or description (blog writes at most 64 Ki).
MAX_FIELD_TEXT = 128 << 10
#: Fields of one record type.
MAX_RECORD_FIELDS = 4096


@final
class RecordType(Frozen):
    """A dataclass or named tuple class: its qualified name, its field names in order, and,
    where its repr is the generated one, the name that repr shows (else None) and the
    fields it shows (bit i of ``mask``: field i)."""

    TAG = ENTRY_RECORD_TYPE

    id: int
    type: str
    repr_name: str | None
    fields: tuple[str, ...]
    mask: int
    offset: int = field(default=0, hidden=True)   # of its frame, when read

    def array(self) -> list:
        return [ENTRY_RECORD_TYPE, self.id, self.type, self.repr_name, list(self.fields),
                self.mask]

    def text_size(self) -> int:
        return len(self.type) + len(self.repr_name or "") + sum(len(f) for f in self.fields)

    @property
    def shown(self) -> tuple[str, ...]:
        """The fields the generated repr shows."""
        return tuple(f for i, f in enumerate(self.fields) if self.mask >> i & 1)


@final
class EnumMember(Frozen):
    """An enum member: its class's qualified name, its name, its value (a plain scalar) and
    its style (how its class shows it: blogformat.valueclasses.ENUM_*)."""

    TAG = ENTRY_ENUM_MEMBER

    id: int
    type: str
    name: str
    value: Any
    style: int
    offset: int = field(default=0, hidden=True)

    def array(self) -> list:
        return [ENTRY_ENUM_MEMBER, self.id, self.type, self.name, self.value, self.style]

    def text_size(self) -> int:
        v = self.value
        return len(self.type) + len(self.name) + (len(v) if isinstance(v, (str, bytes)) else 0)


Described = RecordType | EnumMember

#: The values an enum member's value may be to be described (its value is in the entry).
DESCRIBABLE_VALUES = frozenset({type(None), bool, int, float, str, bytes})


def int_field(v: Any) -> int:
    """``v`` if it is an int; BadEntry otherwise."""
    if type(v) is not int:
        raise BadEntry(f"expected an integer, got {type(v).__name__}")
    return v


def str_field(v: Any) -> str:
    """``v`` if it is a str; BadEntry otherwise."""
    if type(v) is not str:
        raise BadEntry(f"expected a string, got {type(v).__name__}")
    return v


def decode_entry(e: list, offset: int) -> Described:
    """A RecordType or EnumMember entry array as its entry; BadEntry (a ValueError) or
    IndexError if its fields are not of the specified types."""
    if e[0] == ENTRY_RECORD_TYPE:
        tid, name, repr_name, fields, mask = e[1:6]
        if type(fields) is not list:
            raise ValueError("record fields must be an array")
        if repr_name is not None:
            str_field(repr_name)
        return RecordType(int_field(tid), str_field(name), repr_name,
                          tuple(str_field(f) for f in fields), int_field(mask), offset)
    tid, name, member, value, style = e[1:6]
    if type(value) not in DESCRIBABLE_VALUES:
        raise ValueError("an enum member's value must be a scalar")
    return EnumMember(int_field(tid), str_field(name), str_field(member), value,
                      int_field(style), offset)


def refused(e: Described) -> str | None:
    """Why a stream may not hold ``e`` (docs/format.md 9.1), or None."""
    if not 1 <= e.id <= MAX_TYPE_ID:
        return f"type id {e.id} out of range 1..{MAX_TYPE_ID}"
    texts = (e.type, e.repr_name or "", *e.fields) if type(e) is RecordType else (e.type, e.name)
    if any(len(t) > MAX_FIELD_TEXT for t in texts) or (
            type(e) is EnumMember and isinstance(e.value, (str, bytes))
            and len(e.value) > MAX_FIELD_TEXT):
        return f"type {e.id}: a text longer than {MAX_FIELD_TEXT}"
    if type(e) is RecordType and len(e.fields) > MAX_RECORD_FIELDS:
        return f"type {e.id}: more than {MAX_RECORD_FIELDS} fields"
    return None


class TypeTable:
    """The descriptions in force in one stream (reader side): id -> entry, bounded."""

    def __init__(self) -> None:
        self.entries: dict[int, Described] = {}
        self.text = 0
        self._decoded: dict[int, Any] = {}

    def add(self, e: Described) -> str | None:
        """Take in ``e`` (replacing an entry of its id); why not, if it is beyond the limits."""
        why = refused(e)
        old = self.entries.get(e.id)
        text = self.text + e.text_size() - (old.text_size() if old is not None else 0)
        if why is None and text > MAX_TYPE_TEXT:
            why = f"more than {MAX_TYPE_TEXT} characters of type descriptions in one stream"
        if why is not None:
            # Values of its id read as unknown, not as the entry it meant to replace.
            if self.entries.pop(e.id, None) is not None:
                self.text -= old.text_size()  # type: ignore[union-attr]
                self._decoded.pop(e.id, None)
            return why
        self.entries[e.id] = e
        self._decoded.pop(e.id, None)
        self.text = text
        return None

    def get(self, tid: Any) -> Described | None:
        return self.entries.get(tid) if type(tid) is int else None

    def decoded(self, tid: int, make: Callable[[Described], Any]) -> Any:
        """What ``make`` gives for entry ``tid``, made once (an enum member's value)."""
        got = self._decoded.get(tid)
        if got is None:
            got = self._decoded[tid] = make(self.entries[tid])
        return got

    def __len__(self) -> int:
        return len(self.entries)


# --- the writer's registry -----------------------------------------------------

class Listener(Protocol):
    def type_described(self, entry: Described) -> None: ...


_lock = threading.RLock()
_ids: dict[Hashable, int] = {}
_described: list[Described] = []
_text = 0
_listeners: "weakref.WeakSet[Any]" = weakref.WeakSet()


def describe(key: Hashable, make: Callable[[int], Described]) -> int | None:
    """The id of the description of ``key`` (a class, or a class and member name), made by
    ``make(id)`` the first time and told to every listening session before the id is
    returned (so that no event can hold it before its session has the entry); None if
    the process has described as much as one stream holds (the value then describes
    itself, as before descriptions existed)."""
    tid = _ids.get(key)
    if tid is not None:
        return tid
    with _lock:
        tid = _ids.get(key)
        if tid is not None:
            return tid
        if len(_described) >= MAX_TYPE_ID:
            return None
        entry = make(len(_described) + 1)
        global _text
        if refused(entry) is not None or _text + entry.text_size() > MAX_TYPE_TEXT:
            return None
        _described.append(entry)
        _text += entry.text_size()
        for s in list(_listeners):
            s.type_described(entry)
        _ids[key] = entry.id
        return entry.id


def listen(session: Listener) -> list[Described]:
    """Tell ``session`` of every description made from now on; the ones made so far."""
    with _lock:
        _listeners.add(session)
        return list(_described)


def reset_after_fork() -> None:
    """In a forked child (blog.process calls it): another thread may have held the lock."""
    global _lock
    _lock = threading.RLock()
