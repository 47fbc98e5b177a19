/* bread/_lines.c: an event as a text line, its twins bread/lines.py (LineRenderer) and
 * bread/render.py: the event format's items, the date and clock, the message of {}
 * placeholders of None, bool, int, float and str, and the escaping of control characters.
 */
#include "_speedups.h"

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
            unsigned cp = ((v->s[i] & 0x0f) << 12) | ((v->s[i + 1] & 0x3f) << 6)
                          | (v->s[i + 2] & 0x3f);
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
int
bread_put_short_float(Buf *o, double d)
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
int
bread_put_value(Buf *o, const Val *v)
{
    switch (v->kind) {
    case V_NIL: return buf_put(o, "None", 4) < 0 ? -1 : 1;
    case V_TRUE: return buf_put(o, "True", 4) < 0 ? -1 : 1;
    case V_FALSE: return buf_put(o, "False", 5) < 0 ? -1 : 1;
    case V_INT: return buf_int(o, v->i) < 0 ? -1 : 1;
    case V_UINT: return buf_uint(o, v->u, 1, 0) < 0 ? -1 : 1;
    case V_STR: return put_str(o, v) < 0 ? -1 : 1;
    case V_F64: {
        int r = bread_put_short_float(o, v->d);
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

/* The message of an event: 1 done, 0 Python must render it (the buffer may
 * hold part of it), -1 error. Keyword fields are the last nnames args. */
int
bread_put_message(Buf *o, const Source *src, const Val *args, Py_ssize_t nargs)
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
        int r = bread_put_value(o, &args[at]);
        if (r <= 0) return r;
        if (o->len - start > MAX_MESSAGE) return 0;
    }
    return o->len - start > MAX_MESSAGE ? 0 : 1;
}

/* Render one event; 1 done, 0 Python must render it, -1 error. On 0 the
 * buffer is as it was. */
int
bread_render_event(Renderer *self, long long wid, long long sid, long long clock,
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
