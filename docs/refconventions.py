"""What the API reference's reader (griffe, behind mkdocstrings: ``mkdocs.yml``) must know of
this project's conventions that it does not know by itself, read from the sources as they
are written (nothing is imported: the reference is the same on either hot path, without
pyspark):

- a package's public names are the keys of its ``_DEFINED_IN`` (``blogformat.lazy``:
  ``__all__`` is computed from them, which griffe does not evaluate), each defined in its
  module and imported under ``if TYPE_CHECKING:`` for type checkers and readers;
- an assignment is documented by the ``#:`` comment lines right above it (as Sphinx
  reads them).
"""

from __future__ import annotations

import ast
from typing import Any

import griffe


class ProjectConventions(griffe.Extension):
    """``_DEFINED_IN`` as a package's exports, and ``#:`` comments as docstrings."""

    def on_module_members(self, *, node: ast.AST | griffe.ObjectNode, mod: griffe.Module,
                          **kwargs: Any) -> None:
        if not isinstance(node, ast.Module):
            return
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and [ast.unparse(t) for t in stmt.targets] \
                    == ["_DEFINED_IN"]:
                mod.exports = sorted(ast.literal_eval(stmt.value)) + ["__version__"]

    def on_attribute_instance(self, *, node: ast.AST | griffe.ObjectNode,
                              attr: griffe.Attribute, agent: griffe.Visitor | griffe.Inspector,
                              **kwargs: Any) -> None:
        if attr.docstring is not None or not isinstance(node, (ast.Assign, ast.AnnAssign)) \
                or not isinstance(agent, griffe.Visitor):
            return
        lines = agent.code.splitlines()
        indent = " " * node.col_offset
        text: list[str] = []
        i = node.lineno - 2   # the line above, 0-based
        while i >= 0 and lines[i].startswith(indent + "#:"):
            text.insert(0, lines[i][len(indent) + 2:].strip())
            i -= 1
        if text:
            attr.docstring = griffe.Docstring("\n".join(text), parent=attr)
