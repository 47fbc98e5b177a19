"""Only for the optional C fast paths; everything else is in pyproject.toml.

If the C compiler is missing the build carries on, and blog and bread use
their pure-Python code (blog/pipeline/logger.py, bread/sinks/lines.py), which behaves the
same.

Each extension is several C files, one per Python module it mirrors, beside it (its
internal header, blog/_extension.h or bread/decode/_extension.h, lists them); both
include the headers of blogformat (the byte buffer, msgpack reading and writing). Every
header is in ``depends``, so that changing one rebuilds what includes it.
"""

import os
import sys

from setuptools import Extension, setup

SHARED = ["blogformat/buf.h", "blogformat/mpread.h", "blogformat/mpwrite.h"]

# Warnings gcc (12 and later) and clang both know, and the code compiles without: every one
# shown, none an error, so that a user's install never fails on a newer compiler's new
# warning. BLOG_STRICT_C=1 (make test, make sanitize) makes them errors and each extension
# required: a build that fails stops instead of leaving the pure-Python path in its place.
WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
            "-Wformat=2", "-Wvla", "-Wpointer-arith", "-Wcast-qual", "-Wundef"]
STRICT = os.environ.get("BLOG_STRICT_C") == "1"


def extension(name: str, sources: list[str], headers: list[str]) -> Extension:
    """One C extension built from ``sources``, rebuilt when a header changes; optional
    unless BLOG_STRICT_C=1."""
    return Extension(name, sources, optional=not STRICT, include_dirs=["blogformat"],
                     depends=headers + SHARED,
                     extra_compile_args=["-O2", *WARNINGS, *(["-Werror"] if STRICT else [])])


ext = []
if sys.implementation.name == "cpython" and sys.platform != "win32":
    ext.append(extension("blog._speedups",
                         ["blog/_speedups.c", "blog/_correlation.c", "blog/_contextfields.c",
                          "blogformat/_valueencoding.c", "blog/pipeline/_channel.c",
                          "blog/pipeline/_summary.c", "blog/pipeline/_parts.c",
                          "blog/pipeline/_logger.c", "blog/integrations/_event.c",
                          "blog/integrations/_traced.c", "blog/_stdlib.c"],
                         ["blog/_extension.h", "blog/pipeline/_callpath.h"]))
    # The reader's: the Renderer in bread/decode, its outputs beside their sinks.
    ext.append(extension("bread._speedups",
                         ["bread/decode/_speedups.c", "bread/decode/_native.c",
                          "bread/decode/_decode.c", "bread/sinks/_lines.c",
                          "bread/sinks/_events.c", "bread/sinks/_batches.c",
                          "bread/sinks/_tables.c"],
                         ["bread/decode/_extension.h", "bread/decode/_message.h"]))
    ext.append(extension("bread._merge", ["bread/merge/_merge.c"], []))
    ext.append(extension("bread._compact", ["bread/compact/_compact.c"], []))
    ext.append(extension("bread._binlog", ["bread/cxx/_binlog.c"], []))

setup(ext_modules=ext)
