"""Reading from object storage (bread.inputs.objectstore): an S3 prefix, object, pattern or file://
URL gives what the same local directory gives, fetched by ranges, with the manifest's time
skipping; without pyarrow a URL says which extra to install.

The server is moto's S3 on 127.0.0.1 (the ``s3`` fixture): nothing else is contacted
(conftest sets dummy keys, no instance metadata). gs:// and hdfs:// have no local server
here: only their way through pyarrow.fs to an error is tested.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

import blog
import bread
from blogformat.frames import FRAME_EVENTS, HEADER_SIZE, parse_header
from blogstore import manifest
from bread.frames import CHUNK, span_frames
from bread.inputs.objectstore import MAX_BLOCK, MIN_BLOCK, RangedFile, Store

from helpers import StubS3, python_child, run_cli

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (the spark extra)")
pafs = pytest.importorskip("pyarrow.fs")

BUCKET = "blog-logs"
#: A service's child: a rotated, compressed set of small files, the manifest beside it.
CHILD = """
import sys, blog
blog.basic_config(sys.argv[1], rotate_bytes=3000, compress=True)
log = blog.get_logger("svc")
for i in range(400):
    log.info("request {} of {}", i, sys.argv[2], route="/orders")
    if i % 40 == 39:
        blog.flush()
blog.shutdown()
"""


def big_file(path, n: int = 60000) -> None:
    """One plain file of large frames (a consume every 6,000 events): about 3 MB."""
    s = blog.Session()
    log = s.get_logger("big")
    out = blog.FileOutputStream(str(path), mode="wb")
    for i in range(n):
        log.info("order {} filled at {} qty {}", i, 101.25 + i, "AAPL")
        if i % 6000 == 5999:
            s.consume(out)
    s.consume(out)
    out.close()


def upload(fs, local: str, key: str) -> None:
    with open(local, "rb") as src, fs.open_output_stream(key, compression=None) as dst:
        dst.write(src.read())


@pytest.fixture(scope="module")
def stored(s3, tmp_path_factory):
    """(local directory, its s3:// URL, storage options): the set of three processes, the
    manifest, and ``big.blog``, each file uploaded as it is."""
    d = tmp_path_factory.mktemp("svc")
    children = [subprocess.Popen(python_child("-c", CHILD, str(d / "app.blog"), f"p{k}"))
                for k in range(3)]
    assert [c.wait(timeout=120) for c in children] == [0, 0, 0]
    big_file(d / "big.blog")
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint, allow_bucket_creation=True)
    fs.create_dir(BUCKET)
    for name in os.listdir(d):
        upload(fs, str(d / name), f"{BUCKET}/svc/{name}")
    return str(d), f"s3://{BUCKET}/svc", {"endpoint_override": s3.endpoint}


def same(events) -> list[tuple]:
    """What an event says, less where it was read from."""
    return [(e.time, e.clock, e.writer, e.pid, e.severity, e.category, e.message,
             tuple(e.args), tuple(sorted(e.fields.items()))) for e in events]


def test_a_prefix_an_object_and_a_pattern_read_as_the_local_directory(stored):
    local, url, opts = stored
    names = sorted(n for n in os.listdir(local) if n.endswith((".blog", ".blog.gz")))
    assert any(n.endswith(".gz") for n in names) and len(names) > 6
    r = bread.read(url, storage_options=opts)
    assert same(r) == same(bread.read(local))
    assert r.damage == [] and len(r.headers) == len(names)
    assert same(bread.read(url + "/", sort=True, storage_options=opts)) == same(
        bread.read(local, sort=True))
    assert same(bread.read(f"{url}/app.*.gz", storage_options=opts)) == same(
        bread.read(os.path.join(local, "app.*.gz")))
    one = next(n for n in names if n.endswith(".gz"))
    got = list(bread.read(f"{url}/{one}", storage_options=opts))
    assert same(got) == same(bread.read(os.path.join(local, one)))
    assert {e.path for e in got} == {f"{url}/{one}"}


def test_batches_of_a_url_are_the_local_batches(stored):
    local, url, opts = stored
    cols = ["time", "writer", "severity", "message", "args", "fields"]
    remote = pa.Table.from_batches(list(bread.read_batches(url, cols, storage_options=opts)))
    assert remote.num_rows > 60000
    assert remote.equals(pa.Table.from_batches(list(bread.read_batches(local, cols))))


def test_the_command_line_reads_a_url_with_endpoint_and_region(stored, capsys):
    local, url, opts = stored
    code, out, err = run_cli(["-s", "--endpoint", opts["endpoint_override"],
                              "--region", "us-east-1", url], capsys)
    assert (code, err) == (0, "")
    assert out == run_cli(["-s", local], capsys)[1]
    code, _, err = run_cli(["--endpoint", opts["endpoint_override"], url + "/none*"], capsys)
    assert code == 2 and "none*" in err


def test_a_time_window_skips_objects_by_the_manifest_without_fetching_them(stored, s3):
    local, url, opts = stored
    entries = manifest.load(local)["files"]
    middle = sorted(e["last_ns"] for e in entries.values())[len(entries) // 2]
    here = bread.read(local, since=middle)
    there = bread.read(url, since=middle, storage_options=opts)
    s3.served.clear()
    assert same(there) == same(here)
    assert here.skipped and [os.path.basename(p) for p in there.skipped] == [
        os.path.basename(p) for p in here.skipped]
    fetched = {path for method, path, _, _ in s3.served if method == "GET"}
    assert not fetched & {f"/{BUCKET}/svc/{os.path.basename(p)}" for p in here.skipped}


def test_a_part_of_a_large_object_fetches_its_range_and_the_metadata_before_it(stored, s3):
    local, url, opts = stored
    size = os.path.getsize(os.path.join(local, "big.blog"))
    cut = [size * k // 8 for k in range(9)]
    parts, fetched = [], []
    for start, end in zip(cut, cut[1:]):
        s3.served.clear()
        parts.append(list(bread.read_batches(f"{url}/big.blog", ["clock", "message"],
                                             span=(start, end), storage_options=opts)))
        fetched.append(sum(n for method, path, _, n in s3.served
                           if method == "GET" and path.endswith("/big.blog")))
    whole = bread.read_batches(os.path.join(local, "big.blog"), ["clock", "message"])
    assert pa.Table.from_batches([b for part in parts for b in part]).equals(
        pa.Table.from_batches(list(whole)))
    # The sixth eighth: its frames and a few KiB per frame before it; never the 5/8 of
    # the object before it.
    assert 0 < fetched[5] < size // 3, (fetched, size)


def frame_ends(data: bytes) -> list[int]:
    """Where each frame of a whole, undamaged log file ends."""
    ends, pos = [], 0
    while pos < len(data):
        pos += HEADER_SIZE + parse_header(data[pos:pos + HEADER_SIZE])[2]
        ends.append(pos)
    return ends


def test_parts_of_an_object_fetch_nothing_past_their_last_frame(stored, s3):
    # Every frame is fetched once, by the part where it begins, and nothing is read ahead
    # past the last one (before: up to 8 MiB of read-ahead, 1.9x the object in all).
    local, url, opts = stored
    fs = pafs.S3FileSystem(**opts)
    with fs.open_input_file(f"{BUCKET}/svc/big.blog") as f:
        data = f.read()
    ends = frame_ends(data)
    starts = [0] + ends[:-1]
    cut = [len(data) * k // 8 for k in range(9)]
    total = bound = 0
    for start, end in zip(cut, cut[1:]):
        s3.served.clear()
        for _ in bread.read_batches(f"{url}/big.blog", ["clock"], span=(start, end),
                                    storage_options=opts):
            pass
        got = [(rng, n) for method, path, rng, n in s3.served
               if method == "GET" and path.endswith("/big.blog")]
        # (the reader reads on in pieces of 64 KiB: the last may pass the frame's end)
        last = max(e for s, e in zip(starts, ends) if start <= s < end) + CHUNK
        assert max(int(rng.rpartition("-")[2]) + 1 for rng, _ in got) <= last, (got, last)
        total += sum(n for _, n in got)
        # its first 8 KiB, 4 KiB a frame header before it, the last piece of 64 KiB
        bound += 2 * MIN_BLOCK + MIN_BLOCK * sum(s < start for s in starts) + CHUNK
    # the frames once, and what each part reads to find its place
    assert len(data) <= total <= len(data) + bound, (total, len(data), bound)


class Reads(io.BytesIO):
    """A file in memory that notes where each read begins."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.at: list[int] = []

    def read(self, n: int | None = -1) -> bytes:
        self.at.append(self.tell())
        return super().read(n)


def test_a_part_stops_reading_with_the_last_frame_that_begins_in_it(tmp_path):
    # The next frame's header is not read: it begins at or past the part's end (with
    # read-ahead that stops at the end, one request fewer per part of an object).
    big_file(tmp_path / "big.blog", 30000)
    data = (tmp_path / "big.blog").read_bytes()
    ends = frame_ends(data)
    starts = [0] + ends[:-1]
    f = Reads(data)
    got = list(span_frames(f, starts[3] + 1, starts[5] + 1))
    assert [fr.offset for fr in got if fr.kind == FRAME_EVENTS] == starts[4:6]
    assert max(f.at) < ends[5], (f.at, ends[5])


class Recording:
    """A pyarrow random-access file that notes each ranged read."""

    def __init__(self, data: bytes) -> None:
        self.data, self.reads = data, []

    def size(self) -> int:
        return len(self.data)

    def read_at(self, n: int, at: int) -> bytes:
        self.reads.append((at, n))
        return self.data[at:at + n]


def test_a_range_read_whole_is_fetched_in_large_blocks_and_nothing_ahead_past_it():
    data = bytes(range(256)) * (100 << 12)       # 100 MiB
    raw = Recording(data)
    f = RangedFile(raw, "x")
    lo, hi = 3 << 20, 3 * MAX_BLOCK + (5 << 20)
    f.read_range(lo, hi)
    f.seek(1000)
    assert f.read(16) == data[1000:1016]            # before the range: a small read
    f.seek(lo)
    got = [f.read(1 << 16) for _ in range((hi - lo) >> 16)]
    assert b"".join(got) == data[lo:hi]
    blocks = [(lo + k * MAX_BLOCK, MAX_BLOCK) for k in range(3)]
    assert raw.reads == [(1000, MIN_BLOCK), *blocks, (lo + 3 * MAX_BLOCK, 2 << 20)]
    del raw.reads[:]
    assert f.read(100) + f.read(20) == data[hi:hi + 120]
    assert raw.reads == [(hi, 100), (hi + 100, 20)]     # past its end: what is asked
    assert f.read(50000) == data[hi + 120:hi + 50120]
    assert raw.reads == [(hi, 100), (hi + 100, 20), (hi + 120, 50000)]


def test_file_urls_read_as_the_path(stored):
    local, _, _ = stored
    assert same(bread.read("file://" + local)) == same(bread.read(local))
    assert same(bread.read(f"file://{local}/app.*.gz")) == same(
        bread.read(os.path.join(local, "app.*.gz")))


def test_a_url_of_an_object_whose_name_has_pattern_characters_is_that_object(tmp_path):
    # Proves: as a local path, a URL that exists is never taken for a pattern (a Spark task
    # re-expands the URLs a prefix listed); only a missing one is matched.
    for name, n in [("a[1].blog", 1), ("a1.blog", 2), ("b?.blog", 3), ("bx.blog", 4)]:
        s = blog.Session()
        for i in range(n):
            s.get_logger("c").info("{} of {}", i, name)
        out = blog.FileOutputStream(str(tmp_path / name), mode="wb")
        s.consume(out)
        out.close()
    url = f"file://{tmp_path}"
    store = Store()
    for name in ["a[1].blog", "b?.blog"]:
        assert store.expand(f"{url}/{name}") == [f"{url}/{name}"]
        assert same(bread.read(f"{url}/{name}")) == same(bread.read(str(tmp_path / name)))
    assert store.expand(f"{url}/a[1]*") == [f"{url}/a1.blog"]
    assert store.expand(f"{url}/b?.*") == [f"{url}/b?.blog", f"{url}/bx.blog"]
    assert [u.rpartition("/")[2] for u in store.expand(url)] == [
        "a1.blog", "a[1].blog", "b?.blog", "bx.blog"]


def test_a_url_without_pyarrow_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.fs", None)
    with pytest.raises(ImportError, match=r"pip install 'blog-bread\[spark\]'"):
        list(bread.read("s3://bucket/logs/"))


def test_the_command_line_says_a_url_needs_pyarrow(tmp_path):
    code = ("import sys; sys.modules['pyarrow'] = None; from bread import cli; "
            "sys.exit(cli.main(['s3://bucket/logs/']))")
    r = subprocess.run(python_child("-c", code), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "blog-bread[spark]" in r.stderr


def test_gs_and_hdfs_urls_are_made_by_pyarrow_fs_and_fail_naming_the_url():
    # No server here: a GCS endpoint that refuses, HDFS without libhdfs (or a refused port).
    gs = {"endpoint_override": "127.0.0.1:1", "scheme": "http", "anonymous": True,
          "retry_time_limit": __import__("datetime").timedelta(seconds=1)}
    with pytest.raises(OSError) as exc:
        list(bread.read("gs://bucket/logs/", storage_options=gs))
    assert exc.value.filename == "gs://bucket/logs/"
    with pytest.raises(OSError) as exc:
        list(bread.read("hdfs://127.0.0.1:1/logs/"))
    assert exc.value.filename == "hdfs://127.0.0.1:1/logs/"


def test_compact_takes_a_local_directory_only(capsys):
    code, _, err = run_cli(["compact", "s3://bucket/logs", "--older-than", "1d"], capsys)
    assert code == 2 and "local directory" in err


def test_names_from_a_listing_are_data(s3, capsys):
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint, allow_bucket_creation=True)
    with fs.open_output_stream(f"{BUCKET}/odd/x\x1b[2Jy.blog", compression=None) as f:
        f.write(b"not a log")
    code, _, err = run_cli(["--endpoint", s3.endpoint, f"s3://{BUCKET}/odd"], capsys)
    assert code == 3 and "\x1b" not in err and "x\\x1b[2Jy.blog" in err


def test_stats_and_export_read_a_url_at_the_environment_s_endpoint(stored, s3, monkeypatch,
                                                                      capsys, tmp_path):
    local, url, _ = stored
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    code, out, _ = run_cli(["stats", url], capsys)
    assert code == 0 and out.splitlines()[0] == run_cli(["stats", local], capsys)[1].splitlines()[0]
    code, out, _ = run_cli(["export", "--parquet", str(tmp_path / "pq"), url + "/app.*"], capsys)
    assert code == 0 and (tmp_path / "pq").exists()


def test_following_a_url_is_refused(capsys):
    code, _, err = run_cli(["-F", "s3://bucket/logs/"], capsys)
    assert code == 1 and "not a URL" in err
    with pytest.raises(ValueError, match="not a URL"):
        bread.read("s3://bucket/logs/", follow=True)


def test_a_ranged_file_read_at_or_past_its_end_gives_nothing_as_a_file_does(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(range(256)) * 100)
    f = RangedFile(pafs.LocalFileSystem().open_input_file(str(path)), "x")
    with open(path, "rb") as plain:
        for offset, whence, n in [(30000, 0, 10), (25600, 0, 10), (25590, 0, 100),
                                  (0, 2, -1), (5, 2, 1), (0, 0, 3)]:
            assert f.seek(offset, whence) == plain.seek(offset, whence)
            assert f.read(n) == plain.read(n)
            assert f.tell() == plain.tell()


# --- faults of the store after the listing: a stub of S3 on 127.0.0.1 -----------------------

def log_bytes(tmp_path, name: str, n: int = 600) -> bytes:
    """A log file of ``n`` events (messages naming ``name``), in frames of 100: about
    12 KB for 600, read in several ranged requests."""
    s = blog.Session()
    log = s.get_logger("svc")
    path = tmp_path / name
    out = blog.FileOutputStream(str(path), mode="wb")
    for i in range(n):
        log.info("event {} of {}", i, name)
        if i % 100 == 99:
            s.consume(out)
    s.consume(out)
    out.close()
    return path.read_bytes()


@pytest.fixture
def stub(tmp_path):
    """A ``StubS3`` of four objects under ``logs/`` (``a``..``d.blog``), its faults set by
    the test (``stub.faults``), stopped after it."""
    objects = {f"logs/{c}.blog": log_bytes(tmp_path, f"{c}.blog") for c in "abcd"}
    server = StubS3(objects)
    yield server
    server.stop()


def messages(events) -> list[str]:
    return [e.message for e in events]


def once(endpoint: str) -> dict:
    """Storage options of a stub: each request tried once (a 5xx costs no retries)."""
    from pyarrow.fs import AwsStandardS3RetryStrategy
    return {"endpoint_override": endpoint,
            "retry_strategy": AwsStandardS3RetryStrategy(max_attempts=1)}


def test_an_object_that_fails_after_the_listing_is_damage_and_the_others_are_read(stub):
    # Proves: an object deleted since the listing (404) and one whose GETs fail (500) from
    # its second block on are damage naming their URLs, in file order and sorted; the
    # other objects are read whole (before: bread.read raised a bare OSError, the objects
    # after it unread).
    stub.faults = {"logs/b.blog": "gone", "logs/c.blog": "500"}
    stub.fail_from = 1        # (the first block of c.blog reads: its first events do)
    url = "s3://b/logs"
    for sort in (False, True):
        r = bread.read(url, sort=sort, storage_options=once(stub.endpoint))
        got = messages(r)
        for c in "ad":
            assert sum(m.endswith(f"of {c}.blog") for m in got) == 600, (sort, c)
        assert not any(m.endswith("of b.blog") for m in got)
        # file order: what c.blog's first block held (none if the store's client retried
        # that first request under load: the stub fails every request after the first);
        # sorted: none of it (its index failed). Never all of it: the rest is damage.
        assert sum(m.endswith("of c.blog") for m in got) < 600
        broken = {d.source: d.reason for d in r.damage if "object" in d.reason}
        assert set(broken) == {f"{url}/b.blog", f"{url}/c.blog"}, r.damage
        assert "no such file" in broken[f"{url}/b.blog"]
        assert "INTERNAL_FAILURE" in broken[f"{url}/c.blog"], broken


def test_bread_says_which_objects_failed_and_exits_3(stub, capsys):
    # Proves: bread (and bread -s) prints the other objects' events, names each failed
    # object with its reason, escaped, and exits 3 (before: a traceback, exit 1).
    stub.faults = {"logs/b.blog": "gone", "logs/c.blog": "whole"}
    url = "s3://b/logs"
    for args in ([], ["-s"]):
        code, out, err = run_cli([*args, "--endpoint", stub.endpoint, url], capsys)
        assert code == 3, err
        assert "Traceback" not in err
        assert f"bread: {url}/b.blog: " in err and f"bread: {url}/c.blog: " in err
        assert out.count("of a.blog") == 600 and out.count("of d.blog") == 600
        assert "of b.blog" not in out


def test_an_object_whose_request_hangs_times_out_as_damage(stub, monkeypatch):
    # Proves: a GET that the server never answers ends after BREAD_STORE_TIMEOUT (whole
    # seconds), the object damage naming its URL, the others read (before: pyarrow's 3 s,
    # then an OSError out of bread.read).
    stub.faults = {"logs/c.blog": "hang"}
    monkeypatch.setenv("BREAD_STORE_TIMEOUT", "1")
    r = bread.read("s3://b/logs", storage_options=once(stub.endpoint))
    got = messages(r)
    assert [c for c in "abcd" if any(m.endswith(f"of {c}.blog") for m in got)] == ["a", "b", "d"]
    assert [(d.source, "Timeout" in d.reason) for d in r.damage] == [("s3://b/logs/c.blog", True)]


def test_the_store_s_timeouts_default_and_come_from_the_environment(monkeypatch):
    from bread.inputs.objectstore import timeouts
    monkeypatch.delenv("BREAD_STORE_TIMEOUT", raising=False)
    assert timeouts() == {"connect_timeout": 10, "request_timeout": 30}
    monkeypatch.setenv("BREAD_STORE_TIMEOUT", "120")
    assert timeouts() == {"connect_timeout": 10, "request_timeout": 120}
    monkeypatch.setenv("BREAD_STORE_TIMEOUT", "2")
    assert timeouts() == {"connect_timeout": 2, "request_timeout": 2}
    for bad in ("0", "0.5", "x"):     # (under a second, curl would have no timeout at all)
        monkeypatch.setenv("BREAD_STORE_TIMEOUT", bad)
        with pytest.raises(ValueError, match="BREAD_STORE_TIMEOUT"):
            list(bread.read("s3://b/logs/"))


@pytest.mark.parametrize("fault", ["start", "whole"])
def test_a_server_that_ignores_range_is_damage_never_misread(stub, capsys, fault):
    # Proves: a server answering a ranged GET with the object's first bytes (206, a wrong
    # or no Content-Range) or with the whole object (200) has each object damage, named,
    # and no event read from bytes other than those asked (before: the first bytes read
    # again as if they were further on, or a traceback).
    stub.faults = dict.fromkeys(stub.objects, fault)
    r = bread.read("s3://b/logs", storage_options={"endpoint_override": stub.endpoint})
    assert messages(r) == []
    assert sorted(d.source for d in r.damage) == [f"s3://b/logs/{c}.blog" for c in "abcd"]
    code, out, err = run_cli(["--endpoint", stub.endpoint, "s3://b/logs"], capsys)
    assert (code, out) == (3, "") and err.count("s3://b/logs/") == 4, err


SECRET = "wJalr/XUtnFEMI+K7MDENG"


@pytest.mark.parametrize("url", [f"s3://AKIAEXAMPLE:{SECRET}@bucket/logs/",
                                 f"gs://AKIAEXAMPLE:{SECRET}@bucket/a.blog",
                                 f"hdfs://AKIAEXAMPLE:{SECRET}@host:8020/logs/"])
def test_credentials_in_a_url_are_refused_and_never_shown(url, capsys):
    # Proves: bread exits 2 saying why, bread.read and Spark's planning raise OSError, and
    # neither the key nor the secret appears anywhere (before: a traceback quoting the URL).
    code, out, err = run_cli([url], capsys)
    assert code == 2 and "credentials" in err and "Traceback" not in err
    assert SECRET not in err and "AKIAEXAMPLE" not in err and "wJalr" not in err
    with pytest.raises(OSError) as exc:
        list(bread.read(url))
    shown = f"{exc.value!s} {exc.value!r} {exc.value.filename}"
    assert "credentials" in shown and "wJalr" not in shown and "AKIAEXAMPLE" not in shown
    code, _, err = run_cli(["stats", url], capsys)
    assert code == 2 and "wJalr" not in err and "AKIAEXAMPLE" not in err


# --- a listing that never ends: bounded in keys, memory and time (bread.inputs.lister) ------------

def bread_child(endpoint: str, url: str, **env: str) -> subprocess.CompletedProcess:
    """``bread --endpoint ENDPOINT URL`` run in a child with ``env`` added, bounded to a
    minute (a listing without end would otherwise hang the test)."""
    return subprocess.run(python_child("-m", "bread", "--endpoint", endpoint, url),
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("listing", ["new", "same"])
def test_a_listing_that_never_ends_stops_as_the_prefix_s_damage(stub, listing):
    # Proves: a server answering every ListObjectsV2 with one more page (a new continuation
    # token each time, or the same one again) no longer keeps bread listing for ever, its
    # memory growing: past BREAD_STORE_MAX_KEYS keys' memory the listing stops, bread names
    # the URL and why on stderr and exits 3 (damage), and no request follows (before: the
    # child still listing after a minute, ~12 pages a second).
    stub.listing, stub.pad = listing, 600      # (pages of 1000 long keys: memory grows fast)
    p = bread_child(stub.endpoint, "s3://b/logs", BREAD_STORE_MAX_KEYS="2000")
    assert p.returncode == 3, p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr == ("bread: s3://b/logs: damage at offset 0 (the listing did not end: more "
                        "than 2000 keys, by the memory it took (BREAD_STORE_MAX_KEYS))\n")
    asked = stub.lists
    time.sleep(0.5)
    assert stub.lists == asked            # (the lister is gone)


def test_a_listing_of_empty_pages_without_end_stops_at_its_time_bound(stub, monkeypatch):
    # Proves: pages without keys, the same continuation token again and again (nothing to
    # count), stop after BREAD_STORE_LIST_TIMEOUT seconds: bread.read reports the prefix as
    # damage and reads the other inputs (before: bread.read never returned).
    stub.listing = "empty"
    p = bread_child(stub.endpoint, "s3://b/logs", BREAD_STORE_LIST_TIMEOUT="1")
    assert p.returncode == 3 and p.stderr == ("bread: s3://b/logs: damage at offset 0 (the "
                                              "listing did not end within 1 s "
                                              "(BREAD_STORE_LIST_TIMEOUT))\n"), p.stderr
    monkeypatch.setenv("BREAD_STORE_LIST_TIMEOUT", "2")
    other = stub.objects["logs/a.blog"]
    r = bread.read(["s3://b/logs", io.BytesIO(other)],
                   storage_options={"endpoint_override": stub.endpoint})
    assert len(messages(r)) == 600
    assert [(d.source, d.reason) for d in r.damage] == [
        ("s3://b/logs", "the listing did not end within 2 s (BREAD_STORE_LIST_TIMEOUT)")]


def test_a_listing_of_several_pages_is_read_whole_and_one_past_the_key_bound_is_cut(
        stub, monkeypatch):
    # Proves: a listing of three pages (2,504 keys) gives every log file, through the
    # lister's process, and with BREAD_STORE_MAX_KEYS under its keys it is cut, named.
    stub.objects.update({f"logs/other-{i:04d}.txt": b"x" for i in range(2500)})
    options = {"endpoint_override": stub.endpoint}
    r = bread.read("s3://b/logs", storage_options=options)
    assert len(messages(r)) == 2400 and r.damage == []
    assert stub.lists >= 3
    monkeypatch.setenv("BREAD_STORE_MAX_KEYS", "2503")
    r = bread.read("s3://b/logs", storage_options=options)
    assert messages(r) == []
    assert [(d.source, d.reason) for d in r.damage] == [
        ("s3://b/logs", "the listing did not end: more than 2503 keys (BREAD_STORE_MAX_KEYS)")]
    for bad in ("0", "x", "1.5"):
        monkeypatch.setenv("BREAD_STORE_MAX_KEYS", bad)
        with pytest.raises(ValueError, match="BREAD_STORE_MAX_KEYS"):
            list(bread.read("s3://b/logs", storage_options=options))


def test_the_command_line_lists_a_prefix_once(stored, s3, monkeypatch, capsys):
    # Proves: `bread PREFIX` (text, whose C++ check opens the inputs first; and -s) lists
    # the prefix once: each listing is a child process, and it was listed two or three
    # times (the inputs' check, the C++ check, then the reader).
    import bread.inputs.objectstore as objectstore
    _, url, opts = stored
    calls = []
    real = objectstore.listed

    def counted(*args):
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(objectstore, "listed", counted)
    for args in ([], ["-s"], ["-o", "jsonl"]):
        calls.clear()
        code, out, err = run_cli([*args, "--endpoint", opts["endpoint_override"], url], capsys)
        assert code == 0 and out, err
        assert len(calls) == 1, (args, calls)
