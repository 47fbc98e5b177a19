"""Decoding: an input's entries -> what a sink makes of them, the C fast path where it can.

``decoder`` (one ``Decoder`` per input: the metadata applied to its ``EventStream`` and to
the C Renderer's tables, each events frame to C, the rest to Python; ``Sink`` and
``Native``, what a sink is to it), ``filters`` (which events are kept, applied before
anything is made of them). The Renderer is C: ``_native.c`` (its tables and calls, twin
of ``decoder``), ``_decode.c`` (the walk over a frame, twin of
``blogformat.entries.decode_events`` and ``filters``), ``_message.h`` (messages and
values as text), ``_extension.h`` (what the extension's files share, bread/sinks' too)
and ``_speedups.c`` (the module, ``bread._speedups``).
"""
