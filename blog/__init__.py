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

The public modules are this package, ``blog.stdlib`` (the ``logging`` bridge),
``blog.contextfields`` (context fields), ``blog.testing`` (with the ``blog_capture``
fixture of ``blog.pytest_plugin``) and ``blog.errors``: the API reference documents them.
The rest is internal, its names free to change from one version to the next: the
subpackages ``pipeline``, ``files`` and ``integrations`` (their public names are this
package's) and the modules ``accel``, ``config``, ``correlation`` (OpenTelemetry's span
ids on every event: ``basic_config(otel=...)`` is its API), ``default``, ``envconfig``,
``lifecycle``, ``process``, ``report`` and ``stdlibcalls``.
"""

from blogformat import __version__, lazy

TYPE_CHECKING = False   # (typing.TYPE_CHECKING without importing typing: type checkers know it)
if TYPE_CHECKING:   # the names below, as type checkers and readers see them
    from blogformat.entries import EventSource
    from blogformat.severity import Severity

    from .contextfields import bind, context, unbind
    from .default import (add_output, basic_config, default_session, flush, flush_async,
                          get_logger, remove_output, set_min_severity, set_writer_name,
                          shutdown)
    from .errors import CallSiteError, ConfigurationError, FormatError, UnsafeBufferDirectory
    from .files.compaction import Compaction
    from .files.rotating import RotatingFile
    from .integrations.adapters import adapt
    from .integrations.event import event
    from .integrations.textstream import TextStream
    from .integrations.traced import traced
    from .pipeline.backpressure import BLOCK, DROP
    from .pipeline.consumer import Consumer
    from .pipeline.liveevents import LiveEvent
    from .pipeline.logger import Logger
    from .pipeline.session import Session
    from .pipeline.stats import SessionStats
    from .pipeline.streams import FileOutputStream, MemoryOutputStream, OutputStream
    from .pipeline.writer import SessionWriter

#: Where each public name is defined.
_DEFINED_IN = {
    "bind": "blog.contextfields", "context": "blog.contextfields", "unbind": "blog.contextfields",
    "add_output": "blog.default", "basic_config": "blog.default",
    "default_session": "blog.default", "flush": "blog.default", "flush_async": "blog.default",
    "get_logger": "blog.default", "remove_output": "blog.default",
    "set_min_severity": "blog.default", "set_writer_name": "blog.default",
    "shutdown": "blog.default",
    "FormatError": "blog.errors", "CallSiteError": "blog.errors",
    "ConfigurationError": "blog.errors", "UnsafeBufferDirectory": "blog.errors",
    "Compaction": "blog.files.compaction", "RotatingFile": "blog.files.rotating",
    "adapt": "blog.integrations.adapters",
    "event": "blog.integrations.event",
    "TextStream": "blog.integrations.textstream",
    "traced": "blog.integrations.traced",
    "BLOCK": "blog.pipeline.backpressure", "DROP": "blog.pipeline.backpressure",
    "Consumer": "blog.pipeline.consumer",
    "LiveEvent": "blog.pipeline.liveevents",
    "Logger": "blog.pipeline.logger",
    "Session": "blog.pipeline.session",
    "SessionStats": "blog.pipeline.stats",
    "FileOutputStream": "blog.pipeline.streams", "MemoryOutputStream": "blog.pipeline.streams",
    "OutputStream": "blog.pipeline.streams",
    "SessionWriter": "blog.pipeline.writer",
    "EventSource": "blogformat.entries",
    "Severity": "blogformat.severity",
}

__all__ = sorted(_DEFINED_IN) + ["__version__"]


__getattr__, __dir__ = lazy.names(__name__, _DEFINED_IN, globals())
