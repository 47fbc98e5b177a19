"""docs/api.md is what docs/apidoc.py writes from the docstrings of today's sources."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_api_reference_is_current():
    # Proves (issue 26): docs/api.md, the reference of blog, bread and bread.spark, is
    # regenerated from the docstrings; a docstring or signature changed without running
    # `python docs/apidoc.py` fails here. The script reads the sources (ast): it imports
    # neither package nor pyspark, so the check is the same wherever it runs.
    r = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "docs" / "apidoc.py"),
                        "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines()}
    assert not {m for m in imported if m.split(".")[0] in ("blog", "bread", "pyspark")}


def test_the_reference_names_every_public_name():
    import blog
    import bread
    text = (ROOT / "docs" / "api.md").read_text()
    for package in (blog, bread):
        for name in package.__all__:
            if name != "__version__":
                assert f"#### `{package.__name__}.{name}`" in text, name
    for name in ("register", "events", "BlogDataSource", "SCHEMA"):
        assert f"#### `bread.spark.{name}`" in text, name
