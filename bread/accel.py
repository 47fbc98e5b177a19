"""The optional C fast paths of the reader, or None (internal): ``speedups``
(``bread/decode/_speedups.c``), ``merge`` (``bread/merge/_merge.c``), ``binlog``
(``bread/cxx/_binlog.c``, for C++ binlog files), ``compact`` (``bread/compact/_compact.c``,
for ``bread compact``).

Read as ``accel.speedups`` at the point of use, so that tests (and
``BREAD_PURE_PYTHON=1``) can run everything through the pure-Python code,
which is the reference the C code must match.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from blogformat.typinglite import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from . import _binlog, _compact, _merge, _speedups

    # The stubs' names (bread/_*.pyi), as the types of the attributes below: mypy has no
    # type for "this module, or None", and a module typed ``ModuleType`` hides its stub.
    class Speedups:
        MAX_MESSAGE: int
        MAX_JSON: int
        Renderer: type[_speedups.Renderer]
        MessageGetter: type[_speedups.MessageGetter]
        message = staticmethod(_speedups.message)
        gather = staticmethod(_speedups.gather)

    class Merge:
        Merger: type[_merge.Merger]

    class Binlog:
        Printer: type[_binlog.Printer]

    class Compact:
        walk = staticmethod(_compact.walk)
        rows = staticmethod(_compact.rows)
        columns = staticmethod(_compact.columns)
        pack_run = staticmethod(_compact.pack_run)
        unpack_run = staticmethod(_compact.unpack_run)

#: Said once, at the first import, where the C fast path is missing and not chosen away.
NOTICE = ("bread: the C fast path ({}) is not built here (no C compiler at install?): "
          "reading takes the pure-Python path, about 20x slower (docs/performance.md). "
          "Install with a C compiler to build it, or set BREAD_PURE_PYTHON=1 to choose the "
          "pure-Python path and hide this line.")

def _say(missing: str) -> None:
    try:
        print(NOTICE.format(missing), file=sys.stderr)
    except Exception:   # stderr closed or gone
        pass


speedups: Speedups | None
merge: Merge | None
binlog: Binlog | None     # (loaded with the first C++ binlog file: ``__getattr__``)
compact: Compact | None   # (loaded by the first compaction: ``__getattr__``)
try:
    from . import _speedups
    speedups = cast("Speedups", _speedups)
except ImportError:  # built without a C compiler, or where setup.py builds none
    speedups = None
try:
    from . import _merge
    merge = cast("Merge", _merge)
except ImportError:  # likewise
    merge = None
if os.environ.get("BREAD_PURE_PYTHON"):
    speedups = merge = None
elif speedups is None or merge is None:
    _say(" and ".join(f"bread.{name}" for name, m in (("_speedups", speedups),
                                                     ("_merge", merge)) if m is None))


def __getattr__(name: str) -> ModuleType | None:
    """``binlog``, the C printer of C++ binlog files, and ``compact``, bread compact's
    per-event work, imported when first asked for: reading blog files loads neither."""
    if name not in ("binlog", "compact"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    got: ModuleType | None = None
    if not os.environ.get("BREAD_PURE_PYTHON"):
        try:
            if name == "binlog":
                from . import _binlog
                got = _binlog
            else:
                from . import _compact
                got = _compact
        except ImportError:  # likewise
            _say(f"bread._{name}")
    globals()[name] = got
    return got
