"""Reporting to stderr what the writer cannot raise: losses, failing outputs, its own errors."""

from __future__ import annotations

import sys


def report(text: str) -> None:
    """Write one line to stderr; never raises (stderr itself may be closed or full)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except Exception:
        pass
