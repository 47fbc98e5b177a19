/* blogformat/mpread.h: msgpack reading, bounds-checked, for both C extensions.
 *
 * read_value() decodes one value as the Python reader (msgpack-python with blog's
 * options) would, or says it would not: the reader's extension (bread/decode/_decode.c) walks
 * untrusted events frames with it, every read bounds-checked, nesting bounded, and any
 * byte that Python would not decode the same way answered -1 (the Python path then
 * reads the frame and reports the damage). skip_value() only finds where a value ends,
 * for bytes the writer made itself (blog/pipeline/_summary.c counts a channel's events
 * with it).
 */
#ifndef BLOGFORMAT_MPREAD_H
#define BLOGFORMAT_MPREAD_H

#include <Python.h>
#include <limits.h>
#include <stdint.h>

#include "buf.h"

typedef struct { const unsigned char *p, *end; } Rd;

/* V_OTHER: a container or bin; V_EXT: an extension value, its type code in `i`. */
enum { V_NIL, V_FALSE, V_TRUE, V_INT, V_UINT, V_F64, V_STR, V_OTHER, V_EXT };

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
static BLOG_C_UNUSED int
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

static BLOG_C_UNUSED int read_value(Rd *r, Val *v, int depth);

static inline int
need(Rd *r, Py_ssize_t n)
{
    return r->end - r->p >= n ? 0 : -1;
}

static BLOG_C_UNUSED int
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

static BLOG_C_UNUSED int
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

static BLOG_C_UNUSED int
skip_ext(Rd *r, Val *v, Py_ssize_t n)
{
    if (need(r, n + 1) < 0) return -1;
    if ((signed char)r->p[0] == -1) return -1;   /* msgpack's Timestamp: left to Python */
    v->kind = V_EXT;
    v->i = (signed char)r->p[0];
    r->p += n + 1;
    return 0;
}

/* Read one value; containers, bin and ext are validated, skipped and V_OTHER (V_EXT).
 * -1: the bytes are not something Python would decode as blog does. */
static BLOG_C_UNUSED int
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
static BLOG_C_UNUSED long long
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
static BLOG_C_UNUSED int
read_int(Rd *r, long long *out)
{
    Val v;
    if (read_value(r, &v, 0) < 0 || v.kind != V_INT) return -1;
    *out = v.i;
    return 0;
}

/* The end of the msgpack value at p (before end), or NULL if it does not fit or
   nests deeper than 64. Nothing is decoded or checked but lengths: for bytes the
   writer made itself, where this only guards. */
static BLOG_C_UNUSED const unsigned char *
skip_value(const unsigned char *p, const unsigned char *end, int depth)
{
    if (p >= end || depth > 64)
        return NULL;
    unsigned char b = *p++;
    uint64_t n = 0, items = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return p;
    if ((b & 0xe0) == 0xa0) { n = b & 0x1f; goto bytes; }
    if ((b & 0xf0) == 0x90) { items = b & 0x0f; goto array; }
    if ((b & 0xf0) == 0x80) { items = 2 * (uint64_t)(b & 0x0f); goto array; }
    switch (b) {
    case 0xcc: case 0xd0: n = 1; goto bytes;
    case 0xcd: case 0xd1: n = 2; goto bytes;
    case 0xca: case 0xce: case 0xd2: n = 4; goto bytes;
    case 0xcb: case 0xcf: case 0xd3: n = 8; goto bytes;
    case 0xd4: n = 2; goto bytes;
    case 0xd5: n = 3; goto bytes;
    case 0xd6: n = 5; goto bytes;
    case 0xd7: n = 9; goto bytes;
    case 0xd8: n = 17; goto bytes;
    case 0xc4: case 0xd9:
        if (end - p < 1) return NULL;
        n = p[0]; p += 1; goto bytes;
    case 0xc5: case 0xda:
        if (end - p < 2) return NULL;
        n = be(p, 2); p += 2; goto bytes;
    case 0xc6: case 0xdb:
        if (end - p < 4) return NULL;
        n = be(p, 4); p += 4; goto bytes;
    case 0xc7:
        if (end - p < 2) return NULL;
        n = (uint64_t)p[0] + 1; p += 1; goto bytes;
    case 0xc8:
        if (end - p < 3) return NULL;
        n = be(p, 2) + 1; p += 2; goto bytes;
    case 0xc9:
        if (end - p < 5) return NULL;
        n = be(p, 4) + 1; p += 4; goto bytes;
    case 0xdc: case 0xde:
        if (end - p < 2) return NULL;
        items = be(p, 2); p += 2;
        if (b == 0xde) items *= 2;
        goto array;
    case 0xdd: case 0xdf:
        if (end - p < 4) return NULL;
        items = be(p, 4); p += 4;
        if (b == 0xdf) items *= 2;
        goto array;
    default:
        return NULL;   /* 0xc1: never used */
    }
bytes:
    return (uint64_t)(end - p) < n ? NULL : p + n;
array:
    while (items--) {
        p = skip_value(p, end, depth + 1);
        if (p == NULL)
            return NULL;
    }
    return p;
}

#endif
