"""The C extensions' stubs (``blog/_speedups.pyi``, ``bread/_*.pyi``) say what each module
exports: every function, class, method, attribute and constant, so that mypy and an editor
see the C types. ``mypy.stubtest`` compares them with the built modules; a name added to
or removed from the C code (its method tables, its module init) without the stub fails
here."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Every extension setup.py builds, as a module name (``extension("blog._speedups", ...)``).
EXTENSIONS = re.findall(r'extension\("([\w.]+)"', (ROOT / "setup.py").read_text())


def stub(module: str) -> pathlib.Path:
    return ROOT / (module.replace(".", "/") + ".pyi")


def test_every_extension_has_a_stub_that_names_its_exports():
    # A stub missing is one stubtest passes in silence (mypy finds no module to compare),
    # and a module-level __getattr__ would make every name Any again.
    assert len(EXTENSIONS) >= 5, EXTENSIONS
    assert [m for m in EXTENSIONS if not stub(m).is_file()] == []
    assert [m for m in EXTENSIONS if "def __getattr__" in stub(m).read_text()] == []


def _not_built() -> list[str]:
    missing = []
    for name in EXTENSIONS:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


#: stubtest's mypy settings: the packages' own modules that the stubs import (for the types
#: of arguments) are not followed, so that it compares names in seconds; ``mypy blog bread
#: blogformat blogstore`` (make test) checks the stubs' types with everything.
STUBTEST_CONFIG = """\
[mypy]
[mypy-blog.*,blogformat.*,blogstore.*,bread.*]
follow_imports = skip
"""


def test_the_stubs_match_the_built_extensions(tmp_path):
    # Proves (issue 39): stubtest finds each name of each module in its stub and each name
    # of the stub in the module (classes' methods and members too), of the same kind.
    if os.environ.get("BLOG_PURE_PYTHON") or os.environ.get("BREAD_PURE_PYTHON"):
        pytest.skip("the pure-Python pass: the C pass checks the stubs (the same files)")
    missing = _not_built()
    if missing:
        pytest.skip(f"the C extensions are not built here (no C compiler?): {missing}")
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (the test extra)")
    config = tmp_path / "stubtest.ini"
    config.write_text(STUBTEST_CONFIG)
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--concise",
                        "--mypy-config-file", str(config), *EXTENSIONS],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
