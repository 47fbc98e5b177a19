/* blog/pipeline/_summary.c: tally, the events of a channel's bytes counted per source;
 * its twin is blog/pipeline/summary.py's tally, which reads the same bytes with
 * msgpack-python.
 */
#include "../_extension.h"

#include <stdint.h>
#include <string.h>

#include "mpread.h"

static int
add_count(PyObject *counts, long id, Py_ssize_t n)
{
    PyObject *key = PyLong_FromLong(id);
    if (key == NULL)
        return -1;
    PyObject *old = PyDict_GetItemWithError(counts, key);
    if (old == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    Py_ssize_t have = old ? PyLong_AsSsize_t(old) : 0;
    if (have == -1 && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *val = PyLong_FromSsize_t(have + n);
    int rc = val ? PyDict_SetItem(counts, key, val) : -1;
    Py_XDECREF(val);
    Py_DECREF(key);
    return rc;
}

/* tally(data, count, counts) -> None: adds each event's source id of the channel
   bytes ``data`` (``count`` events) to the dict ``counts`` (id -> events). */
PyObject *
blog_tally(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    if (nargs != 3 || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "tally(data, count, counts: dict)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    PyObject *counts = args[2];
    /* Most ids are small: counted in an array, added to the dict once at the end. */
    enum { SMALL = 1024 };
    Py_ssize_t small[SMALL];
    memset(small, 0, sizeof(small));
    int ok = 1;
    for (Py_ssize_t i = 0; i < count && ok; i++) {
        /* [source_id, delta, args(, texts)]: source ids are positive fixints or uint8..32 */
        if (p >= end || (*p & 0xf0) != 0x90) { ok = 0; break; }
        unsigned nitems = *p & 0x0f;
        const unsigned char *q = p + 1;
        long id;
        if (q < end && *q <= 0x7f) { id = *q; q += 1; }
        else if (q + 2 <= end && *q == 0xcc) { id = q[1]; q += 2; }
        else if (q + 3 <= end && *q == 0xcd) { id = q[1] << 8 | q[2]; q += 3; }
        else if (q + 5 <= end && *q == 0xce) {
            id = (long)((uint32_t)q[1] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 8 | q[4]);
            q += 5;
        }
        else { ok = 0; break; }
        for (unsigned k = 1; k < nitems && q; k++)
            q = skip_value(q, end, 0);
        if (q == NULL) { ok = 0; break; }
        p = q;
        if (id < SMALL)
            small[id]++;
        else if (add_count(counts, id, 1) < 0)
            ok = -1;
    }
    for (long id = 0; ok == 1 && id < SMALL; id++)
        if (small[id] && add_count(counts, id, small[id]) < 0)
            ok = -1;
    PyBuffer_Release(&view);
    if (ok == -1)
        return NULL;
    if (ok == 0) {
        PyErr_SetString(PyExc_ValueError, "tally: not a channel's events");
        return NULL;
    }
    Py_RETURN_NONE;
}
