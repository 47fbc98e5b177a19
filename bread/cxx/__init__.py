"""C++ binlog files (Morgan Stanley's binlog), read as its own ``bread`` reads them.

In layers, as the blog reader: ``entries`` (bytes -> the u32-size-prefixed entries:
EventSource, WriterProp, ClockSync, raw events), ``values`` (an event's arguments in
mserialize's encoding -> Python objects, driven by the argument tags), ``render``
(values and events -> the C++ bread's text), ``events`` (entries -> ``bread.Event``),
``text`` (what ``bread`` prints for a C++ file). ``docs/format.md`` ("C++ binlog
files, as read") says what is read and where the C++ bread's output is matched as is.
"""
