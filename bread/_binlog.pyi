"""The C extension built from bread/_binlog.c (setup.py); its Python twin is the reference
(bread/cxx/render.py, driven by bread/cxx/fastpath.py)."""

from typing import Any


def __getattr__(name: str) -> Any: ...
