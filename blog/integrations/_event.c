/* blog/integrations/_event.c: EventCall, a function decorated with @blog.event, with a C
 * fast path; its twin is blog/integrations/event.py (the wrapper), which it calls for
 * anything but the common case: its arguments by position, its level enabled, the channel
 * below its limit, no fields in context or those of a context (blog.context's, a span's
 * ids) whose source the wrapper registered (_EventSite.context_sids).
 */
#include "../pipeline/_callpath.h"

#include <stddef.h>

static PyObject *str_min;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *logger;    /* its threshold is the minimum severity in force */
    PyObject *sid;       /* the EventSource id */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (blog_thread_channel) */
    PyObject *body;      /* the decorated function, or None if its body is empty */
    PyObject *fallback;  /* the Python wrapper: handles everything else */
    PyObject *dict;      /* __wrapped__, __name__, source, ... (functools.wraps) */
    PyObject *context_sids;  /* dict: context field names -> source id (the wrapper's) */
    PyObject *last_names;    /* the context names of the last call in context, and */
    long long last_sid;      /* its source id */
    Py_ssize_t nparams;
    long severity;
} EventCall;

/* The most values (arguments, context fields) a call in context pushes here. */
#define MAX_VALUES 32

/* A call with fields in context (`ctx`, a ContextFields or a span's Ids): its values then
 * the context's, under the source the wrapper registered for these names. 1 pushed, 0 the
 * wrapper's, -1 error. */
static int
context_call(EventCall *self, PyObject *const *args, Py_ssize_t nargs, PyObject *ctx)
{
    if (self->context_sids == NULL || !PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 2)
        return 0;
    PyObject *names = PyTuple_GET_ITEM(ctx, 0), *cvalues = PyTuple_GET_ITEM(ctx, 1);
    if (!PyTuple_CheckExact(cvalues) || nargs + PyTuple_GET_SIZE(cvalues) > MAX_VALUES)
        return 0;
    if (names != self->last_names) {
        PyObject *sid = PyDict_GetItemWithError(self->context_sids, names);
        if (sid == NULL)
            return PyErr_Occurred() ? -1 : 0;
        long long v = PyLong_AsLongLong(sid);
        if (v == -1 && PyErr_Occurred())
            return -1;
        Py_XSETREF(self->last_names, Py_NewRef(names));
        self->last_sid = v;
    }
    PyObject *values[MAX_VALUES];
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        values[n++] = args[i];
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cvalues); i++)
        values[n++] = PyTuple_GET_ITEM(cvalues, i);
    return push_values_now(self->local, self->key, self->last_sid, values, n,
                           ~0ULL);   /* zoned: Python's */
}

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
        long long sid = PyLong_AsLongLong(self->sid);
        if (sid == -1 && PyErr_Occurred())
            return NULL;
        int pushed;
        if (blog_context_var != NULL || may_have_ids()) {
            PyObject *ctx = blog_fields_now();
            if (ctx == NULL)
                return NULL;
            pushed = ctx == Py_None ? push_values_now(self->local, self->key, sid, args, nargs,
                                                      ~0ULL)   /* zoned: Python's */
                                    : context_call(self, args, nargs, ctx);
            Py_DECREF(ctx);
        }
        else
            pushed = push_values_now(self->local, self->key, sid, args, nargs, ~0ULL);
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
event_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
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
    Py_VISIT(self->context_sids);
    Py_VISIT(self->last_names);
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
    Py_CLEAR(self->context_sids);
    Py_CLEAR(self->last_names);
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
event_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *logger, *sid, *local, *body, *fallback, *context_sids = NULL;
    Py_ssize_t nparams;
    long severity;
    if (!PyArg_ParseTuple(args, "OlOnOOO|O!:EventCall", &logger, &severity, &sid, &nparams,
                          &local, &body, &fallback, &PyDict_Type, &context_sids))
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
    self->context_sids = Py_XNewRef(context_sids);
    self->key = blog_thread_key(local);
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
    .tp_doc = "EventCall(logger, severity, sid, nparams, local, body, fallback"
              "[, context_sids]): an @blog.event function with a C fast path.",
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

int
blog_event_init(PyObject *m)
{
    str_min = PyUnicode_InternFromString("threshold");
    if (str_min == NULL)
        return -1;
    return blog_add_type(m, &EventCallType, "EventCall");
}
