"""The shape the C code keeps: files of a readable size, one copy of the buffer and msgpack
helpers (blogformat/_c), and a build that knows every file it compiles and includes."""

from __future__ import annotations

import pathlib
import re

import pytest

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


#: Each extension's C files from the top down (its _extension.h): a file calls only files
#: of a lower level. The reader: the module, the Renderer, its outputs, the walk over a
#: frame, the text of messages and values. The writer: the module, the call paths (a
#: logger's methods, @blog.event, the logging bridge), the channel, the values' encoding,
#: the per-source tally and the context fields.
LEVELS = {
    "bread": {"_speedups.c": 4, "_native.c": 3, "_lines.c": 2, "_events.c": 2,
              "_batches.c": 2, "_tables.c": 2, "_decode.c": 1, "_message.h": 0},
    "blog": {"_speedups.c": 4, "_logger.c": 3, "_event.c": 3, "_traced.c": 3, "_stdlib.c": 3,
             "_callpath.h": 3, "_channel.c": 2, "_encode.c": 1, "_summary.c": 1, "_parts.c": 1,
             "_context.c": 0},
}


@pytest.mark.parametrize("package", sorted(LEVELS))
def test_each_c_file_calls_only_the_files_below_it(package: str):
    # The reader's walk hands each event to its output by pointer, and what every output
    # needs sits below them all; the writer's module is the only file that calls the call
    # paths' setup. No file calls up into one above it, nor across into a sibling.
    levels = LEVELS[package]
    prefix = f"{package}_"
    defined = re.compile(rf"^(?:static )?(?:inline )?[\w ]+\*?\n({prefix}\w+)\(", re.M)
    where = {}
    for name in levels:
        for fn in defined.findall((ROOT / package / name).read_text()):
            where[fn] = name
    assert set(where.values()) == set(levels) - {"_speedups.c", "_callpath.h"}
    # (_merge.c, _binlog.c and _compact.c are extensions of their own, each one file)
    assert set(levels) == {f.name for f in C_FILES if f.parent.name == package} - {
        "_extension.h", "_merge.c", "_binlog.c", "_compact.c"}
    for name, level in levels.items():
        for fn in set(re.findall(rf"\b({prefix}\w+)\(", (ROOT / package / name).read_text())):
            home = where.get(fn)
            if home is not None and home != name:
                assert levels[home] < level, f"{name} calls {fn} of {home}"


# The records the C call paths read by position, each named by a NamedTuple on the Python
# side: (C file, the enum's prefix, the NamedTuple's module and name).
RECORDS = [
    ("blog/_logger.c", "SITE", "blog.pipeline.logger", "SiteEntry"),
    ("blog/_logger.c", "CONTEXT", "blog.pipeline.logger", "ContextEntry"),
    ("blog/_traced.c", "PLAN", "blog.integrations.traced", "FastPlan"),
    ("blog/_stdlib.c", "RSITE", "blog.stdlib", "RecordSite"),
    ("blog/_encode.c", "RECORD", "blogformat.valueencoding", "RecordInfo"),
    ("blog/_encode.c", "ENUM", "blogformat.valueencoding", "EnumInfo"),
]


@pytest.mark.parametrize(("path", "prefix", "module", "name"), RECORDS)
def test_c_reads_each_record_by_the_positions_python_names(path, prefix, module, name):
    # An enum { PREFIX_FIELD, ..., PREFIX_FIELDS } names the positions C reads; reordering,
    # adding or removing a field on one side only fails here rather than misreading.
    import importlib
    fields = getattr(importlib.import_module(module), name)._fields
    found = re.search(r"enum \{\s*(%s_\w+(?:,\s*%s_\w+)*)\s*\};" % (prefix, prefix),
                      (ROOT / path).read_text())
    assert found, (path, prefix)
    names = [n.strip() for n in found.group(1).split(",")]
    assert names[-1] == f"{prefix}_FIELDS"
    assert [n[len(prefix) + 1:].lower() for n in names[:-1]] == list(fields)
