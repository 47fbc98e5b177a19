/* blog/pipeline/_parts.c: event_bounds, where each event of a channel's bytes ends and
 * its clock; its twin is blog/pipeline/parts.py's walk, which reads the same bytes with
 * msgpack-python. Used only for a take cut between the files of a size-rotated set.
 */
#include "../_extension.h"

#include <stdint.h>

#include "mpread.h"

/* The msgpack int at *pp (a clock delta), advancing *pp: 0, or -1 if it is not one. */
static int
read_delta(const unsigned char **pp, const unsigned char *end, long long *out)
{
    const unsigned char *p = *pp;
    if (p >= end)
        return -1;
    unsigned char b = *p++;
    int n;
    int sign = 0;
    if (b <= 0x7f) { *out = b; *pp = p; return 0; }
    if (b >= 0xe0) { *out = (signed char)b; *pp = p; return 0; }
    switch (b) {
    case 0xcc: n = 1; break;
    case 0xcd: n = 2; break;
    case 0xce: n = 4; break;
    case 0xcf: n = 8; break;
    case 0xd0: n = 1; sign = 1; break;
    case 0xd1: n = 2; sign = 1; break;
    case 0xd2: n = 4; sign = 1; break;
    case 0xd3: n = 8; sign = 1; break;
    default: return -1;
    }
    if (end - p < n)
        return -1;
    unsigned long long u = be(p, n);
    if (sign) {
        int shift = 64 - 8 * n;
        *out = shift ? (long long)(u << shift) >> shift : (long long)u;
    }
    else {
        if (u > (unsigned long long)LLONG_MAX)
            return -1;
        *out = (long long)u;
    }
    *pp = p + n;
    return 0;
}

/* event_bounds(data, count, base) -> (ends, clocks): where each of the ``count`` events
   of the channel bytes ``data`` ends, and its clock (deltas from ``base``). */
PyObject *
blog_event_bounds(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "event_bounds(data, count, base)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    long long clock = PyLong_AsLongLong(args[2]);
    if (clock == -1 && PyErr_Occurred())
        return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "event_bounds: a negative count");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *ends = PyList_New(count), *clocks = PyList_New(count), *result = NULL;
    const unsigned char *start = view.buf, *p = start, *end = p + view.len;
    int ok = ends != NULL && clocks != NULL;
    for (Py_ssize_t i = 0; i < count && ok; i++) {
        /* [source_id, delta, args(, texts)] */
        if (p >= end || (*p & 0xf0) != 0x90 || (*p & 0x0f) < 2) { ok = 0; break; }
        unsigned nitems = *p & 0x0f;
        const unsigned char *q = skip_value(p + 1, end, 0);
        long long delta;
        if (q == NULL || read_delta(&q, end, &delta) < 0
                || __builtin_add_overflow(clock, delta, &clock)) { ok = 0; break; }
        for (unsigned k = 2; k < nitems && q; k++)
            q = skip_value(q, end, 0);
        if (q == NULL) { ok = 0; break; }
        p = q;
        PyObject *e = PyLong_FromSsize_t(p - start), *c = PyLong_FromLongLong(clock);
        if (e == NULL || c == NULL) {
            Py_XDECREF(e);
            Py_XDECREF(c);
            ok = -1;
            break;
        }
        PyList_SET_ITEM(ends, i, e);
        PyList_SET_ITEM(clocks, i, c);
    }
    PyBuffer_Release(&view);
    if (ok == 1)
        result = PyTuple_Pack(2, ends, clocks);
    else if (ok == 0)
        PyErr_SetString(PyExc_ValueError, "event_bounds: not a channel's events");
    Py_XDECREF(ends);
    Py_XDECREF(clocks);
    return result;
}
