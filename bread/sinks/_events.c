/* bread/sinks/_events.c: events as Event objects, its twins bread/sinks/events.py
 * (EventSink: an Event per event of a frame) and bread/events.py (message() and
 * Event.message's getter, MessageGetter, for the common case).
 */
#include "../decode/_extension.h"
#include "../decode/_message.h"

#include <structmember.h>
#include <stddef.h>
#include <string.h>

/* Short strings recently made: a log repeats its symbols, states and names, and a
 * str is immutable, so one object serves every event that holds the same text. */
#define STR_CACHE 256
#define STR_CACHE_MAX 32
static PyObject *str_cache[STR_CACHE];

static PyObject *
short_str(const unsigned char *s, Py_ssize_t n)
{
    unsigned h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    PyObject **slot = &str_cache[h % STR_CACHE];
    PyObject *u = *slot;
    if (u != NULL && PyUnicode_IS_ASCII(u) && PyUnicode_GET_LENGTH(u) == n
        && memcmp(PyUnicode_DATA(u), s, (size_t)n) == 0)
        return Py_NewRef(u);
    u = PyUnicode_DecodeUTF8((const char *)s, n, "surrogatepass");
    if (u != NULL && PyUnicode_IS_ASCII(u))
        Py_XSETREF(*slot, Py_NewRef(u));
    return u;
}

/* A decoded scalar as a Python object (a new reference), as msgpack-python gives it. */
static PyObject *
value_object(const Val *v)
{
    switch (v->kind) {
    case V_NIL: Py_RETURN_NONE;
    case V_TRUE: Py_RETURN_TRUE;
    case V_FALSE: Py_RETURN_FALSE;
    case V_INT: return PyLong_FromLongLong(v->i);
    case V_UINT: return PyLong_FromUnsignedLongLong(v->u);
    case V_F64: return PyFloat_FromDouble(v->d);
    case V_STR:
        if (v->n <= STR_CACHE_MAX) return short_str(v->s, v->n);
        return PyUnicode_DecodeUTF8((const char *)v->s, v->n, "surrogatepass");
    default:
        PyErr_SetString(PyExc_SystemError, "not a scalar");
        return NULL;
    }
}

static inline void
set_slot(PyObject *ev, Py_ssize_t off, PyObject *v)   /* steals v */
{
    PyObject **p = (PyObject **)((char *)ev + off);
    PyObject *old = *p;
    *p = v;
    Py_XDECREF(old);
}

/* Events mode: one Event per event, as bread.events.EventStream.event makes it.
 * 1 done, 0 Python must make it (the caller asks the fallback), -1 error. */
static int
event_object(Renderer *self, long long wid, long long sid, long long clock, const Val *args,
             Py_ssize_t nargs, int simple)
{
    long long ns;
    if (!simple || !event_ns(self, clock, &ns)) return 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (args[i].kind >= V_OTHER) return 0;   /* lists, maps, bin, ext: msgpack decodes them */
    Source *src = sid >= 0 && sid < MAX_IDS ? self->sources[sid] : NULL;
    Writer *w = wid >= 0 && wid < MAX_IDS ? &self->writers[wid] : NULL;
    if (src == NULL || src->obj == NULL || w == NULL || w->obj == NULL || self->tz == NULL)
        return 0;
    Py_ssize_t nn = src->names != NULL ? PyTuple_GET_SIZE(src->names) : 0;
    Py_ssize_t npos = nn && nargs >= nn ? nargs - nn : nargs;
    PyObject *ev = NULL, *tuple = NULL, *fields = NULL;
    tuple = PyTuple_New(npos);
    /* No fields: None, and Event.fields makes the dict if it is ever asked for. */
    fields = npos < nargs ? PyDict_New() : Py_NewRef(Py_None);
    if (tuple == NULL || fields == NULL) goto fail;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *v = value_object(&args[i]);
        if (v == NULL) goto fail;
        if (i < npos)
            PyTuple_SET_ITEM(tuple, i, v);
        else {
            int r = PyDict_SetItem(fields, PyTuple_GET_ITEM(src->names, i - npos), v);
            Py_DECREF(v);
            if (r < 0) goto fail;
        }
    }
    /* Scalars only: the tuple can be in no cycle, so the collector need not see it
     * (it would untrack it at its first pass anyway). */
    if (npos && PyObject_GC_IsTracked(tuple)) PyObject_GC_UnTrack(tuple);
    PyObject *c = PyLong_FromLongLong(clock), *n = PyLong_FromLongLong(ns);
    if (c == NULL || n == NULL) { Py_XDECREF(c); Py_XDECREF(n); goto fail; }
    ev = ((PyTypeObject *)self->event_type)->tp_alloc((PyTypeObject *)self->event_type, 0);
    if (ev == NULL) { Py_DECREF(c); Py_DECREF(n); goto fail; }
    Py_INCREF(src->obj); set_slot(ev, self->off[0], src->obj);
    Py_INCREF(w->obj); set_slot(ev, self->off[1], w->obj);
    set_slot(ev, self->off[2], c);
    set_slot(ev, self->off[3], n);
    Py_INCREF(self->tz); set_slot(ev, self->off[4], self->tz);
    set_slot(ev, self->off[5], tuple);
    set_slot(ev, self->off[6], fields);
    Py_INCREF(self->empty_texts); set_slot(ev, self->off[7], self->empty_texts);
    Py_INCREF(Py_None); set_slot(ev, self->off[8], Py_None);
    Py_INCREF(self->frame_offset); set_slot(ev, self->off[9], self->frame_offset);
    Py_INCREF(self->origin); set_slot(ev, self->off[10], self->origin);
    int r = PyList_Append(self->events, ev);
    Py_DECREF(ev);
    return r < 0 ? -1 : 1;
fail:
    Py_XDECREF(tuple);
    Py_XDECREF(fields);
    return -1;
}

/* The events output's EventFn: the event's Event, made here or by the fallback (an Event,
 * or None if the filter leaves it out), appended to the list of the call; with want_keys,
 * its sort key. */
int
bread_object_event(Renderer *self, long long wid, long long sid, long long clock,
                   const Val *args, Py_ssize_t nargs, int simple,
                   const unsigned char *ev, Py_ssize_t evlen)
{
    Py_ssize_t before = PyList_GET_SIZE(self->events);
    int e = event_object(self, wid, sid, clock, args, nargs, simple);
    if (e < 0) return -1;
    if (e == 0) {
        PyObject *obj = bread_fallback(self, ev, evlen, wid, clock);
        if (obj == NULL) return -1;
        int rc = obj == Py_None ? 0 : PyList_Append(self->events, obj);   /* None: left out */
        Py_DECREF(obj);
        if (rc < 0) return -1;
    }
    if (PyList_GET_SIZE(self->events) > before) {
        self->rows++;
        if (self->want_keys && bread_put_key(self, clock, 0) < 0) return -1;
    }
    return 1;
}

/* The offset of a slot (a T_OBJECT_EX member) of a class. */
int
bread_slot_offset(PyObject *type, const char *name, Py_ssize_t *off)
{
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL) return -1;
    int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
             && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
    if (ok) *off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    if (!ok) PyErr_Format(PyExc_TypeError, "%s is not a slot", name);
    return ok ? 0 : -1;
}

/* The text of one value as format(value, "") gives it, for the exact types
 * rendered here; NULL without an error for any other type. */
static PyObject *
value_text(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) { Py_INCREF(v); return v; }
    if (t == &PyLong_Type) {
        PyObject *u = PyObject_Str(v);
        if (u == NULL)       /* beyond the digits Python converts: rendered by Python, marked */
            PyErr_Clear();
        return u;
    }
    if (t == &PyFloat_Type) {
        Buf b = {0};
        char tmp[40];
        int r;
        b.p = tmp; b.cap = sizeof tmp;
        r = bread_put_short_float(&b, PyFloat_AS_DOUBLE(v));
        if (r == 1) return PyUnicode_FromStringAndSize(b.p, b.len);
        char *s = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (s == NULL) return NULL;
        PyObject *u = PyUnicode_FromString(s);
        PyMem_Free(s);
        return u;
    }
    if (v == Py_None) return PyUnicode_FromString("None");
    if (v == Py_True) return PyUnicode_FromString("True");
    if (v == Py_False) return PyUnicode_FromString("False");
    return NULL;
}

/* An ASCII str's characters: 1, or 0 past MAX_MESSAGE (nothing copied: the buffer,
 * kept between calls, never grows past about MAX_MESSAGE), -1 error. */
static inline int
put_ascii(Buf *o, PyObject *u)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(u);
    if (n > MAX_MESSAGE - o->len) return 0;
    return buf_put(o, PyUnicode_DATA(u), n) < 0 ? -1 : 1;
}

/* The message of a plan whose every piece is ASCII text, straight into one buffer
 * (no str per value, no join): the common case of message(). 1 done (*out set),
 * 0 message() must make it (a non-ASCII text, another type, a missing value, too
 * long), -1 error. */
static Buf ascii_msg;
static int
message_ascii(PyObject *plan, PyObject *args, PyObject *fields, PyObject *names,
              PyObject **out)
{
    Buf *o = &ascii_msg;
    o->len = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(plan, i), *v;
        if (PyUnicode_CheckExact(it)) {
            if (!PyUnicode_IS_ASCII(it)) return 0;
            int r = put_ascii(o, it);
            if (r <= 0) return r;
            continue;
        }
        if (!PyLong_CheckExact(it)) return 0;
        Py_ssize_t k = PyLong_AsSsize_t(it);
        if (k == -1 && PyErr_Occurred()) return -1;
        if (k >= 0) {
            if (k >= PyTuple_GET_SIZE(args)) return 0;
            v = PyTuple_GET_ITEM(args, k);
        }
        else {
            k = -1 - k;
            if (k >= PyTuple_GET_SIZE(names)) return 0;
            v = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(names, k));
            if (v == NULL) return PyErr_Occurred() ? -1 : 0;
        }
        PyTypeObject *t = Py_TYPE(v);
        int r;
        if (t == &PyUnicode_Type) {
            if (!PyUnicode_IS_ASCII(v)) return 0;
            r = put_ascii(o, v);
            if (r <= 0) return r;
            r = 0;
        }
        else if (t == &PyLong_Type) {
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow) return 0;
            if (x == -1 && PyErr_Occurred()) return -1;
            r = buf_int(o, x);
        }
        else if (t == &PyFloat_Type) {
            int f = bread_put_short_float(o, PyFloat_AS_DOUBLE(v));
            if (f == 0) return 0;
            r = f < 0 ? -1 : 0;
        }
        else if (v == Py_None) r = buf_put(o, "None", 4);
        else if (v == Py_True) r = buf_put(o, "True", 4);
        else if (v == Py_False) r = buf_put(o, "False", 5);
        else return 0;
        if (r < 0) return -1;
        if (o->len > MAX_MESSAGE) return 0;
    }
    if (o->len > MAX_MESSAGE) return 0;
    PyObject *u = PyUnicode_New(o->len, 127);
    if (u == NULL) return -1;
    if (o->len) memcpy(PyUnicode_DATA(u), o->p, o->len);
    *out = u;
    return 1;
}

/* message(plan, args, fields, names) -> str, or None if Python must render it:
 * plan as bread.events.message_plan gives it. */
PyObject *
bread_message(PyObject *Py_UNUSED(module), PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[1]) || !PyDict_Check(a[2])
        || !PyTuple_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "message(plan: tuple, args: tuple, fields: dict, names: tuple)");
        return NULL;
    }
    PyObject *plan = a[0], *args = a[1], *fields = a[2], *names = a[3];
    PyObject *quick = NULL;
    int q = message_ascii(plan, args, fields, names, &quick);
    if (q < 0) return NULL;
    if (q > 0) return quick;
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    PyObject *parts = PyList_New(n);
    if (parts == NULL) return NULL;
    /* Characters so far: a message longer than MAX_MESSAGE is Python's to cut. */
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(plan, i), *text;
        if (PyUnicode_Check(it)) {
            Py_INCREF(it);
            text = it;
        }
        else {
            Py_ssize_t k = PyLong_AsSsize_t(it);
            if (k == -1 && PyErr_Occurred()) goto fail;
            PyObject *v;
            if (k >= 0) {
                if (k >= PyTuple_GET_SIZE(args)) goto python;
                v = PyTuple_GET_ITEM(args, k);
            }
            else {
                k = -1 - k;
                if (k >= PyTuple_GET_SIZE(names)) goto python;
                v = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(names, k));
                if (v == NULL) {
                    if (PyErr_Occurred()) goto fail;
                    goto python;
                }
            }
            text = value_text(v);
            if (text == NULL) {
                if (PyErr_Occurred()) goto fail;
                goto python;
            }
        }
        PyList_SET_ITEM(parts, i, text);
        size += PyUnicode_GET_LENGTH(text);
        if (size > MAX_MESSAGE) goto python;
    }
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    if (empty == NULL) goto fail;
    PyObject *r = PyUnicode_Join(empty, parts);
    Py_DECREF(empty);
    Py_DECREF(parts);
    return r;
python:
    Py_DECREF(parts);
    Py_RETURN_NONE;
fail:
    Py_DECREF(parts);
    return NULL;
}

/* ---- MessageGetter: Event.message without a Python frame ----------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t off_source, off_args, off_fields, off_texts, off_message;
    PyObject *fallback;          /* the Python getter: everything but the common case */
    PyObject *type;              /* the Event class whose slots the offsets are */
    PyObject *last_src, *last_plan, *last_names;   /* the last source's plan and field names:
                                    the events of one source come in runs */
} MessageGetter;

static PyObject *str_template, *str_field_names;

static inline PyObject *
slot(PyObject *o, Py_ssize_t off)
{
    return *(PyObject **)((char *)o + off);
}

/* getter(event): the cached message, or the message rendered from the source's
 * plan (bread.events.message_plan, kept in source.template) when every value is
 * one rendered here; anything else is the Python getter's. */
static PyObject *
getter_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MessageGetter *self = (MessageGetter *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *ev = args[0];
    if (!PyObject_TypeCheck(ev, (PyTypeObject *)self->type))   /* not an Event: Python says so */
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *m = slot(ev, self->off_message);
    if (m != NULL && m != Py_None) { Py_INCREF(m); return m; }
    PyObject *texts = slot(ev, self->off_texts), *src = slot(ev, self->off_source);
    PyObject *a = slot(ev, self->off_args), *f = slot(ev, self->off_fields);
    if (texts == NULL || !PyDict_CheckExact(texts) || PyDict_GET_SIZE(texts) || src == NULL
        || a == NULL || !PyTuple_CheckExact(a) || f == NULL || (f != Py_None && !PyDict_Check(f)))
        goto python;
    if (f == Py_None) f = texts;   /* no fields: the empty dict at hand */
    PyObject *plan, *names;
    if (src == self->last_src) {
        plan = Py_NewRef(self->last_plan);
        names = Py_NewRef(self->last_names);
    }
    else {
        plan = PyObject_GetAttr(src, str_template);
        if (plan == NULL) { PyErr_Clear(); goto python; }
        names = PyObject_GetAttr(src, str_field_names);
        if (names == NULL) { PyErr_Clear(); Py_DECREF(plan); goto python; }
        if (PyTuple_CheckExact(plan) && PyTuple_CheckExact(names)) {   /* a plan made: kept */
            Py_INCREF(src); Py_XSETREF(self->last_src, src);
            Py_INCREF(plan); Py_XSETREF(self->last_plan, plan);
            Py_INCREF(names); Py_XSETREF(self->last_names, names);
        }
    }
    PyObject *text = NULL;
    if (PyTuple_CheckExact(plan) && PyTuple_CheckExact(names)
        && !(PyTuple_GET_SIZE(plan) == 1 && PyTuple_GET_ITEM(plan, 0) == Py_None)) {
        PyObject *margs[4] = {plan, a, f, names};
        text = bread_message(NULL, margs, 4);
    }
    Py_DECREF(plan);
    Py_DECREF(names);
    if (text == NULL) {
        if (PyErr_Occurred()) return NULL;
        goto python;
    }
    if (text == Py_None) { Py_DECREF(text); goto python; }
    Py_INCREF(text);
    set_slot(ev, self->off_message, text);
    return text;
python:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
getter_traverse(MessageGetter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->type);
    Py_VISIT(self->last_src);
    Py_VISIT(self->last_plan);
    Py_VISIT(self->last_names);
    return 0;
}

static int
getter_clear(MessageGetter *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->type);
    Py_CLEAR(self->last_src);
    Py_CLEAR(self->last_plan);
    Py_CLEAR(self->last_names);
    return 0;
}

static void
getter_dealloc(MessageGetter *self)
{
    PyObject_GC_UnTrack(self);
    getter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MessageGetter(Event, fallback) */
static PyObject *
getter_new(PyTypeObject *type, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *evtype, *fallback;
    if (!PyArg_ParseTuple(args, "O!O:MessageGetter", &PyType_Type, &evtype, &fallback))
        return NULL;
    MessageGetter *self = (MessageGetter *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = getter_vectorcall;
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(evtype);
    self->type = evtype;
    if (bread_slot_offset(evtype, "source", &self->off_source) < 0
        || bread_slot_offset(evtype, "args", &self->off_args) < 0
        || bread_slot_offset(evtype, "_fields", &self->off_fields) < 0
        || bread_slot_offset(evtype, "_texts", &self->off_texts) < 0
        || bread_slot_offset(evtype, "_message", &self->off_message) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyTypeObject MessageGetterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._speedups.MessageGetter",
    .tp_basicsize = sizeof(MessageGetter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "MessageGetter(Event, fallback): Event.message's getter, in C for the common case.",
    .tp_new = getter_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MessageGetter, vectorcall),
    .tp_traverse = (traverseproc)getter_traverse,
    .tp_clear = (inquiry)getter_clear,
    .tp_dealloc = (destructor)getter_dealloc,
};

int
bread_events_init(PyObject *m)
{
    str_template = PyUnicode_InternFromString("template");
    str_field_names = PyUnicode_InternFromString("field_names");
    if (str_template == NULL || str_field_names == NULL
        || PyType_Ready(&MessageGetterType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "MessageGetter", (PyObject *)&MessageGetterType);
}
