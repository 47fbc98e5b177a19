"""The ``bread`` command: one module per subcommand, each with its own parser.

``bread FILE...`` reads (``read``, the default); ``bread stats``, ``bread compact``,
``bread export`` and ``bread --recover`` name the others (``COMMANDS``). A subcommand's
module, and the library it drives, is imported only when it runs (start-up).

The parsers are assembled here rather than as argparse subparsers: a subparsers action
takes the first positional for a subcommand name, so ``bread app.blog`` would be an
invalid choice (the default command has no name to put there), ``--recover`` is spelled as
an option, and ``bread -h`` would list the subcommands in its usage line.
"""

from __future__ import annotations

import sys

from blogformat.typinglite import TYPE_CHECKING
from blogformat.lazy import import_module
from blogstore.errors import NeedsPosix

from . import read
from .options import EXIT_DAMAGED, EXIT_OK, EXIT_OPEN, EXIT_USAGE
from .read import EPILOG

if TYPE_CHECKING:
    from typing import NoReturn, Sequence

__all__ = ["COMMANDS", "EPILOG", "EXIT_DAMAGED", "EXIT_OK", "EXIT_OPEN", "EXIT_USAGE", "main",
           "run"]

#: The first argument that names a subcommand, and its module in this package (its
#: ``main`` takes the arguments after the name). Anything else is read's: a file named
#: ``stats`` is ``./stats``.
COMMANDS = {"stats": "stats", "compact": "compact", "export": "export", "--recover": "recover"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run bread; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None:
        return read.main(argv)
    try:
        module = import_module(f"{__name__}.{command}")
    except NeedsPosix as exc:   # compact, --recover: no file locks here (Windows)
        print(f"bread: {exc}", file=sys.stderr)
        return EXIT_USAGE
    status: int = module.main(argv[1:])
    return status


def run() -> NoReturn:
    """Console-script entry point."""
    sys.exit(main())
