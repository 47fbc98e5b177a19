/*
 * bread._compact: the per-event work of `bread compact`, in C.
 *
 * The pure-Python code is the reference, which this matches byte for byte
 * (tests/test_compact_c.py runs both): walk() takes the events of an events frame
 * as Compactor._frame does (bread/compact/compactor.py), columns() encodes a stretch
 * of sorted events as blogformat.columnframes.encode does from _values_and_texts,
 * rows() as Compactor._events does. Whatever is not plainly the common case
 * (a described value to renumber, a value beyond 64 bits, an event of another shape,
 * damage) is left to the Python code: walk() says where it stopped, columns() and
 * rows() answer None, and the caller runs the reference.
 *
 * An event record is the tuple (ns, writer id, seq, source id, n, raw): its time, its
 * writer and source ids in the compacted stream, its place in the input, the element
 * count of its event array and the bytes after its clock delta.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mpread.h"
#include "mpwrite.h"

typedef __int128 i128;

/* Column codings (blogformat/columnframes.py, docs/format.md 5.5); 1, the clocks by delta
 * of delta, is read but no longer written (the clocks are a DELTAS column). */
enum { INTS = 0, DECIMALS = 2, DOUBLES = 3, STRINGS = 4, PACKED = 5, SAME = 6, PLAIN = 7,
       DELTAS = 8 };
#define MAX_VALUES 256
#define MAX_SCALE 15
#define EXACT 9007199254740992.0    /* 2**53 */
#define SEC 1000000000

static PyObject *zlib_compress;     /* zlib.compress: which int coding compresses best */

enum { R_NS, R_WID, R_SEQ, R_SID, R_N, R_RAW, R_FIELDS };

static inline int
in64(i128 v)
{
    return v >= (i128)INT64_MIN && v <= (i128)INT64_MAX;
}

/* --- the walk over an events frame ------------------------------------------------ */

/* As blogformat.valuedecoding.may_hold_described: the header of an extension 15 or 16
 * (or bytes that look like one) somewhere in data. */
static int
may_hold_described(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        Py_ssize_t at;
        if (c >= 0xd4 && c <= 0xd8) at = i + 1;
        else if (c == 0xc7) at = i + 2;
        else if (c == 0xc8) at = i + 3;
        else if (c == 0xc9) at = i + 5;
        else continue;
        if (at < n && (s[at] == 0x0f || s[at] == 0x10)) return 1;
    }
    return 0;
}

static int
as_ll(PyObject *o, long long *out)
{
    int over = 0;
    *out = PyLong_AsLongLongAndOverflow(o, &over);
    if (*out == -1 && PyErr_Occurred()) return -1;
    return over ? 1 : 0;
}

static inline i128
floor_div(i128 a, i128 b)
{
    i128 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* walk(payload, pos, count, clock, wid, cv, freq, ns0, seq, ids) ->
 *   (records, pos, clock, seq, why, sid, event)
 * The events from `pos` on (at most count), as records; why 0: all taken; 1: source
 * id `sid` is not in ids (the caller adds it and walks on from pos); 2: the event at pos
 * is one for the Python code (it takes the rest of the frame); 3: the event before pos
 * may hold a described value: `event` is its (source id, clock delta, n, raw) for the
 * Python code to renumber and take, and the walk goes on from pos. Where the clock, the
 * sync or seq is beyond 64 bits, why is 2 and clock and seq are the objects given. */
static PyObject *
walk(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count;
    PyObject *clock_o, *wid, *cv_o, *freq_o, *ns0_o, *seq_o, *ids;
    if (!PyArg_ParseTuple(args, "y*nnOOOOOOO!", &buf, &pos, &count, &clock_o, &wid, &cv_o,
                          &freq_o, &ns0_o, &seq_o, &PyDict_Type, &ids))
        return NULL;
    PyObject *out = PyList_New(0), *res = NULL, *last_new = NULL, *event = NULL;
    long long clock, cv, freq, ns0, seq, last_sid = 0, sid = 0;
    int why = 2, r1, r2, r3, r4, r5;
    if (out == NULL) goto done;
    r1 = as_ll(clock_o, &clock); r2 = as_ll(cv_o, &cv); r3 = as_ll(freq_o, &freq);
    r4 = as_ll(ns0_o, &ns0); r5 = as_ll(seq_o, &seq);
    if (r1 < 0 || r2 < 0 || r3 < 0 || r4 < 0 || r5 < 0) goto fail;
    if (r1 || r2 || r3 || r4 || r5 || freq <= 0 || pos < 0 || pos > buf.len) {
        /* a clock, sync or seq beyond 64 bits: nothing taken, the clock and seq handed
           back as they came (never the -1 of a failed conversion) for the Python code */
        res = Py_BuildValue("(OnOOiLO)", out, pos, clock_o, seq_o, why, sid, Py_None);
        goto fail;
    }
    const unsigned char *p = buf.buf, *end = p + buf.len;
    why = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Rd r = {p + pos, end};
        Val v;
        long long n = read_array(&r), delta, next;
        why = 2;
        if (n < 3 || read_value(&r, &v, 0) < 0 || v.kind != V_INT) break;
        sid = v.i;
        if (read_value(&r, &v, 0) < 0 || v.kind != V_INT) break;
        delta = v.i;
        const unsigned char *start = r.p, *at = r.p;
        for (long long j = 0; j < n - 2 && at != NULL; j++)
            at = skip_value(at, end, 0);
        if (at == NULL) break;
        if (may_hold_described(start, at - start)) {
            event = Py_BuildValue("(LLLy#)", sid, delta, n, start, (Py_ssize_t)(at - start));
            if (event == NULL) goto fail;
            pos = at - p;
            why = 3;
            break;
        }
        if (__builtin_add_overflow(clock, delta, &next)) break;
        i128 ns = (i128)ns0 + floor_div(((i128)next - cv) * SEC, freq);
        if (!in64(ns)) break;
        PyObject *new_sid = last_new;
        if (new_sid == NULL || sid != last_sid) {
            PyObject *key = PyLong_FromLongLong(sid);
            if (key == NULL) goto fail;
            new_sid = PyDict_GetItemWithError(ids, key);
            Py_DECREF(key);
            if (new_sid == NULL) {
                if (PyErr_Occurred()) goto fail;
                why = 1;
                break;
            }
            last_sid = sid;
            last_new = new_sid;
        }
        PyObject *rec = PyTuple_New(R_FIELDS);
        if (rec == NULL) goto fail;
        PyTuple_SET_ITEM(rec, R_NS, PyLong_FromLongLong((long long)ns));
        Py_INCREF(wid);
        PyTuple_SET_ITEM(rec, R_WID, wid);
        PyTuple_SET_ITEM(rec, R_SEQ, PyLong_FromLongLong(seq + 1));
        Py_INCREF(new_sid);
        PyTuple_SET_ITEM(rec, R_SID, new_sid);
        PyTuple_SET_ITEM(rec, R_N, PyLong_FromLongLong(n));
        PyTuple_SET_ITEM(rec, R_RAW, PyBytes_FromStringAndSize((const char *)start, at - start));
        if (PyTuple_GET_ITEM(rec, R_NS) == NULL || PyTuple_GET_ITEM(rec, R_SEQ) == NULL
            || PyTuple_GET_ITEM(rec, R_N) == NULL || PyTuple_GET_ITEM(rec, R_RAW) == NULL
            || PyList_Append(out, rec) < 0) {
            Py_DECREF(rec);
            goto fail;
        }
        Py_DECREF(rec);
        clock = next;
        seq++;
        pos = at - p;
        why = 0;
    }
    res = Py_BuildValue("(OnLLiLO)", out, pos, clock, seq, why, sid, event ? event : Py_None);
fail:
    Py_XDECREF(out);
    Py_XDECREF(event);
done:
    PyBuffer_Release(&buf);
    return res;
}

/* --- reading records ------------------------------------------------------------- */

typedef struct { const unsigned char *p; Py_ssize_t n; } Span;

typedef struct {
    long long ns, wid, sid;
    long n;
    const unsigned char *raw;
    Py_ssize_t len;
} Rec;

/* The records of chunk (a list of record tuples) as Recs; 1 where one is not what walk()
 * or the Python code makes of a plain event (the caller then answers None). */
static int
read_records(PyObject *chunk, Rec *recs)
{
    Py_ssize_t n = PyList_GET_SIZE(chunk);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(chunk, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != R_FIELDS
            || !PyBytes_Check(PyTuple_GET_ITEM(t, R_RAW)))
            return 1;
        long long x[4];
        static const int at[4] = {R_NS, R_WID, R_SID, R_N};
        for (int j = 0; j < 4; j++) {
            PyObject *o = PyTuple_GET_ITEM(t, at[j]);
            if (!PyLong_CheckExact(o)) return 1;
            int r = as_ll(o, &x[j]);
            if (r) { PyErr_Clear(); return 1; }
        }
        recs[i].ns = x[0];
        recs[i].wid = x[1];
        recs[i].sid = x[2];
        if (x[3] < 0 || x[3] > 0xffff) return 1;
        recs[i].n = (long)x[3];
        recs[i].raw = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(t, R_RAW));
        recs[i].len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, R_RAW));
    }
    return 0;
}

/* --- ids in first-seen order --------------------------------------------------------- */

/* An open-addressing table of int64 keys, each given the index of its first sight. */
typedef struct { long long *keys; Py_ssize_t *slot, cap, n; } Ids;

static int
ids_init(Ids *t, Py_ssize_t most)
{
    t->cap = 16;
    while (t->cap < 2 * most) t->cap *= 2;
    t->n = 0;
    t->keys = PyMem_Malloc(sizeof(long long) * (size_t)most);
    t->slot = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)t->cap);
    if (t->keys == NULL || t->slot == NULL) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < t->cap; i++) t->slot[i] = -1;
    return 0;
}

static void
ids_free(Ids *t)
{
    PyMem_Free(t->keys);
    PyMem_Free(t->slot);
}

/* The index of key (given the next one if it is new). */
static Py_ssize_t
ids_get(Ids *t, long long key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ULL;
    Py_ssize_t i = (Py_ssize_t)(h >> 20) & (t->cap - 1);
    while (t->slot[i] >= 0) {
        if (t->keys[t->slot[i]] == key) return t->slot[i];
        i = (i + 1) & (t->cap - 1);
    }
    t->keys[t->n] = key;
    t->slot[i] = t->n;
    return t->n++;
}

/* counts[key] += tally for each key of t, in t's order. */
static int
add_counts(PyObject *counts, Ids *t, const Py_ssize_t *tally)
{
    for (Py_ssize_t i = 0; i < t->n; i++) {
        PyObject *key = PyLong_FromLongLong(t->keys[i]);
        if (key == NULL) return -1;
        PyObject *had = PyDict_GetItemWithError(counts, key);
        long long was = 0;
        if (had == NULL && PyErr_Occurred()) { Py_DECREF(key); return -1; }
        if (had != NULL && (was = PyLong_AsLongLong(had)) == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        PyObject *now = PyLong_FromLongLong(was + tally[i]);
        int r = now == NULL ? -1 : PyDict_SetItem(counts, key, now);
        Py_XDECREF(now);
        Py_DECREF(key);
        if (r < 0) return -1;
    }
    return 0;
}

/* --- columns --------------------------------------------------------------------- */

static inline uint64_t
zigzag(long long v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int
put_varint(Buf *b, uint64_t z)
{
    if (buf_reserve(b, 10) < 0) return -1;
    while (z >= 0x80) {
        b->p[b->len++] = (char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    b->p[b->len++] = (char)z;
    return 0;
}

static int
put_bin(Buf *b, const char *data, Py_ssize_t n)
{
    return put_raw(b, 0, 0xc4, 0xc5, 0xc6, data, n, 0);
}

/* An int in [-2**63, 2**64) as msgpack-python packs it. */
static int
put_wide(Buf *b, i128 v)
{
    if (v <= (i128)INT64_MAX) return put_int(b, (long long)v);
    if (buf_reserve(b, 9) < 0) return -1;
    put_be(b, 0xcf, (unsigned long long)v, 8);
    return 0;
}

/* Zigzag varints of v into b; 1 if one is beyond 64 bits signed. */
static int
varints(Buf *b, const i128 *v, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!in64(v[i])) return 1;
        if (put_varint(b, zigzag((long long)v[i])) < 0) return -1;
    }
    return 0;
}

/* The size zlib.compress(data, 1) gives, or -1 with an exception. */
static Py_ssize_t
zsize(Buf *data)
{
    PyObject *z = PyObject_CallFunction(zlib_compress, "y#i", data->p, data->len, 1);
    if (z == NULL) return -1;
    Py_ssize_t n = PyBytes_Size(z);
    Py_DECREF(z);
    return n;
}

static int
cmp_i128(const void *x, const void *y)
{
    i128 a = *(const i128 *)x, b = *(const i128 *)y;
    return (a > b) - (a < b);
}

/* The k-th smallest of v[0..n) (k < n), which it reorders: quickselect, and a sort of
 * what is left after 64 rounds (a hostile order cannot make it quadratic). */
static i128
kth_smallest(i128 *v, Py_ssize_t n, Py_ssize_t k)
{
    Py_ssize_t lo = 0, hi = n - 1;
    for (int round = 0; lo < hi; round++) {
        if (round == 64) {
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof(i128), cmp_i128);
            break;
        }
        i128 pivot = v[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                i128 t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
    return v[k];
}

/* As columnframes._clock_column: the clocks column of v (n >= 1) into b (DELTAS, based
 * on the median difference); 1 for None, -1 with an exception. `tmp` holds n i128s. */
static int
clock_column(Buf *b, const i128 *v, Py_ssize_t n, i128 *tmp)
{
    Buf a = {0};
    int r = -1;
    i128 *sorted = PyMem_Malloc(sizeof(i128) * (size_t)n);
    if (sorted == NULL) { PyErr_NoMemory(); return -1; }
    i128 prev = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        sorted[i] = tmp[i] = v[i] - prev;
        prev = v[i];
    }
    i128 base = kth_smallest(sorted, n, n / 2);
    PyMem_Free(sorted);
    if (!in64(base)) return 1;
    for (Py_ssize_t i = 0; i < n; i++) tmp[i] -= base;
    r = varints(&a, tmp, n);
    if (r == 0 && (put_header(b, 0x90, 0xdc, 0xdd, 3) < 0 || put_int(b, DELTAS) < 0
                   || put_wide(b, base) < 0 || put_bin(b, a.p, a.len) < 0))
        r = -1;
    PyMem_Free(a.p);
    return r;
}

/* As columnframes._int_column: the column of v (n >= 1) into b; 1 for None. `tmp`
 * holds n i128s. */
static int
int_column(Buf *b, const i128 *v, Py_ssize_t n, int same, i128 *tmp)
{
    Buf a = {0}, c = {0};
    int ra, rc = 1, r = -1;
    i128 prev = 0, base = v[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        tmp[i] = v[i] - prev;
        prev = v[i];
    }
    if (same && in64(v[0])) {
        Py_ssize_t i = 1;
        while (i < n && v[i] == v[0]) i++;
        if (i == n) {
            r = put_header(b, 0x90, 0xdc, 0xdd, 2) < 0 || put_int(b, SAME) < 0
                || put_wide(b, v[0]) < 0 ? -1 : 0;
            goto out;
        }
    }
    ra = varints(&a, tmp, n);
    if (ra < 0) goto out;
    for (Py_ssize_t i = 1; i < n; i++)
        if (v[i] < base) base = v[i];
    if (in64(base)) {
        for (Py_ssize_t i = 0; i < n; i++) tmp[i] = v[i] - base;
        rc = varints(&c, tmp, n);
        if (rc < 0) goto out;
    }
    if (ra && rc) { r = 1; goto out; }
    int plain = ra != 0;
    if (!ra && !rc) {
        if (n >= 256) {
            Py_ssize_t za = zsize(&a), zc = za < 0 ? -1 : zsize(&c);
            if (zc < 0) goto out;
            plain = zc < za;
        }
        else
            plain = c.len < a.len;
    }
    if (plain) {
        if (put_header(b, 0x90, 0xdc, 0xdd, 3) < 0 || put_int(b, PLAIN) < 0
            || put_wide(b, base) < 0 || put_bin(b, c.p, c.len) < 0) goto out;
    }
    else if (put_header(b, 0x90, 0xdc, 0xdd, 2) < 0 || put_int(b, INTS) < 0
             || put_bin(b, a.p, a.len) < 0) goto out;
    r = 0;
out:
    PyMem_Free(a.p);
    PyMem_Free(c.p);
    return r;
}

/* The int of a value packed as msgpack-python packs it (fewest bytes); 0 if it is one. */
static int
canonical_int(Span s, i128 *out)
{
    Rd r = {s.p, s.p + s.n};
    Val v;
    if (read_value(&r, &v, 0) < 0 || r.p != s.p + s.n) return -1;
    Buf b = {0};
    char room[16];
    b.p = room;
    b.cap = sizeof room;
    if (v.kind == V_INT) { *out = v.i; put_int(&b, v.i); }
    else if (v.kind == V_UINT) { *out = v.u; put_be(&b, 0xcf, v.u, 8); }
    else return -1;
    return b.len == s.n && memcmp(room, s.p, s.n) == 0 ? 0 : -1;
}

/* A str packed as msgpack-python packs it (fewest header bytes, UTF-8 as Python's
 * "surrogatepass" reads and writes it); 0 if it is one. */
static int
canonical_str(Span s)
{
    if (s.n < 1) return -1;
    unsigned char c = s.p[0];
    Py_ssize_t head, len;
    if ((c & 0xe0) == 0xa0) { head = 1; len = c & 0x1f; }
    else if (c == 0xd9 && s.n >= 2) { head = 2; len = s.p[1]; if (len < 32) return -1; }
    else if (c == 0xda && s.n >= 3) { head = 3; len = (Py_ssize_t)be(s.p + 1, 2);
                                      if (len < 256) return -1; }
    else if (c == 0xdb && s.n >= 5) { head = 5; len = (Py_ssize_t)be(s.p + 1, 4);
                                      if (len < 65536) return -1; }
    else return -1;
    if (head + len != s.n) return -1;
    return check_utf8(s.p + head, len) < 0 ? -1 : 0;
}

/* As columnframes._scale_of: the fewest decimals that give every float back, or -1. */
static int
scale_of(const double *f, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(fabs(f[i]) < EXACT) || (f[i] == 0 && signbit(f[i]))) return -1;
    double p = 1;
    for (int scale = 0; scale <= MAX_SCALE; scale++, p *= 10) {
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            double m = nearbyint(f[i] * p);
            if (fabs(m) >= EXACT || m / p != f[i]) break;
        }
        if (i == n) return scale;
    }
    return -1;
}

/* The dictionary of a str column: an open-addressing table of spans. */
static int
str_column(Buf *b, const Span *v, Py_ssize_t n)
{
    Py_ssize_t most = n / 2 + 1, cap = 16, words = 0;
    while (cap < 4 * most) cap *= 2;
    Py_ssize_t *slot = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)cap);
    Py_ssize_t *word = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(most + 1));
    Buf codes = {0};
    int r = -1;
    if (slot == NULL || word == NULL) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < cap; i++) slot[i] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h = 1469598103934665603ULL;
        for (Py_ssize_t j = 0; j < v[i].n; j++) h = (h ^ v[i].p[j]) * 1099511628211ULL;
        Py_ssize_t k = (Py_ssize_t)h & (cap - 1), code = -1;
        while (slot[k] >= 0) {
            Span w = v[word[slot[k]]];
            if (w.n == v[i].n && memcmp(w.p, v[i].p, w.n) == 0) { code = slot[k]; break; }
            k = (k + 1) & (cap - 1);
        }
        if (code < 0) {
            if (words == most) { r = 1; goto out; }     /* too many words: packed */
            code = slot[k] = words;
            word[words++] = i;
        }
        if (put_varint(&codes, 2 * (uint64_t)code) < 0) goto out;
    }
    if (put_header(b, 0x90, 0xdc, 0xdd, 3) < 0 || put_int(b, STRINGS) < 0
        || put_header(b, 0x90, 0xdc, 0xdd, words) < 0) goto out;
    for (Py_ssize_t i = 0; i < words; i++)
        if (buf_put(b, v[word[i]].p, v[word[i]].n) < 0) goto out;
    r = put_bin(b, codes.p, codes.len) < 0 ? -1 : 0;
out:
    PyMem_Free(slot);
    PyMem_Free(word);
    PyMem_Free(codes.p);
    return r;
}

static int
packed_column(Buf *b, const Span *v, Py_ssize_t n)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) total += v[i].n;
    if (put_header(b, 0x90, 0xdc, 0xdd, 2) < 0 || put_int(b, PACKED) < 0
        || buf_reserve(b, total + 5) < 0)
        return -1;
    if (total <= 0xff) put_be(b, 0xc4, total, 1);
    else if (total <= 0xffff) put_be(b, 0xc5, total, 2);
    else put_be(b, 0xc6, total, 4);
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(b->p + b->len, v[i].p, v[i].n);
        b->len += v[i].n;
    }
    return 0;
}

/* As columnframes._column: the column of one value position. `ints` and `tmp` hold n
 * i128s. */
static int
value_column(Buf *b, const Span *v, Py_ssize_t n, i128 *ints, i128 *tmp)
{
    int all_int = 1, all_f64 = 1, all_str = 1;
    for (Py_ssize_t i = 0; i < n && (all_int || all_f64 || all_str); i++) {
        if (all_int && canonical_int(v[i], &ints[i]) < 0) all_int = 0;
        if (all_f64 && !(v[i].n == 9 && v[i].p[0] == 0xcb)) all_f64 = 0;
        if (all_str && canonical_str(v[i]) < 0) all_str = 0;
    }
    if (all_int) {
        int r = int_column(b, ints, n, 0, tmp);
        if (r <= 0) return r;
    }
    else if (all_f64) {
        double *f = (double *)tmp;      /* (an i128 per value: room enough) */
        for (Py_ssize_t i = 0; i < n; i++) {
            union { uint64_t u; double d; } x;
            x.u = be(v[i].p + 1, 8);
            f[i] = x.d;
        }
        int scale = scale_of(f, n);
        if (scale >= 0) {
            double p = 1;
            for (int k = 0; k < scale; k++) p *= 10;
            for (Py_ssize_t i = 0; i < n; i++) ints[i] = (i128)nearbyint(f[i] * p);
            Buf col = {0};
            int r = int_column(&col, ints, n, 0, tmp);
            if (r == 0) {
                r = put_header(b, 0x90, 0xdc, 0xdd, 3) < 0 || put_int(b, DECIMALS) < 0
                    || put_int(b, scale) < 0 || buf_put(b, col.p, col.len) < 0 ? -1 : 0;
                PyMem_Free(col.p);
                return r;
            }
            PyMem_Free(col.p);
            if (r < 0) return -1;
        }
        if (put_header(b, 0x90, 0xdc, 0xdd, 2) < 0 || put_int(b, DOUBLES) < 0
            || buf_reserve(b, 8 * n + 5) < 0)
            return -1;
        Py_ssize_t total = 8 * n;
        if (total <= 0xff) put_be(b, 0xc4, total, 1);
        else if (total <= 0xffff) put_be(b, 0xc5, total, 2);
        else put_be(b, 0xc6, total, 4);
        for (Py_ssize_t i = 0; i < n; i++)
            for (int k = 8; k >= 1; k--) b->p[b->len++] = (char)v[i].p[k];
        return 0;
    }
    else if (all_str) {
        int r = str_column(b, v, n);
        if (r <= 0) return r;
    }
    return packed_column(b, v, n);
}

/* As compactor._values_and_texts: an event's values and texts, or 1 for another shape. */
static int
split_event(const Rec *e, Span *values, long *width, Span *texts)
{
    if (e->n != 3 && e->n != 4) return 1;
    Rd r = {e->raw, e->raw + e->len};
    long long k = read_array(&r);
    if (k < 0 || k > MAX_VALUES) return 1;
    const unsigned char *at = r.p;
    for (long long i = 0; i < k; i++) {
        const unsigned char *next = skip_value(at, r.end, 0);
        if (next == NULL) return 1;
        values[i].p = at;
        values[i].n = next - at;
        at = next;
    }
    *width = (long)k;
    texts->p = at;
    texts->n = r.end - at;
    if (e->n == 3) {
        texts->p = NULL;
        return at == r.end ? 0 : 1;
    }
    return 0;
}

/* columns(chunk, counts) -> the columnar frame's payload of chunk (sorted records), as
 * columnframes.encode makes it, counts updated; None for the Python code to decide. */
static PyObject *
columns(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *chunk, *counts, *res = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &chunk, &PyDict_Type, &counts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(chunk), nv = 0;
    if (n < 1 || n > (1 << 20)) Py_RETURN_NONE;
    Rec *recs = PyMem_Malloc(sizeof(Rec) * (size_t)n);
    long *width = PyMem_Malloc(sizeof(long) * (size_t)n), *first = NULL;
    Py_ssize_t *start = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    Span *texts = PyMem_Malloc(sizeof(Span) * (size_t)n), *spans = NULL, *col = NULL;
    Py_ssize_t *group = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n), *tally = NULL;
    Py_ssize_t *order = NULL;
    i128 *ints = NULL, *tmp = NULL;
    Ids srcs = {0};
    Buf b = {0};
    int has_texts = 0, done = 0;
    if (recs == NULL || width == NULL || start == NULL || texts == NULL || group == NULL
        || ids_init(&srcs, n) < 0) { PyErr_NoMemory(); goto out; }
    if (read_records(chunk, recs)) { done = 1; goto out; }
    for (Py_ssize_t i = 0; i < n; i++) nv += recs[i].len;   /* a value is a byte at least */
    spans = PyMem_Malloc(sizeof(Span) * (size_t)(nv + 1));
    col = PyMem_Malloc(sizeof(Span) * (size_t)n);
    ints = PyMem_Malloc(sizeof(i128) * (size_t)n);
    tmp = PyMem_Malloc(sizeof(i128) * (size_t)n);
    tally = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
    first = PyMem_Malloc(sizeof(long) * (size_t)n);
    order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (spans == NULL || col == NULL || ints == NULL || tmp == NULL || tally == NULL
        || first == NULL || order == NULL) { PyErr_NoMemory(); goto out; }
    start[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (split_event(&recs[i], spans + start[i], &width[i], &texts[i])) { done = 1; goto out; }
        start[i + 1] = start[i] + width[i];
        has_texts |= texts[i].p != NULL;
        Py_ssize_t g = group[i] = ids_get(&srcs, recs[i].sid);
        if (tally[g]++ == 0) first[g] = width[i];
        else if (first[g] != width[i]) { done = 1; goto out; }   /* encode: ValueError */
    }
    /* [sources, groups, count, min clock, max clock, writers, clocks, texts] */
    if (put_header(&b, 0x90, 0xdc, 0xdd, 8) < 0) goto out;
    for (Py_ssize_t i = 0; i < n; i++) ints[i] = recs[i].sid;
    int r = int_column(&b, ints, n, 1, tmp);
    if (r) { done = r > 0; goto out; }
    if (put_header(&b, 0x90, 0xdc, 0xdd, srcs.n) < 0) goto out;
    /* each group's events in order, by a counting sort: `ints` first holds where each
       group's events go in `order` */
    for (Py_ssize_t g = 0, at = 0; g < srcs.n; at += tally[g], g++) ints[g] = at;
    for (Py_ssize_t i = 0; i < n; i++) order[(Py_ssize_t)ints[group[i]]++] = i;
    for (Py_ssize_t g = 0, at = 0; g < srcs.n; g++) {
        Py_ssize_t k = tally[g];
        Py_ssize_t *mine = order + at;
        at += k;
        if (put_header(&b, 0x90, 0xdc, 0xdd, 3) < 0 || put_int(&b, srcs.keys[g]) < 0
            || put_int(&b, first[g]) < 0 || put_header(&b, 0x90, 0xdc, 0xdd, first[g]) < 0)
            goto out;
        for (long j = 0; j < first[g]; j++) {
            for (Py_ssize_t i = 0; i < k; i++) col[i] = spans[start[mine[i]] + j];
            if (value_column(&b, col, k, ints, tmp) < 0) goto out;
        }
    }
    long long lo = recs[0].ns, hi = recs[0].ns;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (recs[i].ns < lo) lo = recs[i].ns;
        if (recs[i].ns > hi) hi = recs[i].ns;
    }
    if (put_int(&b, n) < 0 || put_int(&b, lo) < 0 || put_int(&b, hi) < 0) goto out;
    for (Py_ssize_t i = 0; i < n; i++) ints[i] = recs[i].wid;
    if ((r = int_column(&b, ints, n, 1, tmp)) != 0) { done = r > 0; goto out; }
    for (Py_ssize_t i = 0; i < n; i++) ints[i] = recs[i].ns;
    if ((r = clock_column(&b, ints, n, tmp)) != 0) { done = r > 0; goto out; }
    if (!has_texts) {
        if (buf_put(&b, "\xc0", 1) < 0) goto out;
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++)
            if (texts[i].p == NULL) { texts[i].p = (const unsigned char *)"\xc0"; texts[i].n = 1; }
        if (packed_column(&b, texts, n) < 0) goto out;
    }
    if (add_counts(counts, &srcs, tally) < 0) goto out;
    res = PyBytes_FromStringAndSize(b.p, b.len);
out:
    if (done && res == NULL && !PyErr_Occurred()) res = Py_NewRef(Py_None);
    PyMem_Free(recs); PyMem_Free(width); PyMem_Free(start); PyMem_Free(texts);
    PyMem_Free(group); PyMem_Free(spans); PyMem_Free(col); PyMem_Free(ints); PyMem_Free(tmp);
    PyMem_Free(tally); PyMem_Free(first); PyMem_Free(order); PyMem_Free(b.p);
    ids_free(&srcs);
    return res;
}

/* --- rows ------------------------------------------------------------------------ */

/* rows(chunk, counts) -> the payloads of the events frames of chunk (sorted records), one
 * per writer in the order of its first event, as Compactor._events makes them, counts
 * updated; None for the Python code. */
static PyObject *
rows(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *chunk, *counts, *res = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &chunk, &PyDict_Type, &counts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(chunk);
    if (n < 1) return PyList_New(0);
    Rec *recs = PyMem_Malloc(sizeof(Rec) * (size_t)n);
    Py_ssize_t *group = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    Py_ssize_t *tally = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
    Py_ssize_t *place = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    Ids writers = {0}, srcs = {0};
    Buf b = {0};
    int done = 0;
    if (recs == NULL || group == NULL || tally == NULL || place == NULL || order == NULL
        || ids_init(&writers, n) < 0
        || ids_init(&srcs, n) < 0) { PyErr_NoMemory(); goto out; }
    if (read_records(chunk, recs)) { done = 1; goto out; }
    for (Py_ssize_t i = 0; i < n; i++) {
        group[i] = ids_get(&writers, recs[i].wid);
        place[group[i]]++;
    }
    /* each writer's events in order, by a counting sort: `place` then holds where each
       writer's events go in `order` */
    for (Py_ssize_t g = 0, at = 0; g < writers.n; g++) {
        Py_ssize_t k = place[g];
        place[g] = at;
        at += k;
    }
    for (Py_ssize_t i = 0; i < n; i++) order[place[group[i]]++] = i;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto out;
    for (Py_ssize_t g = 0, at = 0; g < writers.n; g++) {
        Py_ssize_t *mine = order + at, k = place[g] - at;
        at = place[g];
        b.len = 0;
        long long base = recs[mine[0]].ns, prev = base;
        if (put_header(&b, 0x90, 0xdc, 0xdd, 5) < 0 || put_int(&b, writers.keys[g]) < 0
            || put_int(&b, base) < 0 || put_int(&b, k) < 0 || put_int(&b, base) < 0
            || put_int(&b, recs[mine[k - 1]].ns) < 0) goto fail;
        for (Py_ssize_t i = 0; i < k; i++) {
            const Rec *e = &recs[mine[i]];
            if (e->n < 16) {
                if (buf_reserve(&b, 1) < 0) goto fail;
                b.p[b.len++] = (char)(0x90 | e->n);
            }
            else {
                if (buf_reserve(&b, 3) < 0) goto fail;
                put_be(&b, 0xdc, (unsigned long long)e->n, 2);
            }
            if (put_int(&b, e->sid) < 0 || put_wide(&b, (i128)e->ns - prev) < 0
                || buf_put(&b, e->raw, e->len) < 0) goto fail;
            prev = e->ns;
            tally[ids_get(&srcs, e->sid)]++;
        }
        PyObject *payload = PyBytes_FromStringAndSize(b.p, b.len);
        if (payload == NULL || PyList_Append(out, payload) < 0) {
            Py_XDECREF(payload);
            goto fail;
        }
        Py_DECREF(payload);
    }
    if (add_counts(counts, &srcs, tally) < 0) goto fail;
    res = out;
    goto out;
fail:
    Py_DECREF(out);
out:
    if (done && res == NULL && !PyErr_Occurred()) res = Py_NewRef(Py_None);
    PyMem_Free(recs); PyMem_Free(group); PyMem_Free(tally); PyMem_Free(place);
    PyMem_Free(order); PyMem_Free(b.p);
    ids_free(&writers);
    ids_free(&srcs);
    return res;
}

/* --- runs ------------------------------------------------------------------------ */

#define REC_HEAD 40     /* ns, writer id, seq, source id (8 bytes each), n, raw's size (4) */

static void
put_le(char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (char)(v >> (8 * i));
}

static uint64_t
get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* pack_run(records) -> bytes: records (sorted, of a run) in a fixed layout for a run
 * file, read back by unpack_run; None where one does not fit it. */
static PyObject *
pack_run(PyObject *Py_UNUSED(self), PyObject *arg)
{
    if (!PyList_Check(arg)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(arg), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(arg, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != R_FIELDS
            || !PyBytes_Check(PyTuple_GET_ITEM(t, R_RAW))
            || PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, R_RAW)) > 0x7fffffff)
            Py_RETURN_NONE;
        total += REC_HEAD + PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, R_RAW));
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    char *p = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(arg, i), *raw = PyTuple_GET_ITEM(t, R_RAW);
        long long x[5];
        static const int at[5] = {R_NS, R_WID, R_SEQ, R_SID, R_N};
        for (int j = 0; j < 5; j++) {
            PyObject *o = PyTuple_GET_ITEM(t, at[j]);
            if (!PyLong_CheckExact(o) || as_ll(o, &x[j]) != 0) {
                PyErr_Clear();
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
        }
        if (x[4] < 0 || x[4] > 0x7fffffff) { Py_DECREF(out); Py_RETURN_NONE; }
        for (int j = 0; j < 4; j++) put_le(p + 8 * j, (uint64_t)x[j], 8);
        put_le(p + 32, (uint64_t)x[4], 4);
        put_le(p + 36, (uint64_t)PyBytes_GET_SIZE(raw), 4);
        memcpy(p + REC_HEAD, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
        p += REC_HEAD + PyBytes_GET_SIZE(raw);
    }
    return out;
}

/* unpack_run(data) -> the records pack_run packed. */
static PyObject *
unpack_run(PyObject *Py_UNUSED(self), PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = buf.buf, *end = p + buf.len;
    PyObject *out = PyList_New(0);
    while (out != NULL && p < end) {
        Py_ssize_t len = end - p < REC_HEAD ? -1 : (Py_ssize_t)get_le(p + 36, 4);
        if (len < 0 || end - p - REC_HEAD < len) {
            PyErr_SetString(PyExc_ValueError, "a run file's record is cut short");
            Py_CLEAR(out);
            break;
        }
        PyObject *t = PyTuple_New(R_FIELDS);
        int bad = t == NULL;
        for (int j = 0; j < 5 && !bad; j++) {
            PyObject *v = PyLong_FromLongLong((long long)get_le(p + 8 * j, j < 4 ? 8 : 4));
            PyTuple_SET_ITEM(t, j, v);     /* R_NS ... R_N: the layout's order */
            bad = v == NULL;
        }
        if (!bad) {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)p + REC_HEAD, len);
            PyTuple_SET_ITEM(t, R_RAW, raw);
            bad = raw == NULL;
        }
        if (bad || PyList_Append(out, t) < 0) Py_CLEAR(out);
        Py_XDECREF(t);
        p += REC_HEAD + len;
    }
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"pack_run", pack_run, METH_O,
     "pack_run(records) -> bytes in a run file's layout, or None where one does not fit"},
    {"unpack_run", unpack_run, METH_O, "unpack_run(data) -> the records pack_run packed"},
    {"walk", walk, METH_VARARGS,
     "walk(payload, pos, count, clock, wid, cv, freq, ns0, seq, ids) -> (records, pos, "
     "clock, seq, why, sid, event): an events frame's events from pos as records"},
    {"columns", columns, METH_VARARGS,
     "columns(records, counts) -> a columnar frame's payload, or None"},
    {"rows", rows, METH_VARARGS,
     "rows(records, counts) -> the events frames' payloads, one per writer, or None"},
    {NULL}
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "bread._compact",
    .m_doc = "bread compact's per-event work, in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__compact(void);   /* declared: the one function exported */

PyMODINIT_FUNC
PyInit__compact(void)
{
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) return NULL;
    zlib_compress = PyObject_GetAttrString(zlib, "compress");
    Py_DECREF(zlib);
    if (zlib_compress == NULL) return NULL;
    return PyModule_Create(&module_def);
}
