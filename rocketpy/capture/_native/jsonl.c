/* JSON text of record batches: the CLI's --format json writes one object per frame exactly as
 * json.dumps(row, ensure_ascii=False) would (same separators, float repr, escapes); a test
 * compares the two on every fixture.  Also the ext_fields map as JSON text per row (CSV).
 *
 * Columns arrive as in columns_take: per column (validity | None, values or offsets, chars |
 * None, offset); the map (validity | None, offsets, key offsets, key chars, value offsets, value
 * chars, offset). */
#include "core.h"

int json_string(buf_t *out, const char *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (buf_reserve(out, n * 6 + 2) < 0)
        return -1;
    uint8_t *o = out->p + out->end;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = (uint8_t)hex[c >> 4];
            *o++ = (uint8_t)hex[c & 15];
        }
    }
    *o++ = '"';
    out->end = (size_t)(o - out->p);
    return 0;
}

typedef struct {
    Py_buffer b[7];
    int have[7];
    int64_t offset;
} col_t;

static void release(col_t *cols, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 7; j++)
            if (cols[i].have[j])
                PyBuffer_Release(&cols[i].b[j]);
}

static int grab(PyObject *spec, col_t *c, int nbuf) {
    memset(c, 0, sizeof *c);
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != nbuf + 1) {
        PyErr_SetString(PyExc_ValueError, "jsonl: bad column");
        return -1;
    }
    if (buffers_of(spec, nbuf, c->b, c->have) < 0)
        return -1;
    c->offset = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, nbuf));
    return PyErr_Occurred() ? -1 : 0;
}

static inline int valid_at(const col_t *c, int64_t i) {
    if (!c->have[0])
        return 1;
    int64_t k = c->offset + i;
    return (((const uint8_t *)c->b[0].buf)[k >> 3] >> (k & 7)) & 1;
}

static inline int32_t off_at(const Py_buffer *b, int64_t i) { return ((const int32_t *)b->buf)[i]; }

static int put(buf_t *o, const char *s, size_t n) { return buf_append(o, s, n); }

static int string_at(buf_t *o, const Py_buffer *offs, const Py_buffer *chars, int64_t i) {
    int32_t a = off_at(offs, i), b = off_at(offs, i + 1);
    if (a < 0 || b < a || (Py_ssize_t)b > chars->len || (Py_ssize_t)((i + 2) * 4) > offs->len) {
        PyErr_SetString(PyExc_ValueError, "jsonl: bad string offsets");
        return -1;
    }
    return json_string(o, (const char *)chars->buf + a, (size_t)(b - a));
}

/* the map column's row i as a JSON object */
static int map_at(buf_t *o, const col_t *c, int64_t i) {
    int64_t k = c->offset + i;
    int32_t a = off_at(&c->b[1], k), b = off_at(&c->b[1], k + 1);
    if (put(o, "{", 1) < 0)
        return -1;
    for (int32_t e = a; e < b; e++) {
        if ((e > a && put(o, ", ", 2) < 0) || string_at(o, &c->b[2], &c->b[3], e) < 0 || put(o, ": ", 2) < 0
            || string_at(o, &c->b[4], &c->b[5], e) < 0)
            return -1;
    }
    return put(o, "}", 1);
}

/* the decimal text of v, as "%lld" writes it (sprintf cost a fifth of the JSON writer) */
static int put_int(buf_t *o, int64_t v) {
    char digits[24], *p = digits + sizeof digits;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    return put(o, p, (size_t)(digits + sizeof digits - p));
}

static const int WIDTH[] = {[C_STR] = 4, [C_F64] = 8, [C_I64] = 8, [C_I32] = 4, [C_BOOL] = 0, [C_MAP] = 4};

static int value_at(buf_t *o, int kind, const col_t *c, int64_t i) {
    int64_t k = c->offset + i;
    int64_t need = kind == C_BOOL ? (k >> 3) + 1 : (k + 1 + (kind == C_STR || kind == C_MAP)) * WIDTH[kind];
    if (!c->have[1] || need > c->b[1].len || (c->have[0] && (k >> 3) >= c->b[0].len)) {
        PyErr_SetString(PyExc_ValueError, "jsonl: a column is shorter than the batch");
        return -1;
    }
    if (!valid_at(c, i))
        return put(o, "null", 4);
    switch (kind) {
    case C_STR:
        return string_at(o, &c->b[1], &c->b[2], k);
    case C_I64:
        return put_int(o, ((const int64_t *)c->b[1].buf)[k]);
    case C_I32:
        return put_int(o, ((const int32_t *)c->b[1].buf)[k]);
    case C_BOOL:
        return (((const uint8_t *)c->b[1].buf)[k >> 3] >> (k & 7)) & 1 ? put(o, "true", 4) : put(o, "false", 5);
    case C_F64: {
        double v = ((const double *)c->b[1].buf)[k];
        if (v != v)
            return put(o, "NaN", 3);
        if (v == 1.0 / 0.0 || v == -1.0 / 0.0)
            return v > 0 ? put(o, "Infinity", 8) : put(o, "-Infinity", 9);
        char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!s)
            return -1;
        int r = put(o, s, strlen(s));
        PyMem_Free(s);
        return r;
    }
    case C_MAP:
        return map_at(o, c, i);
    }
    return 0;
}

/* jsonl(rows, columns) -> bytes: one JSON object per row, each ending with "\n" */
PyObject *native_jsonl(PyObject *self, PyObject *args) {
    long long rows;
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "LO!", &rows, &PyList_Type, &specs))
        return NULL;
    int n = CFG.n_columns;
    if (!CFG.column_names || PyList_GET_SIZE(specs) != n) {
        PyErr_SetString(PyExc_ValueError, "jsonl: the schema's columns, after configure()");
        return NULL;
    }
    col_t cols[MAX_COLUMNS];
    buf_t keys[MAX_COLUMNS];
    memset(keys, 0, sizeof keys);
    int ready = 0, ok = 1;
    for (; ready < n && ok; ready++) {
        ok = grab(PyList_GET_ITEM(specs, ready), &cols[ready], CFG.columns[ready].kind == C_MAP ? 6 : 3) == 0;
        if (!ok)
            continue;
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(CFG.column_names, ready), &len);
        ok = name && put(&keys[ready], ready ? ", " : "{", ready ? 2 : 1) == 0
             && json_string(&keys[ready], name, (size_t)len) == 0 && put(&keys[ready], ": ", 2) == 0;
    }
    buf_t out = {0};
    for (int64_t i = 0; ok && i < rows; i++) {
        for (int c = 0; ok && c < n; c++)
            ok = put(&out, (const char *)keys[c].p, buf_len(&keys[c])) == 0
                 && value_at(&out, CFG.columns[c].kind, &cols[c], i) == 0;
        ok = ok && put(&out, "}\n", 2) == 0;
    }
    release(cols, ready);
    for (int c = 0; c < n; c++)
        buf_free(&keys[c]);
    PyObject *res = ok ? PyBytes_FromStringAndSize((const char *)out.p, (Py_ssize_t)buf_len(&out)) : NULL;
    buf_free(&out);
    return res;
}

/* ext_json(rows, map column) -> (validity | None, offsets, chars): the JSON text of each map */
PyObject *native_ext_json(PyObject *self, PyObject *args) {
    long long rows;
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "LO", &rows, &spec))
        return NULL;
    col_t c;
    if (grab(spec, &c, 6) < 0) {
        release(&c, 1);
        return NULL;
    }
    buf_t offs = {0}, chars = {0};
    int32_t zero = 0;
    int ok = put(&offs, (const char *)&zero, 4) == 0;
    for (int64_t i = 0; ok && i < rows; i++) {
        if (valid_at(&c, i))
            ok = map_at(&chars, &c, i) == 0;
        int32_t end = (int32_t)buf_len(&chars);
        ok = ok && put(&offs, (const char *)&end, 4) == 0;
    }
    PyObject *validity = Py_None;
    Py_INCREF(validity);
    if (ok && c.have[0]) {
        /* the same validity bits, from bit 0 */
        buf_t v = {0};
        for (int64_t i = 0; ok && i < rows; i++) {
            if ((i & 7) == 0) {
                uint8_t z = 0;
                ok = put(&v, (const char *)&z, 1) == 0;
            }
            if (ok && valid_at(&c, i))
                v.p[v.end - 1] |= (uint8_t)(1u << (i & 7));
        }
        Py_DECREF(validity);
        validity = ok ? PyBytes_FromStringAndSize((const char *)v.p, (Py_ssize_t)buf_len(&v)) : NULL;
        buf_free(&v);
    }
    release(&c, 1);
    PyObject *res = ok && validity ? Py_BuildValue("(ONN)", validity,
        PyBytes_FromStringAndSize((const char *)offs.p, (Py_ssize_t)buf_len(&offs)),
        PyBytes_FromStringAndSize((const char *)chars.p, (Py_ssize_t)buf_len(&chars))) : NULL;
    Py_XDECREF(validity);
    buf_free(&offs);
    buf_free(&chars);
    return res;
}
