/* The output table's columns (rocketpy.capture.rows.SCHEMA) as Arrow buffers: validity bitmaps,
 * values, int32 offsets and UTF-8 bytes.  columns_take hands them to Python as bytes objects;
 * rocketpy.capture.engine wraps them with pyarrow.Array.from_buffers (no copy, no object per row). */
#include "core.h"

const int COLUMN_KIND[N_COLUMNS] = {
    C_STR, C_F64, C_I64, C_STR, C_STR, C_STR, C_I64, C_I32, C_STR, C_I32, C_STR, C_I32, C_I32,
    C_BOOL, C_BOOL, C_STR, C_I32, C_STR, C_STR, C_MAP, C_I32, C_STR, C_I32, C_STR, C_F64, C_STR,
};

static int bit(buf_t *b, int64_t i, int v) {
    if ((i & 7) == 0) {
        uint8_t z = 0;
        if (buf_append(b, &z, 1) < 0)
            return -1;
    }
    if (v)
        b->p[b->end - 1] |= (uint8_t)(1u << (i & 7));
    return 0;
}

static int offsets_start(buf_t *off) {
    if (buf_len(off))
        return 0;
    int32_t z = 0;
    return buf_append(off, &z, 4);
}

static int add_str(buf_t *off, buf_t *chars, const char *p, size_t n) {
    if (offsets_start(off) < 0 || buf_append(chars, p, n) < 0)
        return -1;
    int32_t end = (int32_t)buf_len(chars);
    return buf_append(off, &end, 4);
}

static int put(columns_t *c, int col, int valid, const void *value) {
    int64_t i = c->rows;
    if (bit(&c->valid[col], i, valid) < 0)
        return -1;
    if (!valid)
        c->nulls[col]++;
    switch (COLUMN_KIND[col]) {
    case C_STR: {
        const str_t *s = value;
        return add_str(&c->data[col], &c->chars[col], valid ? s->p : "", valid ? (size_t)s->n : 0);
    }
    case C_F64: {
        double d = valid ? *(const double *)value : 0;
        return buf_append(&c->data[col], &d, 8);
    }
    case C_I64: {
        int64_t v = valid ? *(const int64_t *)value : 0;
        return buf_append(&c->data[col], &v, 8);
    }
    case C_I32: {
        int32_t v = valid ? *(const int32_t *)value : 0;
        return buf_append(&c->data[col], &v, 4);
    }
    case C_BOOL:
        return bit(&c->data[col], i, valid && *(const int *)value);
    }
    return 0;
}

static int put_str(columns_t *c, int col, str_t s) { return put(c, col, s.p != NULL, &s); }

int columns_append(columns_t *c, const row_t *r) {
    double ts = (double)r->ts_ns / 1e9;
    int h = r->has_header, ok = 0;
    int resp = h && (r->flag & 1), oneway = h && (r->flag & 2) && !(r->flag & 1);
    ok |= put_str(c, 0, r->file);
    ok |= put(c, 1, 1, &ts);
    ok |= put(c, 2, 1, &r->ts_ns);
    ok |= put_str(c, 3, r->src);
    ok |= put_str(c, 4, r->dst);
    ok |= put_str(c, 5, r->conn);
    ok |= put(c, 6, 1, &r->stream_offset);
    ok |= put(c, 7, 1, &r->frame_len);
    ok |= put_str(c, 8, r->serialize_type);
    ok |= put(c, 9, h, &r->code);
    ok |= put_str(c, 10, r->code_name);
    ok |= put(c, 11, h, &r->flag);
    ok |= put(c, 12, h, &r->opaque);
    ok |= put(c, 13, h, &resp);
    ok |= put(c, 14, h, &oneway);
    ok |= put_str(c, 15, r->language);
    ok |= put(c, 16, h, &r->version);
    ok |= put_str(c, 17, r->version_name);
    ok |= put_str(c, 18, r->remark);
    /* ext_fields: map<string,string> = offsets into struct<key,value> entries */
    ok |= bit(&c->valid[19], c->rows, r->has_ext);
    if (!r->has_ext)
        c->nulls[19]++;
    ok |= offsets_start(&c->data[19]);
    if (r->has_ext)
        for (size_t i = 0; i < r->n_ext; i++) {
            ok |= add_str(&c->map_key_off, &c->map_key_chars, r->ext[i].key.p, (size_t)r->ext[i].key.n);
            ok |= add_str(&c->map_val_off, &c->map_val_chars, r->ext[i].value.p, (size_t)r->ext[i].value.n);
            c->entries++;
        }
    int32_t entries = (int32_t)c->entries;
    ok |= buf_append(&c->data[19], &entries, 4);
    ok |= put(c, 20, r->has_body_len, &r->body_len);
    ok |= put_str(c, 21, r->body_summary);
    ok |= put(c, 22, r->has_request, &r->request_code);
    ok |= put_str(c, 23, r->request_code_name);
    ok |= put(c, 24, r->has_request, &r->latency_ms);
    ok |= put_str(c, 25, r->error);
    c->rows++;
    return ok ? -1 : 0;
}

static PyObject *bytes_of(buf_t *b) {
    return PyBytes_FromStringAndSize((const char *)buf_data(b), (Py_ssize_t)buf_len(b));
}

static PyObject *validity(columns_t *c, int col) {
    if (!c->nulls[col])
        Py_RETURN_NONE;
    return bytes_of(&c->valid[col]);
}

PyObject *columns_take(columns_t *c) {
    PyObject *cols = PyList_New(N_COLUMNS);
    if (!cols)
        return NULL;
    for (int col = 0; col < N_COLUMNS; col++) {
        PyObject *item;
        if (COLUMN_KIND[col] == C_MAP) {
            offsets_start(&c->map_key_off);
            offsets_start(&c->map_val_off);
            offsets_start(&c->data[col]);
            item = Py_BuildValue("(NNNNNNL)", validity(c, col), bytes_of(&c->data[col]),
                                 bytes_of(&c->map_key_off), bytes_of(&c->map_key_chars),
                                 bytes_of(&c->map_val_off), bytes_of(&c->map_val_chars),
                                 (long long)c->entries);
        } else if (COLUMN_KIND[col] == C_STR) {
            offsets_start(&c->data[col]);
            item = Py_BuildValue("(NNNL)", validity(c, col), bytes_of(&c->data[col]),
                                 bytes_of(&c->chars[col]), (long long)c->nulls[col]);
        } else {
            item = Py_BuildValue("(NNOL)", validity(c, col), bytes_of(&c->data[col]), Py_None,
                                 (long long)c->nulls[col]);
        }
        if (!item) {
            Py_DECREF(cols);
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
    c->rows = c->entries = 0;
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
