"""Call sites: checking a format string against its call before its EventSource is registered.

The EventSource itself (what is written once per call site) is a format
entry: ``blogformat.entries.EventSource``.
"""

from __future__ import annotations

from types import CodeType

from blogformat.entries import MAX_METADATA_TEXT, MAX_SOURCE_ID
from blogformat.lazy import pattern
from blogformat.placeholders import Template, parse

from ..errors import CallSiteError, FormatError, TooManySources  # noqa: F401  (re-exported)


#: Sources of one session for call sites; OVERFLOW_SOURCES more are kept for the call
#: sites that come after (docs/format.md 9.1: a stream holds at most MAX_SOURCE_ID).
OVERFLOW_SOURCES = 64
MAX_SOURCES = MAX_SOURCE_ID - OVERFLOW_SOURCES
#: The text of a session's sources: half of what a stream holds, the rest for writers.
MAX_SOURCE_TEXT = MAX_METADATA_TEXT // 2


def describe(code: CodeType | None, lineno: int) -> str:
    """``file:line (function)`` for error messages."""
    if code is None:
        return f"line {lineno}"
    return f"{code.co_filename}:{lineno} ({code.co_qualname})"


#: The format of a source whose message is rendered at call time: a call site that logs
#: more distinct format strings than a logger keeps (an f-string passed as the format), or
#: one past MAX_SOURCES (``Registry.overflow_source``).
DYNAMIC_FORMAT = "{}"

#: The longest format string a call site may have, in characters: kept whole up to this,
#: refused beyond it (a metadata entry always fits in a frame).
MAX_FORMAT = 1 << 20


#: What follows the text of a format that does not fit its call, logged as text (``unfit``).
UNFIT_MARK = " [format does not fit the call]"


def unfit(fmt: str, positional: int) -> str | None:
    """The format of a source for a call whose format ``fmt`` does not fit it: ``fmt`` as
    text (its braces escaped), marked, then the call's positional arguments by ``repr``
    (its keyword fields stay fields). None if that would be longer than MAX_FORMAT."""
    text = fmt.replace("{", "{{").replace("}", "}}")
    if positional:
        text += UNFIT_MARK[:-1] + ": " + ", ".join(["{!r}"] * positional) + "]"
    else:
        text += UNFIT_MARK
    return text if len(text) <= MAX_FORMAT else None


#: A printf-style conversion (``%s``, ``%d``, ``%(name)s``, ``%.2f``): a format that has one
#: and fewer ``{}`` than the call's arguments was most likely written for ``logging``
#: (compiled when such a call is met).
_PRINTF = r"%(?:\([^)]*\))?[-#0+]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[sdifrxXeEgGcoa]"


def check_template(fmt: str, positional: int, fields: tuple[str, ...], where: str) -> Template:
    """Parse ``fmt`` and check it against the call's arguments; raise CallSiteError naming
    ``where``."""
    if len(fmt) > MAX_FORMAT:
        raise CallSiteError(f"{where}: a format string of {len(fmt):,} characters is longer "
                            f"than the limit of {MAX_FORMAT:,}")
    try:
        tpl = parse(fmt)
    except FormatError as exc:
        raise CallSiteError(f"{where}: {exc}") from None
    if tpl.positional != positional:
        hint = (" (it looks printf-style, as logging's: blog's formats use {} placeholders, "
                "e.g. log.info(\"user {}\", name))"
                if tpl.positional < positional and pattern(_PRINTF).search(fmt) else "")
        raise CallSiteError(
            f"{where}: format {fmt!r} has {tpl.positional} {{}} placeholder(s) "
            f"but the call passes {positional} positional argument(s){hint}")
    missing = tpl.names.difference(fields)
    if missing:
        raise CallSiteError(
            f"{where}: format {fmt!r} names field(s) {', '.join(sorted(missing))} "
            "that the call does not pass")
    return tpl
