"""blogformat: the bytes of a blog file, defined once for the writer and the reader.

``blog`` (the writer) and ``bread`` (the reader) both import this package;
it imports neither, so a reader process loads none of the writer. Modules,
each pointed to by a section of ``docs/format.md``:

- ``frames``: the 20-byte checked frame header (section 2);
- ``entries``: the header, metadata entries, batch header and events, with an
  encode and a decode per kind (sections 3 to 5);
- ``values``: argument values and the msgpack options of the format (section 7);
- ``placeholders``: format strings, parsed and rendered safely (section 8);
- ``severity``: the severity values (section 4.1);
- ``guard``: which exceptions a guard around a value's methods may catch;
- ``pretty``: events as text lines, bread's ``-f``/``-d`` placeholders (bread prints
  with it, and blog's TextStream);
- ``lazy``: the packages' public names imported on first use (start-up).
- ``errors``: the errors of the format (``FormatError``, ``BadEntry``...).
"""
