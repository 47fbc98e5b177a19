/* bread/_decode.c: the walk over one events frame (docs/format.md 5), its twins
 * blogformat/entries.py (decode_events) and the EventStream's filter (bread/filters.py):
 * each event decoded with blogformat/_c/mpread.h, the filter applied, then handed to the
 * output the call gives (an EventFn: text in bread/_lines.c, an Event in bread/_events.c,
 * a row of columns in bread/_batches.c); what an output leaves to Python goes to the
 * fallback, here for all of them.
 */
#include "_extension.h"

#include <string.h>

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
 * or greatest 64-bit time, as bread.merge.clamp64 does) and where its line ends. */
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

/* fallback(event bytes, writer id, clock): what the output makes of an event C leaves to
 * Python, or None if the filter leaves it out. */
PyObject *
bread_fallback(Renderer *self, const unsigned char *ev, Py_ssize_t evlen, long long wid,
               long long clock)
{
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
    if (self->payload != NULL) {
        PyBuffer_Release(&self->view);
        Py_CLEAR(self->payload);
    }
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
        bread_frame_release(self);
        PyObject *arg = PyObject_GetAttr(frame, str_payload);
        if (arg == NULL) return NULL;
        PyObject *offset = PyObject_GetAttr(frame, str_offset);
        if (offset == NULL) { Py_DECREF(arg); return NULL; }
        Py_XSETREF(self->frame_offset, offset);
        if (PyObject_GetBuffer(arg, &self->view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(arg);
            return NULL;
        }
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
