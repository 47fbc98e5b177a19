"""``logging`` calls without a LogRecord: the bridge's fast path.

When every handler a ``logging.Logger`` call would reach is a ``BlogHandler`` without
filters or a ``logging.NullHandler`` (a library's: it does nothing with a record), and the
logger has no filter, nor a method logging would call set on it, is enabled, of logging's
own class, and logging would make a plain ``LogRecord``, the call goes to the BlogHandlers'
call sites as its record would, without making one: the same file, line and function (the
frame ``Logger.findCaller`` picks for ``stacklevel``), the same severity, ``extra``,
``exc_info`` and ``stack_info``.

``install`` (called by the first BlogHandler made) replaces ``logging.Logger._log`` by
blog's ``_log`` (``_disguised``), or by its C twin ``LoggingCall`` (``_stdlib.c`` beside this
module, chosen at the end of it). Both walk, at each call, what ``Logger.callHandlers``
would walk, so that a filter, another handler,
``propagate = False`` or ``disabled`` set at run time takes effect at the next call (levels
and ``logging.disable`` are ``isEnabledFor``'s, before ``_log``); any other call goes to the
``_log`` they replaced, unchanged. A logger class that overrides ``_log`` keeps its own, and
a ``Logger._log`` that is not logging's own when the first BlogHandler is made (a wrapper)
is left as it is: no fast path.
``session.stats.logging_fast_path`` and ``logging_record_path`` count the two paths.
A NullHandler still counts as a handler found: a call that reaches only NullHandlers does
nothing, and logging's ``lastResort`` is not used, as on the record path.

The C twin adds no frame. Blog's ``_log`` is one Python frame below the caller, made to be
seen as logging's own by whatever walks the stack: its code is compiled as logging's file,
at the line of logging's ``_log``, and it runs in logging's module globals. So
``Logger.findCaller`` skips it (``logging._is_internal_frame``), and so do the walkers that
skip logging's frames to find the application's: structlog's (a frame whose module's
``__name__`` starts with "logging"), loguru's ``InterceptHandler`` recipe (a frame whose
``co_filename`` is ``logging.__file__``).
"""

from __future__ import annotations

import ast
import io
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeGuard

from .accel import speedups

if TYPE_CHECKING:
    from . import _speedups

#: The methods of ``logging.Logger`` that find the caller, filter, make and hand the
#: record: the fast path is for a logger whose class has logging's own (``filter`` is
#: ``Filterer``'s, a base's) and that has none of its own (each is looked up on it first).
_METHODS = ("findCaller", "makeRecord", "handle", "callHandlers", "filter")
_METHOD_NAMES = frozenset(_METHODS)
_OWN = {name: getattr(logging.Logger, name) for name in _METHODS}
_PLAIN = (logging.Logger, logging.RootLogger)
#: What a record has before ``extra``: ``makeRecord`` refuses an ``extra`` key among them.
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_SRCFILE = getattr(logging, "_srcfile", None)
_is_internal_frame = getattr(logging, "_is_internal_frame", None)
#: ``logging.NullHandler``'s methods: its ``handle`` calls neither a filter nor ``emit``.
_NULL_OWN = {name: logging.NullHandler.__dict__.get(name) for name in ("handle", "emit")}

_original: Any = None                 # Logger._log as it was: the record path
_handler_type: Any = None             # blog.stdlib.BlogHandler (install sets it)
_fast: Any = None                     # what install put in Logger._log
_twin: Any = None                     # blog's _log in Python (_disguised): LoggingCall's twin


class CallRecord:
    """What a BlogHandler reads of a ``LogRecord``, for a call that made none: made as
    ``Logger.makeRecord`` makes a record (a lone non-empty mapping argument is the
    arguments; an ``extra`` key a record has raises KeyError)."""

    def __init__(self, name: str, level: int, pathname: str, lineno: int, func: str,
                 msg: Any, args: Any, exc_info: Any, extra: Any, stack_info: str | None
                 ) -> None:
        if args and len(args) == 1 and isinstance(args[0], Mapping) and args[0]:
            args = args[0]
        self.name = name
        self.msg = msg
        self.args = args
        self.levelno = level
        self.levelname = logging.getLevelName(level)
        self.pathname = pathname
        self.lineno = lineno
        self.funcName = func
        self.created = time.time()
        self.exc_info = exc_info
        self.stack_info = stack_info
        if extra is not None:
            d = self.__dict__
            for key in extra:
                if key in _RESERVED:
                    raise KeyError("Attempt to overwrite %r in LogRecord" % key)
                d[key] = extra[key]

    def getMessage(self) -> str:
        """The message as ``LogRecord.getMessage`` makes it."""
        msg = str(self.msg)
        if self.args:
            msg = msg % self.args
        return msg


def unchanged(cls: type) -> bool:
    """True if ``cls`` (a logger's) finds the caller, makes and hands records with logging's
    methods; for ``logging.NullHandler``: if it handles them with its own (doing nothing)."""
    own = _NULL_OWN if cls is _NULL else _OWN
    return all(getattr(cls, name, None) is own[name] for name in own)


def reached(logger: Any, level: int, stacklevel: Any = 1) -> list | None:
    """The BlogHandlers a call of ``logger`` at ``level`` reaches, as ``callHandlers`` walks
    them (empty: none at this level), if each handler on the way is a BlogHandler without
    filters or a NullHandler that does nothing (``_quiet``), the logger has no filter nor
    method of its own, ``stacklevel`` is an int of at least 1 and logging would make a
    plain record; None: the record path's."""
    if (type(logger) not in _PLAIN or not unchanged(type(logger)) or type(level) is not int
            or type(stacklevel) is not int or stacklevel < 1
            or getattr(logging, "_srcfile", None) is not _SRCFILE
            or logging.getLogRecordFactory() is not logging.LogRecord
            or logger.disabled is not False or logger.filters != []
            or type(logger.name) is not str or not _METHOD_NAMES.isdisjoint(logger.__dict__)):
        return None
    found = []
    seen = False
    c = logger
    while True:
        for h in c.handlers:
            seen = True             # (a NullHandler too: no lastResort)
            if type(h) is _NULL and _quiet(h):
                continue
            if (type(h) is not _handler_type or h.filters != [] or type(h.level) is not int
                    or not _own_methods(h.__dict__)):
                return None
            if level >= h.level:
                found.append(h)
        if c.propagate is False:
            break
        if c.propagate is not True:
            return None
        c = c.parent
        if c is None:
            break
        if type(c) not in _PLAIN:
            return None
    return found if seen else None     # no handler at all: logging's lastResort


def _own_methods(d: dict) -> bool:
    """True if a handler's ``__dict__`` replaces neither its ``emit`` nor its ``handle``
    (but for the C ``RecordHandler`` it was made with): a test's replacement takes records."""
    handle = d.get("handle")
    return "emit" not in d and (handle is None or type(handle) is RecordHandler)


def _quiet(h: logging.Handler) -> bool:
    """True if ``h``, a ``logging.NullHandler``, does nothing with a record as logging's
    own: its class's ``handle`` and ``emit``, none set on it, no filter, an int level."""
    d = h.__dict__
    return (h.filters == [] and type(h.level) is int and "handle" not in d and "emit" not in d
            and unchanged(_NULL))


#: Blog's ``Logger._log`` (``_disguised`` compiles it as logging's): the record path
#: (``original``) unless ``reached`` finds only BlogHandlers (and NullHandlers), then
#: ``fast``.
_LOG = """
def made(original, reached, fast):
    def _log(self, level, msg, args, exc_info=None, extra=None, stack_info=False,
             stacklevel=1):
        found = reached(self, level, stacklevel)
        if found is None:
            return original(self, level, msg, args, exc_info, extra, stack_info, stacklevel)
        return fast(found, self, level, msg, args, exc_info, extra, stack_info, stacklevel)
    return _log
"""


def _disguised(original: Any, fast: Callable[..., None]) -> Any:
    """``Logger._log``, seen as logging's own by whatever walks the stack: compiled as
    logging's file, each line the first of ``original`` (logging's ``_log``: a traceback
    shows it, without columns), in logging's module globals (which it reads nothing of:
    ``original``, ``reached`` and ``fast`` are its closure's)."""
    code = original.__code__
    tree = ast.parse(_LOG)
    for node in ast.walk(tree):
        if isinstance(node, (ast.stmt, ast.expr, ast.arg)):
            node.lineno = node.end_lineno = code.co_firstlineno
            node.col_offset = node.end_col_offset = -1
    made: dict[str, Any] = {}
    exec(compile(tree, code.co_filename, "exec"), vars(logging), made)
    log = made["made"](original, reached, fast)
    log.__qualname__ = "Logger._log"
    log.__doc__ = "logging.Logger._log, blog's: without a record where only BlogHandlers take it."
    return log


def log_call(found: list, logger: logging.Logger, level: int, msg: Any, args: Any,
             exc_info: Any, extra: Any, stack_info: bool, stacklevel: int) -> None:
    """The call's event in each of the BlogHandlers ``found`` (``reached``), from blog's
    ``Logger._log``, which the caller called."""
    if not found and extra is None:
        return
    f = caller(sys._getframe(2), stacklevel)
    code = f.f_code
    if exc_info:
        if isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        elif not isinstance(exc_info, tuple):
            exc_info = sys.exc_info()
    emit_call(found, logger, level, msg, args, code.co_filename, f.f_lineno, code.co_name,
              exc_info, extra, stack_text(f) if stack_info else None)


def emit_call(handlers: list, logger: logging.Logger, level: int, msg: Any, args: Any,
              pathname: str, lineno: int, func: str, exc_info: Any = None, extra: Any = None,
              stack_info: str | None = None) -> None:
    """The call's event in each of ``handlers`` (BlogHandlers), as its record's."""
    call = CallRecord(logger.name, level, pathname, lineno, func, msg, args, exc_info, extra,
                      stack_info)
    for h in handlers:
        h.handle_call(call)


def caller(f: FrameType, stacklevel: int) -> FrameType:
    """The frame ``Logger.findCaller(stacklevel=stacklevel)`` picks, ``f`` being the one
    that called ``_log``: past ``stacklevel`` frames that are not logging's own."""
    assert _is_internal_frame is not None
    if not _is_internal_frame(f):
        stacklevel -= 1
    while stacklevel > 0:
        back = f.f_back
        if back is None:
            break
        f = back
        if not _is_internal_frame(f):
            stacklevel -= 1
    return f


def stack_text(f: FrameType) -> str:
    """The ``stack_info`` text ``Logger.findCaller`` makes of the frame ``f``."""
    with io.StringIO() as sio:
        sio.write("Stack (most recent call last):\n")
        traceback.print_stack(f, file=sio)
        text = sio.getvalue()
    return text[:-1] if text[-1] == "\n" else text


def _logging_s_own(log: Any) -> TypeGuard[Callable[..., Any]]:
    """True if ``log`` is logging's own function (not a wrapper of it, nor blog's ``_log``:
    a closure)."""
    code = getattr(log, "__code__", None)
    return (getattr(log, "__module__", None) == "logging" and code is not None
            and os.path.normcase(code.co_filename) == _SRCFILE and not code.co_freevars)


#: logging.NullHandler, if its ``handle`` and ``emit`` are logging's own (None: not).
_NULL: Any = (logging.NullHandler if all(_logging_s_own(m) for m in _NULL_OWN.values())
              else None)


def install(handler_type: type) -> None:
    """Put the fast path in ``logging.Logger._log`` (once), for handlers of exactly
    ``handler_type``, if it is logging's own: a wrapper put there before (an APM's) keeps
    every call, which takes the record path. Nothing either on a Python whose logging has
    no ``_is_internal_frame`` (what ``findCaller`` skips) or no ``_srcfile``."""
    global _original, _handler_type, _fast, _twin
    own = logging.Logger.__dict__.get("_log")
    if (_fast is not None or _is_internal_frame is None or not isinstance(_SRCFILE, str)
            or not _logging_s_own(own)):
        return
    _original, _handler_type = own, handler_type
    _twin = _disguised(own, log_call)
    fast = LoggingCall(own, _twin, emit_call, handler_type, unchanged, vars(logging),
                       logging.Logger, logging.RootLogger, _NULL)
    logging.Logger._log = _fast = fast   # type: ignore[method-assign]


def uninstall() -> None:
    """Give ``logging.Logger._log`` back (every call takes the record path), until the next
    ``install``. A wrapper put over blog's since is left in place: blog's, below it, then
    takes the record path for every call."""
    global _handler_type, _fast
    if _fast is None:
        return
    if logging.Logger.__dict__.get("_log") is _fast:
        logging.Logger._log = _original   # type: ignore[method-assign]
    else:                  # (no handler is of no type: each call is the record path's)
        _handler_type = None
        if _fast is not _twin:
            _fast.handler_type = None
    _fast = None


def installed() -> bool:
    """True if ``logging`` calls may take the fast path."""
    return _fast is not None


def _python_alone(own: Any, twin: Callable[..., Any], *setup: Any) -> Callable[..., Any]:
    """The pure-Python path's ``LoggingCall``: blog's ``_log`` (``_disguised``), with
    nothing in front."""
    return twin


#: ``logging.Logger._log`` in front of blog's (which it calls for anything but the common
#: call): the C ``LoggingCall`` where the C fast path is built (and not chosen away), on
#: POSIX, else blog's ``_log`` alone.
LoggingCall: Callable[..., Callable[..., Any]] = (
    speedups.LoggingCall if speedups is not None and os.name == "posix" else _python_alone)
#: ``blog.stdlib.BlogHandler.handle`` for the common record in C, set on each handler in
#: front of the class's own, which it calls for any other record; None where the C fast
#: path is not built (or chosen away): the class's own alone. Chosen here, beside its twin,
#: as the calls above recognize it on a handler (``_own_methods``).
RecordHandler: type[_speedups.RecordHandler] | None = (
    None if speedups is None else speedups.RecordHandler)
