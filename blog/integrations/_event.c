/* blog/integrations/_event.c: EventCall, a function decorated with @blog.event, with a C
 * fast path; its twin is blog/integrations/event.py (the wrapper), which it calls for
 * anything but the common case.
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
        long long sid = PyLong_AsLongLong(self->sid);
        if (sid == -1 && PyErr_Occurred())
            return NULL;
        int pushed = push_call(self->local, self->key, sid, args, nargs,
                               ~0ULL);   /* zoned: Python's */
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
event_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
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

int
blog_event_init(PyObject *m)
{
    str_min = PyUnicode_InternFromString("threshold");
    if (str_min == NULL)
        return -1;
    return blog_add_type(m, &EventCallType, "EventCall");
}
