/* blog/_contextfields.c: context fields (its twin blog/contextfields.py): the fields in
 * context of a log call now, blog.context's then the span's ids (_correlation.c).
 *
 * blog.contextfields hands its ContextVar over on first use (use_context); until then
 * the call paths never look at it, so an application without context pays nothing.
 */
#include "_extension.h"

PyObject *blog_context_var = NULL;
static PyObject *merge;   /* contextfields.merged_with(fields, ids) */

/* The fields and ids merged last, by the two objects' addresses (held: they stay theirs).
 * A context's fields stay one object while it is in force, a span's ids too. */
#define MERGED_CACHE 8
static struct { PyObject *fields, *ids, *merged; } cache[MERGED_CACHE];

PyObject *
blog_use_context(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyContextVar_CheckExact(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "use_context(var: ContextVar, merge)");
        return NULL;
    }
    Py_XSETREF(merge, Py_NewRef(args[1]));
    Py_XSETREF(blog_context_var, Py_NewRef(args[0]));
    Py_RETURN_NONE;
}

/* `fields` followed by the `ids` they do not name (both held by the caller): a new
 * reference, or NULL on error. */
static PyObject *
merged(PyObject *fields, PyObject *ids)
{
    size_t h = (size_t)fields ^ ((size_t)ids >> 3);
    int slot = (int)(((h >> 4) ^ (h >> 11)) & (MERGED_CACHE - 1));
    if (cache[slot].fields == fields && cache[slot].ids == ids)
        return Py_NewRef(cache[slot].merged);
    PyObject *m = PyObject_CallFunctionObjArgs(merge, fields, ids, NULL);
    if (m == NULL)
        return NULL;
    /* All set before any old one goes: its finalizer may log, and read this slot. */
    PyObject *old[3] = {cache[slot].fields, cache[slot].ids, cache[slot].merged};
    cache[slot].fields = Py_NewRef(fields);
    cache[slot].ids = Py_NewRef(ids);
    cache[slot].merged = Py_NewRef(m);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(old[i]);
    return m;
}

PyObject *
blog_fields_now(void)
{
    PyObject *fields = NULL;
    if (blog_context_var != NULL && PyContextVar_Get(blog_context_var, Py_None, &fields) < 0)
        return NULL;
    if (fields == NULL)
        fields = Py_NewRef(Py_None);
    if (blog_correlation == CORR_OFF)
        return fields;
    PyObject *ids = blog_ids_now();
    if (ids == NULL) {
        Py_DECREF(fields);
        return NULL;
    }
    if (ids == Py_None) {
        Py_DECREF(ids);
        return fields;
    }
    if (fields == Py_None) {
        Py_DECREF(fields);
        return ids;
    }
    PyObject *m = merge != NULL ? merged(fields, ids) : Py_NewRef(fields);
    Py_DECREF(ids);
    Py_DECREF(fields);
    return m;
}
