/* The output table's columns (rocketpy.capture.rows.SCHEMA) as Arrow buffers: validity bitmaps,
 * values, int32 offsets and UTF-8 bytes.  columns_take hands the buffers themselves to Python (Chunk);
 * rocketpy.capture.engine wraps them with pyarrow.Array.from_buffers (no copy, no object per row). */
#include "core.h"

const int COLUMN_KIND[N_COLUMNS] = {
    C_STR, C_F64, C_I64, C_STR, C_STR, C_STR, C_I64, C_I32, C_STR, C_I32, C_STR, C_I32, C_I32,
    C_BOOL, C_BOOL, C_STR, C_I32, C_STR, C_STR, C_MAP, C_I32, C_STR, C_I32, C_STR, C_F64, C_STR,
};

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
 * row's numbers, offsets and validity bits are stored without a check each */

#define BIG_CHARS (1u << 30)   /* a batch ends before an int32 offset could overflow */

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
    switch (COLUMN_KIND[col]) {
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
    for (int col = 0; col < N_COLUMNS; col++) {
        size_t w = width(col);
        if (buf_reserve(&c->valid[col], rows / 8 + 2) < 0
            || buf_reserve(&c->data[col], w ? (rows + 1) * w : rows / 8 + 2) < 0)
            return -1;
        if ((COLUMN_KIND[col] == C_STR || COLUMN_KIND[col] == C_MAP) && offsets_start(&c->data[col]) < 0)
            return -1;
    }
    if (offsets_start(&c->map_key_off) < 0 || offsets_start(&c->map_val_off) < 0)
        return -1;
    c->room = c->rows + more;
    return 0;
}

static inline int str_(columns_t *c, int col, str_t s) {
    bit(&c->valid[col], c->rows, s.p != NULL);
    if (!s.p)
        c->nulls[col]++;
    else if (s.n && buf_append(&c->chars[col], s.p, (size_t)s.n) < 0)
        return -1;
    int32_t end = (int32_t)buf_len(&c->chars[col]);
    fixed(&c->data[col], &end, 4);
    c->big |= buf_len(&c->chars[col]) > BIG_CHARS;
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

static int entry(buf_t *off, buf_t *chars, str_t s) {
    if (buf_reserve(off, 4) < 0 || (s.n && buf_append(chars, s.p, (size_t)s.n) < 0))
        return -1;
    int32_t end = (int32_t)buf_len(chars);
    fixed(off, &end, 4);
    return 0;
}

/* after a failure part-way (out of memory): the batch is dropped, the columns start empty */
static void columns_reset(columns_t *c) {
    columns_free(c);
    memset(c, 0, sizeof *c);
}

int columns_append(columns_t *c, const row_t *r) {
    if (c->rows >= c->room && make_room(c, c->rows > 1024 ? c->rows : 1024) < 0)
        return -1;
    int h = r->has_header, ok = 0;
    ok |= str_(c, 0, r->file);
    f64_(c, 1, 1, (double)r->ts_ns / 1e9);
    i64_(c, 2, r->ts_ns);
    ok |= str_(c, 3, r->src);
    ok |= str_(c, 4, r->dst);
    ok |= str_(c, 5, r->conn);
    i64_(c, 6, r->stream_offset);
    i32_(c, 7, 1, r->frame_len);
    ok |= str_(c, 8, r->serialize_type);
    i32_(c, 9, h, r->code);
    ok |= str_(c, 10, r->code_name);
    i32_(c, 11, h, r->flag);
    i32_(c, 12, h, r->opaque);
    bool_(c, 13, h, r->flag & 1);
    bool_(c, 14, h, (r->flag & 2) && !(r->flag & 1));
    ok |= str_(c, 15, r->language);
    i32_(c, 16, h, r->version);
    ok |= str_(c, 17, r->version_name);
    ok |= str_(c, 18, r->remark);
    /* ext_fields: map<string,string> = offsets into struct<key,value> entries */
    bit(&c->valid[19], c->rows, r->has_ext);
    c->nulls[19] += !r->has_ext;
    if (r->has_ext)
        for (size_t i = 0; i < r->n_ext; i++) {
            ok |= entry(&c->map_key_off, &c->map_key_chars, r->ext[i].key);
            ok |= entry(&c->map_val_off, &c->map_val_chars, r->ext[i].value);
            c->entries++;
        }
    c->big |= buf_len(&c->map_key_chars) > BIG_CHARS || buf_len(&c->map_val_chars) > BIG_CHARS;
    int32_t entries = (int32_t)c->entries;
    fixed(&c->data[19], &entries, 4);
    i32_(c, 20, r->has_body_len, r->body_len);
    ok |= str_(c, 21, r->body_summary);
    i32_(c, 22, r->has_request, r->request_code);
    ok |= str_(c, 23, r->request_code_name);
    f64_(c, 24, r->has_request, r->latency_ms);
    ok |= str_(c, 25, r->error);
    c->rows++;
    if (ok)
        columns_reset(c);
    return ok ? -1 : 0;
}

static PyObject *validity(columns_t *c, int col) {
    if (!c->nulls[col])
        Py_RETURN_NONE;
    return chunk_of(&c->valid[col]);
}

PyObject *columns_take(columns_t *c) {
    PyObject *cols = PyList_New(N_COLUMNS);
    int ready = cols && offsets_start(&c->map_key_off) == 0 && offsets_start(&c->map_val_off) == 0;
    for (int col = 0; ready && col < N_COLUMNS; col++)
        ready = (COLUMN_KIND[col] != C_STR && COLUMN_KIND[col] != C_MAP) || offsets_start(&c->data[col]) == 0;
    if (!ready) {
        Py_XDECREF(cols);
        columns_reset(c);
        return NULL;
    }
    for (int col = 0; col < N_COLUMNS; col++) {
        PyObject *item;
        if (COLUMN_KIND[col] == C_MAP) {
            item = Py_BuildValue("(NNNNNNL)", validity(c, col), chunk_of(&c->data[col]),
                                 chunk_of(&c->map_key_off), chunk_of(&c->map_key_chars),
                                 chunk_of(&c->map_val_off), chunk_of(&c->map_val_chars),
                                 (long long)c->entries);
        } else if (COLUMN_KIND[col] == C_STR) {
            item = Py_BuildValue("(NNNL)", validity(c, col), chunk_of(&c->data[col]),
                                 chunk_of(&c->chars[col]), (long long)c->nulls[col]);
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
    PyObject *res = Py_BuildValue("(LN)", (long long)c->rows, cols);
    for (int col = 0; col < N_COLUMNS; col++) {
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
    return res;
}

void columns_free(columns_t *c) {
    for (int col = 0; col < N_COLUMNS; col++) {
        buf_free(&c->valid[col]);
        buf_free(&c->data[col]);
        buf_free(&c->chars[col]);
    }
    buf_free(&c->map_key_off);
    buf_free(&c->map_key_chars);
    buf_free(&c->map_val_off);
    buf_free(&c->map_val_chars);
}
