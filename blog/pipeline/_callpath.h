/* blog/pipeline/_callpath.h: the push of a log call's values into the thread's channel
 * (_channel.c, beside it), shared by the call paths (_logger.c beside it,
 * blog/integrations/_event.c and _traced.c): above the channel, which it calls, and
 * included by no file below them. */
#ifndef BLOG_CALLPATH_H
#define BLOG_CALLPATH_H

#include "../_extension.h"

/* A call's values, pushed now into the calling thread's channel: plain scalars straight
 * in, else the values beyond them. 1 pushed; 0 not here (no channel for this thread yet,
 * values the channel does not take: the Python path decides); -1 error. */
static inline int
push_values_now(PyObject *local, PyObject *key, long long sid, PyObject *const *args,
                Py_ssize_t n, unsigned long long shown_by_repr)
{
    Channel *ch = blog_thread_channel(local, key);
    if (ch == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int r = blog_push_plain(ch, sid, args, n, LLONG_MIN);
    if (r == 0)
        r = blog_push_rich(ch, sid, args, n, shown_by_repr);
    Py_DECREF(ch);
    return r;
}

/* The same for a call with no fields in context; 0 where there are some (the caller's
 * to add: the Python path does). */
static inline int
push_call(PyObject *local, PyObject *key, long long sid, PyObject *const *args, Py_ssize_t n,
          unsigned long long shown_by_repr)
{
    int ctx = in_context();
    if (ctx != 0)
        return ctx < 0 ? -1 : 0;
    return push_values_now(local, key, sid, args, n, shown_by_repr);
}

#endif
