/* Body summaries: rocketpy.capture.rows._summary (the codec reads the body), remembered here.
 *
 * A summary depends on the body, the broker and cluster names and whether the frame is a
 * registration; a NameServer capture repeats bodies (every client polls each topic's route every
 * 30 s and gets the same answer until the route changes, a broker re-registers the same body
 * every 30 s), so they are remembered, up to 1 MiB a body and 64 MiB in all: by the body, each
 * with the (broker, cluster, registration) variants seen with it.  A repeated body costs a hash
 * and a compare.  Bodies that cannot have a summary are answered without asking Python, by the
 * same reading _summary does: only an object ('{'), or a registration's compressed body, has
 * one, and an object without backslashes has one only if one of the keys _summary looks for is
 * in it. */
#include "core.h"
#include "htab.h"

#define CACHE_BODY_MAX (1 << 20)        /* a broker's registration with thousands of topics */
#define CACHE_BYTES_MAX (64 << 20)
#define MAX_VARIANTS 16                 /* (broker, cluster, registration) per body */

/* one (broker, cluster, registration) variant of a remembered body; the strings follow it */
typedef struct variant_s {
    struct variant_s *next;
    int32_t broker, cluster, summary;    /* lengths, -1: None */
    int registration;
} variant_t;

struct summary_cache_s {
    htab_t t;                  /* body -> variant_t list */
    size_t bytes;
    variant_t *uncached;       /* the last answer for a body too big to remember */
};

/* rocketpy.capture.rows.SUMMARY_MARKERS (the codec's wire names of the keys a summary reads),
 * asked of Python (CFG.summary_markers) by the first body that needs them: they come with the
 * codec's body schema, which a capture without bodies never imports */
static str_t *MARKERS;
static size_t N_MARKERS;
static int markers_ready;

static int load_markers_(void) {
    PyObject *res = PyObject_CallNoArgs(CFG.summary_markers);
    PyObject *seq = res ? PySequence_Fast(res, "the summary markers are a sequence of str") : NULL;
    Py_XDECREF(res);
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    str_t *markers = PyMem_RawCalloc((size_t)n + 1, sizeof *markers);
    int r = markers ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; r == 0 && i < n; i++) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &len);
        char *copy = text ? PyMem_RawMalloc((size_t)len + 1) : NULL;
        if (!copy) {
            if (text)
                PyErr_NoMemory();
            r = -1;
            break;
        }
        memcpy(copy, text, (size_t)len + 1);
        markers[i] = str_of(copy, (size_t)len);
    }
    Py_DECREF(seq);
    if (r < 0) {
        for (Py_ssize_t i = 0; markers && i < n; i++)
            PyMem_RawFree((void *)markers[i].p);
        PyMem_RawFree(markers);
        return -1;
    }
    MARKERS = markers;
    N_MARKERS = (size_t)n;
    __atomic_store_n(&markers_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

/* the markers, loaded once (decoders in other threads may ask at the same time: the GIL orders
 * them) */
static int load_markers(void) {
    if (__atomic_load_n(&markers_ready, __ATOMIC_ACQUIRE))
        return 0;
    PyThreadState *g = gil_take();
    int r = markers_ready ? 0 : load_markers_();
    gil_give(g);
    return r;
}

summary_cache_t *summary_cache_new(void) {
    summary_cache_t *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c)
        no_memory();
    return c;
}

static void free_variants(variant_t *v) {
    while (v) {
        variant_t *next = v->next;
        PyMem_RawFree(v);
        v = next;
    }
}

static void forget(summary_cache_t *c) {
    for (size_t i = 0; i < c->t.cap; i++)
        if (c->t.e[i].state == 1)
            free_variants(c->t.e[i].ptr);
    htab_clear(&c->t);
    c->bytes = 0;
}

void summary_cache_free(summary_cache_t *c) {
    if (!c)
        return;
    forget(c);
    htab_free(&c->t);
    PyMem_RawFree(c->uncached);
    PyMem_RawFree(c);
}

static PyObject *text_or_none(str_t s) {
    if (!s.p)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.p, s.n, "replace");
}

static int32_t len_of(str_t s) { return s.p ? s.n : -1; }
static size_t size_of(int32_t n) { return n > 0 ? (size_t)n : 0; }

static int same(const variant_t *v, str_t broker, str_t cluster, int registration) {
    const char *p = (const char *)(v + 1);
    return v->registration == registration && v->broker == len_of(broker) && v->cluster == len_of(cluster)
           && !memcmp(p, broker.p ? broker.p : "", size_of(v->broker))
           && !memcmp(p + size_of(v->broker), cluster.p ? cluster.p : "", size_of(v->cluster));
}

static str_t answer(const variant_t *v) {
    if (v->summary < 0)
        return STR_NULL;
    return str_of((const char *)(v + 1) + size_of(v->broker) + size_of(v->cluster), (size_t)v->summary);
}

/* rows._summary's answer, as a new variant (NULL: error set) */
static variant_t *ask(str_t broker, str_t cluster, int registration, const uint8_t *body, size_t n) {
    PyThreadState *g = gil_take();
    variant_t *v = NULL;
    PyObject *b = text_or_none(broker), *cl = b ? text_or_none(cluster) : NULL, *res = NULL, *enc = NULL;
    if (cl)
        res = PyObject_CallFunction(CFG.summary, "OOOy#", b, cl, registration ? Py_True : Py_False,
                                    (const char *)body, (Py_ssize_t)n);
    Py_XDECREF(b);
    Py_XDECREF(cl);
    if (res && res != Py_None)
        enc = PyUnicode_AsEncodedString(res, "utf-8", "replace");
    if (res && (res == Py_None || enc)) {
        int32_t sl = enc ? (int32_t)PyBytes_GET_SIZE(enc) : -1;
        v = PyMem_RawMalloc(sizeof *v + size_of(len_of(broker)) + size_of(len_of(cluster)) + size_of(sl));
        if (!v) {
            no_memory();
        } else {
            char *p = (char *)(v + 1);
            v->next = NULL;
            v->broker = len_of(broker);
            v->cluster = len_of(cluster);
            v->summary = sl;
            v->registration = registration;
            memcpy(p, broker.p ? broker.p : "", size_of(v->broker));
            memcpy(p + size_of(v->broker), cluster.p ? cluster.p : "", size_of(v->cluster));
            if (enc)
                memcpy(p + size_of(v->broker) + size_of(v->cluster), PyBytes_AS_STRING(enc), size_of(sl));
        }
    }
    Py_XDECREF(enc);
    Py_XDECREF(res);
    gil_give(g);
    return v;
}

static int may_have_summary(const uint8_t *body, size_t n) {
    if (body[0] != '{' || memchr(body, '\\', n))
        return 1;
    for (size_t i = 0; i < N_MARKERS; i++)
        if (memmem(body, n, MARKERS[i].p, (size_t)MARKERS[i].n))
            return 1;
    return 0;
}

int body_summary(summary_cache_t *c, str_t broker, str_t cluster, int registration,
                 const uint8_t *body, size_t n, str_t *out) {
    *out = STR_NULL;
    if (!n || body[0] == '[' || (body[0] != '{' && !registration))
        return 0;
    int cache = n <= CACHE_BODY_MAX, variants = 0;
    hent_t *e = cache ? htab_get(&c->t, body, n) : NULL;
    for (variant_t *v = e ? e->ptr : NULL; v; v = v->next, variants++)
        if (same(v, broker, cluster, registration)) {
            *out = answer(v);
            return 0;
        }
    if (load_markers() < 0)
        return -1;
    if (!may_have_summary(body, n))
        return 0;
    variant_t *v = ask(broker, cluster, registration, body, n);
    if (!v)
        return -1;
    /* a body under more names than a cluster has brokers is not remembered under the rest
     * (a list walked per frame must stay short) */
    if (!cache || variants >= MAX_VARIANTS) {   /* the text lives until the next such body */
        PyMem_RawFree(c->uncached);
        c->uncached = v;
        *out = answer(v);
        return 0;
    }
    size_t size = sizeof *v + size_of(v->broker) + size_of(v->cluster) + size_of(v->summary);
    if (c->bytes + size + (e ? 0 : n) > CACHE_BYTES_MAX || (!e && c->t.used >= 65536)) {
        forget(c);
        e = NULL;
    }
    if (!e) {
        if (!(e = htab_put(&c->t, body, n))) {
            PyMem_RawFree(v);
            return -1;
        }
        c->bytes += n;
    }
    v->next = e->ptr;
    e->ptr = v;
    c->bytes += size;
    *out = answer(v);
    return 0;
}
