"""Source lines bread reads for the tracebacks a (crafted) log names: never a FIFO or a
device, bounded memory (docs/security.md)."""

from __future__ import annotations

import os
import tracemalloc

from blogformat.tracebacks import SourceLines


def test_a_fifo_or_a_device_named_as_source_is_never_opened(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    os.symlink(tmp_path / "fifo.py", tmp_path / "via.py")
    (tmp_path / "real.py").write_text("x = 1\n")
    os.symlink(tmp_path / "real.py", tmp_path / "linked.py")
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(p) or real_open(p, *a, **k))
    lines = SourceLines()
    for name in ("fifo.py", "zero.py", "via.py"):
        assert lines.line(str(tmp_path / name), 1) is None
    assert lines.line(str(tmp_path / "linked.py"), 1) == "x = 1"   # a link to a file: read
    assert opened == [str(tmp_path / "real.py")]


def test_source_files_of_short_lines_are_held_within_a_bound(tmp_path):
    names = []
    for i in range(8):                 # 1 MB of two-character lines: ~21 MB as a list
        p = tmp_path / f"m{i}.py"
        p.write_bytes(b"ab\n" * ((1 << 20) // 3))
        names.append(str(p))
    lines = SourceLines()
    tracemalloc.start()
    try:
        for name in names:
            assert lines.line(name, 2) == "ab"
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 48 << 20, held
    assert lines.line(names[-1], 3) == "ab" and lines.line(names[0], 1) == "ab"
