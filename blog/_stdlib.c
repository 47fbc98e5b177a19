/* blog/_stdlib.c: the logging bridge's C. RecordHandler, blog.stdlib.BlogHandler.handle
 * with a C fast path for the common logging record; its twin is blog/stdlib.py
 * (BlogHandler.emit's first branch), which it calls for everything else. LoggingCall,
 * logging.Logger._log for a call that reaches only BlogHandlers: to their sites without a
 * LogRecord; its twin is blog/stdlibcalls.py (blog's _log and log_call).
 */
#include "_extension.h"

#include <math.h>
#include <stddef.h>
#include <structmember.h>

/* The fields of blog.stdlib.RecordSite (a handler's site entry), in their order: read by
 * position here, by name there (tests/test_c_sources.py checks that the two agree). */
enum { RSITE_SOURCE_ID, RSITE_TEMPLATE, RSITE_SEVERITY, RSITE_CONVERSIONS, RSITE_FIELDS };

/* A logging record's attributes it reads, interned once. */
static PyObject *str_msg, *str_args, *str_exc_info, *str_stack_info, *str_pathname,
                *str_lineno, *str_funcname, *str_levelno, *str_logname, *str_created, *str_smin,
                *str_message, *str_asctime, *str_filters;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *sites;     /* dict: (msg, pathname, lineno, funcName, levelno, name,
                            len(args)) -> (sid, template, severity, conversions or None),
                            shared with the Python handler; (None, ..., 1): a record
                            without args whose msg is not its site's format: the site's
                            source "{}", its msg the one value */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (blog_thread_channel) */
    PyObject *registry;  /* its min_severity: the session's minimum severity */
    PyObject *handler;   /* its filters (a list): any, and the Python path runs */
    PyObject *fallback;  /* the Python handle: everything else */
    Py_ssize_t base;     /* how many attributes a LogRecord without extra has */
    long long records;   /* records pushed here (the Python path counts its own) */
    long long calls;     /* logging calls pushed here without a record (LoggingCall) */
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

/* The most values (the record's, then the context's) a record in context pushes here. */
#define MAX_VALUES 32

/* The site (borrowed) of the key (head, path, lineno, func, levelno, name, n), and the names
 * of the fields in context (cnames: NULL, none); NULL if none, or an error. */
static PyObject *
site_of(RecordHandler *self, PyObject *head, PyObject *path, PyObject *lineno, PyObject *func,
        PyObject *levelno, PyObject *name, Py_ssize_t n, PyObject *cnames)
{
    PyObject *count = PyLong_FromSsize_t(n);
    PyObject *key = count == NULL ? NULL : cnames == NULL
        ? PyTuple_Pack(7, head, path, lineno, func, levelno, name, count)
        : PyTuple_Pack(8, head, path, lineno, func, levelno, name, count, cnames);
    Py_XDECREF(count);
    if (key == NULL)
        return NULL;
    PyObject *site = PyDict_GetItemWithError(self->sites, key);
    Py_DECREF(key);
    return site;
}

/* Push `args` (a tuple held by the caller, as are the key's parts) as the event of the
 * handler's site (msg, path, lineno, func, levelno, name, len(args)) at `clock` (LLONG_MIN:
 * now), then the values of the fields in context (`ctx`, held: a ContextFields or a span's
 * Ids; NULL: none), under the site of their names;
 * without args, a msg not the site's format is the value of the site's "{}" source. Its
 * twin is BlogHandler._push_known. 1: pushed (or below the minimum); 0: not here (no such
 * site yet, a value its conversion does not take, a value not plain, no channel yet), with
 * nothing pushed; -1 error. */
static int
site_push(RecordHandler *self, PyObject *msg, PyObject *args, PyObject *path,
          PyObject *lineno, PyObject *func, PyObject *levelno, PyObject *name, long long clock,
          PyObject *ctx)
{
    int r = 0;
    PyObject *cnames = NULL, *cvalues = NULL;
    if (ctx != NULL) {
        if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 2
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(ctx, 1)))
            return 0;
        cnames = PyTuple_GET_ITEM(ctx, 0);
        cvalues = PyTuple_GET_ITEM(ctx, 1);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *const *values = &PyTuple_GET_ITEM(args, 0);
    PyObject *site = site_of(self, msg, path, lineno, func, levelno, name, n, cnames);
    if (site == NULL && n == 0 && !PyErr_Occurred()) {   /* a new text: the source "{}" */
        values = &msg;
        n = 1;
        site = site_of(self, Py_None, path, lineno, func, levelno, name, n, cnames);
    }
    if (site == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(site) || PyTuple_GET_SIZE(site) != RSITE_FIELDS)
        return 0;
    Py_INCREF(site);        /* held: hashing may have run code that changes the dict */
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
    PyObject *all[MAX_VALUES];
    if (cvalues != NULL) {      /* the record's values, then the context's */
        Py_ssize_t nc = PyTuple_GET_SIZE(cvalues);
        if (n + nc > MAX_VALUES)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            all[i] = values[i];
        for (Py_ssize_t i = 0; i < nc; i++)
            all[n + i] = PyTuple_GET_ITEM(cvalues, i);
        values = all;
        n += nc;
    }
    Channel *ch = blog_thread_channel(self->local, self->key);
    if (ch == NULL)
        goto done;
    r = blog_push_plain(ch, sid, values, n, clock);
    Py_DECREF(ch);
done:
    Py_DECREF(site);
    return PyErr_Occurred() ? -1 : r;
}

/* The fields in context now (a new reference: a ContextFields or a span's Ids), or NULL:
 * none, or an error. */
static PyObject *
context_now(void)
{
    if (blog_context_var == NULL && !may_have_ids())
        return NULL;
    PyObject *ctx = blog_fields_now();
    if (ctx == Py_None)
        Py_CLEAR(ctx);
    return ctx;
}

/* The common record: a str message, a tuple of plain scalars, no extra, no exception or
 * stack, of a call site seen before (with the names of the fields in context), each value
 * taken by its conversion (site_push). Its twin is BlogHandler.emit's first branch. 1: pushed (or
 * below the minimum); 0: the Python path's, which also handles every error (it goes to the
 * handler's handleError, never to the caller). */
static int
record_push(RecordHandler *self, PyObject *rec)
{
    int r = 0;
    PyObject *d = NULL, *args = NULL, *ctx = NULL;
    /* msg, path, lineno, funcName, levelno, name: held from here on (hashing them for the
     * site key may run code, a str subclass's, that replaces them in the record). */
    PyObject *held[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *filters = PyObject_GetAttr(self->handler, str_filters);
    if (filters == NULL)
        goto done;
    int none = PyList_CheckExact(filters) && PyList_GET_SIZE(filters) == 0;
    Py_DECREF(filters);
    if (!none)
        goto done;
    ctx = context_now();
    if (ctx == NULL && PyErr_Occurred())
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
    PyObject *func = PyDict_GetItem(d, str_funcname);
    PyObject *levelno = PyDict_GetItem(d, str_levelno);
    PyObject *name = PyDict_GetItem(d, str_logname);
    PyObject *created = PyDict_GetItem(d, str_created);
    if (msg == NULL || !PyUnicode_CheckExact(msg) || args == NULL || !PyTuple_CheckExact(args)
        || exc != Py_None || stack != Py_None || path == NULL || lineno == NULL || func == NULL
        || levelno == NULL || name == NULL || created == NULL || !PyFloat_CheckExact(created)) {
        args = NULL;
        goto done;
    }
    Py_INCREF(args);        /* held: what follows may run code that changes the record */
    held[0] = Py_NewRef(msg);
    held[1] = Py_NewRef(path);
    held[2] = Py_NewRef(lineno);
    held[3] = Py_NewRef(func);
    held[4] = Py_NewRef(levelno);
    held[5] = Py_NewRef(name);
    double when = PyFloat_AS_DOUBLE(created) * 1e9;
    if (!(when > -9.2e18 && when < 9.2e18))
        goto done;
    r = site_push(self, msg, args, path, lineno, func, levelno, name, (long long)when, ctx);
    if (r < 0)
        r = 0;
    else
        self->records += r;
done:
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(args);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(held[i]);
    Py_XDECREF(d);
    Py_XDECREF(ctx);
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
record_handler_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
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

static PyMemberDef record_handler_members[] = {
    {"records", T_LONGLONG, offsetof(RecordHandler, records), READONLY,
     "records this C path pushed (BlogHandler.paths adds the Python path's)"},
    {"calls", T_LONGLONG, offsetof(RecordHandler, calls), READONLY,
     "logging calls pushed here without a record (LoggingCall)"},
    {NULL},
};

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
    .tp_members = record_handler_members,
};

/* ---- LoggingCall: logging.Logger._log without a LogRecord ------------------ */

/* The most BlogHandlers a call may reach on the fast path (more: the record path's). */
#define MAX_REACHED 8

/* The lines of the callers found lately, per code object and instruction: finding a frame's
 * line scans its code's line table (findCaller pays it at every call); a small table of
 * them, each slot the last (code, instruction) that fell in it. */
#define LINES 64
typedef struct { PyObject *code; int lasti, line; } Line;

/* A BlogHandler a call reaches, and its RecordHandler (its "handle"; None in pure Python):
 * new references. */
typedef struct { PyObject *handler, *push; } Reached;

static void
release(Reached *found, int n)
{
    while (n > 0) {
        n--;
        Py_DECREF(found[n].handler);
        Py_DECREF(found[n].push);
    }
}

/* logging.Logger._log while a BlogHandler exists (blog/stdlibcalls.py installs it, and is
 * its twin, blog's _log): a call whose every handler on the way is a BlogHandler without
 * filters or a NullHandler that does nothing, of a plain Logger, goes to the BlogHandlers'
 * sites as the record would; any other call goes to the `_log` it replaced, unchanged. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *original;   /* the Logger._log it replaced: the record path */
    PyObject *twin;       /* blog's _log in Python: calls with extra, exc_info, stack_info */
    PyObject *emit;       /* stdlibcalls.emit_call: handlers whose push is not C's here */
    PyObject *handler_type;    /* blog.stdlib.BlogHandler (exactly: not a subclass) */
    PyObject *checked;    /* stdlibcalls.unchanged(cls): the class's methods are logging's */
    PyObject *globals;    /* logging's module dict: its _srcfile and _logRecordFactory */
    PyObject *srcfile;    /* logging._srcfile when installed */
    PyObject *record_type;     /* logging.LogRecord: the record factory must be it */
    PyObject *types[3];   /* logging.Logger, logging.RootLogger, logging.NullHandler (None:
                             its handle is not logging's, no handler is skipped) */
    PyObject *outside;    /* the file of the last frame found not logging's own */
    Line lines[LINES];
    unsigned int tags[3]; /* their version tags when last checked (0: check again) */
} LoggingCall;

static PyObject *str_srcfile, *str_factory, *str_disabled, *str_handlers, *str_propagate,
                *str_parent, *str_level, *str_handle, *str_emit, *str_importlib, *str_bootstrap,
                *str_kw_exc_info, *str_kw_extra, *str_kw_stack_info, *str_kw_stacklevel;

/* The methods of logging.Logger that find the caller, filter, make and hand the record
 * (stdlibcalls._METHODS): one set on a logger itself is logging's to call. */
static PyObject *str_methods[5];
/* The attributes of a logger that reached does not read: level, _cache, manager. */
static PyObject *str_plain[3];

/* 1 if the type's methods that make and hand a record (a logger's) or handle it (a
 * NullHandler's: doing nothing) are still logging's own (checked again whenever the type
 * changed: its version tag), 0 if not, -1 error. */
static int
methods_unchanged(LoggingCall *self, int i)
{
    PyTypeObject *t = (PyTypeObject *)self->types[i];
    if (self->tags[i] != 0 && t->tp_version_tag == self->tags[i])
        return 1;
    PyObject *ok = PyObject_CallOneArg(self->checked, (PyObject *)t);
    if (ok == NULL)
        return -1;
    int r = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    self->tags[i] = r == 1 ? t->tp_version_tag : 0;
    return r;
}

/* 1 if the logger's dict `d` holds none of the Logger methods a call goes through (each
 * is looked up on the logger first: one of its own is logging's to call), 0 if it does,
 * -1 error. A logger's dict holds the six attributes the walk reads (disabled, filters,
 * name, handlers, propagate, parent: without one, reached steps aside) and level, _cache
 * and manager: with no other key, it holds no method (three lookups that hit cost less
 * than five that miss). */
static int
no_own_methods(PyObject *d)
{
    Py_ssize_t known = 6;
    for (size_t i = 0; i < sizeof(str_plain) / sizeof(str_plain[0]); i++) {
        known += PyDict_GetItemWithError(d, str_plain[i]) != NULL;
        if (PyErr_Occurred())
            return -1;
    }
    if (PyDict_GET_SIZE(d) == known)
        return 1;
    for (size_t i = 0; i < sizeof(str_methods) / sizeof(str_methods[0]); i++)
        if (PyDict_GetItemWithError(d, str_methods[i]) != NULL || PyErr_Occurred())
            return PyErr_Occurred() ? -1 : 0;
    return 1;
}

/* 1 if `list` is a list with no item (the filters of a logger or a handler). */
static int
empty_list(PyObject *list)
{
    return list != NULL && PyList_CheckExact(list) && PyList_GET_SIZE(list) == 0;
}

/* The BlogHandlers a call of `logger` at `level` reaches, as Logger.callHandlers walks
 * them, put in `found` (new references) if every handler on the way is a BlogHandler
 * without filters or a NullHandler that does nothing (skipped, but found: no lastResort,
 * as stdlibcalls._quiet), the logger is a plain, enabled Logger without filters nor methods of its
 * own (no_own_methods) and logging would make a plain LogRecord: their number (0: none at
 * this level); `*name` the logger's name (a new reference). -1: the record path's (or an
 * error). */
static int
reached(LoggingCall *self, PyObject *logger, long level, Reached *found, PyObject **name)
{
    PyTypeObject *t = Py_TYPE(logger);
    int i = t == (PyTypeObject *)self->types[0] ? 0 : t == (PyTypeObject *)self->types[1] ? 1 : -1;
    if (i < 0 || methods_unchanged(self, i) != 1
        || PyDict_GetItemWithError(self->globals, str_srcfile) != self->srcfile
        || PyDict_GetItemWithError(self->globals, str_factory) != self->record_type)
        return -1;
    int n = 0, seen = 0;
    PyObject *d = PyObject_GenericGetDict(logger, NULL);
    if (d == NULL || !PyDict_CheckExact(d) || PyDict_GetItemWithError(d, str_disabled) != Py_False
        || !empty_list(PyDict_GetItemWithError(d, str_filters)) || no_own_methods(d) != 1)
        goto aside;
    *name = PyDict_GetItemWithError(d, str_logname);
    if (*name == NULL || !PyUnicode_CheckExact(*name))
        goto aside;
    Py_INCREF(*name);
    for (;;) {
        PyObject *handlers = PyDict_GetItemWithError(d, str_handlers);
        if (handlers == NULL || !PyList_CheckExact(handlers))
            goto aside;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(handlers); k++) {
            PyObject *h = PyList_GET_ITEM(handlers, k);
            int quiet = (PyObject *)Py_TYPE(h) == self->types[2];
            if (!quiet && (PyObject *)Py_TYPE(h) != self->handler_type)
                goto aside;
            PyObject *hd = PyObject_GenericGetDict(h, NULL);
            PyObject *hl = hd != NULL ? PyDict_GetItemWithError(hd, str_level) : NULL;
            PyObject *handle = hd != NULL ? PyDict_GetItemWithError(hd, str_handle) : NULL;
            /* (an emit or handle set on the handler itself, a test's, takes the record) */
            int plain = hd != NULL && empty_list(PyDict_GetItemWithError(hd, str_filters))
                        && hl != NULL && PyLong_CheckExact(hl)
                        && PyDict_GetItemWithError(hd, str_emit) == NULL
                        && (quiet ? handle == NULL && methods_unchanged(self, 2) == 1
                                  : handle == NULL || Py_IS_TYPE(handle, &RecordHandlerType));
            long hlevel = plain && !quiet ? PyLong_AsLong(hl) : 0;
            if (PyErr_Occurred() || (!quiet && level >= hlevel && n == MAX_REACHED))
                plain = 0;
            if (plain && !quiet && level >= hlevel) {
                found[n].handler = Py_NewRef(h);
                found[n++].push = Py_NewRef(handle != NULL ? handle : Py_None);
            }
            Py_XDECREF(hd);
            if (!plain)
                goto aside;
            seen = 1;
        }
        PyObject *propagate = PyDict_GetItemWithError(d, str_propagate);
        if (propagate == NULL || !(propagate == Py_True || propagate == Py_False))
            goto aside;
        if (propagate == Py_False)
            break;
        PyObject *parent = PyDict_GetItemWithError(d, str_parent);
        if (parent == Py_None)
            break;
        if (parent == NULL || (Py_TYPE(parent) != (PyTypeObject *)self->types[0]
                               && Py_TYPE(parent) != (PyTypeObject *)self->types[1]))
            goto aside;
        Py_DECREF(d);
        d = PyObject_GenericGetDict(parent, NULL);
        if (d == NULL || !PyDict_CheckExact(d))
            goto aside;
    }
    Py_CLEAR(d);
    if (seen && !PyErr_Occurred())      /* none: logging's lastResort */
        return n;
aside:
    Py_XDECREF(d);
    release(found, n);
    Py_CLEAR(*name);
    if (PyErr_Occurred())
        PyErr_Clear();
    return -1;
}

/* 1 if logging's findCaller skips the frame as its own (logging._is_internal_frame). */
static int
internal_frame(LoggingCall *self, PyFrameObject *f)
{
    PyCodeObject *co = PyFrame_GetCode(f);
    PyObject *fn = co->co_filename;
    int r = fn == self->srcfile;
    if (!r && fn != self->outside && PyUnicode_Check(fn)) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(fn);
        r = PyUnicode_Compare(fn, self->srcfile) == 0
            || (PyUnicode_Find(fn, str_importlib, 0, len, 1) >= 0
                && PyUnicode_Find(fn, str_bootstrap, 0, len, 1) >= 0);
        if (!r && !PyErr_Occurred())
            Py_XSETREF(self->outside, Py_NewRef(fn));
    }
    Py_DECREF(co);
    if (PyErr_Occurred())
        PyErr_Clear();
    return r;
}

/* The code and line of the frame Logger.findCaller(stack_info, stacklevel) picks, called
 * from the innermost Python frame (the caller of _log): a new reference, NULL if none. */
static PyCodeObject *
caller(LoggingCall *self, long stacklevel, int *lineno)
{
    PyFrameObject *f = PyEval_GetFrame();
    if (f == NULL)
        return NULL;
    Py_INCREF(f);
    if (!internal_frame(self, f))
        stacklevel--;
    while (stacklevel > 0) {
        PyFrameObject *back = PyFrame_GetBack(f);
        if (back == NULL)
            break;
        Py_DECREF(f);
        f = back;
        if (!internal_frame(self, f))
            stacklevel--;
    }
    PyCodeObject *co = PyFrame_GetCode(f);
    int lasti = PyFrame_GetLasti(f);
    Line *e = &self->lines[(((uintptr_t)co >> 4) ^ (unsigned)lasti) % LINES];
    if (e->code != (PyObject *)co || e->lasti != lasti) {
        Py_XSETREF(e->code, Py_NewRef(co));
        e->lasti = lasti;
        e->line = PyFrame_GetLineNumber(f);
    }
    *lineno = e->line;
    Py_DECREF(f);
    return co;
}

/* The keyword arguments of _log: 1 if each leaves the call common (no exc_info, extra nor
 * stack_info; `*stacklevel` set), 0 if one does not (the twin's), -1 for the original _log
 * itself: a name _log does not take (logging's to refuse), a stacklevel not an int of at
 * least 1 (a float, a bool: findCaller counts it down as a number; through the twin, one
 * frame more, it would name another). */
static int
common_keywords(PyObject *const *values, PyObject *kwnames, long *stacklevel)
{
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i), *v = values[i];
        if (PyUnicode_Compare(k, str_kw_exc_info) == 0 || PyUnicode_Compare(k, str_kw_extra) == 0) {
            if (v != Py_None)
                return 0;
        }
        else if (PyUnicode_Compare(k, str_kw_stack_info) == 0) {
            if (v != Py_None && v != Py_False)
                return 0;
        }
        else if (PyUnicode_Compare(k, str_kw_stacklevel) == 0) {
            if (!PyLong_CheckExact(v))
                return -1;
            *stacklevel = PyLong_AsLong(v);
            if (*stacklevel < 1 || PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
        }
        else
            return -1;
    }
    return 1;
}

/* The common call's push: each handler's site (site_push), the others in Python (emit). */
static PyObject *
push_call(LoggingCall *self, PyObject *const *args, Reached *found, int n, PyObject *name,
          long stacklevel)
{
    int lno = 0;
    PyCodeObject *co = caller(self, stacklevel, &lno);
    if (co == NULL)
        return PyErr_Occurred() ? NULL : PyObject_Vectorcall(self->twin, args, 4, NULL);
    PyObject *lineno = PyLong_FromLong(lno), *rest = NULL, *r = NULL;
    PyObject *ctx = lineno != NULL ? context_now() : NULL;
    if (PyErr_Occurred())
        goto done;
    for (int i = 0; i < n; i++) {
        PyObject *rh = found[i].push;
        int pushed = Py_IS_TYPE(rh, &RecordHandlerType)
            ? site_push((RecordHandler *)rh, args[2], args[3], co->co_filename, lineno,
                        co->co_name, args[1], name, LLONG_MIN, ctx) : 0;
        if (pushed > 0) {
            ((RecordHandler *)rh)->calls++;
            continue;
        }
        PyErr_Clear();           /* not pushed: the Python path decides, and reports */
        if (rest == NULL && (rest = PyList_New(0)) == NULL)
            goto done;
        if (PyList_Append(rest, found[i].handler) < 0)
            goto done;
    }
    if (rest != NULL) {
        PyObject *call[] = {rest, args[0], args[1], args[2], args[3], co->co_filename,
                            lineno, co->co_name};
        r = PyObject_Vectorcall(self->emit, call, 8, NULL);
    }
    else
        r = Py_NewRef(Py_None);
done:
    Py_XDECREF(rest);
    Py_XDECREF(lineno);
    Py_XDECREF(ctx);
    Py_DECREF(co);
    return r;
}

static PyObject *
logging_call_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames)
{
    LoggingCall *self = (LoggingCall *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    long stacklevel = 1, level;
    int common;
    if (nargs < 4 || nargs > 8 || !PyLong_CheckExact(args[1])
        || (common = common_keywords(args + nargs, kwnames, &stacklevel)) < 0)
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    level = PyLong_AsLong(args[1]);
    if (level == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    }
    Reached found[MAX_REACHED];
    PyObject *name = NULL;
    int n = reached(self, args[0], level, found, &name);
    if (n < 0)
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    PyObject *r;
    if (nargs == 4 && common && n == 0)
        r = Py_NewRef(Py_None);     /* no handler at this level: nothing to do */
    else if (nargs == 4 && common && PyUnicode_CheckExact(args[2])
             && PyTuple_CheckExact(args[3]))
        r = push_call(self, args, found, n, name, stacklevel);
    else {
        PyErr_Clear();
        r = PyObject_Vectorcall(self->twin, args, nargsf, kwnames);
    }
    release(found, n);
    Py_DECREF(name);
    return r;
}

static PyObject *
logging_call_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int
logging_call_traverse(LoggingCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->original);
    Py_VISIT(self->twin);
    Py_VISIT(self->emit);
    Py_VISIT(self->handler_type);
    Py_VISIT(self->checked);
    Py_VISIT(self->globals);
    Py_VISIT(self->srcfile);
    Py_VISIT(self->record_type);
    for (int i = 0; i < 3; i++)
        Py_VISIT(self->types[i]);
    Py_VISIT(self->outside);
    for (int i = 0; i < LINES; i++)
        Py_VISIT(self->lines[i].code);
    return 0;
}

static int
logging_call_clear(LoggingCall *self)
{
    Py_CLEAR(self->original);
    Py_CLEAR(self->twin);
    Py_CLEAR(self->emit);
    Py_CLEAR(self->handler_type);
    Py_CLEAR(self->checked);
    Py_CLEAR(self->globals);
    Py_CLEAR(self->srcfile);
    Py_CLEAR(self->record_type);
    for (int i = 0; i < 3; i++)
        Py_CLEAR(self->types[i]);
    Py_CLEAR(self->outside);
    for (int i = 0; i < LINES; i++)
        Py_CLEAR(self->lines[i].code);
    return 0;
}

static void
logging_call_dealloc(LoggingCall *self)
{
    PyObject_GC_UnTrack(self);
    logging_call_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
logging_call_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *original, *twin, *emit, *handler_type, *checked, *globals, *logger, *root, *null;
    if (!PyArg_ParseTuple(args, "OOOO!OO!O!O!O:LoggingCall", &original, &twin, &emit,
                          &PyType_Type, &handler_type, &checked, &PyDict_Type, &globals,
                          &PyType_Type, &logger, &PyType_Type, &root, &null))
        return NULL;
    if (null != Py_None && !PyType_Check(null)) {
        PyErr_SetString(PyExc_TypeError, "LoggingCall: NullHandler must be a type or None");
        return NULL;
    }
    PyObject *srcfile = PyDict_GetItemWithError(globals, str_srcfile);
    PyObject *record_type = srcfile != NULL ? PyDict_GetItemWithError(globals, str_factory)
                                            : NULL;
    if (record_type == NULL || !PyUnicode_CheckExact(srcfile)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "LoggingCall: logging without _srcfile");
        return NULL;
    }
    LoggingCall *self = (LoggingCall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = logging_call_vectorcall;
    self->original = Py_NewRef(original);
    self->twin = Py_NewRef(twin);
    self->emit = Py_NewRef(emit);
    self->handler_type = Py_NewRef(handler_type);
    self->checked = Py_NewRef(checked);
    self->globals = Py_NewRef(globals);
    self->srcfile = Py_NewRef(srcfile);
    self->record_type = Py_NewRef(record_type);
    self->types[0] = Py_NewRef(logger);
    self->types[1] = Py_NewRef(root);
    self->types[2] = Py_NewRef(null);
    return (PyObject *)self;
}

static PyMemberDef logging_call_members[] = {
    {"handler_type", T_OBJECT_EX, offsetof(LoggingCall, handler_type), 0,
     "the type of the handlers it takes calls for (None: none, every call is the record "
     "path's: stdlibcalls.uninstall under a wrapper)"},
    {NULL},
};

static PyTypeObject LoggingCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.LoggingCall",
    .tp_basicsize = sizeof(LoggingCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "LoggingCall(original, twin, emit, handler_type, checked, logging_globals, "
              "Logger, RootLogger, NullHandler): logging.Logger._log, without a LogRecord "
              "where only BlogHandlers (and NullHandlers) take the call.",
    .tp_new = logging_call_new,
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = logging_call_get,
    .tp_vectorcall_offset = offsetof(LoggingCall, vectorcall),
    .tp_traverse = (traverseproc)logging_call_traverse,
    .tp_clear = (inquiry)logging_call_clear,
    .tp_dealloc = (destructor)logging_call_dealloc,
    .tp_members = logging_call_members,
};

int
blog_stdlib_init(PyObject *m)
{
    static struct { PyObject **var; const char *text; } names[] = {
        {&str_msg, "msg"}, {&str_args, "args"}, {&str_exc_info, "exc_info"},
        {&str_stack_info, "stack_info"}, {&str_pathname, "pathname"}, {&str_lineno, "lineno"},
        {&str_funcname, "funcName"},
        {&str_levelno, "levelno"}, {&str_logname, "name"}, {&str_created, "created"},
        {&str_smin, "min_severity"}, {&str_message, "message"}, {&str_asctime, "asctime"},
        {&str_filters, "filters"}, {&str_srcfile, "_srcfile"},
        {&str_factory, "_logRecordFactory"}, {&str_disabled, "disabled"},
        {&str_handlers, "handlers"}, {&str_propagate, "propagate"}, {&str_parent, "parent"},
        {&str_level, "level"}, {&str_handle, "handle"}, {&str_emit, "emit"},
        {&str_importlib, "importlib"}, {&str_bootstrap, "_bootstrap"},
        {&str_kw_exc_info, "exc_info"},
        {&str_kw_extra, "extra"}, {&str_kw_stack_info, "stack_info"},
        {&str_kw_stacklevel, "stacklevel"}, {&str_methods[0], "findCaller"},
        {&str_methods[1], "makeRecord"}, {&str_methods[2], "handle"},
        {&str_methods[3], "callHandlers"}, {&str_methods[4], "filter"},
        {&str_plain[0], "level"}, {&str_plain[1], "_cache"}, {&str_plain[2], "manager"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].var = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    if (blog_add_type(m, &RecordHandlerType, "RecordHandler") < 0)
        return -1;
    return blog_add_type(m, &LoggingCallType, "LoggingCall");
}
