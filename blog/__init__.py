"""blog: structured binary logging that costs almost nothing where it is called.

    import blog
    blog.basic_config("app.blog")
    log = blog.get_logger("orders")
    log.info("order {} filled at {}", 42, 101.25)

Read the file back with ``bread``.

``import blog`` costs about as much as starting Python: each public name is imported
from its module when it is first used (``blog.basic_config`` brings in the writer;
the crash buffer, rotation, the ``logging`` bridge... come only with the options that
use them), then kept here, so that a name costs nothing after its first use.
"""

from blogformat import lazy

TYPE_CHECKING = False   # (typing.TYPE_CHECKING without importing typing: type checkers know it)
if TYPE_CHECKING:   # the names below, as type checkers and readers see them
    from blogformat.entries import EventSource
    from blogformat.severity import Severity

    from .adapters import adapt
    from .backpressure import BLOCK, DROP
    from .consumer import Consumer
    from .contextfields import bind, context, unbind
    from .default import (add_output, basic_config, default_session, flush, flush_async,
                          get_logger, remove_output, set_writer_name, shutdown)
    from .errors import CallSiteError, ConfigurationError, FormatError, UnsafeBufferDirectory
    from .event import event
    from .logger import Logger
    from .rotating import RotatingFile
    from .session import Session
    from .stats import SessionStats
    from .streams import FileOutputStream, MemoryOutputStream, OutputStream
    from .textstream import TextStream
    from .traced import traced
    from .writer import SessionWriter

#: The version of the package (pyproject.toml's: tests/test_startup.py checks them equal).
__version__ = "0.1.0"

#: Where each public name is defined.
_DEFINED_IN = {
    "EventSource": "blogformat.entries", "FormatError": "blog.errors",
    "Severity": "blogformat.severity",
    "adapt": "blog.adapters", "BLOCK": "blog.backpressure", "DROP": "blog.backpressure",
    "Consumer": "blog.consumer", "bind": "blog.contextfields", "context": "blog.contextfields",
    "unbind": "blog.contextfields", "add_output": "blog.default", "basic_config": "blog.default",
    "default_session": "blog.default", "flush": "blog.default", "flush_async": "blog.default",
    "get_logger": "blog.default", "remove_output": "blog.default",
    "set_writer_name": "blog.default", "shutdown": "blog.default", "event": "blog.event",
    "Logger": "blog.logger", "RotatingFile": "blog.rotating", "Session": "blog.session",
    "CallSiteError": "blog.errors", "ConfigurationError": "blog.errors",
    "UnsafeBufferDirectory": "blog.errors", "SessionStats": "blog.stats",
    "FileOutputStream": "blog.streams", "MemoryOutputStream": "blog.streams",
    "OutputStream": "blog.streams", "TextStream": "blog.textstream", "traced": "blog.traced",
    "SessionWriter": "blog.writer",
}

__all__ = sorted(_DEFINED_IN) + ["__version__"]


__getattr__, __dir__ = lazy.names(__name__, _DEFINED_IN, globals())
