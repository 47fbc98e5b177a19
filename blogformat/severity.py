"""Severity levels, with the C++ binlog's numeric values."""

from __future__ import annotations

import enum


class Severity(enum.IntEnum):
    """How important an event is. Values match the C++ binlog, so files agree."""

    TRACE = 0x20
    DEBUG = 0x40
    INFO = 0x80
    WARNING = 0x100
    ERROR = 0x200
    CRITICAL = 0x400

    @property
    def abbrev(self) -> str:
        """The four-letter name bread prints for ``%S``."""
        return ABBREVIATIONS[self]


ABBREVIATIONS = {
    Severity.TRACE: "TRAC",
    Severity.DEBUG: "DEBG",
    Severity.INFO: "INFO",
    Severity.WARNING: "WARN",
    Severity.ERROR: "ERRO",
    Severity.CRITICAL: "CRIT",
}

#: Above every severity: a minimum of NO_LOGS disables everything.
NO_LOGS = 0x7FFF

#: ``logging``'s levels and the severity each maps to (5 is the customary TRACE level).
#: Any other level maps to the nearest of these, a tie to the lower (``from_logging``).
LOGGING_LEVELS = ((5, Severity.TRACE), (10, Severity.DEBUG), (20, Severity.INFO),
                  (30, Severity.WARNING), (40, Severity.ERROR), (50, Severity.CRITICAL))

#: The names ``logging`` has beside blog's own.
_ALIASES = {"WARN": Severity.WARNING, "FATAL": Severity.CRITICAL}


def from_logging(levelno: int) -> Severity:
    """The severity of a ``logging`` level: the nearest of LOGGING_LEVELS, a tie to the
    lower (0 and 7 are trace, 8 and 15 debug, 25 info, 60 and above critical)."""
    best = LOGGING_LEVELS[0]
    for lv in LOGGING_LEVELS:
        if abs(levelno - lv[0]) < abs(levelno - best[0]):
            best = lv
    return best[1]


def to_severity(value: "Severity | int | str") -> int:
    """Accept a Severity, an int or a name ("info", "WARN", "fatal", ...).

    An int below DEBUG's value (0x40), other than TRACE's (0x20), is a ``logging`` level
    (``logging.ERROR`` is error: ``from_logging``); any other, up to NO_LOGS, is a
    severity as it is.
    """
    if isinstance(value, str):
        key = value.strip().upper()
        for sev in Severity:
            if key in (sev.name, sev.abbrev):
                return sev
        if key in _ALIASES:
            return _ALIASES[key]
        if key == "NO_LOGS":
            return NO_LOGS
        raise ValueError(f"unknown severity {value!r}; use one of "
                         + ", ".join(s.name.lower() for s in Severity))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"severity must be a Severity, int or name, not {type(value).__name__}")
    if not 0 <= value <= NO_LOGS:
        raise ValueError(f"severity {value} out of range: an int severity is 0 to {NO_LOGS} "
                         "(the C++ binlog's are 16 bits)")
    if value < Severity.DEBUG and value != Severity.TRACE:
        return from_logging(value)
    return value
