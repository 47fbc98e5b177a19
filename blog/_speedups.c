/* blog._speedups: the hot path of a log call, in C.
 *
 * The pure-Python version in blog/logger.py (_make_method) is the reference:
 * this file does the same, and whenever it meets anything but the common
 * case it calls that Python function, which starts over. The common case:
 * the call site is cached, there are no keyword fields, every argument is a
 * plain immutable scalar, and the thread's channel is below its limit.
 * Then a call is: look up the site by the caller's instruction offset, read
 * the wall clock, check the argument types, append (sid, clock, args) to the
 * thread's deque.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

static PyObject *str_c, *str_queue, *str_limit, *str_append;

/* Wall clock in ns, as time.time_ns() on POSIX. */
static inline long long
clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int
is_plain(PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    return t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type
        || a == Py_None || t == &PyBool_Type || t == &PyBytes_Type;
}

/* Append (sid, clock, args) to the channel in local.c.
 * Returns 1 if pushed, 0 if the caller must take the Python path, -1 on error. */
static int
push(PyObject *local, PyObject *sid, PyObject *const *args, Py_ssize_t n, PyObject *tuple)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!is_plain(args[i]))
            return 0;
    }
    long long now = clock_ns();
    PyObject *ch = PyObject_GetAttr(local, str_c);
    if (ch == NULL) {                 /* first event of this thread */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int result = -1;
    PyObject *queue = NULL, *limit = NULL, *clock = NULL, *item = NULL, *r = NULL;
    queue = PyObject_GetAttr(ch, str_queue);
    if (queue == NULL) goto done;
    limit = PyObject_GetAttr(ch, str_limit);
    if (limit == NULL) goto done;
    Py_ssize_t len = PyObject_Size(queue);
    if (len < 0) goto done;
    Py_ssize_t lim = PyLong_AsSsize_t(limit);
    if (lim == -1 && PyErr_Occurred()) goto done;
    if (len >= lim) { result = 0; goto done; }   /* wake the consumer, or full */
    clock = PyLong_FromLongLong(now);
    if (clock == NULL) goto done;
    if (tuple == NULL) {
        tuple = PyTuple_New(n);
        if (tuple == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(tuple, i, args[i]);
        }
    } else {
        Py_INCREF(tuple);
    }
    /* Only ints, floats, str, bytes, bool and None inside: these tuples can be in
     * no reference cycle, so the garbage collector need not track them (CPython
     * would untrack them itself, later). Fewer tracked objects, cheaper GC passes. */
    if (PyObject_GC_IsTracked(tuple))
        PyObject_GC_UnTrack(tuple);
    item = PyTuple_Pack(3, sid, clock, tuple);
    Py_DECREF(tuple);
    if (item == NULL) goto done;
    PyObject_GC_UnTrack(item);
    r = PyObject_CallMethodOneArg(queue, str_append, item);
    if (r == NULL) goto done;
    result = 1;
done:
    Py_XDECREF(r);
    Py_XDECREF(item);
    Py_XDECREF(clock);
    Py_XDECREF(limit);
    Py_XDECREF(queue);
    Py_DECREF(ch);
    return result;
}

/* ---- Method: a logger's level method (log.info and friends) ------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: f_lasti -> (code, fmt, sid), shared with the Python method */
    PyObject *local;     /* the session's threading.local: .c is the thread's Channel */
    PyObject *fallback;  /* the Python method: handles everything else */
} Method;

static PyObject *
method_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Method *self = (Method *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        goto slow;
    /* No Python frame is pushed for this C call: the current frame is the caller's. */
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL)
        goto slow;
    PyObject *key = PyLong_FromLong(PyFrame_GetLasti(frame));
    if (key == NULL)
        return NULL;
    PyObject *site = PyDict_GetItemWithError(self->sites, key);   /* borrowed */
    Py_DECREF(key);
    if (site == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto slow;
    }
    if (!PyTuple_CheckExact(site) || PyTuple_GET_SIZE(site) != 3)
        goto slow;
    PyCodeObject *code = PyFrame_GetCode(frame);
    int same = (PyObject *)code == PyTuple_GET_ITEM(site, 0) && args[0] == PyTuple_GET_ITEM(site, 1);
    Py_DECREF(code);
    if (!same)
        goto slow;
    Py_INCREF(site);
    int pushed = push(self->local, PyTuple_GET_ITEM(site, 2), args + 1, nargs - 1, NULL);
    Py_DECREF(site);
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
    return 0;
}

static int
method_clear(Method *self)
{
    Py_CLEAR(self->sites);
    Py_CLEAR(self->local);
    Py_CLEAR(self->fallback);
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
    return (PyObject *)self;
}

static PyObject *
method_get_name(Method *self, void *closure)
{
    return PyObject_GetAttrString(self->fallback, "__name__");
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


/* ---- encode_events: the consumer's loop over plain events -------------- */

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline void
put_be(Buf *b, unsigned char tag, unsigned long long v, int n)
{
    b->p[b->len++] = (char)tag;
    for (int i = n - 1; i >= 0; i--)
        b->p[b->len++] = (char)((v >> (8 * i)) & 0xff);
}

/* msgpack's smallest encoding of an integer, as msgpack-python writes it. */
static int
put_int(Buf *b, long long v)
{
    if (buf_reserve(b, 9) < 0) return -1;
    if (v >= 0) {
        if (v < 0x80) b->p[b->len++] = (char)v;
        else if (v <= 0xff) put_be(b, 0xcc, v, 1);
        else if (v <= 0xffff) put_be(b, 0xcd, v, 2);
        else if (v <= 0xffffffffLL) put_be(b, 0xce, v, 4);
        else put_be(b, 0xcf, (unsigned long long)v, 8);
    } else {
        if (v >= -32) b->p[b->len++] = (char)(unsigned char)(0xe0 | (v + 32));
        else if (v >= -128) put_be(b, 0xd0, (unsigned long long)v, 1);
        else if (v >= -32768) put_be(b, 0xd1, (unsigned long long)v, 2);
        else if (v >= -2147483648LL) put_be(b, 0xd2, (unsigned long long)v, 4);
        else put_be(b, 0xd3, (unsigned long long)v, 8);
    }
    return 0;
}

static int
put_raw(Buf *b, unsigned char fix, unsigned char t8, unsigned char t16, unsigned char t32,
        const char *data, Py_ssize_t n, int has_fix)
{
    if (buf_reserve(b, n + 5) < 0) return -1;
    if (has_fix && n < 32) b->p[b->len++] = (char)(fix | n);
    else if (n <= 0xff) put_be(b, t8, n, 1);
    else if (n <= 0xffff) put_be(b, t16, n, 2);
    else put_be(b, t32, n, 4);
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

/* Encode one plain scalar. 1: done, 0: not encodable here (the caller rolls back), -1: error. */
static int
put_scalar(Buf *b, PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t == &PyLong_Type) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow) {
            if (overflow > 0) {   /* 2**63 .. 2**64-1 is still a msgpack uint64 */
                unsigned long long u = PyLong_AsUnsignedLongLong(a);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
                if (buf_reserve(b, 9) < 0) return -1;
                put_be(b, 0xcf, u, 8);
                return 1;
            }
            return 0;
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        return put_int(b, v) < 0 ? -1 : 1;
    }
    if (t == &PyFloat_Type) {
        union { double d; unsigned long long u; } x;
        x.d = PyFloat_AS_DOUBLE(a);
        if (buf_reserve(b, 9) < 0) return -1;
        put_be(b, 0xcb, x.u, 8);
        return 1;
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(a, &n);
        if (s == NULL) { PyErr_Clear(); return 0; }   /* lone surrogates: Python path */
        return put_raw(b, 0xa0, 0xd9, 0xda, 0xdb, s, n, 1) < 0 ? -1 : 1;
    }
    if (a == Py_None || t == &PyBool_Type) {
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)(a == Py_None ? 0xc0 : a == Py_True ? 0xc3 : 0xc2);
        return 1;
    }
    if (t == &PyBytes_Type) {
        return put_raw(b, 0, 0xc4, 0xc5, 0xc6, PyBytes_AS_STRING(a), PyBytes_GET_SIZE(a), 0)
               < 0 ? -1 : 1;
    }
    return 0;
}

/* encode_events(items, start, prev, lo, hi, limit) -> (bytes, next, count, prev, lo, hi)
 *
 * Encodes items[start:] as event arrays [sid, clock - prev, args(, texts)]
 * until an item it leaves to Python (a rename marker, an unusual value), or
 * until at least ``limit`` bytes are written. Same bytes as the Python loop
 * in Session._encode_batches.
 */
static PyObject *
encode_events(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long prev, lo, hi;
    Py_ssize_t start, limit;
    if (nargs != 6 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_events(items: list, start, prev, lo, hi, limit)");
        return NULL;
    }
    PyObject *items = args[0];
    start = PyLong_AsSsize_t(args[1]);
    prev = PyLong_AsLongLong(args[2]);
    lo = PyLong_AsLongLong(args[3]);
    hi = PyLong_AsLongLong(args[4]);
    limit = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Buf b = {NULL, 0, 0};
    Py_ssize_t i = start, n = PyList_GET_SIZE(items), count = 0;
    for (; i < n && b.len < limit; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 3)
            break;
        PyObject *sid = PyTuple_GET_ITEM(it, 0), *clk = PyTuple_GET_ITEM(it, 1);
        PyObject *vals = PyTuple_GET_ITEM(it, 2);
        if (!PyLong_CheckExact(sid) || !PyLong_CheckExact(clk))
            break;
        long long s = PyLong_AsLongLong(sid), c = PyLong_AsLongLong(clk);
        if (PyErr_Occurred()) { PyErr_Clear(); break; }
        if (s <= 0)
            break;                                   /* in-band metadata */
        Py_ssize_t mark = b.len;
        int ok = 1;
        if (PyTuple_CheckExact(vals)) {
            Py_ssize_t k = PyTuple_GET_SIZE(vals);
            if (buf_reserve(&b, 6) < 0) goto error;
            b.p[b.len++] = (char)0x93;
            if (put_int(&b, s) < 0 || put_int(&b, c - prev) < 0) goto error;
            if (buf_reserve(&b, 5) < 0) goto error;
            if (k < 16) b.p[b.len++] = (char)(0x90 | k);
            else if (k <= 0xffff) put_be(&b, 0xdc, k, 2);
            else put_be(&b, 0xdd, k, 4);
            for (Py_ssize_t j = 0; j < k && ok; j++) {
                int r = put_scalar(&b, PyTuple_GET_ITEM(vals, j));
                if (r < 0) goto error;
                ok = r;
            }
        } else if (PyBytes_CheckExact(vals) && PyBytes_GET_SIZE(vals) > 1) {
            const char *raw = PyBytes_AS_STRING(vals);
            Py_ssize_t rn = PyBytes_GET_SIZE(vals) - 1;
            if (buf_reserve(&b, 1) < 0) goto error;
            b.p[b.len++] = (char)(0x90 | (unsigned char)raw[0]);
            if (put_int(&b, s) < 0 || put_int(&b, c - prev) < 0) goto error;
            if (buf_reserve(&b, rn) < 0) goto error;
            memcpy(b.p + b.len, raw + 1, rn);
            b.len += rn;
        } else {
            ok = 0;
        }
        if (!ok) {                                   /* leave this one to Python */
            b.len = mark;
            break;
        }
        prev = c;
        if (c < lo) lo = c;
        if (c > hi) hi = c;
        count++;
    }
    PyObject *out = PyBytes_FromStringAndSize(b.p ? b.p : "", b.len);
    PyMem_Free(b.p);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("(NnnLLL)", out, i, count, prev, lo, hi);
error:
    PyMem_Free(b.p);
    return NULL;
}


/* drain(queue) -> list: pop every item now in the deque, oldest first.
 * Each popleft is atomic under the GIL, so a producer appending meanwhile
 * is safe: its item is either taken now or left for the next drain. */
static PyObject *str_popleft;

static PyObject *
drain(PyObject *module, PyObject *queue)
{
    Py_ssize_t n = PyObject_Size(queue);
    if (n < 0)
        return NULL;
    PyObject *popleft = PyObject_GetAttr(queue, str_popleft);
    if (popleft == NULL)
        return NULL;
    PyObject *out = PyList_New(n);
    if (out == NULL) { Py_DECREF(popleft); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyObject_CallNoArgs(popleft);
        if (it == NULL) { Py_DECREF(popleft); Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, it);
    }
    Py_DECREF(popleft);
    return out;
}


/* ---- EventCall: a function decorated with @blog.event ------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *logger;    /* its _min is the minimum severity in force */
    PyObject *sid;       /* the EventSource id */
    PyObject *local;     /* the session's threading.local */
    PyObject *body;      /* the decorated function, or None if its body is empty */
    PyObject *fallback;  /* the Python wrapper: handles everything else */
    PyObject *dict;      /* __wrapped__, __name__, source, ... (functools.wraps) */
    Py_ssize_t nparams;
    long severity;
} EventCall;

static PyObject *str_min;

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
        int pushed = push(self->local, self->sid, args, nargs, NULL);
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
    .tp_getset = event_getset,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_traverse = (traverseproc)event_traverse,
    .tp_clear = (inquiry)event_clear,
    .tp_dealloc = (destructor)event_dealloc,
};

/* ---- module functions -------------------------------------------------- */

/* noop(*args, **kwargs) -> None: a disabled level method. */
static PyObject *
noop(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"encode_events", (PyCFunction)(void (*)(void))encode_events, METH_FASTCALL,
     "encode_events(items, start, prev, lo, hi, limit) -> (bytes, next, count, prev, lo, hi)"},
    {"drain", (PyCFunction)drain, METH_O,
     "drain(queue) -> list of everything in the deque, oldest first"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop(*args, **kwargs) -> None"},
    {NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "blog._speedups", "C fast path of blog's log calls.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&MethodType) < 0 || PyType_Ready(&EventCallType) < 0)
        return NULL;
    str_min = PyUnicode_InternFromString("_min");
    if (!str_min)
        return NULL;
    str_c = PyUnicode_InternFromString("c");
    str_queue = PyUnicode_InternFromString("queue");
    str_limit = PyUnicode_InternFromString("limit");
    str_append = PyUnicode_InternFromString("append");
    str_popleft = PyUnicode_InternFromString("popleft");
    if (!str_c || !str_queue || !str_limit || !str_append || !str_popleft)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&MethodType);
    if (PyModule_AddObject(m, "Method", (PyObject *)&MethodType) < 0) {
        Py_DECREF(&MethodType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&EventCallType);
    if (PyModule_AddObject(m, "EventCall", (PyObject *)&EventCallType) < 0) {
        Py_DECREF(&EventCallType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
