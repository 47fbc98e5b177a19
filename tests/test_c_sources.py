"""The shape the C code keeps: files of a readable size, each beside the module it mirrors,
one copy of the buffer and msgpack helpers (blogformat's headers), a build that knows every
file it compiles and includes, and comments that name only paths that exist."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT / "blogformat"
#: Every C file of the tree, wherever it sits in the packages.
C_FILES = sorted(f for package in ("blog", "blogformat", "blogstore", "bread")
                 for f in (ROOT / package).rglob("*.[ch]"))
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
    # A header is the extension's own (named from the file's folder) or shared (blogformat).
    for f in C_FILES:
        for name in INCLUDE.findall(f.read_text()):
            assert (f.parent / name).exists() or (SHARED / name).exists(), (f.name, name)


def test_the_shared_helpers_are_defined_once():
    # The byte buffer and the msgpack reader and writer live in blogformat's headers only.
    helpers = re.compile(r"^(?:static )?[\w ]+\*?\n(buf_reserve|put_int|read_value|skip_value)\(",
                         re.M)
    where: dict[str, list[str]] = {}
    for f in C_FILES:
        for name in helpers.findall(f.read_text()):
            where.setdefault(name, []).append(f.relative_to(ROOT).as_posix())
    assert where == {
        "buf_reserve": ["blogformat/buf.h"],
        "put_int": ["blogformat/mpwrite.h"],
        "read_value": ["blogformat/mpread.h"],
        "skip_value": ["blogformat/mpread.h"],
    }


#: Each extension's C files from the top down (its _extension.h lists them): a file calls
#: only files of a lower level. The reader: the module, the Renderer, its outputs, the walk
#: over a frame, the text of messages and values. The writer: the module, the call paths (a
#: logger's methods, @blog.event, @blog.traced, the logging bridge), the channel, the
#: values' encoding, the per-source tally and the parts, the context fields, and the span's
#: ids they take from correlation. A name
#: with a folder is a path from the repository's root; without, a file of the package.
LEVELS = {
    "bread": {"bread/decode/_speedups.c": 4, "bread/decode/_native.c": 3,
              "bread/sinks/_lines.c": 2, "bread/sinks/_events.c": 2,
              "bread/sinks/_batches.c": 2, "bread/sinks/_tables.c": 2,
              "bread/decode/_decode.c": 1, "bread/decode/_message.h": 0},
    "blog": {"blog/_speedups.c": 4, "blog/pipeline/_logger.c": 3,
             "blog/integrations/_event.c": 3, "blog/integrations/_traced.c": 3,
             "blog/_stdlib.c": 3, "blog/pipeline/_callpath.h": 3, "blog/pipeline/_channel.c": 2,
             "blogformat/_valueencoding.c": 1, "blog/pipeline/_summary.c": 1,
             "blog/pipeline/_parts.c": 1, "blog/_contextfields.c": 1,
             "blog/_correlation.c": 0},
}


def _path(package: str, name: str) -> pathlib.Path:
    return ROOT / name if "/" in name else ROOT / package / name


def _built_from(module: str) -> set[pathlib.Path]:
    """The files setup.py builds the extension ``module`` from, its headers included."""
    call = re.search(r'extension\("%s",(.*?)\)\)' % re.escape(module),
                     (ROOT / "setup.py").read_text(), re.S)
    assert call, module
    return {ROOT / name for name in re.findall(r'"([^"]+\.[ch])"', call.group(1))}


#: A comment of a C file: /* ... */ or // to the end of the line.
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
#: A path of the repository named in a comment (a file or folder under one of its top ones).
NAMED_PATH = re.compile(r"(?<![\w./])((?:blog|blogformat|blogstore|bread|docs|tests|benchmarks|"
                        r"examples)/[\w./-]*\w)")


@pytest.mark.parametrize("path", [f.relative_to(ROOT).as_posix() for f in C_FILES])
def test_every_path_a_c_comment_names_exists(path: str):
    # Proves (issue 39): the comments that say which Python a C file mirrors stay true when
    # either side moves (blog/_channel.c once named blog/channel.py, gone a while).
    named = {p for c in COMMENT.findall((ROOT / path).read_text()) for p in NAMED_PATH.findall(c)}
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_each_c_file_of_bread_sits_beside_the_module_it_mirrors():
    # bread/'s root holds no C (issue 39: twelve files there, away from their twins): the
    # Renderer's files in bread/decode beside decoder.py, each output's in bread/sinks beside
    # its sink, and the merge's, the C++ printer's and compaction's beside theirs.
    c_files = [f for f in C_FILES if f.is_relative_to(ROOT / "bread")]
    assert [f.name for f in c_files if f.parent == ROOT / "bread"] == []
    twins = {"_speedups.c": "decoder.py", "_native.c": "decoder.py", "_decode.c": "filters.py",
             "_extension.h": "decoder.py", "_message.h": "decoder.py",
             "_merge.c": "merger.py", "_binlog.c": "fastpath.py", "_compact.c": "compactor.py"}
    alone = [f.relative_to(ROOT).as_posix() for f in c_files
             if not (f.parent / twins.get(f.name, f.name[1:-2] + ".py")).is_file()]
    assert alone == []


def test_each_c_file_of_blog_sits_beside_the_module_it_mirrors():
    # _channel.c beside channel.py: the module, blog/_speedups.c, is accel.py's twin, and a
    # header is shared by the files around it.
    alone = [f.relative_to(ROOT).as_posix() for f in _built_from("blog._speedups")
             if f.suffix == ".c" and f.name != "_speedups.c"
             and not f.with_name(f.name[1:-2] + ".py").is_file()]
    assert alone == []


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
        for fn in defined.findall(_path(package, name).read_text()):
            where[fn] = name
    assert set(where.values()) == {n for n in levels
                                   if pathlib.PurePath(n).name not in ("_speedups.c",
                                                                       "_callpath.h")}
    # Every file the extension is built from has its level (but its internal header).
    assert {_path(package, n) for n in levels} == {
        f for f in _built_from(f"{package}._speedups") if f.name != "_extension.h"}
    for name, level in levels.items():
        for fn in set(re.findall(rf"\b({prefix}\w+)\(", _path(package, name).read_text())):
            home = where.get(fn)
            if home is not None and home != name:
                assert levels[home] < level, f"{name} calls {fn} of {home}"


# The records the C call paths read by position, each named by a NamedTuple on the Python
# side: (C file, the enum's prefix, the NamedTuple's module and name).
RECORDS = [
    ("blog/pipeline/_logger.c", "SITE", "blog.pipeline.logger", "SiteEntry"),
    ("blog/pipeline/_logger.c", "CONTEXT", "blog.pipeline.logger", "ContextEntry"),
    ("blog/pipeline/_logger.c", "CFIELDS", "blog.contextfields", "ContextFields"),
    ("blog/_extension.h", "IDS", "blog.correlation", "Ids"),
    ("blog/_extension.h", "SPAN", "blog.correlation", "Span"),
    ("blog/integrations/_traced.c", "SIDS", "blog.integrations.traced", "FastSources"),
    ("blog/pipeline/_channel.c", "MARK", "blog.pipeline.channel", "Mark"),
    ("blog/integrations/_traced.c", "PLAN", "blog.integrations.traced", "FastPlan"),
    ("blog/_stdlib.c", "RSITE", "blog.stdlib", "RecordSite"),
    ("blogformat/_valueencoding.c", "RECORD", "blogformat.valueencoding", "RecordInfo"),
    ("blogformat/_valueencoding.c", "ENUM", "blogformat.valueencoding", "EnumInfo"),
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
