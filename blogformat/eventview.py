"""EventView: what an event says through its call site and its writer (severity, category,
file, line, writer...), by the names ``bread.Event`` gives them; the base of ``bread.Event``
and of blog's ``LiveEvent`` (a callable output's), so that code reading one reads both.
"""

from __future__ import annotations

from .entries import EventSource, WriterProp
from .severity import Severity


class EventView:
    """The names an event's ``source`` (EventSource) and ``writer_prop`` (WriterProp) give
    it; a subclass holds both."""

    __slots__ = ()
    source: EventSource
    writer_prop: WriterProp

    category = property(lambda self: self.source.category, doc="category of the logger")
    function = property(lambda self: self.source.function, doc="function of the call site")
    file = property(lambda self: self.source.file, doc="file of the call site")
    line = property(lambda self: self.source.line, doc="line of the call site")
    format = property(lambda self: self.source.format, doc="the format string")
    writer = property(lambda self: self.writer_prop.name, doc="name of the writer (thread)")
    writer_id = property(lambda self: self.writer_prop.id, doc="id of the writer")

    @property
    def severity(self) -> Severity | int:
        """The Severity (IntEnum); an int for a value no Severity has."""
        value = self.source.severity
        try:
            return Severity(value)
        except ValueError:
            return value

    @property
    def backtrace(self) -> bool:
        """True if the event was kept in a backtrace buffer and written later, when a more
        severe event was logged in its thread (``blog.Session.use_backtrace``)."""
        return self.source.backtrace
