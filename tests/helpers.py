"""What several test files share: the way to start a child Python, sample types, logs
written and read back, and the few reaches into private state that no public way replaces
(each says why). Imported by the tests and conftest.py as ``helpers`` (pytest puts tests/
on the path)."""

from __future__ import annotations

import http.server
import io
import os
import random
import re
import struct
import subprocess
import sys
import textwrap
import threading
import time
from typing import Callable
from urllib.parse import parse_qs, urlparse

import blog
import bread
from blogformat.frames import FRAME_METADATA, HEADER_SIZE
from bread import cli

#: The first program of every child: SIGINT and SIGTERM back to their default actions, then
#: exec of the child proper, which starts as it would from a shell (Python then installs its
#: own SIGINT handler). An ignored signal stays ignored across fork and exec, and the test
#: runner's may be (a shell's background job ignores SIGINT); a preexec_fn would instead run
#: the at-fork hooks of blog in the runner and in the child.
_FRESH_SIGNALS = ("import os, signal, sys\n"
                  "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
                  "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


def python_child(*args: str) -> list[str]:
    """The command line of a child Python run with ``args`` (``"-c", code`` or ``"-m",
    "bread", ...``), whose SIGINT and SIGTERM do what they do in a program started from a
    shell, whatever the test runner's dispositions (its pid is the child's: exec keeps it)."""
    return [sys.executable, "-S", "-c", _FRESH_SIGNALS, *args]


def fresh_signals() -> None:
    """In a child forked without exec: SIGINT and SIGTERM back to their default actions."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def seeded_random(var: str, default: int | None = None) -> random.Random:
    """The random numbers of a randomized test, seeded from the environment variable ``var``
    (else ``default``, else the clock). The seed is printed now: pytest shows a failed
    test's output, so every failure says how to replay it, e.g.
    ``CRASH_SEED=1733590000123456789 pytest tests/test_crash_buffer.py -k rotated``."""
    seed = int(os.environ.get(var, default if default is not None else time.time_ns()))
    print(f"random seed: replay with {var}={seed}")
    return random.Random(seed)


def run_python(code: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) in a child Python, in ``cwd``; its output as text."""
    return subprocess.run(python_child("-c", textwrap.dedent(code)), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# --- sample types: subclasses of int, float and str with text of their own ----------------


class Text(str):
    """A str whose str and repr are its own (``logging`` and ``{!r}`` show those, not its
    value; the C encoder leaves it to Python)."""

    def __str__(self) -> str:
        return "custom-str"

    def __repr__(self) -> str:
        return "custom-repr"


class Count(int):
    def __str__(self) -> str:
        return "custom-int"

    def __repr__(self) -> str:
        return "Count()"


class Ratio(float):
    def __repr__(self) -> str:
        return "Ratio()"


# --- logs written and read back ---------------------------------------------------------


class Logged:
    """A private session writing into memory, and a way to read what it wrote."""

    def __init__(self, **options) -> None:
        self.session = blog.Session(**options)
        self.log = self.session.get_logger("main")
        self.out = blog.MemoryOutputStream()

    def consume(self) -> int:
        return self.session.consume(self.out)

    def read(self) -> list[bread.Event]:
        self.consume()
        self.reader = bread.read(io.BytesIO(self.out.getvalue()))
        events = list(self.reader)
        assert self.reader.damage == []
        return events


def write_log(path, n: int = 50, tag: str = "a") -> bytes:
    """``n`` events "event {i} of {tag}" of a private session, consumed every ten; written
    to ``path`` too unless it is None."""
    s = blog.Session()
    log = s.get_logger("main")
    out = blog.MemoryOutputStream()
    for i in range(n):
        log.info("event {} of {}", i, tag)
        if i % 10 == 9:
            s.consume(out)
    s.consume(out)
    data = out.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def frame_sizes(path) -> list[tuple[int, int]]:
    """(kind, bytes) of each frame of the file at ``path``, in order."""
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(data):
        kind, length = data[pos + 4], struct.unpack_from("<I", data, pos + 8)[0]
        out.append((kind, HEADER_SIZE + length))
        pos += HEADER_SIZE + length
    assert pos == len(data)
    return out


def check_sizes(files, rotate_bytes: int) -> None:
    """Each file of a size-rotated set: at most ``rotate_bytes`` before its last frame, a
    Summary (metadata)."""
    for path in files:
        frames = frame_sizes(path)
        r = bread.read(path)
        list(r)
        assert frames[-1][0] == FRAME_METADATA and len(r.summaries) == 1
        assert sum(n for _, n in frames[:-1]) <= rotate_bytes, (path, frames)


def start_size(session) -> int:
    """Bytes of the header and metadata a new file of ``session`` starts with (in the suite,
    they grow with the value types registered before): a test that wants files of some
    events each sets rotate_bytes above it."""
    head = blog.MemoryOutputStream()
    session.consume(head)
    return len(head.getvalue())


class Trickle(io.RawIOBase):
    """A pipe-like stream (it cannot seek): every read returns at most ``n`` bytes."""

    def __init__(self, data: bytes, n: int) -> None:
        self._f = io.BytesIO(data)
        self._n = n

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._f.read(min(self._n, size) if size >= 0 else self._n)


def in_threads(work: Callable[[int], object], n: int, name: str | None = None) -> None:
    """Run ``work(0)`` to ``work(n - 1)`` each in a thread of its own, all at once, and wait
    for them; ``name``: the threads' names, formatted with their number (``"w{}"``)."""
    threads = [threading.Thread(target=work, args=(k,),
                                name=None if name is None else name.format(k))
               for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def with_crash_buffer(session, path, stream):
    """A crash buffer for the log at ``path`` that ``session`` writes to ``stream``, in use by
    the session: the ``blog.files.crashbuf.CrashBuffer``."""
    from blog.files.crashbuf import CrashBuffer, buffer_directory
    cb = CrashBuffer(buffer_directory(path), stream.path, session.descriptor)
    session.use_crash_buffer(cb)
    return cb


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """``bread`` run in this process: its exit code, stdout and stderr."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- reaches inside: where no public way shows what a test proves -------------------------
#
# Each of these touches private state of the product, in one place, and says why: the
# tests call them rather than reach in themselves.


def abandon(cb) -> None:
    """A ``blog.files.crashbuf.CrashBuffer`` as if its process died: its lock goes, its files
    stay (what a recovery then finds). Reaches into its state: there is no public way to
    die."""
    import os
    for slot in cb._slots.values():
        slot.map.flush()
    cb.closed = True
    cb._words.release()
    cb._ctl.close()           # (an mmap holds a descriptor of its own: the lock with it)
    os.close(cb._fd)


def count_reader_fallbacks(monkeypatch) -> list[tuple]:
    """The events the C decoder leaves to Python from now on (one entry each), for a test
    that the fast path stays fast. Reaches into ``bread.decode.decoder.Decoder``: what C hands
    over reads back the same, so nothing public tells the two apart."""
    import bread.decode.decoder
    calls: list[tuple] = []
    orig = bread.decode.decoder.Decoder._fallback

    def counting(self, *a):
        calls.append(a)
        return orig(self, *a)

    monkeypatch.setattr(bread.decode.decoder.Decoder, "_fallback", counting)
    return calls


def flushed_one_by_one(stream, n: int) -> None:
    """``n`` events "e {i}" logged into ``stream`` (a RotatingFile, say) by a new session,
    each flushed on its own; then the stream closed. Only the flushes consume (the thread's
    interval is an hour): with rotate_bytes=1, a timed consume between a call site's
    registration and its event would make two files of one event."""
    import blog
    s = blog.Session()
    c = blog.Consumer(s, stream, interval=3600).start()
    log = s.get_logger()
    for i in range(n):
        log.info("e {}", i)
        c.flush()
    c.stop()
    stream.close()


def c_path_handbacks(monkeypatch, hot_path: str) -> list:
    """``count_python_calls`` on the C path; skips the test on the Python one."""
    import pytest
    if hot_path != "c":
        pytest.skip("the C call path is not in use")
    return count_python_calls(monkeypatch)


def count_python_calls(monkeypatch) -> list:
    """The site keys a level method's Python code looks up from now on (loggers made after
    this call): on the C path, one per call C hands back to Python, outside a context or
    in one. Reaches into ``blog.pipeline.logger._method`` and the logger's cache of sites
    in context: nothing public tells the two paths apart."""
    import blog.pipeline.logger as logger
    calls: list = []

    class CountingSites(dict):   # C reads the dict directly; Python calls .get
        def get(self, key, default=None):
            calls.append(key)
            return super().get(key, default)

    def method(lg, level):
        if type(lg._context_sites) is not CountingSites:
            lg._context_sites = CountingSites(lg._context_sites)
        sites = CountingSites()
        python = logger._make_method(lg, level, sites)
        return logger.Method(sites, lg.writers.local, python, lg._context_sites, int(level))

    monkeypatch.setattr(logger, "_method", method)
    return calls


def count_slow_calls(monkeypatch) -> list[str]:
    """The formats of the calls that take a logger's slow path from now on (loggers made
    after this call). Reaches into ``blog.pipeline.logger.Logger``: the slow path writes
    the bytes the fast one would, so nothing public tells the two apart."""
    import blog.pipeline.logger
    calls: list[str] = []
    real = blog.pipeline.logger.Logger._slow

    def counting(self, *a, **k):
        calls.append(a[3])
        return real(self, *a, **k)

    monkeypatch.setattr(blog.pipeline.logger.Logger, "_slow", counting)
    return calls


def count_slow_records(handler) -> list:
    """The records a ``blog.stdlib.BlogHandler`` sends down its slow path from now on.
    Reaches into the handler: the slow path writes what the fast one would, so nothing
    public tells the two apart."""
    records: list = []
    first = handler._emit
    handler._emit = lambda record: (records.append(record), first(record))
    return records


def texts_kept(event) -> dict:
    """The texts a ``bread.Event`` carries from its call (a value's str or repr kept where
    its class's style could not derive it). Reaches into the event: its message is the
    same either way, only the file's size differs."""
    return event._texts


def interrupt_encoding(ch, between: Callable[[], object]) -> None:
    """Make a ``PyChannel``'s next push call ``between`` once, after it encoded its event
    and before it appends it: where a signal handler that logs may run. Reaches into the
    channel: no public way stops a push at that point."""
    encode = ch._encode
    fired: list[int] = []

    def interrupted(*a):
        b = encode(*a)
        if not fired:
            fired.append(1)
            between()
        return b

    ch._encode = interrupted


def python_twins() -> list[tuple[object, str, object]]:
    """Each choice a module of blog made at its import between a C object and its Python
    twin (``Channel`` of ``blog.pipeline.channel``, ...), where it is read: (module, name,
    the Python twin)."""
    import blog.contextfields as contextfields
    import blog.correlation as correlation
    import blog.integrations.event as event
    import blog.integrations.traced as traced
    import blog.pipeline.channel as channel
    import blog.pipeline.logger as logger
    import blog.pipeline.parts as parts
    import blog.pipeline.summary as summary
    import blog.pipeline.writer as writer
    import blog.stdlib as stdlib
    import blog.stdlibcalls as stdlibcalls
    return [(channel, "Channel", channel.PyChannel), (writer, "Channel", channel.PyChannel),
            (channel, "forget_thread_channel", channel._no_c_channels),
            (writer, "forget_thread_channel", channel._no_c_channels),
            (summary, "tally", summary.py_tally), (parts, "event_bounds", parts.py_event_bounds),
            (logger, "Method", logger._python_alone), (logger, "noop", logger._disabled),
            (contextfields, "use_context", contextfields._python_reads_it),
            *((correlation, name, correlation._python_reads_it)
              for name in ("use_correlation", "use_otel", "seed_ids", "use_spans")),
            (event, "EventCall", event._python_alone),
            (traced, "TracedCall", traced._python_alone),
            (stdlib, "RecordHandler", None), (stdlibcalls, "RecordHandler", None),
            (stdlibcalls, "LoggingCall", stdlibcalls._python_alone)]


def python_path(monkeypatch) -> None:
    """Log on the pure-Python path from now on (the loggers, handlers, event and traced
    functions and threads' channels made after this call), as ``BLOG_PURE_PYTHON=1``
    would. Reaches into the modules that chose between C and Python at their import
    (``python_twins``): a process chooses once. (The ``logging`` bridge's ``_log`` is put
    in place once, by the first BlogHandler: it stays as it was.)"""
    for module, name, python in python_twins():
        monkeypatch.setattr(module, name, python)


def pure_python_clock(monkeypatch, clock: Callable[[], int]) -> None:
    """Log on the pure-Python path with ``clock`` (ns since the epoch) as the loggers'
    clock. Reaches into ``blog.pipeline.logger``: the clock is not a parameter (the C path
    reads it itself)."""
    import blog.pipeline.logger
    python_path(monkeypatch)
    monkeypatch.setattr(blog.pipeline.logger, "_time_ns", clock)


def reader_zones(monkeypatch, zone: Callable[[list | None], object]) -> None:
    """Read as on a machine whose zone rules are ``zone`` (an encoded tz -> a tzinfo).
    Reaches into ``blogformat.valuedecoding``: the reader finds zones by name through
    ``zoneinfo``, which no public setting redirects per test."""
    from blogformat import valuedecoding
    monkeypatch.setattr(valuedecoding, "_zone", zone)


def format_cache(monkeypatch, chars: int) -> Callable[[], int]:
    """Bound ``bread.events``' cache of parsed formats to ``chars`` characters; a function
    giving how many it holds. Reaches into the cache: what it holds shows nowhere but in
    memory."""
    from bread import events
    monkeypatch.setattr(events, "_CACHE_CHARS", chars)
    return lambda: sum(len(k if type(k) is str else k[0]) for k in events._templates)


def count_tracer_calls(monkeypatch, step: str) -> list[tuple]:
    """The calls of ``@blog.traced`` functions that reach ``step`` of the Python tracer from
    now on (their arguments, one entry each): ``"enter"``, the Python wrapper (on the C
    path: the calls C hands back to Python); ``"bound"``, the binding by
    ``inspect.Signature.bind`` (the slow one). Reaches into
    ``blog.integrations.traced._Tracer``: nothing public tells the paths apart."""
    import blog.integrations.traced as traced
    calls: list[tuple] = []
    real = getattr(traced._Tracer, step)

    def counting(self, args, kwargs):
        calls.append((args, kwargs))
        return real(self, args, kwargs)

    monkeypatch.setattr(traced._Tracer, step, counting)
    return calls

def traced_by_reference(fn: Callable, **options) -> Callable:
    """``blog.traced(fn, **options)`` as the reference path makes it: the Python wrapper,
    every call bound by ``inspect.Signature.bind``. Reaches into
    ``blog.integrations.traced`` while it decorates: both paths write the same events."""
    import blog.integrations.traced as traced
    chosen, simple = traced.TracedCall, traced._simple
    traced.TracedCall, traced._simple = traced._python_alone, lambda params: False
    try:
        return traced.traced(fn, **options)
    finally:
        traced.TracedCall, traced._simple = chosen, simple


def without_span(fields: dict) -> dict:
    """An event's fields without a span's (``trace_id``, ``span_id``, ``parent_span_id``:
    ``blog.correlation``), which a traced call's events carry where OpenTelemetry is
    installed."""
    return {k: v for k, v in fields.items() if k not in SPAN_FIELDS}


#: The fields of a span's ids (docs/opentelemetry.md).
SPAN_FIELDS = ("trace_id", "span_id", "parent_span_id")


def span_shape(fields: dict) -> dict:
    """An event's fields with each span id replaced by what it is (its length in hex
    digits, or None): what two paths writing the same calls agree on."""
    shaped = dict(fields)
    for k in SPAN_FIELDS:
        if k in shaped:
            v = shaped[k]
            shaped[k] = None if v is None else (
                f"<{len(v)} hex>" if re.fullmatch(r"[0-9a-f]+", v) else v)
    return shaped


# --- a local S3-compatible server (moto) ---------------------------------------------------


class S3Server:
    """moto's S3 in server mode on 127.0.0.1 (a free port), each request it served noted in
    ``served`` as (method, path, Range header, bytes of the body): what a reader fetched."""

    def __init__(self) -> None:
        from moto.moto_server.threaded_moto_server import (DomainDispatcherApplication,
                                                           MotoRequestHandler,
                                                           create_backend_app)
        from werkzeug.serving import make_server
        self.served: list[tuple[str, str, str | None, int]] = []
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._noting(app), True,
                                   request_handler=MotoRequestHandler)
        self.endpoint = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _noting(self, app: Callable) -> Callable:
        def wsgi(environ: dict, start_response: Callable) -> list[bytes]:
            body = b"".join(app(environ, start_response))
            self.served.append((environ["REQUEST_METHOD"], environ["PATH_INFO"],
                                environ.get("HTTP_RANGE"), len(body)))
            return [body]
        return wsgi

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


class StubS3:
    """Just enough S3 on 127.0.0.1 for the faults moto does not make: ListObjectsV2 of
    bucket ``b`` (pages of ``page`` keys; ``listing``: ``new``, pages without end, each with
    a new continuation token, ``same``, the same page and token again and again, ``empty``,
    the same token again without keys after the first page; the endless pages' keys ``pad``
    characters longer; ``lists`` counts the requests), HEAD and ranged GET of its
    ``objects``, each key's ``faults``: ``gone`` (404: deleted since the listing), ``500``
    (GETs from offset ``fail_from`` on), ``hang`` (a GET answered by nothing for ``HANG``
    seconds, then closed), ``start`` (206 with the object's first bytes, whatever the
    range), ``whole`` (200 with the whole object). Stops itself (``stop``); its threads end
    with the hang."""

    HANG = 8.0

    def __init__(self, objects: dict, faults: dict | None = None, fail_from: int = 0) -> None:
        self.objects, self.faults, self.fail_from = objects, faults or {}, fail_from
        self.listing: str | None = None
        self.page, self.pad, self.lists = 1000, 0, 0
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                stub.answer(self, head=True)

            def do_GET(self) -> None:
                stub.answer(self, head=False)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None   # (a client gone: fine)
        self.endpoint = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @staticmethod
    def send(h, code: int, body: bytes = b"", headers=(), head: bool = False,
             length: int | None = None) -> None:
        h.send_response(code)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body) if length is None else length))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def list_page(self, h, query: dict) -> None:
        """A page of ListObjectsV2: from the continuation token on (a key's index), or one
        of the endless ``listing``'s."""
        self.lists += 1
        prefix = query.get("prefix", [""])[0]
        count = min(self.page, int(query.get("max-keys", ["1000"])[0]))
        if self.listing is None:
            keys = sorted(k for k in self.objects if k.startswith(prefix))
            at = int(query.get("continuation-token", ["0"])[0])
            more = at + count < len(keys)
            keys, token = keys[at:at + count], str(at + count)
        else:
            n = self.lists if self.listing == "new" else 0
            if self.listing == "empty" and "continuation-token" in query:
                count = 0
            keys = [f"{prefix}{'x' * self.pad}{n:09d}-{i:04d}.blog" for i in range(count)]
            more, token = True, f"t{n}"
        body = "".join(f"<Contents><Key>{k}</Key><Size>{len(self.objects.get(k, b'x'))}</Size>"
                       "<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
                       for k in keys)
        nxt = f"<NextContinuationToken>{token}</NextContinuationToken>" if more else ""
        return self.send(h, 200, (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name>'
            f"<Prefix>{prefix}</Prefix>{body}<KeyCount>{len(keys)}</KeyCount>"
            f"<IsTruncated>{str(more).lower()}</IsTruncated>{nxt}</ListBucketResult>").encode(),
            [("Content-Type", "application/xml")])

    def answer(self, h, head: bool) -> None:
        url = urlparse(h.path)
        key = url.path.lstrip("/").partition("/")[2]
        if "list-type" in parse_qs(url.query):
            return self.list_page(h, parse_qs(url.query))
        data, fault = self.objects.get(key), self.faults.get(key)
        if data is None or fault == "gone":
            return self.send(h, 404, b"" if head else b"<Error><Code>NoSuchKey</Code></Error>",
                             [("Content-Type", "application/xml")], head)
        if head:
            return self.send(h, 200, headers=[("Last-Modified", "Thu, 01 Jan 2026 00:00:00 "
                                               "GMT")], head=True, length=len(data))
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", h.headers.get("Range") or "")
        a, b = (int(m.group(1)), min(int(m.group(2)), len(data) - 1)) if m else (0, len(data) - 1)
        if fault == "500" and a >= self.fail_from:
            return self.send(h, 500, b"<Error><Code>InternalError</Code></Error>")
        if fault == "hang":
            time.sleep(self.HANG)
            h.close_connection = True
            return None
        if fault == "whole" or not m:
            return self.send(h, 200, data)
        if fault == "start":
            a, b = 0, b - a
        return self.send(h, 206, data[a:b + 1], [("Content-Range", f"bytes {a}-{b}/{len(data)}")])


def aged_set_dir(tmp_path, name: str = "logs", files: int = 3) -> str:
    """A directory ``tmp_path/name`` with a closed set of ``files`` files of 50 events each
    (each event's args unique), all last written an hour ago."""
    d = str(tmp_path / name)
    os.mkdir(d)
    s = blog.Session(name="w")
    rf = blog.RotatingFile(os.path.join(d, "app.blog"), rotate_bytes=1 << 20)
    log = s.get_logger("x")
    for k in range(files):
        for i in range(50):
            log.info("e {} {}", k, i)
        s.consume(rf)
        if k < files - 1:          # the next file (rotate_bytes cuts a consume: not per batch)
            s.finish(rf)
            rf.rotate()
    rf.close()
    t = os.path.getmtime(d) - 3600
    for n in os.listdir(d):
        os.utime(os.path.join(d, n), (t, t))
    return d


class CountingDrainer:
    """A drainer of one's own (``Session.attach``): counts wake-ups, never lets a producer
    wait."""

    def __init__(self) -> None:
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1

    def can_wait(self) -> bool:
        return False
