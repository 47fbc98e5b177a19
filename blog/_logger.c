/* blog/_logger.c: Method, a logger's level method (log.info and friends) with a C fast
 * path; its twin is blog/logger.py (_make_method), which it calls for anything but the
 * common case: a call site seen before, no fields in context, values the channel takes.
 * Then a call is: find the site by the caller's instruction offset, and push the values
 * into the thread's channel (blog/_channel.c).
 */
#include "_callpath.h"

#include <frameobject.h>
#include <stddef.h>

#define SITE_CACHE 64

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: site key -> (code, fmt, sid, nargs, kwnames, shown by !r),
                            shared with the Python method */
    PyObject *local;     /* the session's threading.local: .c is the thread's Channel */
    PyObject *fallback;  /* the Python method: handles everything else */
    PyObject *key;       /* the thread state dict's key of the local (blog_thread_channel) */
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
    /* The keywords' values follow the arguments in args: the event's values, in order. */
    int pushed = push_call(self->local, self->key, sid, args + 1, nargs - 1 + nkw, shown);
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
    self->key = blog_thread_key(local);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* What a function shows of itself is the Python method's: its name, docstring, module
 * and qualified name (the closure argument is the attribute's name); __wrapped__ is the
 * Python method itself, so that inspect.signature and help() show its signature. */
static PyObject *
method_get_attr(Method *self, void *name)
{
    return PyObject_GetAttrString(self->fallback, (const char *)name);
}

static PyObject *
method_get_wrapped(Method *self, void *closure)
{
    return Py_NewRef(self->fallback);
}

/* A method descriptor as a function is (bound to nothing: the Method is an instance's
 * attribute), so that pydoc documents it as a routine. */
static PyObject *
method_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    return Py_NewRef(self);
}

static PyGetSetDef method_getset[] = {
    {"__name__", (getter)method_get_attr, NULL, NULL, "__name__"},
    {"__qualname__", (getter)method_get_attr, NULL, NULL, "__qualname__"},
    {"__module__", (getter)method_get_attr, NULL, NULL, "__module__"},
    {"__doc__", (getter)method_get_attr, NULL, NULL, "__doc__"},
    {"__wrapped__", (getter)method_get_wrapped, NULL, NULL, NULL},
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
    .tp_getset = method_getset,   /* its __doc__ (the Python method's) hides tp_doc */
    .tp_descr_get = method_descr_get,
};

int
blog_logger_init(PyObject *m)
{
    return blog_add_type(m, &MethodType, "Method");
}
