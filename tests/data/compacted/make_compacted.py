"""Write the columnar golden files (``tests/data/compacted/``): golden files of v1
compacted by ``bread compact --columnar`` as it wrote columnar frames (docs/format.md 5.5)
on 2026-11-27, before any change of their encoding.

This script was run ONCE, by hand, and its outputs are committed:

    python tests/data/compacted/make_compacted.py

NEVER regenerate or edit them: they are the proof that bread still reads the columnar
frames of that day (``tests/test_compact_golden.py`` reads them and compares their
events with those of the v1 originals). A later encoding gets files of its own here.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))

from bread.compact.compactor import Compactor  # noqa: E402

NAMES = ["every_type", "two_writers", "described", "exceptions"]


def main() -> None:
    for name in NAMES:
        out_path = os.path.join(HERE, f"{name}.columnar.blog")
        if os.path.exists(out_path):
            continue
        c = Compactor(HERE)
        c.add_file(os.path.join(HERE, "..", "v1", f"{name}.blog"))
        with open(out_path, "wb") as out:
            c.write(out, [f"{name}.blog"], columnar=True)


if __name__ == "__main__":
    main()
