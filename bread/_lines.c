/* bread/_lines.c: an event as a text line, its twins bread/lines.py (LineSink) and
 * bread/render.py: the event format's items, the date and clock, the message of {}
 * placeholders of None, bool, int, float and str, and the escaping of control characters;
 * the keyword fields of %K (a str that needs no quotes); an event with an exception among
 * its fields is Python's (its traceback under its line).
 */
#include "_extension.h"
#include "_message.h"

#include <stdio.h>
#include <string.h>

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

/* 1 rendered, 0 Python must render this event, -1 error. */
static int
put_date(Renderer *self, Buf *o, long long clock, int utc)
{
    long long ns;
    if (!event_ns(self, clock, &ns)) return 0;
    long long secs = ns / 1000000000, frac = ns % 1000000000;   /* floored, never beyond */
    if (frac < 0) {                                              /* 64 bits (ns may be the */
        frac += 1000000000;                                      /* least of them) */
        secs--;
    }
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
        if (c >= 0x20 && c < 0x7f) continue;   /* printable ASCII, most of a line */
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

/* Whether one of the event's keyword fields (its last nnames args) is an exception. */
static int
has_exception(const Source *src, const Val *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = nargs - src->nnames; i < nargs; i++)
        if (i >= 0 && args[i].kind == V_EXT && args[i].i == EXT_EXCEPTION) return 1;
    return 0;
}

/* Longest str field shown here, in bytes: with the names' text (bread/lines.py
 * MAX_NAMES_TEXT), the fields of an event stay far below a cut message. */
#define MAX_FIELD_STR (1 << 14)

/* A keyword field's value as blogformat.pretty.fields_text shows it: 1 rendered, 0 Python
 * must (a str it would quote or that is not ASCII, a rich value, no fields), -1 error. */
static int
put_field(Buf *o, const Source *src, const Val *args, Py_ssize_t nargs, Py_ssize_t index)
{
    if (nargs < src->nnames || index >= src->nnames) return 0;
    const Val *v = &args[nargs - src->nnames + index];
    if (v->kind == V_STR || v->kind == V_STR_TEXT) {   /* (a dictionary's str: its text) */
        if (v->n == 0 || v->n > MAX_FIELD_STR) return 0;
        for (Py_ssize_t i = 0; i < v->n; i++) {
            unsigned char c = v->s[i];
            if (c <= 0x20 || c >= 0x7f || c == '=' || c == '"' || c == '\'') return 0;
        }
        return buf_put(o, (const char *)v->s, v->n) < 0 ? -1 : 1;
    }
    return bread_put_value(o, v);
}

/* Render one event; 1 done, 0 Python must render it, -1 error. On 0 the
 * buffer is as it was. */
static int
render_line(Renderer *self, long long wid, long long sid, long long clock,
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
        case IT_MSG: r = bread_put_message(o, src, args, nargs); break;
        case IT_EXC: r = !has_exception(src, args, nargs); break;
        case IT_FIELD: r = put_field(o, src, args, nargs, it->index); break;
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

/* The text output's EventFn: the event's line, rendered here or by the fallback (bytes,
 * or None if the filter leaves it out); with want_keys, its sort key. */
int
bread_line_event(Renderer *self, long long wid, long long sid, long long clock,
                 const Val *args, Py_ssize_t nargs, int simple,
                 const unsigned char *ev, Py_ssize_t evlen)
{
    Buf *o = &self->out;
    Py_ssize_t before = o->len;
    int done = render_line(self, wid, sid, clock, args, nargs, simple);
    if (done < 0) return -1;
    if (done == 0) {
        PyObject *line = bread_fallback(self, ev, evlen, wid, clock);
        if (line == NULL) return -1;
        int rc = 0;
        if (PyBytes_Check(line))
            rc = buf_put(o, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line));
        else if (line != Py_None) {
            PyErr_SetString(PyExc_TypeError, "fallback must return bytes or None");
            rc = -1;
        }
        Py_DECREF(line);
        if (rc < 0) return -1;
    }
    if (self->want_keys && o->len > before && bread_put_key(self, clock, o->len) < 0)
        return -1;
    return 1;
}
