# blog._speedups, the C fast path of a log call (blog/_speedups.c and the files
# blog/_extension.h lists). Each name mirrors a pure-Python twin; the types are the contract
# both keep (the twin's annotations), so code checked against them runs on either path.
# tests/test_c_stubs.py checks these names against the built module (mypy.stubtest).

import logging
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Callable, Final, final, overload

from _typeshed import structseq
from typing_extensions import Buffer, Self

from blog.contextfields import ContextFields
from blog.correlation import Ids, Span
from blog.integrations.traced import FastPlan
from blog.pipeline.logger import ContextEntry, Logger, SiteEntry
from blog.pipeline.registry import Registry
from blog.stdlib import BlogHandler, RecordSite
from blogformat.entries import WriterProp
from blogformat.valueencoding import EnumInfo, RecordInfo

# ---- blog/pipeline/_channel.c: blog/pipeline/channel.py (PyChannel, Taken) ----

@final
class Mark(structseq[Any], tuple[int, int, int, WriterProp]):
    __match_args__: Final = ("offset", "count", "prev", "entry")
    @property
    def offset(self) -> int: ...
    @property
    def count(self) -> int: ...  # type: ignore[override]  # a field, hiding tuple.count (as Mark's)
    @property
    def prev(self) -> int: ...
    @property
    def entry(self) -> WriterProp: ...

@final
class Taken(structseq[Any], tuple[bytes, int, int, int, int, list[Mark]]):
    __match_args__: Final = ("data", "count", "base", "lo", "hi", "marks")
    @property
    def data(self) -> bytes: ...
    @property
    def count(self) -> int: ...  # type: ignore[override]  # a field, hiding tuple.count (as Taken's)
    @property
    def base(self) -> int: ...
    @property
    def lo(self) -> int: ...
    @property
    def hi(self) -> int: ...
    @property
    def marks(self) -> list[Mark]: ...

@final
class Channel:
    # Bytes it may hold, that wake the consumer, at which a push leaves C; events dropped.
    capacity: int
    wake_at: int
    limit: int
    dropped: int
    woken: bool
    # True while the owning thread writes the outputs: every push refused.
    inside: bool
    def __new__(
        cls, capacity: int, wake_at: int, on_overflow: Callable[..., None] | None, clock: int
    ) -> Self: ...
    @property
    def count(self) -> int: ...
    @property
    def base(self) -> int: ...
    @property
    def prev(self) -> int: ...
    @property
    def on_overflow(self) -> Callable[..., None] | None: ...
    @property
    def nbytes(self) -> int: ...
    def push_values(self, sid: int, clock: int, values: tuple[Any, ...], /) -> bool: ...
    def push_raw(
        self, sid: int, clock: int, nelems: int, tail: bytes, force: bool = False
    ) -> bool: ...
    def mark(self, entry: WriterProp, /) -> None: ...
    def take(self, seq: int = 0, /) -> Taken: ...
    def use_slot(self, slot: Any, /) -> None: ...

def forget_thread_channel(local: threading.local, /) -> None: ...

# ---- blogformat/_valueencoding.c: blogformat/valueencoding.py ----

def encode_values(values: tuple[Any, ...], shown_by_repr: int = 0, /) -> bytes | None: ...
def use_registries(
    enum_types: dict[type, EnumInfo], record_types: dict[type, RecordInfo], /
) -> None: ...

# ---- blog/_correlation.c: blog/correlation.py ----

def use_correlation(
    span_var: ContextVar[Span | None],
    span_type: type[Span],
    ids_type: type[Ids],
    names: tuple[str, ...],
    ids_of: Callable[[Any], Ids | None],
    arm: Callable[[], None],
    seed: bytes,
    /,
) -> None: ...
def use_otel(
    mode: int,
    var: ContextVar[Any] | None,
    key: str | None,
    current_span: Callable[[], Any] | None,
    /,
) -> None: ...
def seed_ids(seed: bytes, /) -> None: ...
def use_spans() -> None: ...

# ---- blog/_contextfields.c: blog/contextfields.py ----

def use_context(
    var: ContextVar[Any], merge: Callable[[ContextFields, Ids], ContextFields], /
) -> None: ...

# ---- blog/pipeline/_summary.c, _parts.c: blog/pipeline/summary.py (tally), parts.py ----

def tally(data: Buffer, count: int, counts: dict[int, int], /) -> None: ...
def event_bounds(data: Buffer, count: int, base: int, /) -> tuple[list[int], list[int]]: ...

# ---- blog/pipeline/_logger.c: blog/pipeline/logger.py (_make_method, _disabled) ----

@final
class Method:
    # Shows the Python method it stands for: its names, docstring and signature.
    @property
    def __name__(self) -> str: ...
    @property
    def __qualname__(self) -> str: ...
    @property
    def __wrapped__(self) -> Callable[..., None]: ...
    @overload
    def __new__(
        cls, sites: dict[int, SiteEntry], local: threading.local, fallback: Callable[..., None], /
    ) -> Self: ...
    @overload
    def __new__(
        cls,
        sites: dict[int, SiteEntry],
        local: threading.local,
        fallback: Callable[..., None],
        context_sites: dict[tuple[Any, ...], ContextEntry],
        level: int,
        /,
    ) -> Self: ...
    def __call__(self, fmt: str, /, *args: Any, **fields: Any) -> None: ...
    def __get__(self, obj: object, owner: type | None = None, /) -> Self: ...

def noop(fmt: str, /, *args: Any, **fields: Any) -> None: ...

# ---- blog/integrations/_event.c: blog/integrations/event.py (the wrapper) ----

@final
class EventCall:
    def __new__(
        cls,
        logger: Logger,
        severity: int,
        sid: int,
        nparams: int,
        local: threading.local,
        body: Callable[..., Any] | None,
        fallback: Callable[..., Any],
        context_sids: dict[tuple[str, ...], int] = ...,
        /,
    ) -> Self: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: object, owner: type | None = None, /) -> Any: ...
    # functools.update_wrapper and @blog.event set the attributes of the function it is.
    def __setattr__(self, name: str, value: Any, /) -> None: ...

# ---- blog/integrations/_traced.c: blog/integrations/traced.py (the wrapper, FastPlan) ----

@final
class TracedCall:
    def __new__(
        cls, plan: FastPlan, fn: Callable[..., Any], fallback: Callable[..., Any], /
    ) -> Self: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: object, owner: type | None = None, /) -> Any: ...
    def __setattr__(self, name: str, value: Any, /) -> None: ...
    def __reduce__(self) -> str: ...

# ---- blog/_stdlib.c: blog/stdlib.py (BlogHandler.handle), stdlibcalls.py (_disguised) ----

@final
class RecordHandler:
    def __new__(
        cls,
        sites: dict[tuple[Any, ...], RecordSite],
        local: threading.local,
        registry: Registry,
        handler: BlogHandler,
        fallback: Callable[[logging.LogRecord], bool],
        base: int,
        /,
    ) -> Self: ...
    def __call__(self, record: logging.LogRecord) -> bool: ...
    @property
    def records(self) -> int: ...
    @property
    def calls(self) -> int: ...

@final
class LoggingCall:
    # The type of the handlers it takes calls for; None: every call takes the record path.
    handler_type: type | None
    def __new__(
        cls,
        original: Callable[..., None],
        twin: Callable[..., None],
        emit: Callable[..., Any],
        handler_type: type,
        checked: Callable[..., bool],
        logging_globals: dict[str, Any],
        Logger: type[logging.Logger],
        RootLogger: type[logging.RootLogger],
        NullHandler: type[logging.NullHandler] | None,
        /,
    ) -> Self: ...
    def __call__(
        self,
        logger: logging.Logger,
        level: int,
        msg: object,
        args: Any,
        /,
        exc_info: Any = None,
        extra: Mapping[str, object] | None = None,
        stack_info: bool = False,
        stacklevel: int = 1,
    ) -> None: ...
    def __get__(self, obj: object, owner: type | None = None, /) -> Callable[..., None]: ...
