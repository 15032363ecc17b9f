/* rocketpy.capture._native: the compiled capture decoder.
 *
 * A C port of the pure-Python reference decoder in rocketpy/capture (readers.py, layers.py,
 * reassembly.py, framing.py, rows.py, decoder.py), kept step for step so that both give the
 * same rows; tests/test_capture_engines.py runs both on every fixture and synthetic capture and
 * compares them column by column.  The bytes come from strangers: every length read from them
 * is checked against the buffer before it is used (bench/capture_fuzz.py runs this code under
 * AddressSanitizer on random and mutated captures).
 *
 * Layout facts (frame prefix, binary header fields) are generated from rocketpy/remoting/layout.py
 * (layout_gen.h); the module exports them as LAYOUT and a test compares them with the codec's.
 */
#ifndef ROCKETPY_NATIVE_CORE_H
#define ROCKETPY_NATIVE_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- frame layout (rocketpy.remoting.layout) ------------------------------------------------
 * Every offset and size the core reads a frame with comes from layout_gen.h, which setup.py
 * writes from layout.py (included by the header kernel, rocketpy/remoting/_kernel/kernel.h, which
 * also reads the headers); tests/test_layout_single_source.py fails on a frame read by a literal
 * offset in the core's frame code.  Only the capture's own bound is stated here. */
#include "kernel.h"
#define MAX_HUNT_HEADER (1 << 20)
/* (end of the frame layout) */

/* ---- capture records (rocketpy.capture.readers) -------------------------------------------- */
#define MAX_RECORD (1 << 20)

/* ---- the reference decoder's limits and defaults, exported as LIMITS for the test that holds
 * them to rocketpy.capture's (decoder.py, framing.py, reassembly.py) ------------------------ */
#define MAX_PENDING_REQUESTS (1 << 16)
#define REORDER_NS 100000000LL
#define DEFAULT_ABANDON_AFTER (17LL << 20)
#define DEFAULT_MAX_PENDING_BYTES (32LL << 20)
#define DEFAULT_MAX_PENDING_SEGMENTS 32768LL
#define DEFAULT_HOLE_TIMEOUT_NS 10000000000LL
#define DEFAULT_LINGER_NS 2000000000LL
#define DEFAULT_MAX_CONNECTIONS 100000LL
#define DEFAULT_MAX_BUFFERED_BYTES (256LL << 20)
#define PCAPNG_MAGIC 0x0A0D0D0Au

/* ---- the GIL ---------------------------------------------------------------------------------
 * A decoder's or scanner's feed runs with the GIL released, so the CLI's writer thread (summary,
 * Parquet) runs beside it.  The few Python calls on the way (codec fallbacks, body summaries,
 * finished batches, range edges, errors) take it back for their duration:
 *
 *     PyThreadState *g = gil_take();  ...Python...  gil_give(g);
 *
 * Both are no-ops where the GIL is held already (every call from Python other than feed). */
extern __thread PyThreadState *gil_released;
static inline PyThreadState *gil_take(void) {
    PyThreadState *t = gil_released;
    if (t) {
        gil_released = NULL;
        PyEval_RestoreThread(t);
    }
    return t;
}
static inline void gil_give(PyThreadState *t) {
    if (t)
        gil_released = PyEval_SaveThread();
}
/* PyErr_NoMemory() with the GIL; -1 */
int no_memory(void);
/* a decoder or scanner is busy in feed (without the GIL): 1 with an error set for any other call */
static inline int in_use(int busy) {
    if (busy)
        PyErr_SetString(PyExc_RuntimeError, "in use by another thread (feed runs without the GIL)");
    return busy;
}

/* ---- growable byte buffer with a cheap front ---------------------------------------------- */
typedef struct {
    uint8_t *p;
    size_t start, end, cap;    /* live bytes are p[start:end] */
} buf_t;

/* room for `extra` more bytes at the end: 0, or -1 (set); buf_grow is the slow path */
int buf_grow(buf_t *b, size_t extra);
static inline int buf_reserve(buf_t *b, size_t extra) {
    return b->cap - b->end >= extra ? 0 : buf_grow(b, extra);
}
static inline int buf_append(buf_t *b, const void *data, size_t n) {
    if (!n)
        return 0;
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->end, data, n);
    COST(BYTES, n);
    b->end += n;
    return 0;
}
static inline size_t buf_len(const buf_t *b) { return b->end - b->start; }
static inline uint8_t *buf_data(const buf_t *b) { return b->p + b->start; }
static inline void buf_consume(buf_t *b, size_t n) {
    b->start += n;
    if (b->start >= b->end) b->start = b->end = 0;
}
static inline void buf_clear(buf_t *b) { b->start = b->end = 0; }
void buf_free(buf_t *b);

/* room for one more element in a growable array (doubling, from `first`): 0, or -1 (set) */
int grow(void **items, size_t *cap, size_t n, size_t size, size_t first);
#define GROW(items, cap, n, first) grow((void **)&(items), &(cap), (n), sizeof *(items), (first))

/* ---- integers from bytes ------------------------------------------------------------------- */
static inline uint16_t rd16be(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t rd32be(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint16_t rd16le(const uint8_t *p) { return (uint16_t)(p[1] << 8 | p[0]); }
static inline uint32_t rd32le(const uint8_t *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static inline uint16_t rd16(const uint8_t *p, int be) { return be ? rd16be(p) : rd16le(p); }
static inline uint32_t rd32(const uint8_t *p, int be) { return be ? rd32be(p) : rd32le(p); }
static inline uint64_t rd64(const uint8_t *p, int be) {
    return be ? ((uint64_t)rd32be(p) << 32 | rd32be(p + 4)) : ((uint64_t)rd32le(p + 4) << 32 | rd32le(p));
}

/* (a frame's prefix is read by the header kernel: rk_frame_total, rk_frame_type,
 * rk_frame_header_length) */

/* ---- statistics (the keys of rocketpy.capture.decoder.Stats) ------------------------------- */
enum {
    ST_NON_IP, ST_TRUNCATED_HEADERS, ST_NON_TCP, ST_IP_FRAGMENTS, ST_RETRANSMITTED, ST_GAPS,
    ST_GAP_BYTES, ST_SNAPLEN_CUT, ST_SKIPPED, ST_RESYNCS, ST_DAMAGED, ST_CONNECTIONS,
    ST_RMQ_CONNECTIONS, ST_TRUNCATED_RECORDS, ST_PACKETS, ST_CAPTURED_BYTES, ST_READAHEAD_EXHAUSTED,
    ST_UNPLANNED, ST_EVICTED, ST_COUNT
};
extern const char *const STAT_NAMES[ST_COUNT];

typedef struct {
    int64_t v[ST_COUNT];
    int unanswered_touched;
    int64_t *unanswered;       /* pairs (code, count), in the order the codes came */
    size_t n_unanswered, cap_unanswered;
    uint32_t *uidx;            /* code -> 1 + pair (codes are a stranger's: any int32) */
    size_t cap_uidx;
} stats_t;

int stats_unanswered(stats_t *st, int32_t code);
void stats_free(stats_t *st);

/* ---- a TCP segment (rocketpy.capture.layers.Segment) --------------------------------------- */
enum { TH_FIN = 0x01, TH_SYN = 0x02, TH_RST = 0x04, TH_ACK = 0x10 };

typedef struct {
    uint8_t src[16], dst[16];
    uint8_t alen;              /* 4 or 16 */
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    const uint8_t *payload;
    uint32_t plen;
    uint32_t missing;
} segment_t;

/* 1 = a TCP segment in *seg, 0 = something else (counted) */
int decode_tcp(uint32_t linktype, const uint8_t *data, size_t n, segment_t *seg, stats_t *st);
/* "1.2.3.4:9876" / "[::1]:9876" into out (>= 64 bytes); returns the length */
int format_endpoint(const uint8_t *addr, int alen, uint16_t port, char *out);

/* ---- the capture-file record walker -------------------------------------------------------- */
typedef struct {
    uint32_t linktype, snaplen;
    unsigned __int128 ticks_per_sec;   /* saturated: anything past 2**100 reads as 0 ns */
    int64_t ts_offset_s;
} iface_t;

typedef struct {
    int kind;                  /* 0 pcap, 1 pcapng */
    int be;                    /* byte order of the current section */
    uint32_t linktype, snaplen, extra;
    uint64_t ticks_per_sec;    /* pcap */
    iface_t *ifaces;
    size_t n_ifaces, cap_ifaces;
    int64_t offset;            /* file offset of carry[0] */
    int64_t end;               /* packets whose record starts at or after this are not ours (-1: none) */
    buf_t carry;               /* an incomplete record kept between feeds */
} walker_t;

typedef struct {
    int64_t ts_ns;
    uint32_t linktype, caplen, origlen;
    const uint8_t *data;
    int64_t offset;
} packet_t;

/* per packet: 0 go on, 1 stop feeding (the consumer wants no more), -1 Python error set */
typedef int (*packet_fn)(void *ctx, const packet_t *pkt);

void walker_free(walker_t *w);
int walker_add_iface(walker_t *w, uint32_t linktype, uint32_t snaplen,
                     unsigned __int128 tps, int64_t ts_offset_s);
/* walks the whole records in carry + data; 0 = want more, 1 = stopped, -1 = error (set) */
int walker_feed(walker_t *w, const uint8_t *data, size_t n, packet_fn fn, void *ctx);
/* walker_feed on a bytes-like object, without the GIL, its owner marked *busy meanwhile: True
 * (go on), False (stopped), NULL (error) */
PyObject *walker_feed_py(walker_t *w, int *busy, PyObject *data, packet_fn fn, void *ctx);
/* the bytes left over at the end of the file: 1 when they are a truncated record of ours */
int walker_truncated(walker_t *w);
extern PyObject *CaptureFormatError;

/* ---- strings produced for rows ------------------------------------------------------------ */
/* (str_t, kv_t: the header kernel's) */

/* ---- a decoded header -------------------------------------------------------------------- */
typedef struct {
    rk_header_t k;             /* the fields, as the header kernel reads them */
    str_t language;            /* the column's text */
    buf_t text;                /* strings the codec's fallback answered live here */
} header_t;

void header_reset(header_t *h);
void header_free(header_t *h);
/* 1 decoded, 0 not a header (err set to the codec's message when want_error), -1 Python error */
int decode_header(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                  str_t *err, buf_t *errbuf);

/* ---- the output columns (rocketpy.capture.schema.SCHEMA) -----------------------------------
 * Their order and types are the schema's, handed over at configure time; the core knows each
 * column's value by its name (the field table in columns.c) and refuses a schema column it has
 * no value for, or whose type is not its value's. */
#define MAX_COLUMNS 64
enum { C_STR, C_F64, C_I64, C_I32, C_BOOL, C_MAP };
enum {
    F_FILE, F_TS, F_TS_NS, F_SRC, F_DST, F_CONN, F_STREAM_OFFSET, F_FRAME_LEN, F_SERIALIZE_TYPE,
    F_CODE, F_CODE_NAME, F_FLAG, F_OPAQUE, F_IS_RESPONSE, F_IS_ONEWAY, F_LANGUAGE, F_VERSION,
    F_VERSION_NAME, F_REMARK, F_EXT_FIELDS, F_BODY_LEN, F_BODY_SUMMARY, F_REQUEST_CODE,
    F_REQUEST_CODE_NAME, F_LATENCY_MS, F_ERROR, F_COUNT
};
typedef struct { int field, kind; } column_t;
/* the field a column named `name` (n bytes) holds, and its kind: 0, or -1 (no such field) */
int column_field(const char *name, size_t n, int *field, int *kind);
/* the kind of a schema's DDL type ("string", "int", ...): 0, or -1 (a type the core has not) */
int column_kind(const char *ddl, int *kind);

/* ---- tables handed over from Python (rocketpy.capture.schema, rocketpy.remoting.codes) ---- */
#define DIRECT_NAMES 4096      /* names of 0..4095 are looked up by index (every row has two) */
typedef struct {
    int64_t *values;           /* sorted */
    str_t *names;
    size_t n;
    str_t direct[DIRECT_NAMES];
} name_table_t;
str_t table_name(const name_table_t *t, int64_t v);
/* where x is, or would go, in the sorted v[0:n] */
size_t sorted_at(const int64_t *v, size_t n, int64_t x);
/* the buffers of the first n items of a tuple (None: have[j] 0): 0, or -1 (set; those got are
 * the caller's to release) */
int buffers_of(PyObject *spec, int n, Py_buffer *b, int *have);

typedef struct {
    column_t columns[MAX_COLUMNS];    /* in output order */
    int n_columns;
    int at[F_COUNT];                  /* field -> its column, -1: the schema has none */
    PyObject *column_names;           /* list of str, in that order */
    name_table_t request, response, version, language, serialize;
    int32_t flag_response, flag_oneway;   /* the flag bits of is_response, is_oneway */
    int32_t registration;             /* REGISTER_BROKER: its body summary names the broker */
    PyObject *language_by_name;       /* dict name -> value */
    PyObject *header_fallback;        /* (stype, bytes) -> (True, fields) | (False, message) */
    PyObject *summary;                /* (broker, cluster, registration, body) -> str | None */
    PyObject *summary_markers;        /* () -> the keys a body needs for a summary (first use) */
} config_t;
extern config_t CFG;

static inline int is_response(int32_t flag) { return (flag & CFG.flag_response) != 0; }
static inline int is_oneway(int32_t flag) { return (flag & CFG.flag_oneway) && !is_response(flag); }

typedef struct {
    str_t file, src, dst, conn;
    int64_t ts_ns, stream_offset;
    int32_t frame_len;
    str_t serialize_type;
    int has_header;
    int32_t code, flag, opaque, version;
    str_t code_name, language, version_name, remark;
    int has_ext;
    kv_t *ext;
    size_t n_ext;
    int has_body_len;
    int32_t body_len;
    str_t body_summary;
    int has_request;
    int32_t request_code;
    str_t request_code_name;
    double latency_ms;
    str_t error;
} row_t;

typedef struct {
    buf_t valid[MAX_COLUMNS];
    buf_t data[MAX_COLUMNS];    /* values, or int32 offsets for strings and the map */
    buf_t chars[MAX_COLUMNS];   /* string bytes */
    buf_t map_key_off, map_key_chars, map_val_off, map_val_chars;
    int64_t nulls[MAX_COLUMNS];
    int64_t rows, entries;
    int64_t room;               /* rows the fixed-width buffers have room for */
    int big;                    /* a string buffer passed 1 GiB: the batch ends */
} columns_t;

int columns_append(columns_t *c, const row_t *r);
PyObject *columns_take(columns_t *c);       /* (rows, [column buffers]) and resets */
/* a row's field as a Python value (a byte range's edges hand rows over as dicts) */
PyObject *field_value(const row_t *r, int field);
extern PyTypeObject ChunkType;
void columns_free(columns_t *c);

/* ---- body summaries (rocketpy.capture.rows.body_summary, through the codec) ----------------- */
typedef struct summary_cache_s summary_cache_t;
summary_cache_t *summary_cache_new(void);
void summary_cache_free(summary_cache_t *c);
/* 0 ok (*out set, possibly null), -1 Python error */
int body_summary(summary_cache_t *c, str_t broker, str_t cluster, int registration,
                 const uint8_t *body, size_t n, str_t *out);

/* ---- JSON text of values (the CLI's --format json, ext_fields in CSV) ----------------------- */
int json_string(buf_t *out, const char *p, size_t n);
PyObject *native_jsonl(PyObject *self, PyObject *args);
PyObject *native_ext_json(PyObject *self, PyObject *args);

#endif
