"""The shape the code keeps: one definition of the bytes, a reader without the writer,
no import circles, objects that talk through public methods."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

from helpers import python_child

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("blog", "blogformat", "bread")


def _modules() -> dict[str, ast.Module]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).glob("*.py")):
            name = pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"
            out[name] = ast.parse(f.read_text(), str(f))
    return out


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


def test_blogformat_imports_neither_side():
    for name, tree in _modules().items():
        if name.split(".")[0] != "blogformat":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                assert node.module.split(".")[0] not in ("blog", "bread"), (name, node.module)
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] not in ("blog", "bread") for a in node.names)


def _imports(name: str, tree: ast.Module, deferred: bool = False) -> set[str]:
    """Modules of the project that ``name`` imports when it is imported (module level), and
    with ``deferred`` those its functions import when first called (lazy imports, which keep
    start-up short); not those under ``if TYPE_CHECKING``."""
    pkg = name.split(".")[0]
    deps = set()
    nodes = list(tree.body)
    if deferred:
        nodes += [n for fn in ast.walk(tree)
                  if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(fn)]
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = f"{pkg}.{base}" if base else pkg
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


#: The stdlib's private attributes blog replaces, where the stdlib offers no hook: a
#: multiprocessing child's bootstrap (blog.exits: its output is closed after the child's
#: last record, just before multiprocessing ends it with os._exit).
STDLIB_HOOKS = {("blog.exits", "_bootstrap")}


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
                            and not (isinstance(a.value, ast.Name) and a.value.id in ("self", "cls"))
                            and (name, a.attr) not in STDLIB_HOOKS):
                        bad.append(f"{name}:{a.lineno} assigns .{a.attr}")
    assert bad == []


def test_no_import_inside_a_function_hides_a_circle():
    # An import inside a function is how a circle hides. The modules have some (what only an
    # option needs is imported when it is used: tests/test_startup.py), and they count here.
    _assert_no_circle(deferred=True)


def test_the_reader_loop_exists_once():
    # bread.decoder alone hands an events frame to C, and to Python from the event where C
    # stopped (`rendered`): the sinks (text, Events, columns) say what becomes of events.
    for name, tree in _modules().items():
        if not name.startswith("bread.") or name == "bread.decoder":
            continue
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        calls = {n.func.attr for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert "rendered" not in attrs and "frame" not in calls, name
