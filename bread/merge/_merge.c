/*
 * bread._merge: the k-way merge of the sorted reader (bread -s), in C.
 *
 * The pure-Python code is the reference: bread/merge/merger.py (Merger), which this
 * matches item for item (tests/test_sort.py runs both). A run is what one
 * events frame of one writer gave: its items (the frame's rendered lines as
 * one bytes object, or a list of Events) with a key per item, the item's time
 * and, for text, where its line ends. emit(limit) gives, in order of (time,
 * input position, writer id, run, place in the run), every item held whose
 * time is below the limit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdlib.h>
#include <string.h>

typedef struct { long long ns; Py_ssize_t a, b; } Ent;   /* text: bytes [a, b); list: item a */

typedef struct {
    PyObject *items;             /* bytes or list */
    Ent *e;
    Py_ssize_t n, at;
    long long position, wid, seq;
} Run;

typedef struct {
    PyObject_HEAD
    int text;
    Run **heap;
    Py_ssize_t nheap, cap;
    long long seq;
    Py_ssize_t held;             /* items added and not yet emitted */
    Py_ssize_t held_bytes;       /* text: the size of the runs not wholly emitted */
    Py_ssize_t max_out;          /* bytes (text) or items (list) per emit() call, about */
    char *buf;                   /* emit()'s text, kept between calls */
    Py_ssize_t bufcap;
} Merger;

static void
run_free(Run *r)
{
    Py_XDECREF(r->items);
    PyMem_Free(r->e);
    PyMem_Free(r);
}

static inline int
less(const Run *x, const Run *y)
{
    long long a = x->e[x->at].ns, b = y->e[y->at].ns;
    if (a != b) return a < b;
    if (x->position != y->position) return x->position < y->position;
    if (x->wid != y->wid) return x->wid < y->wid;
    return x->seq < y->seq;
}

static void
sift_down(Merger *m, Py_ssize_t i)
{
    Run **h = m->heap;
    Py_ssize_t n = m->nheap;
    Run *r = h[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && less(h[c + 1], h[c])) c++;
        if (!less(h[c], r)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = r;
}

static void
sift_up(Merger *m, Py_ssize_t i)
{
    Run **h = m->heap;
    Run *r = h[i];
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!less(r, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = r;
}

static int
cmp_ent(const void *x, const void *y)
{
    const Ent *a = x, *b = y;
    if (a->ns != b->ns) return a->ns < b->ns ? -1 : 1;
    return a->a < b->a ? -1 : a->a > b->a;   /* places are distinct: a stable sort */
}

/* add(items, keys, position, writer id): a run; keys are native int64 pairs
 * (time, end of the item's line in items, or anything for a list). */
static PyObject *
merger_add(Merger *self, PyObject *args)
{
    PyObject *items;
    Py_buffer keys;
    long long position, wid;
    if (!PyArg_ParseTuple(args, "Oy*LL:add", &items, &keys, &position, &wid)) return NULL;
    Run *r = NULL;
    if (keys.len % (2 * (Py_ssize_t)sizeof(long long))) {
        PyErr_SetString(PyExc_ValueError, "keys must be int64 pairs");
        goto fail;
    }
    Py_ssize_t n = keys.len / (2 * (Py_ssize_t)sizeof(long long));
    if (self->text ? !PyBytes_Check(items) : !PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, self->text ? "a text merger's items are bytes"
                                                    : "an items merger's items are a list");
        goto fail;
    }
    if (!self->text && PyList_GET_SIZE(items) != n) {
        PyErr_SetString(PyExc_ValueError, "one key per item");
        goto fail;
    }
    if (n == 0) { PyBuffer_Release(&keys); Py_RETURN_NONE; }
    r = PyMem_Calloc(1, sizeof(Run));
    if (r == NULL || (r->e = PyMem_Malloc(n * sizeof(Ent))) == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    const long long *k = keys.buf;
    Py_ssize_t size = self->text ? PyBytes_GET_SIZE(items) : n, prev = 0;
    int sorted = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Ent *e = &r->e[i];
        e->ns = k[2 * i];
        if (self->text) {
            long long end;
            memcpy(&end, &k[2 * i + 1], sizeof end);
            if (end < prev || end > size) {
                PyErr_SetString(PyExc_ValueError, "line ends must grow within the text");
                goto fail;
            }
            e->a = prev;
            e->b = prev = (Py_ssize_t)end;
        }
        else
            e->a = e->b = i;
        if (i && e->ns < r->e[i - 1].ns) sorted = 0;
    }
    if (!sorted) qsort(r->e, n, sizeof(Ent), cmp_ent);
    if (self->nheap == self->cap) {
        Py_ssize_t cap = self->cap ? 2 * self->cap : 16;
        Run **h = PyMem_Realloc(self->heap, cap * sizeof(Run *));
        if (h == NULL) { PyErr_NoMemory(); goto fail; }
        self->heap = h;
        self->cap = cap;
    }
    Py_INCREF(items);
    r->items = items;
    r->n = n;
    r->position = position;
    r->wid = wid;
    r->seq = self->seq++;
    self->heap[self->nheap++] = r;
    sift_up(self, self->nheap - 1);
    self->held += n;
    if (self->text) self->held_bytes += PyBytes_GET_SIZE(items);
    PyBuffer_Release(&keys);
    Py_RETURN_NONE;
fail:
    if (r != NULL) run_free(r);
    PyBuffer_Release(&keys);
    return NULL;
}

/* Does item `at` of run x come before the head of run y? */
static inline int
before(const Run *x, Py_ssize_t at, const Run *y)
{
    long long a = x->e[at].ns, b = y->e[y->at].ns;
    if (a != b) return a < b;
    if (x->position != y->position) return x->position < y->position;
    if (x->wid != y->wid) return x->wid < y->wid;
    return x->seq < y->seq;
}

static int
out_text(Merger *self, Py_ssize_t *len, const char *s, Py_ssize_t n)
{
    if (n == 0)     /* nothing: buf may still be NULL, which memcpy must never get */
        return 0;
    if (*len + n > self->bufcap) {
        Py_ssize_t c = self->bufcap ? self->bufcap : 1 << 16;
        while (c < *len + n) c *= 2;
        char *p = PyMem_Realloc(self->buf, c);
        if (p == NULL) { PyErr_NoMemory(); return -1; }
        self->buf = p;
        self->bufcap = c;
    }
    memcpy(self->buf + *len, s, n);
    *len += n;
    return 0;
}

/* emit(limit=None) -> bytes or list: the items held whose time is below limit
 * (all with None), in order; at most about max_out per call: call again until
 * it gives nothing. The run at the top gives items for as long as they come
 * before every other run's head (a thread logs in bursts), its contiguous
 * lines in one copy, with no heap work between them. */
static PyObject *
merger_emit(Merger *self, PyObject *args)
{
    PyObject *lim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:emit", &lim)) return NULL;
    long long limit = 0;
    int bounded = lim != Py_None;
    if (bounded) {
        limit = PyLong_AsLongLong(lim);
        if (limit == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *list = NULL;
    if (!self->text && (list = PyList_New(0)) == NULL) return NULL;
    Py_ssize_t len = 0;          /* text bytes, or list items, given so far */
    while (self->nheap && len < self->max_out) {
        Run *r = self->heap[0];
        if (bounded && r->e[r->at].ns >= limit) break;
        Run *next = NULL;
        if (self->nheap > 1)
            next = self->nheap > 2 && less(self->heap[2], self->heap[1]) ? self->heap[2]
                                                                        : self->heap[1];
        Py_ssize_t at = r->at, a = r->e[at].a, b = a;
        do {
            Ent *e = &r->e[at];
            if (self->text) {
                if (e->a != b) {     /* not contiguous (the run was sorted here) */
                    if (out_text(self, &len, PyBytes_AS_STRING(r->items) + a, b - a) < 0)
                        goto fail;
                    a = e->a;
                }
                b = e->b;
            }
            else {
                if (PyList_Append(list, PyList_GET_ITEM(r->items, e->a)) < 0) goto fail;
                len++;
            }
            at++;
        } while (at < r->n && (!bounded || r->e[at].ns < limit)
                 && (next == NULL || before(r, at, next))
                 && len + (b - a) < self->max_out);
        if (self->text && out_text(self, &len, PyBytes_AS_STRING(r->items) + a, b - a) < 0)
            goto fail;
        self->held -= at - r->at;
        r->at = at;
        if (at == r->n) {
            if (self->text) self->held_bytes -= PyBytes_GET_SIZE(r->items);
            self->heap[0] = self->heap[--self->nheap];
            run_free(r);
        }
        if (self->nheap) sift_down(self, 0);
    }
    if (!self->text) return list;
    return PyBytes_FromStringAndSize(self->buf ? self->buf : "", len);
fail:
    Py_XDECREF(list);
    return NULL;
}

static PyObject *
merger_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"text", "max_out", NULL};
    int text;
    Py_ssize_t max_out = 1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "p|n:Merger", kwlist, &text, &max_out))
        return NULL;
    if (max_out < 1) {
        PyErr_SetString(PyExc_ValueError, "max_out must be positive");
        return NULL;
    }
    Merger *self = (Merger *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->text = text;
    self->max_out = max_out;
    return (PyObject *)self;
}

static int
merger_traverse(Merger *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->nheap; i++)
        Py_VISIT(self->heap[i]->items);
    return 0;
}

static int
merger_clear(Merger *self)
{
    for (Py_ssize_t i = 0; i < self->nheap; i++) run_free(self->heap[i]);
    self->nheap = 0;
    self->held = 0;
    return 0;
}

static void
merger_dealloc(Merger *self)
{
    PyObject_GC_UnTrack(self);
    merger_clear(self);
    PyMem_Free(self->heap);
    PyMem_Free(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef merger_methods[] = {
    {"add", (PyCFunction)merger_add, METH_VARARGS,
     "add(items, keys, position, writer id): a run of items with (time, end) int64 keys"},
    {"emit", (PyCFunction)merger_emit, METH_VARARGS,
     "emit(limit=None) -> the items held with time < limit, in order (at most about max_out)"},
    {NULL}
};

static PyMemberDef merger_members[] = {
    {"held", T_PYSSIZET, offsetof(Merger, held), READONLY, "items added and not yet emitted"},
    {"held_bytes", T_PYSSIZET, offsetof(Merger, held_bytes), READONLY,
     "text: the size of the runs held (a run is freed once wholly emitted); 0 for items"},
    {NULL}
};

static PyTypeObject MergerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._merge.Merger",
    .tp_basicsize = sizeof(Merger),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Merger(text, max_out=1 MiB): sorted runs of lines or items merged by time.",
    .tp_new = merger_new,
    .tp_traverse = (traverseproc)merger_traverse,
    .tp_clear = (inquiry)merger_clear,
    .tp_dealloc = (destructor)merger_dealloc,
    .tp_methods = merger_methods,
    .tp_members = merger_members,
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "bread._merge",
    .m_doc = "bread's k-way merge of sorted runs, in C.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__merge(void);   /* declared: the one function exported */

PyMODINIT_FUNC
PyInit__merge(void)
{
    if (PyType_Ready(&MergerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Merger", (PyObject *)&MergerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
