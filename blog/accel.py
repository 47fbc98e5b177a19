"""The optional C fast path (``blog/_speedups.c``), or None.

Read as ``accel.speedups`` at the point of use, so that tests (and
``BLOG_PURE_PYTHON=1``) can run everything through the pure-Python code,
which is the reference the C code must match.
"""

from __future__ import annotations

import os
from types import ModuleType

#: Said once, at the first import, where the C fast path is missing and not chosen away.
NOTICE = ("blog: the C fast path (blog._speedups) is not built here (no C compiler at "
          "install?): log calls take the pure-Python path, about 16x slower (1.5 us a call "
          "instead of 0.08 to 0.1: docs/performance.md). Install with a C compiler to build it, or set "
          "BLOG_PURE_PYTHON=1 to choose the pure-Python path and hide this line.")

speedups: ModuleType | None
try:
    from . import _speedups as speedups
except ImportError:  # built without a C compiler, or where setup.py builds none
    speedups = None
    if not os.environ.get("BLOG_PURE_PYTHON"):
        from .report import report
        report(NOTICE)
if os.environ.get("BLOG_PURE_PYTHON"):
    speedups = None
if speedups is not None:   # what the Python path records per class, the C path reads
    from blogformat.valueencoding import ENUM_TYPES, RECORD_TYPES
    speedups.use_registries(ENUM_TYPES, RECORD_TYPES)
