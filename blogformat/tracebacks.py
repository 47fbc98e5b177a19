"""Exceptions as structured frames: what the writer keeps of a traceback, and how a reader
renders it back as text (docs/format.md 7, extension 13).

The writer walks the traceback and keeps each frame's file, line, function and the
columns of its instruction (and the source line only when asked): no source file is read
and nothing is formatted where the exception is logged, which is what makes
``log.exception`` cheap. Chained exceptions (``__cause__``, ``__context__``) are kept the
same way. A reader renders the text as ``traceback.format_exception`` lays it out (3.11's
position markers included, where the file kept the columns), reading each source line
from the file where it is available: only a regular ``.py`` file of bounded size,
whatever path an (untrusted) log names.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:   # (the reader's, imported where a traceback is rendered: the writer never)
    from blogformat.boundedtext import TextBudget

#: How many chained exceptions (causes and contexts) are kept at most, and how many frames
#: of one traceback (the most recent ones; a RecursionError has a thousand).
MAX_CHAIN = 32
MAX_FRAMES = 1024
#: Characters of one rendered traceback (its chain included) at most; then CUT.
MAX_TRACEBACK_TEXT = 1 << 20
CUT = "[... traceback cut: longer than {} characters]\n"

#: What separates a chained exception from the one after it (the chain's ``link``).
CAUSE, CONTEXT = 1, 2
SEPARATORS = {
    CAUSE: "\nThe above exception was the direct cause of the following exception:\n\n",
    CONTEXT: "\nDuring handling of the above exception, another exception occurred:\n\n",
}


def frames(tb: Any, source_lines: bool = False) -> list | None:
    """``[[file, line, function, source, positions], ...]`` of a traceback, most recent call
    last (source: the stripped line if asked, else None; positions: ``position``'s); None
    without one. Only the last MAX_FRAMES frames are kept."""
    if tb is None:
        return None
    out = []
    get = _PLACES.get
    while tb is not None:
        code = tb.tb_frame.f_code
        lasti = tb.tb_lasti
        place = get((id(code), lasti))
        if place is None or place[0] is not code:
            place = _place(tb, code, lasti)
        if source_lines:
            raw = _writer_line(code.co_filename, place[1])
            pos = place[2]
            out.append([code.co_filename, place[1], code.co_name, raw.strip(),
                        # the columns count from the line's start: its indent too
                        None if pos is None else [*pos, len(raw) - len(raw.lstrip())]])
        else:
            out.append([code.co_filename, place[1], code.co_name, None, place[2]])
        tb = tb.tb_next
    return out[-MAX_FRAMES:]


#: Where an instruction is, by (id of its code object, its offset): (code, line, positions).
#: (Positions are a list: the format's packer takes a tuple for a value of its own.)
#: Finding it decodes the code's tables (microseconds), and an application raises from the
#: same places. Each entry holds its code object, whose id no other can take while it is
#: alive (a code object's own hash reads all of it). Emptied when it holds MAX_PLACES.
_PLACES: dict[tuple, tuple] = {}
MAX_PLACES = 4096


def _place(tb: Any, code: Any, lasti: int) -> tuple:
    lineno = tb.tb_lineno
    place = (code, lineno if lineno is not None else 0, position(code, lasti))
    if len(_PLACES) >= MAX_PLACES:
        _PLACES.clear()
    _PLACES[(id(code), lasti)] = place
    return place


def position(code: Any, lasti: int) -> list | None:
    """``[end line, column, end column]`` of the instruction at ``lasti`` (3.11's
    ``co_positions``: columns in UTF-8 bytes), what the position markers (``^^^``) under a
    source line show; None where the code does not say."""
    if lasti < 0:
        return None
    try:
        pos = next(islice(code.co_positions(), lasti // 2, None), None)
    except (AttributeError, ValueError):
        return None
    if pos is None or None in pos[1:]:
        return None
    return list(pos[1:])   # shared by the frames of this place: packed, never changed


def _writer_line(filename: str, lineno: int) -> str:
    import linecache          # only when the application asked for source lines
    return linecache.getline(filename, lineno).rstrip("\r\n")


def notes(exc: BaseException, text: Callable[[Any], str]) -> list | None:
    """``exc.__notes__`` as strs (3.11), or None."""
    n = getattr(exc, "__notes__", None)
    if not isinstance(n, (list, tuple)) or not n:
        return None
    return [x if type(x) is str else text(x) for x in n[:MAX_CHAIN]]


def chain(exc: BaseException, type_name: Callable[[type], str], text: Callable[[Any], str],
          source_lines: bool = False) -> list | None:
    """The exceptions printed before ``exc`` (its cause or context, theirs...), oldest first:
    ``[[type, message, frames, notes, link], ...]``, ``link`` being how the next one
    relates to it (CAUSE or CONTEXT). None if there are none."""
    out: list = []
    seen = {id(exc)}
    e = exc
    while len(out) < MAX_CHAIN:
        cause = e.__cause__
        if cause is not None:
            nxt, link = cause, CAUSE
        elif e.__context__ is not None and not e.__suppress_context__:
            nxt, link = e.__context__, CONTEXT
        else:
            break
        if not isinstance(nxt, BaseException) or id(nxt) in seen:
            break
        seen.add(id(nxt))
        out.append([type_name(type(nxt)), text(nxt), frames(nxt.__traceback__, source_lines),
                    notes(nxt, text), link])
        e = nxt
    out.reverse()
    return out or None


# --- reading ---------------------------------------------------------------------------


class SourceLines:
    """Source lines of ``.py`` files, read where they are: regular files of at most
    ``max_file`` bytes, at most ``max_files`` of them kept (least recently used out), and
    no more than ``max_weight`` of their text and lines together (a line costs about
    ``LINE_COST`` bytes more than its text: 64 crafted 1 MB files of short lines would
    otherwise hold 1.4 GB). A path's links are resolved and the file it ends at is opened
    only if it is a regular file then, without following a link (``O_NOFOLLOW``) and
    without waiting (``O_NONBLOCK``): a FIFO or a device is never opened."""

    LINE_COST = 64

    def __init__(self, max_files: int = 64, max_file: int = 1 << 20,
                 max_weight: int = 32 << 20) -> None:
        self.max_files = max_files
        self.max_file = max_file
        self.max_weight = max_weight
        self._files: OrderedDict[str, tuple[list[str] | None, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def line(self, filename: str, lineno: int) -> str | None:
        """The line as the file has it (without its newline), or None if the file is not
        there (or not one to read) or the line is blank."""
        with self._lock:
            known = self._files.get(filename)
            if known is not None:
                self._files.move_to_end(filename)
        if known is None:
            lines = self._load(filename)
            weight = 0 if lines is None else sum(map(len, lines)) + self.LINE_COST * len(lines)
            with self._lock:
                old = self._files.pop(filename, None)
                self._weight += weight - (0 if old is None else old[1])
                self._files[filename] = (lines, weight)
                while len(self._files) > 1 and (len(self._files) > self.max_files
                                                or self._weight > self.max_weight):
                    self._weight -= self._files.popitem(last=False)[1][1]
        else:
            lines = known[0]
        if lines is None or not 1 <= lineno <= len(lines):
            return None
        line = lines[lineno - 1]
        return line if line.strip() else None

    def _load(self, filename: str) -> list[str] | None:
        if type(filename) is not str or not filename.endswith(".py") or "\0" in filename:
            return None
        try:
            path = os.path.realpath(filename)
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
                         | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > self.max_file:
                return None
            data = os.read(fd, self.max_file + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return data.decode("utf-8", "replace").splitlines()


def shown_type(name: str) -> str:
    """A type as ``traceback`` prints it (``__main__.`` and ``builtins.`` left out)."""
    for prefix in ("__main__.", "builtins."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def render(type_: str, message: str, frames_: Any, notes_: Any, chain_: Any,
           lines: SourceLines | None, limit: int = MAX_TRACEBACK_TEXT) -> str:
    """The text ``traceback.format_exception`` gives (position markers where the frames
    have their columns and a source line is at hand): of the
    last MAX_CHAIN chained exceptions and the last MAX_FRAMES frames of each (a file's
    may hold more), at most ``limit`` characters, CUT included."""
    from blogformat.boundedtext import Spent, TextBudget
    out = TextBudget(limit)
    try:
        chain = chain_[-MAX_CHAIN:] if isinstance(chain_, (list, tuple)) else ()
        for entry in chain:
            if not isinstance(entry, (list, tuple)):
                continue
            t, m, fr, no, link = (list(entry[:5]) + [None] * 5)[:5]
            _one(t, m, fr, no, lines, out)
            out.put(SEPARATORS[link] if link in (CAUSE, CONTEXT) else SEPARATORS[CONTEXT])
        _one(type_, message, frames_, notes_, lines, out)
    except Spent:   # cut so that the whole, CUT included, is within the limit
        cut = CUT.format(limit)
        return out.text()[:max(0, limit - len(cut))] + cut
    return "".join(out.pieces)


def _one(type_: Any, message: Any, frames_: Any, notes_: Any, lines: SourceLines | None,
         out: TextBudget) -> None:
    """One exception's part; a crafted file's texts that are not str shown as ``str``
    shows them (within the budget)."""
    put = out.put
    if isinstance(frames_, (list, tuple)) and frames_:
        put("Traceback (most recent call last):\n")
        last, count = None, 0
        for f in frames_[-MAX_FRAMES:]:
            if not isinstance(f, (list, tuple)) or len(f) < 3:
                continue
            file, lineno, func = f[0], f[1], f[2]
            key = tuple(x if type(x) in (str, int) else id(x) for x in (file, lineno, func))
            if key != last:     # as traceback collapses a recursion
                if count > 3:
                    put(_repeated(count - 3))
                last, count = key, 0
            count += 1
            if count > 3:
                continue
            put('  File "')
            out.put_str(file)
            put('", line ')
            out.put_str(lineno)
            put(", in ")
            out.put_str(func)
            put("\n")
            src = f[3] if len(f) > 3 and isinstance(f[3], str) else None
            pos: Any = f[4] if len(f) > 4 else None
            if src is not None and src.strip() and _positions(pos, 4):   # kept: its indent
                src = " " * pos[3] + src
            elif src is None and lines is not None and isinstance(file, str) \
                    and isinstance(lineno, int):
                src = lines.line(file, lineno)
            if src and src.strip():
                put("    ")
                put(src.strip())
                put("\n")
                if _positions(pos, 3):
                    put(_markers(file, lineno, func, src, pos))
        if count > 3:
            put(_repeated(count - 3))
    if type(type_) is not str:
        from blogformat.boundedtext import bounded_text
        type_ = bounded_text(type_, None, out.budget)
    put(shown_type(type_))
    if message:
        put(": ")
        out.put_str(message)
    put("\n")
    for n in notes_ if isinstance(notes_, (list, tuple)) else ():
        out.put_str(n)
        put("\n")


def _positions(pos: Any, n: int) -> bool:
    """Whether ``pos`` holds at least ``n`` ints within bounds (a file is untrusted)."""
    return isinstance(pos, (list, tuple)) and len(pos) >= n \
        and all(type(x) is int and 0 <= x < 1 << 20 for x in pos[:n])


def _markers(file: Any, lineno: Any, func: Any, line: str, pos: Any) -> str:
    """The position markers (``~~~^^^^``) under a frame's source line, as 3.11's traceback
    prints them (its own code: the markers of each kind of expression), or ""."""
    import traceback          # only when a traceback with positions is rendered
    summary = traceback.FrameSummary(str(file), lineno, str(func), lookup_line=False,
                                     line=line + "\n", end_lineno=pos[0], colno=pos[1],
                                     end_colno=pos[2])   # the line as linecache gives it
    try:
        rows = traceback.StackSummary().format_frame_summary(summary).splitlines(True)
    except Exception:   # noqa: BLE001 - a crafted position never breaks the rendering
        return ""
    return "".join(rows[2:3]) if len(rows) > 2 and not rows[2].startswith("  File") else ""


def _repeated(n: int) -> str:
    return f"  [Previous line repeated {n} more time{'s' if n > 1 else ''}]\n"
