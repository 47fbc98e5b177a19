/* blog/_callpath.h: the push of a log call's values, shared by the call paths (_logger.c,
 * _event.c): above the channel, which it calls, and included by no file below them. */
#ifndef BLOG_CALLPATH_H
#define BLOG_CALLPATH_H

#include "_extension.h"

/* The call paths' push, now: plain scalars straight into the channel, else the values
 * beyond them: 1 pushed, 0 not here (the Python path decides), -1 error. */
static inline int
push_call(Channel *self, long long sid, PyObject *const *args, Py_ssize_t n,
          unsigned long long shown_by_repr)
{
    int r = blog_push_plain(self, sid, args, n, LLONG_MIN);
    if (r != 0)
        return r;
    return blog_push_rich(self, sid, args, n, shown_by_repr);
}

#endif
