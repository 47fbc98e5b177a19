/* blog/pipeline/_logger.c: Method, a logger's level method (log.info and friends) with a
 * C fast path; its twin is blog/pipeline/logger.py (_make_method), which it calls for anything
 * but the common case: a call site seen before (inside a context or a span: with the same
 * context field names), values the channel takes. Then a call is: find the site by the caller's
 * instruction offset, and push the values (then the context's) into the thread's channel
 * (blog/pipeline/_channel.c).
 */
#include "_callpath.h"

#include <frameobject.h>
#include <stddef.h>

#define SITE_CACHE 64
#define CONTEXT_CACHE 16
/* The most values (arguments, keywords, context fields) a call in context pushes here. */
#define MAX_CONTEXT_VALUES 32

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: site key -> blog.pipeline.logger.SiteEntry,
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
    PyObject *context_sites;  /* dict: the logger's ContextEntry per (level, site key,
                                 format, argument count, keyword names, context names) */
    PyObject *level;          /* an int: this method's severity, in those keys */
    /* Calls in context, as above; an entry holds what it compares by identity. */
    struct {
        void *code; int lasti; PyObject *entry;
        PyObject *fmt, *names, *context_names; Py_ssize_t nargs;
        long long sid; unsigned long long shown;
    } context_cache[CONTEXT_CACHE];
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

/* The fields of blog.pipeline.logger.SiteEntry, in its order: read by position here, by
 * name there (tests/test_c_sources.py checks that the two agree). */
enum { SITE_CODE, SITE_FORMAT, SITE_SOURCE_ID, SITE_NARGS, SITE_NAMES, SITE_SHOWN,
       SITE_FIELDS };

/* The fields of blog.pipeline.logger.ContextEntry, likewise. */
enum { CONTEXT_CODE, CONTEXT_SOURCE_ID, CONTEXT_NAMES, CONTEXT_TEMPLATE, CONTEXT_SHOWN,
       CONTEXT_FIELDS };

/* The fields of blog.contextfields.ContextFields (the fields in context), likewise. */
enum { CFIELDS_NAMES, CFIELDS_VALUES, CFIELDS_FIELDS };

/* The site entry is this call's. */
static inline int
site_fits(PyObject *site, PyCodeObject *code, PyObject *fmt, Py_ssize_t nargs,
          PyObject *kwnames, Py_ssize_t nkw)
{
    if (site == NULL || !PyTuple_Check(site) || PyTuple_GET_SIZE(site) != SITE_FIELDS
        || (PyObject *)code != PyTuple_GET_ITEM(site, SITE_CODE)
        || fmt != PyTuple_GET_ITEM(site, SITE_FORMAT))
        return 0;
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(site, SITE_NARGS));
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return n == nargs - 1 && same_names(PyTuple_GET_ITEM(site, SITE_NAMES), kwnames, nkw);
}

/* Two tuples of context field names are the same: by identity first (the context's names
 * stay one tuple while it is in force), else item by item. 1, 0, or -1 error. */
static int
same_context_names(PyObject *cached, PyObject *names)
{
    if (cached == names)
        return 1;
    if (cached == NULL)
        return 0;
    return PyObject_RichCompareBool(cached, names, Py_EQ);
}

/* A call with fields in context: its values, then the context's (``ctx`` is a ContextFields,
 * or a span's Ids: blog_fields_now), pushed under the source the Python method registered for
 * this site and these context names. 1 pushed; 0 the Python method's; -1 error. */
static int
context_call(Method *self, PyCodeObject *code, int lasti, size_t h, PyObject *const *args,
             Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t nkw, PyObject *ctx)
{
    if (self->context_sites == NULL || !PyTuple_Check(ctx)
        || PyTuple_GET_SIZE(ctx) != CFIELDS_FIELDS
        || !PyUnicode_CheckExact(args[0]))   /* a computed format (any object): the slow path */
        return 0;
    PyObject *cnames = PyTuple_GET_ITEM(ctx, CFIELDS_NAMES);
    PyObject *cvalues = PyTuple_GET_ITEM(ctx, CFIELDS_VALUES);
    if (!PyTuple_CheckExact(cnames) || !PyTuple_CheckExact(cvalues)
        || PyTuple_GET_SIZE(cnames) != PyTuple_GET_SIZE(cvalues))
        return 0;
    Py_ssize_t own = nargs - 1 + nkw, n = own + PyTuple_GET_SIZE(cvalues);
    if (n > MAX_CONTEXT_VALUES)
        return 0;
    int slot = (int)((h ^ (h >> 7)) & (CONTEXT_CACHE - 1));
    int same = self->context_cache[slot].code == (void *)code
        && self->context_cache[slot].lasti == lasti && self->context_cache[slot].fmt == args[0]
        && self->context_cache[slot].nargs == nargs - 1
        && same_names(self->context_cache[slot].names, kwnames, nkw);
    if (same) {
        same = same_context_names(self->context_cache[slot].context_names, cnames);
        if (same < 0)
            return -1;
    }
    if (!same) {
        /* The Python method's key: (level, site key, format, nargs, keyword names, context
         * names); its entry is made by the Python method's first call here. */
        PyObject *names = kwnames != NULL ? Py_NewRef(kwnames) : PyTuple_New(0);
        PyObject *site = names != NULL ? PyLong_FromSize_t(h) : NULL;
        PyObject *count = site != NULL ? PyLong_FromSsize_t(nargs - 1) : NULL;
        PyObject *key = count != NULL ? PyTuple_Pack(6, self->level, site, args[0], count,
                                                     names, cnames) : NULL;
        Py_XDECREF(site);
        Py_XDECREF(count);
        if (key == NULL) {
            Py_XDECREF(names);
            return -1;
        }
        PyObject *entry = PyDict_GetItemWithError(self->context_sites, key);
        Py_DECREF(key);
        if (entry == NULL || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != CONTEXT_FIELDS
            || PyTuple_GET_ITEM(entry, CONTEXT_CODE) != (PyObject *)code) {
            Py_DECREF(names);
            return PyErr_Occurred() ? -1 : 0;
        }
        long long sid = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, CONTEXT_SOURCE_ID));
        unsigned long long shown =
            PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(entry, CONTEXT_SHOWN));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            Py_DECREF(names);
            return 0;
        }
        Py_XSETREF(self->context_cache[slot].entry, Py_NewRef(entry));
        Py_XSETREF(self->context_cache[slot].fmt, Py_NewRef(args[0]));
        Py_XSETREF(self->context_cache[slot].names, names);
        Py_XSETREF(self->context_cache[slot].context_names, Py_NewRef(cnames));
        self->context_cache[slot].code = (void *)code;
        self->context_cache[slot].lasti = lasti;
        self->context_cache[slot].nargs = nargs - 1;
        self->context_cache[slot].sid = sid;
        self->context_cache[slot].shown = shown;
    }
    PyObject *values[MAX_CONTEXT_VALUES];
    for (Py_ssize_t i = 0; i < own; i++)
        values[i] = args[1 + i];
    for (Py_ssize_t i = own; i < n; i++)
        values[i] = PyTuple_GET_ITEM(cvalues, i - own);
    return push_values_now(self->local, self->key, self->context_cache[slot].sid, values, n,
                           self->context_cache[slot].shown);
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
    /* Context fields were used in this process, or a span's ids may be in context. */
    if (blog_context_var != NULL || may_have_ids()) {
        PyObject *ctx = blog_fields_now();
        if (ctx == NULL)
            return NULL;
        if (ctx != Py_None) {
            int pushed = context_call(self, code, lasti, h, args, nargs, kwnames, nkw, ctx);
            Py_DECREF(ctx);
            if (pushed < 0)
                return NULL;
            if (pushed)
                Py_RETURN_NONE;
            goto slow;
        }
        Py_DECREF(ctx);
    }
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
        long long sid = PyLong_AsLongLong(PyTuple_GET_ITEM(site, SITE_SOURCE_ID));
        unsigned long long shown =
            PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(site, SITE_SHOWN));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto slow;
        }
        Py_XSETREF(self->cache[slot].site, Py_NewRef(site));
        self->cache[slot].code = (void *)code;
        self->cache[slot].lasti = lasti;
        self->cache[slot].fmt = PyTuple_GET_ITEM(site, SITE_FORMAT);
        self->cache[slot].names = PyTuple_GET_ITEM(site, SITE_NAMES);
        self->cache[slot].nargs = nargs - 1;
        self->cache[slot].sid = sid;
        self->cache[slot].shown = shown;
    }
    /* Read from the entry now: making the thread's channel entry, or a push, may run
     * code (a collection's finalizer) that logs and refills the slot. */
    long long sid = self->cache[slot].sid;
    unsigned long long shown = self->cache[slot].shown;
    /* The keywords' values follow the arguments in args: the event's values, in order. */
    int pushed = push_values_now(self->local, self->key, sid, args + 1, nargs - 1 + nkw,
                                 shown);
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
    Py_VISIT(self->context_sites);
    for (int i = 0; i < CONTEXT_CACHE; i++) {
        Py_VISIT(self->context_cache[i].entry);
        Py_VISIT(self->context_cache[i].fmt);
        Py_VISIT(self->context_cache[i].names);
        Py_VISIT(self->context_cache[i].context_names);
    }
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
    Py_CLEAR(self->context_sites);
    Py_CLEAR(self->level);
    for (int i = 0; i < CONTEXT_CACHE; i++) {
        Py_CLEAR(self->context_cache[i].entry);
        Py_CLEAR(self->context_cache[i].fmt);
        Py_CLEAR(self->context_cache[i].names);
        Py_CLEAR(self->context_cache[i].context_names);
        self->context_cache[i].code = NULL;
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
method_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *sites, *local, *fallback, *context_sites = NULL, *level = NULL;
    if (!PyArg_ParseTuple(args, "O!OO|O!O!:Method", &PyDict_Type, &sites, &local, &fallback,
                          &PyDict_Type, &context_sites, &PyLong_Type, &level))
        return NULL;
    if ((context_sites == NULL) != (level == NULL)) {
        PyErr_SetString(PyExc_TypeError, "Method: context_sites and level go together");
        return NULL;
    }
    Method *self = (Method *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = method_vectorcall;
    Py_INCREF(sites); self->sites = sites;
    Py_INCREF(local); self->local = local;
    Py_INCREF(fallback); self->fallback = fallback;
    self->context_sites = Py_XNewRef(context_sites);
    self->level = Py_XNewRef(level);
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
method_get_wrapped(Method *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->fallback);
}

/* A method descriptor as a function is (bound to nothing: the Method is an instance's
 * attribute), so that pydoc documents it as a routine. */
static PyObject *
method_descr_get(PyObject *self, PyObject *Py_UNUSED(obj), PyObject *Py_UNUSED(type))
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
    .tp_doc = "Method(sites, local, fallback[, context_sites, level]): a logger level method "
              "with a C fast path.",
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
