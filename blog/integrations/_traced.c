/* blog/integrations/_traced.c: TracedCall, a plain function decorated with @blog.traced,
 * with a C fast path; its twin is blog/integrations/traced.py (the _Tracer and its
 * wrapper), which it calls for anything but the common case: a call whose arguments bind
 * as _Tracer.bind_plain binds them, no backtrace kept, no fields in context (but a span's
 * ids), the thread's channel below its limit. Then the call event, the call and the return
 * event cost no Python call of blog's. Where correlation is on (blog/_correlation.c), the
 * call is a span: its events carry its ids, and it is the current span while it runs.
 */
#include "../pipeline/_callpath.h"

#include <stddef.h>

/* What TracedCall reads of blog.integrations.traced.FastPlan, by position (its fields, in
 * this order: tests/test_c_sources.py checks). */
enum {
    PLAN_TRACER, PLAN_LOGGER, PLAN_REGISTRY, PLAN_LOCAL, PLAN_SEVERITY, PLAN_NAMES,
    PLAN_DEFAULTS, PLAN_REQUIRED, PLAN_LIVE, PLAN_POSITIONAL, PLAN_POSONLY, PLAN_SHOWN_AT, PLAN_RESULT,
    PLAN_SPANS, PLAN_FIELDS
};

/* What TracedCall reads of blog.integrations.traced.FastSources (the tracer's fast_sids),
 * by position, likewise. */
enum { SIDS_CALL, SIDS_RETURNED, SIDS_CALL_SPAN, SIDS_RETURNED_SPAN, SIDS_FIELDS };

/* The most parameters a function on the fast path takes (FastPlan checks it too). */
#define MAX_PARAMS 64

static PyObject *str_threshold, *str_backtrace, *str_fast_sids, *str_returned, *str_raised;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *tracer;    /* the _Tracer: fast_sids, and returned/raised for the Python path */
    PyObject *logger;    /* its threshold is the minimum severity in force */
    PyObject *registry;  /* its backtrace: while one is kept, the Python path */
    PyObject *local;     /* the session's threading.local */
    PyObject *key;       /* the thread state dict's key of the local (blog_thread_channel) */
    PyObject *names;     /* the parameters' names, in order */
    PyObject *defaults;  /* each parameter's default, or `required` (where live is NULL) */
    PyObject *required;
    PyObject *live;      /* the function whose __defaults__ and __kwdefaults__ a call takes,
                            as they are then; NULL: `defaults`, fixed at decoration */
    PyObject *fn;        /* the decorated function */
    PyObject *fallback;  /* the Python wrapper: handles everything else */
    PyObject *dict;      /* __wrapped__, __name__, ... (functools.wraps) */
    PyObject *weakrefs;  /* a function can be weakly referenced: so can this */
    Py_ssize_t nparams, positional, posonly, nshown;
    Py_ssize_t shown_at[MAX_PARAMS];
    long severity;
    int result;          /* the return event holds the result */
    int spans;           /* its calls are spans where correlation is on */
    long long call_sid;  /* the sources of a call without context; -1 until registered */
    long long return_sid;
    long long call_span_sid;     /* the same, with a span's fields */
    long long return_span_sid;
} TracedCall;

/* time.perf_counter_ns(): the clock of the Python path's durations. */
static inline long long
perf_ns(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t t;
    (void)PyTime_PerfCounterRaw(&t);
    return (long long)t;
#else
    return (long long)_PyTime_GetPerfCounter();
#endif
}

/* The source ids once the Python path registered them (tracer.fast_sids), those of a
 * span's events if `spans`: 1 set, 0 not yet, -1 error. */
static int
ready(TracedCall *self, int spans)
{
    if (spans ? self->call_span_sid >= 0 && self->return_span_sid >= 0
              : self->call_sid >= 0 && self->return_sid >= 0)
        return 1;
    PyObject *sids = PyObject_GetAttr(self->tracer, str_fast_sids);
    if (sids == NULL)
        return -1;
    int r = 0;
    if (PyTuple_Check(sids) && PyTuple_GET_SIZE(sids) == SIDS_FIELDS) {
        long long v[SIDS_FIELDS];
        for (int i = 0; i < SIDS_FIELDS; i++)
            v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(sids, i));
        if (PyErr_Occurred())
            r = -1;
        else {
            self->call_sid = v[SIDS_CALL];
            self->return_sid = v[SIDS_RETURNED];
            self->call_span_sid = v[SIDS_CALL_SPAN];
            self->return_span_sid = v[SIDS_RETURNED_SPAN];
            r = (spans ? self->call_span_sid >= 0 && self->return_span_sid >= 0
                       : self->call_sid >= 0 && self->return_sid >= 0);
        }
    }
    Py_DECREF(sids);
    return r;
}

/* 1 the events are logged here, 0 not logged (below the minimum), 2 the Python path's
 * (a backtrace is kept: it decides), -1 error. */
static int
enabled(TracedCall *self)
{
    PyObject *bt = PyObject_GetAttr(self->registry, str_backtrace);
    if (bt == NULL)
        return -1;
    Py_DECREF(bt);
    if (bt != Py_None)
        return 2;
    PyObject *min = PyObject_GetAttr(self->logger, str_threshold);
    if (min == NULL)
        return -1;
    long m = PyLong_AsLong(min);
    Py_DECREF(min);
    if (m == -1 && PyErr_Occurred())
        return -1;
    return m <= self->severity;
}

/* The default (borrowed) of parameter i as a call takes it now, or `required`: the live
 * function's __defaults__ (the last positional parameters', as Python aligns them) or
 * __kwdefaults__ as they are at this call; without one, the plan's. Its twin is
 * _Tracer.defaults_now. NULL: an error. */
static PyObject *
default_of(TracedCall *self, Py_ssize_t i)
{
    if (self->live == NULL)
        return PyTuple_GET_ITEM(self->defaults, i);
    if (i < self->positional) {
        PyObject *pos = PyFunction_GET_DEFAULTS(self->live);
        Py_ssize_t j = (pos != NULL ? PyTuple_GET_SIZE(pos) : 0) - self->positional + i;
        return j >= 0 ? PyTuple_GET_ITEM(pos, j) : self->required;
    }
    PyObject *kw = PyFunction_GET_KW_DEFAULTS(self->live);
    PyObject *v = kw != NULL && PyDict_Check(kw)
        ? PyDict_GetItemWithError(kw, PyTuple_GET_ITEM(self->names, i)) : NULL;
    return v != NULL ? v : PyErr_Occurred() ? NULL : self->required;
}

/* Every parameter's value into vals (new references: a default may be replaced while the
 * call's event is made), as _Tracer.bind_plain: 1 bound, 0 not here (too many positional
 * arguments, a keyword no parameter takes or given twice, a parameter missing: the Python
 * path binds it, or says why not), -1 error; vals hold nothing unless 1. */
static int
bind(TracedCall *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
     PyObject **vals)
{
    if (nargs > self->positional)
        return 0;
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if ((vals[i] = i < nargs ? args[i] : default_of(self, i)) == NULL)
            return -1;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < self->nparams && at < 0; i++)
            if (PyTuple_GET_ITEM(self->names, i) == name)
                at = i;
        for (Py_ssize_t i = 0; i < self->nparams && at < 0; i++) {
            int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(self->names, i), name, Py_EQ);
            if (eq < 0)
                return -1;
            if (eq)
                at = i;
        }
        if (at < nargs || at < self->posonly)
            return 0;    /* unknown, given by position too, or positional only */
        vals[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if (vals[i] == self->required)
            return 0;
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        Py_INCREF(vals[i]);
    return 1;
}

/* The Python path's method (returned or raised) with the call's start, `value` and its
 * span (NULL: none). */
static PyObject *
call_tracer(TracedCall *self, PyObject *method, long long start, PyObject *value,
            PyObject *span)
{
    PyObject *st = PyLong_FromLongLong(start);
    if (st == NULL)
        return NULL;
    PyObject *r = PyObject_CallMethodObjArgs(self->tracer, method, st, value,
                                             span != NULL ? span : Py_None, NULL);
    Py_DECREF(st);
    return r;
}

/* The values of a span's event (`vals`, `n` of them, room for 3 more) and the span's ids
 * after them (then its parent's, with `parent`), pushed under `sid` where no fields of
 * blog.context are in context: as push_call. */
static int
push_span_event(TracedCall *self, long long sid, PyObject **vals, Py_ssize_t n,
                PyObject *span, int parent)
{
    int ctx = in_blog_context();
    if (ctx != 0)
        return ctx < 0 ? -1 : 0;
    PyObject *ids = PyTuple_GET_ITEM(PyTuple_GET_ITEM(span, SPAN_IDS), IDS_VALUES);
    vals[n++] = PyTuple_GET_ITEM(ids, 0);
    vals[n++] = PyTuple_GET_ITEM(ids, 1);
    if (parent)
        vals[n++] = PyTuple_GET_ITEM(span, SPAN_PARENT);
    return push_values_now(self->local, self->key, sid, vals, n,
                           ~0ULL);    /* every value shown by !r or a spec */
}

/* After the call returned `res` (stolen): its return event (the end of `span`, NULL:
 * none); res, or NULL on error. */
static PyObject *
returned(TracedCall *self, long long start, PyObject *res, PyObject *span)
{
    long long end = perf_ns();
    int on = enabled(self);
    if (on == 1 && (span != NULL ? self->return_span_sid : self->return_sid) < 0)
        on = 2;     /* not registered yet: the Python path registers it */
    if (on == 1) {
        PyObject *ms = PyFloat_FromDouble((double)(end - start) / 1e6);
        if (ms == NULL)
            on = -1;
        else {
            PyObject *vals[5] = {res, ms, NULL, NULL, NULL};
            PyObject **first = self->result ? vals : vals + 1;
            Py_ssize_t n = self->result ? 2 : 1;
            int pushed = span != NULL
                ? push_span_event(self, self->return_span_sid, first, n, span, 0)
                : push_call(self->local, self->key, self->return_sid, first, n,
                            ~0ULL);    /* every value shown by !r or a spec */
            Py_DECREF(ms);
            on = pushed < 0 ? -1 : pushed ? 0 : 2;
        }
    }
    if (on < 0)
        Py_CLEAR(res);
    if (on <= 0)    /* logged, not logged, or an error */
        return res;
    PyObject *r = call_tracer(self, str_returned, start, res, span);   /* returns res */
    Py_DECREF(res);
    return r;
}

/* After the call raised: its event (the Python path's, which captures the exception; the
 * end of `span`, NULL: none), then the exception goes on; an exception logging it raised
 * goes instead, the first its context, as from the Python wrapper's except clause. Always
 * NULL. */
static PyObject *
raised(TracedCall *self, long long start, PyObject *span)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *r = call_tracer(self, str_raised, start, value, span);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (tb2 != NULL)
        PyException_SetTraceback(v2, tb2);
    if (v2 != value)
        PyException_SetContext(v2, value);   /* steals value */
    else
        Py_DECREF(value);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyErr_Restore(t2, v2, tb2);
    return NULL;
}

/* The call event of a call (the values logged in `shown`, room for 3 more) as a span, which
 * it makes (*span, a new reference): its ids and parent after the values. As push_call. */
static int
push_span_call(TracedCall *self, PyObject **shown, PyObject **span)
{
    int ctx = in_blog_context();
    if (ctx != 0)
        return ctx < 0 ? -1 : 0;
    if ((*span = blog_new_span()) == NULL)
        return -1;
    int r = push_span_event(self, self->call_span_sid, shown, self->nshown, *span, 1);
    if (r <= 0)
        Py_CLEAR(*span);
    return r;
}

/* The span that was current before the call's is again (the token's, stolen); an
 * exception being raised stays as it is. */
static void
leave_span(PyObject *token)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyContextVar_Reset(blog_span_var, token) < 0)
        PyErr_Clear();    /* (a sync call cannot change its caller's context) */
    Py_DECREF(token);
    PyErr_Restore(type, value, tb);
}

static PyObject *
traced_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TracedCall *self = (TracedCall *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *span = NULL, *token = NULL;
    int on = enabled(self);
    if (on < 0)
        return NULL;
    if (on == 2)
        goto slow;
    if (on == 1) {
        PyObject *vals[MAX_PARAMS], *shown[MAX_PARAMS + 3];
        int spans = self->spans && blog_correlation != CORR_OFF;
        int r = ready(self, spans);
        if (r > 0)
            r = bind(self, args, nargs, kwnames, vals);
        if (r > 0) {
            for (Py_ssize_t i = 0; i < self->nshown; i++)
                shown[i] = vals[self->shown_at[i]];
            r = spans ? push_span_call(self, shown, &span)
                      : push_call(self->local, self->key, self->call_sid, shown, self->nshown,
                                  ~0ULL);    /* every value shown by !r */
            for (Py_ssize_t i = 0; i < self->nparams; i++)
                Py_DECREF(vals[i]);
        }
        if (r < 0)
            return NULL;
        if (r == 0)    /* sources not registered yet, not bound here, or not pushed here */
            goto slow;
        if (span != NULL && (token = PyContextVar_Set(blog_span_var, span)) == NULL) {
            Py_DECREF(span);
            return NULL;
        }
    }
    long long start = perf_ns();
    PyObject *res = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (token != NULL)
        leave_span(token);
    /* The minimum in force when it ends decides, as in Python (the exception's severity
     * is its own). */
    res = res == NULL ? raised(self, start, span) : returned(self, start, res, span);
    Py_XDECREF(span);
    return res;
slow:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
traced_traverse(TracedCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tracer);
    Py_VISIT(self->logger);
    Py_VISIT(self->registry);
    Py_VISIT(self->local);
    Py_VISIT(self->names);
    Py_VISIT(self->defaults);
    Py_VISIT(self->required);
    Py_VISIT(self->live);
    Py_VISIT(self->fn);
    Py_VISIT(self->fallback);
    Py_VISIT(self->dict);
    return 0;
}

static int
traced_clear(TracedCall *self)
{
    Py_CLEAR(self->tracer);
    Py_CLEAR(self->logger);
    Py_CLEAR(self->registry);
    Py_CLEAR(self->local);
    Py_CLEAR(self->key);
    Py_CLEAR(self->names);
    Py_CLEAR(self->defaults);
    Py_CLEAR(self->required);
    Py_CLEAR(self->live);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->dict);
    return 0;
}

static void
traced_dealloc(TracedCall *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    traced_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A new reference to the plan's field `i`, checked to be of `type` (NULL: any). */
static PyObject *
plan_item(PyObject *plan, int i, PyTypeObject *type)
{
    PyObject *v = PyTuple_GET_ITEM(plan, i);
    if (type != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "TracedCall: plan field %d must be %s", i,
                     type->tp_name);
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

static PyObject *
traced_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *plan, *fn, *fallback;
    if (!PyArg_ParseTuple(args, "O!OO:TracedCall", &PyTuple_Type, &plan, &fn, &fallback))
        return NULL;
    if (PyTuple_GET_SIZE(plan) != PLAN_FIELDS)
        return PyErr_Format(PyExc_TypeError, "TracedCall: a plan of %d fields", PLAN_FIELDS);
    TracedCall *self = (TracedCall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = traced_vectorcall;
    self->call_sid = self->return_sid = self->call_span_sid = self->return_span_sid = -1;
    Py_INCREF(fn); self->fn = fn;
    Py_INCREF(fallback); self->fallback = fallback;
    self->tracer = plan_item(plan, PLAN_TRACER, NULL);
    self->logger = plan_item(plan, PLAN_LOGGER, NULL);
    self->registry = plan_item(plan, PLAN_REGISTRY, NULL);
    self->local = plan_item(plan, PLAN_LOCAL, NULL);
    self->names = plan_item(plan, PLAN_NAMES, &PyTuple_Type);
    self->defaults = plan_item(plan, PLAN_DEFAULTS, &PyTuple_Type);
    self->required = plan_item(plan, PLAN_REQUIRED, NULL);
    if (PyTuple_GET_ITEM(plan, PLAN_LIVE) != Py_None)
        self->live = plan_item(plan, PLAN_LIVE, &PyFunction_Type);
    PyObject *shown = plan_item(plan, PLAN_SHOWN_AT, &PyTuple_Type);
    if (self->names == NULL || self->defaults == NULL || shown == NULL
        || (self->live == NULL && PyTuple_GET_ITEM(plan, PLAN_LIVE) != Py_None))
        goto fail;
    self->nparams = PyTuple_GET_SIZE(self->names);
    self->nshown = PyTuple_GET_SIZE(shown);
    self->severity = PyLong_AsLong(PyTuple_GET_ITEM(plan, PLAN_SEVERITY));
    self->positional = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, PLAN_POSITIONAL));
    self->posonly = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, PLAN_POSONLY));
    self->result = PyObject_IsTrue(PyTuple_GET_ITEM(plan, PLAN_RESULT));
    self->spans = PyObject_IsTrue(PyTuple_GET_ITEM(plan, PLAN_SPANS));
    if (PyErr_Occurred())
        goto fail;
    if (self->nparams > MAX_PARAMS || PyTuple_GET_SIZE(self->defaults) != self->nparams
            || self->nshown > self->nparams) {
        PyErr_SetString(PyExc_ValueError, "TracedCall: parameters do not fit the plan");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nshown; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(shown, i));
        if (at < 0 || at >= self->nparams) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "TracedCall: a shown index out of range");
            goto fail;
        }
        self->shown_at[i] = at;
    }
    Py_DECREF(shown);
    self->key = blog_thread_key(self->local);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
fail:
    Py_XDECREF(shown);
    Py_DECREF(self);
    return NULL;
}

static PyObject *
traced_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);   /* a decorated method binds like a function */
}

/* Pickled by name, as the function it stands for (a module's attribute). */
static PyObject *
traced_reduce(PyObject *self, PyObject *Py_UNUSED(unused))
{
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef traced_methods[] = {
    {"__reduce__", traced_reduce, METH_NOARGS, "pickled by its qualified name"},
    {NULL}
};

static PyGetSetDef traced_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL}
};

static PyTypeObject TracedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blog._speedups.TracedCall",
    .tp_basicsize = sizeof(TracedCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
              | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "TracedCall(plan, fn, fallback): a plain @blog.traced function with a C fast "
              "path (plan: a blog.integrations.traced.FastPlan).",
    .tp_new = traced_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TracedCall, vectorcall),
    .tp_dictoffset = offsetof(TracedCall, dict),
    .tp_weaklistoffset = offsetof(TracedCall, weakrefs),
    .tp_descr_get = traced_descr_get,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_getset = traced_getset,
    .tp_methods = traced_methods,
    .tp_traverse = (traverseproc)traced_traverse,
    .tp_clear = (inquiry)traced_clear,
    .tp_dealloc = (destructor)traced_dealloc,
};

int
blog_traced_init(PyObject *m)
{
    if ((str_threshold = PyUnicode_InternFromString("threshold")) == NULL
            || (str_backtrace = PyUnicode_InternFromString("backtrace")) == NULL
            || (str_fast_sids = PyUnicode_InternFromString("fast_sids")) == NULL
            || (str_returned = PyUnicode_InternFromString("returned")) == NULL
            || (str_raised = PyUnicode_InternFromString("raised")) == NULL)
        return -1;
    return blog_add_type(m, &TracedCallType, "TracedCall");
}
