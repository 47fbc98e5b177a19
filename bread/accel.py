"""The optional C fast paths of the reader (``bread/_speedups.c``, ``bread/_merge.c``,
``bread/_binlog.c`` for C++ binlog files), or None.

Read as ``accel.speedups`` at the point of use, so that tests (and
``BREAD_PURE_PYTHON=1``) can run everything through the pure-Python code,
which is the reference the C code must match.
"""

from __future__ import annotations

import os
from types import ModuleType

speedups: ModuleType | None
merge: ModuleType | None
binlog: ModuleType | None
try:
    from . import _speedups as speedups
except ImportError:  # pragma: no cover - built without a C compiler
    speedups = None
try:
    from . import _merge as merge
except ImportError:  # pragma: no cover - built without a C compiler
    merge = None
try:
    from . import _binlog as binlog
except ImportError:  # pragma: no cover - built without a C compiler
    binlog = None
if os.environ.get("BREAD_PURE_PYTHON"):
    speedups = merge = binlog = None
