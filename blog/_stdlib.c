/* blog/_stdlib.c: RecordHandler, blog.stdlib.BlogHandler.handle with a C fast path for
 * the common logging record; its twin is blog/stdlib.py (BlogHandler.emit's first branch),
 * which it calls for everything else.
 */
#include "_extension.h"

#include <math.h>
#include <stddef.h>

/* The fields of blog.stdlib.RecordSite (a handler's site entry), in their order: read by
 * position here, by name there (tests/test_c_sources.py checks that the two agree). */
enum { RSITE_SOURCE_ID, RSITE_TEMPLATE, RSITE_SEVERITY, RSITE_CONVERSIONS, RSITE_FIELDS };

/* A logging record's attributes it reads, interned once. */
static PyObject *str_msg, *str_args, *str_exc_info, *str_stack_info, *str_pathname,
                *str_lineno, *str_levelno, *str_logname, *str_created, *str_smin,
                *str_message, *str_asctime, *str_filters;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: (msg, pathname, lineno, levelno, name, len(args)) ->
                            (sid, template, severity, conversions or None), shared with
                            the Python handler; (None, ..., 1): a record without args
                            whose msg is not its site's format: the site's source "{}",
                            its msg the one value */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (blog_thread_channel) */
    PyObject *registry;  /* its min_severity: the session's minimum severity */
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

/* The site (borrowed) of the key (head, path, lineno, levelno, name, n); NULL if none, or
 * an error. */
static PyObject *
site_of(RecordHandler *self, PyObject *head, PyObject *path, PyObject *lineno,
        PyObject *levelno, PyObject *name, Py_ssize_t n)
{
    PyObject *count = PyLong_FromSsize_t(n);
    PyObject *key = count != NULL ? PyTuple_Pack(6, head, path, lineno, levelno, name, count)
                                  : NULL;
    Py_XDECREF(count);
    if (key == NULL)
        return NULL;
    PyObject *site = PyDict_GetItemWithError(self->sites, key);
    Py_DECREF(key);
    return site;
}

/* The common record: a str message, a tuple of plain scalars, no extra, no exception or
 * stack, of a call site seen before, no fields in context, each value taken by its
 * conversion; without args, a message not the site's format is the value of the site's
 * "{}" source. Its twin is BlogHandler.emit's first branch. 1: pushed (or below the
 * minimum); 0: the Python path's, which also handles every error (it goes to the
 * handler's handleError, never to the caller). */
static int
record_push(RecordHandler *self, PyObject *rec)
{
    int r = 0;
    PyObject *d = NULL, *args = NULL, *text = NULL;
    /* msg, path, lineno, levelno, name: held from here on (hashing them for the site key
     * may run code, a str subclass's, that replaces them in the record). */
    PyObject *held[5] = {NULL, NULL, NULL, NULL, NULL};
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
    held[0] = Py_NewRef(msg);
    held[1] = Py_NewRef(path);
    held[2] = Py_NewRef(lineno);
    held[3] = Py_NewRef(levelno);
    held[4] = Py_NewRef(name);
    double when = PyFloat_AS_DOUBLE(created) * 1e9;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *const *values = &PyTuple_GET_ITEM(args, 0);
    PyObject *site = site_of(self, msg, path, lineno, levelno, name, n);
    if (site == NULL && n == 0 && !PyErr_Occurred()) {   /* a new text: the source "{}" */
        text = Py_NewRef(msg);      /* held, as args */
        values = &text;
        n = 1;
        site = site_of(self, Py_None, path, lineno, levelno, name, n);
    }
    if (site == NULL || !PyTuple_Check(site) || PyTuple_GET_SIZE(site) != RSITE_FIELDS)
        goto done;
    PyObject *convs = PyTuple_GET_ITEM(site, RSITE_CONVERSIONS);
    if (convs != Py_None) {          /* a number conversion: each value must fit its own */
        if (!PyUnicode_CheckExact(convs) || PyUnicode_GET_LENGTH(convs) != n)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!printf_takes(PyUnicode_READ_CHAR(convs, i), values[i]))
                goto done;
    }
    long long sid = PyLong_AsLongLong(PyTuple_GET_ITEM(site, RSITE_SOURCE_ID));
    long severity = PyLong_AsLong(PyTuple_GET_ITEM(site, RSITE_SEVERITY));
    if (PyErr_Occurred())
        goto done;
    PyObject *smin = PyObject_GetAttr(self->registry, str_smin);
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
    Channel *ch = blog_thread_channel(self->local, self->key);
    if (ch == NULL)
        goto done;
    r = blog_push_plain(ch, sid, values, n, (long long)when);
    Py_DECREF(ch);
    if (r < 0)
        r = 0;
done:
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(args);
    Py_XDECREF(text);
    for (int i = 0; i < 5; i++)
        Py_XDECREF(held[i]);
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
    Py_VISIT(self->registry);
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
    Py_CLEAR(self->registry);
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
    PyObject *sites, *local, *registry, *handler, *fallback;
    Py_ssize_t base;
    if (!PyArg_ParseTuple(args, "O!OOOOn:RecordHandler", &PyDict_Type, &sites, &local,
                          &registry, &handler, &fallback, &base))
        return NULL;
    RecordHandler *self = (RecordHandler *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = record_handler_vectorcall;
    self->sites = Py_NewRef(sites);
    self->local = Py_NewRef(local);
    self->registry = Py_NewRef(registry);
    self->handler = Py_NewRef(handler);
    self->fallback = Py_NewRef(fallback);
    self->base = base;
    self->key = blog_thread_key(local);
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
    .tp_doc = "RecordHandler(sites, local, registry, handler, fallback, base): "
              "BlogHandler.handle with a C fast path for the common record.",
    .tp_new = record_handler_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RecordHandler, vectorcall),
    .tp_traverse = (traverseproc)record_handler_traverse,
    .tp_clear = (inquiry)record_handler_clear,
    .tp_dealloc = (destructor)record_handler_dealloc,
};

int
blog_stdlib_init(PyObject *m)
{
    static struct { PyObject **var; const char *text; } names[] = {
        {&str_msg, "msg"}, {&str_args, "args"}, {&str_exc_info, "exc_info"},
        {&str_stack_info, "stack_info"}, {&str_pathname, "pathname"}, {&str_lineno, "lineno"},
        {&str_levelno, "levelno"}, {&str_logname, "name"}, {&str_created, "created"},
        {&str_smin, "min_severity"}, {&str_message, "message"}, {&str_asctime, "asctime"},
        {&str_filters, "filters"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].var = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    return blog_add_type(m, &RecordHandlerType, "RecordHandler");
}
