"""What several test files share: the way to start a child Python, sample types, and logs
written and read back. Imported by the tests as ``helpers`` (pytest puts tests/ on the path)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import blog
from bread import cli

#: The first program of every child: SIGINT and SIGTERM back to their default actions, then
#: exec of the child proper, which starts as it would from a shell (Python then installs its
#: own SIGINT handler). An ignored signal stays ignored across fork and exec, and the test
#: runner's may be (a shell's background job ignores SIGINT); a preexec_fn would instead run
#: the at-fork hooks of blog in the runner and in the child.
_FRESH_SIGNALS = ("import os, signal, sys\n"
                  "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
                  "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


def python_child(*args: str) -> list[str]:
    """The command line of a child Python run with ``args`` (``"-c", code`` or ``"-m",
    "bread", ...``), whose SIGINT and SIGTERM do what they do in a program started from a
    shell, whatever the test runner's dispositions (its pid is the child's: exec keeps it)."""
    return [sys.executable, "-S", "-c", _FRESH_SIGNALS, *args]


def fresh_signals() -> None:
    """In a child forked without exec: SIGINT and SIGTERM back to their default actions."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_python(code: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) in a child Python, in ``cwd``; its output as text."""
    return subprocess.run(python_child("-c", textwrap.dedent(code)), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# --- sample types: subclasses of int, float and str with text of their own ----------------


class Text(str):
    """A str whose str and repr are its own (``logging`` and ``{!r}`` show those, not its
    value; the C encoder leaves it to Python)."""

    def __str__(self) -> str:
        return "custom-str"

    def __repr__(self) -> str:
        return "custom-repr"


class Count(int):
    def __str__(self) -> str:
        return "custom-int"

    def __repr__(self) -> str:
        return "Count()"


class Ratio(float):
    def __repr__(self) -> str:
        return "Ratio()"


# --- logs written and read back ---------------------------------------------------------


def write_log(path, n: int = 50, tag: str = "a") -> bytes:
    """``n`` events "event {i} of {tag}" of a private session, consumed every ten; written
    to ``path`` too unless it is None."""
    s = blog.Session()
    log = s.get_logger("main")
    out = blog.MemoryOutputStream()
    for i in range(n):
        log.info("event {} of {}", i, tag)
        if i % 10 == 9:
            s.consume(out)
    s.consume(out)
    data = out.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """``bread`` run in this process: its exit code, stdout and stderr."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def abandon(cb) -> None:
    """A ``blog.files.crashbuf.CrashBuffer`` as if its process died: its lock goes, its files
    stay (what a recovery then finds). Reaches into its state: there is no public way to
    die."""
    import os
    for slot in cb._slots.values():
        slot.map.flush()
    cb.closed = True
    cb._words.release()
    cb._ctl.close()           # (an mmap holds a descriptor of its own: the lock with it)
    os.close(cb._fd)
