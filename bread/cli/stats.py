"""``bread stats [-o json] FILE...``: the statistics of ``bread.stats``, as text or JSON."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from .. import stats
from .options import Parser, subcommand
from ..errors import NotABlogFile
from .read import cannot_open, not_blog, open_inputs


def parser() -> argparse.ArgumentParser:
    """The options of ``bread stats``."""
    p = Parser(prog="bread stats", description=(stats.__doc__ or "").split("\n")[0])
    p.add_argument("inputs", nargs="*", metavar="FILE")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return p


def run(args: argparse.Namespace) -> int:
    """``bread stats [-o json] FILE...``; the same exit codes as bread."""
    try:
        found = open_inputs(args.inputs)
    except OSError as exc:
        return cannot_open(exc)
    try:   # as named: a file found in a directory that is not a blog file is damage
        counted = stats.collect(found)
    except NotABlogFile as exc:
        return not_blog(exc)
    if args.output == "json":
        sys.stdout.write(json.dumps(counted, indent=1) + "\n")
    else:
        sys.stdout.write(stats.render(counted, shutil.get_terminal_size().columns))
    return 3 if counted["damage"] or counted["unknown_sources"] else 0


main = subcommand(parser, run)
