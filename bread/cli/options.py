"""What the subcommands' command lines share: bread's exit statuses, the parser whose usage
error is exit 1, and a subcommand's ``main``: its options parsed, then run."""

from __future__ import annotations

import argparse
import sys

from blogformat.typinglite import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Callable, NoReturn, Sequence

EXIT_OK, EXIT_USAGE, EXIT_OPEN, EXIT_DAMAGED = 0, 1, 2, 3


class Parser(argparse.ArgumentParser):
    """argparse's parser, but a usage error is EXIT_USAGE (argparse's is 2)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def subcommand(parser: Callable[[], argparse.ArgumentParser],
               run: Callable[[argparse.Namespace], int]) -> Callable[[Sequence[str]], int]:
    """The ``main(argv)`` of a subcommand: ``argv`` parsed by ``parser()``, then ``run``; the
    exit status (the parser's after ``-h`` or a usage error, explained on standard error)."""
    def main(argv: Sequence[str]) -> int:
        try:
            args = parser().parse_args(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        return run(args)
    return main
