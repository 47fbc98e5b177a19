"""The shape the code keeps: one definition of the bytes, one of the files on disk, a reader
without the writer, no import circles, objects that talk through public methods."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

from helpers import python_child

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("blog", "blogformat", "blogstore", "bread")
#: The layers, lowest first: a package imports only those below it (blog and bread, both
#: on top, never each other). blogformat is the bytes of a file, blogstore the files of a
#: log on disk (file sets, manifest, catalog, crash buffers).
LAYERS = {"blogformat": {"blogformat"}, "blogstore": {"blogformat", "blogstore"},
          "blog": {"blogformat", "blogstore", "blog"},
          "bread": {"blogformat", "blogstore", "bread"}}
#: The one crossing allowed: blog's testing helpers read what a test logged back with the
#: reader (``blog.testing`` is imported only by a test that uses it, never by ``import blog``).
CROSSINGS = {("blog.testing", "bread")}


def _modules() -> dict[str, ast.Module]:
    """Every module of the packages, subpackages' too (``bread.cli.read``)."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = ast.parse(f.read_text(), str(f))
    return out


def _package(name: str) -> str:
    """The package a relative import in module ``name`` starts from."""
    is_package = (ROOT / name.replace(".", "/") / "__init__.py").exists()
    return name if is_package else name.rpartition(".")[0]


def test_import_bread_loads_none_of_the_writer():
    # A reader process (a Spark executor) imports only what reads.
    code = "import sys, bread; print(sorted(m for m in sys.modules if m.split('.')[0] == 'blog'))"
    r = subprocess.run(python_child("-c", code), capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_import_blog_loads_none_of_the_reader():
    # A writer process imports only what writes: TextStream renders with blogformat.pretty.
    code = ("import sys, blog; blog.TextStream; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'bread'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_each_package_imports_only_the_layers_below_it():
    # blogformat imports no other package of the project; blogstore only blogformat; blog
    # and bread those two, never each other (anywhere: in a function, under TYPE_CHECKING).
    for name, tree in _modules().items():
        allowed = LAYERS[name.split(".")[0]]
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [node.module]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            for module in found:
                top = module.split(".")[0]
                assert top not in LAYERS or top in allowed or (name, module) in CROSSINGS, \
                    (name, module)


def _type_checking(node: ast.stmt) -> bool:
    """True for ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    if not isinstance(node, ast.If):
        return False
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(name: str, tree: ast.Module, deferred: bool = False) -> set[str]:
    """Modules of the project that ``name`` imports when it is imported (module level, and
    under ``if TYPE_CHECKING``: an import for the type checker only still ties the two
    modules together), and with ``deferred`` those its functions import when first called
    (lazy imports, which keep start-up short)."""
    pkg = _package(name).split(".")
    deps = set()
    nodes = list(tree.body)
    nodes += [n for node in tree.body if _type_checking(node) for n in node.body]
    if deferred:
        nodes += [n for fn in ast.walk(tree)
                  if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(fn)]
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                start = ".".join(pkg[:len(pkg) - node.level + 1])
                base = f"{start}.{base}" if base else start
            deps.add(base)
            deps.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
    return deps


def _assert_no_circle(deferred: bool) -> None:
    mods = _modules()
    graph = {n: {d for d in _imports(n, t, deferred) if d in mods and d != n and d not in PACKAGES}
             for n, t in mods.items()}
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for d in sorted(graph[n]):
            assert state.get(d) != 1, "import circle: " + " -> ".join(path + [d])
            if d not in state:
                visit(d, path + [d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])


def test_no_import_circle():
    _assert_no_circle(deferred=False)


#: The writer's pipeline, from the bottom up: each imports none of those after it (not even
#: for the type checker). Loggers and writers depend on the registry, never on the Session;
#: a channel knows nothing of its writer (it hands a refused push to a callback).
PIPELINE = ("blog.pipeline.registry", "blog.pipeline.channel", "blog.pipeline.writer",
            "blog.pipeline.logger", "blog.pipeline.session")


def test_loggers_and_writers_depend_on_the_registry_not_on_the_session():
    mods = _modules()
    for i, name in enumerate(PIPELINE):
        above = set(PIPELINE[i + 1:]) & _imports(name, mods[name], deferred=True)
        assert not above, (name, above)


#: The stdlib's private attributes blog replaces, where the stdlib offers no hook: a
#: multiprocessing child's bootstrap (blog.process: its output is closed after the child's
#: last record, just before multiprocessing ends it with os._exit); logging.Logger._log
#: (blog.stdlibcalls: a logging call only BlogHandlers take makes no LogRecord).
STDLIB_HOOKS = {("blog.process", "_bootstrap"), ("blog.stdlibcalls", "_log")}


def test_no_module_assigns_another_objects_private_attributes():
    bad = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                for a in ast.walk(t):
                    if (isinstance(a, ast.Attribute) and a.attr.startswith("_")
                            and not a.attr.startswith("__")
                            and not (isinstance(a.value, ast.Name)
                                     and a.value.id in ("self", "cls"))
                            and (name, a.attr) not in STDLIB_HOOKS):
                        bad.append(f"{name}:{a.lineno} assigns .{a.attr}")
    assert bad == []


def test_no_import_inside_a_function_hides_a_circle():
    # An import inside a function is how a circle hides. The modules have some (what only an
    # option needs is imported when it is used: tests/test_startup.py), and they count here.
    _assert_no_circle(deferred=True)


#: What hooks into the process (fork, exit, signals, unhandled exceptions, multiprocessing's
#: finalizers and bootstrap) or keeps a weak set of live objects: only blog.process (the one
#: owner of the process's state) does.
#: blogformat.valuetypes' listeners are the sessions its codec's registry tells of new type
#: descriptions (the encoder, in blogformat, gives the ids: it imports nothing of blog).
PROCESS_STATE = {"register_at_fork", "atexit", "signal.signal", "excepthook", "WeakSet",
                 "Finalize", "register_after_fork", "_bootstrap"}
PROCESS_OWNERS = {"blog.process", "blogformat.valuetypes"}


def test_only_blog_process_hooks_into_the_process():
    bad = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            used = set()
            if isinstance(node, ast.Attribute):
                used = {node.attr, f"{getattr(node.value, 'id', '')}.{node.attr}"}
            elif isinstance(node, ast.Import):
                used = {a.name for a in node.names}
            if used & PROCESS_STATE and not (name == "blog.process" or (
                    name in PROCESS_OWNERS and used & PROCESS_STATE == {"WeakSet"})):
                bad.append(f"{name}:{node.lineno} {sorted(used & PROCESS_STATE)}")
    assert bad == []


def test_only_the_cli_parses_command_lines():
    # The library modules keep their library job: each subcommand's options, messages and
    # exit statuses are in its module of bread/cli/ (bread.cli.COMMANDS, read the default).
    from bread import cli
    for name, tree in _modules().items():
        if name.split(".")[:2] == ["bread", "cli"]:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert "argparse" not in [a.name for a in node.names], name
            if isinstance(node, ast.ImportFrom):
                assert node.module != "argparse", name
    for command in ["read", *cli.COMMANDS.values()]:
        assert (ROOT / "bread" / "cli" / f"{command}.py").exists(), command


def test_the_reader_loop_exists_once():
    # bread.decode.decoder alone hands an events frame to C, and to Python from the event where C
    # stopped (`rendered`): the sinks (text, Events, columns) say what becomes of events.
    for name, tree in _modules().items():
        if not name.startswith("bread.") or name == "bread.decode.decoder":
            continue
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        calls = {n.func.attr for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert "rendered" not in attrs and "frame" not in calls, name


def test_object_storage_is_read_through_one_module():
    # pyarrow.fs, the one file-system layer of URLs, is imported by bread.inputs.objectstore
    # alone (and bread.inputs.lister, the child that lists a prefix for it, bounded); the other
    # modules reach object storage through bread.inputs (Inputs, Input.open).
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.ImportFrom) and node.module:
                found = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            if any(m.startswith("pyarrow.fs") for m in found):
                assert name in ("bread.inputs.objectstore", "bread.inputs.lister"), name


def test_blog_chooses_each_c_twin_once_at_import():
    # Proves (issue 39): the C-or-Python switch (blog.accel.speedups) is read by the modules
    # with a C twin, once each, at their top level (``Channel = ... PyChannel`` at the end
    # of blog/pipeline/channel.py), never in a function: the rest of the code imports the
    # chosen name. (Before, 9 modules read it in functions, at each use.)
    readers, in_functions = set(), []
    for name, tree in _modules().items():
        if not name.startswith("blog.") or name == "blog.accel":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name in ("accel", "speedups")
                                                        for a in node.names):
                readers.add(name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(node):
                    if (isinstance(n, ast.Name) and n.id in ("accel", "speedups")
                            or isinstance(n, ast.Attribute) and n.attr == "speedups"):
                        in_functions.append(f"{name}:{n.lineno}")
    assert in_functions == []
    assert readers == {"blog.pipeline.channel", "blog.pipeline.summary", "blog.pipeline.parts",
                       "blog.pipeline.logger", "blog.contextfields", "blog.correlation",
                       "blog.integrations.event",
                       "blog.integrations.traced", "blog.stdlibcalls"}


def test_the_tests_python_path_reaches_every_c_choice(monkeypatch):
    # tests/helpers.py's python_path (the pure-Python path within a C run, for the parity
    # tests) sets every name a module of blog holds of the C extension to its Python twin:
    # a choice added without it would leave the C object in place, unseen.
    import types

    import blog
    from helpers import python_path, python_twins
    if blog.accel.speedups is None:
        import pytest
        pytest.skip("the C fast path is not built (or chosen away): nothing to reach")
    __import__("blog.stdlib")
    __import__("blog.integrations.traced")
    python_path(monkeypatch)
    left = [f"{name}.{attr}" for name, module in sorted(sys.modules.items())
            if name.split(".")[0] in PACKAGES and name not in ("blog.accel", "blog._speedups")
            for attr, value in vars(module).items()
            if isinstance(value, (type, types.BuiltinFunctionType))   # (not what C made)
            and value.__module__ == "blog._speedups"]
    assert left == []
    assert all(getattr(m, n) is python for m, n, python in python_twins())


def _imported_names(tree: ast.Module) -> set[str]:
    """The names a module imports from a module of its own package (``from .inputs import
    expand``, ``from ..cxx.entries import is_binlog``)."""
    return {a.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level for a in node.names}


#: What finds the files a name stands for and what tells the kind of an input by its first
#: bytes, and the modules of bread.inputs that use them. Every other reader (the command
#: line, Reader, Spark, stats) goes through bread.inputs' Inputs and Input: found once,
#: opened and judged in one place (issue 39: they were found three times, judged in three).
#: (bread.export.parquet expands its inputs once, then reads them as found files.)
INPUT_DECISIONS = {"expand": {"bread.inputs", "bread.inputs.objectstore",
                              "bread.export.parquet"},
                   "is_binlog": {"bread.inputs", "bread.cxx.entries"},
                   "set_files": {"bread.inputs"},
                   "decompressing": {"bread.inputs", "bread.inputs.compressed",
                                     "bread.inputs.follow"}}


def test_inputs_are_found_opened_and_judged_in_one_place():
    for name, tree in _modules().items():
        if not name.startswith("bread"):
            continue
        for what in sorted(_imported_names(tree) & set(INPUT_DECISIONS)):
            assert name in INPUT_DECISIONS[what], (name, what)


def test_the_reader_takes_a_sink_and_reaches_into_no_kind():
    # Reader composes inputs -> decoder -> [merge] over whatever sink it is given
    # (Reader.outputs); its conveniences (iterating, text, batches) name their sink when
    # called. It imports none of the C++ reading (bread.inputs says what an input is, the
    # decoder and the merge read each kind) nor of the columns (issue 39: it reached up
    # into both), and no sink when it is imported.
    mods = _modules()
    tree = mods["bread.reader"]
    at_import = _imports("bread.reader", tree)
    called = _imports("bread.reader", tree, deferred=True)
    assert not [m for m in called if m.startswith(("bread.cxx", "bread.export"))], called
    assert not [m for m in at_import if m.startswith("bread.sinks")], at_import


def test_the_decoder_knows_a_sink_by_its_interface():
    # What a sink is (bread.decode.decoder.Sink) and its C side (Native) are declared,
    # defaults and all: the decoder looks nothing up by hasattr or getattr (issue 39: the
    # columnar call was found by hasattr).
    calls = {n.func.id for n in ast.walk(_modules()["bread.decode.decoder"])
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"hasattr", "getattr"}, calls


#: The reader's folders and modules, lowest first: each imports (at import, in a function,
#: for the type checker) nothing of those after it. Inputs found and opened; decoded into a
#: sink; the sinks; the merge of any sink; the reader that composes them; then what uses
#: the reader (Spark, bread stats, bread export, the command line). bread.cxx (C++ files)
#: stands beside them: inputs, the decoder and the merge read it when an input is one.
READER_LAYERS = ("bread.inputs", "bread.decode", "bread.sinks", "bread.merge", "bread.reader",
                 "bread.spark", "bread.stats", "bread.export", "bread.cli")


def _reader_layer(module: str) -> int | None:
    return next((i for i, p in enumerate(READER_LAYERS)
                 if module == p or module.startswith(p + ".")), None)


def test_the_reader_is_built_in_layers():
    # Issue 39: the reader's middle in layers, each folder one step (the hops a reader of
    # `bread FILE` makes go down them: docs/architecture.md counts them).
    bad = []
    for name, tree in _modules().items():
        mine = _reader_layer(name)
        if mine is None:
            continue
        for dep in _imports(name, tree, deferred=True):
            theirs = _reader_layer(dep)
            if theirs is not None and theirs > mine:
                bad.append(f"{name} imports {dep}")
    assert bad == []
