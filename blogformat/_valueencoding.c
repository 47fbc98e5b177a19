/* blogformat/_valueencoding.c: argument values as msgpack, byte for byte as
 * blogformat/valueencoding.py encodes them (docs/format.md 7), for the C fast path
 * (blog/pipeline/_channel.c's pushes). Compiled into blog's extension (blog._speedups,
 * whose internal header, blog/_extension.h, declares what it gives the other files), as
 * only the writer encodes: blogformat's Python never imports it.
 *
 * The plain scalars (None, bool, int within 64 bits, float, str without lone surrogates,
 * bytes) are blogformat/mpwrite.h's put_scalar. put_value() adds the values whose text
 * a reader derives from the value itself (blogformat.valueencoding.reproducible), so that an
 * event of them needs no texts map: list, tuple, dict, set, frozenset (of such values,
 * nested up to MAX_NEST), naive or UTC datetime and time, a datetime in a zoneinfo zone
 * (at the top of an argument that no !r or !a placeholder shows), date, timedelta, Decimal
 * and UUID, each of exactly that type; and the enum members, dataclasses and named tuples
 * the Python path has described. Anything else (a subclass, a pytz datetime...) answers
 * "not here" and the Python path encodes the whole event.
 *
 * Exact builtin types only, read through their C API; the zoneinfo zone's utcoffset and
 * tzname are its C methods.
 */
#include "../blog/_extension.h"

#include <datetime.h>
#include <string.h>

/* ---- values beyond the scalars ------------------------------------------ */

/* The extension codes of docs/format.md 7 (blogformat.values). */
#define EXT_TUPLE 1
#define EXT_SET 3
#define EXT_FROZENSET 4
#define EXT_DATETIME 5
#define EXT_DATE 6
#define EXT_TIME 7
#define EXT_TIMEDELTA 8
#define EXT_DECIMAL 9
#define EXT_UUID 10

/* Containers nest this deep at most here (the Python path takes deeper ones). */
#define MAX_NEST 16

/* The fields of blogformat.valueencoding's RecordInfo and EnumInfo (the entries of
 * RECORD_TYPES and ENUM_TYPES), in their order: read by position here, by name there
 * (tests/test_c_sources.py checks that the two agree). */
enum { RECORD_TYPE_NAME, RECORD_REPR_NAME, RECORD_NAMES, RECORD_MASK, RECORD_IS_TUPLE,
       RECORD_ACCESS, RECORD_TYPE_ID, RECORD_FIELDS };
enum { ENUM_TYPE_NAME, ENUM_STYLE, ENUM_MEMBER_IDS, ENUM_FIELDS };

/* Decimal, UUID and ZoneInfo: NULL until a value may be one (loaded_type). */
static PyTypeObject *DecimalType, *UUIDType, *ZoneInfoType;
/* ZoneInfo's utcoffset and tzname (method descriptors, called with the zone first), and
 * the last zone met with its key. */
static PyObject *zone_utcoffset, *zone_tzname, *last_zone, *last_key;
static PyObject *str_int, *str_key, *str_utcoffset, *str_tzname, *str_name_, *str_value_;
static PyObject *str_decimal, *str_uuid, *str_zoneinfo;
/* blogformat.valueencoding.ENUM_TYPES: enum class -> (type name, style, {member name: described
 * id}), filled by the Python path the first time it meets a class, and a member (set by
 * use_registries: NULL until then). */
static PyObject *enum_types;
/* blogformat.valueencoding.RECORD_TYPES: dataclass or named tuple class -> (type name, repr name
 * or None, field names, shown mask, is a named tuple, field access, described id). */
static PyObject *record_types;
/* The encodings of the enum members met last, by address (direct-mapped): a member's
 * encoding never changes, and the entry holds the member, so that its address is not
 * another object's while it is cached. */
#define MEMBER_CACHE 128
static struct { PyObject *member; PyObject *bytes; } member_cache[MEMBER_CACHE];
#define EXT_MEMBER 15
#define EXT_RECORD 16
#define ENUM_NAMED 1
#define ENUM_VALUE 2

/* Import what put_value() needs; 0 done, -1 error. Called once, at module init. */
int
blog_encode_init(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return -1;
    str_int = PyUnicode_InternFromString("int");
    str_key = PyUnicode_InternFromString("key");
    str_utcoffset = PyUnicode_InternFromString("utcoffset");
    str_tzname = PyUnicode_InternFromString("tzname");
    str_name_ = PyUnicode_InternFromString("_name_");
    str_value_ = PyUnicode_InternFromString("_value_");
    str_decimal = PyUnicode_InternFromString("decimal");
    str_uuid = PyUnicode_InternFromString("uuid");
    str_zoneinfo = PyUnicode_InternFromString("zoneinfo");
    if (str_name_ == NULL || str_value_ == NULL || str_decimal == NULL || str_uuid == NULL
        || str_zoneinfo == NULL)
        return -1;
    if (str_int == NULL || str_key == NULL || str_utcoffset == NULL || str_tzname == NULL)
        return -1;
    return 0;
}

/* `module`.`name` if `module` is loaded (never importing it), kept in *type; 0 done (*type
 * still NULL if it is not loaded, or not yet all there), -1 error. No value of that type
 * exists before its module is loaded, so decimal, uuid and zoneinfo are looked up when a
 * value may be one, not at init: `import blog` imports none of them. */
static int
loaded_type(PyObject *module, const char *name, PyTypeObject **type)
{
    PyObject *m = PyImport_GetModule(module);
    if (m == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *t = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    if (t == NULL) {
        /* Not there yet: another thread is importing the module. A value cannot be one
         * of its type yet; looked up again next time. */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (!PyType_Check(t)) {
        Py_DECREF(t);
        PyErr_Format(PyExc_TypeError, "%U.%s is not a type", module, name);
        return -1;
    }
    *type = (PyTypeObject *)t;
    return 0;
}

/* ZoneInfo, its utcoffset and tzname, once zoneinfo is loaded; 0 done, -1 error. */
static int
load_zoneinfo(void)
{
    PyTypeObject *t = NULL;
    if (loaded_type(str_zoneinfo, "ZoneInfo", &t) < 0) return -1;
    if (t == NULL) return 0;     /* not loaded: no tzinfo is a ZoneInfo */
    zone_utcoffset = PyObject_GetAttrString((PyObject *)t, "utcoffset");
    zone_tzname = PyObject_GetAttrString((PyObject *)t, "tzname");
    if (zone_utcoffset == NULL || zone_tzname == NULL) {
        Py_CLEAR(zone_utcoffset);
        Py_CLEAR(zone_tzname);
        Py_DECREF(t);
        return -1;
    }
    ZoneInfoType = t;
    return 0;
}

/* [offset_us, tzname, key] of a datetime in a zoneinfo zone, as valueencoding._tz writes it;
 * nil if its utcoffset is None. 1 done, 0 not here, -1 error. */
static int
put_zone(Buf *b, PyObject *tz, PyObject *dt)
{
    PyObject *call[2] = {tz, dt};
    PyObject *off = PyObject_Vectorcall(zone_utcoffset, call, 2, NULL);
    if (off == NULL) return -1;
    if (off == Py_None) {
        Py_DECREF(off);
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)0xc0;
        return 1;
    }
    if (!PyDelta_Check(off)) { Py_DECREF(off); return 0; }
    long long us = ((long long)PyDateTime_DELTA_GET_DAYS(off) * 86400
                    + PyDateTime_DELTA_GET_SECONDS(off)) * 1000000LL
                   + PyDateTime_DELTA_GET_MICROSECONDS(off);
    Py_DECREF(off);
    PyObject *name = PyObject_Vectorcall(zone_tzname, call, 2, NULL);
    if (name == NULL) return -1;
    PyObject *key;
    if (tz == last_zone) {       /* a zone's key never changes: the last one's, kept */
        key = Py_NewRef(last_key);
    }
    else {
        key = PyObject_GetAttr(tz, str_key);
        if (key == NULL) { Py_DECREF(name); return -1; }
        Py_XSETREF(last_zone, Py_NewRef(tz));
        Py_XSETREF(last_key, Py_NewRef(key));
    }
    int r = -1;
    if (buf_reserve(b, 1) < 0 || (b->p[b->len++] = (char)0x93, put_int(b, us) < 0))
        goto done;
    PyObject *parts[2] = {name, key};
    r = 1;
    for (int i = 0; i < 2 && r == 1; i++) {
        if (PyUnicode_CheckExact(parts[i]))
            r = put_scalar(b, parts[i]);       /* 0: a lone surrogate, the Python path's */
        else if (buf_reserve(b, 1) < 0)
            r = -1;
        else
            b->p[b->len++] = (char)0xc0;     /* not a str: nil, as valueencoding._tz writes it */
    }
done:
    Py_DECREF(name);
    Py_DECREF(key);
    return r;
}

/* tz of a datetime or time: nil if naive, [0, nil, nil] for UTC (as valueencoding._tz writes the
 * timezone.utc singleton), a zoneinfo zone's if ``zone`` (a datetime allowed one); 1 done,
 * 0 any other zone (the Python path), -1 error. */
static int
put_tz(Buf *b, PyObject *tz, PyObject *dt, int zone)
{
    if (tz == Py_None) {
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)0xc0;
        return 1;
    }
    if (tz == PyDateTime_TimeZone_UTC) {
        if (buf_reserve(b, 4) < 0) return -1;
        memcpy(b->p + b->len, "\x93\x00\xc0\xc0", 4);
        b->len += 4;
        return 1;
    }
    if (zone && ZoneInfoType == NULL && load_zoneinfo() < 0)
        return -1;
    if (zone && Py_TYPE(tz) == ZoneInfoType)
        return put_zone(b, tz, dt);
    return 0;
}

static int put_value(Buf *b, PyObject *v, int depth, int zone, int key);
static int put_record(Buf *b, PyObject *v, PyObject *info, int depth);
static int put_enum(Buf *b, PyObject *v, PyTypeObject *t, int *scalar_value);

/* A list's items, each held while it is encoded; 0 (the Python path) if the list changed
 * size meanwhile (code that ran during the encoding: a collection's finalizer, say). */
static int
put_list(Buf *b, PyObject *v, int depth)
{
    Py_ssize_t n = PyList_GET_SIZE(v);
    if (put_header(b, 0x90, 0xdc, 0xdd, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_SIZE(v) != n) return 0;
        PyObject *x = Py_NewRef(PyList_GET_ITEM(v, i));
        int r = put_value(b, x, depth + 1, 0, 0);
        Py_DECREF(x);
        if (r <= 0) return r;
    }
    return PyList_GET_SIZE(v) == n;
}

/* An event's values: the array of them. Bit i of ``shown_by_repr`` says a !r or !a
 * placeholder, or one with a spec, shows value i: a zoneinfo datetime or a dataclass
 * there is the Python path's (its text may be kept), as is one past the 64th value. */
int
blog_put_args(Buf *b, PyObject *const *items, Py_ssize_t n,
              unsigned long long shown_by_repr)
{
    if (put_header(b, 0x90, 0xdc, 0xdd, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int plain = i < 64 && !((shown_by_repr >> i) & 1);
        if (!plain && record_types != NULL && PyDict_Contains(record_types,
                                                              (PyObject *)Py_TYPE(items[i])))
            return 0;
        int r = put_value(b, items[i], 1, plain, 0);
        if (r <= 0) return r;
    }
    return 1;
}

/* [described id, field values...] (extension 16), as blogformat.valueencoding encodes a class of
 * RECORD_TYPES (its field names and repr are in its description, written once). */
static int
put_record(Buf *b, PyObject *v, PyObject *info, int depth)
{
    if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != RECORD_FIELDS
        || !PyLong_CheckExact(PyTuple_GET_ITEM(info, RECORD_TYPE_ID)))
        return 0;                /* not described (the registry is full): the Python path's */
    long long tid = PyLong_AsLongLong(PyTuple_GET_ITEM(info, RECORD_TYPE_ID));
    if (tid == -1 && PyErr_Occurred()) return -1;
    PyObject *names = PyTuple_GET_ITEM(info, RECORD_NAMES);
    int is_tuple = PyTuple_GET_ITEM(info, RECORD_IS_TUPLE) == Py_True;
    /* How its fields are read (blogformat.valueencoding.FIELDS_IN_*): 0 where that could run
     * Python code (a property...), which could change what is being encoded: not here. */
    long access = is_tuple ? 0 : PyLong_AsLong(PyTuple_GET_ITEM(info, RECORD_ACCESS));
    if (!is_tuple && access != 1 && access != 2) {
        PyErr_Clear();
        return 0;
    }
    PyObject *dict = NULL;    /* the instance dict, where the fields are read from it */
    if (access == 1) {
        dict = PyObject_GenericGetDict(v, NULL);
        if (dict == NULL) PyErr_Clear();
    }
    if (!PyTuple_CheckExact(names)) {
        Py_XDECREF(dict);
        return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    Py_ssize_t at;
    int r = -1;
    if (is_tuple && (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != n)) { r = 0; goto fail; }
    if (open_ext(b, &at) < 0) goto fail;
    if (put_header(b, 0x90, 0xdc, 0xdd, n + 1) < 0 || put_int(b, tid) < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name)) { r = 0; goto fail; }
        PyObject *x = NULL;
        if (is_tuple)
            x = Py_NewRef(PyTuple_GET_ITEM(v, i));
        else if (dict != NULL && PyDict_CheckExact(dict)
                 && (x = PyDict_GetItemWithError(dict, name)) != NULL)
            Py_INCREF(x);
        else if (!PyErr_Occurred())
            x = PyObject_GetAttr(v, name);
        if (x == NULL) { r = -1; goto fail; }  /* a deleted field: the Python path marks it */
        r = put_value(b, x, depth + 1, 0, 0);
        Py_DECREF(x);
        if (r <= 0) goto fail;
    }
    Py_XDECREF(dict);
    close_ext(b, at, EXT_RECORD);
    return 1;
fail:
    Py_XDECREF(dict);
    return r;
}

/* Encode a value: 1 done, 0 not here (the Python path encodes it), -1 error. On 0 and -1,
 * what was written is garbage: the caller drops the whole buffer. ``zone``: a datetime in
 * a zoneinfo zone may be encoded here (the top of an argument no !r shows). */
static int
put_value(Buf *b, PyObject *v, int depth, int zone, int key)
{
    int r = put_scalar(b, v);
    if (r != 0)
        return r;
    if (depth >= MAX_NEST)
        return 0;
    PyTypeObject *t = Py_TYPE(v);
    Py_ssize_t at;
    int slot = (int)(((size_t)v >> 4) & (MEMBER_CACHE - 1));
    if (member_cache[slot].member == v) {      /* an enum member met lately: its bytes */
        PyObject *bytes = member_cache[slot].bytes;
        if (buf_reserve(b, PyBytes_GET_SIZE(bytes)) < 0) return -1;
        memcpy(b->p + b->len, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
        b->len += PyBytes_GET_SIZE(bytes);
        return 1;
    }
    if (t == &PyList_Type)
        return key ? 0 : put_list(b, v, depth);
    if (t == &PyTuple_Type) {     /* immutable: its items live as long as it does */
        if (open_ext(b, &at) < 0) return -1;
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        if (put_header(b, 0x90, 0xdc, 0xdd, n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if ((r = put_value(b, PyTuple_GET_ITEM(v, i), depth + 1, 0, key)) <= 0) return r;
        close_ext(b, at, EXT_TUPLE);
        return 1;
    }
    if (t == &PySet_Type || t == &PyFrozenSet_Type) {   /* in iteration order, as list(s) */
        if (key && t == &PySet_Type) return 0;
        if (open_ext(b, &at) < 0) return -1;
        Py_ssize_t n = PySet_GET_SIZE(v), seen = 0;
        if (put_header(b, 0x90, 0xdc, 0xdd, n) < 0) return -1;
        PyObject *it = PyObject_GetIter(v), *item;   /* the public way (3.13 hides the other) */
        if (it == NULL) return -1;
        while ((item = PyIter_Next(it)) != NULL) {
            r = put_value(b, item, depth + 1, 0, 1);   /* its elements: keys, read back hashable */
            Py_DECREF(item);
            if (r > 0 && (++seen > n || PySet_GET_SIZE(v) != n)) r = 0;  /* changed meanwhile */
            if (r <= 0) { Py_DECREF(it); return r; }
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) return -1;
        if (seen != n) return 0;
        close_ext(b, at, t == &PySet_Type ? EXT_SET : EXT_FROZENSET);
        return 1;
    }
    if (t == &PyDict_Type) {
        if (key) return 0;
        Py_ssize_t n = PyDict_GET_SIZE(v);
        if (put_header(b, 0x80, 0xde, 0xdf, n) < 0) return -1;
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            Py_INCREF(k);             /* held while encoded: code run meanwhile may drop them */
            Py_INCREF(x);
            if ((r = put_value(b, k, depth + 1, 0, 1)) > 0)
                r = put_value(b, x, depth + 1, 0, 0);
            Py_DECREF(k);
            Py_DECREF(x);
            if (r <= 0) return r;
            if (PyDict_GET_SIZE(v) != n) return 0;
        }
        return 1;
    }
    if (t == PyDateTimeAPI->DateTimeType) {
        if (open_ext(b, &at) < 0) return -1;
        long long f[8] = {
            PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v),
            PyDateTime_DATE_GET_HOUR(v), PyDateTime_DATE_GET_MINUTE(v),
            PyDateTime_DATE_GET_SECOND(v), PyDateTime_DATE_GET_MICROSECOND(v),
            PyDateTime_DATE_GET_FOLD(v)};
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)0x99;
        for (int i = 0; i < 8; i++)
            if (put_int(b, f[i]) < 0) return -1;
        if ((r = put_tz(b, PyDateTime_DATE_GET_TZINFO(v), v, zone)) <= 0) return r;
        close_ext(b, at, EXT_DATETIME);
        return 1;
    }
    if (t == PyDateTimeAPI->DateType) {
        if (open_ext(b, &at) < 0) return -1;
        long long f[3] = {PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v)};
        if (put_ints(b, f, 3) < 0) return -1;
        close_ext(b, at, EXT_DATE);
        return 1;
    }
    if (t == PyDateTimeAPI->TimeType) {
        if (open_ext(b, &at) < 0) return -1;
        long long f[5] = {
            PyDateTime_TIME_GET_HOUR(v), PyDateTime_TIME_GET_MINUTE(v),
            PyDateTime_TIME_GET_SECOND(v), PyDateTime_TIME_GET_MICROSECOND(v),
            PyDateTime_TIME_GET_FOLD(v)};
        if (buf_reserve(b, 1) < 0) return -1;
        b->p[b->len++] = (char)0x96;
        for (int i = 0; i < 5; i++)
            if (put_int(b, f[i]) < 0) return -1;
        if ((r = put_tz(b, PyDateTime_TIME_GET_TZINFO(v), Py_None, 0)) <= 0) return r;
        close_ext(b, at, EXT_TIME);
        return 1;
    }
    if (t == PyDateTimeAPI->DeltaType) {
        if (open_ext(b, &at) < 0) return -1;
        long long f[3] = {PyDateTime_DELTA_GET_DAYS(v), PyDateTime_DELTA_GET_SECONDS(v),
                          PyDateTime_DELTA_GET_MICROSECONDS(v)};
        if (put_ints(b, f, 3) < 0) return -1;
        close_ext(b, at, EXT_TIMEDELTA);
        return 1;
    }
    if (DecimalType == NULL && (strcmp(t->tp_name, "decimal.Decimal") == 0
                                || strcmp(t->tp_name, "Decimal") == 0)
            && loaded_type(str_decimal, "Decimal", &DecimalType) < 0)
        return -1;
    if (t == DecimalType) {      /* raw ASCII of str(d): the C decimal's own __str__ */
        PyObject *s = PyObject_Str(v);
        if (s == NULL) return -1;
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(s, &n);
        if (p == NULL || open_ext(b, &at) < 0 || buf_reserve(b, n) < 0) {
            Py_DECREF(s);
            return -1;
        }
        memcpy(b->p + b->len, p, n);
        b->len += n;
        Py_DECREF(s);
        close_ext(b, at, EXT_DECIMAL);
        return 1;
    }
    if (UUIDType == NULL && strcmp(t->tp_name, "UUID") == 0
            && loaded_type(str_uuid, "UUID", &UUIDType) < 0)
        return -1;
    if (t == UUIDType) {         /* raw 16 bytes, big-endian: its int, read from the slot */
        PyObject *i = PyObject_GetAttr(v, str_int);
        if (i == NULL) return -1;
        if (!PyLong_CheckExact(i) || open_ext(b, &at) < 0 || buf_reserve(b, 16) < 0) {
            Py_DECREF(i);
            return PyErr_Occurred() ? -1 : 0;
        }
#if PY_VERSION_HEX >= 0x030D0000
        int bad = _PyLong_AsByteArray((PyLongObject *)i, (unsigned char *)b->p + b->len, 16,
                                      0, 0, 1);
#else
        int bad = _PyLong_AsByteArray((PyLongObject *)i, (unsigned char *)b->p + b->len, 16,
                                      0, 0);
#endif
        Py_DECREF(i);
        if (bad < 0) { PyErr_Clear(); return 0; }
        b->len += 16;
        close_ext(b, at, EXT_UUID);
        return 1;
    }
    if (record_types != NULL) {  /* a dataclass or named tuple: its fields by name */
        PyObject *info = PyDict_GetItemWithError(record_types, (PyObject *)t);
        if (info == NULL && PyErr_Occurred())
            return -1;
        if (info != NULL) {
            /* As a key it is read back unhashable (its fields); a class whose repr is its
             * own needs its text kept: both the Python path's. */
            if (key || !PyTuple_Check(info) || PyTuple_GET_SIZE(info) != RECORD_FIELDS
                || PyTuple_GET_ITEM(info, RECORD_REPR_NAME) == Py_None)
                return 0;
            return put_record(b, v, info, depth);
        }
    }
    if (enum_types != NULL) {    /* an enum member whose class shows it in a known style */
        Py_ssize_t start = b->len;
        int scalar_value = 0;
        r = put_enum(b, v, t, &scalar_value);
        if (r == 1 && scalar_value) {     /* its bytes cached only where they cannot change */
            PyObject *bytes = PyBytes_FromStringAndSize(b->p + start, b->len - start);
            if (bytes == NULL) return -1;
            Py_XSETREF(member_cache[slot].bytes, bytes);
            Py_XSETREF(member_cache[slot].member, Py_NewRef(v));
        }
        return r;
    }
    return 0;
}

/* An enum member of a class in ENUM_TYPES, described: its id (extension 15). One not
 * described yet (or whose value is not a plain scalar) is the Python path's. */
static int
put_enum(Buf *b, PyObject *v, PyTypeObject *t, int *scalar_value)
{
    Py_ssize_t at;
    int r;
    {
        PyObject *info = PyDict_GetItemWithError(enum_types, (PyObject *)t);
        if (info == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != ENUM_FIELDS
            || !PyDict_CheckExact(PyTuple_GET_ITEM(info, ENUM_MEMBER_IDS)))
            return 0;
        long style = PyLong_AsLong(PyTuple_GET_ITEM(info, ENUM_STYLE));
        if (style != ENUM_NAMED && style != ENUM_VALUE) {
            PyErr_Clear();
            return 0;
        }
        PyObject *name = PyObject_GetAttr(v, str_name_);
        if (name == NULL) return -1;
        PyObject *value = PyObject_GetAttr(v, str_value_);
        if (value == NULL) { Py_DECREF(name); return -1; }
        r = 0;
        if (style == ENUM_VALUE && !PyLong_CheckExact(value) && !PyUnicode_CheckExact(value))
            goto enum_done;                  /* shown as a value of another type: Python's */
        if (!PyUnicode_CheckExact(name))
            goto enum_done;
        /* Described only where its value is a plain scalar: its bytes never change. */
        PyObject *tid = PyDict_GetItemWithError(PyTuple_GET_ITEM(info, ENUM_MEMBER_IDS), name);
        if (tid == NULL || !PyLong_CheckExact(tid)) {
            r = PyErr_Occurred() ? -1 : 0;
            goto enum_done;
        }
        long long id = PyLong_AsLongLong(tid);
        if (id == -1 && PyErr_Occurred()) { r = -1; goto enum_done; }
        *scalar_value = 1;
        if (open_ext(b, &at) < 0 || put_int(b, id) < 0) { r = -1; goto enum_done; }
        close_ext(b, at, EXT_MEMBER);
        r = 1;
    enum_done:
        Py_DECREF(name);
        Py_DECREF(value);
        return r;
    }
    return 0;
}

/* encode_values(values: tuple) -> bytes | None: the msgpack array of the values as the
 * call paths encode them (None: not here, the Python path's). For the parity tests. */
PyObject *
blog_encode_values(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_values(values: tuple, shown_by_repr=0)");
        return NULL;
    }
    PyObject *values = args[0];
    unsigned long long shown = 0;
    if (nargs == 2) {
        shown = PyLong_AsUnsignedLongLongMask(args[1]);
        if (shown == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
    }
    Buf b = {NULL, 0, 0};
    int r = blog_put_args(&b, ((PyTupleObject *)values)->ob_item, PyTuple_GET_SIZE(values), shown);
    PyObject *out = r > 0 ? PyBytes_FromStringAndSize(b.p, b.len) : NULL;
    PyMem_Free(b.p);
    if (r < 0 && PyErr_ExceptionMatches(PyExc_MemoryError))
        return NULL;
    if (r <= 0) {            /* as the call paths do: anything else is the Python path's */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return out;
}

/* use_registries(enum_types, record_types): blogformat.valueencoding.ENUM_TYPES and
 * RECORD_TYPES, read by put_value(). */
PyObject *
blog_use_registries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "use_registries(enum_types: dict, record_types: dict)");
        return NULL;
    }
    Py_XSETREF(enum_types, Py_NewRef(args[0]));
    Py_XSETREF(record_types, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}
