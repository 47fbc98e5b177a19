/* bread/decode/_native.c: the Renderer, its twin bread/decode/decoder.py (Decoder, and
 * each sink's Native): the tables of call sites, writers and the clock sync that the Python
 * code keeps in step with an EventStream, and the calls that walk an events frame with them
 * (bread/decode/_decode.c), one per output: text lines, JSON lines or CSV rows
 * (bread/sinks/_lines.c), Event objects (bread/sinks/_events.c), columns
 * (bread/sinks/_batches.c) or typed tables (bread/sinks/_tables.c).
 */
#include "_extension.h"

#include <structmember.h>
#include <stddef.h>
#include <string.h>

static void
free_source(Source *s)
{
    if (s == NULL) return;
    PyMem_Free(s->items);
    PyMem_Free(s->msg);
    PyMem_Free(s);
}

/* Items from a Python sequence of bytes (literals) and ints (codes, or < 0 the keyword field
 * -(j+1); for a message: >= 0 positional index, < 0 field -(j+1)). */
static int
compile_items(PyObject *hold, PyObject *seq, int message, Item **out, Py_ssize_t *nout)
{
    PyObject *fast = PySequence_Fast(seq, "items must be a sequence");
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    Item *items = PyMem_Calloc(n ? n : 1, sizeof(Item));
    if (items == NULL) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (PyBytes_Check(o)) {
            if (PyList_Append(hold, o) < 0) goto fail;
            items[i].code = IT_LIT;
            items[i].s = PyBytes_AS_STRING(o);
            items[i].n = PyBytes_GET_SIZE(o);
        }
        else if (PyLong_Check(o)) {
            long v = PyLong_AsLong(o);
            if (v == -1 && PyErr_Occurred()) goto fail;
            if (message) {
                items[i].code = v >= 0 ? MI_POS : MI_FIELD;
                items[i].index = v >= 0 ? v : -(v + 1);
            }
            else if (v < 0) {
                items[i].code = IT_FIELD;
                items[i].index = -(v + 1);
            }
            else
                items[i].code = (int)v;
        }
        else {
            PyErr_SetString(PyExc_TypeError, "an item is bytes or int");
            goto fail;
        }
    }
    Py_DECREF(fast);
    *out = items;
    *nout = n;
    return 0;
fail:
    Py_DECREF(fast);
    PyMem_Free(items);
    return -1;
}

static int
check_id(PyObject *o, long long *id)
{
    *id = PyLong_AsLongLong(o);
    if (*id == -1 && PyErr_Occurred()) return -1;
    if (*id < 0 || *id >= MAX_IDS) {
        PyErr_SetString(PyExc_ValueError, "id out of the C renderer's range");
        return -1;
    }
    return 0;
}

/* Keep `objs` (a new reference, or NULL after a failed allocation) alive under `key`:
 * what the tables point into for one source, writer or sync; what was held under
 * the key before is released (a writer renamed, a sync replaced). */
static int
hold_under(Renderer *self, long long key, PyObject *objs)
{
    if (objs == NULL) return -1;
    PyObject *k = PyLong_FromLongLong(key);
    int r = k == NULL ? -1 : PyDict_SetItem(self->keep, k, objs);
    Py_XDECREF(k);
    Py_DECREF(objs);
    return r;
}

/* add_source(id, items, message_items or None, nnames) */
static PyObject *
renderer_add_source(Renderer *self, PyObject *args)
{
    PyObject *ido, *items, *msg, *obj = NULL, *names = NULL, *pre = NULL, *post = NULL;
    Py_ssize_t nnames;
    long long id;
    int skip = 0;
    if (!PyArg_ParseTuple(args, "OOOn|OO!pSS:add_source", &ido, &items, &msg, &nnames, &obj,
                          &PyTuple_Type, &names, &skip, &pre, &post))
        return NULL;
    if (check_id(ido, &id) < 0) return NULL;
    /* What the new source's items point into: held under its id, so that a source
     * described again frees what the old one held. */
    PyObject *hold = PyList_New(0);
    if (hold == NULL) return NULL;
    if ((pre != NULL && PyList_Append(hold, pre) < 0)
        || (post != NULL && PyList_Append(hold, post) < 0)
        || (obj != NULL && PyList_Append(hold, obj) < 0)
        || (names != NULL && PyList_Append(hold, names) < 0)) {
        Py_DECREF(hold);
        return NULL;
    }
    Source *s = PyMem_Calloc(1, sizeof(Source));
    if (s == NULL) { Py_DECREF(hold); return PyErr_NoMemory(); }
    s->nnames = nnames;
    s->obj = obj;
    s->names = names;
    s->skip = skip;
    if (pre != NULL && PyBytes_GET_SIZE(pre)) {
        s->pre = PyBytes_AS_STRING(pre);
        s->npre = PyBytes_GET_SIZE(pre);
    }
    if (post != NULL && PyBytes_GET_SIZE(post)) {
        s->post = PyBytes_AS_STRING(post);
        s->npost = PyBytes_GET_SIZE(post);
    }
    if (compile_items(hold, items, 0, &s->items, &s->nitems) < 0
        || (msg != Py_None && compile_items(hold, msg, 1, &s->msg, &s->nmsg) < 0)) {
        free_source(s);
        Py_DECREF(hold);
        return NULL;
    }
    PyObject *key = PyLong_FromLongLong(3 * id);
    if (key == NULL || PyDict_SetItem(self->keep, key, hold) < 0) {
        Py_XDECREF(key);
        free_source(s);
        Py_DECREF(hold);
        return NULL;
    }
    Py_DECREF(key);
    Py_DECREF(hold);
    free_source(self->sources[id]);
    self->sources[id] = s;
    Py_RETURN_NONE;
}

/* add_writer(id, name bytes, id bytes) */
static PyObject *
renderer_add_writer(Renderer *self, PyObject *args)
{
    PyObject *ido, *name, *idtext, *obj = NULL;
    long long id;
    int skip = 0;
    if (!PyArg_ParseTuple(args, "OSS|Op:add_writer", &ido, &name, &idtext, &obj, &skip))
        return NULL;
    if (check_id(ido, &id) < 0) return NULL;
    if (hold_under(self, 3 * id + 1, obj != NULL ? PyTuple_Pack(3, name, idtext, obj)
                                                 : PyTuple_Pack(2, name, idtext)) < 0)
        return NULL;
    Writer *w = &self->writers[id];
    w->obj = obj;
    w->skip = skip;
    w->name = PyBytes_AS_STRING(name);
    w->nname = PyBytes_GET_SIZE(name);
    w->id = PyBytes_AS_STRING(idtext);
    w->nid = PyBytes_GET_SIZE(idtext);
    Py_RETURN_NONE;
}

/* set_sync(clock_value, frequency, ns_since_epoch, tz_offset seconds, tz name bytes) */
static PyObject *
renderer_set_sync(Renderer *self, PyObject *args)
{
    long long cv, freq, ns, off;
    PyObject *name, *tz = NULL;
    if (!PyArg_ParseTuple(args, "LLLLS|O:set_sync", &cv, &freq, &ns, &off, &name, &tz)) return NULL;
    if (freq <= 0) {
        PyErr_SetString(PyExc_ValueError, "frequency must be positive");
        return NULL;
    }
    if (hold_under(self, -1, tz != NULL ? PyTuple_Pack(2, name, tz) : PyTuple_Pack(1, name)) < 0)
        return NULL;
    self->tz = tz != NULL ? tz : self->utc_tz;
    self->clock_value = cv;
    self->frequency = freq;
    self->ns0 = ns;
    self->tz_offset = off;
    self->tz_name = PyBytes_AS_STRING(name);
    self->ntz = PyBytes_GET_SIZE(name);
    self->local.valid = 0;
    Py_RETURN_NONE;
}

/* set_window(since, until): only events whose time is in [since, until). */
static PyObject *
renderer_set_window(Renderer *self, PyObject *args)
{
    if (!PyArg_ParseTuple(args, "LL:set_window", &self->since, &self->until)) return NULL;
    self->windowed = 1;
    Py_RETURN_NONE;
}

/* reset(): a new stream begins (a header frame): no sources, no writers, the default sync. */
static PyObject *
renderer_reset(Renderer *self, PyObject *Py_UNUSED(unused))
{
    for (Py_ssize_t i = 0; i < MAX_IDS; i++) {
        free_source(self->sources[i]);
        self->sources[i] = NULL;
    }
    memset(self->writers, 0, sizeof(Writer) * MAX_IDS);
    self->clock_value = 0;
    self->frequency = 1000000000LL;
    self->ns0 = 0;
    self->tz_offset = 0;
    self->tz_name = "UTC";
    self->ntz = 3;
    self->tz = self->utc_tz;
    self->local.valid = 0;
    PyDict_Clear(self->keep);   /* what only the old stream's tables pointed into */
    Py_RETURN_NONE;
}

/* The EventFn of render(): a text line, a JSON line or a CSV row per event (form). */
static inline EventFn
lines_of(Renderer *self)
{
    return self->form == FORM_TEXT ? bread_line_event : bread_row_event;
}

/* render(frame or None) -> bytes: the lines of the frame's events, about max_out bytes
 * at most per call; then see state. */
static PyObject *
renderer_render(Renderer *self, PyObject *frame)
{
    return bread_walk(self, frame, lines_of(self));
}

/* columns(frame or None): as render(), but each event becomes a row of the column
 * buffers (take_columns()); returns how many rows this call added. A call stops at
 * max_rows rows in the buffers (state 1). */
static PyObject *
renderer_columns(Renderer *self, PyObject *frame)
{
    Py_ssize_t before = self->rows;
    PyObject *r = bread_walk(self, frame, bread_column_event);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    return PyLong_FromSsize_t(self->rows - before);
}

/* typed(frame or None) -> rows added to the typed columns (take_typed()), or 0 in the
 * kinds mode (set_typed()); a call stops at max_rows rows (state 1). */
static PyObject *
renderer_typed(Renderer *self, PyObject *frame)
{
    if (self->typed == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_typed() first");
        return NULL;
    }
    Py_ssize_t before = self->rows;
    PyObject *r = bread_walk(self, frame, bread_typed_event);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    return PyLong_FromSsize_t(self->rows - before);
}

/* columnar(frame or None): as columns(), over a columnar frame (docs/format.md 5.5); state 2
 * after its first call: none of it was taken, Python reads it as events payloads. */
static PyObject *
renderer_columnar(Renderer *self, PyObject *frame)
{
    return bread_columns_walk(self, frame, bread_column_event);
}

/* The walk to Events: the list of this call's Events (at most max_rows). */
static PyObject *
walk_list(Renderer *self, PyObject *frame)
{
    if (self->event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_event_type() first");
        return NULL;
    }
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    Py_XSETREF(self->events, list);
    self->rows = 0;
    PyObject *r = bread_walk(self, frame, bread_object_event);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    list = self->events;
    self->events = NULL;
    return list;
}

/* events(frame or None) -> list of Events: as render(), one Event per event (at most
 * max_rows per call); then see state. */
static PyObject *
renderer_events(Renderer *self, PyObject *frame)
{
    return walk_list(self, frame);
}

/* keyed(frame or None) -> (writer id, items, keys), or None if no event is kept: as
 * events() if set_event_type() was called (items: the list of Events), else as render()
 * (items: the text), with the key of each item (bread.merge.merger.Merger's: native int64
 * time, end of the line in the text or 0), for merging by time; then see state. */
static PyObject *
renderer_keyed(Renderer *self, PyObject *frame)
{
    self->keys.len = 0;
    self->want_keys = 1;
    PyObject *items = self->event_type != NULL ? walk_list(self, frame)
                                               : bread_walk(self, frame, lines_of(self));
    self->want_keys = 0;
    if (items == NULL) return NULL;
    if (PyObject_Length(items) == 0) {
        Py_DECREF(items);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("LNy#", self->wid, items, self->keys.p ? self->keys.p : "",
                         self->keys.len);
}

/* set_zone(zone or None): zone(secs) -> (ISO text before the ns, after) bytes, or None
 * for Python to write the event: the ISO time (IT_DATE of a JSON line or CSV row) in
 * --tz's zone; None: in the sync's offset, here. */
static PyObject *
renderer_set_zone(Renderer *self, PyObject *zone)
{
    Py_XSETREF(self->zone, zone == Py_None ? NULL : Py_NewRef(zone));
    self->local.valid = 0;
    Py_RETURN_NONE;
}

/* set_origin(origin): the Origin the Events made from here on hold (the stream's). */
static PyObject *
renderer_set_origin(Renderer *self, PyObject *origin)
{
    Py_INCREF(origin);
    Py_XSETREF(self->origin, origin);
    Py_RETURN_NONE;
}

/* set_event_type(Event, utc): the class whose slots events() fills, in the order source,
 * writer_prop, clock, ns, tz, args, _fields, _texts, _message, offset, origin; the zone of
 * the default sync. */
static PyObject *
renderer_set_event_type(Renderer *self, PyObject *args)
{
    static const char *names[11] = {"source", "writer_prop", "clock", "ns", "tz", "args",
                                    "_fields", "_texts", "_message", "offset", "origin"};
    PyObject *type, *utc;
    if (!PyArg_ParseTuple(args, "O!O:set_event_type", &PyType_Type, &type, &utc))
        return NULL;
    for (int k = 0; k < 11; k++)
        if (bread_slot_offset(type, names[k], &self->off[k]) < 0) return NULL;
    Py_INCREF(type); Py_XSETREF(self->event_type, type);
    Py_INCREF(utc); Py_XSETREF(self->utc_tz, utc);
    if (self->empty_texts == NULL && (self->empty_texts = PyDict_New()) == NULL) return NULL;
    if (self->tz == NULL) self->tz = self->utc_tz;
    Py_RETURN_NONE;
}

/* Renderer(date_items, fallback, escape) */
static PyObject *
renderer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"date_items", "fallback", "escape", NULL};
    PyObject *date, *fallback;
    int escape;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOp:Renderer", kwlist, &date, &fallback,
                                     &escape))
        return NULL;
    Renderer *self = (Renderer *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->keep = PyDict_New();
    self->date_hold = PyList_New(0);
    self->sources = PyMem_Calloc(MAX_IDS, sizeof(Source *));
    self->writers = PyMem_Calloc(MAX_IDS, sizeof(Writer));
    if (self->keep == NULL || self->date_hold == NULL || self->sources == NULL
        || self->writers == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->fallback = Py_NewRef(fallback);
    self->origin = Py_NewRef(Py_None);
    self->escape = escape;
    self->max_out = 1 << 20;
    self->max_rows = 65536;
    self->want_message = 1;
    /* Date items first in `keep`, so that reset() keeps them. */
    if (compile_items(self->date_hold, date, 0, &self->date, &self->ndate) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject *r = renderer_reset(self, NULL);
    if (r == NULL) { Py_DECREF(self); return NULL; }
    Py_DECREF(r);
    return (PyObject *)self;
}

static int
renderer_traverse(Renderer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->payload);
    Py_VISIT(self->keep);
    Py_VISIT(self->date_hold);
    Py_VISIT(self->fallback);
    Py_VISIT(self->event_type);
    Py_VISIT(self->utc_tz);
    Py_VISIT(self->empty_texts);
    Py_VISIT(self->events);
    Py_VISIT(self->frame_offset);
    Py_VISIT(self->origin);
    Py_VISIT(self->zone);
    return 0;
}

static int
renderer_clear(Renderer *self)
{
    bread_frame_release(self);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->date_hold);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->utc_tz);
    Py_CLEAR(self->empty_texts);
    Py_CLEAR(self->events);
    Py_CLEAR(self->frame_offset);
    Py_CLEAR(self->origin);
    Py_CLEAR(self->zone);
    self->tz = NULL;
    return 0;
}

static void
renderer_dealloc(Renderer *self)
{
    PyObject_GC_UnTrack(self);
    renderer_clear(self);
    if (self->sources) {
        for (Py_ssize_t i = 0; i < MAX_IDS; i++) free_source(self->sources[i]);
        PyMem_Free(self->sources);
    }
    PyMem_Free(self->writers);
    PyMem_Free(self->date);
    PyMem_Free(self->out.p);
    PyMem_Free(self->scratch.p);
    PyMem_Free(self->keys.p);
    for (int k = 0; k < C_NCOLS; k++) PyMem_Free(self->col[k].p);
    bread_typed_free(self->typed);
    bread_columns_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef renderer_methods[] = {
    {"add_source", (PyCFunction)renderer_add_source, METH_VARARGS,
     "add_source(id, items, message_items or None, nnames[, EventSource, field names, skip, "
     "pre, post])"},
    {"add_writer", (PyCFunction)renderer_add_writer, METH_VARARGS,
     "add_writer(id, name: bytes, id_text: bytes)"},
    {"set_sync", (PyCFunction)renderer_set_sync, METH_VARARGS,
     "set_sync(clock_value, frequency, ns_since_epoch, tz_offset, tz_name: bytes)"},
    {"reset", (PyCFunction)renderer_reset, METH_NOARGS, "a new stream: forget everything"},
    {"set_window", (PyCFunction)renderer_set_window, METH_VARARGS,
     "set_window(since, until): leave out events whose time is not in [since, until)"},
    {"set_zone", (PyCFunction)renderer_set_zone, METH_O,
     "set_zone(zone or None): zone(secs) -> (ISO text before the ns, after) or None: the "
     "time of JSON lines and CSV rows in --tz's zone"},
    {"set_origin", (PyCFunction)renderer_set_origin, METH_O,
     "set_origin(origin): the Origin of the Events made from here on"},
    {"render", (PyCFunction)renderer_render, METH_O,
     "render(frame) begins a frame, render(None) continues it -> bytes; then see state"},
    {"columns", (PyCFunction)renderer_columns, METH_O,
     "columns(frame or None) -> rows added to the column buffers; then see state"},
    {"typed", (PyCFunction)renderer_typed, METH_O,
     "typed(frame or None) -> rows added to the typed columns; then see state"},
    {"set_typed", (PyCFunction)bread_set_typed, METH_VARARGS,
     "set_typed(kinds: bytes or None, positional, field names): typed rows, or the kinds"},
    {"take_typed", (PyCFunction)bread_take_typed, METH_NOARGS,
     "take_typed() -> the typed columns, or the kinds found (bread/sinks/_tables.c)"},
    {"columnar", (PyCFunction)renderer_columnar, METH_O,
     "columnar(frame or None) -> rows added from a columnar frame; then see state"},
    {"events", (PyCFunction)renderer_events, METH_O,
     "events(frame or None) -> list of Events; then see state"},
    {"keyed", (PyCFunction)renderer_keyed, METH_O,
     "keyed(frame or None) -> (writer id, text or list of Events, keys: int64 (time, line "
     "end) pairs) or None; then see state"},
    {"set_event_type", (PyCFunction)renderer_set_event_type, METH_VARARGS,
     "set_event_type(Event, utc zone)"},
    {"take_columns", (PyCFunction)bread_take_columns, METH_NOARGS,
     "take_columns() -> (rows, clock, ns, source id, writer id, then data and offsets of "
     "message, args and fields)"},
    {NULL}
};

static PyMemberDef renderer_members[] = {
    {"state", T_INT, offsetof(Renderer, state), READONLY,
     "0 the frame is done, 1 more to come (render(None)), 2 Python reads it from `rendered` on"},
    {"rendered", T_LONGLONG, offsetof(Renderer, rendered), READONLY,
     "events of the current frame rendered so far"},
    {"max_out", T_PYSSIZET, offsetof(Renderer, max_out), 0,
     "about how many bytes of text one render() call returns at most"},
    {"max_rows", T_PYSSIZET, offsetof(Renderer, max_rows), 0,
     "Events one events() call makes, rows the column buffers hold before columns() stops"},
    {"form", T_INT, offsetof(Renderer, form), 0,
     "what render() makes of an event: 0 a text line, 1 a JSON line, 2 a CSV row"},
    {"quote_formulas", T_INT, offsetof(Renderer, quote_formulas), 0,
     "CSV rows: a ' before a text cell a spreadsheet would run as a formula"},
    {"want_message", T_INT, offsetof(Renderer, want_message), 0,
     "columns(): render the message column"},
    {"want_json", T_INT, offsetof(Renderer, want_json), 0,
     "columns(): render the args and fields columns (JSON)"},
    {NULL}
};

static PyTypeObject RendererType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._speedups.Renderer",
    .tp_basicsize = sizeof(Renderer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Renderer(date_items, fallback, escape): events frames to text lines, Events "
              "or columns.",
    .tp_new = renderer_new,
    .tp_traverse = (traverseproc)renderer_traverse,
    .tp_clear = (inquiry)renderer_clear,
    .tp_dealloc = (destructor)renderer_dealloc,
    .tp_methods = renderer_methods,
    .tp_members = renderer_members,
};

int
bread_native_init(PyObject *m)
{
    if (PyType_Ready(&RendererType) < 0 || bread_walk_init() < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Renderer", (PyObject *)&RendererType);
}
