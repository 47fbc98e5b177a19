/* blog/_contextfields.c: context fields (its twin blog/contextfields.py): whether a log
 * call has fields in context now.
 *
 * blog.contextfields hands its ContextVar over on first use (use_context); until then
 * the call paths never look at it, so an application without context pays nothing.
 */
#include "_extension.h"

PyObject *blog_context_var = NULL;

PyObject *
blog_use_context(PyObject *Py_UNUSED(module), PyObject *var)
{
    if (!PyContextVar_CheckExact(var)) {
        PyErr_SetString(PyExc_TypeError, "use_context(var: ContextVar)");
        return NULL;
    }
    Py_XSETREF(blog_context_var, Py_NewRef(var));
    Py_RETURN_NONE;
}
