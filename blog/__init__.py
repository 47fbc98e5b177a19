"""blog: structured binary logging that costs almost nothing where it is called.

    import blog
    blog.basic_config("app.blog")
    log = blog.get_logger("orders")
    log.info("order {} filled at {}", 42, 101.25)

Read the file back with ``bread``.
"""

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
from .session import Session, __version__
from .stats import SessionStats
from .streams import FileOutputStream, MemoryOutputStream, OutputStream
from .textstream import TextStream
from .traced import traced
from .writer import SessionWriter
from . import stdlib  # noqa: F401  (blog.stdlib.capture, blog.stdlib.BlogHandler)

__all__ = [
    "BLOCK", "CallSiteError", "ConfigurationError", "Consumer", "DROP", "EventSource",
    "FileOutputStream", "FormatError", "Logger", "MemoryOutputStream", "OutputStream",
    "RotatingFile", "Session", "SessionStats", "SessionWriter", "Severity", "TextStream",
    "UnsafeBufferDirectory", "adapt", "add_output", "basic_config", "bind", "context",
    "default_session", "event", "flush", "flush_async", "get_logger", "remove_output",
    "set_writer_name", "shutdown", "traced", "unbind", "__version__",
]
