"""Which exceptions a guard around a value's own methods may catch.

A log call renders and encodes application values by calling their methods
(``__str__``, ``__format__``, a dataclass's fields...). What those methods
raise is caught and logged as a marker: a broken value must not break the
call. An exception raised by a Python signal handler while that code runs
(``SIGALRM`` raising ``TimeoutError`` is the common timeout pattern) is the
application's, not the value's: it must reach the application.
``KeyboardInterrupt`` and ``SystemExit`` are never caught (guards catch
``Exception`` only).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:   # its functions without signal.py's enums (which cost a tenth of starting Python)
    import _signal as signal


def _handler_codes() -> set:
    codes = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        # a function, a method, a partial, a callable object (its class's __call__)
        for func in (handler, getattr(handler, "__func__", None), getattr(handler, "func", None),
                     getattr(type(handler), "__call__", None)):  # noqa: B004
            code = getattr(func, "__code__", None)
            if code is not None:
                codes.add(code)
    return codes


def owned_by_value(exc: BaseException) -> bool:
    """True if ``exc`` came from the value's code, False if a signal handler raised it.

    Called only on the error path: it looks for a frame of an installed Python
    signal handler (a function, method, ``functools.partial`` or callable object)
    in the exception's traceback. A handler that uninstalls itself before it
    raises is not recognised: its exception is taken for the value's.
    """
    tb = exc.__traceback__
    if tb is None:
        return True
    codes = _handler_codes()
    if not codes:
        return True
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return False
        tb = tb.tb_next
    return True
