/* The answer cache's hit path, compiled (rocketpy.transport.answercache, issue 33): for a read's
 * whole frames, every request whose encoded answer is cached for its topic's current version is
 * answered here -- the frame cut, the key cut around the opaque, the lookup, the version check,
 * the opaque written into the stored answer -- into one output buffer, up to the first frame
 * that is not such a hit, which goes back to Python with everything after it.
 *
 * It does what AnswerCache.lookup does for a hit and nothing else, so the Python path
 * (protocol.py's per-frame loop, AnswerCache.lookup, layout.request_without_opaque) stays the
 * reference: a frame is answered here only where lookup would answer it with the same bytes,
 * and anything else -- a length Java refuses, a frame not all there, one over max_request, an
 * opaque not in Java's own form, no entry, a stale one, an opaque the answer cannot hold -- is
 * left to it (tests/test_transport_hitpath.py holds the two equal).  The cache's own state is
 * the Python dict: an entry is [topic, version, template, size, used]; a hit marks `used` (the
 * second chance) and nothing here inserts or evicts, so the byte bound is the cache's.  Offsets
 * come from layout_gen.h. */
#include "hits.h"
#include "kernel.h"

static const char OPAQUE_KEY[] = JSON_OPAQUE_KEY;
#define OPAQUE_KEY_LEN (sizeof OPAQUE_KEY - 1)
/* an entry: [topic, version, template, size, used] (AnswerCache.answer) */
enum { E_TOPIC, E_VERSION, E_TEMPLATE, E_SIZE, E_USED, E_LENGTH };

static PyObject *ATTR_TYPE, *ATTR_PRE, *ATTR_POST, *ATTR_BODY;   /* interned once */

typedef struct {
    char *p;
    size_t n, cap;
} out_t;

static int out_reserve(out_t *o, size_t more) {
    if (o->n + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->n + more)
        cap *= 2;
    char *p = PyMem_Realloc(o->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static void wr32be(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The key of the request frame f (n bytes, n >= PREFIX_SIZE) as request_without_opaque cuts it
 * on its first path: a JSON header's first "opaque": followed by canonical digits and a comma
 * (Java's form), or a binary header's opaque field (the whole header in the frame).  1 with
 * [PREFIX_SIZE, *at) and [*end, n) around the opaque, 0 when that path does not cut it. */
static int cut_key(const uint8_t *f, size_t n, int *stype, size_t *at, size_t *end) {
    size_t hend = PREFIX_SIZE + (size_t)rk_frame_header_length(f);
    *stype = rk_frame_type(f);
    if (*stype == SER_JSON) {
        if (hend > n)
            hend = n;                  /* (bytes.find clamps the same way) */
        if (hend < PREFIX_SIZE + OPAQUE_KEY_LEN)
            return 0;
        const uint8_t *k = memmem(f + PREFIX_SIZE, hend - PREFIX_SIZE, OPAQUE_KEY, OPAQUE_KEY_LEN);
        if (!k)
            return 0;
        size_t d = (size_t)(k - f) + OPAQUE_KEY_LEN, e = d;
        while (e < hend && f[e] >= '0' && f[e] <= '9')
            e++;
        if (e == d || e >= hend || f[e] != ',' || (f[d] == '0' && e - d > 1))
            return 0;
        *at = d;
        *end = e;
        return 1;
    }
    if (*stype == SER_ROCKETMQ && hend - PREFIX_SIZE >= RMQ_MIN_HEADER && hend <= n) {
        *at = PREFIX_SIZE + RMQ_OPAQUE_AT;
        *end = *at + RMQ_OPAQUE_SIZE;
        return 1;
    }
    return 0;
}

/* The opaque of a request and an answer not both JSON, as the answer writes it, into buf (16
 * bytes): its length, or 0 when the answer cannot hold it (a JSON request's digits past a binary
 * header's int32: lookup answers None there). */
static size_t opaque_bytes(const uint8_t *f, int stype, size_t at, size_t end, int ttype, uint8_t *buf) {
    if (stype == SER_JSON) {
        if (end - at > 10)
            return 0;
        int64_t v = 0;
        for (size_t i = at; i < end; i++)
            v = v * 10 + (f[i] - '0');
        if (v > INT32_MAX)
            return 0;
        wr32be(buf, (uint32_t)v);
        return RMQ_OPAQUE_SIZE;
    }
    int32_t opaque = (int32_t)rk_rd32be(f + at);
    if (ttype == SER_JSON)
        return (size_t)sprintf((char *)buf, "%d", opaque);
    wr32be(buf, (uint32_t)opaque);
    return RMQ_OPAQUE_SIZE;
}

/* The template's parts (borrowed but for the returned new references): 1, 0 not a template of
 * bytes this knows, -1 error */
static int template_parts(PyObject *t, int *ttype, PyObject **pre, PyObject **post, PyObject **body) {
    PyObject *type = PyObject_GetAttr(t, ATTR_TYPE);
    if (!type)
        return -1;
    long v = PyLong_AsLong(type);
    Py_DECREF(type);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *pre = PyObject_GetAttr(t, ATTR_PRE);
    *post = *pre ? PyObject_GetAttr(t, ATTR_POST) : NULL;
    *body = *post ? PyObject_GetAttr(t, ATTR_BODY) : NULL;
    if (!*body) {
        Py_XDECREF(*pre);
        Py_XDECREF(*post);
        return -1;
    }
    *ttype = (int)v;
    if ((v == SER_JSON || v == SER_ROCKETMQ) && PyBytes_CheckExact(*pre) && PyBytes_CheckExact(*post)
        && PyBytes_CheckExact(*body))
        return 1;
    Py_DECREF(*pre);
    Py_DECREF(*post);
    Py_DECREF(*body);
    return 0;
}

/* Answer the frame f (n bytes) if it is a hit: 1 (its answer appended to o, its entry marked),
 * 0 not a hit (nothing changed), -1 error */
static int answer_one(const uint8_t *f, size_t n, PyObject *entries, PyObject *version_of, out_t *o) {
    int stype, ttype;
    size_t at, end;
    if (!cut_key(f, n, &stype, &at, &end))
        return 0;
    PyObject *pre_key = PyBytes_FromStringAndSize((const char *)f + PREFIX_SIZE, (Py_ssize_t)(at - PREFIX_SIZE));
    PyObject *post_key = pre_key ? PyBytes_FromStringAndSize((const char *)f + end, (Py_ssize_t)(n - end)) : NULL;
    PyObject *key = post_key ? PyTuple_Pack(2, pre_key, post_key) : NULL;
    Py_XDECREF(pre_key);
    Py_XDECREF(post_key);
    if (!key)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(entries, key);
    Py_DECREF(key);
    if (!entry)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != E_LENGTH)
        return 0;
    /* version_of and the comparison may run Python code: hold what they could drop, and look
     * at the entry again after them */
    Py_INCREF(entry);
    int r = -1;
    PyObject *topic = Py_NewRef(PyList_GET_ITEM(entry, E_TOPIC));
    PyObject *version = Py_NewRef(PyList_GET_ITEM(entry, E_VERSION));
    PyObject *current = PyObject_CallOneArg(version_of, topic);
    int stale = current ? PyObject_RichCompareBool(current, version, Py_NE) : -1;
    Py_DECREF(topic);
    Py_DECREF(version);
    Py_XDECREF(current);
    if (stale || PyList_GET_SIZE(entry) != E_LENGTH) {
        r = stale < 0 ? -1 : 0;
        goto done;
    }
    PyObject *pre, *post, *body, *template = Py_NewRef(PyList_GET_ITEM(entry, E_TEMPLATE));
    r = template_parts(template, &ttype, &pre, &post, &body);
    Py_DECREF(template);
    if (r <= 0)
        goto done;
    uint8_t buf[16];
    const uint8_t *op = buf;
    size_t olen;
    if (stype == SER_JSON && ttype == SER_JSON) {
        op = f + at;                   /* the request's digits, as they came */
        olen = end - at;
    } else {
        olen = opaque_bytes(f, stype, at, end, ttype, buf);
    }
    size_t plen = (size_t)PyBytes_GET_SIZE(pre), qlen = (size_t)PyBytes_GET_SIZE(post);
    size_t blen = (size_t)PyBytes_GET_SIZE(body), hlen = plen + olen + qlen;
    if (!olen || hlen > HEADER_LENGTH_MASK)
        r = 0;                         /* (no olen: lookup answers None, the frame is processed) */
    else if (out_reserve(o, PREFIX_SIZE + hlen + blen) < 0)
        r = -1;
    if (r > 0) {
        uint8_t *w = (uint8_t *)o->p + o->n;
        wr32be(w, (uint32_t)(PREFIX_SIZE - LENGTH_SIZE + hlen + blen));
        wr32be(w + TYPE_AT, (uint32_t)hlen);
        w[TYPE_AT] = (uint8_t)ttype;   /* the serialize type is the mark's top byte */
        w += PREFIX_SIZE;
        memcpy(w, PyBytes_AS_STRING(pre), plen);
        memcpy(w + plen, op, olen);
        memcpy(w + plen + olen, PyBytes_AS_STRING(post), qlen);
        memcpy(w + hlen, PyBytes_AS_STRING(body), blen);
        o->n += PREFIX_SIZE + hlen + blen;
        r = PyList_SetItem(entry, E_USED, Py_NewRef(Py_True)) < 0 ? -1 : 1;
    }
    Py_DECREF(pre);
    Py_DECREF(post);
    Py_DECREF(body);
done:
    Py_DECREF(entry);
    return r;
}

PyObject *rk_answer_hits(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "answer_hits takes 8 arguments");
        return NULL;
    }
    if (!ATTR_TYPE) {
        ATTR_TYPE = PyUnicode_InternFromString("serialize_type");
        ATTR_PRE = PyUnicode_InternFromString("pre");
        ATTR_POST = PyUnicode_InternFromString("post");
        ATTR_BODY = PyUnicode_InternFromString("body");
        if (!ATTR_TYPE || !ATTR_PRE || !ATTR_POST || !ATTR_BODY) {
            Py_CLEAR(ATTR_TYPE);
            return NULL;
        }
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), most = PyLong_AsSsize_t(args[2]);
    Py_ssize_t room = PyLong_AsSsize_t(args[3]);
    long long max_frame = PyLong_AsLongLong(args[4]), max_request = PyLong_AsLongLong(args[5]);
    PyObject *entries = args[6], *version_of = args[7];
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_CheckExact(entries)) {
        PyErr_SetString(PyExc_TypeError, "answer_hits: entries must be a dict");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *data = b.buf;
    size_t size = (size_t)b.len, p = pos < 0 ? size : (size_t)pos;
    out_t o = {NULL, 0, 0};
    Py_ssize_t count = 0;
    int r = 0;
    while (p < size && size - p >= LENGTH_SIZE && count < most && (Py_ssize_t)o.n < room) {
        int64_t total = rk_frame_total(data + p);
        if (total > max_frame || total < PREFIX_SIZE || (size_t)total > size - p || total > max_request)
            break;                     /* refused, not all there, or never looked up: Python's */
        r = answer_one(data + p, (size_t)total, entries, version_of, &o);
        if (r <= 0)
            break;
        p += (size_t)total;
        count++;
    }
    PyBuffer_Release(&b);
    PyObject *result = NULL;
    if (r >= 0 || !PyErr_Occurred()) {
        if (count) {
            PyObject *answers = PyBytes_FromStringAndSize(o.p, (Py_ssize_t)o.n);
            result = answers ? Py_BuildValue("(Nnn)", answers, (Py_ssize_t)p, count) : NULL;
        } else {
            result = Py_NewRef(Py_None);
        }
    }
    PyMem_Free(o.p);
    return result;
}
