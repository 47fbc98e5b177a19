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


def to_severity(value: "Severity | int | str") -> int:
    """Accept a Severity, its int value (0 to NO_LOGS) or its name ("info", "WARN", ...)."""
    if isinstance(value, str):
        key = value.strip().upper()
        for sev in Severity:
            if key in (sev.name, sev.abbrev):
                return sev
        if key in ("WARN",):
            return Severity.WARNING
        if key == "NO_LOGS":
            return NO_LOGS
        raise ValueError(f"unknown severity {value!r}; use one of "
                         + ", ".join(s.name.lower() for s in Severity))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"severity must be a Severity, int or name, not {type(value).__name__}")
    if not 0 <= value <= NO_LOGS:
        raise ValueError(f"severity {value} out of range: an int severity is 0 to {NO_LOGS} "
                         "(the C++ binlog's are 16 bits)")
    return value
