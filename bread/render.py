"""Events -> text: bread's ``-f`` and ``-d`` placeholders, colours and escaping.

Defined in ``blogformat.pretty``, which the writer's ``blog.TextStream`` shares; the
names stay importable from here.
"""

from blogformat.pretty import (BACKTRACE_MARK, BIDI_FORMATS, DEFAULT_DATE_FORMAT,  # noqa: F401
                               DEFAULT_FORMAT, PROCESS_TEXT, SOURCE_TEXT, TEXT_VERSION,
                               DateFormat, PrettyPrinter, colors, escape_controls,
                               exception_text, field_name, fields_text, severity_text)

__all__ = ["BACKTRACE_MARK", "BIDI_FORMATS", "DEFAULT_DATE_FORMAT", "DEFAULT_FORMAT",
           "PROCESS_TEXT", "SOURCE_TEXT", "TEXT_VERSION", "DateFormat", "PrettyPrinter",
           "colors", "escape_controls", "exception_text", "field_name", "fields_text",
           "severity_text"]
