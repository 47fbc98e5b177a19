"""Public names imported on first use (PEP 562): ``import blog`` and ``import bread`` cost
about as much as starting Python, and a name costs nothing after its first use.

    __getattr__, __dir__ = lazy.names(__name__, {"read": "bread.reader", ...}, globals())

And regular expressions compiled on first use (``pattern``): a first log call, which
needs none, never imports ``re``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any
    from types import ModuleType


def import_module(name: str) -> ModuleType:
    """``importlib.import_module`` of an absolute name (without importing ``importlib``)."""
    module = sys.modules.get(name)
    if module is None:
        __import__(name)
        module = sys.modules[name]
    return module


def loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` is loaded and has it, else None: no value is a
    ``decimal.Decimal`` before ``decimal`` is imported, so nothing need import it to check.
    (A module another thread is importing is in ``sys.modules`` before its names are.)"""
    return getattr(sys.modules.get(module), name, None)


_patterns: dict[str, re.Pattern[str]] = {}


def pattern(regex: str) -> re.Pattern[str]:
    """``re.compile(regex)``, compiled the first time it is asked for, then kept."""
    compiled = _patterns.get(regex)
    if compiled is None:
        import re
        compiled = _patterns[regex] = re.compile(regex)
    return compiled


def names(package: str, defined_in: dict[str, str], namespace: dict[str, object]
          ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: each name of ``defined_in`` imported from
    its module when first asked for, then kept in ``namespace`` (the package's globals), so
    that the next use is a plain attribute; a submodule (``bread.render``), likewise."""

    def __getattr__(name: str) -> object:
        where = defined_in.get(name)
        if where is None:
            try:
                return import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(import_module(where), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *defined_in})

    return __getattr__, __dir__
