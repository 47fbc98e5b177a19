"""A prefix of a paged store (S3, GCS) listed in a child process, bounded in keys, memory
and time: a server that answers each page with one more (a new continuation token each
time, or the same one again) would keep ``pyarrow.fs`` listing for ever, its memory
growing, and pyarrow gives no page to its caller nor a way to stop a listing once begun.

``listed`` runs this module's ``main`` (``python -c``, bread found where this file is)
and reads back at most ``max_keys`` entries; the child stops itself when its memory grows
past ``KEY_BYTES`` a key (the keys cannot be counted before pyarrow returns: the memory
they take is), and is killed past the time bound. The cost is a process start per listed
prefix (the file system is sent to it pickled, on its standard input: never on its
command line). ``BREAD_STORE_MAX_KEYS`` and ``BREAD_STORE_LIST_TIMEOUT`` set the bounds.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import subprocess
import sys
import threading
from typing import Any

from ..errors import ListingCut, OptionError

#: Keys a listing may give at most, and its seconds (a listing past them is cut).
MAX_KEYS = 1_000_000
LIST_TIMEOUT = 300
KEYS_VARIABLE = "BREAD_STORE_MAX_KEYS"
TIMEOUT_VARIABLE = "BREAD_STORE_LIST_TIMEOUT"
#: The child's memory allowed per key while pyarrow lists, at least ``MIN_BYTES`` in all
#: (pyarrow takes about 250 bytes a key of 30 characters).
KEY_BYTES = 1024
MIN_BYTES = 8 << 20
_POLL = 0.05


#: The child: bread's directory appended to its path only if it cannot import bread itself
#: (as ``blog.files.compaction``'s child).
_CHILD = ("import sys\ntry:\n import bread\nexcept ImportError:\n sys.path.append(sys.argv[1])\n"
          "from bread.inputs.lister import main; main()")


def bounds() -> tuple[int, int]:
    """(keys, seconds) of a listing: ``MAX_KEYS`` and ``LIST_TIMEOUT``, or the environment's
    (whole numbers, at least 1)."""
    out = []
    for name, default in ((KEYS_VARIABLE, MAX_KEYS), (TIMEOUT_VARIABLE, LIST_TIMEOUT)):
        text = os.environ.get(name)
        if text and (not text.strip().isdigit() or int(text) < 1):
            raise OptionError(f"{name} must be a whole number, at least 1, not {text!r}")
        out.append(int(text) if text else default)
    return out[0], out[1]


def listed(fs: Any, path: str, recursive: bool, url: str) -> list[tuple[str, str, int]]:
    """(path, type name, size) of each entry under ``path`` in ``fs`` (pyarrow's
    ``get_file_info(FileSelector(path, recursive=...))``), listed by a child; ListingCut
    naming ``url`` past the bounds, OSError naming it if the store fails."""
    keys, seconds = bounds()
    child = subprocess.Popen(     # -P: no working directory on the path (a bread/ there
        [sys.executable, "-P", "-c", _CHILD,   # is not run), the standard library first
         os.path.dirname(os.path.dirname(os.path.abspath(__file__)))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = child.communicate(pickle.dumps((fs, path, recursive, keys)), timeout=seconds)
    except subprocess.TimeoutExpired:
        raise ListingCut(errno.ETIMEDOUT, f"the listing did not end within {seconds} s "
                         f"({TIMEOUT_VARIABLE})", url) from None
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    lines = out.splitlines()
    try:
        end = json.loads(lines[-1]) if lines else {}
        entries = [tuple(json.loads(line)) for line in lines[:-1]]
    except ValueError:
        end = {}
    if "cut" in end:
        raise ListingCut(errno.EFBIG, f"the listing did not end: more than {keys} keys"
                         f"{end['cut']} ({KEYS_VARIABLE})", url)
    if "error" in end:
        raise OSError(errno.EIO, str(end["error"])[:300], url)
    if end.get("end") != len(entries):
        raise OSError(errno.EIO, f"the listing failed (its process ended with status "
                      f"{child.returncode})", url)
    return entries


def main() -> None:
    """The child: list what standard input says, write an entry a line (JSON), then the
    end, the cut or the error; stop past the memory of ``max_keys``."""
    fs, path, recursive, max_keys = pickle.load(sys.stdin.buffer)
    from pyarrow.fs import FileSelector
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(fs.get_file_info(FileSelector(path, recursive=recursive)))
        except OSError as exc:
            result.append(exc)

    allowed = _memory() + max(MIN_BYTES, max_keys * KEY_BYTES)
    lister = threading.Thread(target=run, daemon=True)
    lister.start()
    while lister.is_alive():
        lister.join(_POLL)
        if _memory() > allowed:
            _end({"cut": ", by the memory it took"})
    got = result[0]
    if isinstance(got, OSError):
        _end({"error": (str(got).splitlines() or ["error"])[0]})
    if len(got) > max_keys:
        _end({"cut": ""})
    out = sys.stdout
    for info in got:
        out.write(json.dumps([info.path, info.type.name, info.size or 0]) + "\n")
    _end({"end": len(got)})


def _end(last: dict) -> None:
    """The last line, then out at once (pyarrow's S3 may still be listing: never waited)."""
    sys.stdout.write(json.dumps(last) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _memory() -> int:
    """The process's most memory so far (bytes); 0 where it is not known."""
    try:
        import resource
    except ImportError:         # (not on Windows: the time bound alone)
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
