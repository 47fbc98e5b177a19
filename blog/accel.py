"""The optional C fast path (``blog/_speedups.c``), or None.

Read as ``accel.speedups`` at the point of use, so that tests (and
``BLOG_PURE_PYTHON=1``) can run everything through the pure-Python code,
which is the reference the C code must match.
"""

from __future__ import annotations

import os
from types import ModuleType

speedups: ModuleType | None
try:
    from . import _speedups as speedups
except ImportError:  # pragma: no cover - built without a C compiler
    speedups = None
if os.environ.get("BLOG_PURE_PYTHON"):
    speedups = None
if speedups is not None:   # what the Python path records per class, the C path reads
    from blogformat.valueencoding import ENUM_TYPES, RECORD_TYPES
    speedups.use_registries(ENUM_TYPES, RECORD_TYPES)
