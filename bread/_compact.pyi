# bread._compact, bread compact's per-event work in C (bread/compact/_compact.c); its twins are
# bread/compact/compactor.py (Compactor._frame, _events, _columns) and bread/compact/runs.py,
# whose contract the types are. tests/test_c_stubs.py checks these names against the built
# module (mypy.stubtest).

from typing_extensions import Buffer

# An event record: (ns, writer id, seq, source id, n, raw), its time, its ids in the
# compacted stream, its place in the input, its event array's length and the bytes after
# its clock delta.
_Record = tuple[int, int, int, int, int, bytes]

# (records, pos, clock, seq, why, sid, event): why 0 all taken, 1 source id sid is not in
# ids, 2 the rest is Python's, 3 event (source id, clock delta, n, raw) is Python's to take.
def walk(
    payload: Buffer,
    pos: int,
    count: int,
    clock: int,
    wid: int,
    cv: int,
    freq: int,
    ns0: int,
    seq: int,
    ids: dict[int, int],
    /,
) -> tuple[list[_Record], int, int, int, int, int, tuple[int, int, int, bytes] | None]: ...

# The payloads of the events frames (one per writer), or of a columnar frame, of sorted
# records, counts (source id -> events) updated; None where Python makes them.
def rows(records: list[_Record], counts: dict[int, int], /) -> list[bytes] | None: ...
def columns(records: list[_Record], counts: dict[int, int], /) -> bytes | None: ...

# Sorted records in a run file's layout, None where one does not fit it; and back.
def pack_run(records: list[_Record], /) -> bytes | None: ...
def unpack_run(data: Buffer, /) -> list[_Record]: ...
