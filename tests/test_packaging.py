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

from helpers import Logged, python_path

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
    stubs = {f.relative_to(ROOT).as_posix() for p in PACKAGES for f in (ROOT / p).glob("_*.pyi")}
    assert {"blog/_speedups.pyi", "bread/_speedups.pyi", "bread/_merge.pyi",
            "bread/_binlog.pyi", "bread/_compact.pyi"} <= stubs <= names
    assert not [n for n in names if n.endswith(".so")]


def test_every_package_has_py_typed():
    # The fast half of the check above, for every run: the marker files are there.
    assert [p for p in PACKAGES if not (ROOT / p / "py.typed").is_file()] == []


@pytest.mark.parametrize("name", LEVELS)
def test_a_level_method_shows_its_real_call(monkeypatch, name):
    # Proves (issue 26): inspect.signature and help() show log.info's call, not the C
    # object's (which had none), and its docstring; the C Method shows its Python twin's.
    shown = getattr(Logged().log, name)      # this run's hot path
    python_path(monkeypatch)
    python = getattr(Logged().log, name)
    call = "(fmt: 'str', /, *args: 'Any', **fields: 'Any') -> 'None'"
    assert str(inspect.signature(shown)) == str(inspect.signature(python)) == call
    assert shown.__doc__ == python.__doc__ and shown.__doc__.startswith("Log an event")
    assert shown.__name__ == name
    text = pydoc.render_doc(shown, renderer=pydoc.plaintext)
    assert f"{name}{call}\n    Log an event" in text, text


def test_a_disabled_level_method_shows_the_same_call(monkeypatch):
    # Below the minimum a level method is a no-op that takes anything (C's noop, or
    # Python's), shown with a level method's call, unannotated on both paths.
    shown = Logged(min_severity="error").log.debug
    python_path(monkeypatch)
    python = Logged(min_severity="error").log.debug
    assert str(inspect.signature(shown)) == str(inspect.signature(python)) \
        == "(fmt, /, *args, **fields)"
    assert shown.__doc__ == python.__doc__ == (
        "A level method below the minimum severity: returns at once.")
    assert shown() is shown(1, 2, x=3) is None    # takes anything



#: A script's first lines: a meta path finder that refuses the modules named, as where
#: they do not exist (fcntl on Windows; C extensions built without a compiler).
REFUSE = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
"""


def _run(code: str, cwd: pathlib.Path, refuse: set[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_PURE_PYTHON")}
    return subprocess.run([sys.executable, "-c", REFUSE.format(names=refuse) + code],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**environ, **env})


def test_plain_files_work_where_fcntl_is_missing(tmp_path):
    # Proves (issue 26): where fcntl is missing (Windows; nor are os.open's POSIX flags
    # there), import blog and import bread work, a plain file is written and read back,
    # alone or as its directory; file sets, the crash buffer and bread compact say at
    # configuration time that they need POSIX (NeedsPosix).
    r = _run("""
import os
for flag in ("O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK", "O_DIRECTORY"):
    delattr(os, flag)
import blog, bread
from bread import cli
from blogstore.errors import NeedsPosix
blog.basic_config("app.blog", fsync=True)
blog.get_logger("main").info("order {} filled", 42, host="db1")
blog.flush(durable=True)
blog.shutdown()
assert [(e.message, e.fields) for e in bread.read("app.blog")] == [
    ("order 42 filled", {"host": "db1"})]
assert cli.main(["app.blog"]) == 0 and cli.main(["-s", "."]) == 0
assert [e.message for e in bread.read(".", sort=True)] == ["order 42 filled"]
for options in ({"rotate_bytes": 1 << 20}, {"keep_files": 3}, {"crash_buffer": True}):
    try:
        blog.basic_config("logs/app.blog", **options)
    except NeedsPosix as exc:
        assert "need POSIX file locks" in str(exc) and "a plain file works" in str(exc)
    else:
        raise AssertionError(options)
assert cli.main(["compact", "logs"]) == 1
assert "fcntl" not in sys.modules
print("ok")
""", tmp_path, {"fcntl"})
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stderr
    assert r.stderr.count("need POSIX file locks") == 1    # bread compact's line


@pytest.mark.parametrize("chosen", [False, True])
def test_without_the_c_extensions_a_notice_says_what_it_costs(tmp_path, chosen):
    # Proves (issue 26): installed without a C compiler, the first import of each side's
    # fast path says once that the pure-Python path is in use and what it costs;
    # BLOG_PURE_PYTHON=1 / BREAD_PURE_PYTHON=1 (the path chosen) says nothing.
    env = {"BLOG_PURE_PYTHON": "1", "BREAD_PURE_PYTHON": "1"} if chosen else {}
    r = _run("""
import blog, bread
blog.basic_config("app.blog")
log = blog.get_logger("main")
for i in range(3):
    log.info("event {}", i)
blog.shutdown()
assert len(list(bread.read("app.blog"))) == 3
assert len(list(bread.read("app.blog", sort=True))) == 3
print("ok")
""", tmp_path, {"blog._speedups", "bread._speedups", "bread._merge"}, **env)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stderr
    if chosen:
        assert r.stderr == ""
    else:
        lines = r.stderr.splitlines()
        assert len(lines) == 2, lines
        assert lines[0].startswith("blog: the C fast path (blog._speedups) is not built")
        assert "16x slower" in lines[0] and "BLOG_PURE_PYTHON=1" in lines[0]
        assert lines[1].startswith("bread: the C fast path (bread._speedups and bread._merge)")
        assert "20x slower" in lines[1] and "BREAD_PURE_PYTHON=1" in lines[1]
