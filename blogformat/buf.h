/* blogformat/buf.h: the growable byte buffer both C extensions write into.
 *
 * blogformat holds, beside the Python of the format's values (blogformat/values.py and
 * the modules it names), the C headers that blog's extension (the writer) and bread's (the
 * reader) share, as blogformat is the codec both sides share: this buffer, msgpack reading
 * (mpread.h) and msgpack writing (mpwrite.h). setup.py names the directory in each
 * extension's include_dirs and every header in its depends, so that a change rebuilds.
 *
 * Everything here is static: each translation unit has its own copy, inlined where the
 * compiler sees fit, as when each file had its own.
 */
#ifndef BLOGFORMAT_BUF_H
#define BLOGFORMAT_BUF_H

#include <Python.h>
#include <string.h>

/* A static function a translation unit may leave unused. */
#define BLOG_C_UNUSED __attribute__((unused))

/* The first allocation of a buffer (an extension may choose another before including). */
#ifndef BUF_FIRST
#define BUF_FIRST 4096
#endif

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

/* Room for `more` bytes after len: 0, or -1 with MemoryError. */
static BLOG_C_UNUSED int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : BUF_FIRST;
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
    if (n == 0)     /* nothing: b->p (and s) may be NULL, which memcpy must never get */
        return 0;
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* Decimal digits of v, at least `width` of them (zero-padded), as f"{v:0{width}d}". */
static BLOG_C_UNUSED int
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

static BLOG_C_UNUSED int
buf_int(Buf *b, long long v)
{
    if (v < 0)
        return buf_uint(b, (unsigned long long)(-(v + 1)) + 1, 1, 1);
    return buf_uint(b, (unsigned long long)v, 1, 0);
}

#endif
