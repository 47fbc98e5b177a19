"""Hostile input to what bread writes: links planted in the directory a Parquet export
is written to; values and texts that JSON lines and CSV must carry (docs/security.md)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import blog
import bread
from bread import cli

from crafted import log_to, snapshot, victims
from helpers import python_child

pq = pytest.importorskip("pyarrow.parquet", reason="Parquet export needs pyarrow")


def test_links_planted_in_the_parquet_output_directory_are_never_written_through(tmp_path):
    outside, victim = victims(str(tmp_path))
    log_to(str(tmp_path / "a.blog"), "w", 10)
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(os.path.join(outside, "passwd"), out / "events.parquet")
    os.symlink(os.path.join(outside, "new.json"), out / "sources.json")
    os.symlink(outside, out / "sources")            # the typed tables' directory
    before = snapshot(outside)
    assert cli.main(["export", "--parquet", str(out), str(tmp_path / "a.blog")]) == 0
    assert snapshot(outside) == before
    assert not os.path.islink(out / "events.parquet") and not os.path.islink(out / "sources")
    assert pq.read_table(out / "events.parquet").column("message").to_pylist() == [
        ev.message for ev in bread.read(str(tmp_path / "a.blog"))]
    assert os.listdir(out / "sources") == ["0000.parquet"]


def test_a_link_planted_at_a_typed_tables_name_is_replaced_not_followed(tmp_path):
    outside, victim = victims(str(tmp_path))
    log_to(str(tmp_path / "a.blog"), "w", 10)
    out = tmp_path / "out"
    (out / "sources").mkdir(parents=True)
    os.symlink(victim, out / "sources" / "0000.parquet")
    before = snapshot(outside)
    assert cli.main(["export", "--parquet", str(out), str(tmp_path / "a.blog")]) == 0
    assert snapshot(outside) == before
    assert pq.read_table(out / "sources" / "0000.parquet").num_rows == 10
    # exporting again over its own files replaces them
    assert cli.main(["export", "--parquet", str(out), str(tmp_path / "a.blog")]) == 0
    assert pq.read_table(out / "events.parquet").num_rows == 10


def test_hostile_values_give_strict_json_lines_and_one_line_csv_rows(tmp_path):
    # Hunted without a finding: lone surrogates, an int of 5000 digits, NaN and -inf, a
    # list nested 5000 deep, formula-like and multi-line texts.
    path = str(tmp_path / "h.blog")
    s = blog.Session()
    out = blog.FileOutputStream(path)
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    log = s.get_logger("=cat\ud800\n")
    log.info("=1+1 {} {} {} {} {}", "\udcff\r\n\"", 10**5000, float("nan"), -float("inf"), deep,
             **{"k\ud800": "-2", "@x": "+3"})
    s.consume(out)
    out.close()
    r = subprocess.run(python_child("-m", "bread", "-o", "jsonl", path), capture_output=True,
                       timeout=60)
    (line,) = r.stdout.decode("ascii").splitlines()

    def refuse(constant):
        raise ValueError(constant)

    o = json.loads(line, parse_constant=refuse)
    assert o["args"][1] == {"$int": hex(10**5000)} and o["args"][2] == {"$float": "nan"}
    assert o["category"] == "=cat\ud800\n"
    r = subprocess.run(python_child("-m", "bread", "-o", "csv", path), capture_output=True,
                       timeout=60)
    header, row = r.stdout.decode("utf-8").split("\r\n")[:2]
    assert r.stdout.count(b"\r\n") == 2 and row.split(",")[2] == "'=cat\\ud800\\n"
