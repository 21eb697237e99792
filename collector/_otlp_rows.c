/*
 * OTLP protobuf ExportTraceServiceRequest -> one ClickHouse Native block of otel_traces rows.
 *
 * The Python reference is collector.batch.to_batch; this walks the protobuf wire format directly
 * (no protobuf library) and writes exactly the rows to_batch would, but only for CLEAN requests:
 * every span valid, no duplicate, every resource named, nothing over a limit, every value of a shape
 * handled here. Anything else is an "anomaly": convert() then answers with a reason (str) and the
 * caller runs the whole request through to_batch, which stays the one place that knows how to
 * reject, warn, truncate and stringify the rare shapes. So this file never needs to produce an
 * error message, a truncation marker or a partial answer.
 *
 * To never accept bytes Python's protobuf runtime (upb) would refuse or read differently, the walk
 * is stricter than protobuf: a singular field given twice, a known field with the wrong wire type,
 * groups, a field Python knows but this file does not handle (KNOWN_FIELDS lists what it handles)
 * and invalid UTF-8 in a string field are anomalies too. Unknown fields (not in the descriptors)
 * are skipped as protobuf skips them.
 *
 * Doubles get repr's shortest round-trip digits, which collector.attributes.go_float formats: from
 * an exact shortcut for short decimals (short_digits), an exact search in 128-bit integers for the
 * measured values of 16-17 digits (exact_digits, 4-5x cheaper than repr's bignums), or CPython's own
 * repr for the rest (PyOS_double_to_string, David Gay's algorithm). So the GIL is held throughout,
 * which also guards the buffers kept between calls (shared).
 *
 * check() runs the same walk writing and formatting nothing, with the same limits: the receivers' answer
 * for clean requests without a protobuf parse (collector.otlp_body.check_body); a request a limit cuts is
 * answered by the reference, which warns.
 *
 * convert() is also the redaction's prefilter (collector.redaction): given the literal starts of the
 * table's key and event-name patterns, a span or event attribute key or an event name that begins
 * with one is the anomaly REDACTION_CANDIDATE, and the caller redacts the request before converting
 * it again. Testing the keys the walk reads anyway costs a binary search per key, where searching
 * the request's bytes cost a pass over all of them (benchmarks/README.md, collector.py).
 *
 * Source of the wire format: the Protocol Buffers encoding guide; of Native: ClickHouse's formats
 * documentation and its NativeReader (per column: name, type, then the values; String = varint
 * length + bytes each, DateTime64(9) = Int64 and UInt64 little-endian, Array and Map = cumulative
 * UInt64 offsets then the nested column(s)). LowCardinality(String) columns are sent as String.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TIME_NS INT64_MAX
#define EARLIEST_PLAUSIBLE_NS 946684800000000000ULL /* collector.batch.EARLIEST_PLAUSIBLE_NS: 2000-01-01 */
#define TRUNCATED_KEY "hotspan.truncated"
#define SERVICE_NAME_KEY "service.name"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

static const char *const SPAN_KINDS[] = {"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"};
static const char *const STATUS_CODES[] = {"Unset", "Ok", "Error"};

/* ---------------------------------------------------------------------------------------------- */
/* Output buffers                                                                                  */

typedef struct {
    char *data;
    size_t len;
    size_t cap;
    int discard; /* check(): nothing is written, values are only validated */
} Buf;

typedef struct {
    uint8_t trace[16];
    uint8_t span[8];
    uint64_t kind;
    uint64_t start;
    const uint8_t *name;
    size_t name_len;
} Key;

typedef struct {
    const uint8_t *data; /* the Event or Link message */
    size_t len;
    uint64_t time;
    const uint8_t *name; /* Event.name, or Link.trace_state */
    size_t name_len;
    const uint8_t *trace_id;
    size_t trace_len;
    const uint8_t *span_id;
    size_t span_len;
    size_t attributes;
} Item;

/* One column of the Native block being built. Scalars use data; Map(String, String) offsets,
   data (keys) and values; Array(T) offsets and data; Array(Map(String, String)) offsets (of the
   maps), inner (the maps' offsets), data (keys) and values. Offsets are cumulative UInt64. */
typedef struct {
    Buf data, values, offsets, inner;
    uint64_t count, inner_count;
} Column;

enum {
    C_TIMESTAMP, C_TRACE_ID, C_SPAN_ID, C_PARENT_SPAN_ID, C_TRACE_STATE, C_SPAN_NAME, C_SPAN_KIND,
    C_SERVICE_NAME, C_RESOURCE_ATTRIBUTES, C_SCOPE_NAME, C_SCOPE_VERSION, C_SPAN_ATTRIBUTES, C_DURATION,
    C_STATUS_CODE, C_STATUS_MESSAGE, C_EVENTS_TIMESTAMP, C_EVENTS_NAME, C_EVENTS_ATTRIBUTES, C_LINKS_TRACE_ID,
    C_LINKS_SPAN_ID, C_LINKS_TRACE_STATE, C_LINKS_ATTRIBUTES, C_TENANT, NCOLUMNS
};

/* Literal starts of names (collector.redaction.literal_starts): sorted bytewise, none the start of
   another, so the greatest one not after a name is the only one that can begin it. */
typedef struct {
    const uint8_t *data;
    size_t len;
} Literal;

typedef struct {
    const Literal *items;
    size_t n;
    uint8_t first[32]; /* the literals' first bytes, a bit each: most keys are ruled out by theirs */
} Literals;

typedef struct {
    const char *anomaly; /* set on the first anomaly; NO_MEMORY / PYTHON_ERROR are special */
    long max_attributes, max_value_chars, max_events, max_links;
    const char *tenant;
    Py_ssize_t tenant_len;
    Column columns[NCOLUMNS];
    Buf scratch;
    /* The current resource's and scope's columns, as Strings, shared by their spans. */
    Buf service, resource_keys, resource_values, scope_name, scope_version;
    uint64_t resource_count;
    Key *keys;
    size_t nkeys, capkeys;
    Item *items;
    size_t capitems;
    Literal *literals; /* the two lists below, borrowed from convert()'s arguments for one call */
    size_t capliterals;
    Literals named_keys, named_events;
    Py_ssize_t spans;
} Ctx;

static const char NO_MEMORY[] = "out of memory";
static const char PYTHON_ERROR[] = "python error";
static const char REDACTION_CANDIDATE[] = "an attribute key or event name the redaction table may name";

#define FAIL(ctx, why)           \
    do {                         \
        if (!(ctx)->anomaly)     \
            (ctx)->anomaly = why; \
        return -1;               \
    } while (0)
#define TRY(expr)          \
    do {                   \
        if ((expr) < 0)    \
            return -1;     \
    } while (0)

static int grow(Ctx *ctx, Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            FAIL(ctx, NO_MEMORY);
        cap *= 2;
    }
    char *data = realloc(b->data, cap);
    if (!data)
        FAIL(ctx, NO_MEMORY);
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int reserve(Ctx *ctx, Buf *b, size_t extra) {
    return b->cap - b->len >= extra ? 0 : grow(ctx, b, extra);
}

static inline int put(Ctx *ctx, Buf *b, const void *data, size_t n) {
    if (b->discard)
        return 0;
    TRY(reserve(ctx, b, n));
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

static inline int put_varint(Ctx *ctx, Buf *b, uint64_t value) {
    if (b->discard)
        return 0;
    TRY(reserve(ctx, b, 10));
    while (value >= 0x80) {
        b->data[b->len++] = (char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    b->data[b->len++] = (char)value;
    return 0;
}

static int put_u64(Ctx *ctx, Buf *b, uint64_t value) {
    if (b->discard)
        return 0;
    TRY(reserve(ctx, b, 8));
    for (int i = 0; i < 8; i++)
        b->data[b->len++] = (char)(value >> (8 * i));
    return 0;
}

static inline int put_str(Ctx *ctx, Buf *b, const void *data, size_t n) {
    TRY(put_varint(ctx, b, n));
    return put(ctx, b, data, n);
}

static int put_cstr(Ctx *ctx, Buf *b, const char *text) { return put_str(ctx, b, text, strlen(text)); }

/* Lowercase hex of an ID, left-padded with "00" pairs to width bytes (a 64-bit trace ID). */
static int put_hex(Ctx *ctx, Buf *b, const uint8_t *raw, size_t n, size_t width) {
    static const char digits[] = "0123456789abcdef";
    size_t pad = width > n ? width - n : 0;
    if (b->discard)
        return 0;
    TRY(put_varint(ctx, b, 2 * (n + pad)));
    TRY(reserve(ctx, b, 2 * (n + pad)));
    memset(b->data + b->len, '0', 2 * pad);
    b->len += 2 * pad;
    for (size_t i = 0; i < n; i++) {
        b->data[b->len++] = digits[raw[i] >> 4];
        b->data[b->len++] = digits[raw[i] & 15];
    }
    return 0;
}

/* The otel_traces columns convert() writes, in order (storage/sql/0001_otel_traces.sql, 0030). */
static const char *const COLUMNS[] = {
    "Timestamp",      "TraceId",          "SpanId",           "ParentSpanId",  "TraceState",    "SpanName",
    "SpanKind",       "ServiceName",      "ResourceAttributes", "ScopeName",   "ScopeVersion",  "SpanAttributes",
    "Duration",       "StatusCode",       "StatusMessage",    "Events.Timestamp", "Events.Name", "Events.Attributes",
    "Links.TraceId",  "Links.SpanId",     "Links.TraceState", "Links.Attributes", "Tenant",
};

/* Their types in the block: LowCardinality(String) columns are sent as String (the insert casts
   them), which keeps this writer free of dictionaries. */
static const char *const COLUMN_TYPES[] = {
    "DateTime64(9)", "String", "String", "String", "String", "String", "String", "String",
    "Map(String, String)", "String", "String", "Map(String, String)", "UInt64", "String", "String",
    "Array(DateTime64(9))", "Array(String)", "Array(Map(String, String))", "Array(String)", "Array(String)",
    "Array(String)", "Array(Map(String, String))", "String",
};

/* ---------------------------------------------------------------------------------------------- */
/* Wire format                                                                                     */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Cursor;

typedef struct {
    uint32_t number;
    uint32_t wire;
    uint64_t value;      /* varint, fixed64 or fixed32 */
    const uint8_t *data; /* length-delimited */
    size_t len;
} Field;

static inline int read_varint(Cursor *c, uint64_t *out) {
    if (c->p < c->end && *c->p < 0x80) { /* the common one-byte case */
        *out = *c->p++;
        return 0;
    }
    uint64_t value = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end)
            return -1;
        uint8_t byte = *c->p++;
        if (i == 9 && byte > 1)
            return -1; /* more than 64 bits */
        value |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

static uint64_t read_le(const uint8_t *p, int n) {
    uint64_t value = 0;
    for (int i = 0; i < n; i++)
        value |= (uint64_t)p[i] << (8 * i);
    return value;
}

/* The next field of a message: 1, or 0 at its end. Malformed bytes are an anomaly (-1). */
static inline int next_field(Ctx *ctx, Cursor *c, Field *f) {
    if (c->p >= c->end)
        return 0;
    uint64_t tag, n;
    if (read_varint(c, &tag) < 0 || tag > UINT32_MAX || (tag >> 3) == 0)
        FAIL(ctx, "malformed field tag");
    f->number = (uint32_t)(tag >> 3);
    f->wire = (uint32_t)(tag & 7);
    f->value = 0;
    f->data = NULL;
    f->len = 0;
    switch (f->wire) {
    case WIRE_VARINT:
        if (read_varint(c, &f->value) < 0)
            FAIL(ctx, "malformed varint");
        return 1;
    case WIRE_FIXED64:
        if (c->end - c->p < 8)
            FAIL(ctx, "truncated fixed64");
        f->value = read_le(c->p, 8);
        c->p += 8;
        return 1;
    case WIRE_FIXED32:
        if (c->end - c->p < 4)
            FAIL(ctx, "truncated fixed32");
        f->value = read_le(c->p, 4);
        c->p += 4;
        return 1;
    case WIRE_LEN:
        if (read_varint(c, &n) < 0 || n > (uint64_t)(c->end - c->p))
            FAIL(ctx, "malformed or truncated length");
        f->data = c->p;
        f->len = (size_t)n;
        c->p += n;
        return 1;
    default:
        FAIL(ctx, "group or invalid wire type");
    }
}

static Cursor cursor(const uint8_t *data, size_t len) {
    Cursor c = {data, data + len};
    return c;
}

/* Checks a known field's wire type and, for singular fields, that it was not given before. */
static int expect(Ctx *ctx, const Field *f, uint32_t wire, uint32_t *seen, int singular) {
    if (f->wire != wire)
        FAIL(ctx, "known field with an unexpected wire type");
    if (singular) {
        uint32_t bit = 1u << (f->number & 31);
        if (*seen & bit)
            FAIL(ctx, "singular field given more than once");
        *seen |= bit;
    }
    return 0;
}

/* Code points of strict UTF-8 (as upb and Python's decoder accept it), or -1. */
static int64_t utf8_length(const uint8_t *s, size_t n) {
    int64_t count = 0;
    size_t i = 0;
    /* ASCII runs 8 bytes at a time: most names and values are plain ASCII. */
    while (i + 8 <= n) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        if (word & 0x8080808080808080ULL)
            break;
        i += 8;
        count += 8;
    }
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return -1;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return -1;
            if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F))
                return -1; /* overlong, surrogate */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return -1;
            if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
                return -1; /* overlong, above U+10FFFF */
            i += 4;
        } else {
            return -1;
        }
        count++;
    }
    return count;
}

static int check_utf8(Ctx *ctx, const uint8_t *s, size_t n) {
    if (utf8_length(s, n) < 0)
        FAIL(ctx, "string field is not valid UTF-8");
    return 0;
}

/* Characters of UTF-8 already checked. */
static int64_t chars(const char *s, size_t n) {
    int64_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((uint8_t)s[i] & 0xC0) != 0x80;
    return count;
}

/* ---------------------------------------------------------------------------------------------- */
/* Attribute values (collector.attributes.value_to_string)                                          */

enum { V_NONE = 0, V_STRING = 1, V_BOOL = 2, V_INT = 3, V_DOUBLE = 4, V_ARRAY = 5, V_KVLIST = 6, V_BYTES = 7 };

typedef struct {
    int kind;
    uint64_t value;
    const uint8_t *data;
    size_t len;
} Value;

/* Reads an AnyValue: which of its oneof fields is set (at most one occurrence allowed). */
static int read_value(Ctx *ctx, const uint8_t *data, size_t len, Value *v) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    v->kind = V_NONE;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number > 8)
            continue; /* unknown to Python too */
        if (f.number == 8)
            FAIL(ctx, "AnyValue.string_value_strindex");
        if (v->kind != V_NONE)
            FAIL(ctx, "AnyValue with more than one value field");
        static const uint32_t wires[] = {0, WIRE_LEN, WIRE_VARINT, WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_LEN, WIRE_LEN};
        if (f.wire != wires[f.number])
            FAIL(ctx, "known field with an unexpected wire type");
        v->kind = (int)f.number;
        v->value = f.value;
        v->data = f.data;
        v->len = f.len;
    }
    return r;
}

static void format_int(int64_t value, char *out, size_t *n) {
    char digits[24];
    int count = 0;
    /* Through uint64_t: -INT64_MIN overflows int64_t. */
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[count++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    size_t len = 0;
    if (value < 0)
        out[len++] = '-';
    while (count)
        out[len++] = digits[--count];
    out[len] = 0;
    *n = len;
}

/* repr(value) of a finite double, in out (at most 32 bytes); flags as for PyOS_double_to_string. */
static int repr_double(Ctx *ctx, double value, int flags, char *out, size_t *n) {
    char *text = PyOS_double_to_string(value, 'r', 0, flags, NULL);
    if (!text)
        FAIL(ctx, PYTHON_ERROR);
    size_t len = strlen(text);
    if (len >= 32) {
        PyMem_Free(text);
        FAIL(ctx, "unexpected double repr");
    }
    memcpy(out, text, len + 1);
    PyMem_Free(text);
    *n = len;
    return 0;
}

/* The shortest round-trip digits of a positive double that is m / 10^j exactly as IEEE division
   rounds it, for j <= 8 and m < 10^15 (prices, ratios, rates: most doubles people send), or 0.
   Division of two exact doubles rounds correctly, so m / 10^j == value means the decimal m x 10^-j
   reads back as value; the smallest such j gives the fewest digits, and below 10^15 at most one m
   fits per j (decimal steps are wider than the double's), so these are repr's digits. */
static int short_digits(double value, char *digits, int *ndigits, int *point) {
    static const double powers[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8};
    if (!(value < 1e15))
        return 0;
    for (int j = 0; j <= 8; j++) {
        double scaled = nearbyint(value * powers[j]);
        if (scaled >= 1e15)
            return 0;
        if (scaled == 0 || scaled / powers[j] != value)
            continue;
        uint64_t m = (uint64_t)scaled;
        char reversed[24];
        int count = 0;
        while (m) {
            reversed[count++] = (char)('0' + m % 10);
            m /= 10;
        }
        int zeros = 0;
        while (zeros < count - 1 && reversed[zeros] == '0')
            zeros++; /* only when j == 0: an integer such as 1200 */
        *ndigits = count - zeros;
        for (int i = 0; i < *ndigits; i++)
            digits[i] = reversed[count - 1 - i];
        *point = count - j;
        return 1;
    }
    return 0;
}

typedef unsigned __int128 u128;

/* v x 10^e into out for 0 <= e <= 38 (10^38 < 2^128), or -1 when it overflows. */
static int times_pow10(u128 v, int e, u128 *out) {
    static const uint64_t pow10[] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
                                     10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
                                     100000000000ULL, 1000000000000ULL, 10000000000000ULL,
                                     100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
                                     100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};
    if (e < 0 || e > 38)
        return -1;
    u128 scale = e <= 19 ? (u128)pow10[e] : (u128)pow10[e - 19] * pow10[19];
    return __builtin_mul_overflow(v, scale, out) ? -1 : 0;
}

/* The multiples of 10^s (s <= 0) between low and high (in units of 2^-k; the ends included or
   not) as [first, last] in units of 10^s: 1 when there is one, 0 when none, -1 on overflow. */
static int multiples(u128 low, u128 high, int k, int inclusive, int s, u128 *first, u128 *last) {
    u128 lo, hi, mask = ((u128)1 << k) - 1;
    if (times_pow10(high, -s, &hi) < 0 || times_pow10(low, -s, &lo) < 0)
        return -1;
    *first = (lo >> k) + ((lo & mask) != 0 || !inclusive);
    *last = (hi >> k) - ((hi & mask) == 0 && !inclusive);
    return *first <= *last;
}

/* repr's digits of a positive normal double below 2^53 whose shortest round-trip decimal has a
   digit below the units (most measured values: latencies, rates), as repr_digits gives them, or 0
   for others (and where 128 bits do not suffice: below about 1e-6).

   Exact, with 128-bit integers: value = 4m x 2^-k (m its 53-bit significand), and the halfway
   points to the doubles either side are 4m + 2 and 4m - 2 (4m - 1 below a power of two, where the
   step halves) in those units. A decimal n x 10^s reads back as value when it lies between them
   (ends included when m is even: reading rounds half to even). Whether some multiple of 10^s does
   is monotone in s, so a binary search finds the largest s (the fewest digits); of its multiples,
   the nearest to value (half to even), as repr's shortest mode chooses (Steele & White, "How to
   print floating-point numbers accurately", 1990; Gay's dtoa, mode 0). With s <= 0 a power of ten
   multiplies and a power of two shifts: no division. */
static int exact_digits(double value, char *digits, int *ndigits, int *point) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    int biased = (int)(bits >> 52) & 0x7FF;
    uint64_t fraction = bits & ((1ULL << 52) - 1);
    int k = 1075 + 2 - biased;
    if (biased == 0 || k <= 1 || k >= 128 || !(value < 9007199254740992.0))
        return 0;
    uint64_t m = fraction | (1ULL << 52);
    u128 mid = (u128)m << 2, high = mid + 2, low = mid - (fraction == 0 && biased > 1 ? 1 : 2);
    int inclusive = (m & 1) == 0;
    int magnitude = (int)floor(log10(value));
    /* 17 digits always suffice: 10^(magnitude - 16) has a multiple in the interval unless log10 rounded up past
       a power of ten (then repr answers); 10^(magnitude + 2) exceeds the interval. */
    int lo = magnitude - 16, hi = magnitude + 2 < 0 ? magnitude + 2 : 0;
    u128 first, last, f, l, at;
    if (multiples(low, high, k, inclusive, lo, &first, &last) != 1)
        return 0;
    while (lo < hi) { /* multiples at lo; none above hi */
        int s = lo + (hi - lo + 1) / 2;
        int found = multiples(low, high, k, inclusive, s, &f, &l);
        if (found < 0)
            return 0;
        if (found)
            lo = s, first = f, last = l;
        else
            hi = s - 1;
    }
    if (lo == 0 && magnitude + 2 > 0)
        return 0; /* a multiple of 10 or more may lie in it too: not this function's case */
    if (times_pow10(mid, -lo, &at) < 0)
        return 0;
    u128 n = at >> k, rest = at & (((u128)1 << k) - 1), half = (u128)1 << (k - 1);
    if (rest > half || (rest == half && (n & 1)))
        n++;
    n = n < first ? first : n > last ? last : n;
    char reversed[40];
    int count = 0;
    for (uint64_t v = (uint64_t)n; v; v /= 10) /* n < 10^19: 64-bit division, not 128-bit's */
        reversed[count++] = (char)('0' + (int)(v % 10));
    int zeros = 0;
    while (zeros < count - 1 && reversed[zeros] == '0')
        zeros++;
    *point = count + lo;
    *ndigits = count - zeros;
    for (int i = 0; i < *ndigits; i++)
        digits[i] = reversed[count - 1 - i];
    return 1;
}

/* repr's digits of a positive finite double: value = 0.DIGITS x 10^point, no leading or trailing
   zeros in DIGITS (as collector.attributes.go_float takes them from Decimal(repr(value))). */
static int repr_digits(Ctx *ctx, double value, char *digits, int *ndigits, int *point) {
    /* repr is [digits][.digits][e[+-]digits]: collect the digits and where the point goes, so
       that value = 0.DIGITS x 10^point, DIGITS without leading or trailing zeros. */
    char text[32];
    size_t len;
    TRY(repr_double(ctx, value, 0, text, &len));
    int seen_point = 0;
    *ndigits = *point = 0;
    long exponent = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (ch >= '0' && ch <= '9') {
            if ((*ndigits) == 0 && ch == '0') {
                if (seen_point)
                    (*point)--;
                continue;
            }
            digits[(*ndigits)++] = ch;
            if (!seen_point)
                (*point)++;
        } else if (ch == '.') {
            seen_point = 1;
        } else if (ch == 'e') {
            exponent = strtol(text + i + 1, NULL, 10);
            break;
        } else {
            FAIL(ctx, "unexpected double repr");
        }
    }
    while ((*ndigits) > 0 && digits[(*ndigits) - 1] == '0')
        (*ndigits)--;
    if ((*ndigits) == 0)
        FAIL(ctx, "unexpected double repr");
    *point += (int)exponent;
    return 0;
}

/* collector.attributes.go_float: Go's strconv.FormatFloat(v, 'g', -1, 64), into out (>= 40 bytes). */
static int go_double(Ctx *ctx, double value, char *out, size_t *n) {
    if (isnan(value)) {
        *n = (size_t)sprintf(out, "NaN");
        return 0;
    }
    if (isinf(value)) {
        *n = (size_t)sprintf(out, value > 0 ? "+Inf" : "-Inf");
        return 0;
    }
    if (value == 0) {
        *n = (size_t)sprintf(out, signbit(value) ? "-0" : "0");
        return 0;
    }
    char digits[32];
    int ndigits = 0, point = 0;
    if (!short_digits(fabs(value), digits, &ndigits, &point) && !exact_digits(fabs(value), digits, &ndigits, &point))
        TRY(repr_digits(ctx, fabs(value), digits, &ndigits, &point));
    char *o = out;
    if (value < 0)
        *o++ = '-';
    int decimal_exponent = point - 1;
    if (decimal_exponent < -4 || decimal_exponent >= 21) {
        *o++ = digits[0];
        if (ndigits > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, ndigits - 1);
            o += ndigits - 1;
        }
        o += sprintf(o, "e%c%02d", decimal_exponent < 0 ? '-' : '+', abs(decimal_exponent));
    } else if (point <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -point; i++)
            *o++ = '0';
        memcpy(o, digits, ndigits);
        o += ndigits;
    } else if (point >= ndigits) {
        memcpy(o, digits, ndigits);
        o += ndigits;
        for (int i = ndigits; i < point; i++)
            *o++ = '0';
    } else {
        memcpy(o, digits, point);
        o += point;
        *o++ = '.';
        memcpy(o, digits + point, ndigits - point);
        o += ndigits - point;
    }
    *n = (size_t)(o - out);
    return 0;
}

static int put_base64(Ctx *ctx, Buf *b, const uint8_t *s, size_t n) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (b->discard)
        return 0;
    TRY(reserve(ctx, b, (n + 2) / 3 * 4));
    char *o = b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = '=';
    }
    b->len = (size_t)(o - b->data);
    return 0;
}

/* A JSON string as json.dumps(..., ensure_ascii=False) writes it. */
static int put_json_string(Ctx *ctx, Buf *b, const uint8_t *s, size_t n) {
    TRY(check_utf8(ctx, s, n));
    TRY(put(ctx, b, "\"", 1));
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20) {
                sprintf(esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e)
            TRY(put(ctx, b, e, strlen(e)));
        else
            TRY(put(ctx, b, &c, 1));
    }
    return put(ctx, b, "\"", 1);
}

/* One item of an array value as json.dumps writes collector.attributes._raw of it. */
static int put_json_item(Ctx *ctx, Buf *b, const Value *v) {
    char text[64];
    size_t n;
    switch (v->kind) {
    case V_NONE:
        return put(ctx, b, "null", 4);
    case V_STRING:
        return put_json_string(ctx, b, v->data, v->len);
    case V_BOOL:
        return v->value ? put(ctx, b, "true", 4) : put(ctx, b, "false", 5);
    case V_INT:
        format_int((int64_t)v->value, text, &n);
        return put(ctx, b, text, n);
    case V_DOUBLE: {
        double d;
        memcpy(&d, &v->value, sizeof d);
        if (isfinite(d)) {
            TRY(repr_double(ctx, d, Py_DTSF_ADD_DOT_0, text, &n));
            return put(ctx, b, text, n);
        }
        TRY(go_double(ctx, d, text, &n));
        TRY(put(ctx, b, "\"", 1));
        TRY(put(ctx, b, text, n));
        return put(ctx, b, "\"", 1);
    }
    case V_BYTES:
        TRY(put(ctx, b, "\"", 1));
        TRY(put_base64(ctx, b, v->data, v->len));
        return put(ctx, b, "\"", 1);
    default:
        FAIL(ctx, "nested array or key-value list inside an array");
    }
}

/* The longest text put_value() may store for v: exact for strings (by bytes: never fewer than their characters)
   and bytes (base64), the longest decimal of a bool, int or double, and for an array the bytes of its JSON
   text at most (a string item's byte escaped as \u00XX, quotes and commas within each item's own framing). */
static size_t stored_chars_bound(const Value *v) {
    switch (v->kind) {
    case V_STRING:
        return v->len;
    case V_BOOL:
        return 5;
    case V_INT:
        return 20;
    case V_DOUBLE:
        return 24;
    case V_BYTES:
        return v->len > SIZE_MAX / 2 ? SIZE_MAX : (v->len + 2) / 3 * 4;
    case V_ARRAY:
        return v->len > SIZE_MAX / 8 ? SIZE_MAX : 6 * v->len + 2;
    default:
        return 0;
    }
}

/* What check() needs of an AnyValue: a shape convert() handles, valid UTF-8 (no formatting), and a stored text
   within max_value_chars. A value whose text may pass it is an anomaly (exact for strings), so the reference
   measures and reports it; past the limit, arrays, bytes and numbers are rare. */
static int check_value(Ctx *ctx, const Value *v) {
    if (stored_chars_bound(v) > (size_t)ctx->max_value_chars) {
        if (v->kind != V_STRING)
            FAIL(ctx, "attribute value may be over the length limit");
        int64_t count = utf8_length(v->data, v->len);
        if (count < 0)
            FAIL(ctx, "string field is not valid UTF-8");
        if (count > ctx->max_value_chars)
            FAIL(ctx, "attribute value over the length limit");
        return 0; /* its UTF-8 was read whole by the count */
    }
    if (v->kind == V_STRING)
        return check_utf8(ctx, v->data, v->len);
    if (v->kind == V_KVLIST)
        FAIL(ctx, "key-value list value");
    if (v->kind != V_ARRAY)
        return 0;
    Cursor c = cursor(v->data, v->len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number != 1)
            continue;
        if (f.wire != WIRE_LEN)
            FAIL(ctx, "known field with an unexpected wire type");
        Value item;
        TRY(read_value(ctx, f.data, f.len, &item));
        if (item.kind == V_ARRAY || item.kind == V_KVLIST)
            FAIL(ctx, "nested array or key-value list inside an array");
        if (item.kind == V_STRING)
            TRY(check_utf8(ctx, item.data, item.len));
    }
    return r;
}

/* The stored string of an AnyValue, as a String (varint length + bytes), within max_value_chars. */
static int put_value(Ctx *ctx, Buf *b, const uint8_t *data, size_t len) {
    Value v;
    TRY(read_value(ctx, data, len, &v));
    if (b->discard)
        return check_value(ctx, &v);
    char text[64];
    size_t n = 0;
    switch (v.kind) {
    case V_NONE:
        return put_str(ctx, b, "", 0);
    case V_STRING: {
        int64_t count = utf8_length(v.data, v.len);
        if (count < 0)
            FAIL(ctx, "string field is not valid UTF-8");
        if (count > ctx->max_value_chars)
            FAIL(ctx, "attribute value over the length limit");
        return put_str(ctx, b, v.data, v.len);
    }
    case V_BOOL:
        return v.value ? put_str(ctx, b, "true", 4) : put_str(ctx, b, "false", 5);
    case V_INT:
        format_int((int64_t)v.value, text, &n);
        break;
    case V_DOUBLE: {
        double d;
        memcpy(&d, &v.value, sizeof d);
        TRY(go_double(ctx, d, text, &n));
        break;
    }
    case V_BYTES: {
        size_t size = (v.len + 2) / 3 * 4;
        if (v.len > SIZE_MAX / 2 || size > (size_t)ctx->max_value_chars)
            FAIL(ctx, "attribute value over the length limit");
        TRY(put_varint(ctx, b, size));
        return put_base64(ctx, b, v.data, v.len);
    }
    case V_ARRAY: {
        Buf *s = &ctx->scratch;
        s->len = 0;
        TRY(put(ctx, s, "[", 1));
        Cursor c = cursor(v.data, v.len);
        Field f;
        int r, first = 1;
        while ((r = next_field(ctx, &c, &f)) > 0) {
            if (f.number != 1)
                continue; /* unknown to Python too */
            if (f.wire != WIRE_LEN)
                FAIL(ctx, "known field with an unexpected wire type");
            Value item;
            TRY(read_value(ctx, f.data, f.len, &item));
            if (!first)
                TRY(put(ctx, s, ",", 1));
            first = 0;
            TRY(put_json_item(ctx, s, &item));
        }
        TRY(r);
        TRY(put(ctx, s, "]", 1));
        if (chars(s->data, s->len) > ctx->max_value_chars)
            FAIL(ctx, "attribute value over the length limit");
        return put_str(ctx, b, s->data, s->len);
    }
    default:
        FAIL(ctx, "key-value list value");
    }
    if ((long)n > ctx->max_value_chars)
        FAIL(ctx, "attribute value over the length limit");
    return put_str(ctx, b, text, n);
}

/* A KeyValue: its key (checked) and value message. */
static int read_kv(Ctx *ctx, const uint8_t *data, size_t len, const uint8_t **key, size_t *key_len,
                   const uint8_t **value, size_t *value_len) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    *key = (const uint8_t *)"";
    *key_len = 0;
    *value = (const uint8_t *)"";
    *value_len = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 1) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            *key = f.data;
            *key_len = f.len;
        } else if (f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            *value = f.data;
            *value_len = f.len;
        } else if (f.number == 3) {
            FAIL(ctx, "KeyValue.key_strindex");
        }
    }
    TRY(r);
    TRY(check_utf8(ctx, *key, *key_len));
    if (*key_len == sizeof TRUNCATED_KEY - 1 && memcmp(*key, TRUNCATED_KEY, *key_len) == 0)
        FAIL(ctx, "attribute named " TRUNCATED_KEY);
    return 0;
}

/* Whether name begins with one of the literals: a binary search for the greatest literal not after
   name (Literals says why that one is the only candidate). */
static int begins_with_any(const Literals *literals, const uint8_t *name, size_t len) {
    if (literals->n == 0 || len == 0 || !(literals->first[name[0] >> 3] & (1u << (name[0] & 7))))
        return 0;
    size_t lo = 0, hi = literals->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const Literal *l = &literals->items[mid];
        size_t common = l->len < len ? l->len : len;
        int c = memcmp(l->data, name, common);
        if (c < 0 || (c == 0 && l->len <= len))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const Literal *l = &literals->items[lo - 1];
    return l->len <= len && memcmp(l->data, name, l->len) == 0;
}

/* Appends the KeyValue fields numbered `number` of a message (count of them) to a map column's
   keys and values, and the new end to `offsets` (the column's own, or its maps' in an Array). A key
   beginning with one of `named` (NULL: none) is REDACTION_CANDIDATE. */
static int put_map(Ctx *ctx, Column *col, Buf *offsets, uint64_t *end, const uint8_t *data, size_t len,
                   uint32_t number, size_t count, const Literals *named) {
    if (count > (size_t)ctx->max_attributes)
        FAIL(ctx, "attribute count over the limit");
    Cursor c = cursor(data, len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number != number)
            continue;
        const uint8_t *key, *value;
        size_t key_len, value_len;
        TRY(read_kv(ctx, f.data, f.len, &key, &key_len, &value, &value_len));
        if (named && begins_with_any(named, key, key_len))
            FAIL(ctx, REDACTION_CANDIDATE);
        TRY(put_str(ctx, &col->data, key, key_len));
        TRY(put_value(ctx, &col->values, value, value_len));
    }
    TRY(r);
    *end += count;
    return put_u64(ctx, offsets, *end);
}

/* Closes the current row of an Array column holding n more items. */
static int end_array(Ctx *ctx, Column *col, size_t n) {
    col->count += n;
    return put_u64(ctx, &col->offsets, col->count);
}

/* ---------------------------------------------------------------------------------------------- */
/* Spans                                                                                           */

static int check_id(Ctx *ctx, const uint8_t *raw, size_t n, size_t size) {
    if (!(n == size || (size == 16 && n == 8)))
        FAIL(ctx, "ID of the wrong length");
    for (size_t i = 0; i < n; i++)
        if (raw[i])
            return 0;
    FAIL(ctx, "all-zero ID");
}

static int grow_items(Ctx *ctx, size_t n) {
    if (n <= ctx->capitems)
        return 0;
    size_t cap = ctx->capitems ? 2 * ctx->capitems : 16;
    while (cap < n)
        cap *= 2;
    Item *items = realloc(ctx->items, cap * sizeof *items);
    if (!items)
        FAIL(ctx, NO_MEMORY);
    ctx->items = items;
    ctx->capitems = cap;
    return 0;
}

/* Reads an Event (is_link 0) or Link (is_link 1) into item, counting its attributes. */
static int read_item(Ctx *ctx, const uint8_t *data, size_t len, int is_link, Item *item) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    memset(item, 0, sizeof *item);
    item->data = data;
    item->len = len;
    item->name = item->trace_id = item->span_id = (const uint8_t *)"";
    uint32_t attributes_field = is_link ? 4 : 3;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == attributes_field) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
            item->attributes++;
        } else if (!is_link && f.number == 1) {
            TRY(expect(ctx, &f, WIRE_FIXED64, &seen, 1));
            item->time = f.value;
        } else if (!is_link && f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            item->name = f.data;
            item->name_len = f.len;
        } else if (!is_link && f.number == 4) {
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
        } else if (is_link && f.number == 1) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            item->trace_id = f.data;
            item->trace_len = f.len;
        } else if (is_link && f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            item->span_id = f.data;
            item->span_len = f.len;
        } else if (is_link && f.number == 3) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            item->name = f.data;
            item->name_len = f.len;
        } else if (is_link && f.number == 5) {
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
        } else if (is_link && f.number == 6) {
            TRY(expect(ctx, &f, WIRE_FIXED32, &seen, 1));
        }
    }
    TRY(r);
    TRY(check_utf8(ctx, item->name, item->name_len));
    if (!is_link && item->time > (uint64_t)MAX_TIME_NS)
        FAIL(ctx, "event time beyond 2262");
    if (is_link) {
        TRY(check_id(ctx, item->trace_id, item->trace_len, 16));
        TRY(check_id(ctx, item->span_id, item->span_len, 8));
    }
    return 0;
}

typedef struct {
    const uint8_t *trace_id, *span_id, *parent, *trace_state, *name, *status_message;
    size_t trace_len, span_len, parent_len, trace_state_len, name_len, status_message_len;
    uint64_t kind, start, end, status_code;
    size_t attributes, events, links;
} Span;

static int read_status(Ctx *ctx, const uint8_t *data, size_t len, Span *span) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span->status_message = f.data;
            span->status_message_len = f.len;
        } else if (f.number == 3) {
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
            span->status_code = f.value;
        }
    }
    TRY(r);
    return check_utf8(ctx, span->status_message, span->status_message_len);
}

static int key_order(const void *a, const void *b) {
    const Key *x = a, *y = b;
    int c = memcmp(x->trace, y->trace, 16);
    if (!c)
        c = memcmp(x->span, y->span, 8);
    if (!c && x->kind != y->kind)
        c = x->kind < y->kind ? -1 : 1;
    if (!c && x->start != y->start)
        c = x->start < y->start ? -1 : 1;
    if (!c && x->name_len != y->name_len)
        c = x->name_len < y->name_len ? -1 : 1;
    if (!c && x->name_len)
        c = memcmp(x->name, y->name, x->name_len);
    return c;
}

static int add_key(Ctx *ctx, const Span *span) {
    if (ctx->nkeys == ctx->capkeys) {
        size_t cap = ctx->capkeys ? 2 * ctx->capkeys : 512;
        Key *keys = realloc(ctx->keys, cap * sizeof *keys);
        if (!keys)
            FAIL(ctx, NO_MEMORY);
        ctx->keys = keys;
        ctx->capkeys = cap;
    }
    Key *k = &ctx->keys[ctx->nkeys++];
    memset(k->trace, 0, 16);
    memcpy(k->trace + 16 - span->trace_len, span->trace_id, span->trace_len);
    memcpy(k->span, span->span_id, 8);
    k->kind = span->kind;
    k->start = span->start;
    k->name = span->name;
    k->name_len = span->name_len;
    return 0;
}

/* One span: check it as collector.batch.check_span does, then write its row. */
static int convert_span(Ctx *ctx, const uint8_t *data, size_t len) {
    Span span;
    memset(&span, 0, sizeof span);
    span.trace_id = span.span_id = span.parent = span.trace_state = span.name = span.status_message =
        (const uint8_t *)"";
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        switch (f.number) {
        case 1:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span.trace_id = f.data, span.trace_len = f.len;
            break;
        case 2:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span.span_id = f.data, span.span_len = f.len;
            break;
        case 3:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span.trace_state = f.data, span.trace_state_len = f.len;
            break;
        case 4:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span.parent = f.data, span.parent_len = f.len;
            break;
        case 5:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            span.name = f.data, span.name_len = f.len;
            break;
        case 6:
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
            span.kind = f.value;
            break;
        case 7:
            TRY(expect(ctx, &f, WIRE_FIXED64, &seen, 1));
            span.start = f.value;
            break;
        case 8:
            TRY(expect(ctx, &f, WIRE_FIXED64, &seen, 1));
            span.end = f.value;
            break;
        case 9:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
            span.attributes++;
            break;
        case 10:
        case 12:
        case 14:
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
            break;
        case 11:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
            span.events++;
            break;
        case 13:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
            span.links++;
            break;
        case 15:
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            TRY(read_status(ctx, f.data, f.len, &span));
            break;
        case 16:
            TRY(expect(ctx, &f, WIRE_FIXED32, &seen, 1));
            break;
        default:
            break;
        }
    }
    TRY(r);
    /* collector.batch.check_span's rules; any broken one sends the request to Python. */
    TRY(check_id(ctx, span.trace_id, span.trace_len, 16));
    TRY(check_id(ctx, span.span_id, span.span_len, 8));
    if (span.parent_len)
        TRY(check_id(ctx, span.parent, span.parent_len, 8));
    if (span.start == 0 || span.end < span.start || span.end > (uint64_t)MAX_TIME_NS)
        FAIL(ctx, "invalid span times");
    if (span.start < EARLIEST_PLAUSIBLE_NS) /* valid, but Python warns: times sent in µs, ms or s? */
        FAIL(ctx, "a span starting before 2000");
    if (span.kind > 5 || span.status_code > 2)
        FAIL(ctx, "kind or status code out of range");
    if (span.events > (size_t)ctx->max_events || span.links > (size_t)ctx->max_links)
        FAIL(ctx, "event or link count over the limit");
    TRY(check_utf8(ctx, span.trace_state, span.trace_state_len));
    TRY(check_utf8(ctx, span.name, span.name_len));
    TRY(add_key(ctx, &span));

    /* Events and links, read once; their columns are written from these. */
    size_t nitems = span.events + span.links;
    TRY(grow_items(ctx, nitems));
    Item *events = ctx->items, *links = ctx->items + span.events;
    size_t e = 0, l = 0;
    c = cursor(data, len);
    while (nitems && (r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 11)
            TRY(read_item(ctx, f.data, f.len, 0, &events[e++]));
        else if (f.number == 13)
            TRY(read_item(ctx, f.data, f.len, 1, &links[l++]));
    }
    TRY(r);

    Column *col = ctx->columns;
    TRY(put_u64(ctx, &col[C_TIMESTAMP].data, span.start));
    TRY(put_hex(ctx, &col[C_TRACE_ID].data, span.trace_id, span.trace_len, 16));
    TRY(put_hex(ctx, &col[C_SPAN_ID].data, span.span_id, span.span_len, 0));
    TRY(put_hex(ctx, &col[C_PARENT_SPAN_ID].data, span.parent, span.parent_len, 0));
    TRY(put_str(ctx, &col[C_TRACE_STATE].data, span.trace_state, span.trace_state_len));
    TRY(put_str(ctx, &col[C_SPAN_NAME].data, span.name, span.name_len));
    TRY(put_cstr(ctx, &col[C_SPAN_KIND].data, SPAN_KINDS[span.kind]));
    TRY(put(ctx, &col[C_SERVICE_NAME].data, ctx->service.data, ctx->service.len));
    Column *resource = &col[C_RESOURCE_ATTRIBUTES];
    TRY(put(ctx, &resource->data, ctx->resource_keys.data, ctx->resource_keys.len));
    TRY(put(ctx, &resource->values, ctx->resource_values.data, ctx->resource_values.len));
    TRY(end_array(ctx, resource, ctx->resource_count));
    TRY(put(ctx, &col[C_SCOPE_NAME].data, ctx->scope_name.data, ctx->scope_name.len));
    TRY(put(ctx, &col[C_SCOPE_VERSION].data, ctx->scope_version.data, ctx->scope_version.len));
    Column *attributes = &col[C_SPAN_ATTRIBUTES];
    TRY(put_map(ctx, attributes, &attributes->offsets, &attributes->count, data, len, 9, span.attributes,
                &ctx->named_keys));
    TRY(put_u64(ctx, &col[C_DURATION].data, span.end - span.start));
    TRY(put_cstr(ctx, &col[C_STATUS_CODE].data, STATUS_CODES[span.status_code]));
    TRY(put_str(ctx, &col[C_STATUS_MESSAGE].data, span.status_message, span.status_message_len));
    Column *event_attributes = &col[C_EVENTS_ATTRIBUTES];
    for (size_t i = 0; i < span.events; i++) {
        if (begins_with_any(&ctx->named_events, events[i].name, events[i].name_len))
            FAIL(ctx, REDACTION_CANDIDATE);
        TRY(put_u64(ctx, &col[C_EVENTS_TIMESTAMP].data, events[i].time));
        TRY(put_str(ctx, &col[C_EVENTS_NAME].data, events[i].name, events[i].name_len));
        TRY(put_map(ctx, event_attributes, &event_attributes->inner, &event_attributes->inner_count, events[i].data,
                    events[i].len, 3, events[i].attributes, &ctx->named_keys));
    }
    TRY(end_array(ctx, &col[C_EVENTS_TIMESTAMP], span.events));
    TRY(end_array(ctx, &col[C_EVENTS_NAME], span.events));
    TRY(end_array(ctx, event_attributes, span.events));
    Column *link_attributes = &col[C_LINKS_ATTRIBUTES];
    for (size_t i = 0; i < span.links; i++) {
        TRY(put_hex(ctx, &col[C_LINKS_TRACE_ID].data, links[i].trace_id, links[i].trace_len, 16));
        TRY(put_hex(ctx, &col[C_LINKS_SPAN_ID].data, links[i].span_id, links[i].span_len, 0));
        TRY(put_str(ctx, &col[C_LINKS_TRACE_STATE].data, links[i].name, links[i].name_len));
        TRY(put_map(ctx, link_attributes, &link_attributes->inner, &link_attributes->inner_count, links[i].data,
                    links[i].len, 4, links[i].attributes, NULL));
    }
    TRY(end_array(ctx, &col[C_LINKS_TRACE_ID], span.links));
    TRY(end_array(ctx, &col[C_LINKS_SPAN_ID], span.links));
    TRY(end_array(ctx, &col[C_LINKS_TRACE_STATE], span.links));
    TRY(end_array(ctx, link_attributes, span.links));
    TRY(put_str(ctx, &col[C_TENANT].data, ctx->tenant, (size_t)ctx->tenant_len));
    ctx->spans++;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Resources and scopes                                                                            */

/* Whether the Strings in b (varint length + bytes each) hold key. */
static int holds_key(const Buf *b, const uint8_t *key, size_t key_len) {
    Cursor c = cursor((const uint8_t *)b->data, b->len);
    uint64_t n;
    while (c.p < c.end && read_varint(&c, &n) == 0) {
        if (n == key_len && memcmp(c.p, key, key_len) == 0)
            return 1;
        c.p += n;
    }
    return 0;
}

/* The ServiceName and ResourceAttributes of a Resource message into ctx->service and
   ctx->resource_* (collector.batch._resource, for resources whose keys are all distinct and that
   have a non-empty service.name). */
static int convert_resource(Ctx *ctx, const uint8_t *data, size_t len) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    size_t count = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 1) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
            count++;
        } else if (f.number == 2) {
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
        } else if (f.number == 3) {
            FAIL(ctx, "Resource.entity_refs");
        }
    }
    TRY(r);
    if (count > (size_t)ctx->max_attributes)
        FAIL(ctx, "attribute count over the limit");
    Buf *keys = &ctx->resource_keys, *values = &ctx->resource_values;
    keys->len = values->len = ctx->service.len = 0;
    ctx->resource_count = count;
    c = cursor(data, len);
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number != 1)
            continue;
        const uint8_t *key, *value;
        size_t key_len, value_len;
        TRY(read_kv(ctx, f.data, f.len, &key, &key_len, &value, &value_len));
        /* collector.batch._resource keeps one value per key; distinct keys keep it simple here. */
        if (holds_key(keys, key, key_len))
            FAIL(ctx, "resource attribute key given twice");
        TRY(put_str(ctx, keys, key, key_len));
        size_t value_at = values->len;
        TRY(put_value(ctx, values, value, value_len));
        if (key_len == sizeof SERVICE_NAME_KEY - 1 && memcmp(key, SERVICE_NAME_KEY, key_len) == 0)
            TRY(put(ctx, &ctx->service, values->data + value_at, values->len - value_at));
    }
    TRY(r);
    /* A String of one byte is the empty one: collector.batch warns and stores unknown_service. */
    if (ctx->service.len <= 1)
        FAIL(ctx, "resource without service.name");
    return 0;
}

/* The ScopeName and ScopeVersion of an InstrumentationScope message into ctx->scope_*. */
static int convert_scope(Ctx *ctx, const uint8_t *data, size_t len) {
    const uint8_t *name = (const uint8_t *)"", *version = (const uint8_t *)"";
    size_t name_len = 0, version_len = 0;
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 1) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            name = f.data, name_len = f.len;
        } else if (f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            version = f.data, version_len = f.len;
        } else if (f.number == 3) {
            FAIL(ctx, "InstrumentationScope.attributes");
        } else if (f.number == 4) {
            TRY(expect(ctx, &f, WIRE_VARINT, &seen, 1));
        }
    }
    TRY(r);
    TRY(check_utf8(ctx, name, name_len));
    TRY(check_utf8(ctx, version, version_len));
    ctx->scope_name.len = ctx->scope_version.len = 0;
    TRY(put_str(ctx, &ctx->scope_name, name, name_len));
    return put_str(ctx, &ctx->scope_version, version, version_len);
}

/* The singular message field `number` and the schema_url (field 3) of a ResourceSpans or
   ScopeSpans; spans/scope_spans (field 2) are walked by the caller afterwards, since the
   singular field may come after them on the wire. */
static int read_head(Ctx *ctx, const uint8_t *data, size_t len, const uint8_t **head, size_t *head_len) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    uint32_t seen = 0;
    *head = (const uint8_t *)"";
    *head_len = 0;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number == 1) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            *head = f.data, *head_len = f.len;
        } else if (f.number == 2) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 0));
        } else if (f.number == 3) {
            TRY(expect(ctx, &f, WIRE_LEN, &seen, 1));
            TRY(check_utf8(ctx, f.data, f.len));
        }
    }
    return r;
}

static int convert_scope_spans(Ctx *ctx, const uint8_t *data, size_t len) {
    const uint8_t *scope;
    size_t scope_len;
    TRY(read_head(ctx, data, len, &scope, &scope_len));
    TRY(convert_scope(ctx, scope, scope_len));
    Cursor c = cursor(data, len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0)
        if (f.number == 2)
            TRY(convert_span(ctx, f.data, f.len));
    return r;
}

static int convert_resource_spans(Ctx *ctx, const uint8_t *data, size_t len) {
    const uint8_t *resource;
    size_t resource_len;
    TRY(read_head(ctx, data, len, &resource, &resource_len));
    TRY(convert_resource(ctx, resource, resource_len));
    Cursor c = cursor(data, len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0)
        if (f.number == 2)
            TRY(convert_scope_spans(ctx, f.data, f.len));
    return r;
}

static int convert_request(Ctx *ctx, const uint8_t *data, size_t len) {
    Cursor c = cursor(data, len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number != 1)
            continue;
        if (f.wire != WIRE_LEN)
            FAIL(ctx, "known field with an unexpected wire type");
        TRY(convert_resource_spans(ctx, f.data, f.len));
    }
    TRY(r);
    /* collector.batch.check_request keeps the last of spans sharing a key and rejects the others. */
    if (ctx->nkeys > 1) {
        qsort(ctx->keys, ctx->nkeys, sizeof *ctx->keys, key_order);
        for (size_t i = 1; i < ctx->nkeys; i++)
            if (key_order(&ctx->keys[i - 1], &ctx->keys[i]) == 0)
                FAIL(ctx, "duplicate span");
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Python module                                                                                   */

/* The buffers of every call, kept between calls: growing fresh ones for each request cost more than
   the conversion. Safe without a lock: calls hold the GIL throughout and never re-enter. */
static Ctx shared;

#define KEEP_BYTES (16u << 20) /* a buffer grown past this by a huge request is given back */

static void reset_buf(Buf *b, int discard) {
    if (b->cap > KEEP_BYTES) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    b->len = 0;
    b->discard = discard;
}

/* The shared context, emptied, with its column buffers discarding (check) or not (convert). */
static Ctx *ctx_start(int discard) {
    Ctx *ctx = &shared;
    for (int i = 0; i < NCOLUMNS; i++) {
        Column *col = &ctx->columns[i];
        reset_buf(&col->data, discard);
        reset_buf(&col->values, discard);
        reset_buf(&col->offsets, discard);
        reset_buf(&col->inner, discard);
        col->count = col->inner_count = 0;
    }
    Buf *bufs[] = {&ctx->scratch, &ctx->service, &ctx->resource_keys, &ctx->resource_values, &ctx->scope_name,
                   &ctx->scope_version};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        reset_buf(bufs[i], 0);
    if (ctx->capkeys * sizeof *ctx->keys > KEEP_BYTES) {
        free(ctx->keys);
        ctx->keys = NULL;
        ctx->capkeys = 0;
    }
    if (ctx->capitems * sizeof *ctx->items > KEEP_BYTES) {
        free(ctx->items);
        ctx->items = NULL;
        ctx->capitems = 0;
    }
    ctx->nkeys = 0;
    ctx->named_keys.n = ctx->named_events.n = 0;
    ctx->spans = 0;
    ctx->anomaly = NULL;
    ctx->resource_count = 0;
    return ctx;
}

/* The Native block of the columns built: a header (column count, row count), then per column its
   name, its type and its buffers in the order Native reads them (offsets before nested data). */
static PyObject *native_block(Ctx *ctx) {
    if (ctx->spans == 0)
        return PyBytes_FromStringAndSize(NULL, 0);
    Buf head = {0};
    size_t size = 0;
    /* Twice: first to size the result, then to fill it (no copy through a growing buffer). */
    char *o = NULL;
    PyObject *block = NULL;
    for (int pass = 0; pass < 2; pass++) {
        head.len = 0;
        if (put_varint(ctx, &head, NCOLUMNS) < 0 || put_varint(ctx, &head, (uint64_t)ctx->spans) < 0)
            goto failed;
        if (pass == 1)
            memcpy(o, head.data, head.len), o += head.len;
        else
            size += head.len;
        for (int i = 0; i < NCOLUMNS; i++) {
            const Column *col = &ctx->columns[i];
            head.len = 0;
            if (put_cstr(ctx, &head, COLUMNS[i]) < 0 || put_cstr(ctx, &head, COLUMN_TYPES[i]) < 0)
                goto failed;
            const Buf *parts[] = {&head, &col->offsets, &col->inner, &col->data, &col->values};
            for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
                if (pass == 1 && parts[k]->len)
                    memcpy(o, parts[k]->data, parts[k]->len), o += parts[k]->len;
                else
                    size += parts[k]->len;
            }
        }
        if (pass == 0) {
            block = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
            if (!block)
                goto failed;
            o = PyBytes_AS_STRING(block);
        }
    }
    free(head.data);
    return block;
failed:
    free(head.data);
    Py_XDECREF(block);
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

PyDoc_STRVAR(convert_doc,
             "convert(body, tenant, max_attributes, max_value_chars, max_events, max_links, named_keys,\n"
             "        named_events, /)\n--\n\n"
             "One Native block of otel_traces rows (columns COLUMNS) for a serialized ExportTraceServiceRequest.\n\n"
             "Returns (spans, rows) when the request is clean: every span stored as collector.batch.to_batch\n"
             "stores it, with nothing rejected, warned about or truncated. Otherwise returns a str naming the\n"
             "first anomaly found; the request must then go through to_batch. The str is REDACTION_CANDIDATE\n"
             "when a span or event attribute key begins with one of named_keys, or an event name with one of\n"
             "named_events (tuples of bytes, sorted, none the start of another; empty: no test). Never raises\n"
             "for any bytes (MemoryError aside; TypeError for named_* of another type).");

/* Borrows the bytes of a tuple of literals (the caller's tuple outlives the call) into ctx->literals
   from `at` on, as list; -1 with an exception set. */
static int borrow_literals(Ctx *ctx, PyObject *tuple, size_t at, Literals *list) {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    if (at + (size_t)n > ctx->capliterals) {
        Literal *grown = realloc(ctx->literals, (at + (size_t)n) * sizeof *grown);
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        ctx->literals = grown;
        ctx->capliterals = at + (size_t)n;
    }
    memset(list->first, 0, sizeof list->first);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
            PyErr_SetString(PyExc_TypeError, "named keys and event names must be non-empty bytes");
            return -1;
        }
        Literal *l = &ctx->literals[at + (size_t)i];
        l->data = (const uint8_t *)PyBytes_AS_STRING(item);
        l->len = (size_t)PyBytes_GET_SIZE(item);
        list->first[l->data[0] >> 3] |= (uint8_t)(1u << (l->data[0] & 7));
    }
    list->n = (size_t)n;
    return 0;
}

static PyObject *convert(PyObject *self, PyObject *args) {
    Py_buffer body;
    const char *tenant;
    Py_ssize_t tenant_len;
    long max_attributes, max_value_chars, max_events, max_links;
    PyObject *named_keys, *named_events;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*s#llllO!O!:convert", &body, &tenant, &tenant_len, &max_attributes,
                          &max_value_chars, &max_events, &max_links, &PyTuple_Type, &named_keys, &PyTuple_Type,
                          &named_events))
        return NULL;
    Ctx *ctx = ctx_start(0);
    if (borrow_literals(ctx, named_keys, 0, &ctx->named_keys) < 0 ||
        borrow_literals(ctx, named_events, ctx->named_keys.n, &ctx->named_events) < 0) {
        ctx->named_keys.n = ctx->named_events.n = 0;
        PyBuffer_Release(&body);
        return NULL;
    }
    ctx->named_keys.items = ctx->literals;
    ctx->named_events.items = ctx->literals + ctx->named_keys.n;
    ctx->max_attributes = max_attributes;
    ctx->max_value_chars = max_value_chars;
    ctx->max_events = max_events;
    ctx->max_links = max_links;
    ctx->tenant = tenant;
    ctx->tenant_len = tenant_len;
    PyObject *result = NULL;
    if (convert_request(ctx, body.buf, (size_t)body.len) == 0) {
        PyObject *rows = native_block(ctx);
        if (rows)
            result = Py_BuildValue("(nN)", ctx->spans, rows);
    } else if (ctx->anomaly == NO_MEMORY) {
        PyErr_NoMemory();
    } else if (ctx->anomaly == PYTHON_ERROR) {
        /* the exception is set */
    } else {
        result = PyUnicode_FromString(ctx->anomaly ? ctx->anomaly : "unknown anomaly");
    }
    ctx->named_keys.n = ctx->named_events.n = 0; /* the literals were borrowed for this call only */
    PyBuffer_Release(&body);
    return result;
}

PyDoc_STRVAR(check_doc,
             "check(body, max_attributes, max_value_chars, max_events, max_links, /)\n--\n\n"
             "The spans of a serialized ExportTraceServiceRequest if collector.batch.check_request would\n"
             "accept them all without a warning (a limit's cut included) and convert() handles their shapes,\n"
             "else a str naming the first anomaly; writes and formats nothing, so an array, bytes or number\n"
             "value that may pass max_value_chars is an anomaly too. Never raises for any bytes (MemoryError\n"
             "aside).");

static PyObject *check(PyObject *self, PyObject *args) {
    Py_buffer body;
    long max_attributes, max_value_chars, max_events, max_links;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*llll:check", &body, &max_attributes, &max_value_chars, &max_events, &max_links))
        return NULL;
    Ctx *ctx = ctx_start(1);
    ctx->max_attributes = max_attributes;
    ctx->max_value_chars = max_value_chars;
    ctx->max_events = max_events;
    ctx->max_links = max_links;
    ctx->tenant = "";
    ctx->tenant_len = 0;
    PyObject *result = NULL;
    if (convert_request(ctx, body.buf, (size_t)body.len) == 0)
        result = PyLong_FromSsize_t(ctx->spans);
    else if (ctx->anomaly == NO_MEMORY)
        PyErr_NoMemory();
    else if (ctx->anomaly != PYTHON_ERROR)
        result = PyUnicode_FromString(ctx->anomaly ? ctx->anomaly : "unknown anomaly");
    PyBuffer_Release(&body);
    return result;
}

/* Adds the ResourceSpans (level 0: fields 1 of the request), ScopeSpans (level 1: fields 2 of a
   ResourceSpans) and Span messages (level 2: fields 2 of a ScopeSpans) under one message to counts[],
   reading nothing but tags and lengths. -1 for malformed bytes. */
static int count_shape(Ctx *ctx, const uint8_t *data, size_t len, int level, Py_ssize_t counts[3]) {
    uint32_t wanted = level == 0 ? 1 : 2;
    Cursor c = cursor(data, len);
    Field f;
    int r;
    while ((r = next_field(ctx, &c, &f)) > 0) {
        if (f.number != wanted || f.wire != WIRE_LEN)
            continue;
        counts[level]++;
        if (level < 2)
            TRY(count_shape(ctx, f.data, f.len, level + 1, counts));
    }
    return r;
}

PyDoc_STRVAR(shape_doc,
             "shape(body, /)\n--\n\n"
             "(resource_spans, scope_spans, spans) of a serialized ExportTraceServiceRequest, counted from its\n"
             "field tags and lengths alone (nothing is decoded or checked), or None when the bytes are malformed.\n"
             "The receivers bound a request's work with it before any protobuf parse. Never raises for any bytes.");

static PyObject *shape(PyObject *self, PyObject *arg) {
    Py_buffer body;
    (void)self;
    if (PyObject_GetBuffer(arg, &body, PyBUF_SIMPLE) < 0)
        return NULL;
    Ctx *ctx = ctx_start(1);
    Py_ssize_t counts[3] = {0, 0, 0};
    PyObject *result;
    if (count_shape(ctx, body.buf, (size_t)body.len, 0, counts) == 0)
        result = Py_BuildValue("(nnn)", counts[0], counts[1], counts[2]);
    else
        result = Py_NewRef(Py_None);
    PyBuffer_Release(&body);
    return result;
}

PyDoc_STRVAR(go_float_doc,
             "go_float(value, /)\n--\n\n"
             "collector.attributes.go_float in C (Go's shortest %g), as the rows store doubles.");

static PyObject *go_float(PyObject *self, PyObject *arg) {
    (void)self;
    double value = PyFloat_AsDouble(arg);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    Ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    char text[64];
    size_t n;
    if (go_double(&ctx, value, text, &n) < 0) {
        if (ctx.anomaly != PYTHON_ERROR)
            PyErr_SetString(PyExc_ValueError, ctx.anomaly);
        return NULL;
    }
    return PyUnicode_FromStringAndSize(text, (Py_ssize_t)n);
}

static PyMethodDef methods[] = {
    {"convert", convert, METH_VARARGS, convert_doc},
    {"check", check, METH_VARARGS, check_doc},
    {"shape", shape, METH_O, shape_doc},
    {"go_float", go_float, METH_O, go_float_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(module_doc, "OTLP protobuf -> ClickHouse Native blocks of otel_traces rows; see collector.native_writer.");

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_otlp_rows", .m_doc = module_doc, .m_size = -1, .m_methods = methods,
};


PyMODINIT_FUNC PyInit__otlp_rows(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyObject *columns = PyTuple_New(sizeof COLUMNS / sizeof *COLUMNS);
    for (size_t i = 0; columns && i < sizeof COLUMNS / sizeof *COLUMNS; i++) {
        PyObject *name = PyUnicode_FromString(COLUMNS[i]);
        if (!name) {
            Py_CLEAR(columns);
            break;
        }
        PyTuple_SET_ITEM(columns, i, name);
    }
    /* Field numbers this file reads (or deliberately refuses) per message: any other field is
       skipped, so a test holds this against opentelemetry-proto's descriptors. */
    PyObject *known = Py_BuildValue(
        "{s(i)s(iii)s(iii)s(iii)s(iiii)s(iii)s(iiiiiiii)s(i)s(iiiiiiiiiiiiiiii)s(iiii)s(iiiiii)s(ii)}",
        "ExportTraceServiceRequest", 1, "ResourceSpans", 1, 2, 3, "Resource", 1, 2, 3, "ScopeSpans", 1, 2, 3,
        "InstrumentationScope", 1, 2, 3, 4, "KeyValue", 1, 2, 3, "AnyValue", 1, 2, 3, 4, 5, 6, 7, 8, "ArrayValue", 1,
        "Span", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, "Event", 1, 2, 3, 4, "Link", 1, 2, 3, 4, 5, 6,
        "Status", 2, 3);
    if (!columns || !known || PyModule_AddObject(m, "COLUMNS", columns) < 0) {
        Py_XDECREF(columns);
        Py_XDECREF(known);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "KNOWN_FIELDS", known) < 0) {
        Py_DECREF(known);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "REDACTION_CANDIDATE", REDACTION_CANDIDATE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
