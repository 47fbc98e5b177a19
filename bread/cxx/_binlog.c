/* bread._binlog: C++ binlog files' text lines in C (the pure-Python reference:
 * bread/cxx/printer.py, driven by bread/cxx/fastpath.py).
 *
 * A Printer is given, per call site, its line already rendered but for the codes that
 * change per event (writer, times, clock, message) and its message as literals and the
 * tags of its values; render(data, pos) then walks the entries of `data` from `pos` and
 * appends each event's line, while every event is of a source it knows, whose values are
 * of the tags it reads (bool, char, integers, float, double, string), and whose bytes
 * hold them. It stops before anything else (a metadata entry, another event, an entry cut
 * short by the end of `data`) and says why: Python takes that entry, then calls again.
 *
 * The input is untrusted: every read is bounds-checked; the output grows with the input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_IDS 65536
#define TOP_BIT ((uint64_t)1 << 63)

/* Why render() stopped: the end of the data (or of a whole entry in it), a metadata
 * entry, an event Python renders. */
enum { STOP_END = 0, STOP_META = 1, STOP_PYTHON = 2 };
/* Line items: a literal, or what changes per event. */
enum { L_LIT = 0, L_NAME = 'n', L_WID = 't', L_DATE = 'd', L_UTC = 'u', L_CLOCK = 'r',
       L_MSG = 'm' };

typedef struct { int code; char tag; int shown; const char *s; Py_ssize_t n; } Item;

typedef struct {
    Item *line; Py_ssize_t nline;
    Item *msg; Py_ssize_t nmsg;          /* NULL: Python renders this source's events */
    PyObject *keep;                      /* owns the bytes the items point into */
} Source;

typedef struct { char *p; Py_ssize_t n, cap; } Buf;

typedef struct {
    PyObject_HEAD
    Source *sources;                     /* by id, MAX_IDS of them */
    PyObject *date;                      /* the date format (bytes) */
    PyObject *wname, *wid, *zone;        /* the writer's name and id text, the zone name */
    uint64_t sync_clock, sync_freq, sync_ns;
    int32_t tz;
    int have_sync;
    int64_t tm_secs; int tm_ok; struct tm tm;   /* gmtime of the last second rendered */
    Buf held, keys;                      /* keyed: the lines, and each one's clock and size */
    Buf dc;                              /* the date text of one second, but its %N */
    Py_ssize_t dc_at[8]; int dc_nat;     /* where each %N goes in it */
    int dc_ok; int64_t dc_secs; int32_t dc_offset; PyObject *dc_zone;
} Printer;

static int
grow(Buf *b, Py_ssize_t more)
{
    if (b->n + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + more) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* n bytes from s to d: up to 16 by fixed-size moves the compiler inlines (most pieces of a
 * line are that short: a call to the C library's memcpy each cost more than the copy). */
static void
copy(char *d, const char *s, size_t n)
{
    if (n >= 8 && n <= 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n > 0 && n < 4) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    } else if (n > 16) {
        memcpy(d, s, n);
    }
}

static int
put(Buf *b, const char *s, Py_ssize_t n)
{
    if (n == 0)     /* nothing: b->p may be NULL, which memcpy must never get */
        return 0;
    if (grow(b, n) < 0) return -1;
    copy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static int
putf(Buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return put(b, tmp, n < (int)sizeof tmp ? n : (int)sizeof tmp - 1);
}

static const char DIGITS2[] =
    "0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243"
    "4445464748495051525354555657585960616263646566676869707172737475767778798081828384858687"
    "888990919293949596979899";

/* v's eight decimal digits (leading zeros too) at d. */
static void
eight_digits(char *d, uint32_t v)
{
    for (int i = 6; i >= 0; i -= 2, v /= 100) memcpy(d + i, DIGITS2 + 2 * (v % 100), 2);
}

static int
put_u64(Buf *b, uint64_t v)
{
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    for (; v >= 100; v /= 100) {
        p -= 2;
        memcpy(p, DIGITS2 + 2 * (v % 100), 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, DIGITS2 + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return put(b, p, e - p);
}

static int
put_i64(Buf *b, int64_t v)
{
    if (v >= 0) return put_u64(b, (uint64_t)v);
    if (put(b, "-", 1) < 0) return -1;
    return put_u64(b, (uint64_t)0 - (uint64_t)v);
}

static uint64_t
rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void
free_source(Source *s)
{
    PyMem_Free(s->line);
    PyMem_Free(s->msg);
    Py_CLEAR(s->keep);
    s->line = s->msg = NULL;
    s->nline = s->nmsg = 0;
}

/* ---- dates: bread/cxx/printer.py DateText --------------------------------------- */

#define MAX_N 8

static int
nine_digits(Buf *b, int64_t nsec)
{
    char tmp[16];
    if (nsec < 0) {   /* (before 1970: its sign and 8 digits, as C++ prints it) */
        snprintf(tmp, sizeof tmp, "%.9d", (int)nsec);
        return put(b, tmp, 9);
    }
    tmp[0] = (char)('0' + nsec / 100000000);
    eight_digits(tmp + 1, (uint32_t)(nsec % 100000000));
    return put(b, tmp, 9);
}

/* The date of second `secs` (offset applied) into b; each %N's place noted in `at` (the
 * digits not written) while there is room, else written. */
static int
date_text(Printer *pr, Buf *b, int64_t secs, int64_t nsec, int32_t offset, PyObject *zone,
          Py_ssize_t *at, int *nat)
{
    if (!pr->tm_ok || secs != pr->tm_secs) {
        time_t t = (time_t)secs;
        memset(&pr->tm, 0, sizeof pr->tm);
        if (gmtime_r(&t, &pr->tm) == NULL) memset(&pr->tm, 0, sizeof pr->tm);
        pr->tm_secs = secs;
        pr->tm_ok = 1;
    }
    const struct tm *tm = &pr->tm;
    const char *f = PyBytes_AS_STRING(pr->date);
    Py_ssize_t n = PyBytes_GET_SIZE(pr->date);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (f[i] != '%' || i + 1 == n) {
            if (put(b, f + i, 1) < 0) return -1;
            continue;
        }
        char c = f[++i];
        int r = 0;
        switch (c) {
        case 'Y': r = put_i64(b, (int64_t)tm->tm_year + 1900); break;
        case 'y': r = putf(b, "%02d", ((tm->tm_year % 100) + 100) % 100); break;
        case 'm': r = putf(b, "%02d", tm->tm_mon + 1); break;
        case 'd': r = putf(b, "%02d", tm->tm_mday); break;
        case 'H': r = putf(b, "%02d", tm->tm_hour); break;
        case 'M': r = putf(b, "%02d", tm->tm_min); break;
        case 'S': r = putf(b, "%02d", tm->tm_sec); break;
        case 'N':
            if (*nat < MAX_N) at[(*nat)++] = b->n;
            else r = nine_digits(b, nsec);
            break;
        case 'z': {
            int64_t a = offset < 0 ? -(int64_t)offset : offset;   /* (INT32_MIN too) */
            int64_t h = a / 3600, m = a / 60 - 60 * h;
            r = putf(b, "%c%02d%02d", offset >= 0 ? '+' : '-', (int)(h < 100 ? h : 0),
                     (int)(m < 100 ? m : 0));
            break;
        }
        case 'Z': {
            const char *z = PyBytes_AS_STRING(zone);
            r = put(b, z, (Py_ssize_t)strlen(z));   /* to its first NUL, as C++ prints it */
            break;
        }
        default: {
            char pc[2] = {'%', c};
            r = put(b, pc, 2);
        }
        }
        if (r < 0) return -1;
    }
    return 0;
}

/* The date of ns since the epoch in a zone: its second's text rendered once (kept while
 * the second, the offset and the zone stay), the nanoseconds put in each time. */
static int
date(Printer *pr, Buf *b, int64_t ns, int32_t offset, PyObject *zone)
{
    ns += (int64_t)offset * 1000000000;
    int64_t secs = ns / 1000000000, nsec = ns % 1000000000;
    if (!(pr->dc_ok && secs == pr->dc_secs && offset == pr->dc_offset && zone == pr->dc_zone)) {
        pr->dc.n = 0;
        pr->dc_nat = 0;
        pr->dc_ok = 0;
        if (date_text(pr, &pr->dc, secs, nsec, offset, zone, pr->dc_at, &pr->dc_nat) < 0)
            return -1;
        /* (more %N than places: the digits are in the text, which is this event's only) */
        pr->dc_ok = pr->dc_nat < MAX_N;
        pr->dc_secs = secs;
        pr->dc_offset = offset;
        pr->dc_zone = zone;
    }
    Py_ssize_t from = 0;
    for (int k = 0; k < pr->dc_nat; k++) {
        if (put(b, pr->dc.p + from, pr->dc_at[k] - from) < 0 || nine_digits(b, nsec) < 0)
            return -1;
        from = pr->dc_at[k];
    }
    return put(b, pr->dc.p ? pr->dc.p + from : "", pr->dc.n - from);
}

/* ---- floats: bread/cxx/printer.py c_g16 ------------------------------------------ */

typedef unsigned __int128 u128;

static const uint64_t POW10[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
    10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};

/* 10**i, i <= 38. */
static u128
pow10_128(int i)
{
    return i < 20 ? (u128)POW10[i] : (u128)POW10[19] * POW10[i - 19];
}

/* A finite, nonzero v as C's %.16g prints it, into out (32 bytes): its length, or 0 where
 * the exact arithmetic here does not reach (|v| below about 1e-7, or from 2**126 on: the
 * C library prints those). The 16 significant digits are |v| * 10**(15 - x) rounded half
 * to even, x the decimal exponent: |v| is m * 2**e, so that is exactly an integer, or a
 * quotient by a power of 2 or of 10, in 128 bits. */
static int
g16(double v, char *out)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    int be = (int)(bits >> 52 & 0x7ff);
    if (be == 0 || be == 0x7ff) return 0;          /* subnormal, zero, inf, nan */
    uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    int e = be - 1075;                              /* |v| == m * 2**e */
    int x = ((be - 1023) * 78913) >> 18;            /* about log10|v|: the loop corrects it */
    uint64_t q = 0;
    int up = 0;
    for (int tries = 0;; tries++) {
        int s = 15 - x;
        if (tries == 3) return 0;
        if (s >= 0) {
            if (s > 22) return 0;                   /* m * 10**s within 128 bits */
            u128 num = (u128)m * pow10_128(s);
            if (e >= 0) {                           /* (|v| * 10**s < 10**18) */
                u128 w = num << e;
                if (w >= (u128)POW10[17]) { x++; continue; }
                q = (uint64_t)w;
                up = 0;
            } else {
                int k = -e;
                if (k > 127) return 0;
                u128 w = num >> k;
                if (w >= (u128)POW10[17]) { x++; continue; }
                q = (uint64_t)w;
                u128 rem = num & (((u128)1 << k) - 1), half = (u128)1 << (k - 1);
                up = rem > half || (rem == half && (q & 1));
            }
        } else {
            if (e < 0 || e > 127 - 53 || -s > 38) return 0;
            u128 num = (u128)m << e, den = pow10_128(-s), w = num / den;
            if (w >= (u128)POW10[17]) { x++; continue; }
            q = (uint64_t)w;
            u128 rem = num - w * den;
            up = rem > den - rem || (rem == den - rem && (q & 1));
        }
        if (q >= POW10[16]) x++;
        else if (q < POW10[15]) x--;
        else break;
    }
    q += (uint64_t)up;
    if (q == POW10[16]) { q = POW10[15]; x++; }
    char d[16];
    eight_digits(d, (uint32_t)(q / 100000000));
    eight_digits(d + 8, (uint32_t)(q % 100000000));
    int nd = 16;
    while (nd > 1 && d[nd - 1] == '0') nd--;
    char *p = out;
    if (bits >> 63) *p++ = '-';
    if (x >= -4 && x < 16) {
        if (x >= 0) {
            memcpy(p, d, (size_t)x + 1);
            p += x + 1;
            if (nd > x + 1) {
                *p++ = '.';
                memcpy(p, d + x + 1, (size_t)(nd - x - 1));
                p += nd - x - 1;
            }
        } else {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -x - 1; i++) *p++ = '0';
            memcpy(p, d, (size_t)nd);
            p += nd;
        }
    } else {
        *p++ = d[0];
        if (nd > 1) { *p++ = '.'; memcpy(p, d + 1, (size_t)nd - 1); p += nd - 1; }
        *p++ = 'e';
        *p++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100) *p++ = (char)('0' + ax / 100);
        *p++ = (char)('0' + ax / 10 % 10);
        *p++ = (char)('0' + ax % 10);
    }
    return (int)(p - out);
}

/* v as %.16g: g16's digits, else the C library's (a NaN's sign too, as C++ prints it). */
static int
put_g16(Buf *b, double v)
{
    char tmp[32];
    int n = g16(v, tmp);
    if (n == 0) return putf(b, "%.16g", v);
    return put(b, tmp, n);
}

/* ---- values: bread/cxx/printer.py ValueText, the tags it reads here -------------- */

/* The value of `tag` at p (of n bytes) appended if `shown`: bytes taken, or -1 if they are
 * not there (Python then says so), -2 on an error raised. */
static Py_ssize_t
value(Buf *b, char tag, int shown, const unsigned char *p, Py_ssize_t n)
{
    union { int8_t b; int16_t s; int32_t i; int64_t l; uint8_t B; uint16_t S; uint32_t I;
            uint64_t L; float f; double d; } v;
    Py_ssize_t size;
    switch (tag) {
    case 'y': case 'c': case 'b': case 'B': size = 1; break;
    case 's': case 'S': size = 2; break;
    case 'i': case 'I': case 'f': size = 4; break;
    case 'l': case 'L': case 'd': size = 8; break;
    case '[': {   /* [c: a string */
        if (n < 4) return -1;
        uint32_t len;
        memcpy(&len, p, 4);
        if ((Py_ssize_t)len > n - 4) return -1;
        if (shown && put(b, (const char *)p + 4, len) < 0) return -2;
        return 4 + (Py_ssize_t)len;
    }
    default: return -1;
    }
    if (n < size) return -1;
    if (!shown) return size;
    memcpy(&v, p, (size_t)size);
    int r;
    switch (tag) {
    case 'y': r = v.B ? put(b, "true", 4) : put(b, "false", 5); break;
    case 'c': r = put(b, (const char *)p, 1); break;
    case 'b': r = put_i64(b, v.b); break;
    case 's': r = put_i64(b, v.s); break;
    case 'i': r = put_i64(b, v.i); break;
    case 'l': r = put_i64(b, v.l); break;
    case 'B': r = put_u64(b, v.B); break;
    case 'S': r = put_u64(b, v.S); break;
    case 'I': r = put_u64(b, v.I); break;
    case 'L': r = put_u64(b, v.L); break;
    case 'f': r = put_g16(b, (double)v.f); break;
    default: r = put_g16(b, v.d); break;
    }
    return r < 0 ? -2 : size;
}

/* The time of a clock value (printer.py clock_ns, exact in 128 bits) into *ns: 0 if it, or
 * it in the zone of `offset`, is beyond 64 bits (Python's integers then render it). */
static int
clock_ns(Printer *pr, uint64_t clock, int32_t offset, int64_t *ns)
{
    int64_t f = (int64_t)pr->sync_freq;
    int64_t ticks = (int64_t)(clock - pr->sync_clock);
    int64_t q = ticks / f, r = ticks % f;
    __int128 t = (__int128)(int64_t)pr->sync_ns + (__int128)q * 1000000000
                 + (__int128)r * 1000000000 / f;
    __int128 local = t + (__int128)offset * 1000000000;
    if (t < INT64_MIN || t > INT64_MAX || local < INT64_MIN || local > INT64_MAX) return 0;
    *ns = (int64_t)t;
    return 1;
}

/* One event's line appended: 0, 1 if Python must render it (the buffer as it was), -1. */
static int
event(Printer *pr, Buf *b, Source *src, uint64_t clock, const unsigned char *args,
      Py_ssize_t nargs)
{
    Py_ssize_t mark = b->n;
    for (Py_ssize_t i = 0; i < src->nline; i++) {
        const Item *it = &src->line[i];
        int r = 0;
        switch (it->code) {
        case L_LIT: r = put(b, it->s, it->n); break;
        case L_NAME: r = put(b, PyBytes_AS_STRING(pr->wname), PyBytes_GET_SIZE(pr->wname)); break;
        case L_WID: r = put(b, PyBytes_AS_STRING(pr->wid), PyBytes_GET_SIZE(pr->wid)); break;
        case L_CLOCK: r = put_u64(b, clock); break;
        case L_DATE: case L_UTC: {
            int64_t ns;
            if (!pr->have_sync) r = put(b, "no_clock_sync?", 14);
            else if (!clock_ns(pr, clock, it->code == L_DATE ? pr->tz : 0, &ns)) {
                b->n = mark;
                return 1;
            } else if (it->code == L_DATE) r = date(pr, b, ns, pr->tz, pr->zone);
            else {
                static PyObject *utc = NULL;
                if (utc == NULL && (utc = PyBytes_FromString("UTC")) == NULL) return -1;
                r = date(pr, b, ns, 0, utc);
            }
            break;
        }
        case L_MSG: {
            const unsigned char *p = args;
            Py_ssize_t left = nargs;
            for (Py_ssize_t k = 0; k < src->nmsg; k++) {
                const Item *m = &src->msg[k];
                if (m->code == L_LIT) {
                    if (put(b, m->s, m->n) < 0) return -1;
                    continue;
                }
                Py_ssize_t used = value(b, m->tag, m->shown, p, left);
                if (used == -2) return -1;
                if (used < 0) { b->n = mark; return 1; }
                p += used;
                left -= used;
            }
            break;
        }
        }
        if (r < 0) return -1;
    }
    return 0;
}

/* ---- the Printer ---------------------------------------------------------------- */

static Item *
items(PyObject *list, Py_ssize_t *count, int message)
{
    if (!PyList_Check(list)) { PyErr_SetString(PyExc_TypeError, "a list"); return NULL; }
    Py_ssize_t n = PyList_GET_SIZE(list);
    Item *out = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Item));
    if (out == NULL) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        if (PyBytes_Check(x)) {
            out[i].code = L_LIT;
            out[i].s = PyBytes_AS_STRING(x);
            out[i].n = PyBytes_GET_SIZE(x);
        } else if (PyTuple_Check(x) && PyTuple_GET_SIZE(x) == 2 && message) {
            /* (tag char as int, shown) */
            out[i].code = 1;
            out[i].tag = (char)PyLong_AsLong(PyTuple_GET_ITEM(x, 0));
            out[i].shown = PyObject_IsTrue(PyTuple_GET_ITEM(x, 1));
        } else if (PyLong_Check(x) && !message) {
            out[i].code = (int)PyLong_AsLong(x);
        } else {
            PyMem_Free(out);
            PyErr_SetString(PyExc_TypeError, "bad item");
            return NULL;
        }
    }
    if (PyErr_Occurred()) { PyMem_Free(out); return NULL; }
    *count = n;
    return out;
}

static PyObject *
Printer_add_source(Printer *self, PyObject *args)
{
    unsigned long long id;
    PyObject *line, *msg;
    if (!PyArg_ParseTuple(args, "KO!O", &id, &PyList_Type, &line, &msg)) return NULL;
    if (id >= MAX_IDS) Py_RETURN_FALSE;
    Source *s = &self->sources[id];
    free_source(s);
    Py_ssize_t nline = 0, nmsg = 0;
    Item *li = items(line, &nline, 0);
    if (li == NULL) return NULL;
    Item *mi = NULL;
    if (msg != Py_None && (mi = items(msg, &nmsg, 1)) == NULL) { PyMem_Free(li); return NULL; }
    s->line = li; s->nline = nline; s->msg = mi; s->nmsg = nmsg;
    s->keep = PyTuple_Pack(2, line, msg);
    if (s->keep == NULL) { free_source(s); return NULL; }
    Py_RETURN_TRUE;
}

static PyObject *
Printer_set_writer(Printer *self, PyObject *args)
{
    PyObject *name, *wid;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &name, &PyBytes_Type, &wid)) return NULL;
    Py_INCREF(name); Py_XSETREF(self->wname, name);
    Py_INCREF(wid); Py_XSETREF(self->wid, wid);
    Py_RETURN_NONE;
}

static PyObject *
Printer_set_sync(Printer *self, PyObject *args)
{
    unsigned long long clock, freq, ns;
    int tz;
    PyObject *zone;
    if (!PyArg_ParseTuple(args, "KKKiO!", &clock, &freq, &ns, &tz, &PyBytes_Type, &zone))
        return NULL;
    self->sync_clock = clock; self->sync_freq = freq; self->sync_ns = ns; self->tz = tz;
    self->have_sync = (int64_t)freq > 0;
    Py_INCREF(zone); Py_XSETREF(self->zone, zone);
    self->dc_ok = 0;   /* (the zone object it was made for may be gone) */
    Py_RETURN_NONE;
}

/* A line's clock and size noted, for write_sorted. */
static int
note(Printer *pr, uint64_t clock, Py_ssize_t size)
{
    uint64_t key[2] = {clock, (uint64_t)size};
    return put(&pr->keys, (const char *)key, sizeof key);
}

/* render(data, pos, keyed) -> (lines, pos, stop): with `keyed` the lines are held, for
 * write_sorted, and none is returned. */
static PyObject *
Printer_render(Printer *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int keyed = 0;
    if (!PyArg_ParseTuple(args, "y*n|p", &view, &pos, &keyed)) return NULL;
    const unsigned char *d = view.buf;
    Py_ssize_t n = view.len;
    Buf own = {NULL, 0, 0};
    Buf *b = keyed ? &self->held : &own;
    int stop = STOP_END;
    while (pos >= 0 && n - pos >= 4) {
        uint32_t size;
        memcpy(&size, d + pos, 4);
        if ((Py_ssize_t)size > n - pos - 4) break;              /* cut short: more data */
        if (size < 16) { stop = STOP_PYTHON; break; }
        const unsigned char *p = d + pos + 4;
        uint64_t tag = rd64(p);
        if (tag & TOP_BIT) { stop = STOP_META; break; }
        Source *src = tag < MAX_IDS ? &self->sources[tag] : NULL;
        if (src == NULL || src->line == NULL || src->msg == NULL) { stop = STOP_PYTHON; break; }
        Py_ssize_t before = b->n;
        uint64_t clock = rd64(p + 8);
        int r = event(self, b, src, clock, p + 16, (Py_ssize_t)size - 16);
        if (r == 0 && keyed) r = note(self, clock, b->n - before);
        if (r < 0) { PyMem_Free(own.p); PyBuffer_Release(&view); return NULL; }
        if (r > 0) { stop = STOP_PYTHON; break; }
        pos += 4 + (Py_ssize_t)size;
    }
    PyBuffer_Release(&view);
    PyObject *out = PyBytes_FromStringAndSize(own.p ? own.p : "", own.n);
    PyMem_Free(own.p);
    if (out == NULL) return NULL;
    return Py_BuildValue("Nni", out, pos, stop);
}

/* hold(clock, line): a line Python rendered, held as render's keyed lines are. */
static PyObject *
Printer_hold(Printer *self, PyObject *args)
{
    unsigned long long clock;
    const char *line;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Ky#", &clock, &line, &n)) return NULL;
    if (put(&self->held, line, n) < 0 || note(self, clock, n) < 0) return NULL;
    Py_RETURN_NONE;
}

typedef struct { uint64_t clock; Py_ssize_t start, n; } Line;

static int
by_clock(const void *a, const void *b)
{
    const Line *x = a, *y = b;
    if (x->clock != y->clock) return x->clock < y->clock ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;   /* stable: file order */
}

/* write_sorted(write): the held lines given to `write` in clock order (ties in file
 * order), in pieces of about 1 MiB; then nothing is held. */
static PyObject *
Printer_write_sorted(Printer *self, PyObject *write)
{
    Py_ssize_t count = self->keys.n / 16, at = 0;
    Line *lines = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Line));
    Buf piece = {NULL, 0, 0};
    PyObject *result = NULL;
    if (lines == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t key[2];
        memcpy(key, self->keys.p + 16 * i, 16);
        lines[i] = (Line){key[0], at, (Py_ssize_t)key[1]};
        at += (Py_ssize_t)key[1];
    }
    qsort(lines, (size_t)count, sizeof(Line), by_clock);
    for (Py_ssize_t i = 0; i <= count; i++) {
        if (i < count && put(&piece, self->held.p + lines[i].start, lines[i].n) < 0) goto done;
        if (piece.n >= (1 << 20) || (i == count && piece.n)) {
            PyObject *chunk = PyBytes_FromStringAndSize(piece.p, piece.n);
            if (chunk == NULL) goto done;
            PyObject *r = PyObject_CallOneArg(write, chunk);
            Py_DECREF(chunk);
            if (r == NULL) goto done;
            Py_DECREF(r);
            piece.n = 0;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(lines);
    PyMem_Free(piece.p);
    PyMem_Free(self->held.p);
    PyMem_Free(self->keys.p);
    self->held = (Buf){NULL, 0, 0};
    self->keys = (Buf){NULL, 0, 0};
    return result;
}

static int
Printer_init(Printer *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    PyObject *date;
    if (!PyArg_ParseTuple(args, "O!", &PyBytes_Type, &date)) return -1;
    if (self->sources == NULL) {
        self->sources = PyMem_Calloc(MAX_IDS, sizeof(Source));
        if (self->sources == NULL) { PyErr_NoMemory(); return -1; }
    }
    Py_INCREF(date); Py_XSETREF(self->date, date);
    PyObject *empty = PyBytes_FromString(""), *zero = PyBytes_FromString("0");
    if (empty == NULL || zero == NULL) { Py_XDECREF(empty); Py_XDECREF(zero); return -1; }
    Py_INCREF(empty);
    Py_XSETREF(self->wname, empty);
    Py_XSETREF(self->zone, empty);
    Py_XSETREF(self->wid, zero);
    self->have_sync = 0;
    self->dc_ok = 0;
    return 0;
}

static void
Printer_dealloc(Printer *self)
{
    if (self->sources != NULL) {
        for (Py_ssize_t i = 0; i < MAX_IDS; i++) free_source(&self->sources[i]);
        PyMem_Free(self->sources);
    }
    Py_XDECREF(self->date); Py_XDECREF(self->wname); Py_XDECREF(self->wid);
    Py_XDECREF(self->zone);
    PyMem_Free(self->held.p);
    PyMem_Free(self->keys.p);
    PyMem_Free(self->dc.p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Printer_methods[] = {
    {"add_source", (PyCFunction)Printer_add_source, METH_VARARGS,
     "add_source(id, line_items, message_items or None) -> False if the id is beyond C's"},
    {"set_writer", (PyCFunction)Printer_set_writer, METH_VARARGS, "set_writer(name, id_text)"},
    {"set_sync", (PyCFunction)Printer_set_sync, METH_VARARGS,
     "set_sync(clock, frequency, ns, tz_offset, tz_name)"},
    {"render", (PyCFunction)Printer_render, METH_VARARGS,
     "render(data, pos, keyed=False) -> (lines, pos, stop): stop 0 end, 1 metadata, "
     "2 Python's event; keyed: the lines held for write_sorted"},
    {"hold", (PyCFunction)Printer_hold, METH_VARARGS, "hold(clock, line): a line held"},
    {"write_sorted", (PyCFunction)Printer_write_sorted, METH_O,
     "write_sorted(write): the held lines to write(bytes), in clock order (stable)"},
    {NULL}
};

static PyTypeObject PrinterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bread._binlog.Printer",
    .tp_basicsize = sizeof(Printer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Printer_init,
    .tp_dealloc = (destructor)Printer_dealloc,
    .tp_methods = Printer_methods,
    .tp_doc = "C++ binlog events as the C++ bread's text lines (bread/cxx/fastpath.py)",
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "bread._binlog",
    .m_doc = "C++ binlog files' text lines in C.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__binlog(void);   /* declared: the one function exported */

PyMODINIT_FUNC
PyInit__binlog(void)
{
    if (PyType_Ready(&PrinterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&PrinterType);
    if (PyModule_AddObject(m, "Printer", (PyObject *)&PrinterType) < 0) {
        Py_DECREF(&PrinterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
