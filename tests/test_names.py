"""One word per meaning: the minimum severity is ``min_severity`` everywhere (``level`` and
``--level`` stay as its old names), and the old names of renamed functions keep working."""

from __future__ import annotations

import logging

import pytest

import blog
import blog.stdlib
from blog.files import housekeeping
from bread import cli, compact


def test_stdlib_capture_takes_min_severity_and_its_old_name_level():
    # Proves: blog.stdlib.capture(min_severity=...) and capture(level=...) set the same
    # threshold; giving both is refused.
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    try:
        for kw in ({"min_severity": "WARNING"}, {"level": "WARNING"}):
            s = blog.Session()
            h = blog.stdlib.capture(session=s, **kw)
            assert h.level == root.level == logging.WARNING
            root.removeHandler(h)
        with pytest.raises(TypeError, match="not both"):
            blog.stdlib.capture(min_severity="INFO", level="INFO", session=blog.Session())
    finally:
        root.setLevel(before[0])
        root.handlers[:] = before[1]


def test_the_cli_takes_min_severity_and_its_old_name_level(tmp_path, capsys):
    # Proves: -l, --min-severity and --level are one option.
    path = tmp_path / "x.blog"
    s = blog.Session()
    out = blog.FileOutputStream(str(path))
    log = s.get_logger("app")
    log.info("quiet")
    log.error("loud")
    s.consume(out)
    s.finish(out)
    out.close()
    for option in ("-l", "--min-severity", "--level"):
        assert cli.main([option, "error", "-f", "%m", str(path)]) == 0
        assert capsys.readouterr().out.splitlines() == ["loud"]


def test_the_old_names_of_renamed_functions_are_the_same_functions():
    # Proves: recover (housekeeping, compaction) is an alias of its new name, so code that
    # imported it still runs. (The call-time encoder's module is internal: it was renamed,
    # blog.pipeline.richvalues, with no alias: docs/typing.md.)
    assert housekeeping.recover is housekeeping.finish_interrupted
    assert compact.recover is compact.finish_interrupted
