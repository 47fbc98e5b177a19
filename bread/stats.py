"""``bread stats``: what a set of log files holds, counted, and when.

Counts by severity, category, call site and writer; the first and last time
and the rate; what the writer recorded as dropped or lost; per file, whether
its writer closed it cleanly (a Summary entry ends each of its streams) and
whether the events read agree with the Summary's count; the damaged regions;
and a histogram of events over time by severity, sized to the terminal.
Read through the batch API (no object per event); memory holds one
count per second of log time, not the events.
"""

from __future__ import annotations

import collections
import datetime as _dt
import os
from typing import TYPE_CHECKING, Any, cast

from blogformat.entries import Dropped, Lost
from blogformat.severity import Severity

from .errors import ListingCut, NotABlogFile
from .frames import Damage
from .inputs import Input, Inputs, name_text
from .reader import Reader
from .render import escape_controls

if TYPE_CHECKING:
    from .inputs import Source

_MARKS = {"CRITICAL": "#", "ERROR": "#", "WARNING": "+", "INFO": "=", "DEBUG": ".", "TRACE": "."}


def collect(source: Source | Inputs) -> dict:
    """The statistics of ``source`` (what ``bread.read`` takes, or its inputs found: the
    command line's), as a JSON-ready dict. An input named itself that is not a blog file
    raises NotABlogFile; one that a directory or pattern stands for is damage, as
    ``bread.read`` reads them."""
    inputs: list[Input] = []
    for inp in source if isinstance(source, Inputs) else Inputs(source):
        if isinstance(inp, ListingCut):
            raise inp
        inputs.append(inp)
    by_sev: collections.Counter = collections.Counter()
    by_cat: collections.Counter = collections.Counter()
    by_site: collections.Counter = collections.Counter()
    by_writer: collections.Counter = collections.Counter()
    per_second: collections.Counter = collections.Counter()   # (second, severity) -> events
    first = last = None
    n = 0
    cols = ["time", "severity", "category", "writer", "function", "file", "line"]
    files: list[dict] = []
    damage: list = []
    notices: list = []
    unknown = unverified = 0
    for one in inputs:   # one reader per file: each file's streams and Summary entries
        reader = Reader(Inputs.of([Input(one.source, True, one.store)]))
        read = 0
        try:
            for b in reader.batches(cols, arrow=False):
                times, sevs = b["time"], b["severity"]
                read += len(sevs)
                by_sev.update(sevs)
                by_cat.update(b["category"])
                by_writer.update(b["writer"])
                by_site.update(zip(b["file"], b["line"], b["function"]))
                for t, s in zip(times, sevs):
                    if t is None:
                        continue
                    per_second[(t // 1_000_000_000, s)] += 1
                    if first is None or t < first:
                        first = t
                    if last is None or t > last:
                        last = t
        except NotABlogFile as exc:   # raised before any batch
            if one.named:
                raise
            damage.append(Damage(0, os.path.getsize(cast(str, one.source)), str(exc),
                                 one.name))
        n += read
        damage += reader.damage
        notices += reader.notices
        unknown += reader.unknown_sources
        unverified += reader.unverified
        files.append(_closing(one.source, reader, read))
    dropped = sum(x.count for x in notices if isinstance(x, Dropped))
    lost = sum(x.events for x in notices if isinstance(x, Lost))
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    return {
        "events": n,
        "first": iso_time(first), "last": iso_time(last), "seconds": span,
        "events_per_second": n / span if span > 0 else None,
        "severity": dict(sorted(by_sev.items(), key=lambda kv: _sev_value(kv[0]))),
        "category": dict(by_cat.most_common()),
        "writer": dict(by_writer.most_common()),
        "sites": [{"file": f, "line": line, "function": fn, "events": c}
                  for (f, line, fn), c in by_site.most_common()],
        "dropped": dropped, "lost": lost,
        "unknown_sources": unknown,
        "unverified": unverified,
        "damage": [{"source": d.source, "offset": d.offset, "length": d.length,
                    "reason": d.reason} for d in damage],
        "files": files,
        "histogram": _histogram(per_second),
    }


def _closing(source: Any, reader: Reader, read: int) -> dict:
    """How a file ended: its streams, how many the writer closed cleanly (a Summary entry
    ends each), and, if all were, the events their Summaries count against those read."""
    name = source if isinstance(source, str) else getattr(source, "name", "<stream>")
    streams, clean = len(reader.headers), len(reader.summaries)
    out = {"path": name_text(name),
           "streams": streams, "closed_cleanly": streams > 0 and clean >= streams,
           "events": read, "summary_events": None}
    if streams and clean >= streams:
        out["summary_events"] = sum(x.events for x in reader.summaries)
    return out


def _sev_value(name: str) -> int:
    try:
        return int(Severity[name])
    except KeyError:
        return int(name) if name.lstrip("-").isdigit() else 0


def iso_time(ns: int | None) -> str | None:
    """ns since the epoch as ISO 8601 UTC with nanoseconds (the number itself beyond what a
    datetime holds); None for None."""
    if ns is None:
        return None
    secs, frac = divmod(ns, 1_000_000_000)
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(seconds=secs)
    except OverflowError:
        return str(ns)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _histogram(per_second: collections.Counter, bins: int = 24) -> list[dict]:
    """Events per time bin by severity: ``bins`` equal bins from the first to the last second."""
    if not per_second:
        return []
    lo = min(s for s, _ in per_second)
    hi = max(s for s, _ in per_second) + 1
    width = max(1, -(-(hi - lo) // bins))
    out: dict[int, collections.Counter] = {}
    for (sec, sev), c in per_second.items():
        out.setdefault((sec - lo) // width, collections.Counter())[sev] += c
    return [{"start": iso_time((lo + k * width) * 1_000_000_000), "seconds": width,
             "severity": dict(out.get(k, {}))} for k in range((hi - lo + width - 1) // width)]


def render(stats: dict, width: int) -> str:
    """The statistics as text for a terminal ``width`` columns wide."""
    lines = [f"events: {stats['events']:,}"]
    if stats["first"]:
        rate = stats["events_per_second"]
        lines.append(f"from {stats['first']} to {stats['last']} ({stats['seconds']:.3f} s"
                     + (f", {rate:,.0f} events/s)" if rate else ")"))
    for title in ("severity", "category", "writer"):
        lines.append(f"by {title}:")
        lines += [f"  {k:<24} {v:>12,}" for k, v in list(stats[title].items())[:20]]
    lines.append("by call site:")
    for s in stats["sites"][:20]:
        lines.append(f"  {s['file']}:{s['line']} ({s['function']}) {s['events']:>12,}")
    lines.append(f"dropped by writers: {stats['dropped']:,}; lost by outputs: {stats['lost']:,}")
    files = stats.get("files", [])
    unclean = [f for f in files if not f["closed_cleanly"]]
    lines.append(f"files: {len(files):,}, closed cleanly: {len(files) - len(unclean):,}")
    for f in unclean[:20]:
        lines.append(f"  not closed cleanly (writer killed, or still writing): {f['path']}")
    for f in files:
        if f["summary_events"] is not None and f["summary_events"] != f["events"]:
            lines.append(f"  {f['path']}: the writer's summary counts {f['summary_events']:,} "
                         f"event(s), {f['events']:,} read")
    if stats.get("unverified"):
        lines.append(f"events read unverified (their frame cut short by the end of a file): "
                     f"{stats['unverified']:,}")
    if stats["unknown_sources"]:
        lines.append(f"events whose source is unknown: {stats['unknown_sources']:,}")
    for d in stats["damage"]:
        lines.append(f"damage: {d['source']}: {d['length']} byte(s) at offset {d['offset']} "
                     f"({d['reason']})")
    hist = stats["histogram"]
    if hist:
        top = max(sum(b["severity"].values()) for b in hist) or 1
        room = max(10, width - 38)
        lines.append(f"events over time ({hist[0]['seconds']} s a line; "
                     + ", ".join(f"{m} {s.lower()}" for s, m in _MARKS.items()
                                 if s not in ("CRITICAL", "TRACE")) + "):")
        for b in hist:
            bar = ""
            for sev in ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "TRACE"):
                c = b["severity"].get(sev, 0)
                bar += _MARKS[sev] * round(c / top * room)
            total = sum(b["severity"].values())
            lines.append(f"  {b['start'][:19]} {total:>10,} {bar}")
    return "\n".join(escape_controls(x) for x in lines) + "\n"
