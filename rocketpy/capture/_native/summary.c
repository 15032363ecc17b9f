/* Body summaries: rocketpy.capture.rows._summary (the codec reads the body), remembered here.
 *
 * A summary depends on the body, the broker and cluster names and whether the frame is a
 * registration; a NameServer capture repeats bodies (every client polls each topic's route every
 * 30 s and gets the same answer until the route changes, a broker re-registers the same body
 * every 30 s), so they are remembered on that key, up to 1 MiB a body and 64 MiB in all.
 * Bodies that cannot have a summary are answered without asking Python, by the same reading
 * _summary does: only an object ('{'), or a registration's compressed body, has one, and an
 * object without backslashes has one only if one of the keys _summary looks for is in it. */
#include "core.h"
#include "htab.h"

#define CACHE_BODY_MAX (1 << 20)        /* a broker's registration with thousands of topics */
#define CACHE_BYTES_MAX (64 << 20)

struct summary_cache_s {
    htab_t t;
    size_t bytes;
    buf_t key;                 /* the key being looked up */
    uint8_t *uncached;         /* the last summary of a body too big to remember */
};

/* rocketpy.capture.rows.SUMMARY_MARKERS, in its order (tests/test_capture_engines.py) */
static const char *const MARKERS[] = {
    "topicConfigSerializeWrapper", "brokerDatas", "queueDatas", "brokerAddrTable", "topicList",
    "table", "counter", "topicConfigTable", NULL,
};

PyObject *summary_markers(void) {
    size_t n = 0;
    while (MARKERS[n])
        n++;
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(MARKERS[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}

summary_cache_t *summary_cache_new(void) {
    summary_cache_t *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c)
        PyErr_NoMemory();
    return c;
}

static void forget(summary_cache_t *c) {
    for (size_t i = 0; i < c->t.cap; i++)
        if (c->t.e[i].state == 1)
            PyMem_RawFree(c->t.e[i].ptr);
    htab_clear(&c->t);
    c->bytes = 0;
}

void summary_cache_free(summary_cache_t *c) {
    if (!c)
        return;
    forget(c);
    htab_free(&c->t);
    buf_free(&c->key);
    PyMem_RawFree(c->uncached);
    PyMem_RawFree(c);
}

static PyObject *text_or_none(str_t s) {
    if (!s.p)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.p, s.n, "replace");
}

/* the cached value: int32 length (-1: None) then the text */
static str_t cached(const uint8_t *v) {
    int32_t n;
    memcpy(&n, v, 4);
    return n < 0 ? STR_NULL : str_of((const char *)v + 4, (size_t)n);
}

int body_summary(summary_cache_t *c, str_t broker, str_t cluster, int registration,
                 const uint8_t *body, size_t n, str_t *out) {
    *out = STR_NULL;
    if (!n || body[0] == '[' || (body[0] != '{' && !registration))
        return 0;
    if (body[0] == '{' && !memchr(body, '\\', n)) {
        int any = 0;
        for (const char *const *m = MARKERS; *m && !any; m++)
            any = memmem(body, n, *m, strlen(*m)) != NULL;
        if (!any)
            return 0;
    }
    /* key: broker, cluster (length -1 for None), registration, body */
    uint8_t head[9];
    int32_t bl = broker.p ? broker.n : -1, cl = cluster.p ? cluster.n : -1;
    memcpy(head, &bl, 4);
    memcpy(head + 4, &cl, 4);
    head[8] = (uint8_t)registration;
    size_t klen = 9 + (size_t)(bl > 0 ? bl : 0) + (size_t)(cl > 0 ? cl : 0) + n;
    int cache = n <= CACHE_BODY_MAX;
    uint8_t *key = NULL;
    if (cache) {
        buf_clear(&c->key);
        if (buf_append(&c->key, head, 9) < 0 || (bl > 0 && buf_append(&c->key, broker.p, (size_t)bl) < 0)
            || (cl > 0 && buf_append(&c->key, cluster.p, (size_t)cl) < 0) || buf_append(&c->key, body, n) < 0)
            return -1;
        key = buf_data(&c->key);
        hent_t *e = htab_get(&c->t, key, klen);
        if (e) {
            *out = cached(e->ptr);
            return 0;
        }
    }
    PyObject *b = text_or_none(broker), *cl_ = b ? text_or_none(cluster) : NULL, *res = NULL;
    if (cl_)
        res = PyObject_CallFunction(CFG.summary, "OOOy#", b, cl_, registration ? Py_True : Py_False,
                                    (const char *)body, (Py_ssize_t)n);
    Py_XDECREF(b);
    Py_XDECREF(cl_);
    if (!res)
        return -1;
    PyObject *enc = NULL;
    const char *s = NULL;
    Py_ssize_t slen = -1;
    if (res != Py_None) {
        enc = PyUnicode_AsEncodedString(res, "utf-8", "replace");
        if (!enc) {
            Py_DECREF(res);
            return -1;
        }
        s = PyBytes_AS_STRING(enc);
        slen = PyBytes_GET_SIZE(enc);
    }
    Py_DECREF(res);
    uint8_t *v = PyMem_RawMalloc(4 + (size_t)(slen > 0 ? slen : 0));
    if (!v) {
        Py_XDECREF(enc);
        PyErr_NoMemory();
        return -1;
    }
    int32_t vl = (int32_t)slen;
    memcpy(v, &vl, 4);
    if (slen > 0)
        memcpy(v + 4, s, (size_t)slen);
    Py_XDECREF(enc);
    if (!cache) {
        /* not remembered: the text lives until the next such body */
        PyMem_RawFree(c->uncached);
        c->uncached = v;
        *out = cached(v);
        return 0;
    }
    if (c->bytes + klen > CACHE_BYTES_MAX || c->t.used >= 65536)
        forget(c);
    hent_t *e = htab_put(&c->t, key, klen);
    if (!e) {
        PyMem_RawFree(v);
        return -1;
    }
    e->ptr = v;
    c->bytes += klen;
    *out = cached(v);
    return 0;
}
