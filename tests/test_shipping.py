"""Shipping closed files (``on_close``): each final file once, kept until shipped, again
after a failure, never twice across processes that share the set."""

from __future__ import annotations

import os
import shutil

import pytest

import blog
import bread
from blog.errors import ConfigurationError
from blogstore import manifest
from blogstore.fileset import members

from helpers import flushed_one_by_one, run_python


def test_each_closed_file_is_shipped_once_compressed_and_holds_every_event(tmp_path):
    # Proves: the hook gets every file of the set once, once it is final (.gz), on the
    # housekeeping thread; what was shipped holds every event; the manifest says shipped.
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    shipped: list[str] = []

    def upload(path: str) -> None:
        shipped.append(path)
        shutil.copy(path, bucket)

    rf = blog.RotatingFile(tmp_path / "logs" / "app.blog", rotate_bytes=1, compress=True,
                           on_close=upload)
    flushed_one_by_one(rf, 5)
    names = [os.path.basename(p) for p in shipped]
    assert len(names) == 5 == len(set(names))
    assert all(n.endswith(".blog.gz") for n in names)
    assert sorted(names) == sorted(f.name for f in members(str(tmp_path / "logs"), "app"))
    assert sorted(ev.message for ev in bread.read(str(bucket), sort=True)) == [
        f"e {i}" for i in range(5)]
    files = manifest.load(str(tmp_path / "logs"))["files"]
    assert {n: e.get("shipped") for n, e in files.items()} == {n: True for n in names}


def test_a_failing_hook_is_reported_the_file_kept_and_shipped_at_the_next_rotation(
        tmp_path, capsys):
    # Proves: a hook that raises costs nothing but its file's delay: it is said on
    # stderr, retention (one file kept) does not delete the file meanwhile, and the next
    # rotation calls the hook again for it; logging went on throughout.
    calls: list[str] = []

    def flaky(path: str) -> None:
        calls.append(os.path.basename(path))
        if len(calls) == 1:
            raise ConnectionError("bucket unreachable")

    rf = blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=1, keep_files=1,
                           on_close=flaky)
    flushed_one_by_one(rf, 3)
    first = calls[0]
    assert calls.count(first) == 2                    # failed, then shipped again
    assert len(set(calls)) == 3                       # and every other file once
    err = capsys.readouterr().err
    assert "on_close(" in err and "bucket unreachable" in err
    left = [f.name for f in members(str(tmp_path), "app")]
    assert first not in left and len(left) == 1       # deleted only once shipped


def test_a_restart_ships_what_the_last_run_did_not_and_nothing_twice(tmp_path):
    # Proves: the manifest remembers what was shipped: a second run of the service
    # (another process) ships only the files it has not seen shipped.
    script = """
        import os
        import blog
        out = "shipped.txt"
        def record(path):
            with open(out, "a") as f:
                f.write(os.path.basename(path) + "\\n")
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=record)
        log = blog.get_logger()
        for i in range(3):
            log.info("e {}", i)
            blog.flush()
    """
    for _ in range(2):
        r = run_python(script, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    shipped = (tmp_path / "shipped.txt").read_text().split()
    assert len(shipped) == len(set(shipped)) == len(members(str(tmp_path / "logs"), "app"))


def test_on_close_needs_a_rotated_set_and_a_function(tmp_path):
    with pytest.raises(ConfigurationError, match="rotated set"):
        blog.basic_config(tmp_path / "app.blog", on_close=print)
    with pytest.raises(ConfigurationError, match="on_close must be a function"):
        blog.RotatingFile(tmp_path / "app.blog", rotate_bytes=10, on_close="s3://bucket")


def test_a_hook_that_hangs_never_keeps_the_process_from_ending(tmp_path):
    # Proves (a review's finding): a stuck upload delays the end of the process by
    # AT_CLOSE seconds at most, says so, and the file is shipped at the next start.
    r = run_python("""
        import time
        import blog
        import blog.files.shipping as shipping
        shipping.AT_CLOSE = 0.5
        def stuck(path):
            time.sleep(3600)
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=stuck)
        log = blog.get_logger()
        log.info("e {}", 1)
        blog.flush()
    """, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "was still running 0.5 s after the set was closed" in r.stderr
    first = [f.name for f in members(str(tmp_path / "logs"), "app")]
    assert first
    r = run_python("""
        import os
        import blog
        def record(path):
            with open("shipped.txt", "a") as f:
                f.write(os.path.basename(path) + "\\n")
        blog.basic_config("logs/app.blog", rotate_bytes=1, on_close=record)
        blog.shutdown()
    """, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(first) <= set((tmp_path / "shipped.txt").read_text().split())


@pytest.mark.parametrize("claim", [-1, 0, 2**40, "42", [1]])
def test_a_planted_claim_in_the_manifest_never_stops_shipping(tmp_path, claim):
    # Proves: "shipping" in a manifest entry is input: a value that is no live process's
    # pid (a negative one, which kill() takes for every process, a huge one, not an int)
    # is taken for no claim, and the file is shipped.
    shipped: list[str] = []
    d = tmp_path / "logs"
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1)
    flushed_one_by_one(rf, 2)

    def plant(m: dict) -> None:
        for e in m["files"].values():
            e["shipping"] = claim
    manifest.update(str(d), plant, lambda path: True)
    rf = blog.RotatingFile(d / "app.blog", rotate_bytes=1, on_close=shipped.append)
    flushed_one_by_one(rf, 1)
    assert len(shipped) == 3
