/* blog/_correlation.c: correlation (its twin blog/correlation.py): the trace and span ids
 * of a log call, from the innermost of the current @blog.traced call (blog.correlation's
 * SPAN) and the current OpenTelemetry span; and a traced call's new span.
 *
 * The OpenTelemetry span is read here, without a Python call, where blog.correlation found
 * OpenTelemetry's context variable and its key (CORR_ARMED): the variable's Context (a
 * dict), and its current span in it. A span's ids are read once by the Python twin
 * (ids_of: the public API) and kept with the span (a few recent ones, held); a call in the
 * same span reads them from here. Where OpenTelemetry is installed but not yet imported
 * (CORR_WAITING), a call looks for its module in sys.modules and, found, has the Python
 * twin arm it (arm); where its context is not the one known, get_current_span() is called
 * (CORR_PUBLIC). Turned off (CORR_OFF), a call tests one int.
 */
#include "_extension.h"

int blog_correlation = CORR_OFF;
PyObject *blog_span_var = NULL;
int blog_spans_used = 0;
Py_ssize_t blog_modules_seen = -1;
PyObject *blog_otel_var = NULL;

/* What blog.correlation handed over (use_correlation, use_otel). */
static PyObject *span_type, *ids_type, *id_names, *ids_of, *arm, *watched;
static PyObject *otel_key, *current_span;

/* The ids of the last spans read, by the span's address (the entry holds the span, so the
 * address stays its own). */
#define IDS_CACHE 8
static struct { PyObject *span, *ids; } cache[IDS_CACHE];

/* The random ids' generator (splitmix64), seeded by blog.correlation at start and in a
 * forked child (seed_ids). */
static unsigned long long seed;

static unsigned long long
next_random(void)
{
    unsigned long long z = (seed += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A random id of `words` 64-bit words as lowercase hex, never all zero (W3C: invalid). */
static PyObject *
random_id(int words)
{
    unsigned long long w[2] = {0, 0};
    while ((w[0] | w[1]) == 0)
        for (int i = 0; i < words; i++)
            w[i] = next_random();
    PyObject *s = PyUnicode_New(16 * words, 127);
    if (s == NULL)
        return NULL;
    Py_UCS1 *p = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < words; i++)
        for (int j = 15; j >= 0; j--)
            *p++ = (Py_UCS1)"0123456789abcdef"[(w[i] >> (4 * j)) & 0xF];
    return s;
}

static void
forget_spans(void)
{
    for (int i = 0; i < IDS_CACHE; i++) {
        Py_CLEAR(cache[i].span);
        Py_CLEAR(cache[i].ids);
    }
}

/* The current OpenTelemetry span (a new reference), or NULL: none (no error set), or an
 * error. */
static PyObject *
otel_span(void)
{
    if (blog_correlation == CORR_ARMED) {
        PyObject *ctx, *span = NULL;
        if (PyContextVar_Get(blog_otel_var, NULL, &ctx) < 0 || ctx == NULL)
            return NULL;
        if (PyDict_Check(ctx) && PyDict_GET_SIZE(ctx) > 0)
            span = Py_XNewRef(PyDict_GetItemWithError(ctx, otel_key));
        Py_DECREF(ctx);
        return span;
    }
    if (blog_correlation == CORR_PUBLIC)
        return PyObject_CallNoArgs(current_span);
    if (blog_correlation != CORR_WAITING)
        return NULL;
    PyObject *modules = PyImport_GetModuleDict();
    Py_ssize_t size = PyDict_GET_SIZE(modules);
    if (size == blog_modules_seen)    /* nothing imported since the last look */
        return NULL;
    if (PyDict_GetItemWithError(modules, watched) == NULL) {
        if (!PyErr_Occurred())
            blog_modules_seen = size;
        return NULL;
    }
    /* (Found, it is looked for again at each call until arm sees it imported whole.) */
    PyObject *r = PyObject_CallNoArgs(arm);   /* sets the mode (use_otel) once it may */
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    return blog_correlation == CORR_WAITING ? NULL : otel_span();
}

/* The ids (an Ids, or None: not a valid span) of the OpenTelemetry span `span`, a new
 * reference; NULL on error. */
static PyObject *
span_ids(PyObject *span)
{
    size_t h = (size_t)span;
    int slot = (int)(((h >> 4) ^ (h >> 10)) & (IDS_CACHE - 1));
    if (cache[slot].span == span)
        return Py_NewRef(cache[slot].ids);
    PyObject *ids = PyObject_CallOneArg(ids_of, span);
    if (ids == NULL)
        return NULL;
    /* Both set before either old one goes: its finalizer may log, and read this slot. */
    PyObject *old_span = cache[slot].span, *old_ids = cache[slot].ids;
    cache[slot].span = Py_NewRef(span);
    cache[slot].ids = Py_NewRef(ids);
    Py_XDECREF(old_span);
    Py_XDECREF(old_ids);
    return ids;
}

/* The ids of the innermost span now (an Ids, or None), a new reference, and in *otel the
 * OpenTelemetry span (a new reference, or NULL: none); NULL on error. A traced call is the
 * innermost while the OpenTelemetry span is the one current when it began. */
static PyObject *
current(PyObject **otel)
{
    PyObject *t = NULL, *ids = NULL;
    *otel = NULL;
    if (blog_spans_used && PyContextVar_Get(blog_span_var, NULL, &t) < 0)
        return NULL;
    if (t != NULL && !(PyTuple_Check(t) && PyTuple_GET_SIZE(t) == SPAN_FIELDS))
        Py_CLEAR(t);    /* None: no traced call */
    PyObject *o = otel_span();
    if (o == NULL && PyErr_Occurred()) {
        Py_XDECREF(t);
        return NULL;
    }
    if (t != NULL && PyTuple_GET_ITEM(t, SPAN_OTEL) == (o != NULL ? o : Py_None))
        ids = Py_NewRef(PyTuple_GET_ITEM(t, SPAN_IDS));
    else {
        if (o != NULL && (ids = span_ids(o)) == NULL) {
            Py_XDECREF(t);
            Py_DECREF(o);
            return NULL;
        }
        if ((ids == NULL || ids == Py_None) && t != NULL)
            Py_XSETREF(ids, Py_NewRef(PyTuple_GET_ITEM(t, SPAN_IDS)));
        if (ids == NULL)
            ids = Py_NewRef(Py_None);
    }
    Py_XDECREF(t);
    *otel = o;
    return ids;
}

PyObject *
blog_ids_now(void)
{
    if (blog_correlation == CORR_OFF)
        return Py_NewRef(Py_None);
    PyObject *o, *ids = current(&o);
    Py_XDECREF(o);
    return ids;
}

/* An instance of the NamedTuple `type` of the `n` objects `items` (references taken), made
 * as tuple.__new__ makes it, without its Python __new__ or an argument tuple. */
static PyObject *
record(PyObject *type, PyObject *const *items, Py_ssize_t n)
{
#if PY_VERSION_HEX < 0x030E0000
    PyObject *r = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (r == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(r, i, Py_NewRef(items[i]));
    return r;
#else   /* (a tuple caches its hash from 3.14 on: tuple.__new__ sets it up) */
    PyObject *t = PyTuple_New(n), *args = NULL, *r = NULL;
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(items[i]));
    if ((args = PyTuple_Pack(1, t)) != NULL)
        r = PyTuple_Type.tp_new((PyTypeObject *)type, args, NULL);
    Py_XDECREF(args);
    Py_DECREF(t);
    return r;
#endif
}

PyObject *
blog_new_span(void)
{
    blog_spans_used = 1;
    PyObject *o, *trace = NULL, *parent, *id = NULL, *ids = NULL, *span = NULL;
    PyObject *now = current(&o);
    if (now == NULL)
        return NULL;
    PyObject *of = now != Py_None && PyTuple_Check(now) && PyTuple_GET_SIZE(now) == IDS_FIELDS
        ? PyTuple_GET_ITEM(now, IDS_VALUES) : NULL;
    if (of != NULL && PyTuple_Check(of) && PyTuple_GET_SIZE(of) == 2) {
        /* a child: its trace, and its parent's span id */
        trace = Py_NewRef(PyTuple_GET_ITEM(of, 0));
        parent = Py_NewRef(PyTuple_GET_ITEM(of, 1));
    }
    else {                    /* a root: a new trace */
        trace = random_id(2);
        parent = Py_NewRef(Py_None);
    }
    PyObject *values = NULL;
    if (trace != NULL && (id = random_id(1)) != NULL)
        values = PyTuple_Pack(2, trace, id);
    if (values != NULL)
        ids = record(ids_type, (PyObject *[]){id_names, values}, IDS_FIELDS);
    if (ids != NULL)
        span = record(span_type, (PyObject *[]){ids, parent, o != NULL ? o : Py_None},
                      SPAN_FIELDS);
    Py_XDECREF(ids);
    Py_XDECREF(values);
    Py_XDECREF(id);
    Py_XDECREF(trace);
    Py_DECREF(parent);
    Py_DECREF(now);
    Py_XDECREF(o);
    return span;
}

PyObject *
blog_use_correlation(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyContextVar_CheckExact(args[0]) || !PyType_Check(args[1])
        || !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type) || !PyType_Check(args[2])
        || !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type)
        || !PyTuple_CheckExact(args[3]) || PyTuple_GET_SIZE(args[3]) != 2
        || !PyCallable_Check(args[4]) || !PyCallable_Check(args[5])
        || !PyBytes_Check(args[6]) || PyBytes_GET_SIZE(args[6]) < 8) {
        PyErr_SetString(PyExc_TypeError, "use_correlation(span_var, Span, Ids, names, ids_of, "
                                         "arm, seed: 8 bytes)");
        return NULL;
    }
    PyObject *name = PyUnicode_InternFromString("opentelemetry.trace.propagation");
    if (name == NULL)
        return NULL;
    Py_XSETREF(watched, name);
    Py_XSETREF(blog_span_var, Py_NewRef(args[0]));
    Py_XSETREF(span_type, Py_NewRef(args[1]));
    Py_XSETREF(ids_type, Py_NewRef(args[2]));
    Py_XSETREF(id_names, Py_NewRef(args[3]));
    Py_XSETREF(ids_of, Py_NewRef(args[4]));
    Py_XSETREF(arm, Py_NewRef(args[5]));
    memcpy(&seed, PyBytes_AS_STRING(args[6]), sizeof(seed));
    return Py_NewRef(Py_None);
}

PyObject *
blog_use_otel(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long mode = nargs == 4 ? PyLong_AsLong(args[0]) : -1;
    if (mode == -1 && PyErr_Occurred())
        return NULL;
    if (mode < CORR_OFF || mode > CORR_PUBLIC || blog_span_var == NULL
        || (mode == CORR_ARMED && !(PyContextVar_CheckExact(args[1])
                                    && PyUnicode_CheckExact(args[2])))
        || (mode == CORR_PUBLIC && !PyCallable_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "use_otel(mode, var, key, current_span), after "
                                         "use_correlation");
        return NULL;
    }
    /* Off while the objects change hands: letting go of the old ones may run code that
     * logs. */
    PyObject *old[3] = {blog_otel_var, otel_key, current_span};
    blog_correlation = CORR_OFF;
    blog_otel_var = mode == CORR_ARMED ? Py_NewRef(args[1]) : NULL;
    otel_key = mode == CORR_ARMED ? Py_NewRef(args[2]) : NULL;
    current_span = mode == CORR_PUBLIC ? Py_NewRef(args[3]) : NULL;
    forget_spans();
    blog_correlation = (int)mode;
    blog_modules_seen = -1;
    for (int i = 0; i < 3; i++)
        Py_XDECREF(old[i]);
    return Py_NewRef(Py_None);
}

PyObject *
blog_use_spans(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    blog_spans_used = 1;
    return Py_NewRef(Py_None);
}

PyObject *
blog_seed_ids(PyObject *Py_UNUSED(module), PyObject *arg)
{
    if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) < 8) {
        PyErr_SetString(PyExc_TypeError, "seed_ids(seed: 8 bytes)");
        return NULL;
    }
    memcpy(&seed, PyBytes_AS_STRING(arg), sizeof(seed));
    return Py_NewRef(Py_None);
}
