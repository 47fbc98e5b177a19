/* bread/sinks/_batches.c: events as columns, its twin bread/sinks/batches.py (BatchSink):
 * a row per event (clock, time, ids, the message, the args and fields as JSON as
 * bread.sinks.json.json_pair writes them), and gather(), a call site's or writer's
 * property per row.
 */
#include "../decode/_extension.h"
#include "../decode/_message.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The args and fields columns of an event: [positional...] and {name: value...}
 * (bread/decode/_message.h). 1 written, 0 Python must write them, -1 error. */
static int
put_json_args(Buf *ja, Buf *jf, Source *src, const Val *args, Py_ssize_t nargs)
{
    int r = bread_put_json_list(ja, args, bread_positional(src, nargs), 0);
    return r <= 0 ? r : bread_put_json_fields(jf, src, args, nargs, 0);
}

/* The message and the args and fields JSON of an event whose values all have their text
 * made once (a columnar frame's ints, floats and dictionary words: V_*_TEXT) and whose
 * call site has no keyword fields, as bread_put_message and put_json_args write them:
 * each column's bytes counted and reserved once, then the template's literal parts and
 * the values' texts copied. 1 written, 0 not such an event (nothing written), -1 error. */
static inline int
made_texts(Renderer *self, const Source *src, const Val *args, Py_ssize_t nargs)
{
    if (src->nnames != 0 || (src->names != NULL && PyTuple_GET_SIZE(src->names) != 0)
        || (self->want_message && src->msg == NULL))
        return 0;   /* (keyword fields: as bread_put_message and put_json_args see them) */
    Py_ssize_t json = nargs + 1;   /* the brackets and commas (nargs > 0) */
    for (Py_ssize_t k = 0; k < nargs; k++) {
        if (args[k].kind < V_F64_TEXT) return 0;
        json += args[k].kind == V_STR_TEXT ? (Py_ssize_t)args[k].i : args[k].n;
    }
    if (self->want_message) {
        Py_ssize_t len = 0;
        for (Py_ssize_t k = 0; k < src->nmsg; k++) {
            const Item *it = &src->msg[k];
            if (it->code != MI_LIT && (it->code != MI_POS || it->index >= nargs)) return 0;
            len += it->code == MI_LIT ? it->n : args[it->index].n;
        }
        Buf *m = &self->col[C_MSG];
        if (len > MAX_MESSAGE) return 0;   /* (Python cuts it) */
        if (buf_reserve(m, len) < 0) return -1;
        for (Py_ssize_t k = 0; k < src->nmsg; k++) {   /* (no more memory asked for) */
            const Item *it = &src->msg[k];
            const Val *v = it->code == MI_LIT ? NULL : &args[it->index];
            if (v == NULL ? bread_put_text(m, it->s, it->n) : bread_put_text(m, v->s, v->n))
                return -1;
        }
    }
    if (self->want_json) {
        Buf *ja = &self->col[C_ARGS], *jf = &self->col[C_FIELDS];
        if (buf_reserve(ja, json) < 0 || buf_put(jf, "{}", 2) < 0) return -1;
        ja->p[ja->len++] = '[';
        for (Py_ssize_t k = 0; k < nargs; k++) {
            const Val *v = &args[k];
            if (k) ja->p[ja->len++] = ',';
            if (v->kind == V_STR_TEXT ? bread_put_text(ja, v->s + v->n, (Py_ssize_t)v->i)
                                      : bread_put_text(ja, v->s, v->n))   /* (JSON after text) */
                return -1;
        }
        ja->p[ja->len++] = ']';
    }
    return 1;
}

static int begin_batch(Renderer *self);

/* Columns mode: one row per event, appended to the column buffers. 1 done,
 * 0 the rest of the frame is Python's (a time beyond 64 bits), -1 error. */
int
bread_column_event(Renderer *self, long long wid, long long sid, long long clock,
                   const Val *args, Py_ssize_t nargs, int simple,
                   const unsigned char *ev, Py_ssize_t evlen)
{
    long long ns;
    if (!event_ns(self, clock, &ns)) return 0;
    if (self->col[C_MSGOFF].len == 0 && begin_batch(self) < 0) return -1;
    Source *src = sid >= 0 && sid < MAX_IDS ? self->sources[sid] : NULL;
    Writer *w = wid >= 0 && wid < MAX_IDS ? &self->writers[wid] : NULL;
    Buf *m = &self->col[C_MSG], *ja = &self->col[C_ARGS], *jf = &self->col[C_FIELDS];
    Py_ssize_t start = m->len, astart = ja->len, fstart = jf->len;
    int r = src != NULL && w != NULL && w->name != NULL;
    if (r && simple && nargs && (self->want_message || self->want_json)) {
        r = made_texts(self, src, args, nargs);   /* 0: as any other event */
        if (r < 0) return -1;
        if (r > 0) goto ids;
        r = 1;
    }
    if (r && self->want_message)
        r = simple ? bread_put_message(m, src, args, nargs) : 0;
    if (r > 0 && self->want_json)
        r = simple ? put_json_args(ja, jf, src, args, nargs) : 0;
    if (r < 0) return -1;
    if (r == 0) {   /* Python: the texts, and the count of unknown sources and writers */
        m->len = start;
        ja->len = astart;
        jf->len = fstart;
        PyObject *texts = bread_fallback(self, ev, evlen, wid, clock);
        if (texts == NULL) return -1;
        if (texts == Py_None) {   /* left out by the filter: no row */
            Py_DECREF(texts);
            return 1;
        }
        if (!PyTuple_Check(texts) || PyTuple_GET_SIZE(texts) != 3
            || !PyBytes_Check(PyTuple_GET_ITEM(texts, 0))
            || !PyBytes_Check(PyTuple_GET_ITEM(texts, 1))
            || !PyBytes_Check(PyTuple_GET_ITEM(texts, 2))) {
            Py_DECREF(texts);
            PyErr_SetString(PyExc_TypeError,
                            "fallback must return None or (message, args, fields) bytes");
            return -1;
        }
        Buf *to[3] = {m, ja, jf};
        int rc = 0;
        for (int k = 0; k < 3 && rc == 0; k++) {
            PyObject *b = PyTuple_GET_ITEM(texts, k);
            if (k == 0 ? self->want_message : self->want_json)
                rc = buf_put(to[k], PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
        }
        Py_DECREF(texts);
        if (rc < 0) return -1;
    }
ids:;
    long long row[4] = {clock, ns, sid, wid};
    for (int k = 0; k < 4; k++)
        if (buf_put(&self->col[k], &row[k], sizeof(long long)) < 0) return -1;
    long long ends[3] = {m->len, ja->len, jf->len};
    if (buf_put(&self->col[C_MSGOFF], &ends[0], sizeof(long long)) < 0
        || buf_put(&self->col[C_ARGSOFF], &ends[1], sizeof(long long)) < 0
        || buf_put(&self->col[C_FIELDSOFF], &ends[2], sizeof(long long)) < 0)
        return -1;
    self->rows++;
    return 1;
}

/* ---- column blocks: a batch's buffers handed to Arrow without a copy ------------ */

/* A Block owns the memory a Buf grew into and exports it (read-only buffer protocol), so
 * that pyarrow.py_buffer() wraps it as it is. When Arrow lets go of it, its memory goes back
 * to a pool that the next batch's buffers start from: no copy per batch, and no fresh pages
 * for the kernel to zero per batch. The pool keeps at most POOL_BLOCKS blocks and POOL_BYTES
 * bytes (the rest is freed); the GIL guards it. */
typedef struct { PyObject_HEAD char *p; Py_ssize_t len, cap; } Block;

#define POOL_BLOCKS 64
#define POOL_BYTES ((Py_ssize_t)64 << 20)
static struct { char *p; Py_ssize_t cap; } pool[POOL_BLOCKS];
static int npool;
static Py_ssize_t pool_bytes;

static void
block_dealloc(Block *self)
{
    if (self->p != NULL && npool < POOL_BLOCKS && pool_bytes + self->cap <= POOL_BYTES) {
        pool[npool].p = self->p;
        pool[npool++].cap = self->cap;
        pool_bytes += self->cap;
    }
    else
        PyMem_Free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
block_getbuffer(Block *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : "", self->len, 1,
                             flags);
}

static PyBufferProcs block_as_buffer = {(getbufferproc)block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._speedups.Block",
    .tp_basicsize = sizeof(Block),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A column's bytes, read-only (the buffer protocol): pyarrow.py_buffer(block).",
    .tp_dealloc = (destructor)block_dealloc,
    .tp_as_buffer = &block_as_buffer,
};

/* An empty Buf given a pooled block's memory: the smallest with room for `want` bytes, else
 * the largest (buf_reserve grows it); none pooled: left as it is. */
static void
buf_from_pool(Buf *b, Py_ssize_t want)
{
    if (b->p != NULL || npool == 0) return;
    int best = 0;
    for (int k = 1; k < npool; k++) {
        int fits = pool[k].cap >= want, best_fits = pool[best].cap >= want;
        if (fits ? !best_fits || pool[k].cap < pool[best].cap
                 : !best_fits && pool[k].cap > pool[best].cap)
            best = k;
    }
    b->p = pool[best].p;
    b->cap = pool[best].cap;
    b->len = 0;
    pool_bytes -= pool[best].cap;
    pool[best] = pool[--npool];
}

/* A Block of what `b` holds (the Buf is left empty, owning nothing), or NULL. */
static PyObject *
block_of(Buf *b)
{
    Block *blk = PyObject_New(Block, &BlockType);
    if (blk == NULL) return NULL;
    blk->p = b->p;
    blk->len = b->len;
    blk->cap = b->cap;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)blk;
}

/* Each offsets column starts with a 0 (Arrow's first offset): a column buffer about to be
 * written, taken from the pool with room for the last batch's bytes, the int64 ones for a
 * whole batch (of at most BEGIN_ROWS rows: a batch_size far beyond a file's events is not
 * allocated up front). */
#define BEGIN_ROWS (1 << 16)
static int
begin_batch(Renderer *self)
{
    Py_ssize_t rows = self->max_rows < 1 ? 1 : self->max_rows > BEGIN_ROWS ? BEGIN_ROWS
                                                                            : self->max_rows;
    for (int k = 0; k < C_NCOLS; k++) {
        Py_ssize_t want = self->col_last[k];
        if ((k <= C_WID || IS_OFFSETS(k)) && want < (rows + 1) * (Py_ssize_t)sizeof(long long))
            want = (rows + 1) * (Py_ssize_t)sizeof(long long);
        buf_from_pool(&self->col[k], want);
        if (buf_reserve(&self->col[k], want) < 0) return -1;
        if (IS_OFFSETS(k) && buf_put(&self->col[k], &(long long){0}, sizeof(long long)) < 0)
            return -1;
    }
    return 0;
}

/* take_columns() -> (rows, clock, ns, source id, writer id, message data,
 * message offsets, args data, offsets, fields data, offsets): Blocks of int64
 * native-endian values, the text columns' UTF-8 and their offsets (rows + 1 of
 * them, the first 0); the buffers start afresh. */
PyObject *
bread_take_columns(Renderer *self, PyObject *Py_UNUSED(unused))
{
    if (self->col[C_MSGOFF].len == 0 && begin_batch(self) < 0) return NULL;   /* no row */
    PyObject *r = PyTuple_New(1 + C_NCOLS);
    if (r == NULL) return NULL;
    PyObject *rows = PyLong_FromSsize_t(self->rows);
    if (rows == NULL) { Py_DECREF(r); return NULL; }
    PyTuple_SET_ITEM(r, 0, rows);
    for (int k = 0; k < C_NCOLS; k++) {
        self->col_last[k] = self->col[k].len;
        PyObject *v = block_of(&self->col[k]);
        if (v == NULL) { Py_DECREF(r); return NULL; }
        PyTuple_SET_ITEM(r, 1 + k, v);
    }
    self->rows = 0;
    return r;
}

int
bread_batches_init(void)
{
    return PyType_Ready(&BlockType);
}

/* gather(ids, table, default, text) -> (values, offsets, validity) or None: the
 * column of a call site's or a writer's property for each row, its id in ids
 * (native int64s); table maps an id to the value (text: UTF-8 bytes; else an
 * int within 64 bits), or None for a null; an id not in table takes default.
 * text: values are the UTF-8 data and offsets int32 (rows + 1), None if the
 * data would not fit 31 bits; else values are int64s and offsets None.
 * validity is Arrow's bitmap, None without a null. */
#define GATHER_CACHE 256

/* `count` rows of the text `v` (bytes; NULL: a null) into a text column's data and int32
 * offsets (reserved for all `rows`): the bytes copied once, then doubled. -1 error, or -2
 * with *res None: more text than one Arrow string array holds. */
static int
fill_text(Buf *data, Buf *offs, PyObject *v, Py_ssize_t count, Py_ssize_t rows, PyObject **res)
{
    Py_ssize_t k = v != NULL ? PyBytes_GET_SIZE(v) : 0;
    if (data->p == NULL && k) buf_from_pool(data, rows * k);   /* as if all were this long */
    if (k && (count > (INT32_MAX - data->len) / k)) {   /* beyond Arrow's string */
        *res = Py_NewRef(Py_None);
        return -2;
    }
    int *end = (int *)(offs->p + offs->len), at = (int)data->len;
    for (Py_ssize_t r = 0; r < count; r++) end[r] = at += (int)k;
    offs->len += count * (Py_ssize_t)sizeof(int);
    if (k == 0) return 0;
    if (buf_reserve(data, count * k) < 0) return -1;
    char *p = data->p + data->len;
    memcpy(p, PyBytes_AS_STRING(v), (size_t)k);
    for (Py_ssize_t have = k, all = count * k; have < all; have *= 2)
        memcpy(p + have, p, (size_t)(have < all - have ? have : all - have));
    data->len += count * k;
    return 0;
}

PyObject *
bread_gather(PyObject *Py_UNUSED(module), PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyDict_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "gather(ids, table: dict, default, text)");
        return NULL;
    }
    int text = PyObject_IsTrue(a[3]);
    if (text < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(long long);
    const unsigned char *ids = view.buf;
    struct { long long id; PyObject *v; int used; } cache[GATHER_CACHE];
    memset(cache, 0, sizeof cache);
    Buf data = {0}, offs = {0}, valid = {0};
    PyObject *res = NULL;
    int nulls = 0;
    buf_from_pool(&valid, (n + 7) / 8 + 1);
    if (buf_reserve(&valid, (n + 7) / 8 + 1) < 0) goto done;
    memset(valid.p, 0xff, (size_t)((n + 7) / 8 + 1));
    valid.len = (n + 7) / 8;
    if (text) {
        int zero = 0;
        buf_from_pool(&offs, (n + 1) * (Py_ssize_t)sizeof(int));
        if (buf_reserve(&offs, (n + 1) * (Py_ssize_t)sizeof(int)) < 0
            || buf_put(&offs, &zero, sizeof zero) < 0)
            goto done;
    }
    else {
        buf_from_pool(&data, n * (Py_ssize_t)sizeof(long long));
        if (buf_reserve(&data, n * (Py_ssize_t)sizeof(long long)) < 0) goto done;
    }
    for (Py_ssize_t i = 0, j; i < n; i = j) {   /* a run of rows of one id at a time */
        long long id, next;
        memcpy(&id, ids + i * sizeof(long long), sizeof id);
        for (j = i + 1; j < n; j++) {
            memcpy(&next, ids + j * sizeof(long long), sizeof next);
            if (next != id) break;
        }
        unsigned slot = (unsigned)(id & (GATHER_CACHE - 1));
        PyObject *v;
        if (cache[slot].used && cache[slot].id == id)
            v = cache[slot].v;
        else {
            PyObject *key = PyLong_FromLongLong(id);
            if (key == NULL) goto done;
            v = PyDict_GetItemWithError(a[1], key);   /* borrowed: the dict outlives the call */
            Py_DECREF(key);
            if (v == NULL) {
                if (PyErr_Occurred()) goto done;
                v = a[2];
            }
            if (v != Py_None && (text ? !PyBytes_Check(v) : !PyLong_Check(v))) {
                PyErr_SetString(PyExc_TypeError, text ? "gather: values must be bytes or None"
                                                      : "gather: values must be int or None");
                goto done;
            }
            cache[slot].id = id;
            cache[slot].v = v;
            cache[slot].used = 1;
        }
        if (v == Py_None) {
            for (Py_ssize_t r = i; r < j; r++) valid.p[r >> 3] &= (char)~(1 << (r & 7));
            nulls = 1;
        }
        if (text && fill_text(&data, &offs, v == Py_None ? NULL : v, j - i, n, &res) < 0)
            goto done;
        if (!text) {
            long long x = v != Py_None ? PyLong_AsLongLong(v) : 0;
            if (x == -1 && PyErr_Occurred()) goto done;
            long long *out = (long long *)(data.p + data.len);   /* reserved for all n */
            for (Py_ssize_t r = 0; r < j - i; r++) out[r] = x;
            data.len += (j - i) * (Py_ssize_t)sizeof x;
        }
    }
    PyObject *d = block_of(&data);
    PyObject *o = text ? block_of(&offs) : Py_NewRef(Py_None);
    PyObject *va = nulls ? block_of(&valid) : Py_NewRef(Py_None);
    if (d != NULL && o != NULL && va != NULL)
        res = PyTuple_Pack(3, d, o, va);
    Py_XDECREF(d);
    Py_XDECREF(o);
    Py_XDECREF(va);
done:
    PyBuffer_Release(&view);
    PyMem_Free(data.p);
    PyMem_Free(offs.p);
    PyMem_Free(valid.p);
    return res;
}
