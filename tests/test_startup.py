"""Start-up: ``import blog``, ``import bread`` and a first log call load only what they need.

What an option needs (the crash buffer, rotation, the ``logging`` bridge, columns, Arrow,
Spark...) is imported when it is used; each check runs in a fresh process and lists what
was loaded (``sys.modules`` before and after). The time it saves is measured, whole
process, by ``benchmarks/startup.py``, never asserted here.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import pathlib
import subprocess
import sys
import sysconfig
import textwrap
import tomllib

import pytest

import blog
import bread

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Modules only an option or another side needs: neither package's import, nor a first
#: log call to a file, nor reading a file as text loads one.
OPTIONAL = (
    "blog.files.crashbuf", "blog.files.rotating", "blog.files.housekeeping",
    "blog.files.schedule", "blog.stdlib", "blog.testing", "blog.integrations.textstream",
    "blog.integrations.traced", "blog.integrations.event", "blog.integrations.adapters",
    "blog.pipeline.liveevents", "blog.pipeline.calloutput",
    "blogstore.crashlayout", "blogstore.bufferread", "blogstore.recoverytarget",
    "blogstore.recovery", "blogstore.manifest", "blogstore.catalog",
    "bread.sinks.batches", "bread.export.parquet", "bread.sinks.tables", "bread.sinks.typed",
    "bread.sinks.json", "bread.compact", "bread.spark", "bread.stats",
    "bread.inputs.follow", "bread.inputs.tail", "bread.inputs.objectstore", "bread._binlog",
    "bread.cxx.entries", "bread.cxx.text", "bread.cxx.events", "bread.cxx.values",
    "bread.cxx.printer", "bread.cxx.merge", "bread.export",
    "bread.cli.stats", "bread.cli.compact", "bread.cli.export", "bread.cli.recover",
    "logging", "importlib.metadata", "concurrent.futures", "asyncio", "socket", "pytz",
    "hashlib", "tempfile", "pyarrow", "pyspark",
)


#: Standard modules only a value, an option or another file kind needs: a UUID or a zoned
#: datetime logged or read, a relative time, CSV, a compressed file. Neither package's
#: import, nor a first log call to a file, nor reading a file as text loads one.
LATE_STDLIB = ("uuid", "platform", "zoneinfo", "sysconfig", "fractions", "csv", "base64",
               "gzip")

#: Standard modules a first log call to a file does without (issue 40: together they cost
#: more than the whole of ``logging``): ``typing`` (blogformat.typinglite gives what the
#: modules use of it at run time); ``re`` (regular expressions are compiled on first use:
#: blogformat.lazy.pattern); ``json`` (a spawned child's configuration is marshalled);
#: ``decimal`` (looked up once loaded, as ``uuid``); ``queue`` and ``heapq`` (the consumer
#: waits on ``_queue.SimpleQueue``); ``signal`` (its enums: ``_signal`` does); ``importlib``.
NOT_FOR_A_FIRST_EVENT = ("typing", "re", "json", "decimal", "numbers", "queue", "heapq",
                         "signal", "importlib", "warnings")

#: What a module of the start-up paths may not import when it is imported: the modules
#: above, and dataclasses and inspect (the module costs as much as starting Python, and
#: each dataclass the code it generates).
SLOW_AT_IMPORT = (*LATE_STDLIB, "dataclasses", "inspect")

#: The modules that still import dataclasses on the reader's paths, and why: the value
#: classes are public dataclasses (a decoded value logged again is encoded as one),
#: boundedtext shows them by their fields. Both are imported with the first extension value
#: decoded (blogformat.valuedecoding): reading a file of plain values loads neither, nor
#: dataclasses and inspect (issue 40). Each module that stops comes off this list.
STILL_DATACLASSES = {"blogformat.valueclasses", "blogformat.boundedtext"}

#: What reading a file of plain values as text does without (issue 40): typing (as a first
#: log call), dataclasses with inspect (and the value classes that import it), decimal,
#: json (a log directory's catalog and manifest files import it when there is one to read),
#: importlib. (argparse is needed; it imports gettext, locale and shutil.)
NOT_FOR_A_READ = ("typing", "dataclasses", "inspect", "decimal", "json", "importlib",
                  "blogformat.valueclasses", "blogformat.boundedtext")


#: Every module a check above looks for: none may be loaded before the code checked runs.
CHECKED = (*NOT_FOR_A_FIRST_EVENT, *NOT_FOR_A_READ, *SLOW_AT_IMPORT)


def _plain_env() -> dict[str, str]:
    """The environment of a child run with ``-S`` as from a plain install: its path the
    checkout's and this Python's site-packages."""
    paths = [str(ROOT), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _loaded(code: str, tmp_path: pathlib.Path) -> list[str]:
    """The modules ``code`` loads, run in a fresh process (in ``tmp_path``).

    The child runs without ``site`` (``-S``), its path the checkout's and this Python's
    site-packages: the ``.pth`` hook of an editable install imports re, importlib and
    warnings before ``code`` runs, which would hide those ``code`` imports. The child fails
    if any module checked is loaded already."""
    script = ("import sys\n_before = set(sys.modules)\n"
              f"assert not _before & {set(CHECKED)!r}, sorted(_before & {set(CHECKED)!r})\n"
              + textwrap.dedent(code)
              + "\n_mods = sorted(set(sys.modules) - _before)\n"
              + "import json\nprint(json.dumps(_mods))\n")
    r = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path, env=_plain_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def _optional(mods: list[str]) -> list[str]:
    return [m for m in mods if m in OPTIONAL or m.split(".")[0] in ("pyarrow", "pyspark")
            or m.startswith(("concurrent.", "logging.", "asyncio.", "importlib.metadata."))]


def _imported_at_import(module: str) -> set[str]:
    """The modules ``module``'s source imports when it is imported: its top-level imports,
    those in top-level ``try``, ``with`` and ``if`` blocks (not the body of an
    ``if TYPE_CHECKING``, its ``else`` yes), not those inside functions."""
    path = ROOT / module.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return _imports_of(path.read_text())


def _imports_of(source: str) -> set[str]:
    """What ``source`` imports when it runs (as ``_imported_at_import``)."""
    names: set[str] = set()
    todo = list(ast.parse(source).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif isinstance(node, ast.If):     # (an ``if TYPE_CHECKING``'s else runs)
            checking = getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
            todo += node.orelse if checking else node.body + node.orelse
        elif isinstance(node, (ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "handlers", ()), *getattr(node, "orelse", ()),
                     *getattr(node, "finalbody", ())]
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body
    return names


def _slow_imports(mods: list[str]) -> dict[str, list[str]]:
    """Per project module of ``mods``, the SLOW_AT_IMPORT modules its import imports."""
    ours = [m for m in mods if m.split(".")[0] in ("blog", "bread", "blogformat", "blogstore")
            and not m.rsplit(".", 1)[-1].startswith("_")]   # (not the C extensions)
    found = {m: sorted(n for n in _imported_at_import(m) if n.split(".")[0] in SLOW_AT_IMPORT
                       and not (n == "dataclasses" and m in STILL_DATACLASSES))
             for m in ours}
    return {m: names for m, names in found.items() if names}


def test_the_imports_checked_include_an_if_type_checkings_else():
    source = textwrap.dedent("""
        import os
        if TYPE_CHECKING:
            import typing
        else:
            import re
        if typing.TYPE_CHECKING:
            import inspect
        else:
            try:
                import dataclasses
            except ImportError:
                import uuid
        def f():
            import csv
    """)
    assert _imports_of(source) == {"os", "re", "dataclasses", "uuid"}


def test_import_blog_loads_only_the_package(tmp_path):
    mods = _loaded("import blog", tmp_path)
    assert [m for m in mods if m.split(".")[0] in ("blog", "bread")] == ["blog"]
    assert _optional(mods) == []


def test_import_bread_loads_only_the_package(tmp_path):
    mods = _loaded("import bread", tmp_path)
    assert [m for m in mods if m.split(".")[0] in ("blog", "bread")] == ["bread"]
    assert _optional(mods) == []
    assert "argparse" not in mods     # the command line is parsed only when bread.cli runs


def test_a_first_log_call_to_a_file_loads_no_option(tmp_path):
    mods = _loaded("""
        import blog
        blog.basic_config("app.blog")
        blog.get_logger().info("started {}", 1)
        blog.flush()
    """, tmp_path)
    assert "blog.default" in mods and "blog.pipeline.session" in mods
    assert _optional(mods) == []
    assert [m for m in mods if m.split(".")[0] == "bread"] == []
    assert "blogformat.valuedecoding" not in mods     # the reader's side of the codec
    assert "blogformat.tracebacks" not in mods        # imported with the first exception
    assert "dataclasses" not in mods and "inspect" not in mods
    assert [m for m in mods if m in LATE_STDLIB] == []
    # What the stdlib's threading imports is threading's, not blog's (3.13's imports warnings).
    threading_own = set(_loaded("import threading", tmp_path))
    assert [m for m in mods if m in NOT_FOR_A_FIRST_EVENT and m not in threading_own] == []
    assert _slow_imports(mods) == {}


def test_a_warning_before_any_configuration_loads_no_option(tmp_path):
    # The last resort (a warning on stderr as text before basic_config) costs its first call,
    # never the import, and brings no option nor a late module.
    mods = _loaded("""
        import blog
        blog.get_logger().warning("x {}", 1)
    """, tmp_path)
    assert _optional(mods) == [] and [m for m in mods if m in LATE_STDLIB] == []
    assert [m for m in mods if m.split(".")[0] == "bread"] == []
    assert _slow_imports(mods) == {}


def test_reading_a_file_as_text_loads_no_option(tmp_path):
    blog_file = tmp_path / "small.blog"
    s = blog.Session()
    log = s.get_logger()
    for i in range(3):
        log.info("event {}", i)
    with open(blog_file, "wb") as f:
        s.consume(f)
    mods = _loaded("""
        import sys
        from bread.cli import main
        sys.argv = ["bread", "small.blog"]
        main()
    """, tmp_path)
    assert "bread.reader" in mods
    # (bread.inputs reads a directory's catalog and manifest when it expands its inputs; the
    # columns and the JSON, bread.sinks.batches and bread.sinks.json, come when first used)
    assert set(_optional(mods)) <= {"blogstore.catalog", "blogstore.manifest"}
    # Object storage (bread.inputs.objectstore, pyarrow.fs) is loaded for a URL only, the
    # merge by time (bread.merge) for -s only.
    assert "bread.inputs.objectstore" not in mods and "pyarrow" not in mods
    assert [m for m in mods if m.split(".")[:2] == ["bread", "merge"]] == []
    assert [m for m in mods if m.split(".")[0] == "blog"] == []
    assert [m for m in mods if m in LATE_STDLIB] == []
    assert [m for m in mods if m in NOT_FOR_A_READ] == []
    assert _slow_imports(mods) == {}


def test_a_uuid_a_zone_or_a_decimal_logged_after_import_blog_reads_back(tmp_path):
    # The encoders look uuid.UUID, zoneinfo.ZoneInfo and decimal.Decimal up once their
    # module is loaded, not at import nor at a first call: a value of any of these types made
    # after is encoded as ever (issue 40 for decimal).
    code = """
        import sys, io, datetime
        import blog, bread
        s = blog.Session()
        log = s.get_logger()
        log.info("{}", datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
        assert not {"uuid", "zoneinfo", "decimal"} & set(sys.modules)
        import decimal, uuid, zoneinfo
        u = uuid.UUID(int=7)
        when = datetime.datetime(2026, 1, 1, tzinfo=zoneinfo.ZoneInfo("UTC"))
        d = decimal.Decimal("-1.50")
        log.info("{} {} {}", u, when, d)
        log.info("{:.1f}", d)     # (and a spec: reproducible, so kept as the value only)
        f = io.BytesIO()
        s.consume(f)
        events = list(bread.read(io.BytesIO(f.getvalue())))
        assert events[1].args == (u, when, d), events[1].args
        assert type(events[1].args[1].tzinfo) is zoneinfo.ZoneInfo
        assert type(events[1].args[2]) is decimal.Decimal and events[2].message == "-1.5"
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_value_logged_while_its_types_module_is_half_imported_is_logged(tmp_path):
    # Another thread importing decimal, uuid or zoneinfo (or blogformat's tracebacks or
    # value classes) has put the module in sys.modules before its names: a value met then
    # cannot be one of its types yet, and is logged and read as any other (the C encoder's
    # lookup and the Python path's, the reader's).
    code = """
        import sys, io, types, datetime
        import blog, bread
        half = ("decimal", "uuid", "zoneinfo", "blogformat.tracebacks",
                "blogformat.valueclasses")
        assert not set(half) & set(sys.modules)
        for name in half:
            sys.modules[name] = types.ModuleType(name)     # (no names yet)
        class Decimal:
            def __repr__(self): return "D"
        class UUID:
            def __repr__(self): return "U"
        s = blog.Session()
        log = s.get_logger()
        when = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        for _ in range(2):   # (the second call, at a known site, is the C encoder's)
            log.info("{} {} {} {:>3} {:.1f}", Decimal(), UUID(), when, 7, 2.25)
        f = io.BytesIO()
        s.consume(f)
        for name in half:
            del sys.modules[name]
        from blogformat import pretty
        sys.modules["blogformat.valueclasses"] = types.ModuleType("blogformat.valueclasses")
        assert not pretty._is_exception(ValueError())
        del sys.modules["blogformat.valueclasses"]
        events = list(bread.read(io.BytesIO(f.getvalue())))
        for e in events: print(e.message)
    """
    r = subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(code)], cwd=tmp_path,
                       env=_plain_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["D U 2026-01-01 00:00:00+00:00   7 2.2"] * 2, r.stdout


def test_a_python_without_the_c_queue_logs(tmp_path):
    # The consumer waits on _queue.SimpleQueue (issue 40: queue.py imports heapq); where
    # the C module is missing, on queue's own.
    r = subprocess.run([sys.executable, "-S", "-c", textwrap.dedent("""
        import sys
        sys.modules["_queue"] = None     # (import _queue raises ImportError)
        import blog, bread
        blog.basic_config("app.blog")
        blog.get_logger().info("started {}", 1)
        blog.shutdown()
        print([e.message for e in bread.read("app.blog")])
    """)], cwd=tmp_path, env=_plain_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "['started 1']\n", r.stderr


def test_a_spawned_childs_configuration_reads_back():
    # The configuration a spawned child reads from the environment (blog.lifecycle, marshalled
    # since issue 40: json cost a first basic_config its import and re's) comes back as plain
    # values: a Severity as its number, a str Enum as its value, a timedelta as seconds, a
    # time as ISO text.
    from blog import lifecycle
    import enum

    class Overflow(str, enum.Enum):
        DROP = "drop"

    options = {"min_severity": blog.Severity.WARNING, "flush_interval": float("inf"),
               "overflow": Overflow.DROP,
               "fsync": 0.5, "crash_dir": "/tmp/x\udcff", "keep_days": 7,
               "compact": {"older": 86400.0, "columnar": True, "pattern": None},
               "rotate_every": datetime.timedelta(hours=1),
               "rotate_at": (datetime.time(3, 30), datetime.time(15, 0))}
    cfg = {"pid": 1, "output": "app.blog", "rotating": True, "options": options}
    got = lifecycle._load_config(lifecycle._dump_config(cfg))
    assert got == {**cfg, "options": {**options, "min_severity": int(blog.Severity.WARNING),
                                      "overflow": "drop",
                                      "rotate_every": 3600.0,
                                      "rotate_at": ["03:30:00", "15:00:00"]}}
    assert type(got["options"]["min_severity"]) is int
    assert type(got["options"]["overflow"]) is str
    with pytest.raises(TypeError):
        lifecycle._dump_config({"options": {"on_close": print}})
    for bad in BAD_CONFIGS + (lifecycle._dump_config([1]), lifecycle._dump_config(cfg)[:-2]):
        with pytest.raises(ValueError):     # what is not a configuration of ours
            lifecycle._load_config(bad)


#: What a spawned child may find in BLOG_CONFIG that is no configuration of its parent's:
#: not hex, not a marshal, one cut short (EOFError), values of the wrong types, an older
#: parent's JSON. (HUGE_CONFIG below asks for a list of 2**31 items.)
BAD_CONFIGS = ("", "zz", "0", "5bffff0000", "5b01000000", "7b7b7b", "4e",
               "7b7a0370696469007a", '{"pid": 1, "output": "app.blog", "rotating": false, '
               '"options": {}}')


def test_a_bad_configuration_in_the_environment_is_told_once_and_never_raises(
        monkeypatch, capsys):
    from blog import lifecycle
    monkeypatch.setattr(lifecycle, "_mp_child", lambda: True)
    monkeypatch.setattr(lifecycle, "_told_bad", False)
    for bad in BAD_CONFIGS[1:]:
        monkeypatch.setenv(lifecycle.CONFIG_ENV, bad)
        assert lifecycle.parent_config() is None, bad
    err = capsys.readouterr().err
    assert err.count("blog: child") == 1 and "is not configured" in err, err


#: A marshal asking for a list of 2**31 items: allocated (MemoryError where it cannot be),
#: then read short (EOFError): seconds.
HUGE_CONFIG = "5bffffff7f"


@pytest.mark.slow
def test_a_configuration_asking_for_a_huge_list_is_told_and_never_raises(monkeypatch, capsys):
    from blog import lifecycle
    monkeypatch.setattr(lifecycle, "_mp_child", lambda: True)
    monkeypatch.setattr(lifecycle, "_told_bad", False)
    monkeypatch.setenv(lifecycle.CONFIG_ENV, HUGE_CONFIG)
    assert lifecycle.parent_config() is None
    assert "is not configured" in capsys.readouterr().err


def test_a_first_log_call_from_a_finalizer_at_shutdown_renders(tmp_path):
    # A value rendered at call time with a width (``{:>8}``) is checked without ``re``: at
    # interpreter shutdown nothing can be imported, and a finalizer's first log call raised
    # ImportError. The child runs without site, as a plain install, where re is not loaded.
    code = """
        import sys
        import blog
        blog.basic_config("app.blog")
        log = blog.get_logger()
        class Thing:
            def __format__(self, spec):
                return format("thing", spec)
            def __del__(self):
                log.info("{:>8} {:>99999}", self, self)
                print("logged", "re" in sys.modules, flush=True)
        thing = Thing()
    """
    r = subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(code)], cwd=tmp_path,
                       env=_plain_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "logged False\n", r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr


@pytest.mark.parametrize("spec", ["", ">8", "0>10000", ">10001", "123456", ".5f", "1.99999",
                                  "\u0663\u0663", "\u0663" * 6, "9" * 40, ">8,.3f"])
def test_a_width_over_max_width_is_found_as_by_a_regular_expression(spec):
    import re

    from blogformat import placeholders
    by_re = any(len(n) > 5 or int(n) > placeholders.MAX_WIDTH
                for n in re.findall(r"\d+", spec))
    assert placeholders._too_wide(spec) == by_re


@pytest.mark.parametrize("code, needs", [
    ('blog.basic_config("logs/app.blog", rotate_bytes=1 << 20); blog.shutdown()',
     "blog.files.rotating"),
    ('blog.basic_config("app.blog", crash_buffer=True); blog.shutdown()', "blog.files.crashbuf"),
    ("blog.flush_async().result()", "concurrent.futures"),
    ("blog.stdlib.capture()", "logging"),
])
def test_an_option_brings_its_module_when_used(tmp_path, code, needs):
    assert needs in _loaded(f"import blog\n{code}", tmp_path)


def test_the_pytest_plugin_imports_the_writer_only_for_its_fixture(tmp_path):
    mods = _loaded("import blog.pytest_plugin", tmp_path)
    assert [m for m in mods if m.split(".")[0] == "blog"] == ["blog", "blog.pytest_plugin"]


def test_a_pytest_run_that_uses_no_fixture_of_blog_loads_only_its_plugin(tmp_path):
    # Proves (issue 26): pytest, loading blog's plugin through its pytest11 entry point,
    # imports no module of the writer (nor any of the reader) until a test asks for
    # blog_capture. Here an empty test directory is collected.
    (tmp_path / "tests").mkdir()
    mods = _loaded("""
        import pytest
        pytest.main(["--co", "-q", "-p", "no:cacheprovider", "tests"])
    """, tmp_path)
    if "blog.pytest_plugin" not in mods:
        pytest.skip("blog's pytest11 entry point is not installed here (pip install -e .)")
    ours = [m for m in mods if m.split(".")[0] in ("blog", "bread", "blogstore")]
    assert ours == ["blog", "blog.pytest_plugin"]
    assert [m for m in mods if m.startswith("blogformat.")] == ["blogformat.lazy"]


def test_version_is_pyprojects(capsys):
    # Proves (issue 26 for bread's): blog.__version__, bread.__version__ and bread --version
    # say pyproject's version.
    from bread import cli
    with open(ROOT / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert blog.__version__ == bread.__version__ == version
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"bread {version}\n"


@pytest.mark.parametrize("package", [blog, bread])
def test_every_public_name_resolves_and_is_listed(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, name
        assert name in dir(package)
    with pytest.raises(AttributeError):
        package.no_such_name


@pytest.mark.parametrize("package", [blog, bread])
def test_the_type_hints_of_every_public_class_resolve(package):
    # typing.get_type_hints evaluates a class's annotations, and its bases', in their
    # modules: the names of typing that a start-up module imports only for type checkers
    # (issue 40) are not there at run time, so no class annotation may name one.
    import typing
    classes = [getattr(package, n) for n in package.__all__]
    for cls in [c for c in classes if isinstance(c, type)]:
        typing.get_type_hints(cls)


@pytest.mark.parametrize("package", ["blog", "bread"])
def test_the_names_type_checkers_see_are_the_names_served(package):
    # The ``if TYPE_CHECKING`` imports of the package's __init__ say where each name is
    # defined, as its table does.
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    seen = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom):
                    where = f"{package}.{imp.module}" if imp.level else imp.module
                    seen.update({a.name: where for a in imp.names})
    assert seen == sys.modules[package]._DEFINED_IN
