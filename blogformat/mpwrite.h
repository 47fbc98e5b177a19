/* blogformat/mpwrite.h: msgpack writing into a Buf, byte for byte as msgpack-python
 * packs (the smallest encoding of each int, str and bin lengths, array and map headers,
 * ExtType layouts), and the plain Python scalars as msgpack-python packs them.
 *
 * The writer's extension uses it (blogformat/_valueencoding.c for values,
 * blog/pipeline/_channel.c for events); what the values mean (the extension codes of
 * docs/format.md 7) is blogformat/_valueencoding.c's.
 */
#ifndef BLOGFORMAT_MPWRITE_H
#define BLOGFORMAT_MPWRITE_H

#include "buf.h"

/* A tag and n big-endian bytes of v; the room is reserved. */
static inline void
put_be(Buf *b, unsigned char tag, unsigned long long v, int n)
{
    b->p[b->len++] = (char)tag;
    for (int i = n - 1; i >= 0; i--)
        b->p[b->len++] = (char)((v >> (8 * i)) & 0xff);
}

/* msgpack's smallest encoding of an integer, as msgpack-python writes it. */
static BLOG_C_UNUSED int
put_int(Buf *b, long long v)
{
    if (buf_reserve(b, 9) < 0) return -1;
    if (v >= 0) {
        if (v < 0x80) b->p[b->len++] = (char)v;
        else if (v <= 0xff) put_be(b, 0xcc, v, 1);
        else if (v <= 0xffff) put_be(b, 0xcd, v, 2);
        else if (v <= 0xffffffffLL) put_be(b, 0xce, v, 4);
        else put_be(b, 0xcf, (unsigned long long)v, 8);
    } else {
        if (v >= -32) b->p[b->len++] = (char)(unsigned char)(0xe0 | (v + 32));
        else if (v >= -128) put_be(b, 0xd0, (unsigned long long)v, 1);
        else if (v >= -32768) put_be(b, 0xd1, (unsigned long long)v, 2);
        else if (v >= -2147483648LL) put_be(b, 0xd2, (unsigned long long)v, 4);
        else put_be(b, 0xd3, (unsigned long long)v, 8);
    }
    return 0;
}

/* A str (fix, t8, t16, t32: a0, d9, da, db) or bin (c4, c5, c6, no fix form) of n bytes. */
static BLOG_C_UNUSED int
put_raw(Buf *b, unsigned char fix, unsigned char t8, unsigned char t16, unsigned char t32,
        const char *data, Py_ssize_t n, int has_fix)
{
    if (buf_reserve(b, n + 5) < 0) return -1;
    if (has_fix && n < 32) b->p[b->len++] = (char)(fix | n);
    else if (n <= 0xff) put_be(b, t8, n, 1);
    else if (n <= 0xffff) put_be(b, t16, n, 2);
    else put_be(b, t32, n, 4);
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

/* An array (90, dc, dd) or map (80, de, df) header of n items or pairs. */
static BLOG_C_UNUSED int
put_header(Buf *b, unsigned char fix, unsigned char t16, unsigned char t32, Py_ssize_t n)
{
    if (buf_reserve(b, 5) < 0) return -1;
    if (n < 16) b->p[b->len++] = (char)(fix | n);
    else if (n <= 0xffff) put_be(b, t16, n, 2);
    else put_be(b, t32, n, 4);
    return 0;
}

/* Encode ints into an array: [a, b, ...]. */
static BLOG_C_UNUSED int
put_ints(Buf *b, const long long *v, int n)
{
    if (buf_reserve(b, 1) < 0) return -1;
    b->p[b->len++] = (char)(0x90 | n);
    for (int i = 0; i < n; i++)
        if (put_int(b, v[i]) < 0) return -1;
    return 0;
}

/* Room for the longest extension header (ext 32: c9, length, code), kept before a
 * payload whose length is known only once it is encoded. */
#define EXT_ROOM 6

/* Keep room for an extension header at *at (close_ext writes it). */
static BLOG_C_UNUSED int
open_ext(Buf *b, Py_ssize_t *at)
{
    if (buf_reserve(b, EXT_ROOM) < 0) return -1;
    *at = b->len;
    b->len += EXT_ROOM;
    return 0;
}

/* The extension header of a payload of n bytes written at b->p[at + EXT_ROOM...]: the
 * payload moves back to right after it, as msgpack-python lays an ExtType out. */
static BLOG_C_UNUSED void
close_ext(Buf *b, Py_ssize_t at, int code)
{
    Py_ssize_t n = b->len - at - EXT_ROOM;
    unsigned char h[EXT_ROOM];
    int k = 0;
    switch (n) {
    case 1: h[k++] = 0xd4; break;
    case 2: h[k++] = 0xd5; break;
    case 4: h[k++] = 0xd6; break;
    case 8: h[k++] = 0xd7; break;
    case 16: h[k++] = 0xd8; break;
    default:
        if (n <= 0xff) { h[k++] = 0xc7; h[k++] = (unsigned char)n; }
        else if (n <= 0xffff) { h[k++] = 0xc8; h[k++] = (unsigned char)(n >> 8);
                                h[k++] = (unsigned char)n; }
        else { h[k++] = 0xc9; for (int i = 3; i >= 0; i--) h[k++] = (unsigned char)(n >> (8 * i)); }
    }
    h[k++] = (unsigned char)code;
    memmove(b->p + at + k, b->p + at + EXT_ROOM, n);
    memcpy(b->p + at, h, k);
    b->len = at + k + n;
}

/* Encode one plain scalar (None, bool, int within 64 bits, float, str without lone
 * surrogates, bytes; exact types): 1 done, 0 not a plain scalar (or not encodable here:
 * ints beyond 64 bits, lone surrogates), -1 error. */
static BLOG_C_UNUSED int
put_scalar(Buf *b, PyObject *a)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t == &PyLong_Type) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow) {
            if (overflow > 0) {   /* 2**63 .. 2**64-1 is still a msgpack uint64 */
                unsigned long long u = PyLong_AsUnsignedLongLong(a);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
                if (buf_reserve(b, 9) < 0) return -1;
                put_be(b, 0xcf, u, 8);
                return 1;
            }
            return 0;
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        return put_int(b, v) < 0 ? -1 : 1;
    }
    if (t == &PyFloat_Type) {
        union { double d; unsigned long long u; } x;
        x.d = PyFloat_AS_DOUBLE(a);
        if (buf_reserve(b, 9) < 0) return -1;
        put_be(b, 0xcb, x.u, 8);
        return 1;
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(a, &n);
        if (s == NULL) { PyErr_Clear(); return 0; }
        return put_raw(b, 0xa0, 0xd9, 0xda, 0xdb, s, n, 1) < 0 ? -1 : 1;
    }
    if (a == Py_None || t == &PyBool_Type) {
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)(a == Py_None ? 0xc0 : a == Py_True ? 0xc3 : 0xc2);
        return 1;
    }
    if (t == &PyBytes_Type)
        return put_raw(b, 0, 0xc4, 0xc5, 0xc6, PyBytes_AS_STRING(a), PyBytes_GET_SIZE(a), 0)
               < 0 ? -1 : 1;
    return 0;
}

#endif
