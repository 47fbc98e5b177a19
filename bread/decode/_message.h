/* bread/decode/_message.h: a message and its values as text, its twin
 * blogformat/placeholders.py (render, with format(value, "")): what every output of the
 * walk needs (text lines, the message of an Event, the message column), so it sits below
 * them all. Static, so that
 * each file's calls may be inlined as they were within one file.
 */
#ifndef BREAD_MESSAGE_H
#define BREAD_MESSAGE_H

#include "_extension.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* buf_put for the short pieces of a message or of JSON (a literal, a value's text): up to
 * 16 bytes by fixed-size copies the compiler inlines (each libc memmove call was about a
 * tenth of a columnar read), reading no byte outside s[0..n). */
static inline int
bread_put_text(Buf *o, const void *s, Py_ssize_t n)
{
    if (buf_reserve(o, n) < 0) return -1;
    char *d = o->p + o->len;
    const char *c = s;
    o->len += n;
    if (n > 16)
        memcpy(d, c, (size_t)n);
    else if (n >= 8) {
        memcpy(d, c, 8);
        memcpy(d + n - 8, c + n - 8, 8);
    }
    else if (n >= 4) {
        memcpy(d, c, 4);
        memcpy(d + n - 4, c + n - 4, 4);
    }
    else
        for (Py_ssize_t k = 0; k < n; k++) d[k] = c[k];
    return 0;
}

/* A JSON string of UTF-8 text, escaped as Python's json does with ensure_ascii=False
 * (bread.sinks.json.json_value): the runs of bytes that need no escape copied whole. */
static inline int
bread_put_json_text(Buf *o, const unsigned char *s, Py_ssize_t n)
{
    if (buf_reserve(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = i;
        while (j < n && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\') j++;
        if (j > i && bread_put_text(o, s + i, j - i) < 0) return -1;
        if (j == n) break;
        char tmp[8];
        int k;
        switch (s[j]) {
        case '"': k = snprintf(tmp, sizeof tmp, "\\\""); break;
        case '\\': k = snprintf(tmp, sizeof tmp, "\\\\"); break;
        case '\n': k = snprintf(tmp, sizeof tmp, "\\n"); break;
        case '\r': k = snprintf(tmp, sizeof tmp, "\\r"); break;
        case '\t': k = snprintf(tmp, sizeof tmp, "\\t"); break;
        case '\b': k = snprintf(tmp, sizeof tmp, "\\b"); break;
        case '\f': k = snprintf(tmp, sizeof tmp, "\\f"); break;
        default: k = snprintf(tmp, sizeof tmp, "\\u%04x", s[j]);
        }
        if (buf_put(o, tmp, k) < 0) return -1;
        i = j;
    }
    if (buf_reserve(o, 1) < 0) return -1;
    o->p[o->len++] = '"';
    return 0;
}

/* The same all in ASCII, as Python's json does with ensure_ascii=True (bread -o jsonl): a
 * character outside printable ASCII as \uXXXX, beyond the BMP as a surrogate pair, a lone
 * surrogate (UTF-8 as with "surrogatepass") as its own. */
static inline int
bread_put_json_ascii(Buf *o, const unsigned char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (buf_reserve(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i;
        while (j < n && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\') j++;
        if (j > i && bread_put_text(o, s + i, j - i) < 0) return -1;
        if (j == n) break;
        unsigned c = s[j];
        int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (j + len > n) len = 1;   /* (never: the text is valid UTF-8) */
        if (len > 1) c &= 0x3f >> (len - 1);
        for (int k = 1; k < len; k++) c = (c << 6) | (s[j + k] & 0x3f);
        i = j + len;
        char tmp[12];
        int k = 2;
        tmp[0] = '\\';
        switch (c) {
        case '"': tmp[1] = '"'; break;
        case '\\': tmp[1] = '\\'; break;
        case '\n': tmp[1] = 'n'; break;
        case '\r': tmp[1] = 'r'; break;
        case '\t': tmp[1] = 't'; break;
        case '\b': tmp[1] = 'b'; break;
        case '\f': tmp[1] = 'f'; break;
        default: {
            unsigned units[2] = {c, 0};
            int nu = 1;
            if (c >= 0x10000) {
                units[0] = 0xd800 | ((c - 0x10000) >> 10);
                units[1] = 0xdc00 | ((c - 0x10000) & 0x3ff);
                nu = 2;
            }
            k = 0;
            for (int u = 0; u < nu; u++) {
                tmp[k++] = '\\'; tmp[k++] = 'u';
                for (int sh = 12; sh >= 0; sh -= 4) tmp[k++] = hex[(units[u] >> sh) & 15];
            }
        }
        }
        if (buf_put(o, tmp, k) < 0) return -1;
    }
    if (buf_reserve(o, 1) < 0) return -1;
    o->p[o->len++] = '"';
    return 0;
}

/* A str value's text: surrogates as Python's "backslashreplace" writes them. */
static inline int
put_str(Buf *o, const Val *v)
{
    if (!v->surrogates)
        return bread_put_text(o, v->s, v->n);
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

/* u / 10**k as repr writes the float it stands for, where that is the shortest string
 * that reads back as it (see bread_put_short_float): k decimals, "u.0" for k 0. 1 written,
 * -1 error. */
static inline int
bread_put_decimal(Buf *o, unsigned long long u, int k, int negative)
{
    char tmp[40];
    int n = 0;
    for (int j = 0; j < k; j++) { tmp[n++] = (char)('0' + u % 10); u /= 10; }
    tmp[n++] = '.';
    if (k == 0) { tmp[0] = '0'; tmp[1] = '.'; n = 2; }
    do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (negative) tmp[n++] = '-';
    if (buf_reserve(o, n) < 0) return -1;
    while (n) o->p[o->len++] = tmp[--n];
    return 1;
}

/* repr(d) for the common floats, without the general shortest-digits search:
 * d in [1e-4, 2**53) (where repr uses fixed notation) that is m / 10**k for
 * the least k with an integer m below 2**53. With at most 15 significant
 * digits, m / 10**k is the only k-decimal string that reads back as d, so it
 * is the shortest one, which is what repr writes. 1 written, 0 not such a
 * float (PyOS_double_to_string does it), -1 error. */
static inline int
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
        return bread_put_decimal(o, u, k, d < 0);
    }
    return 0;
}

/* 1 rendered, 0 not a value rendered here, -1 error. */
static inline int
bread_put_value(Buf *o, const Val *v)
{
    switch (v->kind) {
    case V_NIL: return buf_put(o, "None", 4) < 0 ? -1 : 1;
    case V_TRUE: return buf_put(o, "True", 4) < 0 ? -1 : 1;
    case V_FALSE: return buf_put(o, "False", 5) < 0 ? -1 : 1;
    case V_INT: return buf_int(o, v->i) < 0 ? -1 : 1;
    case V_UINT: return buf_uint(o, v->u, 1, 0) < 0 ? -1 : 1;
    case V_STR: return put_str(o, v) < 0 ? -1 : 1;
    case V_F64_TEXT: case V_INT_TEXT: case V_STR_TEXT:
        return bread_put_text(o, v->s, v->n) < 0 ? -1 : 1;
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

/* ---- the JSON of values, as bread.sinks.json.json_value writes it -------------- */

/* A value's JSON, in UTF-8 (the args and fields columns, -o csv's cells) or with `ascii`
 * all in ASCII (-o jsonl): 1 written, 0 Python must write it (a container, a rich value;
 * in UTF-8, a str with a lone surrogate: the columns write it all in ASCII escapes, -o csv
 * as backslashreplace does), -1 error. A float that is not finite is {"$float": repr}. */
static inline int
bread_put_json_value(Buf *o, const Val *v, int ascii)
{
    switch (v->kind) {
    case V_NIL: return buf_put(o, "null", 4) < 0 ? -1 : 1;
    case V_TRUE: return buf_put(o, "true", 4) < 0 ? -1 : 1;
    case V_FALSE: return buf_put(o, "false", 5) < 0 ? -1 : 1;
    case V_INT: return buf_int(o, v->i) < 0 ? -1 : 1;   /* within 64 bits: a number */
    case V_UINT: return buf_uint(o, v->u, 1, 0) < 0 ? -1 : 1;
    case V_STR:
        if (ascii) return bread_put_json_ascii(o, v->s, v->n) < 0 ? -1 : 1;
        if (v->surrogates) return 0;
        return bread_put_json_text(o, v->s, v->n) < 0 ? -1 : 1;
    case V_F64:
        if (isfinite(v->d)) return bread_put_value(o, v);
        {
            const char *t = isnan(v->d) ? "{\"$float\":\"nan\"}"
                            : v->d > 0 ? "{\"$float\":\"inf\"}" : "{\"$float\":\"-inf\"}";
            return buf_put(o, t, (Py_ssize_t)strlen(t)) < 0 ? -1 : 1;
        }
    case V_F64_TEXT: case V_INT_TEXT:   /* a finite float or an int: its text is its JSON */
        return bread_put_text(o, v->s, v->n) < 0 ? -1 : 1;
    case V_STR_TEXT:   /* a dictionary's str: its JSON in UTF-8 made once, after its text */
        if (ascii) return bread_put_json_ascii(o, v->s, v->n) < 0 ? -1 : 1;
        return bread_put_text(o, v->s + v->n, (Py_ssize_t)v->i) < 0 ? -1 : 1;
    default: return 0;   /* rich values */
    }
}

/* How many of an event's args are positional: those before its keyword fields (the
 * last as many as its source names), or all if it has fewer (then it has no fields). */
static inline Py_ssize_t
bread_positional(const Source *src, Py_ssize_t nargs)
{
    Py_ssize_t nn = src->names != NULL ? PyTuple_GET_SIZE(src->names) : 0;
    return nn && nargs >= nn ? nargs - nn : nargs;
}

/* The positional values, args[0..npos), as a JSON list: 1 written, 0 Python must write
 * them, -1 error. */
static inline int
bread_put_json_list(Buf *o, const Val *args, Py_ssize_t npos, int ascii)
{
    if (buf_put(o, "[", 1) < 0) return -1;
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (i && buf_put(o, ",", 1) < 0) return -1;
        int r = bread_put_json_value(o, &args[i], ascii);
        if (r <= 0) return r;
    }
    return buf_put(o, "]", 1) < 0 ? -1 : 1;
}

/* The keyword fields as a JSON object, {name: value...}, {} without them: 1 written, 0
 * Python must write them (a name given twice, a name with a lone surrogate), -1 error. */
static inline int
bread_put_json_fields(Buf *o, const Source *src, const Val *args, Py_ssize_t nargs, int ascii)
{
    Py_ssize_t npos = bread_positional(src, nargs);
    if (buf_put(o, "{", 1) < 0) return -1;
    for (Py_ssize_t j = 0; npos + j < nargs; j++) {
        PyObject *name = PyTuple_GET_ITEM(src->names, j);
        for (Py_ssize_t k = 0; k < j; k++)   /* a name given twice: Python's dict */
            if (PyUnicode_Compare(name, PyTuple_GET_ITEM(src->names, k)) == 0) return 0;
        Py_ssize_t len;
        const char *u = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len) : NULL;
        if (u == NULL) { PyErr_Clear(); return 0; }
        if ((j && buf_put(o, ",", 1) < 0)
            || (ascii ? bread_put_json_ascii(o, (const unsigned char *)u, len)
                      : bread_put_json_text(o, (const unsigned char *)u, len)) < 0
            || buf_put(o, ":", 1) < 0)
            return -1;
        int r = bread_put_json_value(o, &args[npos + j], ascii);
        if (r <= 0) return r;
    }
    return buf_put(o, "}", 1) < 0 ? -1 : 1;
}

/* The message of an event: 1 done, 0 Python must render it (the buffer may
 * hold part of it), -1 error. Keyword fields are the last nnames args. */
static inline int
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
            if (bread_put_text(o, m->s, m->n) < 0) return -1;
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

#endif
