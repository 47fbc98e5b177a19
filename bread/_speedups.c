/* bread._speedups: the per-event work of rendering text, in C.
 *
 * The pure-Python code is the reference: bread/lines.py (LineRenderer) with
 * bread/events.py and bread/render.py. A Renderer here is given, by that
 * Python code, everything that is fixed per call site, per writer and per
 * clock sync, already rendered to bytes; render(payload) then walks the
 * events of one events frame (docs/format.md section 5) and renders each
 * into one output buffer. It renders in C only what it renders exactly as
 * Python does: {} placeholders of None, bool, int, float and str, the date
 * and clock, the writer. Any other event goes to the Python fallback
 * callback, one event at a time. A frame whose bytes Python would not decode
 * (a wrong type, a truncated event, invalid UTF-8, anything unusual) is not
 * rendered at all: render() returns None and the Python path reads the frame,
 * reporting the damage exactly as it does without this module.
 *
 * The input is untrusted: every read is bounds-checked, nesting is bounded,
 * and allocations are bounded by the payload and the rendered text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

/* ---- output buffer ------------------------------------------------------ */

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int
buf_put(Buf *b, const void *s, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* Decimal digits of v, at least `width` of them (zero-padded), as f"{v:0{width}d}". */
static int
buf_uint(Buf *b, unsigned long long v, int width, int negative)
{
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n < width) tmp[n++] = '0';
    if (buf_reserve(b, n + 1) < 0) return -1;
    if (negative) b->p[b->len++] = '-';
    while (n) b->p[b->len++] = tmp[--n];
    return 0;
}

static int
buf_int(Buf *b, long long v)
{
    if (v < 0)
        return buf_uint(b, (unsigned long long)(-(v + 1)) + 1, 1, 1);
    return buf_uint(b, (unsigned long long)v, 1, 0);
}

/* ---- msgpack reading, bounds-checked -------------------------------------- */

typedef struct { const unsigned char *p, *end; } Rd;

enum { V_NIL, V_FALSE, V_TRUE, V_INT, V_UINT, V_F64, V_STR, V_OTHER };

typedef struct {
    int kind;
    int surrogates;            /* V_STR: holds surrogates (encoded as with "surrogatepass") */
    long long i;               /* V_INT */
    unsigned long long u;      /* V_UINT (above LLONG_MAX only) */
    double d;                  /* V_F64 */
    const unsigned char *s;    /* V_STR */
    Py_ssize_t n;
} Val;

#define MAX_NESTING 32

static inline unsigned long long
be(const unsigned char *p, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* UTF-8 as Python decodes it with "surrogatepass": 0 valid, 1 valid with
 * surrogates, -1 invalid (Python would raise). */
static int
check_utf8(const unsigned char *s, Py_ssize_t n)
{
    int sur = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) {
            if (i + 1 >= n || (s[i + 1] & 0xc0) != 0x80) return -1;
            i += 2;
        }
        else if (c >= 0xe0 && c <= 0xef) {
            if (i + 2 >= n || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80) return -1;
            if (c == 0xe0 && s[i + 1] < 0xa0) return -1;             /* overlong */
            if (c == 0xed && s[i + 1] >= 0xa0) sur = 1;              /* a surrogate */
            i += 3;
        }
        else if (c >= 0xf0 && c <= 0xf4) {
            if (i + 3 >= n || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80
                || (s[i + 3] & 0xc0) != 0x80) return -1;
            if (c == 0xf0 && s[i + 1] < 0x90) return -1;             /* overlong */
            if (c == 0xf4 && s[i + 1] >= 0x90) return -1;            /* above U+10FFFF */
            i += 4;
        }
        else
            return -1;
    }
    return sur;
}

static int read_value(Rd *r, Val *v, int depth);

static inline int
need(Rd *r, Py_ssize_t n)
{
    return r->end - r->p >= n ? 0 : -1;
}

static int
read_str(Rd *r, Val *v, Py_ssize_t n)
{
    if (need(r, n) < 0) return -1;
    int u = check_utf8(r->p, n);
    if (u < 0) return -1;
    v->kind = V_STR;
    v->surrogates = u;
    v->s = r->p;
    v->n = n;
    r->p += n;
    return 0;
}

static int
skip_items(Rd *r, unsigned long long n, int depth)
{
    Val tmp;
    if (depth >= MAX_NESTING) return -1;
    /* Each item takes at least one byte: a count beyond what is left is truncated input. */
    if (n > (unsigned long long)(r->end - r->p)) return -1;
    for (unsigned long long k = 0; k < n; k++)
        if (read_value(r, &tmp, depth + 1) < 0) return -1;
    return 0;
}

static int
skip_ext(Rd *r, Val *v, Py_ssize_t n)
{
    if (need(r, n + 1) < 0) return -1;
    if ((signed char)r->p[0] == -1) return -1;   /* msgpack's Timestamp: left to Python */
    r->p += n + 1;
    v->kind = V_OTHER;
    return 0;
}

/* Read one value; containers, bin and ext are validated, skipped and V_OTHER.
 * -1: the bytes are not something Python would decode as blog does. */
static int
read_value(Rd *r, Val *v, int depth)
{
    if (need(r, 1) < 0) return -1;
    unsigned char c = *r->p++;
    v->kind = V_OTHER;
    if (c <= 0x7f) { v->kind = V_INT; v->i = c; return 0; }
    if (c >= 0xe0) { v->kind = V_INT; v->i = (signed char)c; return 0; }
    if ((c & 0xe0) == 0xa0) return read_str(r, v, c & 0x1f);
    if ((c & 0xf0) == 0x90) return skip_items(r, c & 0x0f, depth);
    if ((c & 0xf0) == 0x80) return skip_items(r, 2ULL * (c & 0x0f), depth);
    switch (c) {
    case 0xc0: v->kind = V_NIL; return 0;
    case 0xc2: v->kind = V_FALSE; return 0;
    case 0xc3: v->kind = V_TRUE; return 0;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int n = 1 << (c - 0xcc);
        if (need(r, n) < 0) return -1;
        unsigned long long u = be(r->p, n);
        r->p += n;
        if (u > (unsigned long long)LLONG_MAX) { v->kind = V_UINT; v->u = u; }
        else { v->kind = V_INT; v->i = (long long)u; }
        return 0;
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int n = 1 << (c - 0xd0);
        if (need(r, n) < 0) return -1;
        unsigned long long u = be(r->p, n);
        r->p += n;
        int shift = 64 - 8 * n;
        v->kind = V_INT;
        v->i = shift ? ((long long)(u << shift)) >> shift : (long long)u;
        return 0;
    }
    case 0xca: {
        if (need(r, 4) < 0) return -1;
        union { uint32_t u; float f; } x;
        x.u = (uint32_t)be(r->p, 4);
        r->p += 4;
        v->kind = V_F64;
        v->d = x.f;
        return 0;
    }
    case 0xcb: {
        if (need(r, 8) < 0) return -1;
        union { uint64_t u; double d; } x;
        x.u = be(r->p, 8);
        r->p += 8;
        v->kind = V_F64;
        v->d = x.d;
        return 0;
    }
    case 0xd9: case 0xda: case 0xdb: {
        int n = 1 << (c - 0xd9);
        if (need(r, n) < 0) return -1;
        Py_ssize_t len = (Py_ssize_t)be(r->p, n);
        r->p += n;
        return read_str(r, v, len);
    }
    case 0xc4: case 0xc5: case 0xc6: {   /* bin */
        int n = 1 << (c - 0xc4);
        if (need(r, n) < 0) return -1;
        Py_ssize_t len = (Py_ssize_t)be(r->p, n);
        r->p += n;
        if (need(r, len) < 0) return -1;
        r->p += len;
        return 0;
    }
    case 0xdc: case 0xdd: {              /* array 16, 32 */
        int n = c == 0xdc ? 2 : 4;
        if (need(r, n) < 0) return -1;
        unsigned long long cnt = be(r->p, n);
        r->p += n;
        return skip_items(r, cnt, depth);
    }
    case 0xde: case 0xdf: {              /* map 16, 32 */
        int n = c == 0xde ? 2 : 4;
        if (need(r, n) < 0) return -1;
        unsigned long long cnt = be(r->p, n);
        r->p += n;
        return skip_items(r, 2 * cnt, depth);
    }
    case 0xd4: return skip_ext(r, v, 1);
    case 0xd5: return skip_ext(r, v, 2);
    case 0xd6: return skip_ext(r, v, 4);
    case 0xd7: return skip_ext(r, v, 8);
    case 0xd8: return skip_ext(r, v, 16);
    case 0xc7: case 0xc8: case 0xc9: {   /* ext 8, 16, 32 */
        int n = 1 << (c - 0xc7);
        if (need(r, n) < 0) return -1;
        Py_ssize_t len = (Py_ssize_t)be(r->p, n);
        r->p += n;
        return skip_ext(r, v, len);
    }
    default:                             /* 0xc1: never used */
        return -1;
    }
}

/* An array header: its element count, or -1 if the next value is not an array. */
static long long
read_array(Rd *r)
{
    if (need(r, 1) < 0) return -1;
    unsigned char c = *r->p;
    if ((c & 0xf0) == 0x90) { r->p++; return c & 0x0f; }
    if (c == 0xdc || c == 0xdd) {
        int n = c == 0xdc ? 2 : 4;
        if (need(r, 1 + n) < 0) return -1;
        long long cnt = (long long)be(r->p + 1, n);
        r->p += 1 + n;
        return cnt;
    }
    return -1;
}

/* An int that Python would take for `type(v) is int`, within long long. */
static int
read_int(Rd *r, long long *out)
{
    Val v;
    if (read_value(r, &v, 0) < 0 || v.kind != V_INT) return -1;
    *out = v.i;
    return 0;
}

/* ---- compiled formats ---------------------------------------------------- */

/* Event format items (bytes literal, or a code rendered per event). */
enum { IT_LIT = 0, IT_DATE = 'd', IT_UTC = 'u', IT_CLOCK = 'r', IT_MSG = 'm',
       IT_WNAME = 'n', IT_WID = 't' };
/* Message items. */
enum { MI_LIT = 0, MI_POS = 1, MI_FIELD = 2 };

typedef struct { int code; Py_ssize_t index; const char *s; Py_ssize_t n; } Item;

typedef struct {
    Item *items; Py_ssize_t nitems;      /* the event format, this source's constants baked in */
    Item *msg; Py_ssize_t nmsg;          /* the message template; NULL: Python renders it */
    Py_ssize_t nnames;                   /* keyword fields at the end of args */
    PyObject *obj;                       /* the EventSource (borrowed: `keep` owns it), or NULL */
    PyObject *names;                     /* its field_names, a tuple of str, or NULL */
    int skip;                            /* the filter leaves out every event of this source */
    const char *pre, *post;              /* around each line, not escaped (colour), or NULL */
    Py_ssize_t npre, npost;
} Source;

typedef struct {
    const char *name; Py_ssize_t nname; const char *id; Py_ssize_t nid;
    PyObject *obj;                       /* the WriterProp (borrowed: `keep` owns it), or NULL */
    int skip;                            /* the filter leaves out every event of this writer */
} Writer;

#define MAX_IDS 65536
#define MAX_ARGS 32
#define MAX_N 8

/* A date rendered for one second, with the places where %N goes. */
typedef struct {
    int valid;
    long long secs;
    char text[256];
    Py_ssize_t len;
    Py_ssize_t at[MAX_N];
    int nat;
} DateCache;

typedef struct {
    PyObject_HEAD
    PyObject *keep;              /* dict: per source, writer and sync, what the tables point
                                    into (3*id, 3*id+1, -1); emptied by reset() */
    PyObject *date_hold;         /* list: what the date format's items point into */
    Source **sources;            /* by id, < MAX_IDS */
    Writer *writers;             /* by id, < MAX_IDS; name NULL: unknown */
    Item *date; Py_ssize_t ndate;
    long long clock_value, frequency, ns0;
    long long tz_offset;
    const char *tz_name; Py_ssize_t ntz;
    DateCache local, utc;
    PyObject *fallback;          /* fallback(event bytes, writer id, clock) -> bytes */
    int escape;
    Buf out;
    Py_ssize_t max_out;          /* bytes of text per render() call, about */
    /* the frame being rendered */
    PyObject *payload;
    Py_buffer view;
    Rd rd;                       /* the next event */
    long long wid, prev, left;   /* its writer, the previous clock, events left */
    long long rendered;          /* events of the frame rendered so far */
    int state;
    /* the filter's time window: events with since <= time < until */
    long long since, until;
    int windowed;
    /* events mode */
    PyObject *event_type;        /* bread.Event; its slots are at these offsets: */
    Py_ssize_t off[11];          /* source, writer_prop, clock, ns, tz, args, fields, _texts,
                                    _message, offset, origin */
    PyObject *origin;            /* the Origin of the events of this call */
    PyObject *event_fallback;    /* event_fallback(event bytes, writer id, clock) -> Event */
    PyObject *tz;                /* the zone of the sync in force (borrowed: `keep`) */
    PyObject *utc_tz;            /* the default sync's zone */
    PyObject *empty_texts;       /* {}: the captured texts of an event that has none */
    PyObject *events;            /* the list events() returns */
    PyObject *frame_offset;      /* int: the offset of the frame being read */
    /* keys of the events kept, for the sorted merge (keyed(), events() with want_keys) */
    Buf keys;
    int want_keys;
    /* columns mode */
    Buf col[10];                 /* clock, ns, source id, writer id (int64), message data,
                                    offsets; args JSON, offsets; fields JSON, offsets */
    int want_json;               /* columns(): the args and fields columns too */
    Py_ssize_t rows, max_rows;
    int want_message;
    PyObject *message_fallback;  /* message_fallback(event bytes, writer id, clock) -> bytes */
} Renderer;

enum { C_CLOCK = 0, C_NS = 1, C_SID = 2, C_WID = 3, C_MSG = 4, C_MSGOFF = 5, C_ARGS = 6,
       C_ARGSOFF = 7, C_FIELDS = 8, C_FIELDSOFF = 9, C_NCOLS = 10 };
#define IS_OFFSETS(k) ((k) == C_MSGOFF || (k) == C_ARGSOFF || (k) == C_FIELDSOFF)

static void
free_source(Source *s)
{
    if (s == NULL) return;
    PyMem_Free(s->items);
    PyMem_Free(s->msg);
    PyMem_Free(s);
}

/* Items from a Python sequence of bytes (literals) and ints (codes, or for a
 * message: >= 0 positional index, < 0 field -(j+1)). */
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
renderer_reset(Renderer *self, PyObject *unused)
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

/* ---- rendering ----------------------------------------------------------- */

/* Python's floor division of a by b > 0. */
static inline __int128
floordiv(__int128 a, long long b)
{
    __int128 q = a / b;
    if ((a % b) != 0 && a < 0) q -= 1;
    return q;
}

/* Days since 1970-01-01 to a civil date (proleptic Gregorian). */
static void
civil(long long z, long long *y, int *m, int *d)
{
    z += 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Render the date items for `secs` (in the zone of `offset`) into the cache.
 * -1 (no exception): outside the years Python's datetime has: Python renders it. */
static int
date_fill(Renderer *self, DateCache *c, long long secs, long long offset, const char *tzn,
          Py_ssize_t ntz)
{
    long long local = secs + offset;
    long long days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
    long long sod = local - days * 86400;
    long long y;
    int mo, d;
    civil(days, &y, &mo, &d);
    if (y < 1 || y > 9999) return -1;
    Buf b = {c->text, 0, sizeof(c->text)};
    c->nat = 0;
    for (Py_ssize_t i = 0; i < self->ndate; i++) {
        Item *it = &self->date[i];
        if (b.len + it->n + ntz + 16 > (Py_ssize_t)sizeof(c->text)) return -1;
        char *p = b.p + b.len;
        switch (it->code) {
        case IT_LIT: memcpy(p, it->s, it->n); b.len += it->n; break;
        case 'Y': b.len += sprintf(p, "%04lld", y); break;
        case 'y': b.len += sprintf(p, "%02lld", y % 100); break;
        case 'm': b.len += sprintf(p, "%02d", mo); break;
        case 'd': b.len += sprintf(p, "%02d", d); break;
        case 'H': b.len += sprintf(p, "%02lld", sod / 3600); break;
        case 'M': b.len += sprintf(p, "%02lld", sod / 60 % 60); break;
        case 'S': b.len += sprintf(p, "%02lld", sod % 60); break;
        case 'N':
            if (c->nat == MAX_N) return -1;
            c->at[c->nat++] = b.len;
            break;
        case 'z': {
            long long a = offset < 0 ? -offset : offset;
            b.len += sprintf(p, "%c%02lld%02lld", offset < 0 ? '-' : '+', a / 60 / 60, a / 60 % 60);
            break;
        }
        case 'Z': memcpy(p, tzn, ntz); b.len += ntz; break;
        default: return -1;
        }
    }
    c->len = b.len;
    c->secs = secs;
    c->valid = 1;
    return 0;
}

/* The wall time of `clock` in ns since the epoch (docs/format.md 4.3): 1, or 0
 * if it does not fit in 64 bits. */
static int
event_ns(Renderer *self, long long clock, long long *out)
{
    long long ns;
    if (self->frequency == 1000000000LL) {   /* blog's clock: ns since the epoch */
        if (__builtin_sub_overflow(clock, self->clock_value, &ns)
            || __builtin_add_overflow(ns, self->ns0, &ns))
            return 0;
    }
    else {
        __int128 t = floordiv(((__int128)clock - self->clock_value) * 1000000000,
                              self->frequency) + self->ns0;
        if (t > LLONG_MAX || t < LLONG_MIN) return 0;
        ns = (long long)t;
    }
    *out = ns;
    return 1;
}

/* 1 rendered, 0 Python must render this event, -1 error. */
static int
put_date(Renderer *self, Buf *o, long long clock, int utc)
{
    long long ns;
    if (!event_ns(self, clock, &ns)) return 0;
    long long secs = ns >= 0 ? ns / 1000000000 : -((-(ns + 1)) / 1000000000) - 1;
    long long frac = ns - secs * 1000000000;
    DateCache *c = utc ? &self->utc : &self->local;
    if (!c->valid || c->secs != secs) {
        if (utc ? date_fill(self, c, secs, 0, "UTC", 3)
                : date_fill(self, c, secs, self->tz_offset, self->tz_name, self->ntz))
            return 0;
    }
    if (buf_reserve(o, c->len + 9 * c->nat) < 0) return -1;
    Py_ssize_t pos = 0;
    for (int k = 0; k < c->nat; k++) {
        memcpy(o->p + o->len, c->text + pos, c->at[k] - pos);
        o->len += c->at[k] - pos;
        pos = c->at[k];
        long long f = frac;
        for (int j = 8; j >= 0; j--) { o->p[o->len + j] = (char)('0' + f % 10); f /= 10; }
        o->len += 9;
    }
    memcpy(o->p + o->len, c->text + pos, c->len - pos);
    o->len += c->len - pos;
    return 1;
}

/* A str value's text: surrogates as Python's "backslashreplace" writes them. */
static int
put_str(Buf *o, const Val *v)
{
    if (!v->surrogates)
        return buf_put(o, v->s, v->n);
    for (Py_ssize_t i = 0; i < v->n;) {
        if (v->s[i] == 0xed && v->s[i + 1] >= 0xa0) {
            unsigned cp = ((v->s[i] & 0x0f) << 12) | ((v->s[i + 1] & 0x3f) << 6) | (v->s[i + 2] & 0x3f);
            char tmp[8];
            snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            if (buf_put(o, tmp, 6) < 0) return -1;
            i += 3;
        }
        else {
            if (buf_put(o, v->s + i, 1) < 0) return -1;
            i++;
        }
    }
    return 0;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                               1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};

/* repr(d) for the common floats, without the general shortest-digits search:
 * d in [1e-4, 2**53) (where repr uses fixed notation) that is m / 10**k for
 * the least k with an integer m below 2**53. With at most 15 significant
 * digits, m / 10**k is the only k-decimal string that reads back as d, so it
 * is the shortest one, which is what repr writes. 1 written, 0 not such a
 * float (PyOS_double_to_string does it), -1 error. */
static int
put_short_float(Buf *o, double d)
{
    double a = d < 0 ? -d : d;
    if (!(a >= 1e-4 && a < 9007199254740992.0))
        return 0;
    for (int k = 0; k < 20; k++) {
        double scaled = a * POW10[k];
        if (scaled >= 1e15)   /* more than 15 significant digits: not sure to be shortest */
            return 0;
        /* The nearest integer (scaled < 1e15: exact in a double and a long long). A
         * candidate m has m / 10**k == a, so scaled is within a few ulps of m: others
         * are passed over without the division that checks a candidate. */
        unsigned long long u = (unsigned long long)(scaled + 0.5);
        double m = (double)u;
        if (m - scaled > scaled * 1e-15 || scaled - m > scaled * 1e-15 || m / POW10[k] != a)
            continue;
        char tmp[40];
        int n = 0;
        for (int j = 0; j < k; j++) { tmp[n++] = (char)('0' + u % 10); u /= 10; }
        tmp[n++] = '.';
        if (k == 0) { tmp[0] = '0'; tmp[1] = '.'; n = 2; }
        do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
        if (d < 0) tmp[n++] = '-';
        if (buf_reserve(o, n) < 0) return -1;
        while (n) o->p[o->len++] = tmp[--n];
        return 1;
    }
    return 0;
}

/* 1 rendered, 0 not a value rendered here, -1 error. */
static int
put_value(Buf *o, const Val *v)
{
    switch (v->kind) {
    case V_NIL: return buf_put(o, "None", 4) < 0 ? -1 : 1;
    case V_TRUE: return buf_put(o, "True", 4) < 0 ? -1 : 1;
    case V_FALSE: return buf_put(o, "False", 5) < 0 ? -1 : 1;
    case V_INT: return buf_int(o, v->i) < 0 ? -1 : 1;
    case V_UINT: return buf_uint(o, v->u, 1, 0) < 0 ? -1 : 1;
    case V_STR: return put_str(o, v) < 0 ? -1 : 1;
    case V_F64: {
        int r = put_short_float(o, v->d);
        if (r != 0) return r;
        char *s = PyOS_double_to_string(v->d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (s == NULL) return -1;
        r = buf_put(o, s, (Py_ssize_t)strlen(s));
        PyMem_Free(s);
        return r < 0 ? -1 : 1;
    }
    default: return 0;
    }
}

/* ---- JSON of values, as bread.export.value_json writes it ------------------ */

/* A JSON string of UTF-8 text, escaped as Python's json does with ensure_ascii=False. */
static int
put_json_text(Buf *o, const unsigned char *s, Py_ssize_t n)
{
    if (buf_reserve(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            if (buf_reserve(o, 1) < 0) return -1;
            o->p[o->len++] = (char)c;
            continue;
        }
        char tmp[8];
        int k;
        switch (c) {
        case '"': k = snprintf(tmp, sizeof tmp, "\\\""); break;
        case '\\': k = snprintf(tmp, sizeof tmp, "\\\\"); break;
        case '\n': k = snprintf(tmp, sizeof tmp, "\\n"); break;
        case '\r': k = snprintf(tmp, sizeof tmp, "\\r"); break;
        case '\t': k = snprintf(tmp, sizeof tmp, "\\t"); break;
        case '\b': k = snprintf(tmp, sizeof tmp, "\\b"); break;
        case '\f': k = snprintf(tmp, sizeof tmp, "\\f"); break;
        default: k = snprintf(tmp, sizeof tmp, "\\u%04x", c);
        }
        if (buf_put(o, tmp, k) < 0) return -1;
    }
    if (buf_reserve(o, 1) < 0) return -1;
    o->p[o->len++] = '"';
    return 0;
}

#define SAFE_INT (1LL << 53)

/* 1 written, 0 Python must write it ($-objects, surrogates), -1 error. */
static int
put_json_value(Buf *o, const Val *v)
{
    switch (v->kind) {
    case V_NIL: return buf_put(o, "null", 4) < 0 ? -1 : 1;
    case V_TRUE: return buf_put(o, "true", 4) < 0 ? -1 : 1;
    case V_FALSE: return buf_put(o, "false", 5) < 0 ? -1 : 1;
    case V_INT:
        if (v->i < -SAFE_INT || v->i > SAFE_INT) return 0;
        return buf_int(o, v->i) < 0 ? -1 : 1;
    case V_STR:
        if (v->surrogates) return 0;
        return put_json_text(o, v->s, v->n) < 0 ? -1 : 1;
    case V_F64:
        if (!isfinite(v->d)) return 0;
        return put_value(o, v);
    default: return 0;   /* V_UINT (beyond 53 bits), rich values */
    }
}

/* The args and fields columns of an event: [positional...] and {name: value...}.
 * 1 written, 0 Python must write them, -1 error. */
static int
put_json_args(Buf *ja, Buf *jf, Source *src, const Val *args, Py_ssize_t nargs)
{
    PyObject *names = src->names;
    Py_ssize_t nn = names != NULL ? PyTuple_GET_SIZE(names) : 0;
    Py_ssize_t npos = nn && nargs >= nn ? nargs - nn : nargs;
    if (buf_put(ja, "[", 1) < 0) return -1;
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (i && buf_put(ja, ",", 1) < 0) return -1;
        int r = put_json_value(ja, &args[i]);
        if (r <= 0) return r;
    }
    if (buf_put(ja, "]", 1) < 0 || buf_put(jf, "{", 1) < 0) return -1;
    if (npos < nargs) {
        for (Py_ssize_t j = 0; j < nn; j++) {
            PyObject *name = PyTuple_GET_ITEM(names, j);
            for (Py_ssize_t k = 0; k < j; k++)   /* a name given twice: Python's dict */
                if (PyUnicode_Compare(name, PyTuple_GET_ITEM(names, k)) == 0) return 0;
            Py_ssize_t len;
            const char *u = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len) : NULL;
            if (u == NULL) { PyErr_Clear(); return 0; }
            if ((j && buf_put(jf, ",", 1) < 0) || put_json_text(jf, (const unsigned char *)u, len) < 0
                || buf_put(jf, ":", 1) < 0)
                return -1;
            int r = put_json_value(jf, &args[npos + j]);
            if (r <= 0) return r;
        }
    }
    return buf_put(jf, "}", 1) < 0 ? -1 : 1;
}

/* The bidirectional format character (bread.render.BIDI_FORMATS) whose UTF-8 starts at
 * s[i]: its length (2 or 3), its code point in *cp; 0 for none. */
static int
bidi_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, unsigned *cp)
{
    if (s[i] == 0xd8 && i + 1 < n && s[i + 1] == 0x9c) { *cp = 0x061c; return 2; }
    if (s[i] != 0xe2 || i + 2 >= n) return 0;
    unsigned c = 0x2000 | ((unsigned)(s[i + 1] & 0x3f) << 6) | (s[i + 2] & 0x3f);
    if ((s[i + 1] != 0x80 && s[i + 1] != 0x81) || (s[i + 2] & 0xc0) != 0x80) return 0;
    if (c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e)
        || (c >= 0x2066 && c <= 0x2069)) {
        *cp = c;
        return 3;
    }
    return 0;
}

/* Control characters as bread.render.escape_controls writes them, over UTF-8: C0 (but tab),
 * DEL and C1 as \xNN (\n, \r), the bidirectional format characters as \uNNNN. */
static int
escape_line(Buf *o, Py_ssize_t start)
{
    Py_ssize_t n = o->len - start, extra = 0;
    const unsigned char *s = (const unsigned char *)o->p + start;
    unsigned cp;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        int k;
        if ((c < 0x20 && c != 0x09) || c == 0x7f) extra += (c == 0x0a || c == 0x0d) ? 1 : 3;
        else if (c == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f) extra += 2;
        else if ((c == 0xd8 || c == 0xe2) && (k = bidi_at(s, i, n, &cp)) > 0) {
            extra += 6 - k;
            i += k - 1;
        }
    }
    if (!extra) return 0;
    char *copy = PyMem_Malloc(n ? n : 1);
    if (copy == NULL) { PyErr_NoMemory(); return -1; }
    memcpy(copy, s, n);
    o->len = start;
    if (buf_reserve(o, n + extra) < 0) { PyMem_Free(copy); return -1; }
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)copy;
    char *d = o->p + o->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        int k;
        cp = c;
        int esc = (c < 0x20 && c != 0x09) || c == 0x7f;
        if (c == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) {
            esc = 1;
            cp = u[++i];
        }
        else if ((c == 0xd8 || c == 0xe2) && (k = bidi_at(u, i, n, &cp)) > 0) {
            i += k - 1;
            *d++ = '\\'; *d++ = 'u';
            *d++ = hex[cp >> 12]; *d++ = hex[(cp >> 8) & 15];
            *d++ = hex[(cp >> 4) & 15]; *d++ = hex[cp & 15];
            continue;
        }
        if (!esc) { *d++ = (char)c; continue; }
        *d++ = '\\';
        if (cp == 0x0a) *d++ = 'n';
        else if (cp == 0x0d) *d++ = 'r';
        else { *d++ = 'x'; *d++ = hex[cp >> 4]; *d++ = hex[cp & 15]; }
    }
    o->len = d - o->p;
    PyMem_Free(copy);
    return 0;
}

/* The message of an event: 1 done, 0 Python must render it (the buffer may
 * hold part of it), -1 error. Keyword fields are the last nnames args. */
/* Longest message rendered here, in bytes; a longer one is Python's to cut
 * (blogformat.placeholders.MAX_MESSAGE characters, never more than as many bytes). */
#define MAX_MESSAGE (1 << 20)

static int
put_message(Buf *o, const Source *src, const Val *args, Py_ssize_t nargs)
{
    if (src->msg == NULL) return 0;
    Py_ssize_t start = o->len;
    Py_ssize_t npos = nargs, nn = src->nnames;
    int have_fields = nn && nargs >= nn;
    if (have_fields) npos = nargs - nn;
    for (Py_ssize_t k = 0; k < src->nmsg; k++) {
        const Item *m = &src->msg[k];
        if (m->code == MI_LIT) {
            if (buf_put(o, m->s, m->n) < 0) return -1;
            continue;
        }
        Py_ssize_t at;
        if (m->code == MI_POS) {
            if (m->index >= npos) return 0;
            at = m->index;
        }
        else {
            if (!have_fields || m->index >= nn) return 0;
            at = npos + m->index;
        }
        int r = put_value(o, &args[at]);
        if (r <= 0) return r;
        if (o->len - start > MAX_MESSAGE) return 0;
    }
    return o->len - start > MAX_MESSAGE ? 0 : 1;
}

/* Render one event; 1 done, 0 Python must render it, -1 error. On 0 the
 * buffer is as it was. */
static int
render_event(Renderer *self, long long wid, long long sid, long long clock,
             const Val *args, Py_ssize_t nargs, int simple)
{
    Buf *o = &self->out;
    Py_ssize_t start = o->len;
    if (!simple || sid < 0 || sid >= MAX_IDS || wid < 0 || wid >= MAX_IDS) return 0;
    Source *src = self->sources[sid];
    Writer *w = &self->writers[wid];
    if (src == NULL || w->name == NULL) return 0;
    if (src->pre != NULL && buf_put(o, src->pre, src->npre) < 0) return -1;
    Py_ssize_t text = o->len;   /* the line's own text starts here: what is escaped */
    for (Py_ssize_t i = 0; i < src->nitems; i++) {
        Item *it = &src->items[i];
        int r = 1;
        switch (it->code) {
        case IT_LIT: r = buf_put(o, it->s, it->n) < 0 ? -1 : 1; break;
        case IT_DATE: r = put_date(self, o, clock, 0); break;
        case IT_UTC: r = put_date(self, o, clock, 1); break;
        case IT_CLOCK: r = buf_int(o, clock) < 0 ? -1 : 1; break;
        case IT_WNAME: r = buf_put(o, w->name, w->nname) < 0 ? -1 : 1; break;
        case IT_WID: r = buf_put(o, w->id, w->nid) < 0 ? -1 : 1; break;
        case IT_MSG: r = put_message(o, src, args, nargs); break;
        default: r = 0;
        }
        if (r <= 0) {
            o->len = start;
            return r;
        }
    }
    if (self->escape && escape_line(o, text) < 0) return -1;
    if (src->post != NULL && buf_put(o, src->post, src->npost) < 0) return -1;
    if (buf_put(o, "\n", 1) < 0) return -1;
    return 1;
}

/* Columns mode: one row per event, appended to the column buffers. 1 done,
 * 0 the rest of the frame is Python's (a time beyond 64 bits), -1 error. */
static int
column_event(Renderer *self, long long wid, long long sid, long long clock, const Val *args,
             Py_ssize_t nargs, int simple, const unsigned char *ev, Py_ssize_t evlen)
{
    long long ns;
    if (!event_ns(self, clock, &ns)) return 0;
    Source *src = sid >= 0 && sid < MAX_IDS ? self->sources[sid] : NULL;
    Writer *w = wid >= 0 && wid < MAX_IDS ? &self->writers[wid] : NULL;
    Buf *m = &self->col[C_MSG], *ja = &self->col[C_ARGS], *jf = &self->col[C_FIELDS];
    Py_ssize_t start = m->len, astart = ja->len, fstart = jf->len;
    int r = src != NULL && w != NULL && w->name != NULL;
    if (r && self->want_message)
        r = simple ? put_message(m, src, args, nargs) : 0;
    if (r > 0 && self->want_json)
        r = simple ? put_json_args(ja, jf, src, args, nargs) : 0;
    if (r < 0) return -1;
    if (r == 0) {   /* Python: the texts, and the count of unknown sources and writers */
        m->len = start;
        ja->len = astart;
        jf->len = fstart;
        PyObject *texts = PyObject_CallFunction(self->message_fallback, "y#LL", (const char *)ev,
                                                evlen, wid, clock);
        if (texts == NULL) return -1;
        if (texts == Py_None) {   /* left out by the filter: no row */
            Py_DECREF(texts);
            return 1;
        }
        if (!PyTuple_Check(texts) || PyTuple_GET_SIZE(texts) != 3
            || !PyBytes_Check(PyTuple_GET_ITEM(texts, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(texts, 1))
            || !PyBytes_Check(PyTuple_GET_ITEM(texts, 2))) {
            Py_DECREF(texts);
            PyErr_SetString(PyExc_TypeError,
                            "message_fallback must return None or (message, args, fields) bytes");
            return -1;
        }
        Buf *to[3] = {m, ja, jf};
        int rc = 0;
        for (int k = 0; k < 3 && rc == 0; k++) {
            PyObject *b = PyTuple_GET_ITEM(texts, k);
            if (k == 0 ? self->want_message : self->want_json)
                rc = buf_put(to[k], PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
        }
        Py_DECREF(texts);
        if (rc < 0) return -1;
    }
    long long row[4] = {clock, ns, sid, wid};
    for (int k = 0; k < 4; k++)
        if (buf_put(&self->col[k], &row[k], sizeof(long long)) < 0) return -1;
    long long ends[3] = {m->len, ja->len, jf->len};
    if (buf_put(&self->col[C_MSGOFF], &ends[0], sizeof(long long)) < 0
        || buf_put(&self->col[C_ARGSOFF], &ends[1], sizeof(long long)) < 0
        || buf_put(&self->col[C_FIELDSOFF], &ends[2], sizeof(long long)) < 0)
        return -1;
    self->rows++;
    return 1;
}

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
 * 1 done, 0 Python must make it (the caller asks event_fallback), -1 error. */
static int
event_object(Renderer *self, long long wid, long long sid, long long clock, const Val *args,
             Py_ssize_t nargs, int simple)
{
    long long ns;
    if (!simple || !event_ns(self, clock, &ns)) return 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (args[i].kind == V_OTHER) return 0;   /* lists, maps, bin, ext: msgpack decodes them */
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

/* True if the filter leaves this event out: its source or writer is left out, or
 * its time is outside the window. An unknown source or writer, or a time beyond
 * 64 bits, is left to the Python path, which applies the same filter. */
static inline int
left_out(Renderer *self, long long wid, long long sid, long long clock)
{
    if (sid < 0 || sid >= MAX_IDS || self->sources[sid] == NULL)
        return 0;   /* Python counts the unknown source, then filters */
    if (self->sources[sid]->skip)
        return 1;
    if (wid >= 0 && wid < MAX_IDS && self->writers[wid].name != NULL && self->writers[wid].skip)
        return 1;
    if (self->windowed) {
        long long ns;
        if (event_ns(self, clock, &ns) && (ns < self->since || ns >= self->until))
            return 1;
    }
    return 0;
}

/* The sorted reader's key of an event kept: its time (beyond 64 bits: the least
 * or greatest 64-bit time, as bread.native.clamp does) and where its line ends. */
static int
put_key(Renderer *self, long long clock, Py_ssize_t end)
{
    long long k[2];
    if (!event_ns(self, clock, &k[0])) {
        __int128 t = floordiv(((__int128)clock - self->clock_value) * 1000000000,
                              self->frequency) + self->ns0;
        k[0] = t > LLONG_MAX ? LLONG_MAX : t < LLONG_MIN ? LLONG_MIN : (long long)t;
    }
    k[1] = end;
    return buf_put(&self->keys, k, sizeof k);
}

/* Where render() is in the frame it was given. */
enum { ST_DONE = 0, ST_MORE = 1, ST_PYTHON = 2 };

static void
frame_release(Renderer *self)
{
    if (self->payload != NULL) {
        PyBuffer_Release(&self->view);
        Py_CLEAR(self->payload);
    }
}

/* render(payload) begins an events frame and returns the text of its first
 * events; render(None) returns the next part. At most about max_out bytes per
 * call, so that a frame whose events render to much text never needs more.
 * After each call, `state` says: 0 the frame is done, 1 more to come, 2 Python
 * must read the frame from event `rendered` on (the bytes are not what the
 * Python reader decodes, or not here). */
static PyObject *
walk(Renderer *self, PyObject *arg, int columns)
{
    Buf *o = &self->out;
    o->len = 0;
    if (arg != Py_None) {
        frame_release(self);
        if (PyObject_GetBuffer(arg, &self->view, PyBUF_SIMPLE) < 0) return NULL;
        Py_INCREF(arg);
        self->payload = arg;
        self->rd.p = (const unsigned char *)self->view.buf;
        self->rd.end = self->rd.p + self->view.len;
        self->rendered = 0;
        long long n = read_array(&self->rd);
        Val tmp;
        if (n < 3 || read_int(&self->rd, &self->wid) < 0 || read_int(&self->rd, &self->prev) < 0
            || read_int(&self->rd, &self->left) < 0)
            goto python;
        for (long long k = 3; k < n; k++)
            if (read_value(&self->rd, &tmp, 0) < 0) goto python;
    }
    else if (self->payload == NULL) {
        self->state = ST_DONE;
        return PyBytes_FromStringAndSize("", 0);
    }
    Rd r = self->rd;
    Val args[MAX_ARGS], tmp;
    while (self->left > 0 && (columns == 2 ? PyList_GET_SIZE(self->events) < self->max_rows
                              : columns ? self->rows < self->max_rows : o->len < self->max_out)) {
        const unsigned char *ev_start = r.p;
        long long ne = read_array(&r), sid, delta, prev;
        if (ne < 3 || read_int(&r, &sid) < 0 || read_int(&r, &delta) < 0) goto python;
        long long na = read_array(&r);
        if (na < 0) goto python;
        int simple = na <= MAX_ARGS && ne == 3;
        for (long long a = 0; a < na; a++) {
            Val *v = a < MAX_ARGS ? &args[a] : &tmp;
            if (read_value(&r, v, 1) < 0) goto python;
        }
        for (long long k = 3; k < ne; k++)
            if (read_value(&r, &tmp, 0) < 0) goto python;
        long long ns;   /* a time beyond 64 bits: Python reports it as damage (format.md 4.3) */
        if (__builtin_add_overflow(self->prev, delta, &prev) || !event_ns(self, prev, &ns))
            goto python;
        if (left_out(self, self->wid, sid, prev)) {   /* the filter: nothing to make */
            self->prev = prev;
            self->rd = r;
            self->left--;
            self->rendered++;
            continue;
        }
        if (columns == 2) {
            Py_ssize_t before = PyList_GET_SIZE(self->events);
            int e = event_object(self, self->wid, sid, prev, args, (Py_ssize_t)na, simple);
            if (e < 0) goto error;
            if (e == 0) {
                PyObject *ev = PyObject_CallFunction(self->event_fallback, "y#LL",
                                                     (const char *)ev_start,
                                                     (Py_ssize_t)(r.p - ev_start), self->wid, prev);
                if (ev == NULL) goto error;
                int rc = ev == Py_None ? 0 : PyList_Append(self->events, ev);   /* None: left out */
                Py_DECREF(ev);
                if (rc < 0) goto error;
            }
            if (self->want_keys && PyList_GET_SIZE(self->events) > before
                && put_key(self, prev, 0) < 0)
                goto error;
        }
        else if (columns) {
            int c = column_event(self, self->wid, sid, prev, args, (Py_ssize_t)na, simple,
                                 ev_start, (Py_ssize_t)(r.p - ev_start));
            if (c < 0) goto error;
            if (c == 0) goto python;
        }
        else {
        Py_ssize_t before = o->len;
        int done = render_event(self, self->wid, sid, prev, args, (Py_ssize_t)na, simple);
        if (done < 0) goto error;
        if (done == 0) {
            PyObject *line = PyObject_CallFunction(self->fallback, "y#LL", (const char *)ev_start,
                                                   (Py_ssize_t)(r.p - ev_start), self->wid, prev);
            if (line == NULL) goto error;
            if (!PyBytes_Check(line)) {
                Py_DECREF(line);
                PyErr_SetString(PyExc_TypeError, "fallback must return bytes");
                goto error;
            }
            int rc = buf_put(o, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line));
            Py_DECREF(line);
            if (rc < 0) goto error;
        }
        if (self->want_keys && o->len > before && put_key(self, prev, o->len) < 0)
            goto error;
        }
        self->prev = prev;
        self->rd = r;
        self->left--;
        self->rendered++;
    }
    self->state = self->left > 0 ? ST_MORE : ST_DONE;
    if (self->state == ST_DONE) frame_release(self);
    PyObject *res = PyBytes_FromStringAndSize(o->p ? o->p : "", o->len);
    o->len = 0;
    return res;
python:   /* what was rendered of this frame so far is returned; Python reads the rest */
    self->state = ST_PYTHON;
    frame_release(self);
    res = PyBytes_FromStringAndSize(o->p ? o->p : "", o->len);
    o->len = 0;
    return res;
error:
    frame_release(self);
    self->state = ST_DONE;
    o->len = 0;
    return NULL;
}

static PyObject *
renderer_render(Renderer *self, PyObject *arg)
{
    return walk(self, arg, 0);
}

/* columns(payload or None): as render(), but each event becomes a row of the
 * column buffers (take_columns()); returns how many rows this call added. A
 * call stops at max_rows rows in the buffers (state 1). */
static PyObject *
renderer_columns(Renderer *self, PyObject *arg)
{
    Py_ssize_t before = self->rows;
    PyObject *r = walk(self, arg, 1);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    return PyLong_FromSsize_t(self->rows - before);
}

/* take_columns() -> (rows, clock, ns, source id, writer id, message data,
 * message offsets, args data, offsets, fields data, offsets): int64
 * native-endian buffers, the text columns' UTF-8 and their offsets (rows + 1 of
 * them, the first 0); the buffers start afresh. */
static PyObject *
renderer_take_columns(Renderer *self, PyObject *unused)
{
    PyObject *r = PyTuple_New(1 + C_NCOLS);
    if (r == NULL) return NULL;
    PyObject *rows = PyLong_FromSsize_t(self->rows);
    if (rows == NULL) { Py_DECREF(r); return NULL; }
    PyTuple_SET_ITEM(r, 0, rows);
    for (int k = 0; k < C_NCOLS; k++) {
        Buf *b = &self->col[k];
        PyObject *v;
        if (IS_OFFSETS(k)) {
            v = PyBytes_FromStringAndSize(NULL, b->len + (Py_ssize_t)sizeof(long long));
            if (v != NULL) {
                memset(PyBytes_AS_STRING(v), 0, sizeof(long long));
                if (b->len) memcpy(PyBytes_AS_STRING(v) + sizeof(long long), b->p, b->len);
            }
        }
        else
            v = PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
        if (v == NULL) { Py_DECREF(r); return NULL; }
        PyTuple_SET_ITEM(r, 1 + k, v);
    }
    for (int k = 0; k < C_NCOLS; k++) self->col[k].len = 0;
    self->rows = 0;
    return r;
}

/* walk() in the events mode: the list of Events. */
static PyObject *
walk_list(Renderer *self, PyObject *payload, int mode)
{
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    Py_XSETREF(self->events, list);
    PyObject *r = walk(self, payload, mode);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    list = self->events;
    self->events = NULL;
    return list;
}

/* events(payload or None, offset) -> list of Events: as render(), one Event per
 * event (at most max_rows per call); then see state. */
static PyObject *
renderer_events(Renderer *self, PyObject *args)
{
    PyObject *payload, *offset, *origin = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:events", &payload, &offset, &origin)) return NULL;
    if (self->event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_event_type() first");
        return NULL;
    }
    Py_INCREF(offset);
    Py_XSETREF(self->frame_offset, offset);
    Py_INCREF(origin);
    Py_XSETREF(self->origin, origin);
    return walk_list(self, payload, 2);
}

/* keyed(payload or None) -> (text, keys, writer id): as render(), with the key of
 * each line (bread.merge.Merger's: native int64 time, end of the line in text) for
 * merging rendered lines by time; then see state. */
static PyObject *
renderer_keyed(Renderer *self, PyObject *arg)
{
    self->keys.len = 0;
    self->want_keys = 1;
    PyObject *text = walk(self, arg, 0);
    self->want_keys = 0;
    if (text == NULL) return NULL;
    return Py_BuildValue("Ny#L", text, self->keys.p ? self->keys.p : "", self->keys.len,
                         self->wid);
}

/* take_keys() -> bytes: the keys (time, 0) of the events that events() gave since
 * the last call, while want_keys is set. */
static PyObject *
renderer_take_keys(Renderer *self, PyObject *unused)
{
    PyObject *r = PyBytes_FromStringAndSize(self->keys.p ? self->keys.p : "", self->keys.len);
    self->keys.len = 0;
    return r;
}

/* The offset of a slot (a T_OBJECT_EX member) of a class. */
static int
slot_offset(PyObject *type, const char *name, Py_ssize_t *off)
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

/* set_event_type(Event, fallback): the class whose slots events() fills, in the
 * order source, writer_prop, clock, ns, tz, args, _fields, _texts, _message, offset, origin;
 * fallback(event bytes, writer id, clock) makes the Events C leaves to Python. */
static PyObject *
renderer_set_event_type(Renderer *self, PyObject *args)
{
    static const char *names[11] = {"source", "writer_prop", "clock", "ns", "tz", "args",
                                    "_fields", "_texts", "_message", "offset", "origin"};
    PyObject *type, *fallback, *utc;
    if (!PyArg_ParseTuple(args, "O!OO:set_event_type", &PyType_Type, &type, &fallback, &utc))
        return NULL;
    for (int k = 0; k < 11; k++)
        if (slot_offset(type, names[k], &self->off[k]) < 0) return NULL;
    Py_INCREF(type); Py_XSETREF(self->event_type, type);
    Py_INCREF(fallback); Py_XSETREF(self->event_fallback, fallback);
    Py_INCREF(utc); Py_XSETREF(self->utc_tz, utc);
    if (self->empty_texts == NULL && (self->empty_texts = PyDict_New()) == NULL) return NULL;
    if (self->tz == NULL) self->tz = self->utc_tz;
    Py_RETURN_NONE;
}

/* Renderer(date_items, fallback, escape) */
static PyObject *
renderer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"date_items", "fallback", "escape", "message_fallback", NULL};
    PyObject *date, *fallback, *message_fallback = Py_None;
    int escape;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOp|O:Renderer", kwlist, &date, &fallback,
                                     &escape, &message_fallback))
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
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(message_fallback);
    self->message_fallback = message_fallback;
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
    Py_VISIT(self->message_fallback);
    Py_VISIT(self->event_type);
    Py_VISIT(self->event_fallback);
    Py_VISIT(self->utc_tz);
    Py_VISIT(self->empty_texts);
    Py_VISIT(self->events);
    Py_VISIT(self->frame_offset);
    Py_VISIT(self->origin);
    return 0;
}

static int
renderer_clear(Renderer *self)
{
    frame_release(self);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->date_hold);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->message_fallback);
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->event_fallback);
    Py_CLEAR(self->utc_tz);
    Py_CLEAR(self->empty_texts);
    Py_CLEAR(self->events);
    Py_CLEAR(self->frame_offset);
    Py_CLEAR(self->origin);
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
    PyMem_Free(self->keys.p);
    for (int k = 0; k < C_NCOLS; k++) PyMem_Free(self->col[k].p);
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
    {"render", (PyCFunction)renderer_render, METH_O,
     "render(payload) begins a frame, render(None) continues it -> bytes; then see state"},
    {"columns", (PyCFunction)renderer_columns, METH_O,
     "columns(payload or None) -> rows added to the column buffers; then see state"},
    {"events", (PyCFunction)renderer_events, METH_VARARGS,
     "events(payload or None, frame offset[, origin]) -> list of Events; then see state"},
    {"keyed", (PyCFunction)renderer_keyed, METH_O,
     "keyed(payload or None) -> (text, keys: int64 (time, line end) pairs, writer id); "
     "then see state"},
    {"take_keys", (PyCFunction)renderer_take_keys, METH_NOARGS,
     "take_keys() -> int64 (time, 0) pairs of the events given since, with want_keys"},
    {"set_event_type", (PyCFunction)renderer_set_event_type, METH_VARARGS,
     "set_event_type(Event, fallback, utc zone)"},
    {"take_columns", (PyCFunction)renderer_take_columns, METH_NOARGS,
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
     "rows the column buffers hold before columns() stops (state 1)"},
    {"want_message", T_INT, offsetof(Renderer, want_message), 0,
     "columns(): render the message column"},
    {"want_json", T_INT, offsetof(Renderer, want_json), 0,
     "columns(): render the args and fields columns (JSON)"},
    {"want_keys", T_INT, offsetof(Renderer, want_keys), 0,
     "events(): note each event's key (take_keys())"},
    {NULL}
};

static PyTypeObject RendererType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._speedups.Renderer",
    .tp_basicsize = sizeof(Renderer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Renderer(date_items, fallback, escape): events frames to text lines.",
    .tp_new = renderer_new,
    .tp_traverse = (traverseproc)renderer_traverse,
    .tp_clear = (inquiry)renderer_clear,
    .tp_dealloc = (destructor)renderer_dealloc,
    .tp_methods = renderer_methods,
    .tp_members = renderer_members,
};

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
        r = put_short_float(&b, PyFloat_AS_DOUBLE(v));
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
            int f = put_short_float(o, PyFloat_AS_DOUBLE(v));
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
static PyObject *
module_message(PyObject *module, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[1]) || !PyDict_Check(a[2])
        || !PyTuple_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError, "message(plan: tuple, args: tuple, fields: dict, names: tuple)");
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
    Py_ssize_t size = 0;   /* characters so far: a message longer than MAX_MESSAGE is Python's to cut */
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
        text = module_message(NULL, margs, 4);
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
getter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
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
    if (slot_offset(evtype, "source", &self->off_source) < 0
        || slot_offset(evtype, "args", &self->off_args) < 0
        || slot_offset(evtype, "_fields", &self->off_fields) < 0
        || slot_offset(evtype, "_texts", &self->off_texts) < 0
        || slot_offset(evtype, "_message", &self->off_message) < 0) {
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

/* gather(ids, table, default, text) -> (values, offsets, validity) or None: the
 * column of a call site's or a writer's property for each row, its id in ids
 * (native int64s); table maps an id to the value (text: UTF-8 bytes; else an
 * int within 64 bits), or None for a null; an id not in table takes default.
 * text: values are the UTF-8 data and offsets int32 (rows + 1), None if the
 * data would not fit 31 bits; else values are int64s and offsets None.
 * validity is Arrow's bitmap, None without a null. */
#define GATHER_CACHE 256
static PyObject *
module_gather(PyObject *module, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyDict_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "gather(ids, table: dict, default, text)");
        return NULL;
    }
    int text = PyObject_IsTrue(a[3]);
    if (text < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(long long);
    const unsigned char *ids = view.buf;
    struct { long long id; PyObject *v; int used; } cache[GATHER_CACHE];
    memset(cache, 0, sizeof cache);
    Buf data = {0}, offs = {0}, valid = {0};
    PyObject *res = NULL;
    int nulls = 0;
    if (buf_reserve(&valid, (n + 7) / 8 + 1) < 0) goto done;
    memset(valid.p, 0xff, (size_t)((n + 7) / 8 + 1));
    valid.len = (n + 7) / 8;
    if (text) {
        int zero = 0;
        if (buf_reserve(&offs, (n + 1) * (Py_ssize_t)sizeof(int)) < 0
            || buf_put(&offs, &zero, sizeof zero) < 0)
            goto done;
    }
    else if (buf_reserve(&data, n * (Py_ssize_t)sizeof(long long)) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long id;
        memcpy(&id, ids + i * sizeof(long long), sizeof id);
        unsigned slot = (unsigned)((unsigned long long)id % GATHER_CACHE);
        PyObject *v;
        if (cache[slot].used && cache[slot].id == id)
            v = cache[slot].v;
        else {
            PyObject *key = PyLong_FromLongLong(id);
            if (key == NULL) goto done;
            v = PyDict_GetItemWithError(a[1], key);   /* borrowed: the dict outlives the call */
            Py_DECREF(key);
            if (v == NULL) {
                if (PyErr_Occurred()) goto done;
                v = a[2];
            }
            if (v != Py_None && (text ? !PyBytes_Check(v) : !PyLong_Check(v))) {
                PyErr_SetString(PyExc_TypeError, text ? "gather: values must be bytes or None"
                                                      : "gather: values must be int or None");
                goto done;
            }
            cache[slot].id = id;
            cache[slot].v = v;
            cache[slot].used = 1;
        }
        if (v == Py_None) {
            valid.p[i >> 3] &= (char)~(1 << (i & 7));
            nulls = 1;
        }
        if (text) {
            if (v != Py_None) {
                if (PyBytes_GET_SIZE(v) > INT32_MAX - data.len) {   /* beyond Arrow's string */
                    res = Py_NewRef(Py_None);
                    goto done;
                }
                if (buf_put(&data, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)) < 0) goto done;
            }
            int end = (int)data.len;
            if (buf_put(&offs, &end, sizeof end) < 0) goto done;
        }
        else {
            long long x = 0;
            if (v != Py_None) {
                x = PyLong_AsLongLong(v);
                if (x == -1 && PyErr_Occurred()) goto done;
            }
            if (buf_put(&data, &x, sizeof x) < 0) goto done;
        }
    }
    PyObject *d = PyBytes_FromStringAndSize(data.p ? data.p : "", data.len);
    PyObject *o = text ? PyBytes_FromStringAndSize(offs.p, offs.len) : Py_NewRef(Py_None);
    PyObject *va = nulls ? PyBytes_FromStringAndSize(valid.p, valid.len) : Py_NewRef(Py_None);
    if (d != NULL && o != NULL && va != NULL)
        res = PyTuple_Pack(3, d, o, va);
    Py_XDECREF(d);
    Py_XDECREF(o);
    Py_XDECREF(va);
done:
    PyBuffer_Release(&view);
    PyMem_Free(data.p);
    PyMem_Free(offs.p);
    PyMem_Free(valid.p);
    return res;
}

static PyMethodDef module_methods[] = {
    {"gather", (PyCFunction)(void (*)(void))module_gather, METH_FASTCALL,
     "gather(ids, table, default, text) -> (values, offsets, validity) or None"},
    {"message", (PyCFunction)(void (*)(void))module_message, METH_FASTCALL,
     "message(plan, args, fields, names) -> str, or None if Python must render it"},
    {NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "bread._speedups", "bread's C fast path for reading.", -1, module_methods
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_template = PyUnicode_InternFromString("template");
    str_field_names = PyUnicode_InternFromString("field_names");
    if (str_template == NULL || str_field_names == NULL) return NULL;
    if (PyType_Ready(&RendererType) < 0 || PyType_Ready(&MessageGetterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_MESSAGE", MAX_MESSAGE) < 0
        || PyModule_AddObjectRef(m, "Renderer", (PyObject *)&RendererType) < 0
        || PyModule_AddObjectRef(m, "MessageGetter", (PyObject *)&MessageGetterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
