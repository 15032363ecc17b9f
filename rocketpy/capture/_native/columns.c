/* The output table's columns (rocketpy.capture.rows.SCHEMA) as Arrow buffers: validity bitmaps,
 * values, int32 offsets and UTF-8 bytes.  columns_take hands the buffers themselves to Python (Chunk);
 * rocketpy.capture.engine wraps them with pyarrow.Array.from_buffers (no copy, no object per row). */
#include "core.h"

/* ---- the values a column can hold, by the column's name in the schema, and their kinds ------ */

static const struct { const char *name; int kind; } FIELDS[F_COUNT] = {
    [F_FILE] = {"file", C_STR}, [F_TS] = {"ts", C_F64}, [F_TS_NS] = {"ts_ns", C_I64},
    [F_SRC] = {"src", C_STR}, [F_DST] = {"dst", C_STR}, [F_CONN] = {"conn", C_STR},
    [F_STREAM_OFFSET] = {"stream_offset", C_I64}, [F_FRAME_LEN] = {"frame_len", C_I32},
    [F_SERIALIZE_TYPE] = {"serialize_type", C_STR}, [F_CODE] = {"code", C_I32},
    [F_CODE_NAME] = {"code_name", C_STR}, [F_FLAG] = {"flag", C_I32}, [F_OPAQUE] = {"opaque", C_I32},
    [F_IS_RESPONSE] = {"is_response", C_BOOL}, [F_IS_ONEWAY] = {"is_oneway", C_BOOL},
    [F_LANGUAGE] = {"language", C_STR}, [F_VERSION] = {"version", C_I32},
    [F_VERSION_NAME] = {"version_name", C_STR}, [F_REMARK] = {"remark", C_STR},
    [F_EXT_FIELDS] = {"ext_fields", C_MAP}, [F_BODY_LEN] = {"body_len", C_I32},
    [F_BODY_SUMMARY] = {"body_summary", C_STR}, [F_REQUEST_CODE] = {"request_code", C_I32},
    [F_REQUEST_CODE_NAME] = {"request_code_name", C_STR}, [F_LATENCY_MS] = {"latency_ms", C_F64},
    [F_ERROR] = {"error", C_STR},
};

int column_field(const char *name, size_t n, int *field, int *kind) {
    for (int f = 0; f < F_COUNT; f++)
        if (strlen(FIELDS[f].name) == n && !memcmp(FIELDS[f].name, name, n)) {
            *field = f;
            *kind = FIELDS[f].kind;
            return 0;
        }
    return -1;
}

/* the Spark SQL DDL spelling of rocketpy.capture.schema.SCHEMA's types */
static const char *const KIND_DDL[] = {
    [C_STR] = "string", [C_F64] = "double", [C_I64] = "bigint", [C_I32] = "int",
    [C_BOOL] = "boolean", [C_MAP] = "map<string,string>",
};

int column_kind(const char *ddl, int *kind) {
    for (int k = 0; k <= C_MAP; k++)
        if (!strcmp(KIND_DDL[k], ddl)) {
            *kind = k;
            return 0;
        }
    return -1;
}

/* ---- a buffer handed to Python as it is: pyarrow wraps it (pa.py_buffer) without a copy ---- */
typedef struct {
    PyObject_HEAD
    uint8_t *p;
    Py_ssize_t n;
} Chunk;

static int Chunk_getbuffer(Chunk *self, Py_buffer *view, int flags) {
    static uint8_t empty[1];
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : empty, self->n, 1, flags);
}

static void Chunk_dealloc(Chunk *self) {
    PyMem_RawFree(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs Chunk_as_buffer = {(getbufferproc)Chunk_getbuffer, NULL};

PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketpy.capture._native.Chunk",
    .tp_basicsize = sizeof(Chunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Column bytes the compiled decoder filled (a read-only buffer).",
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_as_buffer = &Chunk_as_buffer,
};

/* the buffer's bytes as a Chunk; the buffer starts empty again */
static PyObject *chunk_of(buf_t *b) {
    Chunk *c = PyObject_New(Chunk, &ChunkType);
    if (!c)
        return NULL;
    if (b->start)
        memmove(b->p, b->p + b->start, buf_len(b));
    c->n = (Py_ssize_t)buf_len(b);
    c->p = b->p;
    b->p = NULL;
    b->start = b->end = b->cap = 0;
    return (PyObject *)c;
}

/* ---- appending rows: room for `room` rows in every fixed-width buffer is reserved ahead, so a
 * row's numbers, offsets and validity bits are stored without a check each; a batch starts with
 * the room (and string bytes) the last one needed, so its buffers are not grown and copied
 * while it fills */

#define BIG_CHARS (1u << 30)   /* a batch ends before an int32 offset could overflow */

static inline int kind_of(int col) { return CFG.columns[col].kind; }

static inline void bit(buf_t *b, int64_t i, int v) {
    if (!(i & 7))
        b->p[b->end++] = 0;
    if (v)
        b->p[b->end - 1] |= (uint8_t)(1u << (i & 7));
}

static inline void fixed(buf_t *b, const void *v, size_t w) {
    memcpy(b->p + b->end, v, w);
    b->end += w;
}

static size_t width(int col) {
    switch (kind_of(col)) {
    case C_F64: case C_I64: return 8;
    case C_BOOL: return 0;
    default: return 4;             /* int32 values, string and map offsets */
    }
}

static int offsets_start(buf_t *off) {
    if (buf_len(off))
        return 0;
    int32_t z = 0;
    return buf_append(off, &z, 4);
}

/* room for at least `more` further rows (and the offset buffers' leading zero) */
static int make_room(columns_t *c, int64_t more) {
    size_t rows = (size_t)more;
    for (int col = 0; col < CFG.n_columns; col++) {
        size_t w = width(col);
        if (buf_reserve(&c->valid[col], rows / 8 + 2) < 0
            || buf_reserve(&c->data[col], w ? (rows + 1) * w : rows / 8 + 2) < 0)
            return -1;
        if ((kind_of(col) == C_STR || kind_of(col) == C_MAP) && offsets_start(&c->data[col]) < 0)
            return -1;
    }
    if (offsets_start(&c->map_key_off) < 0 || offsets_start(&c->map_val_off) < 0)
        return -1;
    c->room = c->rows + more;
    return 0;
}

static inline int str_(columns_t *c, int col, str_t s) {
    bit(&c->valid[col], c->rows, s.p != NULL);
    buf_t *chars = &c->chars[col];
    size_t len = chars->end;                 /* (string buffers are never consumed: start 0) */
    if (!s.p) {
        c->nulls[col]++;
    } else if (s.n) {
        if (buf_reserve(chars, (size_t)s.n) < 0)
            return -1;
        memcpy(chars->p + len, s.p, (size_t)s.n);
        chars->end = len += (size_t)s.n;
        c->big |= len > BIG_CHARS;
    }
    int32_t end = (int32_t)len;
    fixed(&c->data[col], &end, 4);
    return 0;
}

static inline void i32_(columns_t *c, int col, int valid, int32_t v) {
    bit(&c->valid[col], c->rows, valid);
    c->nulls[col] += !valid;
    v = valid ? v : 0;
    fixed(&c->data[col], &v, 4);
}

static inline void i64_(columns_t *c, int col, int64_t v) {
    bit(&c->valid[col], c->rows, 1);
    fixed(&c->data[col], &v, 8);
}

static inline void f64_(columns_t *c, int col, int valid, double v) {
    bit(&c->valid[col], c->rows, valid);
    c->nulls[col] += !valid;
    v = valid ? v : 0;
    fixed(&c->data[col], &v, 8);
}

static inline void bool_(columns_t *c, int col, int valid, int v) {
    bit(&c->valid[col], c->rows, valid);
    c->nulls[col] += !valid;
    bit(&c->data[col], c->rows, valid && v);
}

static inline int entry(buf_t *off, buf_t *chars, str_t s) {
    if (buf_reserve(off, 4) < 0 || (s.n && buf_append(chars, s.p, (size_t)s.n) < 0))
        return -1;
    int32_t end = (int32_t)chars->end;       /* (start 0, as above) */
    fixed(off, &end, 4);
    return 0;
}

/* ext_fields: map<string,string> = offsets into struct<key,value> entries */
static int map_(columns_t *c, int col, const row_t *r) {
    int ok = 0;
    bit(&c->valid[col], c->rows, r->has_ext);
    c->nulls[col] += !r->has_ext;
    if (r->has_ext)
        for (size_t i = 0; i < r->n_ext; i++) {
            ok |= entry(&c->map_key_off, &c->map_key_chars, r->ext[i].key);
            ok |= entry(&c->map_val_off, &c->map_val_chars, r->ext[i].value);
            c->entries++;
        }
    c->big |= buf_len(&c->map_key_chars) > BIG_CHARS || buf_len(&c->map_val_chars) > BIG_CHARS;
    int32_t entries = (int32_t)c->entries;
    fixed(&c->data[col], &entries, 4);
    return ok;
}

/* after a failure part-way (out of memory): the batch is dropped, the columns start empty */
static void columns_reset(columns_t *c) {
    columns_free(c);
    memset(c, 0, sizeof *c);
}

/* the row's values into the columns the schema puts them in (CFG.at: -1 when it has none) */
int columns_append(columns_t *c, const row_t *r) {
    if (c->rows >= c->room && make_room(c, c->rows > 1024 ? c->rows : 1024) < 0)
        return -1;
    const int *at = CFG.at;
    int h = r->has_header, ok = 0, k;
#define COL(field) if ((k = at[field]) >= 0)
    COL(F_FILE) ok |= str_(c, k, r->file);
    COL(F_TS) f64_(c, k, 1, (double)r->ts_ns / 1e9);
    COL(F_TS_NS) i64_(c, k, r->ts_ns);
    COL(F_SRC) ok |= str_(c, k, r->src);
    COL(F_DST) ok |= str_(c, k, r->dst);
    COL(F_CONN) ok |= str_(c, k, r->conn);
    COL(F_STREAM_OFFSET) i64_(c, k, r->stream_offset);
    COL(F_FRAME_LEN) i32_(c, k, 1, r->frame_len);
    COL(F_SERIALIZE_TYPE) ok |= str_(c, k, r->serialize_type);
    COL(F_CODE) i32_(c, k, h, r->code);
    COL(F_CODE_NAME) ok |= str_(c, k, r->code_name);
    COL(F_FLAG) i32_(c, k, h, r->flag);
    COL(F_OPAQUE) i32_(c, k, h, r->opaque);
    COL(F_IS_RESPONSE) bool_(c, k, h, is_response(r->flag));
    COL(F_IS_ONEWAY) bool_(c, k, h, is_oneway(r->flag));
    COL(F_LANGUAGE) ok |= str_(c, k, r->language);
    COL(F_VERSION) i32_(c, k, h, r->version);
    COL(F_VERSION_NAME) ok |= str_(c, k, r->version_name);
    COL(F_REMARK) ok |= str_(c, k, r->remark);
    COL(F_EXT_FIELDS) ok |= map_(c, k, r);
    COL(F_BODY_LEN) i32_(c, k, r->has_body_len, r->body_len);
    COL(F_BODY_SUMMARY) ok |= str_(c, k, r->body_summary);
    COL(F_REQUEST_CODE) i32_(c, k, r->has_request, r->request_code);
    COL(F_REQUEST_CODE_NAME) ok |= str_(c, k, r->request_code_name);
    COL(F_LATENCY_MS) f64_(c, k, r->has_request, r->latency_ms);
    COL(F_ERROR) ok |= str_(c, k, r->error);
#undef COL
    c->rows++;
    if (ok)
        columns_reset(c);
    return ok ? -1 : 0;
}

static PyObject *text(str_t s) {
    if (!s.p)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.p, s.n, "replace");
}

static PyObject *ext_dict(const row_t *r) {
    if (!r->has_ext)
        Py_RETURN_NONE;
    PyObject *ext = PyDict_New();
    for (size_t i = 0; ext && i < r->n_ext; i++) {
        PyObject *k = text(r->ext[i].key), *v = text(r->ext[i].value);
        if (!k || !v || PyDict_SetItem(ext, k, v) < 0)
            Py_CLEAR(ext);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return ext;
}

#define INT_OR_NONE(c, v) ((c) ? PyLong_FromLongLong(v) : Py_NewRef(Py_None))
#define BOOL_OR_NONE(c, v) ((c) ? PyBool_FromLong(v) : Py_NewRef(Py_None))

PyObject *field_value(const row_t *r, int field) {
    int h = r->has_header;
    switch (field) {
    case F_FILE: return text(r->file);
    case F_TS: return PyFloat_FromDouble((double)r->ts_ns / 1e9);
    case F_TS_NS: return PyLong_FromLongLong(r->ts_ns);
    case F_SRC: return text(r->src);
    case F_DST: return text(r->dst);
    case F_CONN: return text(r->conn);
    case F_STREAM_OFFSET: return PyLong_FromLongLong(r->stream_offset);
    case F_FRAME_LEN: return PyLong_FromLong(r->frame_len);
    case F_SERIALIZE_TYPE: return text(r->serialize_type);
    case F_CODE: return INT_OR_NONE(h, r->code);
    case F_CODE_NAME: return text(r->code_name);
    case F_FLAG: return INT_OR_NONE(h, r->flag);
    case F_OPAQUE: return INT_OR_NONE(h, r->opaque);
    case F_IS_RESPONSE: return BOOL_OR_NONE(h, is_response(r->flag));
    case F_IS_ONEWAY: return BOOL_OR_NONE(h, is_oneway(r->flag));
    case F_LANGUAGE: return text(r->language);
    case F_VERSION: return INT_OR_NONE(h, r->version);
    case F_VERSION_NAME: return text(r->version_name);
    case F_REMARK: return text(r->remark);
    case F_EXT_FIELDS: return ext_dict(r);
    case F_BODY_LEN: return INT_OR_NONE(r->has_body_len, r->body_len);
    case F_BODY_SUMMARY: return text(r->body_summary);
    case F_REQUEST_CODE: return INT_OR_NONE(r->has_request, r->request_code);
    case F_REQUEST_CODE_NAME: return text(r->request_code_name);
    case F_LATENCY_MS: return r->has_request ? PyFloat_FromDouble(r->latency_ms) : Py_NewRef(Py_None);
    case F_ERROR: return text(r->error);
    }
    Py_RETURN_NONE;
}

#undef INT_OR_NONE
#undef BOOL_OR_NONE

static PyObject *validity(columns_t *c, int col) {
    if (!c->nulls[col])
        Py_RETURN_NONE;
    return chunk_of(&c->valid[col]);
}

/* the buffer handed over, and a fresh one with room for as many bytes (up to 64 MiB), so the
 * next batch's strings are not grown and copied while it fills */
static PyObject *chunk_again(buf_t *b) {
    size_t last = buf_len(b), want = last + last / 8;
    PyObject *chunk = chunk_of(b);
    if (chunk && last && buf_reserve(b, want < BIG_CHARS / 16 ? want : BIG_CHARS / 16) < 0)
        Py_CLEAR(chunk);
    return chunk;
}

PyObject *columns_take(columns_t *c) {
    int n = CFG.n_columns;
    PyObject *cols = PyList_New(n);
    int ready = cols && offsets_start(&c->map_key_off) == 0 && offsets_start(&c->map_val_off) == 0;
    for (int col = 0; ready && col < n; col++)
        ready = (kind_of(col) != C_STR && kind_of(col) != C_MAP) || offsets_start(&c->data[col]) == 0;
    if (!ready) {
        Py_XDECREF(cols);
        columns_reset(c);
        return NULL;
    }
    for (int col = 0; col < n; col++) {
        PyObject *item;
        if (kind_of(col) == C_MAP) {
            item = Py_BuildValue("(NNNNNNL)", validity(c, col), chunk_of(&c->data[col]),
                                 chunk_of(&c->map_key_off), chunk_again(&c->map_key_chars),
                                 chunk_of(&c->map_val_off), chunk_again(&c->map_val_chars),
                                 (long long)c->entries);
        } else if (kind_of(col) == C_STR) {
            item = Py_BuildValue("(NNNL)", validity(c, col), chunk_of(&c->data[col]),
                                 chunk_again(&c->chars[col]), (long long)c->nulls[col]);
        } else {
            item = Py_BuildValue("(NNOL)", validity(c, col), chunk_of(&c->data[col]), Py_None,
                                 (long long)c->nulls[col]);
        }
        if (!item) {
            Py_DECREF(cols);
            columns_reset(c);
            return NULL;
        }
        PyList_SET_ITEM(cols, col, item);
    }
    int64_t rows = c->rows, entries = c->entries;
    PyObject *res = Py_BuildValue("(LN)", (long long)rows, cols);
    for (int col = 0; col < n; col++) {
        buf_clear(&c->valid[col]);
        buf_clear(&c->data[col]);
        buf_clear(&c->chars[col]);
        c->nulls[col] = 0;
    }
    buf_clear(&c->map_key_off);
    buf_clear(&c->map_key_chars);
    buf_clear(&c->map_val_off);
    buf_clear(&c->map_val_chars);
    c->rows = c->entries = c->room = 0;
    c->big = 0;
    /* the next batch's room: as many rows and map entries as this one's */
    if (res && (make_room(c, rows > 1024 ? rows : 1024) < 0
                || buf_reserve(&c->map_key_off, (size_t)entries * 4 + 4) < 0
                || buf_reserve(&c->map_val_off, (size_t)entries * 4 + 4) < 0))
        Py_CLEAR(res);
    return res;
}

void columns_free(columns_t *c) {
    for (int col = 0; col < MAX_COLUMNS; col++) {
        buf_free(&c->valid[col]);
        buf_free(&c->data[col]);
        buf_free(&c->chars[col]);
    }
    buf_free(&c->map_key_off);
    buf_free(&c->map_key_chars);
    buf_free(&c->map_val_off);
    buf_free(&c->map_val_chars);
}
