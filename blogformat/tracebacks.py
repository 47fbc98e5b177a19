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

from blogformat.typinglite import TYPE_CHECKING

if TYPE_CHECKING:   # (the reader's, imported where a traceback is rendered: the writer never)
    from typing import Any, Callable

    from blogformat.boundedtext import TextBudget

#: How many chained exceptions (causes and contexts) are kept at most, and how many frames
#: of one traceback (the most recent ones; a RecursionError has a thousand).
MAX_CHAIN = 32
MAX_FRAMES = 1024
#: Of an exception group: how many of its exceptions are kept (the first ones; the text
#: says "and N more exceptions" of the others), and how deep groups in groups are shown:
#: ``traceback``'s own ``max_group_width`` and ``max_group_depth``, whose text is matched.
MAX_MEMBERS = 15
MAX_GROUP_DEPTH = 10
#: Exceptions kept of one logged exception at most, its chain, groups' members and
#: theirs included (past it, a group's members left are "N more exceptions").
MAX_EXCEPTIONS = 128
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


def exception(exc: BaseException, type_name: Callable[[type], str],
              text: Callable[[Any], str], source_lines: bool = False) -> list:
    """The data of extension 13 (docs/format.md 7): ``[type, message, None, frames,
    notes, chain]``, then ``group`` and ``syntax`` where this exception or one printed
    with it is an exception group or a SyntaxError. What is kept is what
    ``traceback.format_exception`` prints, decided as it decides (an exception it has
    already printed is not printed again as a cause or context), within MAX_CHAIN,
    MAX_MEMBERS, MAX_GROUP_DEPTH and MAX_EXCEPTIONS."""
    return _Kept(type_name, text, source_lines).data(exc)


class NoException:
    """What ``sys.exc_info()`` gives outside an ``except`` block, as a value to log:
    written as an exception never raised of type ``NoneType`` and message ``None``, which
    reads back as the text ``logging`` prints for ``exc_info=True`` there (and
    ``traceback.print_exception(None)``): ``NoneType: None``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_EXCEPTION"


NO_EXCEPTION = NoException()
#: Its extension 13 data.
NO_EXCEPTION_DATA = ["NoneType", "None", None, None, None, None]


class _Node:
    """An exception as ``traceback.TracebackException`` holds it: its cause or context
    (the one printed before it), its members if it is a group (None: not one), how deep
    in groups it is printed and how far along its chain it is."""

    __slots__ = ("exc", "before", "link", "members", "depth", "step")

    def __init__(self, exc: BaseException, depth: int, step: int) -> None:
        self.exc, self.depth, self.step = exc, depth, step
        self.before: _Node | None = None
        self.link = 0
        self.members: list[_Node] | None = None


class _Kept:
    """What ``exception`` keeps of one exception: the nodes ``TracebackException`` makes,
    in its order (its ``_seen`` decides which causes and contexts are printed), then
    their data."""

    def __init__(self, type_name: Callable[[type], str], text: Callable[[Any], str],
                 source_lines: bool) -> None:
        self.type_name, self.text, self.source_lines = type_name, text, source_lines

    def data(self, exc: BaseException) -> list:
        root = _Node(exc, 0, 0)
        if exc.__cause__ is None and exc.__context__ is None \
                and not isinstance(exc, (BaseExceptionGroup, SyntaxError)):
            return self._entry(root)     # (the common case, in short)
        seen, left, queue = {id(exc)}, MAX_EXCEPTIONS - 1, [root]
        while queue:
            node = queue.pop()
            e = node.exc
            if node.step < MAX_CHAIN and left:
                cause = e.__cause__
                if cause is not None and id(cause) not in seen \
                        and isinstance(cause, BaseException):
                    node.before, node.link = _Node(cause, node.depth, node.step + 1), CAUSE
                else:
                    context = e.__context__
                    if context is not None and not e.__suppress_context__ \
                            and id(context) not in seen and isinstance(context, BaseException):
                        node.before = _Node(context, node.depth, node.step + 1)
                        node.link = CONTEXT
                if node.before is not None:
                    seen.add(id(node.before.exc))
                    left -= 1
            if isinstance(e, BaseExceptionGroup):
                node.members = []
                # A group deeper than traceback shows is printed as "..." only.
                if node.depth <= MAX_GROUP_DEPTH:
                    depth = max(node.depth, 1) + 1
                    for m in e.exceptions[:min(MAX_MEMBERS, left)]:
                        node.members.append(_Node(m, depth, 0))
                    left -= len(node.members)
                seen.update(map(id, e.exceptions[:MAX_EXCEPTIONS]))
            if node.before is not None:
                queue.append(node.before)
            if node.members:
                queue.extend(node.members)
        return self._entry(root)

    def _entry(self, node: _Node, link: int = 0) -> list:
        """``[type, message, None, frames, notes, chain...]`` of a node printed with its
        chain (the logged exception, a group's member), or with ``link`` a chain's
        ``[type, message, frames, notes, link...]``."""
        e = node.exc
        text = self.text
        out: list = [self.type_name(type(e)), text(e), None,
                     frames(e.__traceback__, self.source_lines),
                     notes(e, text)]
        if link:
            out[2:3] = []
            out.append(link)
        else:
            chain = []
            at = node
            while at.before is not None:   # each entry's link: how the one after it relates
                chain.append(self._entry(at.before, at.link))
                at = at.before
            chain.reverse()
            out.append(chain or None)
        group = syntax = None
        if node.members is not None:
            count = len(e.exceptions)   # type: ignore[attr-defined]
            group = [count, [self._entry(m) for m in node.members]]
        if isinstance(e, SyntaxError):
            syntax = [_text_or_none(e.msg, text), _text_or_none(e.filename, text),
                      _int_or_none(e.lineno), _int_or_none(e.offset),
                      _text_or_none(e.text, text), _int_or_none(e.end_lineno),
                      _int_or_none(e.end_offset)]
        if group is not None or syntax is not None:
            out += [group, syntax]
        return out


def _text_or_none(x: Any, text: Callable[[Any], str]) -> str | None:
    return x if x is None or type(x) is str else text(x)


def _int_or_none(x: Any) -> int | None:
    return x if type(x) is int and -(1 << 63) <= x < 1 << 63 else None


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
           lines: SourceLines | None, limit: int = MAX_TRACEBACK_TEXT, group: Any = None,
           syntax: Any = None) -> str:
    """The text ``traceback.format_exception`` gives (position markers where the frames
    have their columns and a source line is at hand): of the last MAX_CHAIN chained
    exceptions and the last MAX_FRAMES frames of each (a file's may hold more), a group's
    members in their boxes (``group``: ``[count, members]``, docs/format.md 7), a
    SyntaxError's place (``syntax``); at most ``limit`` characters, CUT included."""
    from blogformat.boundedtext import Spent, TextBudget
    out = TextBudget(limit)
    try:
        _format(chain_, (type_, message, frames_, notes_, group, syntax), _Context(), lines,
                out)
    except Spent:   # cut so that the whole, CUT included, is within the limit
        cut = CUT.format(limit)
        return out.text()[:max(0, limit - len(cut))] + cut
    return "".join(out.pieces)


class _Context:
    """``traceback._ExceptionPrintContext``: how deep in groups the text is, whether a
    group's last box is still to close; and how many exceptions may still be shown
    (MAX_EXCEPTIONS: a crafted file's)."""

    __slots__ = ("depth", "need_close", "left")

    def __init__(self) -> None:
        self.depth, self.need_close, self.left = 0, False, MAX_EXCEPTIONS

    def indent(self) -> str:
        return " " * (2 * self.depth)


def _format(chain_: Any, node: tuple, ctx: _Context, lines: SourceLines | None,
            out: TextBudget) -> None:
    """An exception with its chain, as ``TracebackException.format`` gives it."""
    for entry in chain_[-MAX_CHAIN:] if isinstance(chain_, (list, tuple)) else ():
        if not isinstance(entry, (list, tuple)):
            continue
        t, m, fr, no, link, group, syntax = (list(entry[:7]) + [None] * 7)[:7]
        _node((t, m, fr, no, group, syntax), ctx, lines, out)
        sep = SEPARATORS[link] if link in (CAUSE, CONTEXT) else SEPARATORS[CONTEXT]
        _emit(ctx, out, lambda o: o.put(sep))
    _node(node, ctx, lines, out)


def _node(node: tuple, ctx: _Context, lines: SourceLines | None, out: TextBudget) -> None:
    type_, message, frames_, notes_, group, syntax = node
    ctx.left -= 1
    has_frames = isinstance(frames_, (list, tuple)) and bool(frames_)
    if not (isinstance(group, (list, tuple)) and len(group) >= 2 and type(group[0]) is int):
        def plain(o: TextBudget) -> None:
            if has_frames:
                o.put("Traceback (most recent call last):\n")
                _stack(frames_, lines, o)
            _exception_only(type_, message, notes_, syntax, o)
        _emit(ctx, out, plain)
        return
    if ctx.depth > MAX_GROUP_DEPTH:
        _emit(ctx, out, lambda o: o.put(f"... (max_group_depth is {MAX_GROUP_DEPTH})\n"))
        return
    toplevel = ctx.depth == 0
    if toplevel:
        ctx.depth += 1
    if has_frames:
        _emit(ctx, out, lambda o: o.put("Exception Group Traceback (most recent call last):\n"),
              "+" if toplevel else "|")
        _emit(ctx, out, lambda o: _stack(frames_, lines, o))
    _emit(ctx, out, lambda o: _exception_only(type_, message, notes_, syntax, o))
    members = group[1] if isinstance(group[1], (list, tuple)) else ()
    kept = [m for m in members[:MAX_MEMBERS] if isinstance(m, (list, tuple))]
    kept = kept[:max(0, ctx.left)]
    count = max(group[0], len(kept))
    n = len(kept) + (count > len(kept))
    ctx.need_close = False
    for i in range(n):
        last = i == n - 1
        if last:
            ctx.need_close = True   # (a group in the last box may close it)
        title = str(i + 1) if i < len(kept) else "..."
        out.put(f"{ctx.indent()}{'+-' if i == 0 else '  '}+---------------- {title} "
                "----------------\n")
        ctx.depth += 1
        if i < len(kept):
            t, m, _, fr, no, chain, g, sx = (list(kept[i][:8]) + [None] * 8)[:8]
            _format(chain, (t, m, fr, no, g, sx), ctx, lines, out)
        else:
            more = count - len(kept)
            _emit(ctx, out,
                  lambda o: o.put(f"and {more} more exception{'s' if more > 1 else ''}\n"))
        if last and ctx.need_close:
            out.put(f"{ctx.indent()}+------------------------------------\n")
            ctx.need_close = False
        ctx.depth -= 1
    if toplevel:
        ctx.depth = 0


def _emit(ctx: _Context, out: TextBudget, write: Callable[[TextBudget], None],
          margin: str = "|") -> None:
    """What ``write`` puts, each line after the margin of ``ctx``'s depth in groups (as
    ``textwrap.indent`` puts it), within ``out``'s budget."""
    if ctx.depth == 0:
        write(out)
        return
    from blogformat.boundedtext import TextBudget
    part = TextBudget(max(0, out.budget - out.size))
    prefix = f"{ctx.indent()}{margin} "
    try:
        write(part)
    finally:   # (what fitted, if the budget is spent: out then raises Spent too)
        out.put("".join(prefix + line for line in "".join(part.pieces).splitlines(True)))


def _stack(frames_: Any, lines: SourceLines | None, out: TextBudget) -> None:
    """A traceback's frames (``StackSummary.format``); a crafted file's texts that are not
    str shown as ``str`` shows them (within the budget)."""
    put = out.put
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


def _exception_only(type_: Any, message: Any, notes_: Any, syntax: Any,
                    out: TextBudget) -> None:
    """``format_exception_only``: a SyntaxError's place, the last line, the notes."""
    put = out.put
    if type(type_) is not str:
        from blogformat.boundedtext import bounded_text
        type_ = bounded_text(type_, None, out.budget)
    shown = shown_type(type_)
    place = _syntax_lines(shown, syntax) if isinstance(syntax, (list, tuple)) and syntax \
        else None
    if place is not None:
        put(place)
    else:
        put(shown)
        if message:
            put(": ")
            out.put_str(message)
        put("\n")
    for n in notes_ if isinstance(notes_, (list, tuple)) else ():
        out.put_str(n)
        put("\n")


def _syntax_lines(shown: str, syntax: Any) -> str | None:
    """A SyntaxError's lines as ``traceback`` prints them (its place: file, line, the
    source line and carets; then ``shown: msg``), from ``[msg, filename, lineno, offset,
    text, end_lineno, end_offset]``; None where they are not of their types (a crafted
    file's)."""
    msg, filename, lineno, offset, text, end_lineno, end_offset = (list(syntax[:7])
                                                                   + [None] * 7)[:7]
    if not (all(x is None or type(x) is str for x in (msg, filename, text))
            and all(x is None or (type(x) is int and -(1 << 20) < x < 1 << 20)
                    for x in (lineno, offset, end_lineno, end_offset))):
        return None
    import traceback          # only when a SyntaxError is rendered
    try:
        got = traceback.format_exception_only(
            SyntaxError(msg, (filename, lineno, offset, text, end_lineno, end_offset)))
    except Exception:   # noqa: BLE001 - a crafted place never breaks the rendering
        return None
    if not got or not got[-1].startswith("SyntaxError"):
        return None
    got[-1] = shown + got[-1][len("SyntaxError"):]
    return "".join(got)


def _positions(pos: Any, n: int) -> bool:
    """Whether ``pos`` holds at least ``n`` ints within bounds (a file is untrusted)."""
    return isinstance(pos, (list, tuple)) and len(pos) >= n \
        and all(type(x) is int and 0 <= x < 1 << 20 for x in pos[:n])


def _markers(file: Any, lineno: Any, func: Any, line: str, pos: Any) -> str:
    """The position markers (``~~~^^^^``) under a frame's source line, as the running
    Python's traceback prints them (its own code: the markers of each kind of expression;
    3.13 marks calls that 3.11 leaves bare), or ""."""
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
