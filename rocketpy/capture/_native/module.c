/* The Python face of the compiled decoder: rocketpy.capture._native.
 *
 *   configure(...)            the columns, tables, flag bits and callbacks (rocketpy.capture.schema)
 *   Decoder(...)              rocketpy.capture.engine.NativeBatchDecoder drives it
 *   Scanner(...)              TCP headers of a byte range, for the Spark job's plan
 *   Tally(...)                the summary's counts of Decoder batches (tally.c)
 *   jsonl(...), ext_json(...) JSON text of record batches (the CLI's writers)
 *   LAYOUT                    the frame-layout constants this code assumes
 */
#include "decoder.h"
#include "cost_module.h"
#include <sys/random.h>
#include <time.h>

int native_set_languages(PyObject *by_name);
extern PyTypeObject ScannerType, TallyType;

/* ---------------------------------------------------------------- configure */

static int load_table(PyObject *dict, name_table_t *t) {
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "name tables are dicts");
        return -1;
    }
    PyObject *items = PyDict_Items(dict);
    if (!items || PyList_Sort(items) < 0) {
        Py_XDECREF(items);
        return -1;
    }
    size_t n = (size_t)PyList_GET_SIZE(items);
    memset(t->direct, 0, sizeof t->direct);
    t->values = PyMem_RawMalloc((n + 1) * sizeof(int64_t));
    t->names = PyMem_RawMalloc((n + 1) * sizeof(str_t));
    if (!t->values || !t->names) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 1), &len);
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(it, 0));
        if (!s || (v == -1 && PyErr_Occurred())) {
            Py_DECREF(items);
            return -1;
        }
        char *copy = PyMem_RawMalloc((size_t)len + 1);
        if (!copy) {
            Py_DECREF(items);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(copy, s, (size_t)len + 1);
        t->values[i] = v;
        t->names[i] = str_of(copy, (size_t)len);
        if (v >= 0 && v < DIRECT_NAMES)
            t->direct[v] = t->names[i];
    }
    t->n = n;
    Py_DECREF(items);
    return 0;
}

/* columns: [(name, DDL type), ...] (rocketpy.capture.schema.SCHEMA) into CFG.columns */
static int load_columns(PyObject *columns) {
    Py_ssize_t n = PyList_GET_SIZE(columns);
    if (n > MAX_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "the compiled decoder writes at most %d columns, the schema "
                     "has %zd", MAX_COLUMNS, n);
        return -1;
    }
    PyObject *names = PyList_New(n);
    if (!names)
        return -1;
    int seen[F_COUNT] = {0};
    for (int f = 0; f < F_COUNT; f++)
        CFG.at[f] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name;
        const char *ddl, *text;
        Py_ssize_t len;
        int field = -1, kind, want;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(columns, i), "Us", &name, &ddl)
            || !(text = PyUnicode_AsUTF8AndSize(name, &len))) {
            Py_DECREF(names);
            return -1;
        }
        if (column_field(text, (size_t)len, &field, &want) < 0 || seen[field]) {
            PyErr_Format(PyExc_ValueError, "the compiled decoder has no value for %s column %R",
                         field < 0 ? "a" : "a second", name);
            Py_DECREF(names);
            return -1;
        }
        if (column_kind(ddl, &kind) < 0 || kind != want) {
            PyErr_Format(PyExc_ValueError, "column %R: the compiled decoder does not write %s values "
                         "there", name, ddl);
            Py_DECREF(names);
            return -1;
        }
        seen[field] = 1;
        CFG.at[field] = (int)i;
        CFG.columns[i].field = field;
        CFG.columns[i].kind = kind;
        Py_INCREF(name);
        PyList_SET_ITEM(names, i, name);
    }
    CFG.n_columns = (int)n;
    CFG.column_names = names;
    return 0;
}

/* a flag bit or a request code: an int32 */
static int load_int32(PyObject *o, int32_t *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "flag bits and codes are int32");
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"columns", "request_names", "response_names", "version_names",
                             "language_names", "serialize_names", "language_by_name",
                             "flag_response", "flag_oneway", "registration", "header_fallback",
                             "summary", "summary_markers", "capture_format_error", NULL};
    PyObject *columns, *req, *resp, *ver, *lang, *ser, *by_name, *fresp, *foneway, *registration;
    PyObject *fallback, *summary, *markers, *error;
    if (CFG.header_fallback) {     /* decoders may be reading the tables without the GIL */
        PyErr_SetString(PyExc_RuntimeError, "rocketpy.capture._native is configured already");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!O!O!O!O!O!O!O!OOOO", kwlist, &PyList_Type,
                                     &columns, &PyDict_Type, &req, &PyDict_Type, &resp, &PyDict_Type,
                                     &ver, &PyDict_Type, &lang, &PyDict_Type, &ser, &PyDict_Type,
                                     &by_name, &PyLong_Type, &fresp, &PyLong_Type, &foneway,
                                     &PyLong_Type, &registration, &fallback, &summary, &markers,
                                     &error))
        return NULL;
    if (load_columns(columns) < 0 || load_table(req, &CFG.request) < 0
        || load_table(resp, &CFG.response) < 0 || load_table(ver, &CFG.version) < 0
        || load_table(lang, &CFG.language) < 0 || load_table(ser, &CFG.serialize) < 0
        || load_int32(fresp, &CFG.flag_response) < 0 || load_int32(foneway, &CFG.flag_oneway) < 0
        || load_int32(registration, &CFG.registration) < 0 || native_set_languages(by_name) < 0)
        return NULL;
    Py_INCREF(fallback);
    CFG.header_fallback = fallback;
    Py_INCREF(summary);
    CFG.summary = summary;
    Py_INCREF(markers);
    CFG.summary_markers = markers;
    Py_INCREF(error);
    CaptureFormatError = error;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- Decoder */

/* a bitmap of 65536 ports from an iterable (NULL: None or empty, every port, as in Python) */
int ports_bitmap(PyObject *ports, uint8_t **out) {
    *out = NULL;
    if (ports == Py_None)
        return 0;
    PyObject *it = PyObject_GetIter(ports), *p;
    if (!it)
        return -1;
    uint8_t *bits = PyMem_RawCalloc(65536 / 8, 1);
    if (!bits) {
        Py_DECREF(it);
        PyErr_NoMemory();
        return -1;
    }
    int any = 0;
    while ((p = PyIter_Next(it))) {
        long v = PyLong_AsLong(p);
        Py_DECREF(p);
        if (v == -1 && PyErr_Occurred())
            break;
        if (v >= 0 && v < 65536)
            bits[v >> 3] |= (uint8_t)(1 << (v & 7));
        any = 1;
    }
    Py_DECREF(it);
    if (PyErr_Occurred() || !any) {
        PyMem_RawFree(bits);
        return PyErr_Occurred() ? -1 : 0;
    }
    *out = bits;
    return 0;
}

static int Decoder_init(Decoder *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ports", "batch_rows", "abandon_after", "max_pending_bytes",
                             "hole_timeout_ns", "linger_ns", "max_connections",
                             "max_buffered_bytes", "max_pending_segments", NULL};
    PyObject *ports = Py_None;
    long long batch_rows = 16384, abandon_after = DEFAULT_ABANDON_AFTER;
    long long max_pending = DEFAULT_MAX_PENDING_BYTES, hole_timeout = DEFAULT_HOLE_TIMEOUT_NS;
    long long linger = DEFAULT_LINGER_NS, max_connections = DEFAULT_MAX_CONNECTIONS;
    long long max_buffered = DEFAULT_MAX_BUFFERED_BYTES, max_segments = DEFAULT_MAX_PENDING_SEGMENTS;
    if (!CFG.header_fallback) {
        PyErr_SetString(PyExc_RuntimeError, "rocketpy.capture._native.configure() was not called");
        return -1;
    }
    if (self->batches) {
        PyErr_SetString(PyExc_RuntimeError, "a Decoder is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OLLLLLLLL", kwlist, &ports, &batch_rows,
                                     &abandon_after, &max_pending, &hole_timeout, &linger,
                                     &max_connections, &max_buffered, &max_segments))
        return -1;
    self->batch_rows = batch_rows > 0 ? batch_rows : 16384;
    self->abandon_after = abandon_after;
    self->max_pending_bytes = max_pending;
    self->hole_timeout_ns = hole_timeout;
    self->linger_ns = linger;
    self->max_connections = max_connections > 0 ? max_connections : 1;
    self->max_buffered_bytes = max_buffered;
    self->max_pending_segments = max_segments;
    self->end = -1;
    if (ports_bitmap(ports, &self->ports) < 0)
        return -1;
    self->batches = PyList_New(0);
    self->edges = PyDict_New();
    self->summaries = summary_cache_new();
    if (!self->batches || !self->edges || !self->summaries)
        return -1;
    return 0;
}

static void Decoder_dealloc(Decoder *self) {
    decoder_clear(self);
    walker_free(&self->w);
    stats_free(&self->st);
    columns_free(&self->cols);
    buf_free(&self->file);
    header_free(&self->hdr);
    header_free(&self->scratch);
    buf_free(&self->errbuf);
    summary_cache_free(self->summaries);
    PyMem_RawFree(self->ports);
    Py_XDECREF(self->batches);
    Py_XDECREF(self->edges);
    Py_XDECREF(self->plan_ids);
    Py_XDECREF(self->plan_live_ids);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int tps_of(PyObject *o, unsigned __int128 *out) {
    /* ticks per second, saturated at 2**100 (anything larger reads every stamp as 0 ns) */
    PyObject *limit = PyLong_FromString("1267650600228229401496703205376", NULL, 10);
    if (!limit)
        return -1;
    int big = PyObject_RichCompareBool(o, limit, Py_GT);
    Py_DECREF(limit);
    if (big < 0)
        return -1;
    if (big) {
        *out = (unsigned __int128)1 << 100;
        return 0;
    }
    PyObject *sixty_four = PyLong_FromLong(64), *high = NULL;
    if (sixty_four)
        high = PyNumber_Rshift(o, sixty_four);
    Py_XDECREF(sixty_four);
    if (!high)
        return -1;
    unsigned long long hi = PyLong_AsUnsignedLongLongMask(high), lo = PyLong_AsUnsignedLongLongMask(o);
    Py_DECREF(high);
    if (PyErr_Occurred())
        return -1;
    unsigned __int128 v = (unsigned __int128)hi << 64 | lo;
    if (!v) {
        PyErr_SetString(PyExc_ValueError, "zero ticks per second");
        return -1;
    }
    *out = v;
    return 0;
}

/* the record walker for a capture file whose next byte is at `offset`
 * info: ("pcap", order, linktype, snaplen, ticks_per_sec, extra) |
 *       ("pcapng", order, [(linktype, snaplen, ticks_per_sec, ts_offset_s), ...]) */
int walker_setup(walker_t *w, PyObject *info, int64_t offset) {
    buf_clear(&w->carry);
    w->n_ifaces = 0;
    w->offset = offset;
    const char *kind, *order;
    if (PyTuple_GET_SIZE(info) < 3 || !(kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(info, 0)))
        || !(order = PyUnicode_AsUTF8(PyTuple_GET_ITEM(info, 1)))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "capture info: (kind, byte order, ...)");
        return -1;
    }
    w->be = order[0] == '>';
    if (!strcmp(kind, "pcap")) {
        unsigned long linktype, snaplen, extra;
        unsigned long long tps;
        if (!PyArg_ParseTuple(info, "sskkKk", &kind, &order, &linktype, &snaplen, &tps, &extra))
            return -1;
        w->kind = 0;
        w->linktype = (uint32_t)linktype;
        w->snaplen = (uint32_t)snaplen;
        w->ticks_per_sec = tps;
        w->extra = (uint32_t)extra;
        if (tps != 1000000 && tps != 1000000000) {
            PyErr_SetString(PyExc_ValueError, "pcap ticks per second are 10**6 or 10**9");
            return -1;
        }
    } else {
        PyObject *ifaces;
        if (!PyArg_ParseTuple(info, "ssO!", &kind, &order, &PyList_Type, &ifaces))
            return -1;
        w->kind = 1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ifaces); i++) {
            PyObject *tps_o;
            unsigned long linktype, snaplen;
            long long ts_offset;
            unsigned __int128 tps;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(ifaces, i), "kkOL", &linktype, &snaplen, &tps_o, &ts_offset)
                || tps_of(tps_o, &tps) < 0
                || walker_add_iface(w, (uint32_t)linktype, (uint32_t)snaplen, tps, ts_offset) < 0)
                return -1;
        }
    }
    return 0;
}

/* begin_file(name, index, info, offset, end=-1, readahead=0) */
static PyObject *Decoder_begin_file(Decoder *self, PyObject *args) {
    if (in_use(self->busy))
        return NULL;
    PyObject *name, *info;
    long long index, offset, end = -1, readahead = 0;
    if (!PyArg_ParseTuple(args, "OLO!L|LL", &name, &index, &PyTuple_Type, &info, &offset, &end, &readahead))
        return NULL;
    buf_clear(&self->file);
    self->has_file = name != Py_None;
    if (self->has_file) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(name, &len);
        if (!s || buf_append(&self->file, s, (size_t)len) < 0)
            return NULL;
    }
    self->file_index = index;
    if (walker_setup(&self->w, info, offset) < 0)
        return NULL;
    self->end = end;
    self->readahead_until = end >= 0 ? end + readahead : -1;
    Py_RETURN_NONE;
}

static int on_packet(void *ctx, const packet_t *pkt) { return decoder_packet(ctx, pkt); }

/* feed(data) -> True to go on, False when it wants no more bytes of this file */
static PyObject *Decoder_feed(Decoder *self, PyObject *arg) {
    return walker_feed_py(&self->w, &self->busy, arg, on_packet, self);
}

/* end_file(eof): the file's bytes are done; a record cut by the file's end is counted */
static PyObject *Decoder_end_file(Decoder *self, PyObject *arg) {
    if (in_use(self->busy))
        return NULL;
    int eof = PyObject_IsTrue(arg);
    if (eof < 0)
        return NULL;
    if (walker_truncated(&self->w) && eof)
        self->st.v[ST_TRUNCATED_RECORDS]++;
    Py_RETURN_NONE;
}

static PyObject *Decoder_end_range(Decoder *self, PyObject *unused) {
    if (in_use(self->busy))
        return NULL;
    if (!self->reading_ahead && decoder_end_range(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Decoder_finish(Decoder *self, PyObject *unused) {
    if (in_use(self->busy))
        return NULL;
    if (decoder_finish(self) < 0 || decoder_flush_batch(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* take() -> [(rows, columns), ...]: the finished batches so far (flush=True: also the rows
 * collected since the last one) */
static PyObject *Decoder_take(Decoder *self, PyObject *args) {
    if (in_use(self->busy))
        return NULL;
    int flush = 0;
    if (!PyArg_ParseTuple(args, "|p", &flush))
        return NULL;
    if (flush && decoder_flush_batch(self) < 0)
        return NULL;
    PyObject *out = self->batches;
    self->batches = PyList_New(0);
    if (!self->batches) {
        self->batches = out;
        return NULL;
    }
    return out;
}

static PyObject *Decoder_stats(Decoder *self, PyObject *unused) {
    if (in_use(self->busy))
        return NULL;
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (int i = 0; i < ST_COUNT; i++) {
        if (!self->st.v[i])
            continue;
        PyObject *v = PyLong_FromLongLong(self->st.v[i]);
        if (!v || PyDict_SetItemString(d, STAT_NAMES[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    if (self->st.unanswered_touched) {
        PyObject *u = PyDict_New();
        if (!u || PyDict_SetItemString(d, "unanswered_requests", u) < 0) {
            Py_XDECREF(u);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(u);
        for (size_t i = 0; i < self->st.n_unanswered; i++) {
            PyObject *k = PyLong_FromLongLong(self->st.unanswered[2 * i]);
            PyObject *v = PyLong_FromLongLong(self->st.unanswered[2 * i + 1]);
            int r = k && v ? PyDict_SetItem(u, k, v) : -1;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (r < 0) {
                Py_DECREF(d);
                return NULL;
            }
        }
    }
    return d;
}

/* set_plan(boundaries, live, limits): the byte range's plan (decoder.RangePlan's dicts) */
static PyObject *Decoder_set_plan(Decoder *self, PyObject *args) {
    if (in_use(self->busy))
        return NULL;
    PyObject *boundaries, *live, *limits, *k, *v;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyDict_Type, &boundaries, &PyDict_Type, &live,
                          &PyDict_Type, &limits))
        return NULL;
    Py_ssize_t pos = 0, i;
    self->plan_ids = PyList_New(0);
    self->plan_live_ids = PyList_New(0);
    self->plan_live = PyMem_RawCalloc((size_t)PyDict_Size(live) * 2 + 2, sizeof(dirstart_t));
    self->plan_limits = PyMem_RawCalloc((size_t)PyDict_Size(limits) * 2 + 2, sizeof(int64_t));
    if (!self->plan_ids || !self->plan_live_ids || !self->plan_live || !self->plan_limits)
        return PyErr_NoMemory();
    while (PyDict_Next(boundaries, &pos, &k, &v)) {
        long long key[2];
        if (!PyArg_ParseTuple(k, "LL", &key[0], &key[1]))
            return NULL;
        int64_t bkey[2] = {key[0], key[1]};
        hent_t *e = htab_put(&self->boundaries, bkey, sizeof bkey);
        if (!e || PyList_Append(self->plan_ids, v) < 0)
            return NULL;
        e->value = PyList_GET_SIZE(self->plan_ids) - 1;
    }
    pos = 0;
    i = 0;
    while (PyDict_Next(live, &pos, &k, &v)) {
        Py_buffer src, dst;
        unsigned int sport, dport;
        PyObject *id, *starts;
        if (!PyArg_ParseTuple(k, "y*Iy*I", &src, &sport, &dst, &dport))
            return NULL;
        uint8_t key[40];
        int ok = src.len == dst.len && (src.len == 4 || src.len == 16);
        int klen = 0;
        if (ok) {
            key[0] = (uint8_t)src.len;
            memcpy(key + 1, src.buf, (size_t)src.len);
            key[1 + src.len] = (uint8_t)(sport >> 8);
            key[2 + src.len] = (uint8_t)sport;
            memcpy(key + 3 + src.len, dst.buf, (size_t)dst.len);
            key[3 + 2 * src.len] = (uint8_t)(dport >> 8);
            key[4 + 2 * src.len] = (uint8_t)dport;
            klen = 5 + 2 * (int)src.len;
        }
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "plan: bad address");
            return NULL;
        }
        if (!PyArg_ParseTuple(v, "OO", &id, &starts))
            return NULL;
        hent_t *e = htab_put(&self->live, key, (size_t)klen);
        if (!e || PyList_Append(self->plan_live_ids, id) < 0)
            return NULL;
        e->value = i;
        for (int d = 0; d < 2; d++) {
            PyObject *seq_o;
            long long offset;
            int synced = 0;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(starts, d), "OL|p", &seq_o, &offset, &synced))
                return NULL;
            dirstart_t *st = &self->plan_live[2 * i + d];
            st->offset = offset;
            st->synced = synced;
            st->has_seq = seq_o != Py_None;
            if (st->has_seq) {
                st->seq = (uint32_t)PyLong_AsUnsignedLongMask(seq_o);
                if (PyErr_Occurred())
                    return NULL;
            }
        }
        i++;
    }
    pos = 0;
    i = 0;
    while (PyDict_Next(limits, &pos, &k, &v)) {
        Py_ssize_t len;
        const char *id = PyUnicode_AsUTF8AndSize(k, &len);
        if (!id)
            return NULL;
        hent_t *e = htab_put(&self->limits, id, (size_t)len);
        if (!e)
            return NULL;
        e->value = i;
        for (int d = 0; d < 2; d++) {
            PyObject *x = PySequence_Fast_GET_ITEM(v, d);
            self->plan_limits[2 * i + d] = x == Py_None ? -1 : PyLong_AsLongLong(x);
            if (PyErr_Occurred())
                return NULL;
        }
        i++;
    }
    self->has_plan = 1;
    Py_RETURN_NONE;
}

static PyObject *Decoder_get_edges(Decoder *self, void *unused) {
    Py_INCREF(self->edges);
    return self->edges;
}

static PyObject *Decoder_get_reading_ahead(Decoder *self, void *unused) {
    return PyBool_FromLong(self->reading_ahead);
}

static PyObject *Decoder_get_unsettled(Decoder *self, void *unused) {
    return PyLong_FromLongLong(self->unsettled);
}

static PyObject *Decoder_get_table(Decoder *self, void *unused) {
    if (in_use(self->busy))
        return NULL;
    return Py_BuildValue("{s:L,s:L,s:L,s:L}", "connections", (long long)self->n_live,
                         "buffered_bytes", (long long)self->buffered, "peak_connections",
                         (long long)self->peak_live, "peak_buffered_bytes",
                         (long long)self->peak_buffered);
}

static PyMethodDef Decoder_methods[] = {
    {"begin_file", (PyCFunction)Decoder_begin_file, METH_VARARGS, "start reading a capture file (or a range of one)"},
    {"feed", (PyCFunction)Decoder_feed, METH_O, "the file's next bytes; False when no more are wanted"},
    {"end_file", (PyCFunction)Decoder_end_file, METH_O, "the file is done (eof: it ended there)"},
    {"end_range", (PyCFunction)Decoder_end_range, METH_NOARGS, "the range's own packets are done"},
    {"finish", (PyCFunction)Decoder_finish, METH_NOARGS, "end of the capture: finish every connection"},
    {"take", (PyCFunction)Decoder_take, METH_VARARGS, "the finished column sets"},
    {"stats", (PyCFunction)Decoder_stats, METH_NOARGS, "the counters, as rocketpy.capture.Stats keys"},
    {"set_plan", (PyCFunction)Decoder_set_plan, METH_VARARGS, "decode a byte range by this plan"},
    {NULL},
};

static PyGetSetDef Decoder_getset[] = {
    {"edges", (getter)Decoder_get_edges, NULL, "range mode: what the job settles", NULL},
    {"reading_ahead", (getter)Decoder_get_reading_ahead, NULL, NULL, NULL},
    {"unsettled", (getter)Decoder_get_unsettled, NULL, NULL, NULL},
    {"table", (getter)Decoder_get_table, NULL, "the live connection table: its size now and at most", NULL},
    {NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketpy.capture._native.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The compiled capture decoder (rocketpy.capture.decoder.CaptureDecoder in C).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
    .tp_getset = Decoder_getset,
};

/* ---------------------------------------------------------------- module */

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, "tables and callbacks"},
    {"jsonl", native_jsonl, METH_VARARGS, "JSON Lines text of a record batch's columns"},
    {"ext_json", native_ext_json, METH_VARARGS, "the ext_fields map column as JSON text per row"},
    COST_METHODS
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rocketpy.capture._native",
    "The compiled capture decoder (see rocketpy.capture.engine).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    uint64_t key[3];
    if (getrandom(key, sizeof key, GRND_NONBLOCK) != sizeof key)
        key[0] = key[1] = key[2] = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)key;
    for (int i = 0; i < 3; i++)
        HASH_KEY[i] = key[i] | 1;
    if (PyType_Ready(&DecoderType) < 0 || PyType_Ready(&ScannerType) < 0 || PyType_Ready(&ChunkType) < 0
        || PyType_Ready(&TallyType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0)
        return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0)
        return NULL;
    Py_INCREF(&TallyType);
    if (PyModule_AddObject(m, "Tally", (PyObject *)&TallyType) < 0)
        return NULL;
    PyObject *layout = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "LENGTH_SIZE", LENGTH_SIZE,
                                     "PREFIX_SIZE", PREFIX_SIZE, "DEFAULT_MAX_FRAME_LENGTH", MAX_FRAME_LENGTH,
                                     "JSON", SER_JSON, "ROCKETMQ", SER_ROCKETMQ, "ROCKETMQ_FIXED_SIZE",
                                     RMQ_FIXED_SIZE, "ROCKETMQ_MIN_HEADER", RMQ_MIN_HEADER, "FLAG_AT",
                                     RMQ_FLAG_AT, "LANGUAGE_AT", RMQ_LANGUAGE_AT,
                                     "MAX_LANGUAGE", RMQ_MAX_LANGUAGE);
    if (!layout || PyModule_AddObject(m, "LAYOUT", layout) < 0)
        return NULL;
    PyObject *limits = Py_BuildValue(
        "{s:i,s:i,s:i,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "MAX_HUNT_HEADER", MAX_HUNT_HEADER,
        "MAX_PENDING_REQUESTS", MAX_PENDING_REQUESTS, "MAX_RECORD", MAX_RECORD, "REORDER_NS",
        REORDER_NS, "ABANDON_AFTER", DEFAULT_ABANDON_AFTER, "MAX_PENDING_BYTES",
        DEFAULT_MAX_PENDING_BYTES, "HOLE_TIMEOUT_NS", DEFAULT_HOLE_TIMEOUT_NS, "LINGER_NS",
        DEFAULT_LINGER_NS, "MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS, "MAX_BUFFERED_BYTES",
        DEFAULT_MAX_BUFFERED_BYTES, "MAX_PENDING_SEGMENTS", DEFAULT_MAX_PENDING_SEGMENTS);
    if (!limits || PyModule_AddObject(m, "LIMITS", limits) < 0)
        return NULL;
    return m;
}
