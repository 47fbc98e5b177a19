"""Only for the optional C fast paths; everything else is in pyproject.toml.

If the C compiler is missing the build carries on, and blog and bread use
their pure-Python code (blog/logger.py, bread/lines.py), which behaves the same.
"""

import sys

from setuptools import Extension, setup

ext = []
if sys.implementation.name == "cpython" and sys.platform != "win32":
    ext.append(Extension("blog._speedups", ["blog/_speedups.c"], optional=True,
                         depends=["blog/_encode.h"], extra_compile_args=["-O2"]))
    ext.append(Extension("bread._speedups", ["bread/_speedups.c"], optional=True,
                         extra_compile_args=["-O2"]))
    ext.append(Extension("bread._merge", ["bread/_merge.c"], optional=True,
                         extra_compile_args=["-O2"]))

setup(ext_modules=ext)
