"""bread stats: counts that agree with bread.read, drops, damage, a histogram that adds up."""

from __future__ import annotations

import collections
import json
import pathlib

import bread
from bread import cli

DATA = pathlib.Path(__file__).parent / "data" / "v1"


def stats(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(["stats", "-o", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_counts_agree_with_read(capsys):
    path = str(DATA / "every_type.blog")
    events = list(bread.read(path))
    code, s = stats(capsys, path)
    assert code == 0 and s["events"] == len(events)
    assert s["severity"] == dict(collections.Counter(e.severity.name for e in events))
    assert s["category"] == dict(collections.Counter(e.category for e in events))
    assert s["writer"] == dict(collections.Counter(e.writer for e in events))
    assert sum(x["events"] for x in s["sites"]) == len(events)
    assert sum(sum(b["severity"].values()) for b in s["histogram"]) == len(events)
    assert s["first"] <= s["last"] and s["dropped"] == 0 and s["damage"] == []


def test_drops_and_damage_are_reported(tmp_path, capsys):
    code, s = stats(capsys, str(DATA / "dropped.blog"))
    assert code == 0 and s["dropped"] == 3
    bad = tmp_path / "bad.blog"
    data = bytearray((DATA / "two_writers.blog").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    code, s = stats(capsys, str(bad))
    assert code == cli.EXIT_DAMAGED and s["damage"] and s["damage"][0]["length"] > 0


def test_text_output_fits_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["stats", str(DATA / "every_type.blog")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("events: ") and "by call site:" in out and "events over time" in out
    assert max(len(line) for line in out.splitlines() if line.startswith("  2")) <= 60


def test_a_bad_stats_option_is_exit_1_naming_it(capsys):
    from bread import cli
    assert cli.main(["stats", "-o", "xml", "x.blog"]) == 1
    assert "-o/--output" in capsys.readouterr().err
