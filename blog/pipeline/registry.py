"""Registry: what a session's loggers and writers share, apart from the session itself.

The metadata their events need (event sources and call sites, value types,
writers' properties), written ahead of the first event that needs it, and the
settings they read on every call (minimum severity, backtrace, source lines).
A crash buffer, when the session has one, is told of each entry as it is made
(``mirror``). Loggers and writers depend on this; the Session builds on it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import CodeType

from blogformat.typinglite import TYPE_CHECKING, Protocol
from blogformat import valuetypes
from blogformat.entries import SOURCE_BACKTRACE, EventSource, Metadata, WriterProp
from blogformat.placeholders import parse
from blogformat.plainclass import Frozen
from blogformat.severity import Severity
from blogformat.valuetypes import Described

from ..report import report
from .source import (DYNAMIC_FORMAT, MAX_FORMAT, MAX_SOURCE_TEXT, MAX_SOURCES,
                     OVERFLOW_SOURCES, TooManySources)

if TYPE_CHECKING:
    from typing import Any

    from ..files.crashbuf import CrashBuffer   # imported with the first crash buffer (start-up)

#: The category of the sources of call sites past MAX_SOURCES (their own category is
#: in the message).
OVERFLOW_CATEGORY = "blog.overflow"

#: The lines a source can hold (msgpack's ints: 64 bits, signed or not). Another (a
#: ``LogRecord``'s crafted ``lineno``) is line 0: its metadata could not be written, and
#: every consume after it would fail.
_LINE_MIN, _LINE_END = -(1 << 63), 1 << 64

#: Metadata strings are cut at this many characters, so that an entry always fits in a frame
#: (a format string is never cut: check_template refuses one longer than MAX_FORMAT).
MAX_METADATA_TEXT = 1 << 16


class Reader(Protocol):
    """What reads the settings (a Logger): told to read them again when they change."""

    category: str

    def refresh(self) -> None: ...


class Backtrace(Frozen):
    """A session's backtrace settings (``Session.use_backtrace``)."""

    size: int
    trigger: int
    least: int


class Registry:
    """One session's sources, call sites, value types and pending metadata, and the settings
    its loggers and writers read.

    ``lock`` guards them and the session's writers. Reentrant: a signal handler or a
    finalizer may log (and so register a source or a writer) while this thread holds it.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.min_severity: int = Severity.TRACE   # no logger of the session logs below it
        #: The minimums set per category (``set_category_min``); a category without one has
        #: its nearest parent's, as ``logging``'s logger tree does.
        self.category_min: dict[str, int] = {}
        self.loggers: Mapping[str, Reader] = {}   # the session's loggers, by category
        self.backtrace: Backtrace | None = None    # Session.use_backtrace
        #: A literal format that does not fit its call raises CallSiteError (Session.strict);
        #: otherwise it is logged as text.
        self.strict = False
        #: Warnings and above are also shown on stderr as text at the call (the default
        #: session's until it is given an output: ``use_last_resort``).
        self.last_resort = False
        #: Keep the source line of each traceback frame of a logged exception (read from its
        #: file at the call); by default only file, line and function are kept, and the
        #: reader shows the line from the file where it has it.
        self.keep_source_lines = False
        self.mirror: CrashBuffer | None = None    # the crash buffer told of each entry
        self.sources: list[EventSource] = []
        self._overflow: dict[int, EventSource] = {}   # by severity: sources past MAX_SOURCES
        self._source_text = 0                          # their text, against MAX_SOURCE_TEXT
        self._full = ""                   # the limit that sent call sites to the overflow
        self._sites: dict[tuple, EventSource] = {}
        # Site keys hold id(code) (hashing a code object hashes all of it); the code
        # objects are kept alive here so that no other code object can take their id.
        self._site_codes: set[Any] = set()
        self.pending: list[Metadata] = []        # to write before the events that need it
        # Value types described so far (blogformat.valuetypes), and from now on as they are
        # (appended without a lock: see type_described); the first _types_written of them
        # are in the current stream's metadata.
        self.types: list[Described] = []
        self._types_written = 0
        self.types[:0] = valuetypes.listen(self)

    def registering_here(self) -> bool:
        """True if the calling thread holds ``lock``: it is registering a source or writer,
        and logged again from inside (a gc callback, a finalizer). A drainer needs that
        lock, so such a thread must not wait for one."""
        return self.lock._is_owned()   # type: ignore[attr-defined]  # RLock's own check

    # --- minimum severities -----------------------------------------------------

    def min_of(self, category: str) -> int:
        """The minimum set for ``category``, or else for its nearest parent (``db`` for
        ``db.pool`` and ``db.pool.conn``); TRACE if none is. The session's applies too."""
        mins = self.category_min
        while mins:
            m = mins.get(category)
            if m is not None:
                return m
            dot = category.rfind(".")
            if dot < 0:
                break
            category = category[:dot]
        return Severity.TRACE

    def set_category_min(self, category: str, severity: int | None) -> None:
        """Set ``category``'s own minimum (None: its parent's again); its loggers and its
        children's read it at once."""
        with self.lock:
            if severity is None:
                self.category_min.pop(category, None)
            else:
                self.category_min[category] = severity
            below = category + "."
            for lg in list(self.loggers.values()):
                if lg.category == category or lg.category.startswith(below):
                    lg.refresh()

    def refresh_loggers(self) -> None:
        """Every logger reads the settings again (the session's minimum or backtrace changed)."""
        with self.lock:
            for lg in list(self.loggers.values()):
                lg.refresh()

    def use_last_resort(self, on: bool) -> None:
        """Show warnings and above on stderr as text at the call, besides queueing them (as
        ``logging``'s last resort does while it has no handler), or stop; the loggers'
        methods of those levels take the Python path while it is on."""
        with self.lock:
            if self.last_resort != on:
                self.last_resort = on
                self.refresh_loggers()

    # --- event sources and call sites -----------------------------------------

    def add_source(self, *, key: tuple | None, severity: int, category: str, function: str,
                   file: str, line: int, format: str, arg_tags: str,
                   field_names: tuple[str, ...] = (), positional: int = 0,
                   template: Any = None, code: Any = None,
                   arg_names: tuple[str, ...] = (), style: str = "",
                   flags: int = 0) -> EventSource:
        """Register an EventSource once per ``key``; its metadata is written before its first event.

        ``code`` is the call site's code object, when ``key`` holds its id; ``style`` the
        syntax of ``format`` (EventSource.style).
        """
        if type(line) is not int or not _LINE_MIN <= line < _LINE_END:
            line = int(line) if isinstance(line, int) else 0
            line = line if _LINE_MIN <= line < _LINE_END else 0
        with self.lock:
            if key is not None and key in self._sites:
                return self._sites[key]
            text = (len(category) + len(function) + len(file) + min(len(format), MAX_FORMAT)
                    + len(arg_tags) + sum(map(len, field_names)) + sum(map(len, arg_names)))
            if len(self.sources) >= MAX_SOURCES or self._source_text + text > MAX_SOURCE_TEXT:
                self._full = self._limit_reached()
                raise TooManySources(f"{file}:{line} ({function}): the session's call sites "
                                     f"fill a stream: {self._full}")
            self._source_text += text
            src = EventSource(len(self.sources) + 1, severity, _cap(category), _cap(function),
                              _cap(file), line, _cap(format, MAX_FORMAT), _cap(arg_tags),
                              tuple(field_names), positional, template,
                              tuple(_cap(n) for n in arg_names), style=style, flags=flags)
            self.sources.append(src)
            self.note(src)
            if key is not None:
                self._sites[key] = src
                if code is not None:
                    self._site_codes.add(code)
            return src

    def overflow_source(self, severity: int) -> EventSource:
        """A source for call sites that come after the session has MAX_SOURCES: format
        ``{}``, the message rendered at call time; one per severity (up to
        OVERFLOW_SOURCES, then the nearest)."""
        with self.lock:
            src = self._overflow.get(severity)
            if src is None:
                if len(self._overflow) >= OVERFLOW_SOURCES:
                    return self._overflow[min(self._overflow, key=lambda s: abs(s - severity))]
                if not self._overflow:
                    report(f"blog: the session's call sites fill a stream "
                           f"({self._full or self._limit_reached()}): later ones are "
                           f"logged as text (category, call site and message) in category "
                           f"{OVERFLOW_CATEGORY!r}")
                src = EventSource(len(self.sources) + 1, severity, OVERFLOW_CATEGORY, "", "",
                                  0, DYNAMIC_FORMAT, "str", (), 1, parse(DYNAMIC_FORMAT))
                self.sources.append(src)
                self.note(src)
                self._overflow[severity] = src
            return src

    def _limit_reached(self) -> str:
        """Which of the two limits on a session's sources its call sites reached."""
        if len(self.sources) >= MAX_SOURCES:
            return f"as many call sites as a stream holds ({MAX_SOURCES:,})"
        return (f"their text, formats, names and files, reached the {MAX_SOURCE_TEXT:,} "
                f"characters a stream holds, at {len(self.sources):,} sources")

    def is_overflow(self, source: EventSource) -> bool:
        """True for a source ``overflow_source`` made."""
        return self._overflow.get(source.severity) is source

    def add_site(self, key: tuple, source: EventSource,
                 code: CodeType | None = None) -> EventSource:
        """Let ``key`` find ``source`` too (unless it finds one already); return what it finds."""
        with self.lock:
            if code is not None:
                self._site_codes.add(code)
            return self._sites.setdefault(key, source)

    def site(self, key: tuple) -> EventSource | None:
        """The source registered for ``key``, if any."""
        return self._sites.get(key)

    def backtrace_source(self, sid: int) -> int:
        """The id of the twin of source ``sid`` that marks events from the backtrace."""
        src = self.sources[sid - 1]
        try:
            return self.add_source(
                key=("backtrace", sid), severity=src.severity, category=src.category,
                function=src.function, file=src.file, line=src.line, format=src.format,
                arg_tags=src.arg_tags, field_names=src.field_names, positional=src.positional,
                template=src.template, arg_names=src.arg_names, style=src.style,
                flags=SOURCE_BACKTRACE).id
        except TooManySources:
            return sid

    # --- metadata to write ------------------------------------------------------

    def note(self, entry: Metadata) -> None:
        """Metadata to write before the events that need it (a source, a writer's properties);
        the crash buffer keeps it too."""
        with self.lock:
            self.pending.append(entry)
            if self.mirror is not None:
                self.mirror.describe([entry])

    def described(self, entry: Metadata) -> None:
        """In-band metadata (a thread renaming itself), for the crash buffer."""
        if self.mirror is not None:
            self.mirror.describe([entry])

    def type_described(self, entry: Described) -> None:
        """A value type described (process-wide) for the first time: written ahead of the
        first event that holds it, and into every stream from now on.

        Called with the type registry's lock held: it takes no lock of the session's (a
        signal handler logging a new type while its thread holds ``lock`` would deadlock).
        An append is atomic, and happens before any event holding the id is queued, so the
        consume that drains such an event finds the entry (``new_types``)."""
        self.types.append(entry)
        cb = self.mirror
        if cb is not None:
            cb.describe([entry])

    def new_types(self) -> list[Described]:
        """The descriptions not yet in the current stream's metadata (with ``lock`` held)."""
        n = len(self.types)
        new = self.types[self._types_written:n]
        self._types_written = n
        return new

    def for_new_stream(self) -> list[Metadata]:
        """Every source and type, for a stream that starts (with ``lock`` held): the types
        count as written to it."""
        self._types_written = 0
        return [*self.sources, *self.new_types()]

    def forked(self) -> None:
        """In a child made by fork(): a new lock (a thread that is gone may have held it); the
        parent's writers and crash buffer are not the child's."""
        self.lock = threading.RLock()
        self.pending = [e for e in self.pending if not isinstance(e, WriterProp)]
        self.mirror = None


def _cap(text: str, limit: int = MAX_METADATA_TEXT) -> str:
    """Metadata strings are cut at ``limit`` characters, so that an entry always fits in a frame."""
    return text if len(text) <= limit else text[:limit] + "..."
