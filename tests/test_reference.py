"""The API reference (docs/reference/, made from the docstrings by mkdocstrings when the site
is built: `make docs`) documents every public module, and in each every public name."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The modules an application imports: the two packages, the modules of their own that
#: blog's docstring names public (the bridge, test helpers and their pytest fixture, context
#: fields), the reader's layers that bread's docstring says are usable alone, the errors
#: modules.
PUBLIC = {"blog", "blog.stdlib", "blog.testing", "blog.pytest_plugin", "blog.contextfields",
          "blog.errors",
          "bread", "bread.spark", "bread.frames", "bread.entries", "bread.events",
          "bread.render", "bread.errors"}


def documented() -> dict[str, pathlib.Path]:
    """Each module the reference's pages render (a ``::: module`` line), with its page."""
    found = {}
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        for module in re.findall(r"^::: *(\S+)", page.read_text(), re.M):
            assert module not in found, f"{module} is on two pages"
            found[module] = page
    return found


def test_the_reference_has_a_page_for_each_public_module_and_for_nothing_else():
    # Proves (issue 39): the reference renders exactly the public modules, each on a page
    # of mkdocs.yml's nav; an internal module (blog.pipeline..., blogstore) is not in it.
    pages = documented()
    assert set(pages) == PUBLIC
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in pages.values():
        assert f"reference/{page.name}" in nav, page.name


def test_each_public_module_says_which_names_are_public():
    # A module without __all__ would have every name it defines in the reference, its
    # helpers too; a name in __all__ it does not have would be a hole in the reference.
    for module in sorted(PUBLIC):
        if module == "bread.spark" and importlib.util.find_spec("pyspark") is None:
            continue
        mod = importlib.import_module(module)
        assert isinstance(getattr(mod, "__all__", None), list), module
        for name in mod.__all__:
            assert hasattr(mod, name), f"{module}.{name}"


def test_every_public_name_has_a_docstring_the_reference_shows():
    # Proves (issue 39, replacing test_apidoc): the reference is made from the sources as
    # mkdocs.yml has mkdocstrings read them (griffe, with docs/refconventions.py: the
    # packages' lazily imported names, `#:` comments): every name of each public module's
    # __all__ is found there, with the docstring the reference shows (a name without one
    # would be left out of the page). Nothing is imported by that reading.
    griffe = pytest.importorskip("griffe", reason="the docs extra (pip install -e '.[docs]')")
    extension = griffe.load_extensions(f"{ROOT}/docs/refconventions.py:ProjectConventions")
    loader = griffe.GriffeLoader(extensions=extension, search_paths=[str(ROOT)])
    for package in ("blog", "bread", "blogformat", "blogstore"):
        loader.load(package)
    loader.resolve_aliases(external=False)
    modules = loader.modules_collection
    missing = []
    for module in sorted(PUBLIC):
        mod = modules[module]
        runtime = None
        if module != "bread.spark" or importlib.util.find_spec("pyspark") is not None:
            runtime = importlib.import_module(module).__all__
        assert runtime is None or sorted(mod.exports) == sorted(runtime), module
        for name in mod.exports:
            if name == "__version__":
                continue
            obj = mod.members.get(name)
            if obj is None or not (obj.docstring and obj.docstring.value.strip()):
                missing.append(f"{module}.{name}")
    assert not missing, f"public names without a docstring in the reference: {missing}"


def _package_docstring(package: str) -> str:
    import ast
    init = ROOT / package.replace(".", "/") / "__init__.py"
    return ast.get_docstring(ast.parse(init.read_text())) or ""


def test_every_other_module_of_the_writer_is_marked_internal():
    # Proves (issue 39): the API is told from the insides by the docstrings. A module of
    # blog, blogformat or blogstore that the reference does not document is internal, and
    # its package says so: blog's docstring names each of its own internal modules after
    # the word; its subpackages, blogformat and blogstore say it of all theirs. (A name
    # starting with "_", a C extension's, says it itself.)
    unmarked = []
    for package in ("blog", "blogformat", "blogstore"):
        for f in sorted((ROOT / package).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            if name in PUBLIC or any(p.startswith("_") for p in parts):
                continue
            if f.name == "__init__.py":        # a package: it says it of itself
                said = "internal" in _package_docstring(name).lower()
            elif parts[:-1] == ("blog",):      # blog's own modules, one by one
                said = f"``{parts[-1]}``" in _package_docstring("blog").partition("internal")[2]
            else:
                said = "internal" in _package_docstring(".".join(parts[:-1])).lower()
            if not said:
                unmarked.append(name)
    assert unmarked == []
