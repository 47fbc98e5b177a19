"""The optional C fast path (``blog/_speedups.c``), or None: ``speedups``.

``BLOG_PURE_PYTHON=1`` chooses the pure-Python code, which is the reference the C code must
match. Each module with a C twin (``_channel.c`` beside ``pipeline/channel.py``, ...) reads
``speedups`` once, at its import, and chooses there its class or function (``Channel``,
``Method``, ``tally``...), which the rest of the code imports: as msgpack-python does.
"""

from __future__ import annotations

import os

from blogformat.typinglite import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from . import _speedups as _c

    class Speedups:
        """blog/_speedups.pyi's names, as the type of ``speedups``: mypy has no type for
        "this module, or None", and a module typed ``ModuleType`` hides its stub."""
        Channel: type[_c.Channel]
        Taken: type[_c.Taken]
        Mark: type[_c.Mark]
        Method: type[_c.Method]
        EventCall: type[_c.EventCall]
        TracedCall: type[_c.TracedCall]
        RecordHandler: type[_c.RecordHandler]
        LoggingCall: type[_c.LoggingCall]
        forget_thread_channel = staticmethod(_c.forget_thread_channel)
        encode_values = staticmethod(_c.encode_values)
        use_registries = staticmethod(_c.use_registries)
        use_context = staticmethod(_c.use_context)
        use_correlation = staticmethod(_c.use_correlation)
        use_otel = staticmethod(_c.use_otel)
        seed_ids = staticmethod(_c.seed_ids)
        use_spans = staticmethod(_c.use_spans)
        tally = staticmethod(_c.tally)
        event_bounds = staticmethod(_c.event_bounds)
        noop = staticmethod(_c.noop)

#: Said once, at the first import, where the C fast path is missing and not chosen away.
NOTICE = ("blog: the C fast path (blog._speedups) is not built here (no C compiler at "
          "install?): log calls take the pure-Python path, about 16x slower (1.5 us a call "
          "instead of 0.08 to 0.1: docs/performance.md). Install with a C compiler to build "
          "it, or set BLOG_PURE_PYTHON=1 to choose the pure-Python path and hide this line.")

speedups: Speedups | None
try:
    from . import _speedups
    speedups = cast("Speedups", _speedups)
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
