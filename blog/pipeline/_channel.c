/* blog/pipeline/_channel.c: a thread's Channel, its twin blog/pipeline/channel.py
 * (PyChannel): one thread's encoded events, waiting for the consumer; the fast paths'
 * pushes into it; and how a call finds the calling thread's channel.
 *
 * Every function here runs without releasing the GIL and without calling Python code
 * between reading and updating a channel, so a push, a mark and a take never interleave.
 */
#include "../_extension.h"

#include <structmember.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

static PyObject *str_c;

/* Wall clock in ns, as time.time_ns() on POSIX. */
static inline long long
clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- Channel: one thread's encoded events, waiting for the consumer ----- */

struct Channel {
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
    char inside;             /* the owning thread writes the outputs: every push refused */
    PyObject *on_overflow;   /* called by the fast paths with a push refused here */
    PyObject *marks;         /* [Mark]: in-band metadata */
    /* The crash buffer (blog/files/crashbuf.py, docs/format.md 15): buf mirrored into the
     * active half of a shared file mapping, its length stored after the bytes. */
    PyObject *slot_map;      /* the mmap, or NULL */
    Py_buffer view;
    char *map;
    Py_ssize_t half;         /* bytes per half */
    int active;              /* the half the thread appends to */
    Py_ssize_t mirrored;     /* bytes of buf in the active half */
    PyObject *weakrefs;      /* the thread state's entry finds it by a weak reference */
};

#define SLOT_PAGE 4096
#define SLOT_ACTIVE_AT 24
#define SLOT_HALF_AT(h) (32 + 24 * (h))

static inline void
slot_store(char *at, unsigned long long v)
{
    __atomic_store_n((unsigned long long *)at, v, __ATOMIC_RELEASE);
}

static PyTypeObject ChannelType;

/* What take() returns; its twin is blog.pipeline.channel.Taken (same fields, same order). */
static PyTypeObject *TakenType;
static PyStructSequence_Field taken_fields[] = {
    {"data", "the encoded events, back to back"},
    {"count", "how many events"},
    {"base", "the clock the first event's delta is relative to"},
    {"lo", "the least clock of the events"},
    {"hi", "the greatest clock of the events"},
    {"marks", "in-band metadata: [Mark], a writer's rename"},
    {NULL}
};
static PyStructSequence_Desc taken_desc = {
    "blog._speedups.Taken", "What Channel.take() returns.", taken_fields, 6
};

/* A mark of in-band metadata; its twin is blog.pipeline.channel.Mark: the same fields, in
 * the order of this enum (tests/test_c_sources.py checks). */
enum { MARK_OFFSET, MARK_COUNT, MARK_PREV, MARK_ENTRY, MARK_FIELDS };
static PyTypeObject *MarkType;
static PyStructSequence_Field mark_fields[] = {
    {"offset", "bytes of the channel before it"},
    {"count", "events before it"},
    {"prev", "the clock of the event before it (the deltas' base there)"},
    {"entry", "the rename"},
    {NULL}
};
static PyStructSequence_Desc mark_desc = {
    "blog._speedups.Mark", "In-band metadata of a channel: a writer's rename, from this "
    "point of its events on.", mark_fields, MARK_FIELDS
};

/* -1 inside an output, else the capacity once the consumer was woken, else the wake-up
 * length (what backpressure.overflow sets, from each take on); as PyChannel._set_limit. */
static void
channel_set_limit(Channel *self)
{
    if (self->inside)
        self->limit = -1;
    else if (self->woken)
        self->limit = self->capacity;
    else
        self->limit = self->wake_at < self->capacity ? self->wake_at : self->capacity;
}

static void
channel_reset(Channel *self)
{
    self->buf.len = 0;
    self->count = 0;
    self->base = self->prev;
    self->lo = LLONG_MAX;
    self->hi = LLONG_MIN;
    self->woken = 0;
    channel_set_limit(self);
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
 * PyChannel (blog/pipeline/channel.py); a refused event leaves the channel as it was.
 * Nothing between the first write into the channel and the end can run Python code. */
int
blog_push_plain(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
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

/* The fast path for values beyond the plain scalars (blogformat/_valueencoding.c): they
 * are encoded first into a scratch buffer, then the event is copied into the channel, so
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
    int r = blog_put_args(&scratch, args, n, shown_by_repr);
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

/* The call paths' push once blog_push_plain has said "not here" (push_call). */
int
blog_push_rich(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
               unsigned long long shown_by_repr)
{
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
    int r = blog_push_plain(self, sid, &PyTuple_GET_ITEM(t, 0), PyTuple_GET_SIZE(t), clock);
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
    /* The Mark first: a GC allocation can start a collection and so run Python code
     * (which may let another thread take() this channel). Ints are not GC objects. */
    PyObject *m = PyStructSequence_New(MarkType);
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
    PyStructSequence_SET_ITEM(m, MARK_OFFSET, a);
    PyStructSequence_SET_ITEM(m, MARK_COUNT, b);
    PyStructSequence_SET_ITEM(m, MARK_PREV, c);
    PyStructSequence_SET_ITEM(m, MARK_ENTRY, entry);
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
channel_nbytes(Channel *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->buf.len);
}

static PyObject *
channel_inside_get(Channel *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->inside);
}

static int
channel_inside_set(Channel *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete inside");
        return -1;
    }
    int v = PyObject_IsTrue(value);
    if (v < 0) return -1;
    self->inside = (char)v;
    channel_set_limit(self);
    return 0;
}

static PyObject *
channel_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"capacity", "wake_at", "on_overflow", "clock", NULL};
    Py_ssize_t capacity, wake_at;
    PyObject *on_overflow;
    long long clock;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nnOL:Channel", kwlist,
                                     &capacity, &wake_at, &on_overflow, &clock))
        return NULL;
    Channel *self = (Channel *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->marks = PyList_New(0);
    if (self->marks == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->on_overflow = Py_NewRef(on_overflow);
    self->capacity = capacity;
    self->wake_at = wake_at;
    self->prev = clock;
    channel_reset(self);
    return (PyObject *)self;
}

static int
channel_traverse(Channel *self, visitproc visit, void *arg)
{
    Py_VISIT(self->on_overflow);
    Py_VISIT(self->marks);
    return 0;
}

static int
channel_clear(Channel *self)
{
    Py_CLEAR(self->on_overflow);
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
    {"on_overflow", T_OBJECT, offsetof(Channel, on_overflow), READONLY,
     "on_overflow(sid, clock, template, values, names): takes a push refused here"},
    {NULL}
};

static PyGetSetDef channel_getset[] = {
    {"nbytes", (getter)channel_nbytes, NULL, "bytes waiting", NULL},
    {"inside", (getter)channel_inside_get, (setter)channel_inside_set,
     "True while the owning thread writes the outputs beside the main one: every push "
     "refused (limit -1, kept by a take); set False, the limit the channel's state gives",
     NULL},
    {NULL}
};

static PyTypeObject ChannelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.Channel",
    .tp_basicsize = sizeof(Channel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Channel(capacity, wake_at, on_overflow, clock): see blog.channel.PyChannel.",
    .tp_new = channel_new,
    .tp_traverse = (traverseproc)channel_traverse,
    .tp_clear = (inquiry)channel_clear,
    .tp_dealloc = (destructor)channel_dealloc,
    .tp_weaklistoffset = offsetof(Channel, weakrefs),
    .tp_methods = channel_methods,
    .tp_members = channel_members,
    .tp_getset = channel_getset,
};

/* What a weak reference of the entries below points to (a new reference), or NULL without
 * an error once it is gone. */
static PyObject *
weak_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    if (PyWeakref_GetRef(ref, &target) < 0)    /* an error: as if gone */
        PyErr_Clear();
    return target;
#else
    PyObject *target = PyWeakref_GET_OBJECT(ref);
    return target == Py_None ? NULL : Py_NewRef(target);
#endif
}

/* The calling thread's Channel for a session (a new reference), or NULL without an error
 * if the thread has no C channel yet (the Python path makes one).
 *
 * Found in the thread state's dict under the session's ``key`` (a str made of the
 * local's id): an entry (weakref to the local, weakref to the channel), made from
 * local.c the first time. Weak both ways, so that it keeps neither the session nor the
 * channel alive, and checked against ``local`` (an id can be a later object's). A
 * forked child forgets the entry (forget_thread_channel) with the parent's channels. */
Channel *
blog_thread_channel(PyObject *local, PyObject *key)
{
    PyObject *d = PyThreadState_GetDict();     /* borrowed; NULL: no thread state dict */
    if (d != NULL) {
        PyObject *e = PyDict_GetItemWithError(d, key);
        if (e != NULL && PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == 2) {
            PyObject *owner = weak_target(PyTuple_GET_ITEM(e, 0));
            PyObject *ch = owner == local ? weak_target(PyTuple_GET_ITEM(e, 1)) : NULL;
            Py_XDECREF(owner);
            if (ch != NULL && Py_IS_TYPE(ch, &ChannelType))
                return (Channel *)ch;
            Py_XDECREF(ch);
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
PyObject *
blog_thread_key(PyObject *local)
{
    return PyUnicode_FromFormat("blog.channel:%p", (void *)local);
}

/* forget_thread_channel(local): the calling thread's entry goes (a forked child, whose
 * channels of the parent are not its own). */
PyObject *
blog_forget_thread_channel(PyObject *Py_UNUSED(module), PyObject *local)
{
    PyObject *d = PyThreadState_GetDict();
    PyObject *key = blog_thread_key(local);
    if (key == NULL)
        return NULL;
    if (d != NULL && PyDict_DelItem(d, key) < 0)
        PyErr_Clear();
    Py_DECREF(key);
    Py_RETURN_NONE;
}

int
blog_channel_init(PyObject *m)
{
    str_c = PyUnicode_InternFromString("c");
    if (str_c == NULL)
        return -1;
    TakenType = PyStructSequence_NewType(&taken_desc);
    if (TakenType == NULL || PyModule_AddObjectRef(m, "Taken", (PyObject *)TakenType) < 0)
        return -1;
    MarkType = PyStructSequence_NewType(&mark_desc);
    if (MarkType == NULL || PyModule_AddObjectRef(m, "Mark", (PyObject *)MarkType) < 0)
        return -1;
    return blog_add_type(m, &ChannelType, "Channel");
}
