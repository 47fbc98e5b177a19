"""What several test files share: the way to start a child Python, sample types, and logs
written and read back. Imported by the tests as ``helpers`` (pytest puts tests/ on the path)."""

from __future__ import annotations

import sys

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
