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
    item = PyTuple_Pack(3, sid, clock, tuple);
    Py_DECREF(tuple);
    if (item == NULL) goto done;
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

/* ---- module functions -------------------------------------------------- */

/* push_event(local, sid, args) -> bool: the same push, for @blog.event. */
static PyObject *
push_event(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "push_event(local, sid, args: tuple)");
        return NULL;
    }
    PyObject *t = args[2];
    int r = push(args[0], args[1], &PyTuple_GET_ITEM(t, 0), PyTuple_GET_SIZE(t), t);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

/* noop(*args, **kwargs) -> None: a disabled level method. */
static PyObject *
noop(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"push_event", (PyCFunction)(void (*)(void))push_event, METH_FASTCALL,
     "push_event(local, sid, args) -> True if queued, False if the caller must take the slow path."},
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
    if (PyType_Ready(&MethodType) < 0)
        return NULL;
    str_c = PyUnicode_InternFromString("c");
    str_queue = PyUnicode_InternFromString("queue");
    str_limit = PyUnicode_InternFromString("limit");
    str_append = PyUnicode_InternFromString("append");
    if (!str_c || !str_queue || !str_limit || !str_append)
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
    return m;
}
