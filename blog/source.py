"""EventSource: the static description of a call site, registered once."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import CodeType

from .format import ENTRY_EVENT_SOURCE
from .placeholders import FormatError, Template, parse


@dataclass
class EventSource:
    """Severity, category, function, file, line, format and argument tags of a call site.

    Events carry only the source's ``id``; everything else is written once as
    metadata. ``field_names`` are the keyword fields that follow the
    ``positional`` arguments in every event of this source.
    """

    id: int
    severity: int
    category: str
    function: str
    file: str
    line: int
    format: str
    arg_tags: str
    field_names: tuple[str, ...] = ()
    positional: int = 0
    template: Template | None = field(default=None, repr=False, compare=False)

    def entry(self) -> list:
        """The metadata entry array written to the file."""
        return [ENTRY_EVENT_SOURCE, self.id, int(self.severity), self.category, self.function,
                self.file, self.line, self.format, self.arg_tags, list(self.field_names),
                self.positional]


class CallSiteError(FormatError):
    """A format string that does not fit the arguments of its call site."""


def describe(code: CodeType | None, lineno: int) -> str:
    """``file:line (function)`` for error messages."""
    if code is None:
        return f"line {lineno}"
    return f"{code.co_filename}:{lineno} ({code.co_qualname})"


def check_template(fmt: str, positional: int, fields: tuple[str, ...], where: str) -> Template:
    """Parse ``fmt`` and check it against the call's arguments; raise CallSiteError naming ``where``."""
    try:
        tpl = parse(fmt)
    except FormatError as exc:
        raise CallSiteError(f"{where}: {exc}") from None
    if tpl.positional != positional:
        raise CallSiteError(
            f"{where}: format {fmt!r} has {tpl.positional} {{}} placeholder(s) "
            f"but the call passes {positional} positional argument(s)")
    missing = tpl.names.difference(fields)
    if missing:
        raise CallSiteError(
            f"{where}: format {fmt!r} names field(s) {', '.join(sorted(missing))} "
            "that the call does not pass")
    return tpl
