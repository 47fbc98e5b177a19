"""Filters: which events a reader gives.

What depends only on the call site (severity, category, file, line,
function), the writer or the time is decided before any argument is decoded:
the C reader does not make the events it leaves out, so a filter makes
reading faster, not slower. A regular expression over the message is applied
to what remains.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time

from blogformat.typinglite import TYPE_CHECKING
from blogformat.entries import EventSource, WriterProp
from blogformat.plainclass import Frozen
from blogformat.severity import to_severity

from ..errors import OptionError
from ..events import Event

if TYPE_CHECKING:
    from typing import Iterable

_UNITS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9,
          "w": 7 * 86400 * 10**9}
_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)\Z")


def parse_time(text: str, now_ns: int | None = None) -> int:
    """A time as ns since the epoch: ISO 8601 (``2026-11-26T10:00:00+01:00``; without an
    offset, this machine's local time) or relative to now (``15m``, ``2h``, ``1d``, ``500ms``:
    that long ago). Raises ValueError for anything else."""
    t = text.strip()
    m = _RELATIVE.match(t)
    if m:
        from fractions import Fraction   # (here: only a relative time needs it)
        now = time.time_ns() if now_ns is None else now_ns
        return now - int(Fraction(m.group(1)) * _UNITS[m.group(2)])
    try:
        when = _dt.datetime.fromisoformat(t.replace("Z", "+00:00") if t.endswith("Z") else t)
    except ValueError:
        raise OptionError(f"not a time: {text!r} (use ISO 8601, e.g. 2026-11-26T10:00:00, "
                          "or a duration ago: 30s, 15m, 2h, 1d)") from None
    if when.tzinfo is None:
        when = when.astimezone()   # this machine's zone
    delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def names_source(src: EventSource, which: int | str) -> bool:
    """``which`` names this source: its id, its format string or its function (its
    qualified name, or the name after the last dot), as ``bread.spark.events`` takes it."""
    if isinstance(which, int):
        return src.id == which
    return which in (src.format, src.function, src.function.rpartition(".")[2])


def category_in(category: str, names: frozenset[str]) -> bool:
    """``category`` is one of ``names`` or below one on the dots (``db.pool`` is under
    ``db``, as logger names and severity minimums are), or named exactly (``=db``: that
    category alone)."""
    if category in names or "=" + category in names:
        return True
    while "." in category:
        category = category.rpartition(".")[0]
        if category in names:
            return True
    return False


class Filter(Frozen):
    """Which events to give; every part optional (None or empty: no condition).

    ``since`` and ``until`` are ns since the epoch (``since`` included,
    ``until`` not); ``sites`` match a call site by function (qualified name or
    its last part), file name or path, or ``file:line``; ``categories`` take the categories
    below them on the dots (``category_in``); ``source`` names one kind of
    event (``names_source``: a typed table's); ``grep`` is searched in the rendered message.
    """

    min_severity: int | None = None
    categories: frozenset[str] | None = None
    since: int | None = None
    until: int | None = None
    writers: frozenset[str] | None = None
    sites: tuple[str, ...] = ()
    source: int | str | None = None
    grep: re.Pattern[str] | None = None

    @classmethod
    def make(cls, *, min_severity: int | str | None = None,
             categories: Iterable[str] | str | None = None, since: int | str | None = None,
             until: int | str | None = None, writers: Iterable[str] | str | None = None,
             sites: Iterable[str] | str | None = None, source: int | str | None = None,
             grep: str | None = None) -> "Filter":
        """A Filter from what a user gives: names, comma-separated lists, times as text."""
        def names(v: Iterable[str] | str | None) -> frozenset[str] | None:
            if v is None:
                return None
            items = v.split(",") if isinstance(v, str) else list(v)
            return frozenset(x.strip() for x in items if x.strip())

        def when(v: int | float | str | None) -> int | None:
            if v is None:
                return None
            return parse_time(v) if isinstance(v, str) else int(v)

        return cls(
            min_severity=None if min_severity is None else to_severity(min_severity),
            categories=names(categories), since=when(since), until=when(until),
            writers=names(writers), sites=tuple(sorted(names(sites) or ())), source=source,
            grep=None if grep is None else re.compile(grep))

    @property
    def active(self) -> bool:
        return self != _NOTHING

    def source_ok(self, src: EventSource) -> bool:
        if self.min_severity is not None and src.severity < self.min_severity:
            return False
        if self.categories is not None and not category_in(src.category, self.categories):
            return False
        if self.sites:
            base = os.path.basename(src.file)
            keys = {src.function, src.function.rsplit(".", 1)[-1], src.file, base,
                    f"{src.file}:{src.line}", f"{base}:{src.line}"}
            if keys.isdisjoint(self.sites):
                return False
        if self.source is not None and not names_source(src, self.source):
            return False
        return True

    def writer_ok(self, w: WriterProp) -> bool:
        return self.writers is None or w.name in self.writers

    def keeps(self, ev: Event) -> bool:
        """Everything but ``grep``: what can be decided without the message."""
        if self.since is not None and ev.ns < self.since:
            return False
        if self.until is not None and ev.ns >= self.until:
            return False
        return self.source_ok(ev.source) and self.writer_ok(ev.writer_prop)

    def __call__(self, ev: Event) -> bool:
        return self.keeps(ev) and (self.grep is None or self.grep.search(ev.message) is not None)


_NOTHING = Filter()
NO_FILTER = _NOTHING
