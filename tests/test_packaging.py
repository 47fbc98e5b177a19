"""What an installation gives its users' tools: ``py.typed`` in every package (their type
checkers read our annotations), level methods that show their real call to ``inspect`` and
``help()`` on both hot paths."""

from __future__ import annotations

import inspect
import os
import pathlib
import pydoc
import shutil
import subprocess
import sys
import zipfile

import pytest

import blog
from helpers import Logged

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("blog", "blogformat", "blogstore", "bread")
LEVELS = ("trace", "debug", "info", "warning", "error", "critical", "exception")


@pytest.mark.slow
def test_the_wheel_ships_py_typed_in_every_package(tmp_path):
    # Proves (issue 26): a wheel built from the sources (by pip, as a user's install does;
    # pip fetches the build's setuptools) holds py.typed in each package and the C stubs.
    # Built with no C compiler: the build carries on without the extensions.
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout's file list")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = tmp_path / "src"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                        str(tmp_path / "out"), str(src)], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "CC": "false"})
    assert r.returncode == 0, r.stderr
    [wheel] = (tmp_path / "out").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"{p}/py.typed" for p in PACKAGES} <= names
    assert {"blog/_speedups.pyi", "bread/_speedups.pyi", "bread/_merge.pyi"} <= names
    assert not [n for n in names if n.endswith(".so")]


def test_every_package_has_py_typed():
    # The fast half of the check above, for every run: the marker files are there.
    assert [p for p in PACKAGES if not (ROOT / p / "py.typed").is_file()] == []


@pytest.mark.parametrize("name", LEVELS)
def test_a_level_method_shows_its_real_call(monkeypatch, name):
    # Proves (issue 26): inspect.signature and help() show log.info's call, not the C
    # object's (which had none), and its docstring; the C Method shows its Python twin's.
    shown = getattr(Logged().log, name)      # this run's hot path
    monkeypatch.setattr(blog.accel, "speedups", None)
    python = getattr(Logged().log, name)
    call = "(fmt: 'str', /, *args: 'Any', **fields: 'Any') -> 'None'"
    assert str(inspect.signature(shown)) == str(inspect.signature(python)) == call
    assert shown.__doc__ == python.__doc__ and shown.__doc__.startswith("Log an event")
    assert shown.__name__ == name
    text = pydoc.render_doc(shown, renderer=pydoc.plaintext)
    assert f"{name}{call}\n    Log an event" in text, text

