"""``bread.read``: paths or binary file objects -> events, with damage and notices collected.

A ``Reader`` takes a sink (``bread.decode.decoder.Sink``: what becomes of the events) and
reads each input (``bread.inputs``: found once, opened, said what it is) through a
decoder into it (``bread.decode.decoder``), in file order or merged by time
(``bread.merge``). Iterating gives Events (``bread.sinks.events``); ``text``,
``batches`` and ``outputs`` give what other sinks make (``bread.sinks``).
"""

from __future__ import annotations

import functools
import itertools

from blogformat.typinglite import TYPE_CHECKING, cast

from .decode.decoder import Sink, binlog_outputs, decoded
from .errors import OptionError
from .events import Event, EventStream
from .decode.filters import NO_FILTER, Filter
from .frames import Damage, Frame, iter_frames, span_frames
from .inputs import CXX, Input, Inputs, is_url, sniff
from .inputs.compressed import GzipInput, seekable
from .render import PrettyPrinter

if TYPE_CHECKING:
    from datetime import tzinfo
    from typing import Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Sequence

    from .inputs import Source
    from .inputs.objectstore import Store


class Reader:
    """Iterates the events of one or more inputs: in file order, or with ``sort`` in time order.

    After (or during) iteration, ``damage`` lists skipped byte ranges,
    ``notices`` the drops and losses the writer recorded, ``summaries`` the
    Summary entries of the cleanly closed streams, ``headers`` the
    descriptors of the files read, ``skipped`` the files not opened because
    their directory's manifest shows them outside the filter's time window.
    An input is named (``ev.path``, ``damage``, the ``path`` column) by
    ``inputs.name_text``: valid UTF-8 whatever the bytes of a file's name. A file named
    itself (not found in a directory or by a pattern), or a file object, that does not
    begin as a blog file raises ``bread.NotABlogFile`` when it is read.

    The complete events of a frame that the end of an input cuts short (a
    writer killed mid-write, a copy taken meanwhile) are read, with
    ``ev.verified`` False (``unverified`` counts them), unless
    ``verified_only``; the cut itself is reported in ``damage``.

    Sorted, the events of all writers and inputs come in order of their wall
    time (each file's clock syncs), ties in input order, then writer id,
    then position; memory stays bounded (``bread.merge`` says by what). A
    stream that cannot go back (standard input, a pipe) is first copied to a
    temporary file, since sorting reads each input twice.

    With ``follow``, ``source`` is one path read as it grows (``bread.inputs.follow``): a file
    as ``tail -F`` reads it; a directory or a set's base name (``logs/app.blog``), its
    files, those written and those to come; iteration waits for events and never ends.

    URLs are read through ``pyarrow.fs`` (``bread.inputs.objectstore``), each file by ranges;
    ``storage_options`` go to its file system's constructor (``endpoint_override``,
    ``region``, ...).
    """

    def __init__(self, source: Source | Inputs, *, sort: bool = False, filter: Filter = NO_FILTER,
                 span: tuple[int, int] | None = None, verified_only: bool = False,
                 follow: bool = False, storage_options: Mapping[str, Any] | None = None,
                 store: Store | None = None) -> None:
        self.sort = sort
        self.filter = filter
        self.verified_only = verified_only
        if span is not None:
            if (not isinstance(span, tuple) or len(span) != 2
                    or not all(type(x) is int and x >= 0 for x in span)):
                raise OptionError(f"span must be (start, end) byte offsets, not {span!r}")
            if sort:
                raise OptionError("a span is read in file order (sort=False)")
        self.span = span
        self._follower: Any = None
        if follow:
            if is_url(source):
                raise OptionError("follow reads a local file or directory, not a URL")
            if sort or span is not None:
                raise OptionError("follow reads in file order, whole files: no sort, no span")
            from .inputs.follow import Follower, follower
            followed = follower(source)
            if isinstance(followed, Follower):   # a directory or a set's base name
                self._follower, source = followed, []
            else:                                # a file, as tail -F reads it
                source = cast("BinaryIO", followed)
        #: The inputs, found once per iteration (the command line's: found once for good).
        self._inputs = source if isinstance(source, Inputs) else Inputs(
            source, store, storage_options)
        if span is not None and (len(self._inputs.sources) != 1
                                 or hasattr(self._inputs.sources[0], "read")):
            raise OptionError("a span is a part of one file: give one path")
        self.damage: list[Damage] = []
        self.notices: list[Any] = []
        self.summaries: list[Any] = []
        #: Files left unread: outside the time window.
        self.skipped: list[str] = self._inputs.skipped
        self.headers: list[Any] = []
        self.unknown_sources = 0

    @property
    def unverified(self) -> int:
        """The complete events of frames cut short by the end of their input (checksum
        unchecked), before any filter: how many the input holds, not how many were kept."""
        return sum(d.unverified for d in self.damage)

    def __iter__(self) -> Iterator[Event]:
        # The events come in chunks (lists from the C renderer, or a Python generator per
        # frame) that chain flattens in C: no generator level of ours per event.
        from .sinks.events import EventSink
        events = itertools.chain.from_iterable(self._outputs(lambda stream: EventSink()))
        grep = self.filter.grep
        if grep is not None:   # what remains of the other conditions, by its message
            return (ev for ev in events if grep.search(ev.message))
        return events

    # --- inputs -> decode -> [merge] ---------------------------------------------

    def _outputs(self, sink: Callable[[EventStream], Sink], text: bool = False
                 ) -> Iterator[Any]:
        """What the sinks (``sink(stream)``, one per input) give: in file order, or sorted
        (``_sorted``: with ``text``, the sink's items are lines)."""
        if self.sort:
            return self._sorted(sink, text)
        if self._follower is not None:
            return self._follower.outputs(lambda f, name: self._whole(f, name, sink),
                                          self.damage)
        return self._in_file_order(sink)

    def _in_file_order(self, sink: Callable[[EventStream], Sink]) -> Iterator[Any]:
        damage = self.damage
        for inp, kind, f in self._inputs.opened(self.filter.since, self.filter.until, damage):
            yield from self._decoded(f, kind, inp.name, sink, named=inp.named)

    def _whole(self, f: BinaryIO, name: str, sink: Callable[[EventStream], Sink]
               ) -> Iterator[Any]:
        """One input opened elsewhere (a followed directory's file), decoded to its end."""
        kind, g = sniff(f)
        yield from self._decoded(g, kind, name, sink)
        if isinstance(f, GzipInput) and f.error is not None:
            self.damage.append(Damage(f.pos, 0, f.error, name))

    def _decoded(self, f: BinaryIO, kind: str, name: str, sink: Callable[[EventStream], Sink],
                 keyed: bool = False, named: bool = False) -> Iterator[Any]:
        """One input (``kind``: ``bread.inputs.sniff``'s), decoded into what its sink
        gives (with ``keyed``, runs to merge); ``named``: given itself (not a blog file:
        NotABlogFile)."""
        if kind == CXX and self.span is not None:
            raise OptionError(f"{name}: a span is a part of a blog file, not of a C++ binlog "
                              "file")
        stream = self._stream((), name)
        if kind == CXX:
            def damaged(offset: int, reason: str) -> None:
                self.damage.append(Damage(offset, 0, reason, name))
            yield from binlog_outputs(f, name, sink(stream), self.filter.keeps, damaged, keyed)
            return
        try:
            yield from decoded(stream, sink(stream), self._frames(f, name, named), self.filter,
                               name, keyed)
        finally:
            self.unknown_sources += stream.unknown_sources

    def _sorted(self, sink: Callable[[EventStream], Sink], text: bool) -> Iterator[Any]:
        """All inputs in time order: a sink with an item per event (``Sink.item``) is
        merged (``bread.merge``: its runs of items, ``text`` lines or else objects); one
        without is given the sorted Events."""
        s = sink(self._stream((), "<sorted>"))
        if s.item is None:
            yield from s.python(iter(self))
            yield from s.finish()
            return
        from .merge.keyed import Keyed   # (a merge's: reading in file order never loads it)
        yield from self._merged(lambda stream: Keyed(sink(stream), text), text)

    def _merged(self, sink: Callable[[EventStream], Sink], text: bool) -> Iterator[Any]:
        """All inputs' runs (``sink``'s, keyed) merged by time (``bread.merge``, imported here:
        reading in file order never loads it)."""
        from .merge import SortedInput, index_of, merged
        inputs: list[SortedInput] = []
        for inp in self._inputs.each(self.filter.since, self.filter.until, self.damage):
            inp = inp.again()
            f = inp.opened(self.damage)
            if f is None:
                continue
            try:
                idx = index_of(f, inp.name, inp.named)
            finally:
                f.close()
            failed = inp.store_error(f)
            if failed is not None:   # (its index would not be that of the frames read next)
                self.damage.append(Damage(0, 0, f"{failed}: none of it is read, sorted",
                                          inp.name))
                continue
            inputs.append(SortedInput(idx, len(inputs), self._input_runs(inp, sink),
                                      inp.name))
        yield from merged(inputs, text, self.damage)

    def _input_runs(self, inp: Input, sink: Callable[[EventStream], Sink]
                    ) -> Callable[[], Iterator[Any]]:
        def start() -> Iterator[Any]:
            f = inp.opened(self.damage)   # (a URL's that fails: it opened for the first pass)
            if f is None:
                return
            try:
                kind, g = sniff(f)
                yield from self._decoded(g, kind, inp.name, sink, keyed=True, named=inp.named)
                ended = inp.ended(f)
                if ended is not None:
                    self.damage.append(ended)
            finally:
                f.close()
        return start

    def text(self, printer: PrettyPrinter, *, escape: bool = False) -> Iterator[bytes]:
        """The events as text lines rendered by ``printer``, in UTF-8 blocks (what ``bread``
        prints).

        ``escape`` replaces control and bidirectional format characters
        (``render.escape_controls``).
        Faster than rendering each Event: the C fast path renders whole frames.
        """
        from .sinks.lines import LineSink, line_blocks
        if self.filter.grep is None and printer.zone is None:
            # Whole frames, on both paths (by C where it can): a frame's lines are given as
            # soon as it is read (bread -F prints what the consumer has just written).
            yield from self._outputs(lambda stream: LineSink(printer, escape=escape), text=True)
            return
        yield from line_blocks(self, printer, escape)   # Events, then their lines one by one

    def rows(self, form: str, zone: tzinfo | None = None, *, escape: bool = True,
             quote_formulas: bool = True) -> Iterator[bytes]:
        """The events as JSON lines (``form`` ``"jsonl"``) or as CSV rows after a header
        row (``"csv"``), in UTF-8 blocks: what ``bread -o jsonl`` and ``-o csv`` print,
        each event as ``bread.sinks.json`` writes it (``json.jsonl``, ``json.csv_rows``),
        its time in ``zone`` (a tzinfo; None: the writer's). ``escape`` and
        ``quote_formulas``: the CSV cells' (``json.csv_rows``).
        Faster than writing each Event: the C fast path writes whole frames.
        """
        # Imported here: the text and the Events need none of the JSON.
        from .sinks.rows import FORMS, RowSink, csv_header
        if form not in FORMS:
            raise ValueError(f"form must be one of {sorted(FORMS)}, not {form!r}")
        sink = functools.partial(RowSink, form, zone, escape=escape,
                                 quote_formulas=quote_formulas)
        if form == "csv":
            yield csv_header()
        if self.filter.grep is None:
            yield from self._outputs(lambda stream: sink(), text=True)
            return
        yield from sink().python(iter(self))   # Events, by their messages, then their rows

    def batches(self, columns: Sequence[str] | None = None, batch_size: int = 65536, *,
                arrow: bool | None = None) -> Iterator[Any]:
        """The events as batches of columns (``bread.sinks.batches``), at most
        ``batch_size`` rows each.

        ``columns`` picks some of ``bread.sinks.batches.COLUMNS`` (default: all); only
        those are decoded. With ``arrow`` (default: if pyarrow is installed) each
        batch is a ``pyarrow.RecordBatch``, else a dict of column name -> values.
        """
        # Imported here: a reader of text or Events (the bread command) needs no columns.
        from .sinks.batches import BatchSink, check_columns, has_arrow
        cols = check_columns(columns)
        if arrow is None:
            arrow = has_arrow()
        elif arrow and not has_arrow():
            raise ImportError("arrow=True needs pyarrow: pip install 'blog-bread[arrow]'")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise OptionError(f"batch_size must be a positive int, not {batch_size!r}")
        if self.filter.grep is not None:
            raise OptionError("batches take no grep filter: select on the message column")
        yield from itertools.chain.from_iterable(self._outputs(
            lambda stream: BatchSink(stream, cols, batch_size, arrow=arrow)))

    def outputs(self, sink: Callable[[EventStream], Sink]) -> Iterator[Any]:
        """What ``sink(stream)`` (a ``bread.decode.decoder.Sink``: the typed tables of
        ``bread.sinks.typed``), one per input, gives in file order; sorted, the merge of
        its items, or what one sink makes of the sorted Events (``_sorted``)."""
        return self._outputs(sink)

    def _frames(self, f: BinaryIO, name: str, named: bool) -> Iterator[Frame | Damage]:
        """The input's frames: all of them, or those of the span."""
        if self.span is None:
            return iter_frames(f, name, self.verified_only, named)
        if isinstance(f, GzipInput) or not seekable(f):
            raise OptionError(f"{name}: a span needs an uncompressed file that can seek")
        return span_frames(f, *self.span, name, self.verified_only)

    def _stream(self, entries: Iterable[Any], name: str) -> EventStream:
        stream = EventStream(entries, name)
        stream.damage = self.damage
        stream.notices = self.notices
        stream.summaries = self.summaries
        stream.headers = self.headers
        return stream


def read(source: Source, *, sort: bool = False, min_severity: int | str | None = None,
         categories: Iterable[str] | str | None = None, since: int | str | None = None,
         until: int | str | None = None, writers: Iterable[str] | str | None = None,
         sites: Iterable[str] | str | None = None, grep: str | None = None,
         verified_only: bool = False, follow: bool = False,
         storage_options: Mapping[str, Any] | None = None) -> Reader:
    """Read events from paths (files, directories, glob patterns, "-"), or a binary file object.

    In file order, or with ``sort`` in time order across writers and inputs
    (bounded memory). The filters (``bread.decode.filters.Filter``): a minimum
    severity (a name or a value), categories (with those below them: ``db`` takes
    ``db.pool``; ``=db`` is ``db`` alone), a time range (``since``
    included, ``until`` not: ns since the epoch, ISO 8601, or ``"15m"`` ago),
    writer names, call sites (function, file name, or ``file:line``), a regular
    expression searched in the message. Never raises on damaged input:
    damaged ranges are skipped and listed in the returned reader's
    ``damage``. The complete events of a frame cut short by the end of a file
    are read with ``ev.verified`` False; ``verified_only`` leaves them out.
    Opening a missing file raises OSError; a bad filter ValueError.

    ``follow``: one path read as it grows, never ending (``bread -F``; ``Reader``): a
    file, a directory, or a rotated set's base name (``"logs/app.blog"``).

    A URL (``s3://bucket/logs/``, ``gs://``, ``hdfs://``, ``file://``) is read through
    ``pyarrow.fs`` (the ``spark`` extra), with the store's usual credentials;
    ``storage_options`` go to its file system (``{"endpoint_override": "http://...",
    "region": "eu-west-1"}``).
    """
    flt = Filter.make(min_severity=min_severity, categories=categories, since=since,
                      until=until, writers=writers, sites=sites, grep=grep)
    return Reader(source, sort=sort, filter=flt, verified_only=verified_only, follow=follow,
                  storage_options=storage_options)


def read_batches(source: Source, columns: Sequence[str] | None = None, batch_size: int = 65536,
                 *, arrow: bool | None = None, span: tuple[int, int] | None = None,
                 min_severity: int | str | None = None,
                 categories: Iterable[str] | str | None = None, since: int | str | None = None,
                 until: int | str | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """``bread.read(source, ...).batches(...)``: the events as batches of columns.

    ``span=(start, end)``: only the events of the frames that begin in that byte range
    of one uncompressed file (with the metadata before it): parts that tile a file give
    each event once, so that several workers can read one large file (an object in
    storage too: only that range and the metadata before it are fetched).
    ``storage_options``: as ``bread.read``'s.
    """
    flt = Filter.make(min_severity=min_severity, categories=categories, since=since,
                      until=until)
    return Reader(source, filter=flt, span=span, storage_options=storage_options).batches(
        columns, batch_size, arrow=arrow)


def read_pandas(source: Source, columns: Sequence[str] | None = None, *, sort: bool = False,
                min_severity: int | str | None = None,
                categories: Iterable[str] | str | None = None, since: int | str | None = None,
                until: int | str | None = None,
                storage_options: Mapping[str, Any] | None = None) -> Any:
    """The events as one ``pandas.DataFrame``, a column per name of ``columns`` (default:
    all of ``bread.sinks.batches.COLUMNS``), in file order or, with ``sort``, in time
    order: ``read_batches`` gathered (the ``pandas`` extra: pandas and pyarrow). The
    whole result is in memory; for more than fits, iterate ``read_batches``. Damage is
    skipped as ``bread.read`` skips it; the reader's ``damage`` is in ``df.attrs["damage"]``
    (as text)."""
    try:
        import pandas
        import pyarrow
    except ImportError:
        raise ImportError("read_pandas needs pandas and pyarrow: "
                          "pip install 'blog-bread[pandas]'") from None
    from .sinks.batches import check_columns
    cols = check_columns(columns)
    flt = Filter.make(min_severity=min_severity, categories=categories, since=since,
                      until=until)
    reader = Reader(source, sort=sort, filter=flt, storage_options=storage_options)
    batches = list(reader.batches(cols, arrow=True))
    if batches:
        df = pyarrow.Table.from_batches(batches).to_pandas()
    else:
        df = pandas.DataFrame({c: [] for c in cols})
    df.attrs["damage"] = [str(d) for d in reader.damage]
    return df
