/* The answer cache's hit path, compiled (rocketpy.transport.answercache, issue 33): for a read's
 * whole frames, every request whose encoded answer is cached for its topic's current version is
 * answered here -- the frame cut, the key cut around the opaque, the lookup, the version check,
 * the opaque written into the stored answer -- into one output buffer, up to the first frame
 * that is not such a hit, which goes back to Python with everything after it; a run that answers
 * the whole read can be sent on the connection's socket here too.
 *
 * It does what AnswerCache.lookup does for a hit and nothing else, so the Python path
 * (protocol.py's per-frame loop, AnswerCache.lookup, layout.request_without_opaque) stays the
 * reference: a frame is answered here only where lookup would answer it with the same bytes,
 * and anything else -- a length Java refuses, a frame not all there, one over max_request, an
 * opaque not in Java's own form, no entry, a stale one, an opaque the answer cannot hold -- is
 * left to it (tests/test_transport_hitpath.py holds the two equal).  The cache's own state is
 * the Python dict: an entry is AnswerCache.answer's list (E_* below); a hit marks `used` (the
 * second chance) and notes the route generation its version was confirmed at, and nothing here
 * inserts or evicts, so the byte bound is the cache's.  Offsets come from layout_gen.h.
 *
 * Two things a hit no longer pays for, each keyed off a version as every cache here is:
 *  - the route's version_of call, while the route tables' generation (RouteSnapshots.generation,
 *    which moves whenever any route's version may) is the one the entry was last confirmed at;
 *  - the key object: a memo, by a keyed hash of the key's bytes, of the entries the dict lookup
 *    found, valid while the dict is unchanged (AnswerCache calls forget() whenever it changes
 *    the dict, and the memo then holds nothing), so a memo hit is the dict's entry and the memo
 *    keeps no entry alive that the dict dropped. */
#include "hits.h"
#include "kernel.h"

#include <errno.h>
#include <structmember.h>
#include <sys/socket.h>

#ifndef MSG_NOSIGNAL                   /* (not on every Unix: Python ignores SIGPIPE anyway) */
#define MSG_NOSIGNAL 0
#endif

static const char OPAQUE_KEY[] = JSON_OPAQUE_KEY;
#define OPAQUE_KEY_LEN (sizeof OPAQUE_KEY - 1)
/* an entry: [topic, version, template, size, used, generation confirmed at, key, template parts]
 * (AnswerCache.answer); the parts are (serialize_type, pre, post, body) */
enum { E_TOPIC, E_VERSION, E_TEMPLATE, E_SIZE, E_USED, E_CHECKED, E_KEY, E_PARTS, E_LENGTH };

/* memo slots (a power of two): more than the distinct route requests of most clusters */
#define MEMO_SLOTS 8192
/* an output buffer past this is given back after the run */
#define KEEP_OUT (1 << 20)

static PyObject *ATTR_GENERATION;      /* interned once */

typedef struct {
    char *p;
    size_t n, cap;
} out_t;

typedef struct {
    uint64_t hash;
    PyObject *entry;                   /* a strong reference, or NULL */
} memo_t;

typedef struct {
    PyObject_HEAD
    PyObject *entries, *version_of, *versions;
    Py_ssize_t max_request;
    long long hits, looked_up;
    memo_t *memo;                      /* MEMO_SLOTS, made at the first lookup */
    uint32_t *filled;                  /* the slots holding an entry */
    size_t n_filled;
    out_t out;
    int busy;                          /* (a run inside a run uses a buffer of its own) */
} hitpath_t;

static int out_reserve(out_t *o, size_t more) {
    if (o->n + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 65536;
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

/* The first OPAQUE_KEY in [p, end), or NULL: every one starts with a quote, and a header has few
 * (memchr finds them faster than memmem's set-up for a needle this short) */
static const uint8_t *find_key(const uint8_t *p, const uint8_t *end) {
    while ((size_t)(end - p) >= OPAQUE_KEY_LEN) {
        const uint8_t *q = memchr(p, '"', (size_t)(end - p) - (OPAQUE_KEY_LEN - 1));
        if (!q)
            return NULL;
        if (memcmp(q, OPAQUE_KEY, OPAQUE_KEY_LEN) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
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
        const uint8_t *k = find_key(f + PREFIX_SIZE, f + hend);
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

/* The parts of an entry's template (borrowed from the tuple): 1, 0 not parts this knows */
static int template_parts(PyObject *parts, int *ttype, PyObject **pre, PyObject **post, PyObject **body) {
    if (!PyTuple_CheckExact(parts) || PyTuple_GET_SIZE(parts) != 4 || !PyLong_CheckExact(PyTuple_GET_ITEM(parts, 0)))
        return 0;
    long v = PyLong_AsLong(PyTuple_GET_ITEM(parts, 0));
    *pre = PyTuple_GET_ITEM(parts, 1);
    *post = PyTuple_GET_ITEM(parts, 2);
    *body = PyTuple_GET_ITEM(parts, 3);
    *ttype = (int)v;
    return (v == SER_JSON || v == SER_ROCKETMQ) && PyBytes_CheckExact(*pre) && PyBytes_CheckExact(*post)
           && PyBytes_CheckExact(*body);
}

/* -- the memo ---------------------------------------------------------------------------------- */

static uint64_t key_hash(const uint8_t *f, size_t n, size_t at, size_t end) {
    uint64_t a = rk_hash_bytes(f + PREFIX_SIZE, at - PREFIX_SIZE), b = rk_hash_bytes(f + end, n - end);
    return mum(a ^ RK_HASH_KEY[2], b ^ RK_HASH_KEY[0]);
}

static int same_bytes(PyObject *b, const uint8_t *p, size_t n) {
    return PyBytes_CheckExact(b) && (size_t)PyBytes_GET_SIZE(b) == n && memcmp(PyBytes_AS_STRING(b), p, n) == 0;
}

/* whether the entry's key is the frame's (its two parts, byte for byte) */
static int key_is(PyObject *entry, const uint8_t *f, size_t n, size_t at, size_t end) {
    if (PyList_GET_SIZE(entry) != E_LENGTH)
        return 0;
    PyObject *key = PyList_GET_ITEM(entry, E_KEY);
    return PyTuple_CheckExact(key) && PyTuple_GET_SIZE(key) == 2
           && same_bytes(PyTuple_GET_ITEM(key, 0), f + PREFIX_SIZE, at - PREFIX_SIZE)
           && same_bytes(PyTuple_GET_ITEM(key, 1), f + end, n - end);
}

static void memo_forget(hitpath_t *self) {
    for (size_t i = 0; i < self->n_filled; i++)
        Py_CLEAR(self->memo[self->filled[i]].entry);
    self->n_filled = 0;
}

/* remember that the dict holds entry under the frame's key (hash h) */
static void memo_keep(hitpath_t *self, uint64_t h, PyObject *entry) {
    if (!self->memo) {
        self->memo = PyMem_Calloc(MEMO_SLOTS, sizeof *self->memo);
        self->filled = self->memo ? PyMem_Malloc(MEMO_SLOTS * sizeof *self->filled) : NULL;
        if (!self->filled) {           /* (no memo: every hit looks the dict up) */
            PyMem_Free(self->memo);
            self->memo = NULL;
            return;
        }
    }
    memo_t *slot = &self->memo[h & (MEMO_SLOTS - 1)];
    if (slot->entry)
        Py_SETREF(slot->entry, Py_NewRef(entry));   /* (the dict holds the one it replaces) */
    else {
        slot->entry = Py_NewRef(entry);
        self->filled[self->n_filled++] = (uint32_t)(h & (MEMO_SLOTS - 1));
    }
    slot->hash = h;
}

/* the dict's entry for the frame's key (a new reference), NULL with no error when there is none */
static PyObject *entry_of(hitpath_t *self, const uint8_t *f, size_t n, size_t at, size_t end) {
    uint64_t h = key_hash(f, n, at, end);
    if (self->memo) {
        memo_t *slot = &self->memo[h & (MEMO_SLOTS - 1)];
        if (slot->entry && slot->hash == h && key_is(slot->entry, f, n, at, end))
            return Py_NewRef(slot->entry);
    }
    PyObject *pre_key = PyBytes_FromStringAndSize((const char *)f + PREFIX_SIZE, (Py_ssize_t)(at - PREFIX_SIZE));
    PyObject *post_key = pre_key ? PyBytes_FromStringAndSize((const char *)f + end, (Py_ssize_t)(n - end)) : NULL;
    PyObject *key = post_key ? PyTuple_Pack(2, pre_key, post_key) : NULL;
    Py_XDECREF(pre_key);
    Py_XDECREF(post_key);
    if (!key)
        return NULL;
    self->looked_up++;
    PyObject *entry = PyDict_GetItemWithError(self->entries, key);
    Py_DECREF(key);
    if (!entry)
        return NULL;
    Py_INCREF(entry);
    if (PyList_CheckExact(entry) && key_is(entry, f, n, at, end))
        memo_keep(self, h, entry);
    return entry;
}

/* -- one frame ------------------------------------------------------------------------------------ */

/* the route tables' generation now (a new reference; None without a versions object) */
static PyObject *generation_now(hitpath_t *self) {
    return self->versions == Py_None ? Py_NewRef(Py_None) : PyObject_GetAttr(self->versions, ATTR_GENERATION);
}

/* Whether the entry's version is current, as lookup decides (1, 0, -1 error): confirmed at the
 * generation *gen, else ask version_of and note the generation it was confirmed at.  version_of
 * is Python code: what it could drop is held, the entry looked at again after it, and *gen read
 * again (lookup reads it for each frame). */
static int current(hitpath_t *self, PyObject *entry, PyObject **gen) {
    PyObject *checked = PyList_GET_ITEM(entry, E_CHECKED), *confirmed = *gen;
    if (confirmed != Py_None) {
        Py_INCREF(checked);
        int fresh = checked == confirmed ? 1 : PyObject_RichCompareBool(checked, confirmed, Py_EQ);
        Py_DECREF(checked);
        if (fresh)
            return fresh;
    }
    Py_INCREF(confirmed);
    PyObject *topic = Py_NewRef(PyList_GET_ITEM(entry, E_TOPIC));
    PyObject *version = Py_NewRef(PyList_GET_ITEM(entry, E_VERSION));
    PyObject *now = PyObject_CallOneArg(self->version_of, topic);
    int stale = now ? PyObject_RichCompareBool(now, version, Py_NE) : -1;
    Py_DECREF(topic);
    Py_DECREF(version);
    Py_XDECREF(now);
    now = stale < 0 ? NULL : generation_now(self);
    if (!now) {
        Py_DECREF(confirmed);
        return -1;
    }
    Py_SETREF(*gen, now);
    if (stale || PyList_GET_SIZE(entry) != E_LENGTH) {
        Py_DECREF(confirmed);
        return 0;
    }
    return PyList_SetItem(entry, E_CHECKED, confirmed) < 0 ? -1 : 1;   /* (takes the reference) */
}

/* Answer the frame f (n bytes) if it is a hit: 1 (its answer appended to o, its entry marked),
 * 0 not a hit (nothing changed but the generation its entry was confirmed at), -1 error.
 * *gen is the route generation now. */
static int answer_one(hitpath_t *self, const uint8_t *f, size_t n, PyObject **gen, out_t *o) {
    int stype, ttype;
    size_t at, end;
    if (!cut_key(f, n, &stype, &at, &end))
        return 0;
    PyObject *entry = entry_of(self, f, n, at, end);
    if (!entry)
        return PyErr_Occurred() ? -1 : 0;
    int r = 0;
    PyObject *parts = NULL, *pre, *post, *body;
    if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != E_LENGTH)
        goto done;
    parts = Py_NewRef(PyList_GET_ITEM(entry, E_PARTS));
    if (!template_parts(parts, &ttype, &pre, &post, &body))
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
        goto done;                     /* (no olen: lookup answers None, the frame is processed) */
    r = current(self, entry, gen);
    if (r <= 0)
        goto done;
    if (out_reserve(o, PREFIX_SIZE + hlen + blen) < 0) {
        r = -1;
        goto done;
    }
    uint8_t *w = (uint8_t *)o->p + o->n;
    wr32be(w, (uint32_t)(PREFIX_SIZE - LENGTH_SIZE + hlen + blen));
    wr32be(w + TYPE_AT, (uint32_t)hlen);
    w[TYPE_AT] = (uint8_t)ttype;       /* the serialize type is the mark's top byte */
    w += PREFIX_SIZE;
    memcpy(w, PyBytes_AS_STRING(pre), plen);
    memcpy(w + plen, op, olen);
    memcpy(w + plen + olen, PyBytes_AS_STRING(post), qlen);
    memcpy(w + hlen, PyBytes_AS_STRING(body), blen);
    o->n += PREFIX_SIZE + hlen + blen;
    r = PyList_SetItem(entry, E_USED, Py_NewRef(Py_True)) < 0 ? -1 : 1;
done:
    Py_XDECREF(parts);
    Py_DECREF(entry);
    return r;
}

/* write o's bytes on the socket fd, once (again after a signal): how many it took (0 on any
 * error: the transport's own write then meets it) */
static size_t send_once(int fd, const out_t *o) {
    for (;;) {
        ssize_t w = send(fd, o->p, o->n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0)
            return (size_t)w;
        if (errno != EINTR)
            return 0;
    }
}

/* (answers not sent, pos, count, bytes sent): a new reference, or NULL (error set) */
static PyObject *run_result(const char *rest, size_t n, size_t pos, Py_ssize_t count, size_t sent) {
    PyObject *t = PyTuple_New(4);
    if (!t)
        return NULL;
    PyObject *items[4] = {PyBytes_FromStringAndSize(rest, (Py_ssize_t)n), PyLong_FromSize_t(pos),
                          PyLong_FromSsize_t(count), PyLong_FromSize_t(sent)};
    for (int i = 0; i < 4; i++) {
        if (!items[i]) {
            for (int j = 0; j < 4; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(t);
            return NULL;
        }
    }
    for (int i = 0; i < 4; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

/* -- the HitPath type ------------------------------------------------------------------------ */

static PyObject *hitpath_run(hitpath_t *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "run takes 5 or 6 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), most = PyLong_AsSsize_t(args[2]);
    Py_ssize_t room = PyLong_AsSsize_t(args[3]);
    long long max_frame = PyLong_AsLongLong(args[4]);
    long fd = nargs == 6 ? PyLong_AsLong(args[5]) : -1;
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_CheckExact(self->entries)) {
        PyErr_SetString(PyExc_TypeError, "HitPath: entries must be a dict");
        return NULL;
    }
    PyObject *gen = generation_now(self);
    if (!gen)
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0) {
        Py_DECREF(gen);
        return NULL;
    }
    Py_INCREF(self);                   /* (version_of could drop the cache that holds us) */
    out_t own = {NULL, 0, 0}, *o = self->busy ? &own : &self->out;
    int outer = !self->busy;
    self->busy = 1;
    o->n = 0;
    const uint8_t *data = b.buf;
    size_t size = (size_t)b.len, p = pos < 0 ? size : (size_t)pos;
    long long max_request = self->max_request;
    Py_ssize_t count = 0;
    int r = 0;
    while (p < size && size - p >= LENGTH_SIZE && count < most && (Py_ssize_t)o->n < room) {
        int64_t total = rk_frame_total(data + p);
        if (total > max_frame || total < PREFIX_SIZE || (size_t)total > size - p || total > max_request)
            break;                     /* refused, not all there, or never looked up: Python's */
        r = answer_one(self, data + p, (size_t)total, &gen, o);
        if (r <= 0)
            break;
        p += (size_t)total;
        count++;
    }
    PyBuffer_Release(&b);
    Py_DECREF(gen);
    PyObject *result = NULL;
    if (r >= 0) {
        if (count) {
            self->hits += count;
            /* a run of the whole read may go to the socket now: nothing else is to be written
             * before it (the caller's word, fd >= 0) and nothing of this read after it */
            size_t sent = fd >= 0 && p == size ? send_once((int)fd, o) : 0;
            result = run_result(o->p + sent, o->n - sent, p, count, sent);
        } else {
            result = Py_NewRef(Py_None);
        }
    }
    if (outer) {
        self->busy = 0;
        if (o->cap > KEEP_OUT) {
            PyMem_Free(o->p);
            o->p = NULL;
            o->cap = 0;
        }
    } else {
        PyMem_Free(own.p);
    }
    Py_DECREF(self);
    return result;
}

static PyObject *hitpath_forget(hitpath_t *self, PyObject *unused) {
    memo_forget(self);
    Py_RETURN_NONE;
}

static int hitpath_init(hitpath_t *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"entries", "version_of", "versions", "max_request", NULL};
    PyObject *entries, *version_of, *versions;
    Py_ssize_t max_request;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOn:HitPath", names, &PyDict_Type, &entries,
                                     &version_of, &versions, &max_request))
        return -1;
    if (!ATTR_GENERATION && !(ATTR_GENERATION = PyUnicode_InternFromString("generation")))
        return -1;
    memo_forget(self);
    Py_XSETREF(self->entries, Py_NewRef(entries));
    Py_XSETREF(self->version_of, Py_NewRef(version_of));
    Py_XSETREF(self->versions, Py_NewRef(versions));
    self->max_request = max_request;
    return 0;
}

static int hitpath_traverse(hitpath_t *self, visitproc visit, void *arg) {
    Py_VISIT(self->entries);
    Py_VISIT(self->version_of);
    Py_VISIT(self->versions);
    for (size_t i = 0; i < self->n_filled; i++)
        Py_VISIT(self->memo[self->filled[i]].entry);
    return 0;
}

static int hitpath_clear(hitpath_t *self) {
    memo_forget(self);
    Py_CLEAR(self->entries);
    Py_CLEAR(self->version_of);
    Py_CLEAR(self->versions);
    return 0;
}

static void hitpath_dealloc(hitpath_t *self) {
    PyObject_GC_UnTrack(self);
    hitpath_clear(self);
    PyMem_Free(self->memo);
    PyMem_Free(self->filled);
    PyMem_Free(self->out.p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef HITPATH_METHODS[] = {
    {"run", (PyCFunction)(void (*)(void))hitpath_run, METH_FASTCALL, RK_HITPATH_RUN_DOC},
    {"forget", (PyCFunction)hitpath_forget, METH_NOARGS,
     "forget(): the entries dict changed; the memo of its entries is dropped"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef HITPATH_MEMBERS[] = {
    {"max_request", T_PYSSIZET, offsetof(hitpath_t, max_request), 0,
     "requests longer than this are never looked up"},
    {"hits", T_LONGLONG, offsetof(hitpath_t, hits), READONLY, "frames answered"},
    {"looked_up", T_LONGLONG, offsetof(hitpath_t, looked_up), READONLY,
     "keys made and looked up in the dict: the memo's misses (counted by the tests)"},
    {"memo_size", T_PYSSIZET, offsetof(hitpath_t, n_filled), READONLY,
     "entries the memo holds (counted by the tests)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject HITPATH_TYPE = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketpy.remoting._kernel.HitPath",
    .tp_basicsize = sizeof(hitpath_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = RK_HITPATH_DOC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)hitpath_init,
    .tp_traverse = (traverseproc)hitpath_traverse,
    .tp_clear = (inquiry)hitpath_clear,
    .tp_dealloc = (destructor)hitpath_dealloc,
    .tp_methods = HITPATH_METHODS,
    .tp_members = HITPATH_MEMBERS,
};

int rk_hits_add_type(PyObject *module) {
    if (PyType_Ready(&HITPATH_TYPE) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "HitPath", (PyObject *)&HITPATH_TYPE);
}
