"""The C extension built from bread/_speedups.c (setup.py); its Python twin is the reference."""

from typing import Any


def __getattr__(name: str) -> Any: ...
