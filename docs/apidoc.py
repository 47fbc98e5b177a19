"""Writes docs/api.md, the API reference of ``blog``, ``bread`` and ``bread.spark``: each
public name (the package's ``__all__``), its signature and its docstring, read from the
sources with ``ast``: nothing is imported, so the reference is the same on either hot
path and needs no pyspark.

    python docs/apidoc.py           # rewrites docs/api.md
    python docs/apidoc.py --check   # exit 1 if docs/api.md is out of date

``tests/test_apidoc.py`` fails when docs/api.md is not what this writes.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import sys
from typing import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "api.md"

#: The modules documented, and what each is.
MODULES = (
    ("blog", "the writer"),
    ("bread", "the reader"),
    ("bread.spark", "the PySpark data source (needs the `spark` extra)"),
)
#: The groups of a module's names, in the order shown.
GROUPS = ("Functions", "Classes", "Constants", "Errors")
#: The widest signature on one line.
WIDTH = 88

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign


class Source:
    """A module's parsed source: its top-level definitions and imported names."""

    def __init__(self, module: str) -> None:
        base = ROOT.joinpath(*module.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        self.module, self.package = module, module if base.is_dir() else module.rpartition(".")[0]
        self.lines = path.read_text().splitlines()
        self.tree = ast.parse("\n".join(self.lines))

    def public(self) -> dict[str, str]:
        """The module's public names, each with the module that defines it: a package's
        ``_DEFINED_IN`` (its lazily imported names), else its ``__all__``."""
        found = {node.targets[0].id: node.value for node in self.tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
        if "_DEFINED_IN" in found:
            return dict(ast.literal_eval(found["_DEFINED_IN"]))
        return {name: self.module for name in ast.literal_eval(found["__all__"])}

    def find(self, name: str) -> tuple[Source, Definition]:
        """The definition of ``name``, following ``from ... import name``."""
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    return self, node
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    return self, node
            elif isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                parts = self.package.split(".")
                origin = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
                origin = ".".join(p for p in (origin, node.module or "") if p)
                return Source(origin).find(name)
        raise LookupError(f"{self.module}.{name} is not defined in its module")

    def comment(self, node: ast.Assign) -> str:
        """The ``#:`` comment above an assignment (or above the assignments it begins)."""
        i = node.lineno - 2
        while i >= 0 and not self.lines[i].startswith("#:") and " = " in self.lines[i]:
            i -= 1
        text: list[str] = []
        while i >= 0 and self.lines[i].startswith("#:"):
            text.insert(0, self.lines[i][2:].strip())
            i -= 1
        return "\n".join(text)


def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool = False,
              indent: int = 0, returns: bool = True) -> str:
    """``(args) -> returns`` as written in the source (``self`` or ``cls`` left out)."""
    params = _params(fn.args)
    if method and not _decorated(fn, "staticmethod"):
        params = params[1:]
    tail = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None and returns else ""
    return _call(params, tail, indent)


def _call(params: list[str], returns: str, indent: int) -> str:
    """``(params)returns``, one parameter a line where it would not fit on one."""
    line = f"({', '.join(params)}){returns}"
    if indent + len(line) <= WIDTH:
        return line
    return "(\n" + "".join(f"    {p},\n" for p in params) + f"){returns}"


def _params(args: ast.arguments) -> list[str]:
    """The parameters as written: ``name: annotation = default``, ``/``, ``*``."""
    def one(a: ast.arg, default: ast.expr | None, star: str = "") -> str:
        text = star + a.arg + (f": {ast.unparse(a.annotation)}" if a.annotation else "")
        if default is not None:
            text += f" = {ast.unparse(default)}" if a.annotation else f"={ast.unparse(default)}"
        return text

    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [one(a, d) for a, d in zip(positional, defaults)]
    if args.posonlyargs:
        out.insert(len(args.posonlyargs), "/")
    if args.vararg:
        out.append(one(args.vararg, None, "*"))
    elif args.kwonlyargs:
        out.append("*")
    out += [one(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append(one(args.kwarg, None, "**"))
    return out


def _decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(ast.unparse(d).split(".")[-1] == name or ast.unparse(d) == name
               for d in fn.decorator_list)


def _docstring(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    doc = ast.get_docstring(node)
    return doc.strip() if doc else ""


def _fields(cls: ast.ClassDef, indent: int) -> str | None:
    """A fields class's constructor (``blogformat.plainclass``, a dataclass): its
    annotated fields, in order."""
    bases = {ast.unparse(b).split(".")[-1] for b in cls.bases}
    if not bases & {"Plain", "Frozen", "NamedTuple"} and not any(
            "dataclass" in ast.unparse(d) for d in cls.decorator_list):
        return None
    fields = [ast.unparse(n.target) + ": " + ast.unparse(n.annotation) + _default(n.value)
              for n in cls.body if isinstance(n, ast.AnnAssign)
              and not ast.unparse(n.annotation).startswith("ClassVar")]
    return _call(fields, "", indent)


def _default(value: ast.expr | None) -> str:
    """`` = default`` of a field, its ``field(default=...)`` or ``field(default_factory=...)``
    as the value it gives."""
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
        given = {k.arg: k.value for k in value.keywords}
        if "default" in given:
            return f" = {ast.unparse(given['default'])}"
        if "default_factory" in given:
            return f" = {ast.unparse(given['default_factory'])}()"
        return ""
    return f" = {ast.unparse(value)}" if value is not None else ""


def _members(cls: ast.ClassDef) -> Iterator[str]:
    """The public methods and properties of ``cls``, each as Markdown."""
    for node in cls.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == "property":   # name = property(..., doc=)
            doc = next((k.value for k in node.value.keywords if k.arg == "doc"), None)
            name = ast.unparse(node.targets[0])
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str) \
                    and not name.startswith("_"):
                yield _entry(f"##### `{cls.name}.{name}`", f"{name}  # property",
                             inspect.cleandoc(doc.value))
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("_") or any(ast.unparse(d).endswith((".setter", ".deleter"))
                                            for d in node.decorator_list):
            continue
        if not _docstring(node):   # undocumented: not part of the reference
            continue
        if _decorated(node, "property"):
            returns = f": {ast.unparse(node.returns)}" if node.returns is not None else ""
            head = f"{node.name}{returns}  # property"
        else:
            prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
            head = prefix + node.name + signature(node, method=True,
                                                  indent=len(prefix + node.name))
        yield _entry(f"##### `{cls.name}.{node.name}`", head, _docstring(node))


def _entry(heading: str, code: str, doc: str) -> str:
    return f"{heading}\n\n```python\n{code}\n```\n" + (f"\n{doc}\n" if doc else "")


def document(name: str, where: Source, node: Definition) -> tuple[str, str]:
    """The group of ``name`` and its Markdown."""
    heading = f"#### `{name}`"
    if isinstance(node, ast.Assign):
        written = "\n".join(where.lines[node.lineno - 1:node.end_lineno])
        return "Constants", _entry(heading, written, where.comment(node))
    if not isinstance(node, ast.ClassDef):
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        return "Functions", _entry(
            heading, f"{prefix} {name}{signature(node, indent=len(f'{prefix} {name}'))}",
            _docstring(node))
    bases = ", ".join(ast.unparse(b) for b in node.bases)
    code = [f"class {name}({bases})" if bases else f"class {name}"]
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                 and n.name in ("__init__", "__new__")), None)
    made = (signature(init, method=True, indent=len(name), returns=False) if init
            else _fields(node, len(name)))
    if made is not None:
        code.append(f"{name}{made}")
    if any(b.split(".")[-1] in ("Enum", "IntEnum", "IntFlag") for b in bases.split(", ")):
        code += [ast.unparse(n) for n in node.body if isinstance(n, ast.Assign)]
    group = "Errors" if where.module.endswith(".errors") else "Classes"
    text = _entry(heading, "\n".join(code), _docstring(node))
    return group, "\n".join([text, *_members(node)])


def render() -> str:
    """The whole of docs/api.md."""
    out = ["# API reference", "",
           "Generated by `docs/apidoc.py` from the docstrings (`python docs/apidoc.py`"
           " rewrites it; `tests/test_apidoc.py` fails when it is out of date). The names"
           " are each package's public ones: `import blog` then `blog.NAME`. `blog.__version__`"
           " and `bread.__version__` are the distribution's version. The guide"
           " (`docs/guide.md`) says how they fit together.", ""]
    for module, what in MODULES:
        src = Source(module)
        out += [f"## `{module}`: {what}", ""]
        doc = _docstring(src.tree)
        if doc:
            out += [doc, ""]
        groups: dict[str, list[str]] = {g: [] for g in GROUPS}
        for name in sorted(src.public(), key=str.lower):
            if name == "__version__":
                continue
            where, node = Source(src.public()[name]).find(name)
            group, text = document(name, where, node)
            groups[group].append(text.replace("#### `", f"#### `{module}.", 1))
        for group in GROUPS:
            if groups[group]:
                out += [f"### {group}", "", *groups[group]]
    text = "\n".join(out).replace("\n\n\n", "\n\n")
    return text.rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print("docs/api.md is out of date: run python docs/apidoc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
