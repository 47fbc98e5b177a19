"""Sinks: what becomes of the events of an input (``bread.decode.decoder.Sink``).

``lines`` (text lines, what ``bread`` prints), ``events`` (Event objects, what
``bread.read`` gives), ``batches`` (columns, ``bread.read_batches`` and Spark),
``typed`` (the typed table of one call site, or its columns' kinds, with ``tables``),
``rows`` (JSON lines and CSV rows, ``bread -o jsonl`` and ``-o csv``) and ``json``
(values as JSON, and an event as a JSON object or a CSV row). Each is
made by Python from Events; its C side (``bread.decode.decoder.Native``) makes the same of
whole frames where the extension is built. The merge wraps any of them
(``bread.merge.keyed.Keyed``).
"""
