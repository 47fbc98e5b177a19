/* blog._speedups: the hot path of a log call, in C; this file is the module (its
 * functions and types), blog/_extension.h says which file does what. It calls the other
 * files; none calls it.
 *
 * The pure-Python code is the reference: blog/pipeline/channel.py (PyChannel),
 * blog/pipeline/logger.py (_make_method) and blog/integrations/event.py (the wrapper).
 * This extension does the same, faster, and whenever it meets anything but the common case
 * it calls the Python function, which starts over. The common case: the call
 * site is cached, no keyword fields, every argument is a plain scalar, and
 * the thread's channel is below its limit. Then a call is: find the site by
 * the caller's instruction offset, read the wall clock, encode
 * [sid, clock delta, [args...]] as msgpack straight into the thread's
 * channel buffer. No Python object is allocated.
 *
 * Every function here runs without releasing the GIL and without calling
 * Python code between reading and updating a channel, so a push, a mark and
 * a take never interleave.
 */
#include "_extension.h"

/* ---- module ------------------------------------------------------------ */

/* noop(*args, **kwargs) -> None: a disabled level method (shown as a level method's call:
 * it takes anything, and returns at once). */
static PyObject *
noop(PyObject *Py_UNUSED(module), PyObject *const *Py_UNUSED(args),
     Py_ssize_t Py_UNUSED(nargs), PyObject *Py_UNUSED(kwnames))
{
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"use_registries", (PyCFunction)(void (*)(void))blog_use_registries, METH_FASTCALL,
     "use_registries(enum_types, record_types): the per-class facts the Python path records"},
    {"forget_thread_channel", (PyCFunction)blog_forget_thread_channel, METH_O,
     "forget_thread_channel(local): the calling thread forgets its channel of that session "
     "(a forked child)"},
    {"encode_values", (PyCFunction)(void (*)(void))blog_encode_values, METH_FASTCALL,
     "encode_values(values, shown_by_repr=0) -> bytes | None: the values as the C call "
     "paths encode them"},
    {"use_context", (PyCFunction)(void (*)(void))blog_use_context, METH_FASTCALL,
     "use_context(var, merge) -> None: the call paths look at this ContextVar from now on"},
    {"use_correlation", (PyCFunction)(void (*)(void))blog_use_correlation, METH_FASTCALL,
     "use_correlation(span_var, Span, Ids, names, ids_of, arm, seed) -> None: what the "
     "call paths read of traced calls' spans"},
    {"use_otel", (PyCFunction)(void (*)(void))blog_use_otel, METH_FASTCALL,
     "use_otel(mode, var, key, current_span) -> None: how the call paths read the current "
     "OpenTelemetry span"},
    {"use_spans", (PyCFunction)blog_use_spans, METH_NOARGS,
     "use_spans() -> None: the call paths read the current traced call's span from now on"},
    {"seed_ids", (PyCFunction)blog_seed_ids, METH_O,
     "seed_ids(seed) -> None: the random span ids from this seed (a forked child)"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop($module, fmt, /, *args, **fields)\n--\n\n"
     "A level method below the minimum severity: returns at once."},
    {"tally", (PyCFunction)(void (*)(void))blog_tally, METH_FASTCALL,
     "tally(data, count, counts) -> None: count a channel's events per source id"},
    {"event_bounds", (PyCFunction)(void (*)(void))blog_event_bounds, METH_FASTCALL,
     "event_bounds(data, count, base) -> (ends, clocks): where a channel's events end"},
    {NULL}
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "blog._speedups",
    .m_doc = "C fast path of blog's log calls.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void);   /* declared: the one function exported */

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (blog_encode_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (blog_channel_init(m) < 0 || blog_logger_init(m) < 0 || blog_event_init(m) < 0
        || blog_traced_init(m) < 0 || blog_stdlib_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
