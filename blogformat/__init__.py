"""blogformat: the bytes of a blog file, defined once for the writer and the reader.

``blog`` (the writer) and ``bread`` (the reader) both import this package, which is
internal to them (its errors are public as ``blog.errors`` and ``bread.errors``); it
imports neither, so a reader process loads none of the writer, nor
``blogstore`` (the files of a log on disk), which is built on it. Modules,
each pointed to by a section of ``docs/format.md``:

- ``frames``: the 20-byte checked frame header (section 2);
- ``entries``: the header, metadata entries, batch header and events, with an
  encode and a decode per kind (sections 3 to 5);
- ``values``: the extension codes of argument values, the msgpack options of the
  format, and what encoding and decoding share (section 7);
- ``valueencoding``: a value to its msgpack, the classes it has learnt (section 7);
- ``valuedecoding``: msgpack back to a value, within bounds (section 7);
- ``valueclasses``: the classes of the values a reader decodes (section 7);
- ``valuetypes``: value types described once per stream (sections 4.8, 4.9);
- ``placeholders``: format strings, parsed and rendered safely (section 8);
- ``severity``: the severity values (section 4.1);
- ``guard``: which exceptions a guard around a value's methods may catch;
- ``eventview``: an event's names from its call site and writer (``severity``,
  ``category``, ``file``...), the base of ``bread.Event`` and ``blog.LiveEvent``;
- ``pretty``: events as text lines, bread's ``-f``/``-d`` placeholders (bread prints
  with it, and blog's TextStream);
- ``lazy``: the packages' public names imported on first use (start-up), and regular
  expressions compiled on first use;
- ``typinglite``: what the start-up modules use of ``typing`` at run time, without
  importing it;
- ``plainclass``: the base of the entry classes and other records of fields, compared,
  shown and hashed as a dataclass (without ``dataclasses``' cost at start-up);
- ``errors``: the errors of the format (``FormatError``, ``BadEntry``...).

``__version__`` is the distribution's (pyproject.toml's), which ``blog.__version__`` and
``bread.__version__`` name.
"""

#: The version of the distribution, blog and bread alike (pyproject.toml's:
#: tests/test_startup.py checks them equal).
__version__ = "0.1.0"

#: What a stream's header asks of the text its events are shown as (its descriptor's
#: ``text_version``, docs/format.md 3): from 2 on, their fields (``%K``) and their exceptions'
#: tracebacks. Streams that do not say (blog's before it, other producers') keep the text
#: they had.
TEXT_VERSION = 2
