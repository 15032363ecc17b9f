/* The Spark job's plan of one byte range: TCP headers only (rocketpy.capture.plan.scan_range,
 * same pieces).  A piece starts at a 4-tuple's first packet in the range, at every SYN and at
 * every packet after more than linger_ns of silence. */
#include "core.h"
#include "htab.h"

typedef struct {
    int64_t at, ts0, ts1, hwm[2];
    uint32_t seq, first[2];
    int side, flags, fin[2], rst, has_first[2];
} piece_t;

typedef struct {
    uint8_t key[40];          /* canonical: the lower endpoint first */
    int alen;
    piece_t *pieces;
    size_t n, cap;
} flow_t;

typedef struct {
    PyObject_HEAD
    int busy;                 /* in feed (without the GIL) */
    int ready;                /* initialised (once) */
    walker_t w;
    int64_t end, linger_ns, packets, captured;
    uint8_t *ports;
    htab_t index;             /* canonical key -> flow number */
    flow_t *flows;
    size_t n_flows, cap_flows;
} Scanner;

static void Scanner_dealloc(Scanner *self) {
    walker_free(&self->w);
    htab_free(&self->index);
    for (size_t i = 0; i < self->n_flows; i++)
        PyMem_RawFree(self->flows[i].pieces);
    PyMem_RawFree(self->flows);
    PyMem_RawFree(self->ports);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

int walker_setup(walker_t *w, PyObject *info, int64_t offset);
int ports_bitmap(PyObject *ports, uint8_t **out);

/* Scanner(info, offset, end, ports, linger_ns) */
static int Scanner_init(Scanner *self, PyObject *args, PyObject *kw) {
    PyObject *info, *ports = Py_None;
    long long offset, end, linger = DEFAULT_LINGER_NS;
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a Scanner is initialised once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!LL|OL", &PyTuple_Type, &info, &offset, &end, &ports, &linger))
        return -1;
    self->ready = 1;
    self->end = end;
    self->linger_ns = linger;
    if (walker_setup(&self->w, info, offset) < 0 || ports_bitmap(ports, &self->ports) < 0)
        return -1;
    return 0;
}

static inline int32_t rel32(uint32_t a, uint32_t b) { return (int32_t)(a - b); }

static int on_packet(void *ctx, const packet_t *pkt) {
    Scanner *self = ctx;
    if (pkt->offset >= self->end)
        return 1;
    self->packets++;
    self->captured += pkt->caplen;
    segment_t s;
    stats_t ignored;
    if (!decode_tcp(pkt->linktype, pkt->data, pkt->caplen, &s, &ignored))
        return 0;
    if (self->ports && !(self->ports[s.sport >> 3] & (1 << (s.sport & 7)))
        && !(self->ports[s.dport >> 3] & (1 << (s.dport & 7))))
        return 0;
    /* the canonical 4-tuple: (address, port) pairs compared as Python tuples */
    int cmp = memcmp(s.src, s.dst, s.alen);
    int side = cmp > 0 || (cmp == 0 && s.sport > s.dport);
    const uint8_t *a = side ? s.dst : s.src, *b = side ? s.src : s.dst;
    uint16_t ap = side ? s.dport : s.sport, bp = side ? s.sport : s.dport;
    uint8_t key[40];
    size_t klen = 0;
    key[klen++] = s.alen;
    memcpy(key + klen, a, s.alen);
    klen += s.alen;
    key[klen++] = (uint8_t)(ap >> 8);
    key[klen++] = (uint8_t)ap;
    memcpy(key + klen, b, s.alen);
    klen += s.alen;
    key[klen++] = (uint8_t)(bp >> 8);
    key[klen++] = (uint8_t)bp;
    hent_t *e = htab_get(&self->index, key, klen);
    flow_t *f;
    if (!e) {
        if (GROW(self->flows, self->cap_flows, self->n_flows, 64) < 0)
            return -1;
        e = htab_put(&self->index, key, klen);
        if (!e)
            return -1;
        e->value = (int64_t)self->n_flows;
        f = &self->flows[self->n_flows++];
        memset(f, 0, sizeof *f);
        memcpy(f->key, key, klen);
        f->alen = s.alen;
    } else {
        f = &self->flows[e->value];
    }
    int64_t ts = pkt->ts_ns;
    piece_t *p = f->n ? &f->pieces[f->n - 1] : NULL;
    if (!p || (s.flags & TH_SYN) || ts - p->ts1 > self->linger_ns) {
        if (GROW(f->pieces, f->cap, f->n, 2) < 0)
            return -1;
        p = &f->pieces[f->n++];
        memset(p, 0, sizeof *p);
        p->at = pkt->offset;
        p->ts0 = ts;
        p->side = side;
        p->flags = s.flags;
        p->seq = s.seq;
    }
    p->ts1 = ts;
    if (s.flags & TH_FIN)
        p->fin[side] = 1;
    if (s.flags & TH_RST)
        p->rst = 1;
    int64_t n = (int64_t)s.plen + s.missing;
    if (n) {
        if (!p->has_first[side]) {
            p->has_first[side] = 1;
            p->first[side] = s.seq;
            p->hwm[side] = n;
        } else {
            int64_t h = p->hwm[side];
            int64_t at = h + rel32(s.seq, p->first[side] + (uint32_t)h);
            if (at + n > h)
                p->hwm[side] = at + n;
        }
    }
    return 0;
}

static PyObject *Scanner_feed(Scanner *self, PyObject *arg) {
    return walker_feed_py(&self->w, &self->busy, arg, on_packet, self);
}

static PyObject *opt_u32(int has, uint32_t v) { return has ? PyLong_FromUnsignedLong(v) : Py_NewRef(Py_None); }

static PyObject *Scanner_result(Scanner *self, PyObject *unused) {
    if (in_use(self->busy))
        return NULL;
    PyObject *flows = PyDict_New();
    if (!flows)
        return NULL;
    for (size_t i = 0; i < self->n_flows; i++) {
        flow_t *f = &self->flows[i];
        int alen = f->alen;
        PyObject *key = Py_BuildValue("(y#iy#i)", f->key + 1, (Py_ssize_t)alen, rd16be(f->key + 1 + alen),
                                      f->key + 3 + alen, (Py_ssize_t)alen, rd16be(f->key + 3 + 2 * alen));
        PyObject *list = PyList_New((Py_ssize_t)f->n);
        if (!key || !list || PyDict_SetItem(flows, key, list) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(list);
            Py_DECREF(flows);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(list);
        for (size_t j = 0; j < f->n; j++) {
            piece_t *p = &f->pieces[j];
            PyObject *t = Py_BuildValue("(LLLiikOOONLNL)", (long long)p->at, (long long)p->ts0,
                                        (long long)p->ts1, p->side, p->flags, (unsigned long)p->seq,
                                        p->fin[0] ? Py_True : Py_False, p->fin[1] ? Py_True : Py_False,
                                        p->rst ? Py_True : Py_False, opt_u32(p->has_first[0], p->first[0]),
                                        (long long)p->hwm[0], opt_u32(p->has_first[1], p->first[1]),
                                        (long long)p->hwm[1]);
            if (!t) {
                Py_DECREF(flows);
                return NULL;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)j, t);
        }
    }
    return Py_BuildValue("{s:L,s:L,s:N}", "packets", (long long)self->packets, "captured_bytes",
                         (long long)self->captured, "flows", flows);
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_O, "the range's next bytes; False when it has seen its end"},
    {"result", (PyCFunction)Scanner_result, METH_NOARGS, "the plan of the range (plan.scan_range's)"},
    {NULL},
};

PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketpy.capture._native.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TCP headers of a byte range (rocketpy.capture.plan.scan_range in C).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};
