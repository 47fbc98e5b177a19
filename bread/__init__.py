"""bread: read blog's binary logs back as events, text, or data.

    import bread
    for ev in bread.read("app.blog"):
        print(ev.time, ev.severity.name, ev.message)

Layers, each usable alone: ``frames`` (bytes -> checked frames), ``entries``
(frames -> metadata and raw events), ``events`` (entries -> Event),
``render`` (events -> text).
"""

from blogformat.severity import Severity
from blogformat.values import (DataclassValue, EnumValue, ExceptionValue, ExtValue,
                               FrozenSetValue, OpaqueValue, SetValue)

from .entries import ClockSync, Dropped, FileHeader, Lost, RawEvent, Summary, WriterProp
from .errors import BadEntry, DamagedLog, NotABlogFile, OptionError
from .events import Event, EventStream
from .frames import Damage, Frame
from .reader import Reader, read, read_batches

__all__ = [
    "BadEntry", "ClockSync", "Damage", "DamagedLog", "DataclassValue", "Dropped", "EnumValue",
    "Event", "EventStream", "ExceptionValue", "ExtValue", "FileHeader", "Frame", "FrozenSetValue",
    "Lost", "NotABlogFile", "OpaqueValue", "OptionError", "RawEvent", "Reader", "SetValue",
    "Severity", "Summary", "WriterProp", "read", "read_batches",
]
