"""What ``bread`` prints for C++ binlog files: the C++ bread's lines, byte for byte.

In file order, or with ``sort`` each file's events stably sorted by their clock value (as
the C++ bread sorts: it reads the whole file first, and prints nothing of a file whose
damage it meets). Damage: the events before it are printed, then
``[bread] Exception: ...`` on standard error, and the exit status is 3.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Iterator

from ..errors import ListingCut
from ..render import escape_controls
from .. import accel
from .entries import BinlogError
from .events import cxx_events
from .fastpath import print_lines
from .printer import CxxPrinter, as_bytes

if TYPE_CHECKING:
    from ..inputs import Inputs

#: The C++ bread's words before the message of what stopped it.
EXCEPTION = "[bread] Exception: "
#: The C++ bread's formats when none is given.
DEFAULT_FORMAT = "%S %C [%d] %n %m (%G:%L)"
DEFAULT_DATE_FORMAT = "%Y-%m-%d %H:%M:%S.%N"


def print_files(files: Iterable[BinaryIO], printer: CxxPrinter, sort: bool,
                write: Callable[[bytes], object], error: Callable[[str], object]) -> bool:
    """Print each C++ binlog file with ``write``; damage is said with ``error`` (one line)
    and ends that file. True if every file was read whole."""
    ok = True
    fast = accel.binlog
    for f in files:
        events = cxx_events(f)
        block: list[str] = []
        try:
            if fast is not None:
                print_lines(fast, f, printer, write, sort)
                continue
            if sort:
                lines = [(ev.clock, printer(ev)) for ev in events]
                lines.sort(key=lambda x: x[0])   # stable: ties keep the file order
                write(as_bytes("".join(text for _, text in lines)))
                continue
            for ev in events:
                block.append(printer(ev))
                if len(block) >= 1024:
                    write(as_bytes("".join(block)))
                    block = []
            write(as_bytes("".join(block)))
        except BinlogError as exc:
            if not sort:
                write(as_bytes("".join(block)))
            error(f"{EXCEPTION}{exc}\n")
            ok = False
    return ok


#: The UTF-8 of what ``escape_controls`` escapes, but the newline that ends each line: C0
#: (but tab and newline), DEL, C1 (U+0080..U+009F) and the bidirectional format characters.
_RAW = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c"
                  rb"|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
#: Every byte but those that can begin what ``_RAW`` finds (a control, or the lead byte of
#: a C1 control, U+061C or a bidirectional format character).
_PLAIN = bytes(b for b in range(256)
               if not (b < 0x20 and b not in (0x09, 0x0a) or b in (0x7f, 0xc2, 0xd8, 0xe2)))


def print_inputs(inputs: Inputs, event_format: str, date_format: str, sort: bool,
                 escape: bool) -> bool:
    """``bread [-f F] [-d D] [-s] FILE...`` for C++ binlog files (``inputs``, found and
    judged by ``bread.inputs``), on standard output; False after damage. ``escape``:
    control and bidirectional format characters escaped as in
    blog files' text (the default); without it, the bytes the C++ bread prints."""
    printer = CxxPrinter(event_format, date_format)
    out = sys.stdout.buffer
    write: Callable[[bytes], object] = out.write
    if escape:
        def write(data: bytes) -> object:
            # Most blocks: no byte that could begin an escape (deleting every other byte,
            # about 4 GB/s, leaves nothing), written as they are; then the exact scan.
            if not data.translate(None, _PLAIN) or _RAW.search(data) is None:
                return out.write(data)
            lines = data.decode("utf-8", "surrogateescape").split("\n")
            return out.write(as_bytes("\n".join(escape_controls(x) for x in lines)))

    def files() -> Iterator[BinaryIO]:
        for inp in inputs:
            if isinstance(inp, ListingCut):   # (a URL's: the C++ files are local ones)
                continue
            f = inp.open()
            try:
                yield f
            finally:
                inp.close(f)
    ok = print_files(files(), printer, sort, write, sys.stderr.write)
    out.flush()
    return ok
