/* bread/decode/_decode.c: the walk over one events frame (docs/format.md 5), its twins
 * blogformat/entries.py (decode_events) and the EventStream's filter
 * (bread/decode/filters.py): each event decoded with blogformat/mpread.h, the filter
 * applied, then handed to the output the call gives (an EventFn: text in
 * bread/sinks/_lines.c, an Event in bread/sinks/_events.c, a row of columns in
 * bread/sinks/_batches.c); what an output leaves to Python goes to the fallback, here for
 * all of them.
 */
#include "_extension.h"

#include <math.h>
#include <string.h>

#include "_message.h"
#include "mpwrite.h"

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
 * or greatest 64-bit time, as bread.events.clamp64 does) and where its line ends. */
int
bread_put_key(Renderer *self, long long clock, Py_ssize_t end)
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

static int columns_event_bytes(Renderer *self, const unsigned char **ev, Py_ssize_t *evlen);

/* fallback(event bytes, writer id, clock): what the output makes of an event C leaves to
 * Python, or None if the filter leaves it out. */
PyObject *
bread_fallback(Renderer *self, const unsigned char *ev, Py_ssize_t evlen, long long wid,
               long long clock)
{
    if (ev == NULL) {   /* an event of a columnar frame: its bytes, made */
        if (columns_event_bytes(self, &ev, &evlen) < 0) return NULL;
    }
    return PyObject_CallFunction(self->fallback, "y#LL", (const char *)ev, evlen, wid, clock);
}

static PyObject *str_payload, *str_offset;

int
bread_walk_init(void)
{
    str_payload = PyUnicode_InternFromString("payload");
    str_offset = PyUnicode_InternFromString("offset");
    return str_payload != NULL && str_offset != NULL ? 0 : -1;
}

void
bread_frame_release(Renderer *self)
{
    bread_columns_release(self);
    if (self->payload != NULL) {
        PyBuffer_Release(&self->view);
        Py_CLEAR(self->payload);
    }
}

/* A frame begun: the one before let go of, its payload held (payload, view), its offset
 * kept; -1 error. */
static int
begin_frame(Renderer *self, PyObject *frame)
{
    bread_frame_release(self);
    PyObject *arg = PyObject_GetAttr(frame, str_payload);
    if (arg == NULL) return -1;
    PyObject *offset = PyObject_GetAttr(frame, str_offset);
    if (offset == NULL) { Py_DECREF(arg); return -1; }
    Py_XSETREF(self->frame_offset, offset);
    if (PyObject_GetBuffer(arg, &self->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(arg);
        return -1;
    }
    self->payload = arg;
    return 0;
}

/* The walk: walk(frame) begins an events frame and hands its first events to `each`;
 * walk(None) goes on with the next ones. A call stops after about max_out bytes of text
 * or max_rows rows, so that a frame whose events make much never needs more. After each
 * call, `state` says: 0 the frame is done, 1 more to come, 2 Python must read the frame
 * from event `rendered` on (the bytes are not what the Python reader decodes, or not
 * here). Returns the text made (b"" for the outputs that make none). */
PyObject *
bread_walk(Renderer *self, PyObject *frame, EventFn each)
{
    Buf *o = &self->out;
    o->len = 0;
    if (frame != Py_None) {
        if (begin_frame(self, frame) < 0) return NULL;
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
    while (self->left > 0 && self->rows < self->max_rows && o->len < self->max_out) {
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
        if (!left_out(self, self->wid, sid, prev)) {   /* the filter: else nothing to make */
            int done = each(self, self->wid, sid, prev, args, (Py_ssize_t)na, simple, ev_start,
                            (Py_ssize_t)(r.p - ev_start));
            if (done < 0) goto error;
            if (done == 0) goto python;
        }
        self->prev = prev;
        self->rd = r;
        self->left--;
        self->rendered++;
    }
    self->state = self->left > 0 ? ST_MORE : ST_DONE;
    if (self->state == ST_DONE) bread_frame_release(self);
    PyObject *res = PyBytes_FromStringAndSize(o->p ? o->p : "", o->len);
    o->len = 0;
    return res;
python:   /* what was rendered of this frame so far is returned; Python reads the rest */
    self->state = ST_PYTHON;
    bread_frame_release(self);
    res = PyBytes_FromStringAndSize(o->p ? o->p : "", o->len);
    o->len = 0;
    return res;
error:
    bread_frame_release(self);
    self->state = ST_DONE;
    o->len = 0;
    return NULL;
}

/* ---- columnar frames (docs/format.md 5.5), twin blogformat/columnframes.py ------------- */

/* The column codings (blogformat.columnframes). */
enum { CC_INTS = 0, CC_CLOCKS = 1, CC_DECIMALS = 2, CC_DOUBLES = 3, CC_STRINGS = 4,
       CC_PACKED = 5, CC_SAME = 6, CC_PLAIN = 7, CC_DELTAS = 8 };
#define COL_MAX_EVENTS (1 << 20)
#define COL_MAX_VALUES 256
#define COL_MAX_SCALE 15
#define EXACT53 9007199254740992LL

/* A value of a columnar frame as the frame's decoding keeps it until the walk hands it on
 * (as a Val): half a Val's bytes, for a frame's values are more than the caches hold (its
 * number, and its bytes or its text when it has them; within a payload, n fits 31 bits). */
typedef struct {
    union { long long i; unsigned long long u; double d; } x;
    const unsigned char *s;
    int32_t n;
    unsigned char kind, surrogates;
} CVal;

static inline void
cval_set(CVal *c, const Val *v)
{
    c->kind = (unsigned char)v->kind;
    c->surrogates = (unsigned char)v->surrogates;
    c->s = v->s;
    c->n = (int32_t)v->n;
    if (v->kind == V_UINT) c->x.u = v->u;
    else if (v->kind == V_F64) c->x.d = v->d;
    else c->x.i = v->i;
}

static inline void
cval_get(Val *v, const CVal *c)
{
    v->kind = c->kind;
    v->surrogates = c->surrogates;
    v->s = c->s;
    v->n = c->n;
    v->i = c->x.i;
    v->u = c->x.u;
    v->d = c->x.d;
}

typedef struct { long long sid; Py_ssize_t width, count; CVal *vals; } ColGroup;

/* Memory kept from one columnar frame to the next (fresh pages for each frame were a tenth
 * of a columnar read's time, the kernel zeroing them): at least `size` bytes, its old
 * contents not kept; NULL with MemoryError. */
typedef struct { void *p; size_t cap; } Spare;

static void *
spare(Spare *s, size_t size)
{
    if (size > s->cap) {
        PyMem_Free(s->p);
        s->p = PyMem_Malloc(size ? size : 1);
        s->cap = s->p != NULL ? size : 0;
        if (s->p == NULL) PyErr_NoMemory();
    }
    return s->p;
}

/* A columnar frame decoded: each event's ids, clock, texts and values (its group's row),
 * and the order the walk gives them in: the reader of the frame as events payloads
 * (columnframes.events_payloads) reads one writer's events after another's, the writers
 * in the order of their first event, each one's in frame order. */
struct ColFrame {
    Py_ssize_t count, pos;               /* events; the next one's place in `order` */
    int kept;                            /* the filter leaves out none of its events */
    Py_ssize_t cur;                      /* the event being made */
    long long *sid, *wid, *clock;
    Py_ssize_t *order, *grp, *row;
    const unsigned char **text;          /* each event's texts (msgpack), NULL: none */
    Py_ssize_t *ntext;
    ColGroup *groups;
    Py_ssize_t ngroups;
    Buf ev;                              /* an event's bytes, for the fallback */
    Buf texts;                           /* the text of the V_*_TEXT values */
    /* what the arrays above and the decoding's scratch live in, kept for the next frame:
     * the per-event arrays (sid...), text, the groups' values, scratch, an IdMap */
    Spare ids, text_s, vals, tmp, keys, slots;
};

/* A ColFrame with its memory, as a spare one is: what it held of a frame forgotten. */
static ColFrame *
colframe_reuse(ColFrame *old)
{
    ColFrame *cf = old != NULL ? old : PyMem_Calloc(1, sizeof(ColFrame));
    if (cf == NULL || old == NULL) return cf;
    ColFrame keep = *old;
    memset(cf, 0, sizeof *cf);
    cf->ev = keep.ev;
    cf->texts = keep.texts;
    cf->ev.len = cf->texts.len = 0;
    cf->ids = keep.ids, cf->text_s = keep.text_s, cf->vals = keep.vals, cf->tmp = keep.tmp;
    cf->keys = keep.keys, cf->slots = keep.slots;
    return cf;
}

static void
colframe_free(ColFrame *cf)
{
    if (cf == NULL) return;
    PyMem_Free(cf->groups);
    PyMem_Free(cf->ev.p);
    PyMem_Free(cf->texts.p);
    Spare *all[] = {&cf->ids, &cf->text_s, &cf->vals, &cf->tmp, &cf->keys, &cf->slots};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) PyMem_Free(all[k]->p);
    PyMem_Free(cf);
}

/* The frame's ColFrame kept, its memory for the next frame (one spare). */
void
bread_columns_release(Renderer *self)
{
    ColFrame *cf = self->cf;
    if (cf == NULL) return;
    PyMem_Free(cf->groups);
    cf->groups = NULL;
    colframe_free(self->cf_spare);
    self->cf_spare = cf;
    self->cf = NULL;
}

void
bread_columns_free(Renderer *self)
{
    bread_columns_release(self);
    colframe_free(self->cf_spare);
    self->cf_spare = NULL;
}

/* A bin value's bytes: 0, or -1 if the next value is not a bin. */
static int
read_bin(Rd *r, const unsigned char **p, Py_ssize_t *n)
{
    if (r->p >= r->end) return -1;
    unsigned char c = *r->p;
    if (c < 0xc4 || c > 0xc6) return -1;
    int k = 1 << (c - 0xc4);
    if (r->end - r->p < 1 + k) return -1;
    *n = (Py_ssize_t)be(r->p + 1, k);
    r->p += 1 + k;
    if (r->end - r->p < *n) return -1;
    *p = r->p;
    r->p += *n;
    return 0;
}

/* `count` zigzag varints from data[0..n), exactly: 0, or -1 (beyond 64 bits, too few or
 * too many: Python judges the frame). */
static int
get_varints(const unsigned char *s, Py_ssize_t n, Py_ssize_t count, long long *out)
{
    if (n < count) return -1;
    Py_ssize_t got = 0;
    unsigned long long z = 0;
    int shift = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t eight;   /* eight one-byte varints at once (the common small deltas) */
        while (shift == 0 && i + 8 <= n && got + 8 <= count
               && (memcpy(&eight, s + i, 8), !(eight & 0x8080808080808080ULL))) {
            for (int k = 0; k < 8; k++) {
                unsigned long long b = s[i + k];
                out[got + k] = (long long)(b >> 1) ^ -(long long)(b & 1);
            }
            got += 8;
            i += 8;
        }
        if (i == n) break;
        unsigned char b = s[i];
        if (shift == 63 && (b & 0x7e)) return -1;   /* beyond 64 bits */
        z |= (unsigned long long)(b & 0x7f) << shift;
        if (b & 0x80) {
            shift += 7;
            if (shift > 63) return -1;
            continue;
        }
        if (got == count) return -1;
        out[got++] = (long long)(z >> 1) ^ -(long long)(z & 1);
        z = 0;
        shift = 0;
    }
    return shift || got != count ? -1 : 0;
}

/* Running sums in place (twice for clocks): -1 beyond 64 bits. */
static int
sums(long long *v, Py_ssize_t count)
{
    for (Py_ssize_t i = 1; i < count; i++)
        if (__builtin_add_overflow(v[i - 1], v[i], &v[i])) return -1;
    return 0;
}

/* An int column of one of the codings `ok` (bits), `count` values into out. */
static int
read_ints(Rd *r, Py_ssize_t count, unsigned ok, long long *out)
{
    long long n = read_array(r), coding, base = 0;
    const unsigned char *p;
    Py_ssize_t len;
    if (n < 2 || read_int(r, &coding) < 0 || coding < 0 || coding > 8 || !(ok >> coding & 1))
        return -1;
    if (coding == CC_SAME) {
        if (n != 2 || read_int(r, &base) < 0) return -1;
        for (Py_ssize_t i = 0; i < count; i++) out[i] = base;
        return 0;
    }
    int based = coding == CC_PLAIN || coding == CC_DELTAS;
    if (n != (based ? 3 : 2)) return -1;
    if (based && read_int(r, &base) < 0) return -1;
    if (read_bin(r, &p, &len) < 0 || get_varints(p, len, count, out) < 0) return -1;
    if (based) {
        for (Py_ssize_t i = 0; i < count; i++)
            if (__builtin_add_overflow(out[i], base, &out[i])) return -1;
        if (coding == CC_PLAIN) return 0;
    }
    return sums(out, count) < 0 || (coding == CC_CLOCKS && sums(out, count) < 0) ? -1 : 0;
}

/* Decimal digits for a whole column at a time: two digits a step from a table, each
 * number's length known first, its digits written where they go (buf_uint's digit at a
 * time, reversed through a copy, was a tenth of a columnar read). */
static const char DIGITS2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
static const unsigned long long POW10U[] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
    10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};

static inline int
count_digits(unsigned long long u)
{
    int n = 1;
    while (n < 20 && u >= POW10U[n]) n++;
    return n;
}

/* u's last `n` decimal digits (zero-padded) into p[0..n). */
static inline void
put_digits(char *p, unsigned long long u, int n)
{
    for (; n >= 2; n -= 2, u /= 100) memcpy(p + n - 2, DIGITS2 + 2 * (u % 100), 2);
    if (n) p[0] = (char)('0' + u % 10);
}

/* An int's text (as buf_int writes it) appended to o. */
static inline int
put_int_text(Buf *o, long long v)
{
    unsigned long long u = v < 0 ? (unsigned long long)-(v + 1) + 1 : (unsigned long long)v;
    int nd = count_digits(u), neg = v < 0;
    if (buf_reserve(o, nd + neg) < 0) return -1;
    if (neg) o->p[o->len] = '-';
    put_digits(o->p + o->len + neg, u, nd);
    o->len += nd + neg;
    return 0;
}

/* repr of a decimal's float, d = n / 10**scale, written from its digits where that is
 * what repr writes (as bread_put_decimal does: at most 15 significant digits, d in
 * [1e-4, 2**53) once the trailing zeros are gone); 1 written, 0 not such a decimal, -1
 * error. */
static int
decimal_text(Buf *o, long long n, int scale, double d)
{
    unsigned long long u = n < 0 ? (unsigned long long)-n : (unsigned long long)n;
    if (u == 0) return buf_put(o, "0.0", 3) < 0 ? -1 : 1;   /* (+0.0: -0.0 is a double) */
    while (scale > 0 && u % 10 == 0) { u /= 10; scale--; }
    double a = d < 0 ? -d : d;
    if (u >= 1000000000000000ULL || !(a >= 1e-4)) return 0;
    unsigned long long ip = u / POW10U[scale], fp = u % POW10U[scale];
    int neg = n < 0, nd = count_digits(ip), nf = scale ? scale : 1;
    if (buf_reserve(o, neg + nd + 1 + nf) < 0) return -1;
    char *p = o->p + o->len;
    if (neg) *p++ = '-';
    put_digits(p, ip, nd);
    p[nd] = '.';
    put_digits(p + nd + 1, fp, nf);   /* (scale 0: "u.0") */
    o->len += neg + nd + 1 + nf;
    return 1;
}

/* The text of each finite float of a column (each a V_F64), rendered once for the message
 * and the JSON columns (NULL: neither is made): appended to `text`, the value made
 * V_F64_TEXT, `s` its offset there until columns_decode makes it a pointer; `n`, `scale`:
 * a decimal column's ints and scale (NULL: doubles). */
static int
render_column(CVal *vals, Py_ssize_t count, Py_ssize_t width, Buf *text, const long long *n,
              int scale)
{
    if (text == NULL) return 0;   /* checked only: no value is rendered */
    for (Py_ssize_t i = 0; i < count; i++) {
        CVal *v = &vals[i * width];
        if (!isfinite(v->x.d)) continue;
        Py_ssize_t at = text->len;
        if (n == NULL || decimal_text(text, n[i], scale, v->x.d) == 0)
            if (bread_put_value(text, &(Val){.kind = V_F64, .d = v->x.d}) < 0) return -1;
        v->s = (const unsigned char *)(uintptr_t)at;   /* made a pointer when all are made */
        v->n = (int32_t)(text->len - at);
        v->kind = V_F64_TEXT;
    }
    return 0;
}

/* The text of each int of a column, rendered once for the message and the JSON columns
 * (a column at a time: put_int_text): as render_column's floats, the value made
 * V_INT_TEXT. */
static int
render_ints(CVal *vals, Py_ssize_t count, Py_ssize_t width, Buf *text)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        CVal *v = &vals[i * width];
        Py_ssize_t at = text->len;
        if (put_int_text(text, v->x.i) < 0) return -1;
        v->s = (const unsigned char *)(uintptr_t)at;   /* made a pointer when all are made */
        v->n = (int32_t)(text->len - at);
        v->kind = V_INT_TEXT;
    }
    return 0;
}

/* A word of a string column's dictionary (no surrogates) made text once for every event
 * that has it: its text, then its JSON, appended to `text`; the CVal made V_STR_TEXT, `s`
 * the text's offset there until columns_decode makes it a pointer, x.i the JSON's length.
 * 0, or -1 error. */
static int
word_text(CVal *c, const Val *w, Buf *text)
{
    Py_ssize_t at = text->len;
    if (buf_put(text, w->s, w->n) < 0 || bread_put_json_text(text, w->s, w->n) < 0) return -1;
    c->kind = V_STR_TEXT;
    c->s = (const unsigned char *)(uintptr_t)at;
    c->x.i = text->len - at - w->n;
    return 0;
}

/* A value column: `count` values, the `width` apart in vals (a group's rows; NULL: the
 * column is only checked, no value kept); `text`: where the ints' and floats' text goes
 * (NULL: none is made). */
static int
read_column(Rd *r, Py_ssize_t count, CVal *vals, Py_ssize_t width, long long *tmp, Buf *text)
{
    Rd at = *r;
    long long n = read_array(r), coding, scale = 0;
    if (n < 2 || read_int(r, &coding) < 0) return -1;
    const unsigned char *p;
    Py_ssize_t len;
    switch (coding) {
    case CC_INTS: case CC_PLAIN:
        *r = at;
        if (read_ints(r, count, 1u << CC_INTS | 1u << CC_PLAIN, tmp) < 0) return -1;
        for (Py_ssize_t i = 0; i < count && vals != NULL; i++) {
            vals[i * width].kind = V_INT;
            vals[i * width].x.i = tmp[i];
        }
        return text != NULL ? render_ints(vals, count, width, text) : 0;
    case CC_DECIMALS:
        if (n != 3 || read_int(r, &scale) < 0 || scale < 0 || scale > COL_MAX_SCALE
            || read_ints(r, count, 1u << CC_INTS | 1u << CC_PLAIN, tmp) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (tmp[i] >= EXACT53 || tmp[i] <= -EXACT53) return -1;
            if (vals == NULL) continue;
            vals[i * width].kind = V_F64;
            vals[i * width].x.d = (double)tmp[i] / POW10[scale];
        }
        return render_column(vals, count, width, text, tmp, (int)scale);
    case CC_DOUBLES:
        if (n != 2 || read_bin(r, &p, &len) < 0 || len != 8 * count) return -1;
        for (Py_ssize_t i = 0; i < count && vals != NULL; i++) {
            union { uint64_t u; double d; } x = {0};
            for (int k = 7; k >= 0; k--) x.u = x.u << 8 | p[8 * i + k];
            vals[i * width].kind = V_F64;
            vals[i * width].x.d = x.d;
        }
        return render_column(vals, count, width, text, NULL, 0);
    case CC_STRINGS: {
        long long nw = read_array(r);
        if (n != 3 || nw < 0 || nw > r->end - r->p) return -1;
        CVal *words = vals != NULL ? PyMem_Malloc((size_t)(nw ? nw : 1) * sizeof(CVal)) : NULL;
        if (words == NULL && vals != NULL) return -1;
        int bad = 0;
        for (long long k = 0; k < nw && !bad; k++) {
            Val w;
            bad = read_value(r, &w, 1) < 0 || w.kind != V_STR;
            if (bad || words == NULL) continue;
            cval_set(&words[k], &w);
            if (text != NULL && !w.surrogates && (bad = word_text(&words[k], &w, text)) < 0)
                break;
        }
        if (!bad) bad = read_bin(r, &p, &len) < 0 || get_varints(p, len, count, tmp) < 0;
        for (Py_ssize_t i = 0; i < count && !bad; i++) {
            bad = tmp[i] < 0 || tmp[i] >= nw;
            if (!bad && vals != NULL) vals[i * width] = words[tmp[i]];
        }
        PyMem_Free(words);
        return bad ? -1 : 0;
    }
    case CC_PACKED: {
        if (n != 2 || read_bin(r, &p, &len) < 0) return -1;
        Rd v = {p, p + len};
        for (Py_ssize_t i = 0; i < count; i++) {
            const unsigned char *start = v.p;
            Val x;
            if (read_value(&v, &x, 1) < 0) return -1;
            if (x.kind == V_OTHER || x.kind == V_EXT) {   /* its bytes, for the fallback */
                x.s = start;
                x.n = v.p - start;
            }
            if (vals != NULL) cval_set(&vals[i * width], &x);
        }
        return v.p == v.end ? 0 : -1;
    }
    default:
        return -1;
    }
}

/* A small open-addressing map of ids to indexes (groups, writers). */
typedef struct { long long *keys; Py_ssize_t *vals; Py_ssize_t mask; } IdMap;

static int
idmap_init(IdMap *m, Py_ssize_t n, Spare *keys, Spare *vals)
{
    Py_ssize_t size = 16;
    while (size < 2 * n) size <<= 1;
    m->mask = size - 1;
    m->keys = spare(keys, (size_t)size * sizeof(long long));
    m->vals = spare(vals, (size_t)size * sizeof(Py_ssize_t));
    if (m->keys == NULL || m->vals == NULL) return -1;
    for (Py_ssize_t i = 0; i < size; i++) m->vals[i] = -1;
    return 0;
}

/* The slot of `key`: vals[slot] is -1 if it is not there yet. */
static Py_ssize_t
idmap_slot(IdMap *m, long long key)
{
    Py_ssize_t i = (Py_ssize_t)(((unsigned long long)key * 0x9E3779B97F4A7C15ULL) >> 20) & m->mask;
    while (m->vals[i] >= 0 && m->keys[i] != key) i = (i + 1) & m->mask;
    m->keys[i] = key;
    return i;
}

/* Decode a columnar frame's payload into self->cf: 0, or -1 for anything this walk does
 * not take as it is (damage, values beyond 64 bits, times beyond them, ...): Python
 * judges that frame, as events payloads. */
static int
columns_decode(Renderer *self, const unsigned char *s, Py_ssize_t size)
{
    Rd r = {s, s + size};
    long long count, lo, hi;
    if (size > INT32_MAX || read_array(&r) != 8) return -1;   /* (a CVal's n: 31 bits) */
    Rd sources = r;
    if (read_value(&r, &(Val){0}, 0) < 0) return -1;
    Rd groups = r;
    if (read_value(&r, &(Val){0}, 0) < 0 || read_int(&r, &count) < 0 || count <= 0
        || count > COL_MAX_EVENTS || count > size || read_int(&r, &lo) < 0
        || read_int(&r, &hi) < 0)
        return -1;
    ColFrame *cf = colframe_reuse(self->cf_spare);
    self->cf_spare = NULL;
    if (cf == NULL) return -1;
    self->cf = cf;
    Py_ssize_t n = (Py_ssize_t)count;
    cf->count = n;
    cf->sid = spare(&cf->ids, (size_t)n * (3 * sizeof(long long) + 3 * sizeof(Py_ssize_t)));
    if (cf->sid == NULL) return -1;
    cf->wid = cf->sid + n;
    cf->clock = cf->wid + n;
    cf->order = (Py_ssize_t *)(cf->clock + n);
    cf->grp = cf->order + n;
    cf->row = cf->grp + n;
    unsigned ids = 1u << CC_INTS | 1u << CC_PLAIN | 1u << CC_SAME;
    unsigned clocks = 1u << CC_DELTAS | 1u << CC_CLOCKS;   /* deltas less a base, or dod */
    if (read_ints(&r, n, ids, cf->wid) < 0 || read_ints(&r, n, clocks, cf->clock) < 0
        || read_ints(&sources, n, ids, cf->sid) < 0)
        return -1;
    long long cmin = cf->clock[0], cmax = cf->clock[0], ns;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (cf->sid[i] < 0 || cf->wid[i] < 0 || !event_ns(self, cf->clock[i], &ns)) return -1;
        if (cf->clock[i] < cmin) cmin = cf->clock[i];
        if (cf->clock[i] > cmax) cmax = cf->clock[i];
    }
    if ((__int128)cmax - cmin > LLONG_MAX) return -1;   /* a writer's delta beyond 64 bits */
    if (cmin < lo || cmax > hi) return -1;   /* outside the frame's stated bounds: damage */
    /* texts: nil, or a packed column */
    if (r.p < r.end && *r.p == 0xc0)
        r.p++;
    else {
        long long k = read_array(&r), coding;
        const unsigned char *p;
        Py_ssize_t len;
        if (k != 2 || read_int(&r, &coding) < 0 || coding != CC_PACKED
            || read_bin(&r, &p, &len) < 0)
            return -1;
        cf->text = spare(&cf->text_s, (size_t)n * (sizeof(*cf->text) + sizeof(Py_ssize_t)));
        if (cf->text == NULL) return -1;
        cf->ntext = (Py_ssize_t *)(cf->text + n);
        Rd t = {p, p + len};
        Val tmp;
        for (Py_ssize_t i = 0; i < n; i++) {
            const unsigned char *start = t.p;
            if (read_value(&t, &tmp, 0) < 0) return -1;
            cf->text[i] = tmp.kind == V_NIL ? NULL : start;
            cf->ntext[i] = t.p - start;
        }
        if (t.p != t.end) return -1;
    }
    if (r.p != r.end) return -1;
    /* the groups: one per source id, in the order the frame gives them */
    long long ng = read_array(&groups);
    if (ng <= 0 || ng > n) return -1;
    IdMap m = {0};
    CVal *vals = NULL;
    long long *tmp = spare(&cf->tmp, (size_t)n * sizeof(long long));
    cf->groups = PyMem_Calloc((size_t)ng, sizeof(ColGroup));
    if (tmp == NULL || cf->groups == NULL
        || idmap_init(&m, (Py_ssize_t)ng, &cf->keys, &cf->slots) < 0)
        return -1;
    for (Py_ssize_t g = 0; g < ng; g++) {
        ColGroup *gr = &cf->groups[g];
        long long three = read_array(&groups), width;
        if (three != 3 || read_int(&groups, &gr->sid) < 0 || read_int(&groups, &width) < 0
            || width < 0 || width > COL_MAX_VALUES || read_array(&groups) != width)
            return -1;
        Py_ssize_t slot = idmap_slot(&m, gr->sid);
        for (long long k = 0; k < width; k++)
            if (read_value(&groups, &(Val){0}, 0) < 0) return -1;
        if (m.vals[slot] >= 0) return -1;          /* a source given twice */
        m.vals[slot] = g;
        cf->ngroups = g + 1;
        gr->width = (Py_ssize_t)width;
    }
    Py_ssize_t gi = -1;                        /* (runs of one source: looked up once) */
    for (Py_ssize_t i = 0; i < n; i++) {       /* each event's group and row there */
        if (i == 0 || cf->sid[i] != cf->sid[i - 1]) gi = m.vals[idmap_slot(&m, cf->sid[i])];
        if (gi < 0) return -1;                 /* an event of a source without a group */
        cf->grp[i] = gi;
        cf->row[i] = cf->groups[gi].count++;
    }
    for (Py_ssize_t g = 0; g < ng; g++)
        if (cf->groups[g].count == 0) return -1;   /* a group without an event */
    /* the columns, now that each group's count is known: checked, and kept where the
     * output renders values (the message, the JSON, an event the fallback makes) */
    int keep = self->want_message || self->want_json;
    cf->kept = !self->windowed;                /* (left_out() is 0 for each event: not asked) */
    for (Py_ssize_t g = 0; g < ng; g++) {
        long long sid = cf->groups[g].sid;
        if (sid >= 0 && sid < MAX_IDS && self->sources[sid] != NULL && self->sources[sid]->skip)
            cf->kept = 0;
    }
    for (Py_ssize_t i = 0; i < n && !keep; i++)
        keep = cf->sid[i] >= MAX_IDS || self->sources[cf->sid[i]] == NULL
               || cf->wid[i] >= MAX_IDS || self->writers[cf->wid[i]].name == NULL;
    Py_ssize_t nvals = 0;                      /* every group's values, a byte each at least */
    for (Py_ssize_t g = 0; g < ng; g++) nvals += cf->groups[g].width * cf->groups[g].count;
    if (nvals > size) return -1;
    if (keep && (vals = spare(&cf->vals, (size_t)nvals * sizeof(CVal))) == NULL)
        return -1;
    Rd walk = {s, s + size};
    read_array(&walk);
    read_value(&walk, &(Val){0}, 0);
    if (read_array(&walk) != ng) return -1;
    for (Py_ssize_t g = 0; g < ng; g++) {
        ColGroup *gr = &cf->groups[g];
        long long sid, width;
        read_array(&walk);
        read_int(&walk, &sid);
        read_int(&walk, &width);
        read_array(&walk);
        Py_ssize_t nv = gr->width * gr->count;
        if (nv > walk.end - walk.p) return -1;   /* a byte a value at least: bytes back them */
        if (keep) {
            gr->vals = vals;
            vals += nv;
        }
        for (Py_ssize_t k = 0; k < gr->width; k++)
            if (read_column(&walk, gr->count, keep ? gr->vals + k : NULL, gr->width, tmp,
                            keep ? &cf->texts : NULL) < 0)
                return -1;
    }
    for (Py_ssize_t g = 0; g < ng && keep; g++) {     /* the texts' offsets made pointers */
        ColGroup *gr = &cf->groups[g];
        for (Py_ssize_t k = 0; k < gr->width * gr->count; k++)
            if (gr->vals[k].kind >= V_F64_TEXT)   /* (V_INT_TEXT, V_STR_TEXT) */
                gr->vals[k].s = (const unsigned char *)cf->texts.p + (uintptr_t)gr->vals[k].s;
    }
    /* the walk's order: by writer (first seen first), each in frame order */
    if (idmap_init(&m, n, &cf->keys, &cf->slots) < 0) return -1;
    Py_ssize_t nw = 0;
    long long *first = tmp;                    /* per writer: how many events, then where */
    Py_ssize_t wi = -1;                        /* (runs of one writer: looked up once) */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || cf->wid[i] != cf->wid[i - 1]) {
            Py_ssize_t slot = idmap_slot(&m, cf->wid[i]);
            if (m.vals[slot] < 0) {
                long long wid = cf->wid[i];
                if (wid < MAX_IDS && self->writers[wid].name != NULL && self->writers[wid].skip)
                    cf->kept = 0;
                m.vals[slot] = nw;
                first[nw++] = 0;
            }
            wi = m.vals[slot];
        }
        first[wi]++;
    }
    for (Py_ssize_t w = 0, at = 0; w < nw; w++) {
        long long c = first[w];
        first[w] = at;
        at += (Py_ssize_t)c;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || cf->wid[i] != cf->wid[i - 1]) wi = m.vals[idmap_slot(&m, cf->wid[i])];
        cf->order[first[wi]++] = i;
    }
    return 0;
}

/* A value's msgpack bytes (what msgpack-python packs for the value it unpacks). */
static int
put_val_bytes(Buf *b, const Val *v)
{
    switch (v->kind) {
    case V_NIL: return buf_put(b, "\xc0", 1);
    case V_FALSE: return buf_put(b, "\xc2", 1);
    case V_TRUE: return buf_put(b, "\xc3", 1);
    case V_INT: case V_INT_TEXT: return put_int(b, v->i);
    case V_UINT:
        if (buf_reserve(b, 9) < 0) return -1;
        put_be(b, 0xcf, v->u, 8);
        return 0;
    case V_F64: case V_F64_TEXT: {
        union { double d; uint64_t u; } x = {v->d};
        if (buf_reserve(b, 9) < 0) return -1;
        put_be(b, 0xcb, x.u, 8);
        return 0;
    }
    case V_STR: case V_STR_TEXT:   /* (no surrogates: its text is its bytes) */
        return put_raw(b, 0xa0, 0xd9, 0xda, 0xdb, (const char *)v->s, v->n, 1);
    default: return buf_put(b, v->s, v->n);   /* its bytes, as the frame holds them */
    }
}

/* The bytes of the columnar frame's event `cur` as an events payload holds it
 * ([source id, 0, [values...], texts]), into cf->ev: what the fallback decodes. */
static int
columns_event_bytes(Renderer *self, const unsigned char **ev, Py_ssize_t *evlen)
{
    ColFrame *cf = self->cf;
    Py_ssize_t i = cf->cur;
    ColGroup *g = &cf->groups[cf->grp[i]];
    const CVal *vals = g->vals + cf->row[i] * g->width;
    int texts = cf->text != NULL && cf->text[i] != NULL;
    Buf *b = &cf->ev;
    b->len = 0;
    if (put_header(b, 0x90, 0xdc, 0xdd, texts ? 4 : 3) < 0 || put_int(b, cf->sid[i]) < 0
        || buf_put(b, "\x00", 1) < 0 || put_header(b, 0x90, 0xdc, 0xdd, g->width) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < g->width; k++) {
        Val v;
        cval_get(&v, &vals[k]);
        if (put_val_bytes(b, &v) < 0) return -1;
    }
    if (texts && buf_put(b, cf->text[i], cf->ntext[i]) < 0) return -1;
    *ev = (const unsigned char *)b->p;
    *evlen = b->len;
    return 0;
}

/* The walk over a columnar frame: columns_walk(frame) decodes it and hands its first
 * events to `each`, columns_walk(None) the next ones, as bread_walk does an events
 * frame's, in the order the frame's events payloads give them (one writer after another)
 * and with the same filter; each `ev` is NULL (the fallback makes its bytes). State 2
 * (only after a frame's first call, no event handed on): Python reads the whole frame.
 * Returns how many rows the calls added (each EventFn that makes rows). */
PyObject *
bread_columns_walk(Renderer *self, PyObject *frame, EventFn each)
{
    Py_ssize_t before = self->rows;
    if (frame != Py_None) {
        if (begin_frame(self, frame) < 0) return NULL;
        self->rendered = 0;
        if (columns_decode(self, self->view.buf, self->view.len) < 0) {
            if (PyErr_Occurred()) PyErr_Clear();   /* (a failed allocation, too) */
            self->state = ST_PYTHON;
            bread_frame_release(self);
            return PyLong_FromLong(0);
        }
    }
    ColFrame *cf = self->cf;
    if (cf == NULL) {
        self->state = ST_DONE;
        return PyLong_FromLong(0);
    }
    Val args[MAX_ARGS];
    while (cf->pos < cf->count && self->rows < self->max_rows) {
        Py_ssize_t i = cf->order[cf->pos];
        ColGroup *g = &cf->groups[cf->grp[i]];
        long long sid = cf->sid[i], wid = cf->wid[i], clock = cf->clock[i];
        cf->cur = i;
        if (cf->kept || !left_out(self, wid, sid, clock)) {
            int simple = g->width <= MAX_ARGS && (cf->text == NULL || cf->text[i] == NULL);
            if (simple && g->vals != NULL) {   /* (else the fallback makes the event) */
                const CVal *row = g->vals + cf->row[i] * g->width;
                for (Py_ssize_t k = 0; k < g->width; k++) cval_get(&args[k], &row[k]);
            }
            int done = each(self, wid, sid, clock, g->vals != NULL ? args : NULL, g->width,
                            simple, NULL, 0);
            if (done <= 0) {   /* (every time is within 64 bits: checked first) */
                if (done == 0)
                    PyErr_SetString(PyExc_RuntimeError, "a columnar frame's event was refused");
                bread_frame_release(self);
                self->state = ST_DONE;
                return NULL;
            }
        }
        cf->pos++;
        self->rendered++;
    }
    self->state = cf->pos < cf->count ? ST_MORE : ST_DONE;
    if (self->state == ST_DONE) bread_frame_release(self);
    return PyLong_FromSsize_t(self->rows - before);
}
