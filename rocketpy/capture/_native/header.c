/* Frame headers to columns, as rocketpy.remoting.frame.decode_header reads them.
 *
 * The usual headers are read by the header kernel (rocketpy/remoting/_kernel/kernel.c, linked
 * into this module too), the codec's own compiled reader.  Anything else -- broken, odd or merely
 * rare (duplicate keys, lone surrogates, 0x1A inside a string, numbers where strings are usual,
 * fastjson's lenient forms) -- is handed to the codec itself through CFG.header_fallback, so the
 * codec stays the one judge of what a header says and the error message is the codec's own.
 * Raw control characters inside strings are read as fastjson reads them (the .NET client writes
 * 0x01/0x02 there): a row holds no record of how a string was written. */
#include "core.h"
#include "languages.h"

void header_reset(header_t *h) {
    rk_header_reset(&h->k);
    h->language = STR_NULL;
    buf_clear(&h->text);
}

void header_free(header_t *h) {
    rk_header_free(&h->k);
    buf_free(&h->text);
}

static str_t language_column(header_t *h, int64_t value) {
    str_t name = table_name(&CFG.language, value);
    if (name.p)
        return name;
    /* str(language) for a byte Java has no name for; h->text has room (reserved by the caller) */
    char *at = (char *)h->text.p + h->text.end;
    int len = sprintf(at, "%lld", (long long)value);
    h->text.end += (size_t)len;
    return str_of(at, (size_t)len);
}

/* ---------------------------------------------------------------- the codec's judgement */

static rk_languages_t LANGS;

int native_set_languages(PyObject *by_name) {
    return rk_languages_set(&LANGS, by_name, NULL);
}

/* append a Python str's UTF-8 ("replace": as the batches built from rows) to h->text:
 * 1 appended at *at with *len bytes, 0 None, -1 error */
static int take_text(header_t *h, PyObject *s, size_t *at, int32_t *len) {
    if (s == Py_None)
        return 0;
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "replace");
    if (!b)
        return -1;
    *at = buf_len(&h->text);
    *len = (int32_t)PyBytes_GET_SIZE(b);
    int r = buf_append(&h->text, PyBytes_AS_STRING(b), (size_t)*len);
    Py_DECREF(b);
    return r < 0 ? -1 : 1;
}

static int fallback_(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                     str_t *err, buf_t *errbuf) {
    PyObject *res = PyObject_CallFunction(CFG.header_fallback, "iy#O", stype, (const char *)p,
                                          (Py_ssize_t)n, want_error ? Py_False : Py_True);
    if (!res)
        return -1;
    int ok = PyObject_IsTrue(PyTuple_GET_ITEM(res, 0)), r = 0;
    PyObject *v = PyTuple_GET_ITEM(res, 1);
    if (!ok) {
        if (want_error && err) {
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(v, &len);
            buf_clear(errbuf);
            if (!s || buf_append(errbuf, s, (size_t)len) < 0)
                r = -1;
            else
                *err = str_of((const char *)buf_data(errbuf), (size_t)len);
        }
        Py_DECREF(res);
        return r;
    }
    /* (code, flag, opaque, language, version, remark, ext items | None) */
    int32_t *ints[4] = {&h->k.code, &h->k.flag, &h->k.opaque, &h->k.version};
    int idx[4] = {0, 1, 2, 4};
    for (int i = 0; i < 4; i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(v, idx[i]));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(res);
            return -1;
        }
        *ints[i] = (int32_t)x;
    }
    /* the strings' offsets first (the buffer may move), their pointers at the end */
    PyObject *ext = PyTuple_GET_ITEM(v, 6);
    Py_ssize_t n_ext = ext == Py_None ? 0 : PyList_GET_SIZE(ext);
    size_t *at = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(size_t));
    int *present = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(int));
    int32_t *len = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(int32_t));
    if (!at || !present || !len) {
        no_memory();
        r = -1;
    }
    if (!r) {
        present[0] = take_text(h, PyTuple_GET_ITEM(v, 3), &at[0], &len[0]);
        present[1] = present[0] < 0 ? -1 : take_text(h, PyTuple_GET_ITEM(v, 5), &at[1], &len[1]);
        r = present[0] < 0 || present[1] < 0 ? -1 : 0;
    }
    for (Py_ssize_t i = 0; !r && i < n_ext; i++) {
        PyObject *item = PyList_GET_ITEM(ext, i);
        size_t j = 2 + 2 * (size_t)i;
        present[j] = take_text(h, PyTuple_GET_ITEM(item, 0), &at[j], &len[j]);
        present[j + 1] = present[j] < 0 ? -1 : take_text(h, PyTuple_GET_ITEM(item, 1), &at[j + 1], &len[j + 1]);
        if (present[j] < 0 || present[j + 1] < 0 || rk_add_ext(&h->k, STR_NULL, STR_NULL) < 0)
            r = -1;
    }
    if (!r) {
        const char *base = (const char *)buf_data(&h->text);
        h->language = present[0] ? str_of(base + at[0], (size_t)len[0]) : STR_NULL;
        h->k.remark = present[1] ? str_of(base + at[1], (size_t)len[1]) : STR_NULL;
        h->k.has_ext = ext != Py_None;
        for (size_t i = 0; i < h->k.n_ext; i++) {
            size_t j = 2 + 2 * i;
            h->k.ext[i].key = str_of(base + at[j], (size_t)len[j]);
            h->k.ext[i].value = str_of(base + at[j + 1], (size_t)len[j + 1]);
        }
    }
    PyMem_RawFree(at);
    PyMem_RawFree(present);
    PyMem_RawFree(len);
    Py_DECREF(res);
    return r < 0 ? -1 : 1;
}

static int fallback(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                    str_t *err, buf_t *errbuf) {
    PyThreadState *g = gil_take();
    int r = fallback_(stype, p, n, h, want_error, err, errbuf);
    gil_give(g);
    return r;
}

int decode_header(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                  str_t *err, buf_t *errbuf) {
    header_reset(h);
    int r = 0;
    if (stype == SER_JSON)
        r = rk_read_json(p, n, &h->k, LANGS.table, LANGS.n);
    else if (stype == SER_ROCKETMQ)
        r = rk_read_rocketmq(p, n, &h->k);
    if (r < 0)
        return no_memory();
    if (r) {
        if (buf_reserve(&h->text, 32) < 0)
            return -1;
        h->language = language_column(h, h->k.language);
        return 1;
    }
    header_reset(h);
    return fallback(stype, p, n, h, want_error, err, errbuf);
}
