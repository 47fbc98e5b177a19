/* bread/decode/_extension.h: what the C files of bread's extension (bread._speedups) share.
 *
 * The extension does the per-event work of reading; the pure-Python code is the reference,
 * and each C file sits beside the module it mirrors:
 *   bread/decode/_native.c    bread/decode/decoder.py  the Renderer: its tables of call
 *                             sites, writers and sync, and its calls, one per output
 *   bread/sinks/_lines.c      bread/sinks/lines.py, bread/render.py  an event as a text
 *                             line; and bread/sinks/rows.py, bread/sinks/json.py  as a
 *                             JSON line or a CSV row
 *   bread/sinks/_events.c     bread/sinks/events.py, bread/events.py  an event as an Event
 *                             object; message(), MessageGetter
 *   bread/sinks/_batches.c    bread/sinks/batches.py  an event as a row of columns;
 *                             gather(); the Blocks (column memory handed to Arrow, pooled)
 *   bread/sinks/_tables.c     bread/sinks/tables.py, bread/sinks/typed.py  an event of one
 *                             call site as a row of typed columns, or its values' kinds
 *   bread/decode/_decode.c    blogformat/entries.py (decode_events),
 *                             blogformat/columnframes.py (decode), bread/decode/filters.py
 *                             the walk over one events frame or columnar frame, each
 *                             event handed to the output's EventFn
 *   bread/decode/_message.h   blogformat/placeholders.py  a message and its values as text
 *   bread/decode/_speedups.c  bread/accel.py  the module
 * The sinks' files include this header and _message.h from here (../decode/). Each file
 * calls only the files below it in this list (the Renderer calls the outputs, which call
 * the walk's helpers; the walk calls the output it is given, by pointer).
 * The buffer and msgpack reading are blogformat's, shared with the writer's extension.
 * What one file gives another is declared here, its name prefixed bread_.
 */
#ifndef BREAD_SPEEDUPS_H
#define BREAD_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The reader's buffers hold whole frames' text: they start larger than the writer's. */
#define BUF_FIRST (1 << 16)
#include "buf.h"
#include "mpread.h"

/* A value of a columnar frame rendered once (_decode.c), its text s[0..n) as the message
 * and the JSON both write it: a finite float (in `d`), an int within 64 bits (in `i`); or
 * a str of a string column's dictionary (no surrogates), its text s[0..n) and its JSON
 * (quoted, escaped) after it, `i` bytes, both made once per word. */
enum { V_F64_TEXT = V_EXT + 1, V_INT_TEXT = V_EXT + 2, V_STR_TEXT = V_EXT + 3 };

/* ---- the Renderer's tables (_native.c) -------------------------------------- */

/* Event format items (bytes literal, or a code rendered per event). IT_EXC renders nothing:
 * an event with an exception among its fields goes to Python (its traceback under it);
 * IT_FIELD the value of the keyword field `index` (%K). A JSON line's or CSV row's items
 * (bread/sinks/rows.py) take IT_DATE (the ISO time), IT_WNAME (the writer's JSON or cell),
 * IT_WID, IT_MSG (the message's JSON or cell) and IT_ARGS, IT_FIELDS (the values' JSON);
 * IT_PYTHON: every event of the source is Python's. */
enum { IT_LIT = 0, IT_DATE = 'd', IT_UTC = 'u', IT_CLOCK = 'r', IT_MSG = 'm',
       IT_WNAME = 'n', IT_WID = 't', IT_EXC = 'x', IT_FIELD = 'K', IT_ARGS = '[',
       IT_FIELDS = '{', IT_PYTHON = '?' };
/* What render() makes of an event: a text line, a JSON line (-o jsonl), a CSV row. */
enum { FORM_TEXT = 0, FORM_JSONL = 1, FORM_CSV = 2 };
/* The extension code of an exception (blogformat.values.EXT_EXCEPTION). */
#define EXT_EXCEPTION 13
/* Message items. */
enum { MI_LIT = 0, MI_POS = 1, MI_FIELD = 2 };

typedef struct { int code; Py_ssize_t index; const char *s; Py_ssize_t n; } Item;

typedef struct {
    Item *items; Py_ssize_t nitems;      /* the event format, this source's constants baked in */
    Item *msg; Py_ssize_t nmsg;          /* the message template; NULL: Python renders it */
    Py_ssize_t nnames;                   /* keyword fields at the end of args */
    PyObject *obj;                       /* the EventSource (borrowed: `keep` owns it), or NULL */
    PyObject *names;                     /* its field_names, a tuple of str, or NULL */
    int skip;                            /* the filter leaves out every event of this source */
    const char *pre, *post;              /* around each line, not escaped (colour), or NULL */
    Py_ssize_t npre, npost;
} Source;

typedef struct {
    const char *name; Py_ssize_t nname; const char *id; Py_ssize_t nid;
    PyObject *obj;                       /* the WriterProp (borrowed: `keep` owns it), or NULL */
    int skip;                            /* the filter leaves out every event of this writer */
} Writer;

#define MAX_IDS 65536
#define MAX_ARGS 32
#define MAX_N 8

/* A date rendered for one second, with the places where %N goes. */
typedef struct {
    int valid;
    long long secs;
    char text[256];
    Py_ssize_t len;
    Py_ssize_t at[MAX_N];
    int nat;
} DateCache;

/* A typed table's column (_tables.c): its kind (tables.KINDS), its values (int64s,
 * doubles, a bitmap of bools, or UTF-8 and int32 offsets), Arrow's validity bitmap. */
typedef struct { int kind; Buf data, offs, valid; Py_ssize_t nulls; } TypedCol;

#define MAX_TYPED_COLS (2 * MAX_ARGS)
#define MAX_TYPED_SIDS 16

/* The typed table being made (rows), or the kinds being found (infer). */
typedef struct {
    int infer;
    Py_ssize_t npos, nfields;            /* the columns: positional values, then fields */
    PyObject *names;                     /* the table's field names (a tuple) */
    long long checked_sid;               /* the source last found to name them so, or -1 */
    int checked_ok;
    long long late;                      /* events whose values do not fit the columns */
    TypedCol cols[MAX_TYPED_COLS];
    /* infer: kinds seen (a bit per kind) per positional value and field; sources seen */
    unsigned pos_mask[MAX_ARGS], field_mask[MAX_ARGS];
    Py_ssize_t max_pos;
    long long sids[MAX_TYPED_SIDS];
    int nsids;
} Typed;

/* A columnar frame being walked (_decode.c). */
typedef struct ColFrame ColFrame;

typedef struct Renderer {
    PyObject_HEAD
    PyObject *keep;              /* dict: per source, writer and sync, what the tables point
                                    into (3*id, 3*id+1, -1); emptied by reset() */
    PyObject *date_hold;         /* list: what the date format's items point into */
    Source **sources;            /* by id, < MAX_IDS */
    Writer *writers;             /* by id, < MAX_IDS; name NULL: unknown */
    Item *date; Py_ssize_t ndate;
    long long clock_value, frequency, ns0;
    long long tz_offset;
    const char *tz_name; Py_ssize_t ntz;
    DateCache local, utc;
    PyObject *fallback;          /* fallback(event bytes, writer id, clock) -> what the output
                                    makes of an event C leaves to Python (text: bytes, events:
                                    an Event, columns: (message, args, fields) bytes), or None
                                    if the filter leaves it out */
    int escape;
    /* JSON lines and CSV rows (form) */
    int form;
    int quote_formulas;          /* csv: a text cell a spreadsheet would run gets a ' */
    PyObject *zone;              /* zone(secs) -> (ISO text before the ns, after) bytes, or
                                    None: the ISO time of --tz's zone; NULL: the sync's */
    Buf scratch;                 /* a message or JSON, before it is escaped and quoted */
    Buf out;
    Py_ssize_t max_out;          /* bytes of text per render() call, about */
    /* the frame being rendered */
    PyObject *payload;
    Py_buffer view;
    Rd rd;                       /* the next event */
    long long wid, prev, left;   /* its writer, the previous clock, events left */
    long long rendered;          /* events of the frame rendered so far */
    int state;
    /* the filter's time window: events with since <= time < until */
    long long since, until;
    int windowed;
    /* events mode */
    PyObject *event_type;        /* bread.Event; its slots are at these offsets: */
    Py_ssize_t off[11];          /* source, writer_prop, clock, ns, tz, args, fields, _texts,
                                    _message, offset, origin */
    PyObject *origin;            /* the Origin of the events (the stream's: set by Python) */
    PyObject *tz;                /* the zone of the sync in force (borrowed: `keep`) */
    PyObject *utc_tz;            /* the default sync's zone */
    PyObject *empty_texts;       /* {}: the captured texts of an event that has none */
    PyObject *events;            /* the list events() and keyed() return */
    PyObject *frame_offset;      /* int: the offset of the frame being read */
    /* keys of the events kept, for the sorted merge (keyed()) */
    Buf keys;
    int want_keys;
    /* events and columns: rows made (this call's Events; the columns since take_columns()) */
    Py_ssize_t rows, max_rows;
    /* columns mode */
    Buf col[10];                 /* clock, ns, source id, writer id (int64), message data,
                                    offsets; args JSON, offsets; fields JSON, offsets */
    Py_ssize_t col_last[10];     /* each column's bytes in the last batch taken: what the
                                    next one's buffer starts with room for */
    int want_json;               /* columns(): the args and fields columns too */
    int want_message;
    Typed *typed;                /* typed mode (set_typed()), or NULL */
    ColFrame *cf;                /* the columnar frame being walked, or NULL */
    ColFrame *cf_spare;          /* the last one walked: its memory for the next, or NULL */
} Renderer;

/* What an output makes of one event the walk decoded and the filter keeps: its time is
 * within 64 bits; `simple`: its args are args[0..nargs) (no more than MAX_ARGS, no texts);
 * ev[0..evlen) its bytes, for the fallback. 1 done (made, or left to the fallback, which
 * may leave it out), 0 Python reads the rest of the frame, -1 error. */
typedef int (*EventFn)(Renderer *self, long long wid, long long sid, long long clock,
                       const Val *args, Py_ssize_t nargs, int simple,
                       const unsigned char *ev, Py_ssize_t evlen);

enum { C_CLOCK = 0, C_NS = 1, C_SID = 2, C_WID = 3, C_MSG = 4, C_MSGOFF = 5, C_ARGS = 6,
       C_ARGSOFF = 7, C_FIELDS = 8, C_FIELDSOFF = 9, C_NCOLS = 10 };
#define IS_OFFSETS(k) ((k) == C_MSGOFF || (k) == C_ARGSOFF || (k) == C_FIELDSOFF)

/* Longest message rendered here, in bytes; a longer one is Python's to cut
 * (blogformat.placeholders.MAX_MESSAGE characters, never more than as many bytes). */
#define MAX_MESSAGE (1 << 20)
/* Characters of JSON an event's values make at most (bread.sinks.json.MAX_JSON): values
 * that might pass it are Python's to cut. */
#define MAX_JSON ((Py_ssize_t)64 << 20)

/* Where render() is in the frame it was given. */
enum { ST_DONE = 0, ST_MORE = 1, ST_PYTHON = 2 };

/* Python's floor division of a by b > 0. */
static inline __int128
floordiv(__int128 a, long long b)
{
    __int128 q = a / b;
    if ((a % b) != 0 && a < 0) q -= 1;
    return q;
}

/* The wall time of `clock` in ns since the epoch (docs/format.md 4.3): 1, or 0
 * if it does not fit in 64 bits. */
static inline int
event_ns(Renderer *self, long long clock, long long *out)
{
    long long ns;
    if (self->frequency == 1000000000LL) {   /* blog's clock: ns since the epoch */
        if (__builtin_sub_overflow(clock, self->clock_value, &ns)
            || __builtin_add_overflow(ns, self->ns0, &ns))
            return 0;
    }
    else {
        __int128 t = floordiv(((__int128)clock - self->clock_value) * 1000000000,
                              self->frequency) + self->ns0;
        if (t > LLONG_MAX || t < LLONG_MIN) return 0;
        ns = (long long)t;
    }
    *out = ns;
    return 1;
}

/* ---- what each file gives the others ---------------------------------------- */

/* Hidden from outside the shared object, what follows is called directly (no PLT), and
 * the compiler may inline it within its own file, as it did when it was static. */
#pragma GCC visibility push(hidden)

/* _decode.c: walk a frame (an object with payload and offset; None: the rest of the one
 * begun), handing each event kept to `each`, then see state; its text or b"" (the columns
 * and Events are in the Renderer's buffers); frame_release() lets go of the frame. For the
 * outputs: the fallback's value for an event (a new reference), the sort key of an event
 * kept (time, end of its line in the text). */
PyObject *bread_walk(Renderer *self, PyObject *frame, EventFn each);
void bread_frame_release(Renderer *self);
/* The same over a columnar frame (docs/format.md 5.5): the rows it added; state 2 after
 * its first call: Python reads all of it. columns_release() lets go of what it decoded,
 * keeping its memory for the next frame; columns_free() frees that too. */
PyObject *bread_columns_walk(Renderer *self, PyObject *frame, EventFn each);
void bread_columns_release(Renderer *self);
void bread_columns_free(Renderer *self);
PyObject *bread_fallback(Renderer *self, const unsigned char *ev, Py_ssize_t evlen,
                         long long wid, long long clock);
int bread_put_key(Renderer *self, long long clock, Py_ssize_t end);
int bread_walk_init(void);

/* The outputs, each an EventFn: _lines.c a text line (or a JSON line or CSV row: the
 * Renderer's form), _events.c an Event, _batches.c a row of columns, _tables.c a row of
 * typed columns. */
int bread_line_event(Renderer *self, long long wid, long long sid, long long clock,
                     const Val *args, Py_ssize_t nargs, int simple,
                     const unsigned char *ev, Py_ssize_t evlen);
int bread_row_event(Renderer *self, long long wid, long long sid, long long clock,
                    const Val *args, Py_ssize_t nargs, int simple,
                    const unsigned char *ev, Py_ssize_t evlen);
int bread_object_event(Renderer *self, long long wid, long long sid, long long clock,
                       const Val *args, Py_ssize_t nargs, int simple,
                       const unsigned char *ev, Py_ssize_t evlen);
int bread_column_event(Renderer *self, long long wid, long long sid, long long clock,
                       const Val *args, Py_ssize_t nargs, int simple,
                       const unsigned char *ev, Py_ssize_t evlen);
int bread_typed_event(Renderer *self, long long wid, long long sid, long long clock,
                      const Val *args, Py_ssize_t nargs, int simple,
                      const unsigned char *ev, Py_ssize_t evlen);

/* _events.c: the offset of a slot of a class; message(); the module's MessageGetter type.
 * _batches.c: Renderer.take_columns(); gather(); the type of the Blocks (the columns'
 * memory, handed to Arrow without a copy) they return. */
int bread_slot_offset(PyObject *type, const char *name, Py_ssize_t *off);
PyObject *bread_message(PyObject *module, PyObject *const *a, Py_ssize_t nargs);
int bread_events_init(PyObject *m);
PyObject *bread_take_columns(Renderer *self, PyObject *unused);
PyObject *bread_gather(PyObject *module, PyObject *const *a, Py_ssize_t nargs);
int bread_batches_init(void);
/* _tables.c: Renderer.set_typed(), take_typed(); the typed state's release. */
PyObject *bread_set_typed(Renderer *self, PyObject *a);
PyObject *bread_take_typed(Renderer *self, PyObject *unused);
void bread_typed_free(Typed *t);

/* _native.c: the module's Renderer type. */
int bread_native_init(PyObject *m);

#pragma GCC visibility pop

#endif
