"""Crafted state: a manifest, a compaction catalog, or what else may sit in a log directory,
is input, never an instruction (docs/security.md; blogstore/, bread/compact/).

Each test plants what a local attacker (or a damaged disk) could leave in a log directory,
runs what an operator runs (housekeeping, ``bread compact``), and checks that nothing
outside the directory changed, that no exception escaped, and that no event was lost.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

import blog
import bread

from crafted import snapshot, victims
from helpers import aged_set_dir, python_child, seeded_random


# --- Crafted manifests and catalogs against housekeeping and bread compact ----------------


@pytest.fixture(scope="module")
def closed_set(tmp_path_factory) -> str:
    """A directory holding a rotated set of six closed files (300 events, each args unique),
    all last written an hour ago (a template: copy it, never change it)."""
    return aged_set_dir(tmp_path_factory.mktemp("set"), files=6)


def _args(directory: str) -> list[tuple]:
    """Every event's args readable in the directory, its damaged/ files included."""
    out = [tuple(e.args) for e in bread.read(directory)]
    kept = os.path.join(directory, "damaged")
    if os.path.isdir(kept):
        for n in sorted(os.listdir(kept)):
            out += [tuple(e.args) for e in bread.read(os.path.join(kept, n))]
    return out


def _crafted_names(rng: random.Random, d: str, outside: str, names: list[str]) -> list:
    pool = ["../outside/victim.blog", os.path.join(outside, "victim.blog"),
            os.path.join(outside, "passwd"), "x/../../outside/passwd", "a\0b", ".", "..", "",
            "link.2026-01-01T00-00-00.000.pid1.blog", 7, None, ["x"],
            "../outside/app.compacted.2026-01-01T00-00-00.1.blog.gz",
            "app.compacted.2026-01-01T00-00-00.9.blog.gz"] + names
    return [rng.choice(pool) for _ in range(rng.randrange(0, 5))]


def _plant(rng: random.Random, d: str, outside: str, targets: list[str]) -> None:
    """A crafted manifest and catalog, and links at names blog and bread write."""
    names = sorted(n for n in os.listdir(d) if n.startswith("app."))
    link = os.path.join(d, "link.2026-01-01T00-00-00.000.pid1.blog")
    if not os.path.lexists(link):
        os.symlink(rng.choice(targets), link)
    files = {}
    for n in _crafted_names(rng, d, outside, names):
        files[n if isinstance(n, str) else str(n)] = rng.choice([
            {"state": "closed", "bytes": rng.randrange(1 << 20), "events": 0,
             "first_ns": 0, "last_ns": 0},
            {"state": rng.choice(["compressed", "x", 3]), "bytes": -1, "events": "many"},
            "garbage", None])
    compacted = {}
    for c in _crafted_names(rng, d, outside, names):
        compacted[c if isinstance(c, str) else str(c)] = {
            "state": rng.choice(["done", "writing", "?"]),
            "replaces": _crafted_names(rng, d, outside, names),
            "damaged": _crafted_names(rng, d, outside, names),
            "events": rng.choice([None, 0, 10**30, "x"])}
    for name, doc in (("blog-manifest.json", {"manifest_version": 1, "format_version": 1,
                                              "files": files}),
                      ("blog-compaction.json", {"catalog_version": 1,
                                                "compacted": compacted})):
        p = os.path.join(d, name)
        if os.path.lexists(p):
            os.unlink(p)
        if rng.random() < 0.15:
            os.symlink(rng.choice(targets), p)
        else:
            with open(p, "w") as f:
                f.write(json.dumps(doc) if rng.random() < 0.9 else "{not json")
    for name in ("blog-manifest.lock", "blog-compaction.lock",
                 f"{names[0]}.gz.tmp" if names else "x.gz.tmp"):
        if rng.random() < 0.3 and not os.path.lexists(os.path.join(d, name)):
            os.symlink(rng.choice(targets), os.path.join(d, name))


def test_crafted_manifests_and_catalogs_never_touch_anything_outside_the_log(
        closed_set, tmp_path, capsys):
    # Proves, for random crafted manifests and catalogs (names with /, .., NUL, absolute
    # paths, links in the directory to files outside, entries of every wrong shape, links
    # at the lock and temporary names): housekeeping (compression) and bread compact raise
    # nothing, exit 0 or 3, change nothing outside the log's directory, and every event
    # readable before is readable after, once.
    from bread.cli.compact import main as compact_main
    rng = seeded_random("HOSTILE_SEED", 2024)   # replay: HOSTILE_SEED=<seed>
    outside, victim = victims(str(tmp_path))
    targets = [victim, os.path.join(outside, "passwd"), os.path.join(outside, "new")]
    before_outside = snapshot(outside)
    expected = sorted(_args(closed_set))
    assert len(expected) == 300 == len(set(expected))
    for trial in range(12):
        d = str(tmp_path / f"t{trial}")
        shutil.copytree(closed_set, d, symlinks=True)
        _plant(rng, d, outside, targets)
        if rng.random() < 0.5:
            rf = blog.RotatingFile(os.path.join(d, "app.blog"), compress=True)
            rf.housekeeper.sweep()
            rf.close()
        code = compact_main([d, "--older-than", "1m"])
        assert code in (0, 3), (trial, capsys.readouterr().err)
        assert snapshot(outside) == before_outside, (trial, capsys.readouterr().err)
        # (a reader of the directory may follow the planted link to the victim's events:
        # reading; those are told apart by their one argument)
        got = sorted(a for a in _args(d) if len(a) == 2)
        assert got == expected, (trial, capsys.readouterr().err)


# --- Review findings: what a catalog claims, and what else may sit in a log directory ----


def test_a_done_entry_for_a_missing_compacted_file_deletes_nothing(tmp_path, capsys):
    # Proves: compaction deletes an original only if the compacted file that replaces it is
    # a regular file whose own header says so; a catalog that only claims it changes
    # nothing (before: every original deleted, exit 0).
    from bread.cli.compact import main as compact_main
    d = aged_set_dir(tmp_path)
    names = sorted(n for n in os.listdir(d) if n.startswith("app."))
    with open(os.path.join(d, "blog-compaction.json"), "w") as f:
        json.dump({"catalog_version": 1, "compacted": {
            "app.compacted.2000-01-01T00-00-00.1.blog.gz": {"state": "done", "replaces": names,
                                                            "events": 0}}}, f)
    assert compact_main([d, "--older-than", "52w"]) == 3
    assert "left alone" in capsys.readouterr().err
    assert sorted(n for n in os.listdir(d) if n.startswith("app.")) == names


def test_a_writing_entry_for_a_compacted_file_whose_originals_are_gone_keeps_it(
        tmp_path, capsys):
    # Proves: a compacted file that holds the only copy of its events (its originals gone)
    # is never removed, whatever state the catalog gives it.
    from bread.cli.compact import main as compact_main
    d = aged_set_dir(tmp_path, files=1)
    assert compact_main([d, "--older-than", "1m"]) == 0
    [c] = [n for n in os.listdir(d) if ".compacted." in n]
    p = os.path.join(d, "blog-compaction.json")
    with open(p) as f:
        cat = json.load(f)
    for e in cat["compacted"].values():
        e["state"] = "writing"
    with open(p, "w") as f:
        json.dump(cat, f)
    capsys.readouterr()
    assert compact_main([d, "--older-than", "52w"]) == 3
    assert "left alone" in capsys.readouterr().err
    assert len(list(bread.read(os.path.join(d, c)))) == 50


def test_a_compression_cut_short_is_not_compacted_twice(tmp_path, capsys):
    # Proves: x.blog beside a whole x.blog.gz (housekeeping killed between its rename and
    # its unlink) is left for the set's next start: no event ends up twice.
    import gzip
    from bread.cli.compact import main as compact_main
    d = aged_set_dir(tmp_path, files=1)
    [n] = [n for n in os.listdir(d) if n.startswith("app.")]
    with open(os.path.join(d, n), "rb") as f, gzip.open(os.path.join(d, n + ".gz"), "wb") as g:
        shutil.copyfileobj(f, g)
    compact_main([d, "--older-than", "1m"])
    assert len(list(bread.read(d))) == 50


def test_a_fifo_or_a_directory_where_a_file_should_be_never_hangs_or_crashes_compact(tmp_path):
    # Proves: a FIFO under a set file's name (no manifest: it is rebuilt) and a directory
    # at a lock file's name end bread compact at once with a message, never a hang or a
    # traceback.
    d = aged_set_dir(tmp_path, files=1)
    for n in os.listdir(d):
        if n.startswith("blog-manifest"):
            os.unlink(os.path.join(d, n))
    os.mkfifo(os.path.join(d, "app.2026-01-01T00-00-00.000.pid1.blog"))
    r = subprocess.run(python_child("-m", "bread", "compact", d, "--older-than", "1m"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 3) and "Traceback" not in r.stderr, r.stderr
    e = aged_set_dir(tmp_path, "other", files=1)
    os.unlink(os.path.join(e, "blog-manifest.lock"))
    os.mkdir(os.path.join(e, "blog-manifest.lock"))
    r = subprocess.run(python_child("-m", "bread", "compact", e, "--older-than", "1m"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a lock file" in r.stderr, r.stderr


def test_compact_names_files_with_controls_escaped(tmp_path):
    d = aged_set_dir(tmp_path, files=1)
    os.symlink("/nonexistent",
               os.path.join(d, "\x1b]0;owned\x07.2026-01-01T00-00-00.000.pid1.blog"))
    r = subprocess.run(python_child("-m", "bread", "compact", d, "--older-than", "1m"),
                       capture_output=True, text=True, timeout=60)
    assert "left alone" in r.stderr and "\\x1b]0;owned\\x07" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr
