/* The summary's counts (rocketpy.capture.summary.SummaryBuilder) from the compiled decoder's
 * batches: frames per request and response code, oneway requests, error responses per (request
 * code, response code), responses without their request, decode errors by kind, latencies per
 * request code, frames and bytes per sender, the first and last capture time.  It reads the
 * column buffers of take() (the columns the schema names, wherever configure put them), without
 * the GIL, so the CLI's summary needs neither pyarrow nor numpy; tests/test_capture_summary.py
 * holds its result to SummaryBuilder's on every fixture.  What it keeps grows as the
 * reference's does: a latency per answered request, a counter per distinct code, sender and
 * error kind (keyed hashes: a stranger cannot make the lookups long). */
#include "core.h"
#include "htab.h"
#include <math.h>

typedef struct { double *v; size_t n, cap; int has_code; int32_t code; } lat_t;
typedef struct { int64_t frames, bytes; size_t at, len; int has; } talker_t;   /* name in `names` */

typedef struct {
    PyObject_HEAD
    int busy;
    int64_t *not_errors;       /* response codes that are not errors, sorted */
    size_t n_not_errors;
    int64_t frames, unmatched;
    int has_ts;
    double first_ts, last_ts;
    htab_t counts;             /* (kind, code[, request code]) -> count */
    htab_t errors;             /* an error's text up to its first ':' -> count */
    htab_t talkers;            /* sender -> 1 + index into talker */
    talker_t *talker;
    size_t n_talker, cap_talker;
    buf_t names;               /* the senders' addresses */
    htab_t latency;            /* request code -> 1 + index into lat */
    lat_t *lat;
    size_t n_lat, cap_lat;
} Tally;

enum { K_REQUEST, K_ONEWAY, K_RESPONSE, K_ERROR_RESPONSE };

/* the columns a tally reads, by field */
static const int NEEDS[] = {F_TS, F_SRC, F_FRAME_LEN, F_CODE, F_IS_RESPONSE, F_IS_ONEWAY,
                            F_REQUEST_CODE, F_LATENCY_MS, F_ERROR};
#define N_NEEDS (int)(sizeof NEEDS / sizeof *NEEDS)

/* one column of a batch: its buffers, checked against the batch's rows */
typedef struct { Py_buffer b[3]; int have[3]; int kind; } tcol_t;

static void release(tcol_t *cols) {
    for (int i = 0; i < N_NEEDS; i++)
        for (int j = 0; j < 3; j++)
            if (cols[i].have[j])
                PyBuffer_Release(&cols[i].b[j]);
}

static int bad(const char *why) {
    PyErr_Format(PyExc_ValueError, "tally: %s", why);
    return -1;
}

/* a take() column (validity, values or offsets, chars | None, ...) for `rows` rows */
static int grab(PyObject *spec, tcol_t *c, int kind, int64_t rows) {
    c->kind = kind;
    if (buffers_of(spec, 3, c->b, c->have) < 0)
        return -1;
    Py_ssize_t width = kind == C_F64 ? 8 : kind == C_BOOL ? 0 : 4;
    Py_ssize_t need = kind == C_BOOL ? (rows + 7) / 8 : (rows + (kind == C_STR)) * width;
    if (!c->have[1] || c->b[1].len < need || (c->have[0] && c->b[0].len < (rows + 7) / 8))
        return bad("a column is shorter than the batch");
    if (kind == C_STR) {
        const int32_t *off = c->b[1].buf;
        Py_ssize_t chars = c->have[2] ? c->b[2].len : 0;
        for (int64_t i = 0; i < rows; i++)
            if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > chars)
                return bad("bad string offsets");
    }
    return 0;
}

static inline int valid(const tcol_t *c, int64_t i) {
    return !c->have[0] || (((const uint8_t *)c->b[0].buf)[i >> 3] >> (i & 7) & 1);
}
static inline int32_t i32_at(const tcol_t *c, int64_t i) { return ((const int32_t *)c->b[1].buf)[i]; }
static inline double f64_at(const tcol_t *c, int64_t i) { return ((const double *)c->b[1].buf)[i]; }
static inline int bit_at(const tcol_t *c, int64_t i) {
    return ((const uint8_t *)c->b[1].buf)[i >> 3] >> (i & 7) & 1;
}
static inline str_t str_at(const tcol_t *c, int64_t i) {
    const int32_t *off = c->b[1].buf;
    return str_of((const char *)c->b[2].buf + off[i], (size_t)(off[i + 1] - off[i]));
}

static int count(htab_t *t, const void *key, size_t n, int64_t k) {
    hent_t *e = htab_put(t, key, n);
    if (!e)
        return -1;
    e->value += k;
    return 0;
}

/* the key of (kind, code[, request code or none]) */
static size_t code_key(uint8_t *k, int kind, int32_t code, int has_rc, int32_t rc) {
    k[0] = (uint8_t)kind;
    memcpy(k + 1, &code, 4);
    if (kind != K_ERROR_RESPONSE)
        return 5;
    k[5] = (uint8_t)has_rc;
    memcpy(k + 6, has_rc ? &rc : &(int32_t){0}, 4);
    return 10;
}

static int not_error(const Tally *t, int32_t code) {
    size_t i = sorted_at(t->not_errors, t->n_not_errors, code);
    return i < t->n_not_errors && t->not_errors[i] == code;
}

static int talk(Tally *t, const tcol_t *src, const tcol_t *len, int64_t i) {
    uint8_t small[256], *key = small;
    str_t s = valid(src, i) ? str_at(src, i) : STR_NULL;
    size_t n = 1 + (size_t)s.n;          /* 1: a sender, 0: none (a group of its own) */
    if (n > sizeof small && !(key = PyMem_RawMalloc(n)))
        return no_memory();
    key[0] = s.p != NULL;
    if (s.n)
        memcpy(key + 1, s.p, (size_t)s.n);
    hent_t *e = htab_put(&t->talkers, key, n);
    if (key != small)
        PyMem_RawFree(key);
    if (!e)
        return -1;
    if (!e->value) {
        if (GROW(t->talker, t->cap_talker, t->n_talker, 64) < 0
            || buf_append(&t->names, s.p, (size_t)s.n) < 0)
            return -1;
        t->talker[t->n_talker] = (talker_t){0, 0, buf_len(&t->names) - (size_t)s.n, (size_t)s.n,
                                            s.p != NULL};
        e->value = (int64_t)++t->n_talker;
    }
    talker_t *tk = &t->talker[e->value - 1];
    tk->frames++;
    tk->bytes += valid(len, i) ? i32_at(len, i) : 0;
    return 0;
}

static int timed(Tally *t, int has_rc, int32_t rc, double ms) {
    uint8_t key[5] = {(uint8_t)has_rc};
    memcpy(key + 1, has_rc ? &rc : &(int32_t){0}, 4);
    hent_t *e = htab_put(&t->latency, key, sizeof key);
    if (!e)
        return -1;
    if (!e->value) {
        if (GROW(t->lat, t->cap_lat, t->n_lat, 16) < 0)
            return -1;
        t->lat[t->n_lat] = (lat_t){NULL, 0, 0, has_rc, rc};
        e->value = (int64_t)++t->n_lat;
    }
    lat_t *l = &t->lat[e->value - 1];
    if (GROW(l->v, l->cap, l->n, 64) < 0)
        return -1;
    l->v[l->n++] = ms;
    return 0;
}

/* SummaryBuilder._aggregate on one batch (cols: by NEEDS) */
static int add_rows(Tally *t, const tcol_t *cols, int64_t rows) {
    const tcol_t *ts = &cols[0], *src = &cols[1], *len = &cols[2], *code = &cols[3],
                 *resp = &cols[4], *oneway = &cols[5], *rc = &cols[6], *lat = &cols[7],
                 *err = &cols[8];
    uint8_t key[10];
    for (int64_t i = 0; i < rows; i++) {
        t->frames++;
        if (valid(ts, i)) {
            double v = f64_at(ts, i);
            if (!t->has_ts || v < t->first_ts)
                t->first_ts = v;
            if (!t->has_ts || v > t->last_ts)
                t->last_ts = v;
            t->has_ts = 1;
        }
        if (talk(t, src, len, i) < 0)
            return -1;
        if (valid(err, i)) {
            str_t e = str_at(err, i);
            const char *colon = memchr(e.p, ':', (size_t)e.n);
            if (count(&t->errors, e.p, colon ? (size_t)(colon - e.p) : (size_t)e.n, 1) < 0)
                return -1;
        }
        if (!valid(code, i))
            continue;
        int32_t c = i32_at(code, i);
        int has_rc = valid(rc, i);
        int32_t r = has_rc ? i32_at(rc, i) : 0;
        if (!(valid(resp, i) && bit_at(resp, i))) {
            if (count(&t->counts, key, code_key(key, K_REQUEST, c, 0, 0), 1) < 0
                || (valid(oneway, i) && bit_at(oneway, i)
                    && count(&t->counts, key, code_key(key, K_ONEWAY, c, 0, 0), 1) < 0))
                return -1;
            continue;
        }
        if (count(&t->counts, key, code_key(key, K_RESPONSE, c, 0, 0), 1) < 0)
            return -1;
        t->unmatched += !has_rc;
        if (!not_error(t, c) && count(&t->counts, key, code_key(key, K_ERROR_RESPONSE, c, has_rc, r), 1) < 0)
            return -1;
        if (valid(lat, i) && timed(t, has_rc, r, f64_at(lat, i)) < 0)
            return -1;
    }
    return 0;
}

/* add(rows, columns): a batch of take() */
static PyObject *Tally_add(Tally *self, PyObject *args) {
    long long rows;
    PyObject *specs;
    if (in_use(self->busy) || !PyArg_ParseTuple(args, "LO!", &rows, &PyList_Type, &specs))
        return NULL;
    if (PyList_GET_SIZE(specs) != CFG.n_columns || rows < 0)
        return bad("the batch is not of the configured columns"), NULL;
    tcol_t cols[N_NEEDS];
    memset(cols, 0, sizeof cols);
    for (int i = 0; i < N_NEEDS; i++) {
        int at = CFG.at[NEEDS[i]];
        if (grab(PyList_GET_ITEM(specs, at), &cols[i], CFG.columns[at].kind, rows) < 0) {
            release(cols);
            return NULL;
        }
    }
    self->busy = 1;
    gil_released = PyEval_SaveThread();
    int r = add_rows(self, cols, rows);
    PyEval_RestoreThread(gil_released);
    gil_released = NULL;
    self->busy = 0;
    release(cols);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the senders by frames, then bytes (most first), then address (bytewise, as Arrow orders
 * strings; no sender last) */
static const uint8_t *NAMES;       /* the tally being sorted (under the GIL: one at a time) */
static int by_traffic(const void *a, const void *b) {
    const talker_t *x = a, *y = b;
    if (x->frames != y->frames)
        return x->frames > y->frames ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->has != y->has)
        return x->has ? -1 : 1;
    int c = memcmp(NAMES + x->at, NAMES + y->at, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static PyObject *opt_code(int has, int32_t v) {
    return has ? PyLong_FromLong(v) : Py_NewRef(Py_None);
}

/* SummaryBuilder's percentile(): nearest rank */
static double percentile(const lat_t *l, double q) {
    double rank = ceil(q / 100.0 * (double)l->n) - 1;
    return l->v[rank > 0 ? (size_t)rank : 0];
}

static int set_new(PyObject *d, PyObject *k, PyObject *v) {
    int r = k && v ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r;
}

static int result_counts(Tally *t, PyObject *out) {
    PyObject *d[4] = {PyDict_New(), PyDict_New(), PyDict_New(), PyDict_New()};
    static const char *const names[4] = {"requests", "oneway", "responses", "error_responses"};
    int r = 0;
    for (size_t i = 0; r == 0 && i < t->counts.cap; i++) {
        const hent_t *e = &t->counts.e[i];
        if (e->state != 1)
            continue;
        const uint8_t *k = hent_key(e);
        int32_t code;
        memcpy(&code, k + 1, 4);
        PyObject *name;
        if (k[0] != K_ERROR_RESPONSE) {
            name = PyLong_FromLong(code);
        } else {                         /* "request code:response code", as the reference */
            int32_t rc;
            memcpy(&rc, k + 6, 4);
            name = k[5] ? PyUnicode_FromFormat("%d:%d", rc, code) : PyUnicode_FromFormat("None:%d", code);
        }
        r = d[k[0]] ? set_new(d[k[0]], name, PyLong_FromLongLong(e->value)) : (Py_XDECREF(name), -1);
    }
    for (int j = 0; j < 4; j++) {
        if (r == 0 && (!d[j] || PyDict_SetItemString(out, names[j], d[j]) < 0))
            r = -1;
        Py_XDECREF(d[j]);
    }
    return r;
}

static int result_latency(Tally *t, PyObject *out) {
    PyObject *d = PyDict_New();
    int r = d ? 0 : -1;
    for (size_t i = 0; r == 0 && i < t->n_lat; i++) {
        lat_t *l = &t->lat[i];
        qsort(l->v, l->n, sizeof *l->v, by_value);
        r = set_new(d, opt_code(l->has_code, l->code),
                    Py_BuildValue("{s:n,s:d,s:d,s:d}", "n", (Py_ssize_t)l->n, "p50", percentile(l, 50),
                                  "p99", percentile(l, 99), "max", l->v[l->n - 1]));
    }
    if (r == 0 && PyDict_SetItemString(out, "latency_ms", d) < 0)
        r = -1;
    Py_XDECREF(d);
    return r;
}

static PyObject *key_text(const hent_t *e) {
    return PyUnicode_DecodeUTF8((const char *)hent_key(e), (Py_ssize_t)e->klen, "replace");
}

static int result_errors(Tally *t, PyObject *out) {
    PyObject *d = PyDict_New();
    int r = d ? 0 : -1;
    for (size_t i = 0; r == 0 && i < t->errors.cap; i++)
        if (t->errors.e[i].state == 1)
            r = set_new(d, key_text(&t->errors.e[i]), PyLong_FromLongLong(t->errors.e[i].value));
    if (r == 0 && PyDict_SetItemString(out, "decode_errors", d) < 0)
        r = -1;
    Py_XDECREF(d);
    return r;
}

static int result_talkers(Tally *t, PyObject *out, Py_ssize_t top) {
    talker_t *sorted = PyMem_RawMalloc((t->n_talker + 1) * sizeof *sorted);
    if (!sorted)
        return PyErr_NoMemory(), -1;
    memcpy(sorted, t->talker, t->n_talker * sizeof *sorted);
    NAMES = buf_data(&t->names);
    qsort(sorted, t->n_talker, sizeof *sorted, by_traffic);
    size_t n = top < 0 ? 0 : (size_t)top < t->n_talker ? (size_t)top : t->n_talker;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const talker_t *tk = &sorted[i];
        PyObject *src = tk->has ? PyUnicode_DecodeUTF8((const char *)NAMES + tk->at, (Py_ssize_t)tk->len,
                                                       "replace") : Py_NewRef(Py_None);
        PyObject *item = src ? Py_BuildValue("(NLL)", src, (long long)sorted[i].frames,
                                             (long long)sorted[i].bytes) : NULL;
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    PyMem_RawFree(sorted);
    int r = list && PyDict_SetItemString(out, "top_talkers", list) == 0 ? 0 : -1;
    Py_XDECREF(list);
    return r;
}

/* counts(top) -> the summary's counts (SummaryBuilder.result without the decoder's counters) */
static PyObject *Tally_counts(Tally *self, PyObject *args) {
    Py_ssize_t top = 10;
    if (in_use(self->busy) || !PyArg_ParseTuple(args, "|n", &top))
        return NULL;
    PyObject *out = Py_BuildValue("{s:L,s:L}", "frames", (long long)self->frames,
                                  "unmatched_responses", (long long)self->unmatched);
    PyObject *first = self->has_ts ? PyFloat_FromDouble(self->first_ts) : Py_NewRef(Py_None);
    PyObject *last = self->has_ts ? PyFloat_FromDouble(self->last_ts) : Py_NewRef(Py_None);
    int r = out && first && last && PyDict_SetItemString(out, "first_ts", first) == 0
            && PyDict_SetItemString(out, "last_ts", last) == 0 ? 0 : -1;
    Py_XDECREF(first);
    Py_XDECREF(last);
    if (r < 0 || result_counts(self, out) < 0 || result_latency(self, out) < 0
        || result_errors(self, out) < 0 || result_talkers(self, out, top) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* latencies() -> {request code: [ms, ...] sorted} (the latency plot) */
static PyObject *Tally_latencies(Tally *self, PyObject *unused) {
    if (in_use(self->busy))
        return NULL;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < self->n_lat; i++) {
        lat_t *l = &self->lat[i];
        qsort(l->v, l->n, sizeof *l->v, by_value);
        PyObject *v = PyList_New((Py_ssize_t)l->n);
        for (size_t j = 0; v && j < l->n; j++) {
            PyObject *x = PyFloat_FromDouble(l->v[j]);
            if (!x)
                Py_CLEAR(v);
            else
                PyList_SET_ITEM(v, (Py_ssize_t)j, x);
        }
        if (set_new(d, opt_code(l->has_code, l->code), v) < 0)
            Py_CLEAR(d);
    }
    return d;
}

static int Tally_init(Tally *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"not_errors", NULL};
    PyObject *codes;
    if (self->not_errors) {
        PyErr_SetString(PyExc_RuntimeError, "a Tally is initialised once");
        return -1;
    }
    if (!CFG.header_fallback) {
        PyErr_SetString(PyExc_RuntimeError, "rocketpy.capture._native.configure() was not called");
        return -1;
    }
    for (int i = 0; i < N_NEEDS; i++)
        if (CFG.at[NEEDS[i]] < 0) {
            PyErr_SetString(PyExc_ValueError, "the summary needs a column the schema has not");
            return -1;
        }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwlist, &codes))
        return -1;
    PyObject *seq = PySequence_Fast(codes, "not_errors: response codes");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->not_errors = PyMem_RawMalloc(((size_t)n + 1) * sizeof(int64_t));
    if (!self->not_errors) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        self->not_errors[i] = v;
    }
    Py_DECREF(seq);
    self->n_not_errors = (size_t)n;
    for (size_t i = 1; i < self->n_not_errors; i++)          /* sorted (a handful) */
        for (size_t j = i; j > 0 && self->not_errors[j - 1] > self->not_errors[j]; j--) {
            int64_t x = self->not_errors[j];
            self->not_errors[j] = self->not_errors[j - 1];
            self->not_errors[j - 1] = x;
        }
    return 0;
}

static void Tally_dealloc(Tally *self) {
    PyMem_RawFree(self->not_errors);
    htab_free(&self->counts);
    htab_free(&self->errors);
    htab_free(&self->talkers);
    htab_free(&self->latency);
    PyMem_RawFree(self->talker);
    buf_free(&self->names);
    for (size_t i = 0; i < self->n_lat; i++)
        PyMem_RawFree(self->lat[i].v);
    PyMem_RawFree(self->lat);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Tally_methods[] = {
    {"add", (PyCFunction)Tally_add, METH_VARARGS, "count a batch of the decoder's columns"},
    {"counts", (PyCFunction)Tally_counts, METH_VARARGS, "the summary's counts so far"},
    {"latencies", (PyCFunction)Tally_latencies, METH_NOARGS, "every latency, per request code"},
    {NULL},
};

PyTypeObject TallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketpy.capture._native.Tally",
    .tp_basicsize = sizeof(Tally),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The summary's counts of the compiled decoder's batches (SummaryBuilder in C).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tally_init,
    .tp_dealloc = (destructor)Tally_dealloc,
    .tp_methods = Tally_methods,
};
