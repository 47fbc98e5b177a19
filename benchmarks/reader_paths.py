"""The paths a newcomer follows through the reader, counted: the files each visits, its hops
between files, and how many of those hops go back into a file already visited.

    python benchmarks/reader_paths.py [--pure]

Three paths (docs/architecture.md records their counts): ``bread file.blog`` from argv
to standard output, ``bread -o jsonl file.blog``, and Spark's load of a file (the data
source's planning on the driver, then one task's read, called in this process: pyspark's
own code is not ours to count; needs the ``spark`` extra, else left out).

How a path is read, as a newcomer reads it: each function of the packages the first
time it is called (a function met again is already read), in the order of the calls; a
hop is such a call from one file into another (calls from one file into another one
after the other are one hop), and it goes back into a file already visited if that file
was read before. What runs while a module is imported is not counted, nor the standard
library and pyarrow (a call through them is counted from the project's code that made
it). The C
extensions are not Python frames: the C path (the default) counts what a user's run
reads in Python; ``--pure`` the pure-Python path (BREAD_PURE_PYTHON=1), in a child.
"""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGES = tuple(str(ROOT / p) + os.sep for p in ("bread", "blogformat", "blogstore"))


def _ours(frame: Any) -> str | None:
    """The file of ``frame`` relative to the root if it is a module of the packages."""
    f = frame.f_code.co_filename
    return os.path.relpath(f, ROOT) if f.startswith(PACKAGES) else None


def trace(run: Callable[[], object]) -> list[tuple[str | None, str]]:
    """The hops ``run`` makes: each first call of a function of the packages from another
    file (or from outside them), as (the caller's file, the callee's), in order."""
    seen: set[Any] = set()
    hops: list[tuple[str | None, str]] = []
    base = sys._getframe()

    def caller(frame: Any) -> str | None:
        f = frame.f_back
        while f is not None and f is not base and _ours(f) is None:
            f = f.f_back
        return None if f is None or f is base else _ours(f)

    def importing(frame: Any) -> bool:
        f = frame
        while f is not None and f is not base:
            if f.f_code.co_name == "<module>":
                return True
            f = f.f_back
        return False

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = _ours(frame)
        if here is None or frame.f_code in seen or importing(frame):
            return
        seen.add(frame.f_code)
        came = caller(frame)
        if came != here:
            hops.append((came, here))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return hops


def counts(hops: list[tuple[str | None, str]]) -> tuple[int, int, int]:
    """(files visited, hops between them, hops into a file already visited). Calls from one
    file into another, one after the other, are one hop: read once, from one place."""
    visited: set[str] = set()
    back = n = 0
    last: tuple[str | None, str] | None = None
    for came, here in hops:
        if came is not None:
            visited.add(came)
        if (came, here) != last and came is not None:
            n += 1
            back += here in visited
        last = (came, here)
        visited.add(here)
    return len(visited), n, back


def _file(directory: str) -> str:
    """A small blog file of a few events, made by the writer (in a child: the writer's
    modules are not the reader's to count)."""
    out = os.path.join(directory, "app.blog")
    code = ("import sys, blog; s = blog.Session(); log = s.get_logger('app')\n"
            "for i in range(3): log.info('event {} of {}', i, 'three', user='ann')\n"
            f"s.consume(open({out!r}, 'wb'))\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return out


def _cli(argv: list[str]) -> Callable[[], object]:
    def run() -> object:
        from bread import cli
        stdout = sys.stdout
        sys.stdout = io.TextIOWrapper(io.BytesIO())
        try:
            return cli.main(argv)
        finally:
            sys.stdout = stdout
    return run


def _spark(path: str) -> Callable[[], object] | None:
    try:
        import pyspark.sql.datasource  # noqa: F401
        import pyspark.sql.types as t
    except ImportError:
        return None

    def run() -> object:
        from bread.spark import SCHEMA, BlogDataSource
        kinds = {"TIMESTAMP": t.TimestampType(), "BIGINT": t.LongType(),
                 "STRING": t.StringType()}
        schema = t.StructType([t.StructField(c.split()[0], kinds[c.split()[1]])
                               for c in SCHEMA.split(", ")])
        reader = BlogDataSource({"path": path}).reader(schema)
        return [b.num_rows for part in reader.partitions() for b in reader.read(part)]
    return run


def main() -> None:
    if "--pure" in sys.argv and not os.environ.get("BREAD_PURE_PYTHON"):
        env = dict(os.environ, BREAD_PURE_PYTHON="1", BLOG_PURE_PYTHON="1")
        sys.exit(subprocess.run([sys.executable, __file__], env=env).returncode)
    with tempfile.TemporaryDirectory() as d:
        path = _file(d)
        import bread.cli  # noqa: F401  (imported before: what importing runs is not counted)
        runs = {"bread FILE": _cli([path]), "bread -o jsonl FILE": _cli(["-o", "jsonl", path]),
                "Spark's load": _spark(path)}
        print("pure-Python path" if os.environ.get("BREAD_PURE_PYTHON") else "C path")
        for what, run in runs.items():
            if run is None:
                print(f"{what}: left out (no pyspark)")
                continue
            run()   # once before: the lazy imports it makes are not counted
            found = trace(run)
            files, hops, back = counts(found)
            print(f"{what}: {files} files, {hops} hops, {back} into a file already visited")
            if "-v" in sys.argv:
                for came, here in found:
                    print(f"  {came} -> {here}")


if __name__ == "__main__":
    main()
