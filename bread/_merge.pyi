# bread._merge, the k-way merge of sorted runs in C (bread/merge/_merge.c); its twin is
# bread.merge.merger.Merger, whose contract the types are. tests/test_c_stubs.py checks these
# names against the built module (mypy.stubtest).

from typing import Any, final

from typing_extensions import Buffer, Self

@final
class Merger:
    def __new__(cls, text: bool, max_out: int = 1048576) -> Self: ...
    # Items added and not yet emitted; text: the size of the runs held (0 for items).
    @property
    def held(self) -> int: ...
    @property
    def held_bytes(self) -> int: ...
    # items: bytes (text) or a list; keys: native int64 pairs (time, end of the item's line).
    def add(self, items: bytes | list[Any], keys: Buffer, position: int, wid: int, /) -> None: ...
    # bytes (text) or a list, of the items whose time is below limit (all with None).
    def emit(self, limit: int | None = None, /) -> Any: ...
