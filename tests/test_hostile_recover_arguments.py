"""``bread --recover FILE`` on what is not a log file: a FIFO, a device, a directory, a
name that names no log (docs/security.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from bread import cli

from helpers import python_child


def test_recover_refuses_a_fifo_at_once(tmp_path):
    fifo = str(tmp_path / "app.blog")
    os.mkfifo(fifo)
    r = subprocess.run(python_child("-m", "bread", "--recover", fifo), capture_output=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.decode() == f"bread: {fifo} is not a regular file; nothing recovered\n"


@pytest.mark.parametrize("name", ["/dev/null", "{dir}", "{dir}/.blog", "{dir}/\x1b[2J/.blog"])
def test_recover_of_what_is_no_log_file_says_so_and_exits_2(tmp_path, capsys, name):
    name = name.format(dir=tmp_path)
    assert cli.main(["--recover", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bread: ") and err.endswith("; nothing recovered\n")
    assert "\x1b" not in err


def test_recover_of_a_log_in_no_directory_says_so_and_exits_2(tmp_path, capsys):
    # Proves: a log whose directory is not there (a typo, an unmounted volume) is no log
    # with nothing to recover: exit 2, saying which directory. Before: "cannot open", the
    # OSError's text.
    path = str(tmp_path / "nothing" / "app.blog")
    assert cli.main(["--recover", path]) == 2
    assert capsys.readouterr().err == (f"bread: no directory {tmp_path / 'nothing'} (of "
                                       f"{path}); nothing recovered\n")
