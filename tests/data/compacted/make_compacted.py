"""Write the columnar golden files (``tests/data/compacted/``): golden files of v1
compacted by ``bread compact --columnar`` (docs/format.md 5.5), one set per encoding:

- ``NAME.columnar.blog``: written on 2026-11-27, the clocks column by delta of delta
  (coding 1), before any change of the encoding;
- ``NAME.columnar-deltas.blog``: written on 2026-11-27 since, the clocks column as their
  deltas less the frame's median delta (coding 8).

This script was run by hand, once per encoding, and its outputs are committed; it
writes only the missing files of the current encoding (``ENCODING``):

    python tests/data/compacted/make_compacted.py

NEVER regenerate or edit them: they are the proof that bread still reads the columnar
frames of each encoding (``tests/test_compact_golden.py`` reads them and compares their
events with those of the v1 originals). A later encoding gets files of its own here.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))

from bread.compact.compactor import Compactor  # noqa: E402

NAMES = ["every_type", "two_writers", "described", "exceptions"]
#: The suffix of the files the current encoder writes.
ENCODING = "columnar-deltas"


def main() -> None:
    for name in NAMES:
        out_path = os.path.join(HERE, f"{name}.{ENCODING}.blog")
        if os.path.exists(out_path):
            continue
        c = Compactor(HERE)
        c.add_file(os.path.join(HERE, "..", "v1", f"{name}.blog"))
        with open(out_path, "wb") as out:
            c.write(out, [f"{name}.blog"], columnar=True)


if __name__ == "__main__":
    main()
