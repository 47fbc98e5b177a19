/* blog._speedups: the hot path of a log call, in C.
 *
 * The pure-Python code is the reference: blog/channel.py (PyChannel),
 * blog/logger.py (_make_method) and blog/event.py (the wrapper). This file
 * does the same, faster, and whenever it meets anything but the common case
 * it calls the Python function, which starts over. The common case: the call
 * site is cached, no keyword fields, every argument is a plain scalar, and
 * the thread's channel is below its limit. Then a call is: find the site by
 * the caller's instruction offset, read the wall clock, encode
 * [sid, clock delta, [args...]] as msgpack straight into the thread's
 * channel buffer. No Python object is allocated.
 *
 * Every function here runs without releasing the GIL and without calling
 * Python code between reading and updating a channel, so a push, a mark and
 * a take never interleave.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "_encode.h"

static PyObject *str_c, *str_min, *str_name;

/* Wall clock in ns, as time.time_ns() on POSIX. */
static inline long long
clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- Channel: one thread's encoded events, waiting for the consumer ----- */

typedef struct {
    PyObject_HEAD
    Buf buf;                 /* events since the last take(), back to back */
    Py_ssize_t count;        /* events in buf */
    long long base;          /* clock the first delta in buf is relative to */
    long long prev;          /* clock of the last event pushed */
    long long lo, hi;        /* least and greatest clock in buf */
    Py_ssize_t capacity;     /* bytes buf may hold */
    Py_ssize_t wake_at;      /* bytes at which the consumer is woken */
    Py_ssize_t limit;        /* bytes at which a push leaves the fast path */
    Py_ssize_t dropped;      /* events dropped so far; written by the producer only */
    char woken;
    PyObject *writer;
    PyObject *marks;         /* [(offset, count, prev, entry)]: in-band metadata */
    /* The crash buffer (blog/crashbuf.py, docs/format.md 15): buf mirrored into the
     * active half of a shared file mapping, its length stored after the bytes. */
    PyObject *slot_map;      /* the mmap, or NULL */
    Py_buffer view;
    char *map;
    Py_ssize_t half;         /* bytes per half */
    int active;              /* the half the thread appends to */
    Py_ssize_t mirrored;     /* bytes of buf in the active half */
    PyObject *weakrefs;      /* the thread state's entry finds it by a weak reference */
} Channel;

#define SLOT_PAGE 4096
#define SLOT_ACTIVE_AT 24
#define SLOT_HALF_AT(h) (32 + 24 * (h))

static inline void
slot_store(char *at, unsigned long long v)
{
    __atomic_store_n((unsigned long long *)at, v, __ATOMIC_RELEASE);
}

static PyTypeObject ChannelType;

/* What take() returns; its twin is blog.channel.Taken (same fields, same order). */
static PyTypeObject *TakenType;
static PyStructSequence_Field taken_fields[] = {
    {"data", "the encoded events, back to back"},
    {"count", "how many events"},
    {"base", "the clock the first event's delta is relative to"},
    {"lo", "the least clock of the events"},
    {"hi", "the greatest clock of the events"},
    {"marks", "in-band metadata: [(offset, count, prev clock, entry)]"},
    {NULL}
};
static PyStructSequence_Desc taken_desc = {
    "blog._speedups.Taken", "What Channel.take() returns.", taken_fields, 6
};

static void
channel_reset(Channel *self)
{
    self->buf.len = 0;
    self->count = 0;
    self->base = self->prev;
    self->lo = LLONG_MAX;
    self->hi = LLONG_MIN;
    self->limit = self->wake_at < self->capacity ? self->wake_at : self->capacity;
    self->woken = 0;
}

/* Start an event: array header, sid and clock delta. */
static int
begin_event(Channel *self, int nelems, long long sid, long long clock)
{
    if (buf_reserve(&self->buf, 1) < 0) return -1;
    self->buf.p[self->buf.len++] = (char)(0x90 | nelems);
    if (put_int(&self->buf, sid) < 0) return -1;
    return put_int(&self->buf, clock - self->prev);
}

static inline void
mirror(Channel *self)
{
    Py_ssize_t n = self->buf.len - self->mirrored;
    if (n <= 0 || self->buf.len > self->half)
        return;                     /* nothing new, or past the slack: not mirrored */
    memcpy(self->map + SLOT_PAGE + self->active * self->half + self->mirrored,
           self->buf.p + self->mirrored, n);
    self->mirrored = self->buf.len;
    slot_store(self->map + SLOT_HALF_AT(self->active), (unsigned long long)self->mirrored);
}

static inline void
end_event(Channel *self, long long clock)
{
    if (self->map != NULL) mirror(self);
    self->prev = clock;
    if (clock < self->lo) self->lo = clock;
    if (clock > self->hi) self->hi = clock;
    self->count++;
}

/* Upper bound of the encoded size of one plain scalar, or -1 if it is not one
 * (or not encodable here). Everything that can fail, and so allocate an exception
 * (a GC object, whose allocation can start a collection and run Python code), happens
 * here, before the channel is touched; put_scalar() then repeats the same calls,
 * which can no longer fail (ints are immutable, the UTF-8 form is cached in the str). */
static Py_ssize_t
scalar_size(PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t == &PyLong_Type) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow < 0) return -1;
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(a);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        }
        else if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        return 9;
    }
    if (t == &PyFloat_Type) return 9;
    if (t == &PyUnicode_Type) {
        Py_ssize_t n;
        if (PyUnicode_AsUTF8AndSize(a, &n) == NULL) { PyErr_Clear(); return -1; }
        return n + 5;
    }
    if (a == Py_None || t == &PyBool_Type) return 1;
    if (t == &PyBytes_Type) return PyBytes_GET_SIZE(a) + 5;
    return -1;
}

/* The fast path: [sid, delta, [args...]] with plain scalar args.
 * 1 pushed, 0 not here (not plain, or past the limit: Python decides), -1 error.
 * An event is accepted if its exact encoded size fits below the limit, as in
 * PyChannel (blog/channel.py); a refused event leaves the channel as it was.
 * Nothing between the first write into the channel and the end can run Python code. */
static int
push_plain(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
           long long clock)
{
    if (n > 0xffff)
        return 0;
    Py_ssize_t need = 1 + 9 + 9 + 3;   /* upper bound: headers, sid, delta, args header */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t sz = scalar_size(args[i]);
        if (sz < 0)
            return 0;
        need += sz;
    }
    /* Each value's least encoded size is its upper bound less 8: a bound that far
     * past the limit cannot fit, and is not worth reserving memory for. */
    if (self->buf.len + need - 8 * (n + 2) - 2 > self->limit)
        return 0;
    if (buf_reserve(&self->buf, need) < 0)
        return -1;
    /* From here on: no allocation, no failure. */
    Py_ssize_t mark = self->buf.len;
    long long now = clock == LLONG_MIN ? clock_ns() : clock;   /* "now": the fast paths */
    if (begin_event(self, 3, sid, now) < 0)
        return -1;   /* cannot happen: reserved */
    if (n < 16) self->buf.p[self->buf.len++] = (char)(0x90 | n);
    else put_be(&self->buf, 0xdc, n, 2);
    for (Py_ssize_t i = 0; i < n; i++)
        (void)put_scalar(&self->buf, args[i]);
    if (self->buf.len > self->limit) {
        self->buf.len = mark;
        return 0;
    }
    end_event(self, now);
    return 1;
}

/* The scratch buffer of push_rich (the GIL makes it one caller's at a time; nothing in
 * put_value() can call back into a log call, and a busy flag says so if it ever did). */
static Buf scratch;
static int scratch_busy;

/* The fast path for values beyond the plain scalars (_encode.h put_value): they are
 * encoded first into a scratch buffer, then the event is copied into the channel, so
 * that nothing between the first write into the channel and the end can fail or run
 * Python code. 1 pushed, 0 not here (the Python path), -1 error. */
static int
push_rich(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
          long long clock, unsigned long long shown_by_repr)
{
    if (scratch_busy || n > 0xffff)
        return 0;
    scratch_busy = 1;
    scratch.len = 0;
    int r = put_args(&scratch, args, n, shown_by_repr);
    scratch_busy = 0;
    if (r <= 0) {
        if (scratch.cap > (1 << 20)) {   /* a huge value: give its memory back */
            PyMem_Free(scratch.p);
            scratch.p = NULL;
            scratch.cap = 0;
        }
        /* MemoryError, and what is not an Exception (KeyboardInterrupt from a signal
         * handler run meanwhile, SystemExit): the application's. */
        if (r < 0 && (PyErr_ExceptionMatches(PyExc_MemoryError)
                      || !PyErr_ExceptionMatches(PyExc_Exception)))
            return -1;
        PyErr_Clear();
        return 0;
    }
    /* Each of the event's header values takes at most 9 bytes, at least 1. */
    if (self->buf.len + 3 + scratch.len > self->limit)
        return 0;
    if (buf_reserve(&self->buf, 1 + 9 + 9 + scratch.len) < 0)
        return -1;
    /* From here on: no allocation, no failure. */
    Py_ssize_t mark = self->buf.len;
    long long now = clock == LLONG_MIN ? clock_ns() : clock;
    if (begin_event(self, 3, sid, now) < 0)
        return -1;   /* cannot happen: reserved */
    memcpy(self->buf.p + self->buf.len, scratch.p, scratch.len);
    self->buf.len += scratch.len;
    if (self->buf.len > self->limit) {
        self->buf.len = mark;
        return 0;
    }
    end_event(self, now);
    if (scratch.cap > (1 << 20)) {       /* a huge value: give its memory back */
        PyMem_Free(scratch.p);
        scratch.p = NULL;
        scratch.cap = 0;
    }
    return 1;
}

/* The call paths' push: plain scalars straight into the channel, else push_rich. */
static inline int
push_call(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
          unsigned long long shown_by_repr)
{
    int r = push_plain(self, sid, args, n, LLONG_MIN);
    if (r != 0)
        return r;
    for (Py_ssize_t i = 0; i < n; i++)
        if (scalar_size(args[i]) < 0)
            return push_rich(self, sid, args, n, LLONG_MIN, shown_by_repr);
    return 0;                    /* all plain: refused for its size (the Python path decides) */
}

static PyObject *
channel_push_values(Channel *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "push_values(sid, clock, values: tuple)");
        return NULL;
    }
    long long clock = PyLong_AsLongLong(args[1]);
    if (clock == -1 && PyErr_Occurred())
        return NULL;
    PyObject *t = args[2];
    long long sid = PyLong_AsLongLong(args[0]);
    if (sid == -1 && PyErr_Occurred())
        return NULL;
    int r = push_plain(self, sid, &PyTuple_GET_ITEM(t, 0), PyTuple_GET_SIZE(t), clock);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
channel_push_raw(Channel *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"sid", "clock", "nelems", "tail", "force", NULL};
    long long sid, clock;
    int nelems, force = 0;
    Py_buffer tail;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LLiy*|p:push_raw", kwlist,
                                     &sid, &clock, &nelems, &tail, &force))
        return NULL;
    if (nelems < 1 || nelems > 15) {
        PyBuffer_Release(&tail);
        PyErr_SetString(PyExc_ValueError, "nelems must be 1..15");
        return NULL;
    }
    if (!force && self->buf.len + tail.len > self->limit) {   /* cannot fit: no need to try */
        PyBuffer_Release(&tail);
        Py_RETURN_FALSE;
    }
    Py_ssize_t mark = self->buf.len;
    if (begin_event(self, nelems, sid, clock) < 0 || buf_reserve(&self->buf, tail.len) < 0) {
        self->buf.len = mark;
        PyBuffer_Release(&tail);
        return NULL;
    }
    if (!force && self->buf.len + tail.len > self->limit) {   /* the exact size, as PyChannel */
        self->buf.len = mark;
        PyBuffer_Release(&tail);
        Py_RETURN_FALSE;
    }
    memcpy(self->buf.p + self->buf.len, tail.buf, tail.len);
    self->buf.len += tail.len;
    PyBuffer_Release(&tail);
    end_event(self, clock);
    Py_RETURN_TRUE;
}

static PyObject *
channel_mark(Channel *self, PyObject *entry)
{
    /* The tuple first: a GC allocation can start a collection and so run Python code
     * (which may let another thread take() this channel). Ints are not GC objects. */
    PyObject *m = PyTuple_New(4);
    if (m == NULL)
        return NULL;
    if (self->marks == NULL) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_ValueError, "channel is cleared");
        return NULL;
    }
    PyObject *a = PyLong_FromSsize_t(self->buf.len);
    PyObject *b = PyLong_FromSsize_t(self->count);
    PyObject *c = PyLong_FromLongLong(self->prev);
    if (a == NULL || b == NULL || c == NULL) {
        Py_XDECREF(a); Py_XDECREF(b); Py_XDECREF(c); Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(entry);
    PyTuple_SET_ITEM(m, 0, a); PyTuple_SET_ITEM(m, 1, b);
    PyTuple_SET_ITEM(m, 2, c); PyTuple_SET_ITEM(m, 3, entry);
    int r = PyList_Append(self->marks, m);   /* a list resize: no GC allocation */
    Py_DECREF(m);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
channel_take(Channel *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long seq = 0;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "take(seq=0)");
        return NULL;
    }
    if (nargs == 1 && (seq = PyLong_AsLongLong(args[0])) == -1 && PyErr_Occurred())
        return NULL;
    /* GC allocations first (they can run Python code); then read and reset the channel
     * with nothing in between that can: bytes and ints are not GC objects, and a failure
     * leaves the channel as it was. */
    PyObject *marks = PyList_New(0);
    PyObject *r = PyStructSequence_New(TakenType);
    if (marks == NULL || r == NULL || self->marks == NULL) {
        if (marks != NULL && r != NULL)
            PyErr_SetString(PyExc_ValueError, "channel is cleared");
        Py_XDECREF(marks); Py_XDECREF(r);
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(self->buf.p ? self->buf.p : "", self->buf.len);
    PyObject *count = PyLong_FromSsize_t(self->count);
    PyObject *base = PyLong_FromLongLong(self->base);
    PyObject *lo = PyLong_FromLongLong(self->lo);
    PyObject *hi = PyLong_FromLongLong(self->hi);
    if (data == NULL || count == NULL || base == NULL || lo == NULL || hi == NULL) {
        Py_XDECREF(data); Py_XDECREF(count); Py_XDECREF(base); Py_XDECREF(lo); Py_XDECREF(hi);
        Py_DECREF(marks); Py_DECREF(r);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, data); PyStructSequence_SET_ITEM(r, 1, count);
    PyStructSequence_SET_ITEM(r, 2, base); PyStructSequence_SET_ITEM(r, 3, lo);
    PyStructSequence_SET_ITEM(r, 4, hi);
    PyStructSequence_SET_ITEM(r, 5, self->marks);   /* the channel's reference moves to r */
    self->marks = marks;
    if (self->buf.cap > (1 << 22) && self->buf.len < self->buf.cap / 4) {
        PyMem_Free(self->buf.p);     /* give back the memory of a past burst */
        self->buf.p = NULL;
        self->buf.cap = 0;
    }
    channel_reset(self);
    if (self->map != NULL) {      /* the half is taken by consume seq; on in the other */
        int old = self->active, nw = 1 - old;
        slot_store(self->map + SLOT_HALF_AT(old) + 16, (unsigned long long)seq);
        slot_store(self->map + SLOT_HALF_AT(nw), 0);
        slot_store(self->map + SLOT_HALF_AT(nw) + 8, (unsigned long long)self->base);
        slot_store(self->map + SLOT_HALF_AT(nw) + 16, 0);
        __atomic_store_n((unsigned int *)(self->map + SLOT_ACTIVE_AT), (unsigned int)nw,
                         __ATOMIC_RELEASE);
        self->active = nw;
        self->mirrored = 0;
    }
    return r;
}

/* use_slot(slot): mirror the channel into slot.map (a blog.crashbuf.Slot) from now on,
 * starting with what it holds, in slot.active. */
static PyObject *
channel_use_slot(Channel *self, PyObject *slot)
{
    if (slot == Py_None) {
        if (self->slot_map != NULL) {
            self->map = NULL;
            PyBuffer_Release(&self->view);
            Py_CLEAR(self->slot_map);
        }
        Py_RETURN_NONE;
    }
    PyObject *map = PyObject_GetAttrString(slot, "map");
    if (map == NULL) return NULL;
    PyObject *h = PyObject_GetAttrString(slot, "half");
    PyObject *a = h != NULL ? PyObject_GetAttrString(slot, "active") : NULL;
    Py_ssize_t half = h != NULL ? PyLong_AsSsize_t(h) : -1;
    long active = a != NULL ? PyLong_AsLong(a) : -1;
    Py_XDECREF(h); Py_XDECREF(a);
    if (PyErr_Occurred()) { Py_DECREF(map); return NULL; }
    Py_buffer view;
    if (PyObject_GetBuffer(map, &view, PyBUF_WRITABLE) < 0) { Py_DECREF(map); return NULL; }
    if (half < 0 || (active != 0 && active != 1) || view.len < SLOT_PAGE + 2 * half) {
        PyBuffer_Release(&view);
        Py_DECREF(map);
        PyErr_SetString(PyExc_ValueError, "not a channel file mapping");
        return NULL;
    }
    if (self->slot_map != NULL) {
        PyBuffer_Release(&self->view);
        Py_CLEAR(self->slot_map);
    }
    self->view = view;
    self->slot_map = map;
    self->map = view.buf;
    self->half = half;
    self->active = (int)active;
    self->mirrored = 0;
    slot_store(self->map + SLOT_HALF_AT(self->active), 0);
    slot_store(self->map + SLOT_HALF_AT(self->active) + 8, (unsigned long long)self->base);
    mirror(self);
    Py_RETURN_NONE;
}

static PyObject *
channel_nbytes(Channel *self, void *closure)
{
    return PyLong_FromSsize_t(self->buf.len);
}

static PyObject *
channel_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "wake_at", "writer", "clock", NULL};
    Py_ssize_t capacity, wake_at;
    PyObject *writer;
    long long clock;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nnOL:Channel", kwlist,
                                     &capacity, &wake_at, &writer, &clock))
        return NULL;
    Channel *self = (Channel *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->marks = PyList_New(0);
    if (self->marks == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(writer);
    self->writer = writer;
    self->capacity = capacity;
    self->wake_at = wake_at;
    self->prev = clock;
    channel_reset(self);
    return (PyObject *)self;
}

static int
channel_traverse(Channel *self, visitproc visit, void *arg)
{
    Py_VISIT(self->writer);
    Py_VISIT(self->marks);
    return 0;
}

static int
channel_clear(Channel *self)
{
    Py_CLEAR(self->writer);
    Py_CLEAR(self->marks);
    if (self->slot_map != NULL) {
        self->map = NULL;
        PyBuffer_Release(&self->view);
        Py_CLEAR(self->slot_map);
    }
    return 0;
}

static void
channel_dealloc(Channel *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    channel_clear(self);
    PyMem_Free(self->buf.p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef channel_methods[] = {
    {"push_values", (PyCFunction)(void (*)(void))channel_push_values, METH_FASTCALL,
     "push_values(sid, clock, values) -> bool: append [sid, delta, values] if every value "
     "is a plain scalar encodable here and it fits below the limit"},
    {"push_raw", (PyCFunction)(void (*)(void))channel_push_raw, METH_VARARGS | METH_KEYWORDS,
     "push_raw(sid, clock, nelems, tail, force=False) -> bool: append an event whose "
     "elements after the clock delta are already encoded; False if over the limit"},
    {"mark", (PyCFunction)channel_mark, METH_O,
     "mark(entry): metadata that applies from this point of the channel on"},
    {"take", (PyCFunction)(void (*)(void))channel_take, METH_FASTCALL,
     "take(seq=0) -> (data, count, base, lo, hi, marks), and start afresh (a crash "
     "buffer's half is marked taken by consume seq)"},
    {"use_slot", (PyCFunction)channel_use_slot, METH_O,
     "use_slot(slot): mirror the channel into a crash buffer's channel file from now on"},
    {NULL}
};

static PyMemberDef channel_members[] = {
    {"count", T_PYSSIZET, offsetof(Channel, count), READONLY, "events waiting"},
    {"base", T_LONGLONG, offsetof(Channel, base), READONLY, NULL},
    {"prev", T_LONGLONG, offsetof(Channel, prev), READONLY, NULL},
    {"capacity", T_PYSSIZET, offsetof(Channel, capacity), 0, "bytes the channel may hold"},
    {"wake_at", T_PYSSIZET, offsetof(Channel, wake_at), 0, "bytes that wake the consumer"},
    {"limit", T_PYSSIZET, offsetof(Channel, limit), 0, "bytes at which a push leaves C"},
    {"dropped", T_PYSSIZET, offsetof(Channel, dropped), 0, "events dropped so far"},
    {"woken", T_BOOL, offsetof(Channel, woken), 0, NULL},
    {"writer", T_OBJECT, offsetof(Channel, writer), READONLY, "the SessionWriter"},
    {NULL}
};

static PyGetSetDef channel_getset[] = {
    {"nbytes", (getter)channel_nbytes, NULL, "bytes waiting", NULL},
    {NULL}
};

static PyTypeObject ChannelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.Channel",
    .tp_basicsize = sizeof(Channel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Channel(capacity, wake_at, writer, clock): see blog.channel.PyChannel.",
    .tp_new = channel_new,
    .tp_traverse = (traverseproc)channel_traverse,
    .tp_clear = (inquiry)channel_clear,
    .tp_dealloc = (destructor)channel_dealloc,
    .tp_weaklistoffset = offsetof(Channel, weakrefs),
    .tp_methods = channel_methods,
    .tp_members = channel_members,
    .tp_getset = channel_getset,
};

/* The calling thread's Channel for a session (a new reference), or NULL without an error
 * if the thread has no C channel yet (the Python path makes one).
 *
 * Found in the thread state's dict under the session's ``key`` (a str made of the
 * local's id): an entry (weakref to the local, weakref to the channel), made from
 * local.c the first time. Weak both ways, so that it keeps neither the session nor the
 * channel alive, and checked against ``local`` (an id can be a later object's). A
 * forked child forgets the entry (forget_thread_channel) with the parent's channels. */
static Channel *
thread_channel(PyObject *local, PyObject *key)
{
    PyObject *d = PyThreadState_GetDict();     /* borrowed; NULL: no thread state dict */
    if (d != NULL) {
        PyObject *e = PyDict_GetItemWithError(d, key);
        if (e != NULL && PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == 2
            && PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(e, 0)) == local) {
            PyObject *ch = PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(e, 1));
            if (Py_IS_TYPE(ch, &ChannelType)) {
                Py_INCREF(ch);
                return (Channel *)ch;
            }
        }
        if (e == NULL && PyErr_Occurred())
            PyErr_Clear();
    }
    PyObject *ch = PyObject_GetAttr(local, str_c);
    if (ch == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    if (!Py_IS_TYPE(ch, &ChannelType)) {
        Py_DECREF(ch);
        return NULL;
    }
    if (d != NULL) {      /* the entry for the next calls: an error here only costs speed */
        PyObject *lref = PyWeakref_NewRef(local, NULL);
        PyObject *cref = lref != NULL ? PyWeakref_NewRef(ch, NULL) : NULL;
        PyObject *e = cref != NULL ? PyTuple_Pack(2, lref, cref) : NULL;
        if (e == NULL || PyDict_SetItem(d, key, e) < 0)
            PyErr_Clear();
        Py_XDECREF(lref);
        Py_XDECREF(cref);
        Py_XDECREF(e);
    }
    return (Channel *)ch;
}

/* The thread state dict's key of a session's local: "blog.channel:<id>". */
static PyObject *
thread_key(PyObject *local)
{
    return PyUnicode_FromFormat("blog.channel:%p", (void *)local);
}

/* forget_thread_channel(local): the calling thread's entry goes (a forked child, whose
 * channels of the parent are not its own). */
static PyObject *
forget_thread_channel(PyObject *module, PyObject *local)
{
    PyObject *d = PyThreadState_GetDict();
    PyObject *key = thread_key(local);
    if (key == NULL)
        return NULL;
    if (d != NULL && PyDict_DelItem(d, key) < 0)
        PyErr_Clear();
    Py_DECREF(key);
    Py_RETURN_NONE;
}

/* ---- context fields (blog.context) --------------------------------------- */

/* blog.context.FIELDS once blog.context or blog.bind was first used, else NULL: until
 * then the call paths do not look at it (an application without context pays nothing). */
static PyObject *context_var = NULL;

static PyObject *
use_context(PyObject *module, PyObject *var)
{
    if (!PyContextVar_CheckExact(var)) {
        PyErr_SetString(PyExc_TypeError, "use_context(var: ContextVar)");
        return NULL;
    }
    Py_XSETREF(context_var, Py_NewRef(var));
    Py_RETURN_NONE;
}

/* 1 if fields are in context now (the call takes the Python path, which adds them),
 * 0 if none, -1 on error. */
static inline int
in_context(void)
{
    if (context_var == NULL)
        return 0;
    PyObject *v;
    if (PyContextVar_Get(context_var, Py_None, &v) < 0)
        return -1;
    int r = v != Py_None;
    Py_DECREF(v);
    return r;
}

/* ---- Method: a logger's level method (log.info and friends) ------------ */

#define SITE_CACHE 64

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: site key -> (code, fmt, sid, nargs, kwnames, shown by !r),
                            shared with the Python method */
    PyObject *local;     /* the session's threading.local: .c is the thread's Channel */
    PyObject *fallback;  /* the Python method: handles everything else */
    PyObject *key;       /* the thread state dict's key of the local (thread_channel) */
    /* The sites of the last calls, by (code, instruction offset), direct-mapped: a hit
     * skips making the key int and the dict lookup. An entry holds its site tuple, which
     * holds the code object and the format: neither can be freed (and its address
     * taken by another) while it is cached; every check of the tuple still applies. */
    struct {
        void *code; int lasti; PyObject *site;      /* the key, and the entry it holds */
        PyObject *fmt, *names; Py_ssize_t nargs;    /* the entry's, read once */
        long long sid; unsigned long long shown;
    } cache[SITE_CACHE];
} Method;

/* The site's keyword names (a tuple, empty without keywords) are the call's. A call
 * site's kwnames is a constant of its code object; the site entry's tuple is built by
 * the Python method from the same strs: compared item by item, by identity. */
static inline int
same_names(PyObject *names, PyObject *kwnames, Py_ssize_t nkw)
{
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != nkw)
        return 0;
    if (names == kwnames)
        return 1;
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (PyTuple_GET_ITEM(names, i) != PyTuple_GET_ITEM(kwnames, i))
            return 0;
    return 1;
}

/* The site entry (code, fmt, sid, nargs, kwnames, shown by !r) is this call's. */
static inline int
site_fits(PyObject *site, PyCodeObject *code, PyObject *fmt, Py_ssize_t nargs,
          PyObject *kwnames, Py_ssize_t nkw)
{
    if (site == NULL || !PyTuple_CheckExact(site) || PyTuple_GET_SIZE(site) != 6
        || (PyObject *)code != PyTuple_GET_ITEM(site, 0) || fmt != PyTuple_GET_ITEM(site, 1))
        return 0;
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(site, 3));
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return n == nargs - 1 && same_names(PyTuple_GET_ITEM(site, 4), kwnames, nkw);
}

static PyObject *
method_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Method *self = (Method *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1)
        goto slow;
    /* No Python frame is pushed for this C call: the current frame is the caller's. */
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL)
        goto slow;
    /* The site key: the code object's address (shifted, as id(code) >> 4) xor the
     * instruction offset. Its twin is blog.logger.site_key(): they must agree. */
    PyCodeObject *code = PyFrame_GetCode(frame);
    int lasti = PyFrame_GetLasti(frame);
    size_t h = ((size_t)code >> 4) ^ (size_t)lasti;
    int slot = (int)((h ^ (h >> 7)) & (SITE_CACHE - 1));
    Py_DECREF(code);   /* the cached entry's tuple holds it, or the call goes slow */
    if (!(self->cache[slot].code == (void *)code && self->cache[slot].lasti == lasti
          && self->cache[slot].fmt == args[0] && self->cache[slot].nargs == nargs - 1
          && same_names(self->cache[slot].names, kwnames, nkw))) {
        PyObject *key = PyLong_FromSize_t(h);
        if (key == NULL)
            return NULL;
        PyObject *site = PyDict_GetItemWithError(self->sites, key);
        Py_DECREF(key);
        if (site == NULL || !site_fits(site, code, args[0], nargs, kwnames, nkw)) {
            if (PyErr_Occurred())
                return NULL;
            goto slow;
        }
        long long sid = PyLong_AsLongLong(PyTuple_GET_ITEM(site, 2));
        unsigned long long shown = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(site, 5));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto slow;
        }
        Py_XSETREF(self->cache[slot].site, Py_NewRef(site));
        self->cache[slot].code = (void *)code;
        self->cache[slot].lasti = lasti;
        self->cache[slot].fmt = PyTuple_GET_ITEM(site, 1);
        self->cache[slot].names = PyTuple_GET_ITEM(site, 4);
        self->cache[slot].nargs = nargs - 1;
        self->cache[slot].sid = sid;
        self->cache[slot].shown = shown;
    }
    /* Read from the entry now: making the thread's channel entry, or a push, may run
     * code (a collection's finalizer) that logs and refills the slot. */
    long long sid = self->cache[slot].sid;
    unsigned long long shown = self->cache[slot].shown;
    int ctx = in_context();
    if (ctx != 0) {
        if (ctx < 0)
            return NULL;
        goto slow;
    }
    Channel *ch = thread_channel(self->local, self->key);
    if (ch == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto slow;
    }
    /* The keywords' values follow the arguments in args: the event's values, in order. */
    int pushed = push_call(ch, sid, args + 1, nargs - 1 + nkw, shown);
    Py_DECREF(ch);
    if (pushed < 0)
        return NULL;
    if (pushed)
        Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
method_traverse(Method *self, visitproc visit, void *arg)
{
    Py_VISIT(self->sites);
    Py_VISIT(self->local);
    Py_VISIT(self->fallback);
    for (int i = 0; i < SITE_CACHE; i++)
        Py_VISIT(self->cache[i].site);
    return 0;
}

static int
method_clear(Method *self)
{
    Py_CLEAR(self->sites);
    Py_CLEAR(self->local);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->key);
    for (int i = 0; i < SITE_CACHE; i++) {
        Py_CLEAR(self->cache[i].site);
        self->cache[i].code = NULL;
        self->cache[i].fmt = self->cache[i].names = NULL;
    }
    return 0;
}

static void
method_dealloc(Method *self)
{
    PyObject_GC_UnTrack(self);
    method_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
method_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *sites, *local, *fallback;
    if (!PyArg_ParseTuple(args, "O!OO:Method", &PyDict_Type, &sites, &local, &fallback))
        return NULL;
    Method *self = (Method *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = method_vectorcall;
    Py_INCREF(sites); self->sites = sites;
    Py_INCREF(local); self->local = local;
    Py_INCREF(fallback); self->fallback = fallback;
    self->key = thread_key(local);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *
method_get_name(Method *self, void *closure)
{
    return PyObject_GetAttr(self->fallback, str_name);
}

static PyGetSetDef method_getset[] = {
    {"__name__", (getter)method_get_name, NULL, NULL, NULL},
    {NULL}
};

static PyTypeObject MethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.Method",
    .tp_basicsize = sizeof(Method),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Method(sites, local, fallback): a logger level method with a C fast path.",
    .tp_new = method_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Method, vectorcall),
    .tp_traverse = (traverseproc)method_traverse,
    .tp_clear = (inquiry)method_clear,
    .tp_dealloc = (destructor)method_dealloc,
    .tp_getset = method_getset,
};

/* ---- RecordHandler: blog.stdlib.BlogHandler.handle -------------------- */

/* A logging record's attributes it reads, interned once. */
static PyObject *str_msg, *str_args, *str_exc_info, *str_stack_info, *str_pathname,
                *str_lineno, *str_levelno, *str_logname, *str_created, *str_smin,
                *str_message, *str_asctime, *str_filters;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: (msg, pathname, lineno, levelno, name, len(args)) ->
                            (sid, template, severity, conversions or None), shared with
                            the Python handler */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (thread_channel) */
    PyObject *session;   /* its _min: the session's minimum severity */
    PyObject *handler;   /* its filters (a list): any, and the Python path runs */
    PyObject *fallback;  /* the Python handle: everything else */
    Py_ssize_t base;     /* how many attributes a LogRecord without extra has */
} RecordHandler;

/* 1 if the printf conversion `conv` takes the plain scalar `a` as % does; 0 if not, or
 * not known here (the Python path decides: blog/stdlib.py _fits, its twin). */
static int
printf_takes(Py_UCS4 conv, PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    int overflow;
    long long v;
    switch (conv) {
    case 's': case 'r': case 'a':
        return 1;
    case 'd': case 'i': case 'u':
        if (t == &PyFloat_Type)
            return isfinite(PyFloat_AS_DOUBLE(a));
        /* fall through */
    case 'x': case 'X': case 'o':
        return t == &PyLong_Type || t == &PyBool_Type;
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G':
        if (t == &PyFloat_Type || t == &PyBool_Type)
            return 1;
        if (t != &PyLong_Type)
            return 0;
        v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        return !overflow;        /* within 64 bits: a float holds it (rounded) */
    case 'c':
        if (t == &PyUnicode_Type)
            return PyUnicode_GET_LENGTH(a) == 1;
        if (t != &PyLong_Type && t != &PyBool_Type)
            return 0;
        v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        return !overflow && v >= 0 && v < 0x110000;
    }
    return 0;
}

/* The common record: a str message, a tuple of plain scalars, no extra, no exception or
 * stack, of a call site seen before, no fields in context, each value taken by its
 * conversion. Its twin is BlogHandler.emit's first branch. 1: pushed (or below the
 * minimum); 0: the Python path's, which also handles every error (it goes to the
 * handler's handleError, never to the caller). */
static int
record_push(RecordHandler *self, PyObject *rec)
{
    int r = 0;
    PyObject *d = NULL, *args = NULL;
    PyObject *filters = PyObject_GetAttr(self->handler, str_filters);
    if (filters == NULL)
        goto done;
    int none = PyList_CheckExact(filters) && PyList_GET_SIZE(filters) == 0;
    Py_DECREF(filters);
    if (!none || in_context() != 0)
        goto done;
    d = PyObject_GenericGetDict(rec, NULL);
    if (d == NULL || !PyDict_CheckExact(d))
        goto done;
    /* Other handlers' formatters may have added .message and .asctime: not extra. */
    Py_ssize_t size = PyDict_GET_SIZE(d);
    if (size != self->base) {
        if (size > self->base + 2)
            goto done;
        Py_ssize_t known = self->base;
        known += PyDict_GetItem(d, str_message) != NULL;
        known += PyDict_GetItem(d, str_asctime) != NULL;
        if (known != size)
            goto done;
    }
    PyObject *msg = PyDict_GetItem(d, str_msg);        /* borrowed; NULL: absent */
    args = PyDict_GetItem(d, str_args);
    PyObject *exc = PyDict_GetItem(d, str_exc_info);
    PyObject *stack = PyDict_GetItem(d, str_stack_info);
    PyObject *path = PyDict_GetItem(d, str_pathname);
    PyObject *lineno = PyDict_GetItem(d, str_lineno);
    PyObject *levelno = PyDict_GetItem(d, str_levelno);
    PyObject *name = PyDict_GetItem(d, str_logname);
    PyObject *created = PyDict_GetItem(d, str_created);
    if (msg == NULL || !PyUnicode_CheckExact(msg) || args == NULL || !PyTuple_CheckExact(args)
        || exc != Py_None || stack != Py_None || path == NULL || lineno == NULL
        || levelno == NULL || name == NULL || created == NULL || !PyFloat_CheckExact(created)) {
        args = NULL;
        goto done;
    }
    Py_INCREF(args);        /* held: what follows may run code that changes the record */
    double when = PyFloat_AS_DOUBLE(created) * 1e9;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *count = PyLong_FromSsize_t(n);
    PyObject *key = count != NULL ? PyTuple_Pack(6, msg, path, lineno, levelno, name, count)
                                  : NULL;
    Py_XDECREF(count);
    if (key == NULL)
        goto done;
    PyObject *site = PyDict_GetItemWithError(self->sites, key);
    Py_DECREF(key);
    if (site == NULL || !PyTuple_CheckExact(site) || PyTuple_GET_SIZE(site) != 4)
        goto done;
    PyObject *convs = PyTuple_GET_ITEM(site, 3);
    if (convs != Py_None) {          /* a number conversion: each value must fit its own */
        if (!PyUnicode_CheckExact(convs) || PyUnicode_GET_LENGTH(convs) != n)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!printf_takes(PyUnicode_READ_CHAR(convs, i), PyTuple_GET_ITEM(args, i)))
                goto done;
    }
    long long sid = PyLong_AsLongLong(PyTuple_GET_ITEM(site, 0));
    long severity = PyLong_AsLong(PyTuple_GET_ITEM(site, 2));
    if (PyErr_Occurred())
        goto done;
    PyObject *smin = PyObject_GetAttr(self->session, str_smin);
    long least = smin != NULL ? PyLong_AsLong(smin) : -1;
    Py_XDECREF(smin);
    if (PyErr_Occurred())
        goto done;
    if (severity < least) {            /* below the session's minimum: nothing */
        r = 1;
        goto done;
    }
    if (!(when > -9.2e18 && when < 9.2e18))
        goto done;
    Channel *ch = thread_channel(self->local, self->key);
    if (ch == NULL)
        goto done;
    r = push_plain(ch, sid, &PyTuple_GET_ITEM(args, 0), n, (long long)when);
    Py_DECREF(ch);
    if (r < 0)
        r = 0;
done:
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(args);
    Py_XDECREF(d);
    return r;
}

static PyObject *
record_handler_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames)
{
    RecordHandler *self = (RecordHandler *)op;
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) {
        if (record_push(self, args[0]) > 0)
            Py_RETURN_TRUE;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
record_handler_traverse(RecordHandler *self, visitproc visit, void *arg)
{
    Py_VISIT(self->sites);
    Py_VISIT(self->local);
    Py_VISIT(self->session);
    Py_VISIT(self->handler);
    Py_VISIT(self->fallback);
    return 0;
}

static int
record_handler_clear(RecordHandler *self)
{
    Py_CLEAR(self->sites);
    Py_CLEAR(self->local);
    Py_CLEAR(self->key);
    Py_CLEAR(self->session);
    Py_CLEAR(self->handler);
    Py_CLEAR(self->fallback);
    return 0;
}

static void
record_handler_dealloc(RecordHandler *self)
{
    PyObject_GC_UnTrack(self);
    record_handler_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
record_handler_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *sites, *local, *session, *handler, *fallback;
    Py_ssize_t base;
    if (!PyArg_ParseTuple(args, "O!OOOOn:RecordHandler", &PyDict_Type, &sites, &local,
                          &session, &handler, &fallback, &base))
        return NULL;
    RecordHandler *self = (RecordHandler *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = record_handler_vectorcall;
    self->sites = Py_NewRef(sites);
    self->local = Py_NewRef(local);
    self->session = Py_NewRef(session);
    self->handler = Py_NewRef(handler);
    self->fallback = Py_NewRef(fallback);
    self->base = base;
    self->key = thread_key(local);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyTypeObject RecordHandlerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.RecordHandler",
    .tp_basicsize = sizeof(RecordHandler),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "RecordHandler(sites, local, session, handler, fallback, base): "
              "BlogHandler.handle with a C fast path for the common record.",
    .tp_new = record_handler_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RecordHandler, vectorcall),
    .tp_traverse = (traverseproc)record_handler_traverse,
    .tp_clear = (inquiry)record_handler_clear,
    .tp_dealloc = (destructor)record_handler_dealloc,
};

/* ---- EventCall: a function decorated with @blog.event ------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *logger;    /* its threshold is the minimum severity in force */
    PyObject *sid;       /* the EventSource id */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (thread_channel) */
    PyObject *body;      /* the decorated function, or None if its body is empty */
    PyObject *fallback;  /* the Python wrapper: handles everything else */
    PyObject *dict;      /* __wrapped__, __name__, source, ... (functools.wraps) */
    Py_ssize_t nparams;
    long severity;
} EventCall;

static PyObject *
event_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    EventCall *self = (EventCall *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nparams || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        goto slow;
    PyObject *min = PyObject_GetAttr(self->logger, str_min);
    if (min == NULL)
        return NULL;
    long m = PyLong_AsLong(min);
    Py_DECREF(min);
    if (m == -1 && PyErr_Occurred())
        return NULL;
    if (m <= self->severity) {
        int ctx = in_context();
        if (ctx != 0) {
            if (ctx < 0)
                return NULL;
            goto slow;
        }
        Channel *ch = thread_channel(self->local, self->key);
        if (ch == NULL) {
            if (PyErr_Occurred())
                return NULL;
            goto slow;
        }
        long long sid = PyLong_AsLongLong(self->sid);
        if (sid == -1 && PyErr_Occurred()) {
            Py_DECREF(ch);
            return NULL;
        }
        int pushed = push_call(ch, sid, args, nargs, ~0ULL);   /* zoned: Python's */
        Py_DECREF(ch);
        if (pushed < 0)
            return NULL;
        if (!pushed)
            goto slow;
    }
    if (self->body == Py_None)
        Py_RETURN_NONE;
    return PyObject_Vectorcall(self->body, args, nargsf, NULL);
slow:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *
event_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);   /* a decorated method binds like a function */
}

static int
event_traverse(EventCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->logger);
    Py_VISIT(self->sid);
    Py_VISIT(self->local);
    Py_VISIT(self->body);
    Py_VISIT(self->fallback);
    Py_VISIT(self->dict);
    return 0;
}

static int
event_clear(EventCall *self)
{
    Py_CLEAR(self->logger);
    Py_CLEAR(self->sid);
    Py_CLEAR(self->local);
    Py_CLEAR(self->key);
    Py_CLEAR(self->body);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->dict);
    return 0;
}

static void
event_dealloc(EventCall *self)
{
    PyObject_GC_UnTrack(self);
    event_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
event_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *logger, *sid, *local, *body, *fallback;
    Py_ssize_t nparams;
    long severity;
    if (!PyArg_ParseTuple(args, "OlOnOOO:EventCall", &logger, &severity, &sid, &nparams,
                          &local, &body, &fallback))
        return NULL;
    EventCall *self = (EventCall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = event_vectorcall;
    self->severity = severity;
    self->nparams = nparams;
    Py_INCREF(logger); self->logger = logger;
    Py_INCREF(sid); self->sid = sid;
    Py_INCREF(local); self->local = local;
    Py_INCREF(body); self->body = body;
    Py_INCREF(fallback); self->fallback = fallback;
    self->dict = NULL;
    self->key = thread_key(local);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyGetSetDef event_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL}
};

static PyTypeObject EventCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.EventCall",
    .tp_basicsize = sizeof(EventCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
              | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "EventCall(logger, severity, sid, nparams, local, body, fallback): "
              "an @blog.event function with a C fast path.",
    .tp_new = event_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(EventCall, vectorcall),
    .tp_dictoffset = offsetof(EventCall, dict),
    .tp_descr_get = event_descr_get,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_getset = event_getset,
    .tp_traverse = (traverseproc)event_traverse,
    .tp_clear = (inquiry)event_clear,
    .tp_dealloc = (destructor)event_dealloc,
};

/* ---- tally: the events of a channel's bytes, counted per source ---------- */

/* The end of the msgpack value at p (before end), or NULL if it does not fit or
   nests deeper than 64. The bytes are the channel's own, so this only guards. */
static const unsigned char *
skip_value(const unsigned char *p, const unsigned char *end, int depth)
{
    if (p >= end || depth > 64)
        return NULL;
    unsigned char b = *p++;
    uint64_t n = 0, items = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return p;
    if ((b & 0xe0) == 0xa0) { n = b & 0x1f; goto bytes; }
    if ((b & 0xf0) == 0x90) { items = b & 0x0f; goto array; }
    if ((b & 0xf0) == 0x80) { items = 2 * (uint64_t)(b & 0x0f); goto array; }
    switch (b) {
    case 0xcc: case 0xd0: n = 1; goto bytes;
    case 0xcd: case 0xd1: n = 2; goto bytes;
    case 0xca: case 0xce: case 0xd2: n = 4; goto bytes;
    case 0xcb: case 0xcf: case 0xd3: n = 8; goto bytes;
    case 0xd4: n = 2; goto bytes;
    case 0xd5: n = 3; goto bytes;
    case 0xd6: n = 5; goto bytes;
    case 0xd7: n = 9; goto bytes;
    case 0xd8: n = 17; goto bytes;
    case 0xc4: case 0xd9:
        if (end - p < 1) return NULL;
        n = p[0]; p += 1; goto bytes;
    case 0xc5: case 0xda:
        if (end - p < 2) return NULL;
        n = (uint64_t)p[0] << 8 | p[1]; p += 2; goto bytes;
    case 0xc6: case 0xdb:
        if (end - p < 4) return NULL;
        n = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3]; p += 4;
        goto bytes;
    case 0xc7:
        if (end - p < 2) return NULL;
        n = (uint64_t)p[0] + 1; p += 1; goto bytes;
    case 0xc8:
        if (end - p < 3) return NULL;
        n = ((uint64_t)p[0] << 8 | p[1]) + 1; p += 2; goto bytes;
    case 0xc9:
        if (end - p < 5) return NULL;
        n = ((uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3]) + 1;
        p += 4; goto bytes;
    case 0xdc: case 0xde:
        if (end - p < 2) return NULL;
        items = (uint64_t)p[0] << 8 | p[1]; p += 2;
        if (b == 0xde) items *= 2;
        goto array;
    case 0xdd: case 0xdf:
        if (end - p < 4) return NULL;
        items = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3]; p += 4;
        if (b == 0xdf) items *= 2;
        goto array;
    default:
        return NULL;   /* 0xc1: never used */
    }
bytes:
    return (uint64_t)(end - p) < n ? NULL : p + n;
array:
    while (items--) {
        p = skip_value(p, end, depth + 1);
        if (p == NULL)
            return NULL;
    }
    return p;
}

static int
add_count(PyObject *counts, long id, Py_ssize_t n)
{
    PyObject *key = PyLong_FromLong(id);
    if (key == NULL)
        return -1;
    PyObject *old = PyDict_GetItemWithError(counts, key);
    if (old == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    Py_ssize_t have = old ? PyLong_AsSsize_t(old) : 0;
    if (have == -1 && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *val = PyLong_FromSsize_t(have + n);
    int rc = val ? PyDict_SetItem(counts, key, val) : -1;
    Py_XDECREF(val);
    Py_DECREF(key);
    return rc;
}

/* tally(data, count, counts) -> None: adds each event's source id of the channel
   bytes ``data`` (``count`` events) to the dict ``counts`` (id -> events). */
static PyObject *
tally(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    if (nargs != 3 || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "tally(data, count, counts: dict)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    PyObject *counts = args[2];
    /* Most ids are small: counted in an array, added to the dict once at the end. */
    enum { SMALL = 1024 };
    Py_ssize_t small[SMALL];
    memset(small, 0, sizeof(small));
    int ok = 1;
    for (Py_ssize_t i = 0; i < count && ok; i++) {
        /* [source_id, delta, args(, texts)]: source ids are positive fixints or uint8..32 */
        if (p >= end || (*p & 0xf0) != 0x90) { ok = 0; break; }
        unsigned nitems = *p & 0x0f;
        const unsigned char *q = p + 1;
        long id;
        if (q < end && *q <= 0x7f) { id = *q; q += 1; }
        else if (q + 2 <= end && *q == 0xcc) { id = q[1]; q += 2; }
        else if (q + 3 <= end && *q == 0xcd) { id = q[1] << 8 | q[2]; q += 3; }
        else if (q + 5 <= end && *q == 0xce) {
            id = (long)((uint32_t)q[1] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 8 | q[4]);
            q += 5;
        }
        else { ok = 0; break; }
        for (unsigned k = 1; k < nitems && q; k++)
            q = skip_value(q, end, 0);
        if (q == NULL) { ok = 0; break; }
        p = q;
        if (id < SMALL)
            small[id]++;
        else if (add_count(counts, id, 1) < 0)
            ok = -1;
    }
    for (long id = 0; ok == 1 && id < SMALL; id++)
        if (small[id] && add_count(counts, id, small[id]) < 0)
            ok = -1;
    PyBuffer_Release(&view);
    if (ok == -1)
        return NULL;
    if (ok == 0) {
        PyErr_SetString(PyExc_ValueError, "tally: not a channel's events");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- module ------------------------------------------------------------ */

/* noop(*args, **kwargs) -> None: a disabled level method. */
static PyObject *
noop(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_RETURN_NONE;
}

/* encode_values(values: tuple) -> bytes | None: the msgpack array of the values as the
 * call paths encode them (None: not here, the Python path's). For the parity tests. */
static PyObject *
encode_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_values(values: tuple, shown_by_repr=0)");
        return NULL;
    }
    PyObject *values = args[0];
    unsigned long long shown = 0;
    if (nargs == 2) {
        shown = PyLong_AsUnsignedLongLongMask(args[1]);
        if (shown == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
    }
    Buf b = {NULL, 0, 0};
    int r = put_args(&b, ((PyTupleObject *)values)->ob_item, PyTuple_GET_SIZE(values), shown);
    PyObject *out = r > 0 ? PyBytes_FromStringAndSize(b.p, b.len) : NULL;
    PyMem_Free(b.p);
    if (r < 0 && PyErr_ExceptionMatches(PyExc_MemoryError))
        return NULL;
    if (r <= 0) {            /* as the call paths do: anything else is the Python path's */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return out;
}

/* use_registries(enum_types, record_types): blogformat.values.ENUM_TYPES and
 * RECORD_TYPES, read by put_value(). */
static PyObject *
use_registries(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "use_registries(enum_types: dict, record_types: dict)");
        return NULL;
    }
    Py_XSETREF(enum_types, Py_NewRef(args[0]));
    Py_XSETREF(record_types, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"use_registries", (PyCFunction)(void (*)(void))use_registries, METH_FASTCALL,
     "use_registries(enum_types, record_types): the per-class facts the Python path records"},
    {"forget_thread_channel", (PyCFunction)forget_thread_channel, METH_O,
     "forget_thread_channel(local): the calling thread forgets its channel of that session "
     "(a forked child)"},
    {"encode_values", (PyCFunction)(void (*)(void))encode_values, METH_FASTCALL,
     "encode_values(values, shown_by_repr=0) -> bytes | None: the values as the C call "
     "paths encode them"},
    {"use_context", (PyCFunction)use_context, METH_O,
     "use_context(var) -> None: the call paths look at this ContextVar from now on"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop(*args, **kwargs) -> None"},
    {"tally", (PyCFunction)(void (*)(void))tally, METH_FASTCALL,
     "tally(data, count, counts) -> None: count a channel's events per source id"},
    {NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "blog._speedups", "C fast path of blog's log calls.", -1, module_methods,
};

static int
add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0)
        return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_c = PyUnicode_InternFromString("c");
    str_min = PyUnicode_InternFromString("threshold");
    str_name = PyUnicode_InternFromString("__name__");
    if (!str_c || !str_min || !str_name || encode_init() < 0)
        return NULL;
    static struct { PyObject **var; const char *text; } names[] = {
        {&str_msg, "msg"}, {&str_args, "args"}, {&str_exc_info, "exc_info"},
        {&str_stack_info, "stack_info"}, {&str_pathname, "pathname"}, {&str_lineno, "lineno"},
        {&str_levelno, "levelno"}, {&str_logname, "name"}, {&str_created, "created"},
        {&str_smin, "_min"}, {&str_message, "message"}, {&str_asctime, "asctime"},
        {&str_filters, "filters"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].var = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    TakenType = PyStructSequence_NewType(&taken_desc);
    if (TakenType == NULL || PyModule_AddObjectRef(m, "Taken", (PyObject *)TakenType) < 0
        || add_type(m, &ChannelType, "Channel") < 0 || add_type(m, &MethodType, "Method") < 0
        || add_type(m, &EventCallType, "EventCall") < 0
        || add_type(m, &RecordHandlerType, "RecordHandler") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
