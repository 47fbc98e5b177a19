"""bread -F: a live file followed as tail -F does, across rotation and truncation."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

import blog

from helpers import python_child


class Writer:
    """A session appending to a path; ``rotate`` / ``truncate`` as a log rotation would."""

    def __init__(self, path) -> None:
        self.path = path
        self.session = blog.Session()
        self.log = self.session.get_logger("main")
        self.stream = blog.FileOutputStream(path)

    def write(self, *msgs: str) -> None:
        for m in msgs:
            self.log.info("{}", m)
        self.session.consume(self.stream)

    def reopen(self) -> None:
        self.stream.close()
        self.stream = blog.FileOutputStream(self.path)   # a new stream: header, metadata again


def lines_of(proc, n: int, timeout: float = 20) -> list[str]:
    out: list[str] = []
    deadline = time.time() + timeout
    buf = b""
    while len(out) < n and time.time() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            out += [d.decode() for d in done]
    return out


def start(path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(python_child("-m", "bread", "-F", "-f", "%m", *args, str(path)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_follow_across_rotation_and_truncation_then_ctrl_c(tmp_path):
    path = tmp_path / "app.blog"
    w = Writer(path)
    w.write("one", "two")
    p = start(path)
    try:
        assert lines_of(p, 2) == ["one", "two"]
        w.write("three")                                   # as the consumer writes
        assert lines_of(p, 1) == ["three"]
        os.rename(path, tmp_path / "app.1.blog")           # rotation: a new file at the path
        w.write("four")                                    # still the old file, then:
        w.reopen()
        w.write("five")
        assert lines_of(p, 2) == ["four", "five"]
        os.truncate(path, 0)                               # copytruncate
        w.reopen()
        w.write("six")
        assert lines_of(p, 1) == ["six"]
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
        assert b"Traceback" not in err
    finally:
        p.kill()
        p.wait()


def test_follow_into_a_closed_pipe_ends_quietly(tmp_path):
    path = tmp_path / "app.blog"
    w = Writer(path)
    w.write(*[f"m{i}" for i in range(5)])
    p = start(path)
    try:
        assert lines_of(p, 5)[:2] == ["m0", "m1"]
        p.stdout.close()                                   # `bread -F x | head -n 2`
        for i in range(50):
            w.write(f"more {i}" * 100)
            if p.poll() is not None:
                break
            time.sleep(0.1)
        p.wait(timeout=20)
        assert p.returncode == 0
        assert b"Traceback" not in p.stderr.read()
    finally:
        p.kill()
        p.wait()


def test_follow_takes_one_file(tmp_path, capsys):
    from bread import cli
    assert cli.main(["-F", str(tmp_path / "a"), str(tmp_path / "b")]) == cli.EXIT_USAGE
    assert cli.main(["-F", "-s", str(tmp_path / "a")]) == cli.EXIT_USAGE
    assert "-F/--follow takes one file" in capsys.readouterr().err


def test_following_a_file_that_is_not_blog_says_so(tmp_path):
    # Proves (issue 26): bread -F notes.txt says it is not a blog file, exit 2, at once
    # (following, the reader would wait for more bytes).
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 100)
    r = subprocess.run(python_child("-m", "bread", "-F", str(notes)), capture_output=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode() == f"bread: {notes}: not a blog log file (its first 600 bytes " \
                                "hold no blog frame)\n"
