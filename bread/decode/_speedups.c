/* bread._speedups: the per-event work of reading, in C; this file is the module,
 * bread/decode/_extension.h says which file does what.
 *
 * The pure-Python code is the reference: bread/decode/decoder.py and its sinks
 * (bread/sinks/lines.py, bread/sinks/rows.py, bread/sinks/events.py,
 * bread/sinks/batches.py, bread/sinks/typed.py). A Renderer here is given, by
 * bread/decode/decoder.py, everything that is fixed per call site, per writer and per
 * clock sync, already rendered to bytes; render(frame) (or events(), columns(), keyed())
 * then walks the events of one events frame
 * (docs/format.md section 5) and makes each into one output. It makes in C
 * only what it makes exactly as Python does: {} placeholders of None, bool,
 * int, float and str, the date and clock, the writer. Any other event goes to
 * the Python fallback callback, one event at a time. From an event whose bytes
 * Python would not decode (a wrong type, a truncated event, invalid UTF-8,
 * anything unusual) on, the frame is not read here: `state` says so and the
 * Python path reads the rest, reporting the damage exactly as it does without
 * this module.
 *
 * The input is untrusted: every read is bounds-checked, nesting is bounded,
 * and allocations are bounded by the payload and the rendered text.
 */
#include "_extension.h"

static PyMethodDef module_methods[] = {
    {"gather", (PyCFunction)(void (*)(void))bread_gather, METH_FASTCALL,
     "gather(ids, table, default, text) -> (values, offsets, validity) or None"},
    {"message", (PyCFunction)(void (*)(void))bread_message, METH_FASTCALL,
     "message(plan, args, fields, names) -> str, or None if Python must render it"},
    {NULL}
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "bread._speedups",
    .m_doc = "bread's C fast path for reading.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void);   /* declared: the one function exported */

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_MESSAGE", MAX_MESSAGE) < 0
        || PyModule_AddIntConstant(m, "MAX_JSON", (long)MAX_JSON) < 0
        || bread_native_init(m) < 0 || bread_events_init(m) < 0
        || bread_batches_init() < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
