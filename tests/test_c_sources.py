"""The shape the C code keeps: files of a readable size, one copy of the buffer and msgpack
helpers (blogformat/_c), and a build that knows every file it compiles and includes."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT / "blogformat" / "_c"
C_FILES = sorted([*ROOT.glob("blog/_*.[ch]"), *ROOT.glob("bread/_*.[ch]"), *SHARED.glob("*.h")])
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def test_no_c_file_over_1200_lines():
    for f in C_FILES:
        lines = f.read_text().count("\n")
        assert lines <= 1200, (f.relative_to(ROOT).as_posix(), lines)


def test_setup_builds_every_c_file_and_rebuilds_on_every_header():
    setup = (ROOT / "setup.py").read_text()
    for f in C_FILES:
        assert f'"{f.relative_to(ROOT).as_posix()}"' in setup, f.relative_to(ROOT)


def test_each_include_is_a_header_of_the_tree():
    # A header is the extension's own (beside the file) or shared (blogformat/_c).
    for f in C_FILES:
        for name in INCLUDE.findall(f.read_text()):
            assert (f.parent / name).exists() or (SHARED / name).exists(), (f.name, name)


def test_the_shared_helpers_are_defined_once():
    # The byte buffer and the msgpack reader and writer live in blogformat/_c only.
    helpers = re.compile(r"^(?:static )?[\w ]+\*?\n(buf_reserve|put_int|read_value|skip_value)\(",
                         re.M)
    where: dict[str, list[str]] = {}
    for f in C_FILES:
        for name in helpers.findall(f.read_text()):
            where.setdefault(name, []).append(f.relative_to(ROOT).as_posix())
    assert where == {
        "buf_reserve": ["blogformat/_c/buf.h"],
        "put_int": ["blogformat/_c/mpwrite.h"],
        "read_value": ["blogformat/_c/mpread.h"],
        "skip_value": ["blogformat/_c/mpread.h"],
    }
