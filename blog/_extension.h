/* blog/_extension.h: what the C files of blog's extension (blog._speedups) share.
 *
 * The extension is the hot path of a log call; the pure-Python code is the reference,
 * and each C file sits beside the module it mirrors, named after it:
 *   blog/_correlation.c          blog/correlation.py: the trace and span ids of a call,
 *                                a traced call's new span
 *   blog/_contextfields.c        blog/contextfields.py: the fields in context of a call
 *   blogformat/_valueencoding.c  blogformat/valueencoding.py: argument values as msgpack
 *                                (docs/format.md 7)
 *   blog/pipeline/_channel.c     blog/pipeline/channel.py: a thread's Channel, the pushes
 *   blog/pipeline/_summary.c     blog/pipeline/summary.py: tally, a channel's events
 *                                counted per source
 *   blog/pipeline/_parts.c       blog/pipeline/parts.py: event_bounds, where a take may be
 *                                cut
 *   blog/pipeline/_callpath.h    the push of a call's values, shared by the call paths
 *   blog/pipeline/_logger.c      blog/pipeline/logger.py: Method, a logger's level
 *                                methods, by call site
 *   blog/integrations/_event.c   blog/integrations/event.py: EventCall, a function
 *                                decorated with @blog.event
 *   blog/integrations/_traced.c  blog/integrations/traced.py: TracedCall, a plain function
 *                                with @blog.traced
 *   blog/_stdlib.c               blog/stdlib.py: RecordHandler, BlogHandler.handle's common
 *                                record; blog/stdlibcalls.py: LoggingCall,
 *                                logging.Logger._log without a record
 *   blog/_speedups.c             blog/accel.py: the module, its functions and types
 * The buffer and msgpack writing are blogformat's (blogformat/buf.h, blogformat/mpwrite.h),
 * shared with the reader's extension. What one file gives another is declared here, its
 * name prefixed blog_; a file calls only those listed before it (tests/test_c_sources.py).
 */
#ifndef BLOG_SPEEDUPS_H
#define BLOG_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>

#include "mpwrite.h"

/* Hidden from outside the shared object, what follows is called directly (no PLT), and
 * the compiler may inline it within its own file, as it did when it was static. */
#pragma GCC visibility push(hidden)

/* ---- _channel.c ---------------------------------------------------------- */

typedef struct Channel Channel;

/* The calling thread's Channel for a session (a new reference), or NULL without an error
 * if the thread has no C channel yet (the Python path makes one). */
Channel *blog_thread_channel(PyObject *local, PyObject *key);
/* The thread state dict's key of a session's local: "blog.channel:<id>". */
PyObject *blog_thread_key(PyObject *local);
/* [sid, delta, [args...]] with plain scalar args at `clock` (LLONG_MIN: now). 1 pushed,
 * 0 not here (not plain, or past the limit: the Python path decides), -1 error. */
int blog_push_plain(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
                    long long clock);
/* The values beyond the plain scalars, now (bit i of shown_by_repr: a !r placeholder shows
 * value i); 0 if all are plain (refused for its size: the Python path decides). As above. */
int blog_push_rich(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
                   unsigned long long shown_by_repr);

PyObject *blog_forget_thread_channel(PyObject *module, PyObject *local);
int blog_channel_init(PyObject *m);

/* ---- blogformat/_valueencoding.c ------------------------------------------ */

/* An event's values: the array of them. 1 done, 0 not here (the Python path encodes
 * them), -1 error; on 0 and -1 what was written is garbage. */
int blog_put_args(Buf *b, PyObject *const *items, Py_ssize_t n,
                  unsigned long long shown_by_repr);
PyObject *blog_encode_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *blog_use_registries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
int blog_encode_init(void);

/* ---- _logger.c, _event.c, _traced.c, _stdlib.c, _summary.c, _parts.c ---------- */

int blog_logger_init(PyObject *m);
int blog_event_init(PyObject *m);
int blog_traced_init(PyObject *m);
int blog_stdlib_init(PyObject *m);
PyObject *blog_tally(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *blog_event_bounds(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Ready a type and add it to the module under `name`: 0, or -1 with an error. */
static inline int
blog_add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0)
        return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

/* ---- _correlation.c --------------------------------------------------------- */

/* What correlation does now (blog.correlation's OFF, WAITING, ARMED, PUBLIC): nothing;
 * look for OpenTelemetry's import; read its context variable; call its get_current_span. */
enum { CORR_OFF, CORR_WAITING, CORR_ARMED, CORR_PUBLIC };
extern int blog_correlation;
/* blog.correlation.SPAN: the current @blog.traced call's span; NULL before use_correlation. */
extern PyObject *blog_span_var;

/* A traced call's span was made (blog.correlation.SPAN may be set): until then a call does
 * not read SPAN. */
extern int blog_spans_used;
/* CORR_WAITING: the size of sys.modules when a call last found no OpenTelemetry in it (a
 * module imported since has made it grow). CORR_ARMED: OpenTelemetry's context variable. */
extern Py_ssize_t blog_modules_seen;
extern PyObject *blog_otel_var;

/* 0 if a call made now surely carries no span's ids, 1 if it may (blog_ids_now says): what
 * a call outside any span pays, inline. */
static inline int
may_have_ids(void)
{
    if (blog_correlation == CORR_OFF)
        return 0;
    if (blog_spans_used) {      /* a traced call's span, current? */
        PyObject *t;
        if (PyContextVar_Get(blog_span_var, NULL, &t) < 0) {
            PyErr_Clear();   /* (raised again where blog_ids_now reads it) */
            return 1;
        }
        int current = t != NULL && t != Py_None;
        Py_XDECREF(t);
        if (current)
            return 1;
    }
    if (blog_correlation == CORR_WAITING)
        return PyDict_GET_SIZE(PyImport_GetModuleDict()) != blog_modules_seen;
    if (blog_correlation != CORR_ARMED)
        return 1;
    PyObject *ctx;      /* OpenTelemetry's Context: a dict, empty where nothing is set */
    if (PyContextVar_Get(blog_otel_var, NULL, &ctx) < 0) {
        PyErr_Clear();   /* (raised again where blog_ids_now reads it) */
        return 1;
    }
    int r = ctx != NULL && !(PyDict_Check(ctx) && PyDict_GET_SIZE(ctx) == 0);
    Py_XDECREF(ctx);
    return r;
}

/* The fields of blog.correlation.Ids (as ContextFields': names, values) and of its Span,
 * read by position (tests/test_c_sources.py checks that the two agree). */
enum { IDS_NAMES, IDS_VALUES, IDS_FIELDS };
enum { SPAN_IDS, SPAN_PARENT, SPAN_OTEL, SPAN_FIELDS };

/* The ids a call made now carries (an Ids, or None: outside a span): a new reference;
 * NULL on error. */
PyObject *blog_ids_now(void);
/* A Span for a traced call beginning now, the innermost span's child or a new trace's root
 * (correlation on): a new reference; NULL on error. */
PyObject *blog_new_span(void);
PyObject *blog_use_correlation(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *blog_use_otel(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *blog_seed_ids(PyObject *module, PyObject *seed);
/* use_spans(): a traced call's span was made by the Python path (SPAN may be set). */
PyObject *blog_use_spans(PyObject *module, PyObject *arg);

/* ---- _contextfields.c ------------------------------------------------------ */

/* use_context(var, merge): the call paths look at this ContextVar from now on. */
PyObject *blog_use_context(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* blog.context.FIELDS once blog.context or blog.bind was first used, else NULL: until
 * then the call paths do not look at it (an application without context pays nothing). */
extern PyObject *blog_context_var;

/* The fields in context now (a ContextFields, or the span's Ids alone, or None): a new
 * reference; NULL on error. */
PyObject *blog_fields_now(void);

/* 1 if fields are in context now, blog.context's or a span's ids (the call takes the
 * Python path, which adds them), 0 if none, -1 on error. */
static inline int
in_context(void)
{
    if (blog_context_var == NULL && !may_have_ids())
        return 0;
    PyObject *v = blog_fields_now();
    if (v == NULL)
        return -1;
    int r = v != Py_None;
    Py_DECREF(v);
    return r;
}

/* The same for blog.context's fields alone (a traced call's own events carry its own
 * ids). */
static inline int
in_blog_context(void)
{
    if (blog_context_var == NULL)
        return 0;
    PyObject *v;
    if (PyContextVar_Get(blog_context_var, Py_None, &v) < 0)
        return -1;
    int r = v != Py_None;
    Py_DECREF(v);
    return r;
}

#pragma GCC visibility pop

#endif
