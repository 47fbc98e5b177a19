/* bread/sinks/_lines.c: an event as a text line, its twins bread/sinks/lines.py (LineSink)
 * and bread/render.py: the event format's items, the date and clock, the message of {}
 * placeholders of None, bool, int, float and str, and the escaping of control characters;
 * the keyword fields of %K (a str that needs no quotes); an event with an exception among
 * its fields is Python's (its traceback under its line). Or as a JSON line or a CSV row
 * (-o jsonl, -o csv), twins bread/sinks/rows.py (RowSink) and bread/sinks/json.py: the
 * same walk and message, the items of a source made by Python, the time, the message and
 * the values' JSON written here, each CSV cell escaped and quoted as Python's csv does.
 */
#include "../decode/_extension.h"
#include "../decode/_message.h"

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
        case 'o': {   /* ISO 8601's offset, +HH:MM, in whole minutes (export.iso_time) */
            long long mins = offset >= 0 ? offset / 60 : -((-offset + 59) / 60);
            long long a = mins < 0 ? -mins : mins;
            b.len += sprintf(p, "%c%02lld:%02lld", mins < 0 ? '-' : '+', a / 60, a % 60);
            break;
        }
        default: return -1;
        }
    }
    c->len = b.len;
    c->secs = secs;
    c->valid = 1;
    return 0;
}

/* The ISO time of `secs` in --tz's zone, from Python (self->zone, export.iso_parts):
 * the text before the nanoseconds and after them. 0 filled, -1 Python renders the event,
 * -2 error. */
static int
zone_fill(Renderer *self, DateCache *c, long long secs)
{
    PyObject *r = PyObject_CallFunction(self->zone, "L", secs);
    if (r == NULL) return -2;
    int rc = -1;
    if (r != Py_None) {
        PyObject *head, *tail;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2
            || !PyBytes_Check(head = PyTuple_GET_ITEM(r, 0))
            || !PyBytes_Check(tail = PyTuple_GET_ITEM(r, 1))) {
            PyErr_SetString(PyExc_TypeError, "zone must return None or two bytes");
            rc = -2;
        }
        else if (PyBytes_GET_SIZE(head) + PyBytes_GET_SIZE(tail) <= (Py_ssize_t)sizeof(c->text)) {
            Py_ssize_t n = PyBytes_GET_SIZE(head);
            memcpy(c->text, PyBytes_AS_STRING(head), n);
            memcpy(c->text + n, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail));
            c->len = n + PyBytes_GET_SIZE(tail);
            c->at[0] = n;
            c->nat = 1;
            c->secs = secs;
            c->valid = 1;
            rc = 0;
        }
    }
    Py_DECREF(r);
    return rc;
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
        int r = utc ? date_fill(self, c, secs, 0, "UTC", 3)
                : self->zone != NULL ? zone_fill(self, c, secs)
                : date_fill(self, c, secs, self->tz_offset, self->tz_name, self->ntz);
        if (r == -2) return -1;
        if (r) return 0;
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
 * DEL and C1 as \xNN (\n, \r), the bidirectional format characters as \uNNNN; with
 * `json`, as -o csv's JSON cells have them (bread.export's _JSON_ESCAPES: JSON has
 * escaped C0), DEL and C1 as \u00NN too. */
static int
escape_text(Buf *o, Py_ssize_t start, int json)
{
    Py_ssize_t n = o->len - start, extra = 0;
    const unsigned char *s = (const unsigned char *)o->p + start;
    unsigned cp;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        int k;
        if (c >= 0x20 && c < 0x7f) continue;   /* printable ASCII, most of a line */
        if ((c < 0x20 && c != 0x09) || c == 0x7f)
            extra += json ? 5 : (c == 0x0a || c == 0x0d) ? 1 : 3;
        else if (c == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f)
            extra += json ? 4 : 2;
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
            esc = 2;
        }
        if (!esc) { *d++ = (char)c; continue; }
        *d++ = '\\';
        if (esc == 2 || json) {
            *d++ = 'u';
            *d++ = hex[cp >> 12]; *d++ = hex[(cp >> 8) & 15];
            *d++ = hex[(cp >> 4) & 15]; *d++ = hex[cp & 15];
        }
        else if (cp == 0x0a) *d++ = 'n';
        else if (cp == 0x0d) *d++ = 'r';
        else { *d++ = 'x'; *d++ = hex[cp >> 4]; *d++ = hex[cp & 15]; }
    }
    o->len = d - o->p;
    PyMem_Free(copy);
    return 0;
}

static int
escape_line(Buf *o, Py_ssize_t start)
{
    return escape_text(o, start, 0);
}

/* Whether one of the event's keyword fields (its last nnames args) is an exception. */
static int
has_exception(const Source *src, const Val *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = nargs - src->nnames; i < nargs; i++)
        if (i >= 0 && args[i].kind == V_EXT && args[i].i == EXT_EXCEPTION) return 1;
    return 0;
}

/* Longest str field shown here, in bytes: with the names' text (bread/sinks/lines.py
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

/* ---- JSON lines and CSV rows (-o jsonl, -o csv) ---------------------------------- */

/* Whether C writes an event of these values as bread.export does: None, bools, ints within
 * 64 bits, floats and str without a lone surrogate (its message would show it escaped:
 * Python's JSON and cells hold the character), their JSON sure to stay within MAX_JSON
 * (bread.sinks.json._Budget: at most 12 characters a byte of str, 24 for any other value). */
static int
plain_values(const Val *args, Py_ssize_t nargs)
{
    Py_ssize_t most = 0;
    for (Py_ssize_t k = 0; k < nargs; k++) {
        switch (args[k].kind) {
        case V_STR:
            if (args[k].surrogates) return 0;
            /* fall through */
        case V_STR_TEXT:
            most += 12 * args[k].n + 2;
            break;
        case V_NIL: case V_TRUE: case V_FALSE: case V_INT: case V_UINT: case V_F64:
        case V_F64_TEXT: case V_INT_TEXT:
            most += 24;
            break;
        default: return 0;
        }
    }
    return most <= MAX_JSON;
}

/* A CSV cell as Python's csv.writer writes it (QUOTE_MINIMAL, lines ending "\r\n"): in
 * quotes, each quote doubled, if it holds a comma, a quote, CR or LF; else as it is. */
static int
put_cell(Buf *o, const char *s, Py_ssize_t n)
{
    Py_ssize_t quotes = 0;
    int quote = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') quotes++;
        else if (c == ',' || c == '\r' || c == '\n') quote = 1;
    }
    if (!quote && !quotes) return bread_put_text(o, s, n);
    if (buf_reserve(o, n + quotes + 2) < 0) return -1;
    char *d = o->p + o->len;
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '"') *d++ = '"';
        *d++ = s[i];
    }
    *d++ = '"';
    o->len = d - o->p;
    return 0;
}

/* The message of an event: JSON all in ASCII (jsonl), or a CSV cell (export.csv_cells:
 * a ' before what a spreadsheet runs, then escaped). 1 done, 0 Python's, -1 error. */
static int
put_message_as(Renderer *self, Buf *o, const Source *src, const Val *args, Py_ssize_t nargs)
{
    Buf *t = &self->scratch;
    t->len = 0;
    if (self->form == FORM_JSONL) {
        int r = bread_put_message(t, src, args, nargs);
        if (r <= 0) return r;
        return bread_put_json_ascii(o, (const unsigned char *)t->p, t->len) < 0 ? -1 : 1;
    }
    if (buf_put(t, "'", 1) < 0) return -1;
    int r = bread_put_message(t, src, args, nargs);
    if (r <= 0) return r;
    char c = t->len > 1 ? t->p[1] : 0;   /* (export.FORMULA_STARTS) */
    Py_ssize_t from = self->quote_formulas && c != 0 && strchr("=+-@\t\r", c) != NULL ? 0 : 1;
    if (self->escape && escape_text(t, 1, 0) < 0) return -1;
    return put_cell(o, t->p + from, t->len - from) < 0 ? -1 : 1;
}

/* The positional values (IT_ARGS) or keyword fields (IT_FIELDS) as JSON: all in ASCII
 * (jsonl), or a CSV cell (in UTF-8, DEL, C1 and bidi formats escaped). 1 done, 0 Python's,
 * -1 error. */
static int
put_values_as(Renderer *self, Buf *o, int code, const Source *src, const Val *args,
              Py_ssize_t nargs)
{
    int jsonl = self->form == FORM_JSONL;
    Buf *t = jsonl ? o : &self->scratch;
    if (!jsonl) t->len = 0;
    int r = code == IT_ARGS ? bread_put_json_list(t, args, bread_positional(src, nargs), jsonl)
                            : bread_put_json_fields(t, src, args, nargs, jsonl);
    if (r <= 0 || jsonl) return r;
    if (self->escape && escape_text(t, 0, 1) < 0) return -1;
    return put_cell(o, t->p, t->len) < 0 ? -1 : 1;
}

/* Write one event as a JSON line or CSV row; 1 done, 0 Python must write it, -1 error. On
 * 0 the buffer is as it was. What is Python's: an event of an unknown source or writer, or
 * of more args than MAX_ARGS or with captured texts (not simple), values plain_values
 * does not take, a message bread_put_message leaves to Python, a field name given twice or
 * holding a lone surrogate, a time C does not place (beyond 64 bits), a source Python
 * marks IT_PYTHON (jsonl: a lone surrogate in its format). */
static int
render_row(Renderer *self, long long wid, long long sid, long long clock,
           const Val *args, Py_ssize_t nargs, int simple)
{
    Buf *o = &self->out;
    Py_ssize_t start = o->len;
    if (!simple || sid < 0 || sid >= MAX_IDS || wid < 0 || wid >= MAX_IDS) return 0;
    Source *src = self->sources[sid];
    Writer *w = &self->writers[wid];
    if (src == NULL || w->name == NULL || !plain_values(args, nargs)) return 0;
    for (Py_ssize_t i = 0; i < src->nitems; i++) {
        Item *it = &src->items[i];
        int r;
        switch (it->code) {
        case IT_LIT: r = bread_put_text(o, it->s, it->n) < 0 ? -1 : 1; break;
        case IT_DATE: r = put_date(self, o, clock, 0); break;
        case IT_WNAME: r = bread_put_text(o, w->name, w->nname) < 0 ? -1 : 1; break;
        case IT_WID: r = bread_put_text(o, w->id, w->nid) < 0 ? -1 : 1; break;
        case IT_MSG: r = put_message_as(self, o, src, args, nargs); break;
        case IT_ARGS: case IT_FIELDS:
            r = put_values_as(self, o, it->code, src, args, nargs);
            break;
        default: r = 0;   /* IT_PYTHON */
        }
        if (r <= 0) {
            o->len = start;
            return r;
        }
    }
    return 1;
}

/* What an EventFn of lines does once the event is rendered (done 1) or not (0): its line
 * from the fallback (bytes, or None if the filter leaves it out); with want_keys, its sort
 * key. */
static inline int
line_done(Renderer *self, int done, Py_ssize_t before, long long wid, long long clock,
          const unsigned char *ev, Py_ssize_t evlen)
{
    Buf *o = &self->out;
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

/* The text output's EventFn: the event's line. */
int
bread_line_event(Renderer *self, long long wid, long long sid, long long clock,
                 const Val *args, Py_ssize_t nargs, int simple,
                 const unsigned char *ev, Py_ssize_t evlen)
{
    Py_ssize_t before = self->out.len;
    int done = render_line(self, wid, sid, clock, args, nargs, simple);
    return line_done(self, done, before, wid, clock, ev, evlen);
}

/* The EventFn of JSON lines and CSV rows (form): the event's row. */
int
bread_row_event(Renderer *self, long long wid, long long sid, long long clock,
                const Val *args, Py_ssize_t nargs, int simple,
                const unsigned char *ev, Py_ssize_t evlen)
{
    Py_ssize_t before = self->out.len;
    int done = render_row(self, wid, sid, clock, args, nargs, simple);
    return line_done(self, done, before, wid, clock, ev, evlen);
}
