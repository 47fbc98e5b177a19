# bread._binlog, C++ binlog files' text lines in C (bread/cxx/_binlog.c); its twin is
# bread/cxx/printer.py, driven by bread/cxx/fastpath.py, whose contract the types are.
# tests/test_c_stubs.py checks these names against the built module (mypy.stubtest).

from typing import Callable, final

from typing_extensions import Buffer

@final
class Printer:
    # date: the date format's pattern (CxxPrinter.date.pattern), UTF-8.
    def __init__(self, date: bytes, /) -> None: ...
    # Items as CxxPrinter.plan makes them; False if the id is beyond C's tables.
    def add_source(
        self,
        id: int,
        line_items: list[bytes | int],
        message_items: list[bytes | tuple[int, bool]] | None,
        /,
    ) -> bool: ...
    def set_writer(self, name: bytes, id_text: bytes, /) -> None: ...
    def set_sync(
        self, clock: int, frequency: int, ns: int, tz_offset: int, tz_name: bytes, /
    ) -> None: ...
    # (lines, pos, stop): stop 0 the end of data, 1 metadata, 2 an event for Python; keyed:
    # the lines are held for write_sorted, none returned.
    def render(self, data: Buffer, pos: int, keyed: bool = False, /) -> tuple[bytes, int, int]: ...
    def hold(self, clock: int, line: bytes, /) -> None: ...
    def write_sorted(self, write: Callable[[bytes], object], /) -> None: ...
