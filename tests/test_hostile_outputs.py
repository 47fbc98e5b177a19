"""Hostile input to what bread writes: links planted in the directory a Parquet export
is written to (docs/guide.md, "Security")."""

from __future__ import annotations

import os

import pytest

import bread
from bread import cli

from crafted import log_to, snapshot, victims

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
