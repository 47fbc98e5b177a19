"""Format strings: ``{}`` positional and ``{name}`` keyword placeholders, and the
printf-style (``%s``, ``%(name)d``) formats of the stdlib ``logging`` records.

The writer parses a format string once, when its EventSource is registered,
and rejects what the reader could not render safely. The reader parses the
same string (taken from an untrusted file) with the same code and renders it
without attribute or index lookups and with bounded widths. An EventSource's
``style`` says which syntax its format uses (docs/format.md 8.4).
"""

from __future__ import annotations

import _string  # the C parser behind str.format

from blogformat.typinglite import TYPE_CHECKING
from blogformat.errors import FormatError
from blogformat.lazy import loaded, pattern
from blogformat.guard import owned_by_value
from blogformat.plainclass import Frozen

if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

#: Largest width or precision rendered; a bigger one in a file is treated as damage.
MAX_WIDTH = 10_000
#: Longest message rendered, in characters: the rest is cut and CUT_MARK appended
#: (docs/format.md 8). A file cannot make one event render more.
MAX_MESSAGE = 1 << 20
CUT_MARK = f"[... cut: message longer than {MAX_MESSAGE} characters]"

#: EventSource styles: ``{}`` placeholders (section 8.1), printf-style as ``logging``
#: renders a record with arguments (8.4), and a format that is the message itself.
STYLE_BRACES = ""
STYLE_PRINTF = "%"
STYLE_LITERAL = "literal"
#: One printf conversion: an optional (key), flags, width, precision, length modifier
#: and the conversion character; ``*`` widths are not accepted. (Regular expressions are
#: compiled on first use: a first log call of ``{}`` placeholders needs neither.)
_PRINTF = (r"%(?:\((?P<key>[^()]*)\))?"
           r"(?P<spec>[#0 +\-]*[0-9]*(?:\.[0-9]*)?[hlL]?[diouxXeEfFgGcrsa%])")
#: printf conversions that turn their value into an int.
_PRINTF_INTS = ("d", "i", "o", "u", "x", "X", "c")


class Placeholder(Frozen):
    """One replacement field: ``key`` is the positional index (int) or the field name (str)."""

    key: int | str
    conversion: str | None
    spec: str


class Template(Frozen):
    """A parsed format string: literal texts interleaved with placeholders."""

    literals: tuple[str, ...]          # len(literals) == len(placeholders) + 1
    placeholders: tuple[Placeholder, ...]
    positional: int                    # how many ``{}``
    names: frozenset[str]              # names used by ``{name}``


def parse(fmt: str) -> Template:
    """Parse ``fmt``; raise FormatError for lookups, numbered or nested fields."""
    _check_str(fmt)
    literals: list[str] = []
    placeholders: list[Placeholder] = []
    text = ""
    positional = 0
    try:
        parts = list(_string.formatter_parser(fmt))
    except ValueError as exc:
        raise FormatError(f"bad format string {fmt!r}: {exc}") from None
    for literal, field, spec, conversion in parts:
        text += literal
        if field is None:
            continue
        if "{" in spec or "}" in spec:
            raise FormatError(f"nested replacement field in {fmt!r} is not supported")
        if conversion not in (None, "r", "s", "a"):
            raise FormatError(f"bad conversion !{conversion} in {fmt!r}")
        if field == "":
            key: int | str = positional
            positional += 1
        elif field.isidentifier():
            key = field
        elif "." in field or "[" in field:
            raise FormatError(
                f"attribute or index lookup {{{field}}} in {fmt!r} is not supported: "
                "log the value itself")
        else:
            raise FormatError(
                f"placeholder {{{field}}} in {fmt!r} is not supported: "
                "use {} for positional arguments or {name} for keyword fields")
        literals.append(text)
        text = ""
        placeholders.append(Placeholder(key, conversion, spec or ""))
    literals.append(text)
    return _template(literals, placeholders, positional)


def _check_str(fmt: Any) -> None:
    if not isinstance(fmt, str):
        raise FormatError(f"format must be a str, not {type(fmt).__name__}")


def _template(literals: list[str], placeholders: list[Placeholder],
              positional: int) -> Template:
    names = frozenset(p.key for p in placeholders if isinstance(p.key, str))
    return Template(tuple(literals), tuple(placeholders), positional, names)


def parse_printf(fmt: str) -> Template:
    """Parse a printf-style format (``"user %s took %.1f ms"``, ``"%(user)s"``).

    Each conversion becomes a placeholder of conversion ``"%"`` whose spec is what
    follows the ``%`` (and the key): ``"s"``, ``".1f"``. Raise FormatError for what
    ``str % args`` would reject, for ``*`` widths and for keyed and unkeyed
    conversions mixed.
    """
    _check_str(fmt)
    literals: list[str] = []
    placeholders: list[Placeholder] = []
    text, positional, pos = "", 0, 0
    for m in pattern(_PRINTF).finditer(fmt):
        between = fmt[pos:m.start()]
        if "%" in between:
            raise FormatError(f"bad printf conversion at index {pos + between.index('%')} "
                              f"of {fmt!r}")
        text += between
        pos = m.end()
        key, spec = m.group("key"), m.group("spec")
        if spec == "%" and key is None:
            text += "%"
            continue
        if spec[-1] == "%":
            raise FormatError(f"bad printf conversion {m.group()!r} in {fmt!r}")
        if key is None:
            placeholders.append(Placeholder(positional, "%", spec))
            positional += 1
        else:
            placeholders.append(Placeholder(key, "%", spec))
        literals.append(text)
        text = ""
    if "%" in fmt[pos:]:
        raise FormatError(f"bad printf conversion at index {fmt.index('%', pos)} of {fmt!r}")
    literals.append(text + fmt[pos:])
    tpl = _template(literals, placeholders, positional)
    if tpl.names and positional:
        raise FormatError(f"keyed and unkeyed conversions mixed in {fmt!r}")
    return tpl


def parse_style(fmt: str, style: str) -> Template:
    """Parse an EventSource's format by its ``style``; FormatError for an unknown style."""
    if style == STYLE_BRACES:
        return parse(fmt)
    if style == STYLE_PRINTF:
        return parse_printf(fmt)
    if style == STYLE_LITERAL:
        _check_str(fmt)
        return Template((fmt,), (), 0, frozenset())
    raise FormatError(f"unknown format style {style[:20]!r}")


def render_one(value: Any, conversion: str | None, spec: str) -> str:
    """Render one value as ``"{!conv:spec}".format(value)`` would; conversion ``"%"``:
    as ``("%" + spec) % (value,)``."""
    if conversion == "%":
        return ("%" + spec) % (value,)
    if conversion == "r":
        value = repr(value)
    elif conversion == "s":
        value = str(value)
    elif conversion == "a":
        value = ascii(value)
    return format(value, spec)


#: printf's text conversions as str.format's.
_PRINTF_TEXT = {"s": None, "r": "r", "a": "a"}


#: ``blogformat.boundedtext``, imported with the first decoded value rendered: the writer,
#: which renders only live values, never loads it (nor ``dataclasses``, which it needs).
_bounded: Any = None


#: Values never composite (``boundedtext.is_composite``): rendering them needs no boundedtext.
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def _boundedtext() -> Any:
    global _bounded
    from blogformat import boundedtext
    _bounded = boundedtext
    return boundedtext


def _too_wide(spec: str) -> bool:
    """Whether a number in ``spec`` (a run of decimal digits, ``re``'s ``\\d+``) is over
    MAX_WIDTH. (No ``re``: a first call may come from a finalizer at interpreter shutdown,
    when nothing can be imported.)"""
    digits = ""
    for c in spec + " ":
        if c.isdecimal():
            digits += c
            if len(digits) > 5:
                return True
        elif digits:
            if int(digits) > MAX_WIDTH:
                return True
            digits = ""
    return False


def render_safe(value: Any, conversion: str | None, spec: str, *, decoded: bool = False) -> str:
    """``render_one`` for untrusted input: bounded output, errors rendered as text.

    ``decoded``: the value was read from a file; the text of a container or record stops
    being made once it passes MAX_MESSAGE (``boundedtext``). (A live value's, at call
    time, is Python's own repr: cycles shown as ``[...]``, at C speed.)"""
    if spec and _too_wide(spec):
        return f"{{!bad spec {spec[:20]!r}}}"
    try:   # type(), never isinstance(): a value's own __class__ may raise
        decimal = loaded("decimal", "Decimal")   # (no Decimal exists before it is loaded)
        if (decimal is not None and issubclass(type(value), decimal)
                and value.is_finite()
                and abs(value.adjusted()) > MAX_WIDTH
                and ((conversion is None and spec[-1:] in ("f", "F", "%", "n", ""))
                     or (conversion == "%" and spec[-1:] in _PRINTF_INTS))):
            # Fixed-point notation of 1E+999999999 would be a billion digits (and printf's
            # %d of it a billion-digit int).
            return f"{{!decimal exponent {value.adjusted()} too large for {spec[-1:] or 'str'}}}" \
                if spec else str(value)
        bt = (_bounded or _boundedtext()) if decoded and type(value) not in _SCALARS else None
        if bt is not None and bt.is_composite(value):   # its text stops at the message's cut
            if conversion == "%":
                if spec[-1:] in ("s", "r", "a"):
                    text = bt.bounded_text(value, _PRINTF_TEXT[spec[-1]], MAX_MESSAGE)
                    return ("%" + spec[:-1] + "s") % (text,)
            elif conversion is not None:
                return format(bt.bounded_text(value, conversion, MAX_MESSAGE), spec)
            elif not spec:
                return bt.bounded_text(value, None, MAX_MESSAGE)
        return render_one(value, conversion, spec)
    except Exception as exc:
        if not owned_by_value(exc):
            raise
        try:
            return f"{{!{type(exc).__name__}: {exc}}}"
        except Exception as inner:
            if not owned_by_value(inner):
                raise
            return f"{{!{type(exc).__name__}}}"


def render(tpl: Template, args: Sequence[Any], fields: Mapping[str, Any],
           texts: Mapping[int, str] | None = None, *, decoded: bool = False) -> str:
    """Render a template; ``texts`` maps placeholder index to text captured at call time.

    At most MAX_MESSAGE characters, then CUT_MARK: rendering stops there. ``decoded``:
    the values were read from a file (``render_safe``).
    """
    lit = tpl.literals[0]
    out = [lit]
    size = len(lit)
    for i, ph in enumerate(tpl.placeholders):
        if size > MAX_MESSAGE:
            break
        if texts and i in texts:
            text = texts[i]
            if type(text) is not str:   # a crafted file's: rendered safely like a value
                text = render_safe(text, None, "", decoded=decoded)
        else:
            key = ph.key
            if isinstance(key, int):
                value = args[key] if key < len(args) else "{!missing argument}"
            else:
                value = fields.get(key, f"{{!missing field {key}}}")
            text = render_safe(value, ph.conversion, ph.spec, decoded=decoded)
        lit = tpl.literals[i + 1]
        out.append(text)
        out.append(lit)
        size += len(text) + len(lit)
    if size > MAX_MESSAGE:
        return "".join(out)[:MAX_MESSAGE] + CUT_MARK
    return "".join(out)
