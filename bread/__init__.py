"""bread: read blog's binary logs back as events, text, or data.

    import bread
    for ev in bread.read("app.blog"):
        print(ev.time, ev.severity.name, ev.message)

Layers, each usable alone: ``frames`` (bytes -> checked frames), ``entries``
(frames -> metadata and raw events), ``events`` (entries -> Event),
``render`` (events -> text).

``import bread`` costs about as much as starting Python: each public name (and
submodule: ``bread.render``) is imported when it is first used, then kept here.
"""

from blogformat import __version__, lazy

TYPE_CHECKING = False   # (typing.TYPE_CHECKING without importing typing: type checkers know it)
if TYPE_CHECKING:   # the names below, as type checkers and readers see them
    from blogformat.severity import Severity
    from blogformat.valueclasses import (DataclassValue, EnumValue, ExceptionValue, ExtValue,
                                         FrozenSetValue, OpaqueValue, SetValue)

    from .entries import ClockSync, Dropped, FileHeader, Lost, RawEvent, Summary, WriterProp
    from .errors import BadEntry, DamagedLog, NotABlogFile, OptionError
    from .events import Event, EventStream
    from .frames import Damage, Frame
    from .reader import Reader, read, read_batches, read_pandas

#: Where each public name is defined.
_DEFINED_IN = {
    "Severity": "blogformat.severity", "DataclassValue": "blogformat.valueclasses",
    "EnumValue": "blogformat.valueclasses", "ExceptionValue": "blogformat.valueclasses",
    "ExtValue": "blogformat.valueclasses", "FrozenSetValue": "blogformat.valueclasses",
    "OpaqueValue": "blogformat.valueclasses", "SetValue": "blogformat.valueclasses",
    "ClockSync": "bread.entries", "Dropped": "bread.entries", "FileHeader": "bread.entries",
    "Lost": "bread.entries", "RawEvent": "bread.entries", "Summary": "bread.entries",
    "WriterProp": "bread.entries", "BadEntry": "bread.errors", "DamagedLog": "bread.errors",
    "NotABlogFile": "bread.errors", "OptionError": "bread.errors", "Event": "bread.events",
    "EventStream": "bread.events",
    "Damage": "bread.frames", "Frame": "bread.frames", "Reader": "bread.reader",
    "read": "bread.reader", "read_batches": "bread.reader", "read_pandas": "bread.reader",
}

__all__ = sorted(_DEFINED_IN) + ["__version__"]


__getattr__, __dir__ = lazy.names(__name__, _DEFINED_IN, globals())
