"""When a rotating output switches files by time: an interval, times of day, in a zone.

``rotate_every`` ("90s", "15m", "1h", "1d", seconds, a timedelta) switches at
the multiples of the interval on the zone's wall clock counted from its
midnight (so "1h" is on the hour and "6h" at 00:00, 06:00, 12:00 and 18:00,
daylight saving days included), starting afresh at each midnight; an
interval of a day or more counts from the file's opening.
``rotate_at`` ("00:00", "12:30:15", or a list of them) switches when the
wall clock of the zone shows that time. ``tz`` is an IANA zone name (pytz);
None is the process's local zone.

Daylight saving days: a time of day that does not exist that day (inside the
spring-forward gap) switches at the end of the gap, when the clocks jump; a
time of day that happens twice (the autumn fall-back) switches at its first
occurrence only.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, Iterable

import pytz

from ..errors import ConfigurationError

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d|w)\s*$")
_TIME_OF_DAY = re.compile(r"^(\d\d?):(\d\d)(?::(\d\d))?$")
_DAY_NS = 86400 * 1_000_000_000

#: What ``rotate_every`` takes: "1h", "15m", seconds, a timedelta.
Interval = str | float | _dt.timedelta
#: What ``rotate_at`` takes: "00:00", "12:30:15", a time, or several of them.
TimesOfDay = str | _dt.time | Iterable[str | _dt.time]


def parse_interval(value: Any, option: str = "rotate_every") -> int:
    """An interval ("1h", "15m", 90, timedelta) in ns; ValueError naming ``option`` if bad."""
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _INTERVAL.match(value)):
        seconds = float(m[1]) * _UNITS[m[2]]
    else:
        raise ConfigurationError(f"{option} must be an interval like '1h', '15m', '1d' or seconds, "
                                 f"not {value!r}")
    if not seconds >= 1 or not math.isfinite(seconds):
        raise ConfigurationError(f"{option} must be at least one second and finite, not {value!r}")
    return int(seconds * 1_000_000_000)


def parse_times(value: Any, option: str = "rotate_at") -> list[_dt.time]:
    """Times of day ("00:00", "12:30:15", or a list of them); ValueError naming ``option``."""
    items: Iterable[Any] = [value] if isinstance(value, (str, _dt.time)) else value
    try:
        items = list(items)
    except TypeError:
        raise ConfigurationError(f"{option} must be a time of day like '00:00' or a list of them, "
                                 f"not {value!r}") from None
    out = []
    for item in items:
        if isinstance(item, _dt.time):
            out.append(item.replace(tzinfo=None))
            continue
        m = _TIME_OF_DAY.match(item) if isinstance(item, str) else None
        if m is None or int(m[1]) > 23 or int(m[2]) > 59 or int(m[3] or 0) > 59:
            raise ConfigurationError(f"{option} must be a time of day HH:MM or HH:MM:SS (00:00 to "
                                     f"23:59:59), not {item!r}")
        out.append(_dt.time(int(m[1]), int(m[2]), int(m[3] or 0)))
    if not out:
        raise ConfigurationError(f"{option} names no time of day")
    return sorted(set(out))


def parse_zone(value: Any, option: str = "tz") -> _dt.tzinfo | None:
    """A pytz zone from its IANA name (None: the local zone); ValueError naming ``option``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{option} must be a zone name like 'Europe/London', not {value!r}")
    try:
        return pytz.timezone(value)
    except pytz.UnknownTimeZoneError:
        raise ConfigurationError(f"{option}: unknown time zone {value!r}") from None


class Schedule:
    """The next switch time after a given time, from ``every`` and ``at`` in ``zone``."""

    def __init__(self, every: Interval | None = None, at: TimesOfDay | None = None,
                 tz: str | None = None) -> None:
        self.every = None if every is None else parse_interval(every)
        self.at = None if at is None else parse_times(at)
        self.zone = parse_zone(tz)

    @property
    def active(self) -> bool:
        return self.every is not None or self.at is not None

    def next_after(self, t_ns: int) -> int | None:
        """The first switch time strictly after ``t_ns`` (ns since the epoch), or None."""
        found: list[int] = []
        if self.every is not None:
            found.append(self._next_interval(t_ns))
        if self.at is not None:
            found.append(self._next_time_of_day(t_ns))
        return min(found) if found else None

    # --- in the zone ------------------------------------------------------

    def _wall(self, t_ns: int) -> _dt.datetime:
        """The zone's wall clock at ``t_ns``, naive."""
        utc = _dt.datetime.fromtimestamp(t_ns // 1_000_000_000, _dt.timezone.utc)
        local = utc.astimezone(self.zone) if self.zone is not None else utc.astimezone()
        return local.replace(tzinfo=None)

    def _instant(self, wall: _dt.datetime) -> int:
        """The first instant (ns) at which the zone's wall clock shows ``wall`` or later."""
        candidates = [self._localize(wall, dst) for dst in (True, False)]
        lo, hi = min(candidates), max(candidates)
        if lo == hi or self._wall(lo) == wall:
            return lo          # an ordinary time, or the first of a repeated one
        # Inside a gap: the clocks jump over ``wall`` between lo and hi. Find the jump.
        step = 60 * 1_000_000_000
        t = lo
        while t < hi and self._wall(t) < wall:
            t += step
        return t

    def _localize(self, wall: _dt.datetime, dst: bool) -> int:
        if self.zone is None:
            aware = wall.replace(fold=0 if dst else 1).astimezone()
        else:
            aware = self.zone.localize(wall, is_dst=dst)  # type: ignore[attr-defined]
        return int(aware.timestamp()) * 1_000_000_000

    def _midnight(self, t_ns: int) -> tuple[int, int]:
        """Local midnight at or before ``t_ns``, and the next one (ns)."""
        day = self._wall(t_ns).date()
        start = self._instant(_dt.datetime.combine(day, _dt.time()))
        end = self._instant(_dt.datetime.combine(day + _dt.timedelta(days=1), _dt.time()))
        return start, end

    def _next_interval(self, t_ns: int) -> int:
        """The next multiple of the interval on the zone's wall clock since its midnight
        (the next midnight at the latest), as an instant."""
        every = self.every
        assert every is not None
        if every >= _DAY_NS:
            return t_ns + every
        wall = self._wall(t_ns)
        midnight = _dt.datetime.combine(wall.date(), _dt.time())
        step = _dt.timedelta(microseconds=every // 1000)
        k = (wall - midnight) // step + 1
        while True:
            at = midnight + k * step
            if at.date() != midnight.date():
                at = midnight + _dt.timedelta(days=1)
            t = self._instant(at)
            if t > t_ns:
                return t
            k += 1      # a wall time repeated by the autumn change, seen already

    def _next_time_of_day(self, t_ns: int) -> int:
        assert self.at is not None
        day = self._wall(t_ns).date()
        for d in range(0, 3):
            date = day + _dt.timedelta(days=d)
            for at in self.at:
                t = self._instant(_dt.datetime.combine(date, at))
                if t > t_ns:
                    return t
        raise AssertionError("no time of day within three days")  # pragma: no cover
