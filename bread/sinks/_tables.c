/* bread/sinks/_tables.c: a typed table per call site, its twins bread/sinks/tables.py (the
 * kinds, the Typer) and bread/sinks/typed.py (the sinks): the events of one call
 * site, which the filter alone lets through, as typed columns (docs/spark.md "Typed
 * tables per call site"). Two modes, set by set_typed():
 *   rows:  each event's time (us), source id, writer id and its arguments, each in the
 *          column of the kind the driver found (null, bool, int64, float64, string);
 *          an event whose values do not fit those kinds is counted (`late`), not made;
 *   kinds: no rows; per column, the kinds of value seen (a bit per kind), the most
 *          positional values, and the source ids seen (Python checks they are one site).
 * A value or an event C does not judge exactly as Python (a rich value, a lone
 * surrogate in a string, fields named otherwise) sends the rest of the frame to Python.
 */
#include "../decode/_extension.h"

#include <string.h>

/* Kinds, as tables.KINDS orders them. */
enum { K_NULL = 0, K_BOOL, K_INT64, K_FLOAT64, K_STRING, K_TIMESTAMP, K_DATE, K_JSON };

/* tables.widest: the kind that holds values of kinds a and b. */
static int
widest(int a, int b)
{
    if (a == b || b == K_NULL) return a;
    if (a == K_NULL) return b;
    if (a <= K_FLOAT64 && b <= K_FLOAT64) return a > b ? a : b;
    return K_JSON;
}

/* tables._kind of a value; -1: Python's to judge (a rich value). */
static int
value_kind(const Val *v)
{
    switch (v->kind) {
    case V_NIL: return K_NULL;
    case V_FALSE: case V_TRUE: return K_BOOL;
    case V_INT: return K_INT64;
    case V_UINT: return K_JSON;   /* beyond 64 bits */
    case V_F64: return K_FLOAT64;
    case V_STR: return K_STRING;
    default: return -1;
    }
}

static int
put_bit(Buf *b, Py_ssize_t row, int bit)
{
    if ((row & 7) == 0) {
        char zero = 0;
        if (buf_put(b, &zero, 1) < 0) return -1;
    }
    if (bit) b->p[row >> 3] |= (char)(1 << (row & 7));
    return 0;
}

/* A value (NULL: a null) into column c at row `row`; its kind fits the column's. */
static int
put_value(TypedCol *c, Py_ssize_t row, const Val *v)
{
    int valid = v != NULL && v->kind != V_NIL;
    if (put_bit(&c->valid, row, valid) < 0) return -1;
    c->nulls += !valid;
    switch (c->kind) {
    case K_BOOL:
        return put_bit(&c->data, row, valid && v->kind == V_TRUE);
    case K_INT64: {
        long long x = !valid ? 0 : v->kind == V_INT ? v->i : v->kind == V_TRUE;
        return buf_put(&c->data, &x, sizeof x);
    }
    case K_FLOAT64: {
        double x = !valid ? 0.0 : v->kind == V_F64 ? v->d
                 : v->kind == V_INT ? (double)v->i : (double)(v->kind == V_TRUE);
        return buf_put(&c->data, &x, sizeof x);
    }
    case K_STRING: {
        if (valid && buf_put(&c->data, v->s, v->n) < 0) return -1;
        int end = (int)c->data.len;
        return buf_put(&c->offs, &end, sizeof end);
    }
    default:   /* K_NULL: nothing but the validity */
        return 0;
    }
}

/* 1 the value fits column c as it is, 0 it does not (late), -1 Python judges it. */
static int
fits(const TypedCol *c, const Val *v)
{
    int k = value_kind(v);
    if (k < 0 || (v->kind == V_STR && v->surrogates)) return -1;
    if (k == K_STRING && c->kind == K_STRING && v->n > INT32_MAX - c->data.len) return -1;
    return widest(c->kind, k) == c->kind;
}

/* Kinds mode: the kinds of an event's values, its source id. 1 done, 0 Python's. */
static int
kinds_event(Typed *t, long long sid, const Val *args, Py_ssize_t npos, Py_ssize_t nfields)
{
    int seen = 0;
    for (int k = 0; k < t->nsids && !seen; k++) seen = t->sids[k] == sid;
    if (!seen) {
        if (t->nsids == MAX_TYPED_SIDS) return 0;
        t->sids[t->nsids++] = sid;
    }
    for (Py_ssize_t i = 0; i < npos + nfields; i++) {
        int k = value_kind(&args[i]);
        if (k < 0) return 0;
        if (i < npos) t->pos_mask[i] |= 1u << k;
        else t->field_mask[i - npos] |= 1u << k;
    }
    if (npos > t->max_pos) t->max_pos = npos;
    if (nfields > t->nfields) t->nfields = nfields;
    return 1;
}

/* Python's checks of the fields: the source names them as the table's columns. */
static int
same_fields(Typed *t, long long sid, Source *src)
{
    if (sid != t->checked_sid) {
        int eq = 0;
        if (src->names != NULL && t->names != NULL) {
            eq = PyObject_RichCompareBool(src->names, t->names, Py_EQ);
            if (eq < 0) return -1;
        }
        else
            eq = src->nnames == 0 && t->nfields == 0;
        t->checked_sid = sid;
        t->checked_ok = eq;
    }
    return t->checked_ok;
}

int
bread_typed_event(Renderer *self, long long wid, long long sid, long long clock,
                  const Val *args, Py_ssize_t nargs, int simple,
                  const unsigned char *Py_UNUSED(ev), Py_ssize_t Py_UNUSED(evlen))
{
    Typed *t = self->typed;
    Source *src = sid >= 0 && sid < MAX_IDS ? self->sources[sid] : NULL;
    Writer *w = wid >= 0 && wid < MAX_IDS ? &self->writers[wid] : NULL;
    if (t == NULL || !simple || src == NULL || w == NULL || w->name == NULL) return 0;
    Py_ssize_t nn = src->nnames;   /* as bread.events: fields only if every one is there */
    Py_ssize_t npos = nn && nargs >= nn ? nargs - nn : nargs, nf = nargs - npos;
    if (t->infer) return kinds_event(t, sid, args, npos, nf);
    int same = same_fields(t, sid, src);
    if (same <= 0) return same;
    if (npos > t->npos) {
        t->late++;
        return 1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int r = fits(&t->cols[i < npos ? i : t->npos + i - npos], &args[i]);
        if (r < 0) return 0;
        if (r == 0) {
            t->late++;
            return 1;
        }
    }
    long long ns;
    if (!event_ns(self, clock, &ns)) return 0;
    Py_ssize_t row = self->rows;
    for (Py_ssize_t c = 0; c < t->npos + t->nfields; c++) {
        const Val *v = c < npos ? &args[c] : c < t->npos ? NULL
                     : nf ? &args[npos + c - t->npos] : NULL;
        if (put_value(&t->cols[c], row, v) < 0) return -1;
    }
    long long us = ns / 1000 - (ns % 1000 < 0);   /* floor, as ns // 1000 */
    if (buf_put(&self->col[C_NS], &us, sizeof us) < 0
        || buf_put(&self->col[C_SID], &sid, sizeof sid) < 0
        || buf_put(&self->col[C_WID], &wid, sizeof wid) < 0)
        return -1;
    self->rows++;
    return 1;
}

void
bread_typed_free(Typed *t)
{
    if (t == NULL) return;
    for (Py_ssize_t c = 0; c < MAX_TYPED_COLS; c++) {
        PyMem_Free(t->cols[c].data.p);
        PyMem_Free(t->cols[c].offs.p);
        PyMem_Free(t->cols[c].valid.p);
    }
    Py_XDECREF(t->names);
    PyMem_Free(t);
}

static void
start_columns(Renderer *self, Typed *t)
{
    for (Py_ssize_t c = 0; c < MAX_TYPED_COLS; c++) {
        TypedCol *col = &t->cols[c];
        col->data.len = col->offs.len = col->valid.len = 0;
        col->nulls = 0;
        if (col->kind == K_STRING) {
            int zero = 0;
            buf_put(&col->offs, &zero, sizeof zero);   /* room reserved by set_typed */
        }
    }
    self->col[C_NS].len = self->col[C_SID].len = self->col[C_WID].len = 0;
    self->rows = 0;
}

/* set_typed(kinds: bytes or None, positional, field names): rows of columns of these
 * kinds (positional ones, then one per field name); None: the kinds mode. */
PyObject *
bread_set_typed(Renderer *self, PyObject *a)
{
    PyObject *kinds, *names;
    Py_ssize_t npos;
    if (!PyArg_ParseTuple(a, "OnO!:set_typed", &kinds, &npos, &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t nf = PyTuple_GET_SIZE(names);
    int infer = kinds == Py_None;
    if (!infer && (!PyBytes_Check(kinds) || npos < 0 || npos > MAX_ARGS || nf > MAX_ARGS
                   || PyBytes_GET_SIZE(kinds) != npos + nf)) {
        PyErr_SetString(PyExc_ValueError, "set_typed: kinds must be bytes, one per column");
        return NULL;
    }
    Typed *t = self->typed;
    if (t == NULL && (t = self->typed = PyMem_Calloc(1, sizeof(Typed))) == NULL)
        return PyErr_NoMemory();
    t->infer = infer;
    t->npos = infer ? 0 : npos;
    t->nfields = infer ? 0 : nf;
    Py_INCREF(names);
    Py_XSETREF(t->names, names);
    t->checked_sid = -1;
    t->late = t->max_pos = t->nsids = 0;
    memset(t->pos_mask, 0, sizeof t->pos_mask);
    memset(t->field_mask, 0, sizeof t->field_mask);
    for (Py_ssize_t c = 0; c < MAX_TYPED_COLS; c++) {
        int k = !infer && c < npos + nf ? (unsigned char)PyBytes_AS_STRING(kinds)[c] : K_NULL;
        if (k > K_STRING) {
            PyErr_SetString(PyExc_ValueError, "set_typed: a kind C does not make");
            return NULL;
        }
        t->cols[c].kind = k;
        if (k == K_STRING && buf_reserve(&t->cols[c].offs, sizeof(int)) < 0) return NULL;
    }
    start_columns(self, t);
    Py_RETURN_NONE;
}

static PyObject *
masks(const unsigned *m, Py_ssize_t n)
{
    PyObject *r = PyList_New(n);
    for (Py_ssize_t i = 0; r != NULL && i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLong(m[i]);
        if (x == NULL) Py_CLEAR(r);
        else PyList_SET_ITEM(r, i, x);
    }
    return r;
}

static PyObject *
bytes_of(const Buf *b)
{
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

/* take_typed(): rows mode: (rows, time us, source ids, writer ids (int64 buffers),
 * [(data, offsets or None, validity or None) per column], late); kinds mode:
 * (positional, [kind bits per positional column], [per field], [source ids]). Both
 * start afresh. */
PyObject *
bread_take_typed(Renderer *self, PyObject *Py_UNUSED(unused))
{
    Typed *t = self->typed;
    if (t == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_typed() first");
        return NULL;
    }
    if (t->infer) {
        PyObject *sids = PyList_New(t->nsids);
        for (int k = 0; sids != NULL && k < t->nsids; k++) {
            PyObject *x = PyLong_FromLongLong(t->sids[k]);
            if (x == NULL) Py_CLEAR(sids);
            else PyList_SET_ITEM(sids, k, x);
        }
        PyObject *r = Py_BuildValue("nNNN", t->max_pos, masks(t->pos_mask, t->max_pos),
                                    masks(t->field_mask, t->nfields), sids);
        t->max_pos = t->nfields = t->nsids = 0;
        memset(t->pos_mask, 0, sizeof t->pos_mask);
        memset(t->field_mask, 0, sizeof t->field_mask);
        return r;
    }
    Py_ssize_t ncols = t->npos + t->nfields;
    PyObject *cols = PyList_New(ncols);
    for (Py_ssize_t c = 0; cols != NULL && c < ncols; c++) {
        TypedCol *col = &t->cols[c];
        PyObject *x = Py_BuildValue("NNN", bytes_of(&col->data),
                                    col->kind == K_STRING ? bytes_of(&col->offs)
                                                          : Py_NewRef(Py_None),
                                    col->nulls ? bytes_of(&col->valid) : Py_NewRef(Py_None));
        if (x == NULL) Py_CLEAR(cols);
        else PyList_SET_ITEM(cols, c, x);
    }
    if (cols == NULL) return NULL;
    PyObject *r = Py_BuildValue("nNNNNL", self->rows, bytes_of(&self->col[C_NS]),
                                bytes_of(&self->col[C_SID]), bytes_of(&self->col[C_WID]), cols,
                                t->late);
    t->late = 0;
    start_columns(self, t);
    return r;
}
