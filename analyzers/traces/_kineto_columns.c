/* The trace decoder's C pass: the events of `traceEvents` straight to columns.
 *
 * Why C: decoding each event into a dict and reducing it in Python was about 90 % of the load.
 * One pass over the text fills the columns and looks each value up in the symbol table; the
 * fields no column reads are skipped as they are validated.
 *
 * What it must never do: accept what the reference rules refuse, or read a value differently. It
 * takes only strict JSON (RFC 8259) and only the event shapes it knows (`fields` below), and
 * computes the columns by the rules of `columns.event_sink`. It stops at the first element it
 * does not take (an escape in a string it reads, a duplicate key it reads, a number an int64
 * column cannot hold, a null where a number or string is read, a bool, nesting deeper than
 * MAX_DEPTH, malformed JSON, the end of the text): load_fast.py hands that element and the rest
 * of the text read to Python's json and the reference rules, and the pass goes on after them.
 *
 * Numbers are read as Python's json reads them: an integer literal is an int (converted to
 * double where the column is float64, rounding to nearest as numpy does), a literal with a
 * fraction or exponent a float, correctly rounded (Clinger's exact cases, a 128-bit division for
 * up to 19 digits over a power of ten, CPython's dtoa otherwise).
 *
 * Plain CPython C API only (no numpy C API): the columns come back as bytearrays of native int32,
 * int64 and float64 that columns.py views with `np.frombuffer`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64         /* nesting of a skipped value; deeper stops the pass */
#define CACHE_SLOTS 4096     /* symbol cache entries per call (a power of two) */
#define MAX_FLOAT_TEXT 128   /* longest float literal handed to dtoa (longer: not taken) */

/* ------------------------------------------------------------------------------------------ */
/* Growable column buffers                                                                    */

typedef struct {
    char *data;
    Py_ssize_t size;     /* bytes used */
    Py_ssize_t capacity; /* bytes allocated */
} Buffer;

static int
buffer_reserve(Buffer *b, Py_ssize_t more)
{
    if (b->size + more <= b->capacity) {
        return 0;
    }
    Py_ssize_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->size + more) {
        capacity *= 2;
    }
    char *data = PyMem_Realloc(b->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

#define PUSH(buffer, type, value)                                                              \
    do {                                                                                       \
        if (buffer_reserve(&(buffer), (Py_ssize_t)sizeof(type)) < 0) {                         \
            goto done; /* decode_events' exit, with no result */                               \
        }                                                                                      \
        *(type *)((buffer).data + (buffer).size) = (type)(value);                              \
        (buffer).size += (Py_ssize_t)sizeof(type);                                             \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Values of the fields that are read                                                         */

enum { ABSENT = 0, IS_NULL, IS_INT, IS_FLOAT, IS_STR }; /* in this order (PRESENT) */

typedef struct {
    int kind;
    int64_t i;      /* IS_INT */
    double d;       /* IS_INT and IS_FLOAT: the value as a double */
    const char *s;  /* IS_STR: the bytes between the quotes (no escapes); IS_INT: the literal */
    Py_ssize_t n;
} Value;

/* A cursor over the text. */
typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Cursor;

static inline void
skip_ws(Cursor *c)
{
    /* One test per byte for the usual non-space, JSON's four whitespace bytes after it. */
    while (c->p < c->end && *c->p <= ' ' &&
           (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) {
        c->p++;
    }
}

static inline int
is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

/* A string starting at the opening quote. Sets `*start`/`*len` to its raw bytes. Returns 0, 1
   when it holds a backslash, or -1 when it is not a valid JSON string (unterminated, a control
   character, a bad escape). Bytes >= 0x80 were checked as UTF-8 by the
   reader (trace_text.TextSource). Inlined: ~10 % fewer instructions for the pass. */
static inline int
scan_string(Cursor *c, const unsigned char **start, Py_ssize_t *len)
{
    const unsigned char *p = c->p + 1;
    const unsigned char *end = c->end;
    int escaped = 0;
    *start = p;
    for (;;) {
#if PY_LITTLE_ENDIAN
        /* Eight bytes at a time up to the first special one: a byte < 0x20, '"' or '\\'. Each
           test flags a special byte's high bit, and a flag above a special byte may be false
           (a borrow), never one below it: the lowest flag is the first special byte. */
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
            uint64_t hit = (((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) |
                            ((slash - ones) & ~slash)) &
                           highs;
            if (hit) {
                p += __builtin_ctzll(hit) >> 3;
                goto special;
            }
            p += 8;
        }
#endif
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\') {
            p++;
        }
        if (p >= end) {
            return -1;
        }
#if PY_LITTLE_ENDIAN
    special:;
#endif
        if (*p == '"') {
            *len = p - *start;
            c->p = p + 1;
            return escaped;
        }
        if (*p < 0x20 || end - p < 2) {
            return -1; /* a control character, or a backslash at the end */
        }
        escaped = 1;
        if (p[1] == 'u') {
            /* Four hex digits; a lone surrogate is valid JSON text (Python's json reads it) */
            for (int i = 2; i < 6; i++) {
                int ch = end - p > i ? p[i] : 0, lower = ch | 0x20;
                if (!is_digit(ch) && (lower < 'a' || lower > 'f')) {
                    return -1;
                }
            }
            p += 6;
        }
        else if (memchr("\"\\/bfnrt", p[1], 8) != NULL) {
            p += 2;
        }
        else {
            return -1;
        }
    }
}

/* Powers of ten exactly representable as doubles (Clinger's fast path). */
static const double exact_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                     1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                     1e18, 1e19, 1e20, 1e21, 1e22};

/* m / 10^k correctly rounded (round half to even), for 0 < m < 2^64 and 0 <= k <= 19: a 64-bit
   quotient of m * 2^s / 10^k with its top bit set, plus a sticky bit for the remainder, rounded
   to 53 bits. The result is between 2^-64 and 2^64, far from subnormals and overflow. */
static double
divide_pow10(uint64_t m, int k)
{
    uint64_t d = (uint64_t)exact_pow10[k]; /* exact: 10^19 < 2^64 */
    int s = 63 + __builtin_clzll(m) - __builtin_clzll(d);
    s = s < 0 ? 0 : s;
    unsigned __int128 n, q;
    for (;;) {
        n = (unsigned __int128)m << s;
        q = n / d;
        if (q >> 64) {
            s--;
        }
        else if (!(q >> 63)) {
            s++;
        }
        else {
            break;
        }
    }
    int sticky = (n % d) != 0;
    uint64_t mantissa = (uint64_t)q >> 11, low = (uint64_t)q & 0x7FF;
    if (low > 0x400 || (low == 0x400 && (sticky || (mantissa & 1)))) {
        mantissa++; /* 2^53 at most: still exact as a double */
    }
    return ldexp((double)mantissa, 11 - s);
}

/* A JSON number at the cursor. Sets `v` to IS_INT (fits int64) or IS_FLOAT (its double computed
   only when `convert`). Returns 0, -1 for text that is not a JSON number, -2 for one we do not
   read (an integer beyond int64, a float beyond the double range): both mean "not taken",
   and the cursor is past the number unless -1. */
static int
scan_number(Cursor *c, Value *v, int convert)
{
    const unsigned char *p = c->p, *end = c->end, *start = c->p;
    int negative = p < end && *p == '-';
    p += negative;
    if (p >= end || !is_digit(*p) || (*p == '0' && p + 1 < end && is_digit(p[1]))) {
        return -1; /* no digit, or a leading zero */
    }
    /* The significant digits of the integer part and the fraction as one integer `m` while it
       holds them (19); `dropped` past that. */
    uint64_t m = 0;
    int digits = 0, dropped = 0, fraction_digits = 0, is_float = 0, exponent = 0;
    for (; p < end && is_digit(*p); p++) {
        if (digits < 19) {
            m = m * 10 + (uint64_t)(*p - '0');
            digits += m != 0;
        }
        else {
            dropped = 1;
        }
    }
    if (p < end && *p == '.') {
        is_float = 1;
        if (++p >= end || !is_digit(*p)) {
            return -1;
        }
        for (; p < end && is_digit(*p); p++) {
            if (digits < 19 && !dropped) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits += m != 0;
                fraction_digits++;
            }
            else {
                dropped = 1;
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        int sign = ++p < end && (*p == '+' || *p == '-') ? (*p++ == '-' ? -1 : 1) : 1;
        if (p >= end || !is_digit(*p)) {
            return -1;
        }
        for (; p < end && is_digit(*p); p++) {
            exponent = exponent < 100000 ? exponent * 10 + (*p - '0') : exponent; /* saturates */
        }
        exponent *= sign;
    }
    c->p = p;
    v->s = (const char *)start;
    v->n = p - start;
    if (!is_float) {
        /* 19 digits may still exceed int64; 20 or more always do. */
        if (dropped || (m > (uint64_t)INT64_MAX + (uint64_t)negative)) {
            return -2;
        }
        v->kind = IS_INT;
        v->i = negative ? (int64_t)(0 - m) : (int64_t)m;
        v->d = (double)v->i;
        return 0;
    }
    v->kind = IS_FLOAT;
    if (!convert) {
        return 0;
    }
    double d;
    int e10 = exponent - fraction_digits;
    if (!dropped && m <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        d = e10 < 0 ? (double)m / exact_pow10[-e10] : (double)m * exact_pow10[e10];
    }
    else if (!dropped && m && e10 < 0 && e10 >= -19) {
        d = divide_pow10(m, -e10);
    }
    else {
        /* CPython's dtoa, as `float()` and json read it: correctly rounded. */
        char text[MAX_FLOAT_TEXT];
        if (v->n >= MAX_FLOAT_TEXT) {
            return -2;
        }
        memcpy(text, start + negative, (size_t)(v->n - negative));
        text[v->n - negative] = '\0';
        d = PyOS_string_to_double(text, NULL, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return -2;
        }
    }
    if (!isfinite(d)) {
        return -2;
    }
    v->d = negative ? -d : d;
    return 0;
}

/* A member's key and its colon, the cursor then at the value. Returns scan_string's result. */
static inline int
read_key(Cursor *c, const unsigned char **key, Py_ssize_t *len)
{
    int escaped;
    if (c->p >= c->end || *c->p != '"' || (escaped = scan_string(c, key, len)) < 0) {
        return -1;
    }
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') {
        return -1;
    }
    c->p++;
    skip_ws(c);
    return escaped;
}

/* After a member or element: 1 past a `,` (another follows), 0 past `close`, -1 otherwise. */
static inline int
next_item(Cursor *c, unsigned char close)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return -1;
    }
    if (*c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (*c->p == close) {
        c->p++;
        return 0;
    }
    return -1;
}

/* Skip one JSON value of any kind, checking it is valid. Returns 0 or -1. */
static int
skip_value(Cursor *c, int depth)
{
    if (c->p >= c->end) {
        return -1;
    }
    unsigned char ch = *c->p;
    const unsigned char *s;
    Py_ssize_t n;
    if (ch == '"') {
        return scan_string(c, &s, &n) < 0 ? -1 : 0;
    }
    if (ch == '{' || ch == '[') {
        if (depth >= MAX_DEPTH) {
            return -1;
        }
        unsigned char close = ch == '{' ? '}' : ']';
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        for (;;) {
            int more;
            if ((ch == '{' && read_key(c, &s, &n) < 0) || skip_value(c, depth + 1) < 0 ||
                (more = next_item(c, close)) < 0) {
                return -1;
            }
            if (!more) {
                return 0;
            }
        }
    }
    static const char *const literals[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        Py_ssize_t len = (Py_ssize_t)strlen(literals[i]);
        if (ch == literals[i][0] && c->end - c->p >= len && memcmp(c->p, literals[i], len) == 0) {
            c->p += len;
            return 0;
        }
    }
    Value v;
    /* A number we would not read as a field is still a valid JSON number here. */
    return scan_number(c, &v, 0) == -1 ? -1 : 0;
}

/* Accepted types of a read field (bits). */
#define T_NULL 1
#define T_INT 2
#define T_FLOAT 4
#define T_STR 8

/* Read one field's value of the accepted types into `v`. Returns 0, or -1 (not ours). */
static int
read_value(Cursor *c, int types, Value *v)
{
    int ch = c->p < c->end ? *c->p : -1;
    if (ch == '"') {
        const unsigned char *text;
        if (!(types & T_STR) || scan_string(c, &text, &v->n) != 0) {
            return -1;
        }
        v->kind = IS_STR;
        v->s = (const char *)text;
        return 0;
    }
    if (ch == 'n') {
        if (!(types & T_NULL) || c->end - c->p < 4 || memcmp(c->p, "null", 4) != 0) {
            return -1;
        }
        c->p += 4;
        v->kind = IS_NULL;
        return 0;
    }
    if (ch == '-' || is_digit(ch)) {
        if (scan_number(c, v, 1) < 0) {
            return -1;
        }
        if (v->kind == IS_INT ? !(types & T_INT) : !(types & T_FLOAT)) {
            return -1;
        }
        return 0;
    }
    return -1; /* a bool, an object or an array where the struct has none */
}

/* The fields read: an event's (up to F_ARGS, its `args` object), then its `args`' (F_STREAM on). */
enum {
    F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, F_STREAM, F_CORRELATION, F_BW, F_BPS,
    F_NBYTES, F_EXT, F_EXT_2021, F_DEVICE_TYPE, F_TOTAL, N_FIELDS
};

#define FIELD(key, types) {key, (Py_ssize_t)sizeof(key) - 1, types}
static const struct {
    const char *key;
    Py_ssize_t len;
    int types;
} fields[N_FIELDS] = {
    FIELD("cat", T_STR | T_NULL), FIELD("name", T_STR | T_NULL),
    FIELD("pid", T_INT | T_STR | T_NULL), FIELD("tid", T_INT | T_STR | T_NULL),
    FIELD("ts", T_INT | T_FLOAT | T_NULL), FIELD("dur", T_INT | T_FLOAT | T_NULL),
    FIELD("args", 0), FIELD("stream", T_INT), FIELD("correlation", T_INT),
    FIELD("memory bandwidth (GB/s)", T_INT | T_FLOAT), FIELD("blocks per SM", T_INT | T_FLOAT),
    FIELD("bytes", T_INT),
    FIELD("External id", T_INT | T_NULL), FIELD("external id", T_INT | T_NULL),
    FIELD("Device Type", T_INT | T_NULL), FIELD("Total Allocated", T_INT | T_FLOAT | T_NULL),
};

/* The members of the object at the cursor (`{`) into `v`: each key of fields[first..last) at
   most once, its value of a type the struct accepts; other keys' values skipped at `depth`.
   Returns 0 or -1. */
static int
read_members(Cursor *c, Value *v, int first, int last, int depth)
{
    if (c->p >= c->end || *c->p != '{') {
        return -1;
    }
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        Py_ssize_t n;
        int more, f = first;
        if (read_key(c, &k, &n) != 0) {
            return -1;
        }
        while (f < last && !(fields[f].len == n && memcmp(k, fields[f].key, (size_t)n) == 0)) {
            f++;
        }
        if (f == last ? skip_value(c, depth) < 0 : v[f].kind != ABSENT) {
            return -1;
        }
        if (f == F_ARGS) { /* an object; `null` has no place in the struct */
            v[f].kind = IS_NULL;
            if (read_members(c, v, F_STREAM, N_FIELDS, 2) < 0) {
                return -1;
            }
        }
        else if (f < last && read_value(c, fields[f].types, &v[f]) < 0) {
            return -1;
        }
        if ((more = next_item(c, '}')) <= 0) {
            return more;
        }
    }
}

#define PRESENT(v) ((v).kind >= IS_INT) /* a number or a string */
#define INT_OR(v, absent) ((v).kind == IS_INT ? (v).i : (int64_t)(absent))

/* ------------------------------------------------------------------------------------------ */
/* Symbols: a value's id in the file's SymbolTable (columns.SymbolTable), which interns a value
   on its first look-up. A per-call cache keyed by the value's bytes saves making a Python object
   for values seen before in the call. */

typedef struct {
    const char *s;
    Py_ssize_t n;
    int kind;
    int32_t id;
} CacheSlot;

/* Cheap: the length and the first and last eight bytes (the slot's bytes are compared anyway). */
static uint64_t
hash_bytes(const char *s, Py_ssize_t n, int kind)
{
    uint64_t first = 0, last = 0;
    memcpy(&first, s, n < 8 ? (size_t)n : 8);
    if (n >= 8) {
        memcpy(&last, s + n - 8, 8);
    }
    uint64_t h = ((uint64_t)n << 3 | (uint64_t)kind) * 0x9E3779B97F4A7C15ULL;
    h ^= first * 0xC2B2AE3D27D4EB4FULL;
    h ^= (last ^ (h >> 29)) * 0x165667B19E3779F9ULL;
    return h ^ (h >> 32);
}

/* The id of `v` (-1 for absent or null, as SymbolTable[None]); -2 with an exception set. */
static int32_t
symbol_id(PyObject *table, const Value *v, CacheSlot *cache)
{
    if (v->kind != IS_STR && v->kind != IS_INT) {
        return -1;
    }
    uint64_t h = hash_bytes(v->s, v->n, v->kind);
    CacheSlot *slot = NULL;
    for (int probe = 0; probe < 8; probe++) {
        CacheSlot *candidate = &cache[(h + (uint64_t)probe) & (CACHE_SLOTS - 1)];
        if (candidate->s == NULL) {
            slot = candidate;
            break;
        }
        if (candidate->kind == v->kind && candidate->n == v->n &&
            memcmp(candidate->s, v->s, (size_t)v->n) == 0) {
            return candidate->id;
        }
    }
    PyObject *key = v->kind == IS_STR ? PyUnicode_DecodeUTF8(v->s, v->n, "strict")
                                      : PyLong_FromLongLong(v->i);
    if (key == NULL) {
        return -2;
    }
    PyObject *found = PyObject_GetItem(table, key); /* SymbolTable.__missing__ interns */
    Py_DECREF(key);
    if (found == NULL) {
        return -2;
    }
    long id = PyLong_AsLong(found);
    Py_DECREF(found);
    if (id == -1 && PyErr_Occurred()) {
        return -2;
    }
    if (id < -1 || id > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "symbol id out of int32 range");
        return -2;
    }
    if (slot != NULL) {
        *slot = (CacheSlot){v->s, v->n, v->kind, (int32_t)id};
    }
    return (int32_t)id;
}

/* ------------------------------------------------------------------------------------------ */

enum {
    COL_INDEX, COL_CAT, COL_NAME, COL_PID, COL_TID, COL_TS, COL_DUR, COL_STREAM, COL_CORRELATION,
    COL_BW, COL_BPS, COL_NBYTES, COL_EXT, COL_MEM_TS, COL_MEM_TYPE, COL_MEM_TOTAL, N_COLUMNS
};

static const char *const column_names[N_COLUMNS] = {
    "index", "cat", "name", "pid", "tid", "ts", "dur", "stream", "correlation", "memory_bw_gbps",
    "blocks_per_sm", "bytes", "external_id", "mem_ts", "mem_device_type", "mem_total_allocated",
};

PyDoc_STRVAR(decode_events_doc,
"decode_events(text, base, symbols, /)\n--\n\n"
"The whole events at the head of `text` (bytes-like; its first byte is the `[` or `,` before\n"
"the next event) by columns.event_sink's rules, up to the first element it does not take:\n"
"(events, taken, ts_has_float, ts_all_present, columns). `taken` is the offset of the `,` or\n"
"`]` after the last event taken (0: none); `columns` maps a column name to a bytearray of\n"
"native int32/int64/float64 values (only columns that got values); `index` counts from\n"
"`base`; symbols are looked up (and interned) in `symbols`.");

static PyObject *
decode_events(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    long long base;
    PyObject *table;
    if (!PyArg_ParseTuple(args, "y*LO:decode_events", &view, &base, &table)) {
        return NULL;
    }
    Buffer columns[N_COLUMNS] = {{0}};
    CacheSlot *cache = PyMem_Calloc(CACHE_SLOTS, sizeof(CacheSlot));
    PyObject *result = NULL, *dict = NULL;
    int ts_has_float = 0, ts_all_present = 1;
    Py_ssize_t events = 0;
    if (cache == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *start = (const unsigned char *)view.buf;
    Cursor c = {start, start + view.len};
    const unsigned char *taken = start;
    Value v[N_FIELDS];
    while (c.p < c.end && *c.p != ']') {
        c.p++; /* the separator */
        skip_ws(&c);
        for (int f = 0; f < N_FIELDS; f++) {
            v[f].kind = ABSENT; /* a memset of all the values was a tenth of the pass */
        }
        if (read_members(&c, v, F_CAT, F_STREAM, 1) < 0) {
            break;
        }
        skip_ws(&c);
        if (c.p >= c.end || (*c.p != ',' && *c.p != ']')) {
            break;
        }
        /* columns.event_sink: every event's ts decides the flags. */
        if (v[F_TS].kind == IS_FLOAT) {
            ts_has_float = 1;
        }
        else if (!PRESENT(v[F_TS])) {
            ts_all_present = 0;
        }
        int timed = PRESENT(v[F_TS]) && PRESENT(v[F_DUR]);
        int has_cat =
            v[F_CAT].kind == IS_STR && !(v[F_CAT].n == 5 && memcmp(v[F_CAT].s, "Trace", 5) == 0);
        if (timed && has_cat) {
            /* cat, name, pid, tid: the order columns.event_sink interns them in */
            for (int f = 0; f < 4; f++) {
                int32_t id = symbol_id(table, &v[F_CAT + f], cache);
                if (id == -2) {
                    goto done;
                }
                PUSH(columns[COL_CAT + f], int32_t, id);
            }
            PUSH(columns[COL_INDEX], int64_t, base + events);
            PUSH(columns[COL_TS], double, v[F_TS].d);
            PUSH(columns[COL_DUR], double, v[F_DUR].d);
            PUSH(columns[COL_STREAM], int64_t, INT_OR(v[F_STREAM], -1));
            PUSH(columns[COL_CORRELATION], int64_t, INT_OR(v[F_CORRELATION], -1));
            PUSH(columns[COL_BW], double, PRESENT(v[F_BW]) ? v[F_BW].d : 0.0);
            PUSH(columns[COL_BPS], double, PRESENT(v[F_BPS]) ? v[F_BPS].d : Py_NAN);
            PUSH(columns[COL_NBYTES], int64_t, INT_OR(v[F_NBYTES], -1));
            PUSH(columns[COL_EXT], int64_t, INT_OR(v[F_EXT], INT_OR(v[F_EXT_2021], -1)));
        }
        else if (v[F_NAME].kind == IS_STR && v[F_NAME].n == 8 &&
                 memcmp(v[F_NAME].s, "[memory]", 8) == 0 && PRESENT(v[F_TS]) &&
                 v[F_ARGS].kind != ABSENT) {
            PUSH(columns[COL_MEM_TS], double, v[F_TS].d);
            PUSH(columns[COL_MEM_TYPE], int64_t, INT_OR(v[F_DEVICE_TYPE], -1));
            PUSH(columns[COL_MEM_TOTAL], double, PRESENT(v[F_TOTAL]) ? v[F_TOTAL].d : Py_NAN);
        }
        events++;
        taken = c.p;
    }

    dict = PyDict_New();
    if (dict == NULL) {
        goto done;
    }
    for (int col = 0; col < N_COLUMNS; col++) {
        if (!columns[col].size) {
            continue;
        }
        PyObject *bytes = PyByteArray_FromStringAndSize(columns[col].data, columns[col].size);
        if (bytes == NULL || PyDict_SetItemString(dict, column_names[col], bytes) < 0) {
            Py_XDECREF(bytes);
            goto done;
        }
        Py_DECREF(bytes);
    }
    result = Py_BuildValue("(nnOOO)", events, (Py_ssize_t)(taken - start),
                           ts_has_float ? Py_True : Py_False, ts_all_present ? Py_True : Py_False,
                           dict);
done:
    Py_XDECREF(dict);
    for (int col = 0; col < N_COLUMNS; col++) {
        PyMem_Free(columns[col].data);
    }
    PyMem_Free(cache);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* The critical path's longest path (analyses/critical_path.py)                          */

PyDoc_STRVAR(longest_path_doc,
"longest_path(n, src, dst, weight, /)\n--\n\n"
"networkx's `dag_longest_path` over nodes 0..n-1 and edges src[i] -> dst[i] (int64 and float64\n"
"buffers; a weight <= -1 counts 0, as HTA sets), one edge per pair as networkx keeps it: where\n"
"the pair was first added, with the last one's weight. (path, pairs): the path's edges, each its\n"
"pair's last edge id, as an int64 bytearray, and the number of pairs; None on a cycle.");

/* Linear in the edges: counting sorts by source and by target, then one pass in Kahn's order
   (any topological order gives the same distances). A node, when visited, folds the edges into
   it into pairs in the order the pairs were first added, each pair holding its last edge; it
   takes its first best pair, and starts afresh (0, no edge) where the best is negative, as
   networkx does. */
static PyObject *
longest_path(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_ssize_t n;
    Py_buffer bufs[3];
    if (!PyArg_ParseTuple(args, "ny*y*y*:longest_path", &n, &bufs[0], &bufs[1], &bufs[2])) {
        return NULL;
    }
    Py_ssize_t m = bufs[0].len / 8, head = 0, tail = 0, pairs = 0, end = 0, edges = 0;
    int ok = n >= 0 && bufs[0].len % 8 == 0 && bufs[1].len == bufs[0].len &&
             bufs[2].len == bufs[0].len;
    const int64_t *src = bufs[0].buf, *dst = bufs[1].buf;
    const double *w = bufs[2].buf;
    for (Py_ssize_t i = 0; ok && i < m; i++) {
        ok = src[i] >= 0 && src[i] < n && dst[i] >= 0 && dst[i] < n;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "want m int64 (weights: float64), nodes in 0..n-1");
    }
    /* Zeroed. Per node: the counting sorts' offsets (out: by source, in: by target), the edges
       into it not yet passed, the queue, where its pair lies while a node is folded, the best
       edge, the distance; per edge: the ids by source and by target. Apart: one block this
       large raises glibc's mmap threshold once freed, and the 200 MB set's peak rose 8 MiB. */
    int64_t *scratch[9] = {NULL};
    for (int k = 0; ok && k < 9; k++) {
        ok = (scratch[k] = PyMem_Calloc((size_t)(k < 7 ? n : m) + 1, 8)) != NULL;
    }
    PyObject *result = scratch[8] == NULL && !PyErr_Occurred() ? PyErr_NoMemory() : NULL;
    if (!ok) {
        goto done;
    }
    int64_t *out = scratch[0], *in = scratch[1], *fill = scratch[2], *queue = scratch[3];
    int64_t *pair_at = scratch[4], *via = scratch[5], *by_src = scratch[7], *by_dst = scratch[8];
    double *dist = (double *)scratch[6];
    for (Py_ssize_t i = 0; i < m; i++) {
        out[src[i] + 1]++;
        in[dst[i] + 1]++;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        out[v + 1] += out[v];
        in[v + 1] += in[v];
        fill[v] = in[v + 1] - in[v];
        pair_at[v] = via[v] = -1;
        if (fill[v] == 0) {
            queue[tail++] = v;
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        by_src[out[src[i]]++] = i; /* out[v] and in[v] end as the end of v's edges */
        by_dst[in[dst[i]]++] = i;
    }
    while (head < tail) {
        int64_t v = queue[head++], begin = v ? in[v - 1] : 0, folded = begin, best_edge = -1;
        double best = 0.0;
        /* The pairs in by_dst[begin..folded), in place: pair_at[u] is the pair from u once it
           lies in that range (another node's range is disjoint from it). */
        for (int64_t k = begin; k < in[v]; k++) {
            int64_t i = by_dst[k], u = src[i];
            if (pair_at[u] < begin || pair_at[u] >= folded) {
                pair_at[u] = folded++;
            }
            by_dst[pair_at[u]] = i;
        }
        pairs += folded - begin;
        for (int64_t k = begin; k < folded; k++) {
            int64_t i = by_dst[k];
            double cand = dist[src[i]] + (w[i] <= -1 ? 0.0 : w[i]);
            if (best_edge < 0 || cand > best) {
                best = cand;
                best_edge = i;
            }
        }
        if (best_edge >= 0 && best >= 0) {
            dist[v] = best;
            via[v] = best_edge;
        }
        for (int64_t k = v ? out[v - 1] : 0; k < out[v]; k++) {
            if (--fill[dst[by_src[k]]] == 0) {
                queue[tail++] = dst[by_src[k]];
            }
        }
    }
    if (tail < n) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* The path ends at the first node of the greatest distance (never NaN: see best >= 0). */
    for (Py_ssize_t v = 1; v < n; v++) {
        if (dist[v] > dist[end]) {
            end = v;
        }
    }
    for (int64_t v = end; n > 0 && via[v] >= 0; v = src[via[v]]) {
        edges++;
    }
    PyObject *path_out = PyByteArray_FromStringAndSize(NULL, edges * 8);
    if (path_out != NULL) {
        int64_t *path = (int64_t *)PyByteArray_AS_STRING(path_out);
        for (int64_t v = end; edges > 0; v = src[via[v]]) {
            path[--edges] = via[v];
        }
        result = Py_BuildValue("(Nn)", path_out, pairs);
    }
done:
    for (int k = 0; k < 9; k++) {
        PyMem_Free(scratch[k]);
    }
    for (int k = 0; k < 3; k++) {
        PyBuffer_Release(&bufs[k]);
    }
    return result;
}

/* The critical path's call-stack walk (analyses/critical_path.py, Graph.cpu_thread)     */

PyDoc_STRVAR(stack_walk_doc,
"stack_walk(starts, /)\n--\n\n"
"HTA's call stack over a thread's events in order (`starts`: one byte per event, 1 a start, 0\n"
"an end, which pops the top whatever it is; nothing on an empty stack), walked depth-first:\n"
"(walk, parent) as int64 bytearrays. walk[s] is the start entered at step s, or n + that start\n"
"where it is left; parent[i] is the top when start i was pushed, -1 at the bottom.");

/* One pass with an explicit stack, where numpy needed sorts and searches over the stack sizes
   (issue 29). Start i at depth d (its place in the stack) is entered at step 2i - d and left at
   step 2j - d - 1, j the starts before its pop (all of them when it is never popped). */
static PyObject *
stack_walk(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *starts = view.buf;
    Py_ssize_t events = view.len, n = 0;
    for (Py_ssize_t k = 0; k < events; k++) {
        n += starts[k] != 0;
    }
    PyObject *walk_out = PyByteArray_FromStringAndSize(NULL, 2 * n * 8);
    PyObject *parent_out = PyByteArray_FromStringAndSize(NULL, n * 8);
    int64_t *stack = PyMem_Malloc((size_t)n * 8 + 8);
    PyObject *result = NULL;
    if (!walk_out || !parent_out || !stack) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *walk = (int64_t *)PyByteArray_AS_STRING(walk_out);
    int64_t *parent = (int64_t *)PyByteArray_AS_STRING(parent_out);
    int64_t i = 0, size = 0;
    for (Py_ssize_t k = 0; k < events; k++) {
        if (starts[k]) {
            parent[i] = size ? stack[size - 1] : -1;
            walk[2 * i - size] = i;
            stack[size++] = i++;
        }
        else if (size) {
            size--;
            walk[2 * i - size - 1] = n + stack[size];
        }
    }
    while (size--) {
        walk[2 * n - size - 1] = n + stack[size];
    }
    result = Py_BuildValue("(OO)", walk_out, parent_out);
done:
    Py_XDECREF(walk_out);
    Py_XDECREF(parent_out);
    PyMem_Free(stack);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef module_methods[] = {
    {"longest_path", longest_path, METH_VARARGS, longest_path_doc},
    {"stack_walk", stack_walk, METH_O, stack_walk_doc},
    {"decode_events", decode_events, METH_VARARGS, decode_events_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kineto_columns_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "analyzers.traces._kineto_columns",
    .m_doc = "The C fast path of the trace loader; see analyzers/traces/_kineto_columns.c.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__kineto_columns(void)
{
    return PyModule_Create(&kineto_columns_module);
}
