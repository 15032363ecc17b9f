/* Connections, request/response pairing and the capture decoder (rocketpy/capture/decoder.py
 * and rows.py), statement for statement; byte ranges as CaptureDecoder's range mode. */
#include "decoder.h"


/* ======================================================== opaque -> request (insertion order) */

/* keyed, as the core's other indexes: opaques are a stranger's, and a multiplicative hash's low
 * bits are the opaque's (i << 16 all shared one slot, and n requests cost n^2 probes) */
static size_t slot(const reqmap_t *m, int32_t opaque) {
    return (size_t)hash_number((uint32_t)opaque) & (m->idx_cap - 1);
}

static int64_t req_find(const reqmap_t *m, int32_t opaque) {
    if (!m->idx_cap)
        return -1;
    for (size_t i = slot(m, opaque);; i = (i + 1) & (m->idx_cap - 1)) {
        int32_t k = m->idx[i];
        COST(PROBES, 1);
        if (!k)
            return -1;
        req_t *e = &m->e[k - 1];
        if (e->alive && e->opaque == opaque)
            return k - 1;
    }
}

static int req_reindex(reqmap_t *m, size_t want) {
    /* compact the entries (keeping their order) and rebuild the index for `want` entries */
    size_t j = 0;
    COST(MOVES, m->n);
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].alive)
            m->e[j++] = m->e[i];
    m->n = j;
    m->head = 0;
    if (want > m->cap) {
        req_t *e = PyMem_RawRealloc(m->e, want * sizeof(req_t));
        if (!e) {
            no_memory();
            return -1;
        }
        m->e = e;
        m->cap = want;
    }
    size_t ic = 16;
    while (ic < 2 * m->cap)
        ic *= 2;
    if (ic != m->idx_cap) {
        int32_t *idx = PyMem_RawRealloc(m->idx, ic * sizeof(int32_t));
        if (!idx) {
            no_memory();
            return -1;
        }
        m->idx = idx;
        m->idx_cap = ic;
    }
    memset(m->idx, 0, m->idx_cap * sizeof(int32_t));
    COST(MOVES, m->idx_cap);
    for (size_t i = 0; i < m->n; i++) {
        size_t s = slot(m, m->e[i].opaque);
        while (m->idx[s]) {
            s = (s + 1) & (m->idx_cap - 1);
            COST(PROBES, 1);
        }
        m->idx[s] = (int32_t)i + 1;
        COST(MOVES, 1);
    }
    return 0;
}

static int req_set(reqmap_t *m, int32_t opaque, int32_t code, int64_t ts, int64_t pf, int64_t po) {
    int64_t i = req_find(m, opaque);
    if (i >= 0) {              /* a dict keeps an updated key where it was */
        m->e[i].code = code;
        m->e[i].ts = ts;
        m->e[i].pos_file = pf;
        m->e[i].pos_off = po;
        return 0;
    }
    if (m->n == m->cap) {
        size_t want = m->cap < 16 ? 16 : m->cap;
        if (2 * (m->live + 1) > want)
            want *= 2;
        if (req_reindex(m, want) < 0)
            return -1;
    }
    req_t *e = &m->e[m->n];
    e->opaque = opaque;
    e->code = code;
    e->ts = ts;
    e->pos_file = pf;
    e->pos_off = po;
    e->alive = 1;
    size_t s = slot(m, opaque);
    while (m->idx[s]) {
        s = (s + 1) & (m->idx_cap - 1);
        COST(PROBES, 1);
    }
    m->idx[s] = (int32_t)m->n + 1;
    COST(MOVES, 1);
    m->n++;
    m->live++;
    return 0;
}

static int req_pop(reqmap_t *m, int32_t opaque, int32_t *code, int64_t *ts) {
    int64_t i = req_find(m, opaque);
    if (i < 0)
        return 0;
    *code = m->e[i].code;
    *ts = m->e[i].ts;
    m->e[i].alive = 0;
    m->live--;
    return 1;
}

static req_t *req_first(reqmap_t *m) {
    while (m->head < m->n && !m->e[m->head].alive) {
        m->head++;
        COST(PROBES, 1);
    }
    return m->head < m->n ? &m->e[m->head] : NULL;
}

static void req_clear(reqmap_t *m) {
    m->n = m->live = m->head = 0;
    if (m->idx) {
        memset(m->idx, 0, m->idx_cap * sizeof(int32_t));
        COST(MOVES, m->idx_cap);
    }
}

static void req_free(reqmap_t *m) {
    PyMem_RawFree(m->e);
    PyMem_RawFree(m->idx);
    memset(m, 0, sizeof *m);
}

/* ======================================================== rows */

static str_t lookup_ext(const row_t *r, const char *name) {
    size_t n = strlen(name);
    if (!r->has_ext)
        return STR_NULL;
    for (size_t i = 0; i < r->n_ext; i++)
        if ((size_t)r->ext[i].key.n == n && !memcmp(r->ext[i].key.p, name, n))
            return r->ext[i].value;
    return STR_NULL;
}

static void header_columns(row_t *r, const header_t *h) {
    r->has_header = 1;
    r->code = h->k.code;
    r->flag = h->k.flag;
    r->opaque = h->k.opaque;
    r->version = h->k.version;
    r->code_name = table_name(is_response(h->k.flag) ? &CFG.response : &CFG.request, h->k.code);
    r->language = h->language;
    r->version_name = table_name(&CFG.version, h->k.version);
    r->remark = h->k.remark;
    r->has_ext = h->k.has_ext;
    r->ext = h->k.ext;
    r->n_ext = h->k.n_ext;
}

/* rows.frame_row for a cut frame (pairing columns left null) */
static int build_row(Decoder *dec, conn_t *c, int d, const framer_t *f, const frame_t *fr, row_t *r) {
    const uint8_t *data = frame_data(f, fr);
    size_t len = fr->data_len;
    memset(r, 0, sizeof *r);
    r->file = dec->has_file ? str_of((const char *)buf_data(&dec->file), buf_len(&dec->file)) : STR_NULL;
    r->ts_ns = fr->ts;
    r->src = str_of(c->ep[d], c->ep_len[d]);
    r->dst = str_of(c->ep[1 - d], c->ep_len[1 - d]);
    r->conn = str_of(c->conn_id, c->conn_id_len);
    r->stream_offset = fr->offset;
    r->frame_len = (int32_t)fr->length;
    if (len < PREFIX_SIZE)
        goto damaged;
    int stype = rk_frame_type(data);
    size_t hlen = (size_t)rk_frame_header_length(data);
    r->serialize_type = table_name(&CFG.serialize, stype);
    if (!fr->damaged) {
        str_t err = STR_NULL;
        int ok = hlen <= len - PREFIX_SIZE
                 ? decode_header(stype, data + PREFIX_SIZE, hlen, &dec->hdr, 1, &err, &dec->errbuf) : 0;
        if (ok < 0)
            return -1;
        int64_t body_len = fr->length - PREFIX_SIZE - (int64_t)hlen;
        r->has_body_len = 1;
        r->body_len = (int32_t)(body_len > 0 ? body_len : 0);
        if (!ok) {
            r->error = err;
            return 0;
        }
        header_columns(r, &dec->hdr);
        r->body_len = (int32_t)body_len;
        if (body_len > 0) {
            str_t broker = lookup_ext(r, "brokerName"), cluster = lookup_ext(r, "clusterName");
            int registration = r->code == CFG.registration && !is_response(r->flag);
            if (body_summary(dec->summaries, broker, cluster, registration, data + PREFIX_SIZE + hlen,
                             (size_t)body_len, &r->body_summary) < 0)
                return -1;
        }
        return 0;
    }
    {
        int64_t body_len = fr->length - PREFIX_SIZE - (int64_t)hlen;
        r->has_body_len = 1;
        r->body_len = (int32_t)(body_len > 0 ? body_len : 0);
        if (len >= PREFIX_SIZE + hlen) {
            int ok = decode_header(stype, data + PREFIX_SIZE, hlen, &dec->hdr, 0, NULL, NULL);
            if (ok < 0)
                return -1;
            if (ok)
                header_columns(r, &dec->hdr);
        }
    }
damaged:
    if (fr->damaged)
        r->error = str_of((const char *)buf_data(&f->arena) + fr->error_at, fr->error_len);
    return 0;
}

int decoder_flush_batch(Decoder *dec) {
    if (!dec->cols.rows)
        return 0;
    PyThreadState *g = gil_take();
    PyObject *b = columns_take(&dec->cols);
    int r = b ? PyList_Append(dec->batches, b) : -1;
    Py_XDECREF(b);
    gil_give(g);
    return r;
}

static int emit(Decoder *dec, const row_t *r) {
    if (dec->cols.big && decoder_flush_batch(dec) < 0)
        return -1;
    if (columns_append(&dec->cols, r) < 0)
        return -1;
    if (dec->cols.rows >= dec->batch_rows)
        return decoder_flush_batch(dec);
    return 0;
}

/* ---- held responses (Connection.held, _held_by, _woken): a release touches only the ones it
 * can release, so holding n responses costs O(n log n) however often releases run */

static void held_key(uint8_t k[5], int d, int32_t opaque) {
    k[0] = (uint8_t)d;
    memcpy(k + 1, &opaque, 4);
}

/* chain held[i] (the newest) behind its direction and opaque: 0, or -1 (set) */
static int held_link(conn_t *c, size_t i) {
    held_t *h = &c->held[i];
    uint8_t k[5];
    held_key(k, h->d, h->row.opaque);
    hent_t *e = htab_put(&c->held_by, k, sizeof k);
    if (!e)
        return -1;
    h->next_same = 0;
    if (!e->ptr) {
        e->ptr = c;
        e->value = (int64_t)((uint64_t)(i + 1) | (uint64_t)(i + 1) << 32);
    } else {
        c->held[((uint64_t)e->value >> 32) - 1].next_same = i + 1;
        e->value = (int64_t)(((uint64_t)e->value & 0xFFFFFFFFu) | (uint64_t)(i + 1) << 32);
    }
    int d = h->d;
    h->dnext = 0;
    h->dprev = c->held_last[d];
    if (c->held_last[d])
        c->held[c->held_last[d] - 1].dnext = i + 1;
    else
        c->held_first[d] = i + 1;
    c->held_last[d] = i + 1;
    return 0;
}

static int pick(conn_t *c, size_t i) {
    if (c->held[i].todo)
        return 0;
    if (GROW(c->todo, c->cap_todo, c->n_todo, 8) < 0)
        return -1;
    c->todo[c->n_todo++] = i;
    c->held[i].todo = 1;
    return 0;
}

/* a request with this opaque arrived in direction d: the first response held for it may pair */
static int wake(conn_t *c, int d, int32_t opaque) {
    if (!c->live_held[1 - d])
        return 0;
    uint8_t k[5];
    held_key(k, 1 - d, opaque);
    hent_t *e = htab_get(&c->held_by, k, sizeof k);
    return e ? pick(c, ((uint64_t)e->value & 0xFFFFFFFFu) - 1) : 0;
}

/* held[i], the first of its direction and opaque, is released */
static void unhold(conn_t *c, size_t i) {
    held_t *h = &c->held[i];
    uint8_t k[5];
    held_key(k, h->d, h->row.opaque);
    hent_t *e = htab_get(&c->held_by, k, sizeof k);
    if (h->next_same)
        e->value = (int64_t)((uint64_t)h->next_same | ((uint64_t)e->value & ~(uint64_t)0xFFFFFFFFu));
    else
        htab_del(&c->held_by, e);
    if (h->dprev)
        c->held[h->dprev - 1].dnext = h->dnext;
    else
        c->held_first[h->d] = h->dnext;
    if (h->dnext)
        c->held[h->dnext - 1].dprev = h->dprev;
    else
        c->held_last[h->d] = h->dprev;
    PyMem_RawFree(h->blob);
    h->blob = NULL;
    h->alive = 0;
    c->live_held[h->d]--;
    c->dead_held++;
}

/* drop the released entries once they outnumber the held ones (relinking the rest) */
static int held_compact(conn_t *c) {
    if (c->dead_held <= 16 || c->dead_held <= c->live_held[0] + c->live_held[1])
        return 0;
    size_t n = 0;
    COST(MOVES, c->n_held);
    for (size_t i = 0; i < c->n_held; i++)
        if (c->held[i].alive)
            c->held[n++] = c->held[i];
    c->n_held = n;
    c->dead_held = 0;
    htab_clear(&c->held_by);
    c->held_first[0] = c->held_first[1] = c->held_last[0] = c->held_last[1] = 0;
    for (size_t i = 0; i < n; i++)
        if (held_link(c, i) < 0)
            return -1;
    return 0;
}

/* every held response gone (finished or handed over); their blobs freed */
static void held_clear(conn_t *c) {
    COST(MOVES, c->n_held);
    for (size_t i = 0; i < c->n_held; i++)
        PyMem_RawFree(c->held[i].blob);
    c->n_held = c->live_held[0] = c->live_held[1] = c->dead_held = c->n_todo = 0;
    c->held_first[0] = c->held_first[1] = c->held_last[0] = c->held_last[1] = 0;
    htab_clear(&c->held_by);
}

/* a row's strings copied into one blob (a held response outlives its frame) */
static int hold(Decoder *dec, conn_t *c, const row_t *r, int d) {
    str_t *fields[] = {(str_t *)&r->file, (str_t *)&r->src, (str_t *)&r->dst, (str_t *)&r->conn,
                       (str_t *)&r->serialize_type, (str_t *)&r->code_name, (str_t *)&r->language,
                       (str_t *)&r->version_name, (str_t *)&r->remark, (str_t *)&r->body_summary,
                       (str_t *)&r->request_code_name, (str_t *)&r->error};
    size_t nf = sizeof fields / sizeof *fields, total = r->n_ext * sizeof(kv_t);
    for (size_t i = 0; i < nf; i++)
        total += (size_t)fields[i]->n;
    for (size_t i = 0; i < r->n_ext; i++)
        total += (size_t)r->ext[i].key.n + (size_t)r->ext[i].value.n;
    if (GROW(c->held, c->cap_held, c->n_held, 4) < 0)
        return -1;
    uint8_t *blob = PyMem_RawMalloc(total ? total : 1);
    if (!blob) {
        no_memory();
        return -1;
    }
    held_t *h = &c->held[c->n_held++];
    h->row = *r;
    h->blob = blob;
    h->d = d;
    h->pos_file = dec->pos_file;
    h->pos_off = dec->pos_off;
    kv_t *ext = (kv_t *)blob;
    uint8_t *p = blob + r->n_ext * sizeof(kv_t);
    str_t *dst[] = {&h->row.file, &h->row.src, &h->row.dst, &h->row.conn, &h->row.serialize_type,
                    &h->row.code_name, &h->row.language, &h->row.version_name, &h->row.remark,
                    &h->row.body_summary, &h->row.request_code_name, &h->row.error};
    for (size_t i = 0; i < nf; i++)
        if (fields[i]->p) {
            memcpy(p, fields[i]->p, (size_t)fields[i]->n);
            dst[i]->p = (const char *)p;
            p += fields[i]->n;
        }
    for (size_t i = 0; i < r->n_ext; i++) {
        memcpy(p, r->ext[i].key.p, (size_t)r->ext[i].key.n);
        ext[i].key = str_of((const char *)p, (size_t)r->ext[i].key.n);
        p += r->ext[i].key.n;
        memcpy(p, r->ext[i].value.p, (size_t)r->ext[i].value.n);
        ext[i].value = str_of((const char *)p, (size_t)r->ext[i].value.n);
        p += r->ext[i].value.n;
    }
    h->row.ext = ext;
    h->alive = 1;
    h->todo = 0;
    c->live_held[d]++;
    return held_link(c, c->n_held - 1);
}

/* a row as a dict of the schema's columns, in its order */
static PyObject *row_dict(const row_t *r) {
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < CFG.n_columns; i++) {
        PyObject *v = field_value(r, CFG.columns[i].field);
        if (!v || PyDict_SetItem(d, PyList_GET_ITEM(CFG.column_names, i), v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* ======================================================== edges (range mode) */

static PyObject *conn_edge(Decoder *dec, conn_t *c) {
    PyObject *key = PyUnicode_DecodeUTF8(c->conn_id, (Py_ssize_t)c->conn_id_len, "replace");
    if (!key)
        return NULL;
    PyObject *e = PyDict_GetItemWithError(dec->edges, key);
    if (!e && !PyErr_Occurred()) {
        e = Py_BuildValue("{s:O,s:O,s:([],[]),s:[]}", "found", Py_False, "dirs", Py_None,
                          "pending", "responses");
        if (e && PyDict_SetItem(dec->edges, key, e) < 0)
            Py_CLEAR(e);
        Py_XDECREF(e);        /* the dict holds it */
    }
    Py_DECREF(key);
    return e;
}

static int edge_response(Decoder *dec, conn_t *c, const row_t *r, int d, int64_t pf, int64_t po) {
    PyThreadState *g = gil_take();
    PyObject *e = conn_edge(dec, c), *row = e ? row_dict(r) : NULL;
    PyObject *item = row ? Py_BuildValue("(Ni(LL))", row, d, (long long)pf, (long long)po) : NULL;
    int res = item ? PyList_Append(PyDict_GetItemString(e, "responses"), item) : -1;
    Py_XDECREF(item);
    gil_give(g);
    return res;
}

static int conn_settled(const conn_t *c) {
    for (int d = 0; d < 2; d++) {
        const framer_t *f = &c->dirs[d].fr;
        if (!(f->settled || f->abandoned || !f->has_limit))
            return 0;
    }
    return 1;
}

static PyObject *opt_int(int has, int64_t v) {
    return has ? PyLong_FromLongLong(v) : Py_NewRef(Py_None);
}

static int hand_over_(Decoder *dec, conn_t *c) {
    PyObject *e = conn_edge(dec, c);
    if (!e)
        return -1;
    if (!conn_settled(c))
        dec->st.v[ST_READAHEAD_EXHAUSTED]++;
    PyObject *responses = PyDict_GetItemString(e, "responses");
    for (size_t i = 0; i < c->n_held; i++) {
        if (!c->held[i].alive)
            continue;
        PyObject *row = row_dict(&c->held[i].row);
        PyObject *item = row ? Py_BuildValue("(Ni(LL))", row, c->held[i].d, (long long)c->held[i].pos_file,
                                             (long long)c->held[i].pos_off) : NULL;
        int r = item ? PyList_Append(responses, item) : -1;
        Py_XDECREF(item);
        if (r < 0) {
            held_clear(c);
            return -1;
        }
    }
    held_clear(c);
    PyObject *pending = PyDict_GetItemString(e, "pending");
    for (int d = 0; d < 2; d++) {
        reqmap_t *m = &c->requests[d];
        PyObject *list = PyTuple_GET_ITEM(pending, d);
        for (size_t i = 0; i < m->n; i++) {
            if (!m->e[i].alive)
                continue;
            PyObject *drained = c->has_drained[d]
                ? Py_BuildValue("(LL)", (long long)c->drained_file[d], (long long)c->drained_off[d])
                : Py_NewRef(Py_None);
            PyObject *item = drained ? Py_BuildValue("(iiL(LL)N)", m->e[i].opaque, m->e[i].code,
                                                     (long long)m->e[i].ts, (long long)m->e[i].pos_file,
                                                     (long long)m->e[i].pos_off, drained) : NULL;
            int r = item ? PyList_Append(list, item) : -1;
            Py_XDECREF(item);
            if (r < 0)
                return -1;
        }
        req_clear(m);
    }
    if (c->dirs[0].fr.found || c->dirs[1].fr.found)
        if (PyDict_SetItemString(e, "found", Py_True) < 0)
            return -1;
    PyObject *dirs = PyList_New(2);
    if (!dirs)
        return -1;
    for (int d = 0; d < 2; d++) {
        const framer_t *f = &c->dirs[d].fr;
        PyObject *dd = Py_BuildValue("{s:N,s:N,s:L,s:N}", "picked_up", opt_int(f->has_picked_up, f->picked_up),
                                     "first_frame", opt_int(f->has_first, f->first_frame),
                                     "head_skipped", (long long)f->head_skipped, "cut",
                                     opt_int(f->settled && f->has_cut, f->cut));
        if (!dd) {
            Py_DECREF(dirs);
            return -1;
        }
        PyList_SET_ITEM(dirs, d, dd);
    }
    int r = PyDict_SetItemString(e, "dirs", dirs);
    Py_DECREF(dirs);
    return r;
}

/* the connection's unfinished business, for the job's stitching */
static int hand_over(Decoder *dec, conn_t *c) {
    PyThreadState *g = gil_take();
    int r = hand_over_(dec, c);
    gil_give(g);
    return r;
}

/* ======================================================== connections */

static int flow_key(uint8_t *out, int alen, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                    uint16_t dport) {
    uint8_t *p = out;
    *p++ = (uint8_t)alen;
    memcpy(p, src, (size_t)alen);
    p += alen;
    *p++ = (uint8_t)(sport >> 8);
    *p++ = (uint8_t)sport;
    memcpy(p, dst, (size_t)alen);
    p += alen;
    *p++ = (uint8_t)(dport >> 8);
    *p++ = (uint8_t)dport;
    return (int)(p - out);
}

static int reverse_key(uint8_t *out, const uint8_t *key) {
    int alen = key[0];
    const uint8_t *src = key + 1, *dst = key + 3 + alen;
    return flow_key(out, alen, dst, rd16be(dst + alen), src, rd16be(src + alen));
}

static int pair_response(row_t *r, int32_t code, int64_t ts) {
    r->has_request = 1;
    r->request_code = code;
    r->request_code_name = table_name(&CFG.request, code);
    r->latency_ms = (double)(r->ts_ns - ts) / 1e6;
    return 0;
}

static int unanswering(Decoder *dec, conn_t *c, const row_t *r, int d, int64_t pf, int64_t po) {
    if (dec->has_plan)
        return edge_response(dec, c, r, d, pf, po);
    return emit(dec, r);
}

static int by_index(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Connection._release_held: the picked ones, and every one of a direction whose other direction
 * has no hole any more, in the order they came */
static int release_held(Decoder *dec, conn_t *c) {
    for (int d = 0; d < 2; d++)
        if (c->live_held[d] && !c->dirs[1 - d].reasm.pending.n)
            for (size_t l = c->held_first[d]; l; l = c->held[l - 1].dnext) {
                COST(PROBES, 1);
                if (pick(c, l - 1) < 0)
                    return -1;
            }
    size_t n = c->n_todo;
    c->n_todo = 0;
    qsort(c->todo, n, sizeof *c->todo, by_index);
    int res = 0;
    for (size_t j = 0; j < n; j++) {
        held_t *h = &c->held[c->todo[j]];
        h->todo = 0;
        if (res < 0)
            continue;
        int32_t code;
        int64_t ts;
        if (req_pop(&c->requests[1 - h->d], h->row.opaque, &code, &ts)) {
            pair_response(&h->row, code, ts);
            res = emit(dec, &h->row);
        } else if (c->dirs[1 - h->d].reasm.pending.n) {
            continue;
        } else {
            res = unanswering(dec, c, &h->row, h->d, h->pos_file, h->pos_off);
        }
        unhold(c, c->todo[j]);
    }
    return res < 0 ? -1 : held_compact(c);
}

static int conn_flush(Decoder *dec, conn_t *c, int d) {
    framer_t *f = &c->dirs[d].fr;
    reqmap_t *mine = &c->requests[d], *theirs = &c->requests[1 - d];
    for (size_t i = 0; i < f->n_out; i++) {
        row_t r;
        if (build_row(dec, c, d, f, &f->out[i], &r) < 0)
            return -1;
        int res;
        if (!r.has_header) {
            res = emit(dec, &r);
        } else if (is_response(r.flag)) {
            int32_t code;
            int64_t ts;
            if (req_pop(theirs, r.opaque, &code, &ts)) {
                pair_response(&r, code, ts);
                res = emit(dec, &r);
            } else if (c->dirs[1 - d].reasm.pending.n) {
                res = hold(dec, c, &r, d);   /* its request may sit behind a hole in the other direction */
            } else {
                res = unanswering(dec, c, &r, d, dec->pos_file, dec->pos_off);
            }
        } else if (!is_oneway(r.flag)) {
            if (mine->live >= MAX_PENDING_REQUESTS) {
                req_t *first = req_first(mine);
                int32_t code = 0;
                int64_t ts;
                req_pop(mine, first->opaque, &code, &ts);
                if (stats_unanswered(&dec->st, code) < 0)
                    return -1;
            }
            res = req_set(mine, r.opaque, r.code, r.ts_ns, dec->pos_file, dec->pos_off);
            if (!res)
                res = wake(c, d, r.opaque);
            if (!res)
                res = emit(dec, &r);
        } else {
            res = emit(dec, &r);
        }
        if (res < 0)
            return -1;
    }
    framer_reset_out(f);
    if (c->live_held[0] || c->live_held[1])
        return release_held(dec, c);
    return 0;
}

/* ---- spare connections: a capture of many short connections would otherwise spend a tenth of
 * its time allocating and freeing each one's dozen buffers */

static void conn_free(conn_t *c);

#define MAX_SPARE 64
#define MAX_KEPT (16 << 10)      /* bigger buffers are not kept: 64 spares hold at most 11 MiB */

/* a fresh connection: a spare one scrubbed down to its allocations, or a new one */
static conn_t *conn_alloc(Decoder *dec) {
    conn_t *c = dec->spare;
    if (!c) {
        c = PyMem_RawCalloc(1, sizeof *c);
        if (!c)
            no_memory();
        return c;
    }
    dec->spare = c->next;
    dec->n_spare--;
    conn_t keep = *c;
    memset(c, 0, sizeof *c);
    c->conn_id = keep.conn_id;
    c->conn_id_cap = keep.conn_id_cap;
    c->held = keep.held;
    c->cap_held = keep.cap_held;
    c->todo = keep.todo;
    c->cap_todo = keep.cap_todo;
    for (int d = 0; d < 2; d++) {
        c->dirs[d] = keep.dirs[d];     /* conn_new's framer_init and reasm_init scrub them */
        reqmap_t *m = &c->requests[d], *km = &keep.requests[d];
        m->e = km->e;
        m->cap = km->cap;
        m->idx = km->idx;
        m->idx_cap = km->idx_cap;
        if (m->idx)
            memset(m->idx, 0, m->idx_cap * sizeof(int32_t));
    }
    return c;
}

/* what a spare connection keeps is bounded: each buffer and array at most MAX_KEPT bytes */
static void keep_small(buf_t *b) {
    if (b->cap > MAX_KEPT)
        buf_free(b);
}

static void keep_few(void **items, size_t *cap, size_t size) {
    if (*cap * size > MAX_KEPT) {
        PyMem_RawFree(*items);
        *items = NULL;
        *cap = 0;
    }
}

/* a dropped connection: kept for the next one when there is room, else freed */
static void conn_release(Decoder *dec, conn_t *c) {
    if (dec->n_spare >= MAX_SPARE) {
        conn_free(c);
        return;
    }
    held_clear(c);
    htab_free(&c->held_by);
    keep_few((void **)&c->held, &c->cap_held, sizeof *c->held);
    keep_few((void **)&c->todo, &c->cap_todo, sizeof *c->todo);
    for (int d = 0; d < 2; d++) {
        reasm_t *r = &c->dirs[d].reasm;
        framer_t *f = &c->dirs[d].fr;
        reasm_release(r, MAX_KEPT);
        keep_small(&f->buf);
        keep_small(&f->arena);
        keep_few((void **)&f->out, &f->cap_out, sizeof *f->out);
        reqmap_t *m = &c->requests[d];
        if (m->cap * sizeof *m->e > MAX_KEPT || m->idx_cap * sizeof *m->idx > MAX_KEPT)
            req_free(m);
    }
    c->next = dec->spare;
    dec->spare = c;
    dec->n_spare++;
}

static void free_spare(Decoder *dec) {
    while (dec->spare) {
        conn_t *c = dec->spare;
        dec->spare = c->next;
        conn_free(c);
    }
    dec->n_spare = 0;
}

static conn_t *conn_new(Decoder *dec, const uint8_t *key, size_t klen, const char *id, size_t id_len) {
    conn_t *c = conn_alloc(dec);
    if (!c)
        return NULL;
    memcpy(c->key, key, klen);
    c->klen = klen;
    int alen = key[0];
    char a[80], b[80];
    size_t la = (size_t)format_endpoint(key + 1, alen, rd16be(key + 1 + alen), a);
    size_t lb = (size_t)format_endpoint(key + 3 + alen, alen, rd16be(key + 3 + 2 * alen), b);
    if (c->conn_id_cap < id_len + la + lb + 1) {
        char *p = PyMem_RawRealloc(c->conn_id, id_len + la + lb + 1);
        if (!p) {
            conn_free(c);
            no_memory();
            return NULL;
        }
        c->conn_id = p;
        c->conn_id_cap = id_len + la + lb + 1;
    }
    memcpy(c->conn_id, id, id_len);
    c->conn_id_len = id_len;
    c->ep[0] = c->conn_id + id_len;
    memcpy(c->ep[0], a, la);
    c->ep_len[0] = la;
    c->ep[1] = c->ep[0] + la;
    memcpy(c->ep[1], b, lb);
    c->ep_len[1] = lb;
    for (int d = 0; d < 2; d++) {
        framer_init(&c->dirs[d].fr, &dec->st, &dec->scratch, dec->abandon_after);
        reasm_init(&c->dirs[d].reasm, &c->dirs[d].fr, &dec->st, dec->max_pending_bytes,
                   dec->max_pending_segments, dec->hole_timeout_ns);
    }
    return c;
}

static void conn_free(conn_t *c) {
    for (int d = 0; d < 2; d++) {
        reasm_free(&c->dirs[d].reasm);
        framer_free(&c->dirs[d].fr);
        req_free(&c->requests[d]);
    }
    held_clear(c);
    htab_free(&c->held_by);
    PyMem_RawFree(c->held);
    PyMem_RawFree(c->todo);
    PyMem_RawFree(c->conn_id);
    PyMem_RawFree(c);
}

/* Connection.finish */
static int conn_finish(Decoder *dec, conn_t *c, int64_t ts) {
    for (int d = 0; d < 2; d++) {
        if (reasm_finish(&c->dirs[d].reasm, ts) < 0 || framer_finish(&c->dirs[d].fr, ts) < 0
            || conn_flush(dec, c, d) < 0)
            return -1;
    }
    if (dec->has_plan)
        return hand_over(dec, c);
    for (size_t i = 0; i < c->n_held; i++) {
        if (c->held[i].alive && emit(dec, &c->held[i].row) < 0) {
            held_clear(c);
            return -1;
        }
    }
    held_clear(c);
    dec->st.unanswered_touched = 1;
    for (int d = 0; d < 2; d++) {
        reqmap_t *m = &c->requests[d];
        for (size_t i = 0; i < m->n; i++)
            if (m->e[i].alive && stats_unanswered(&dec->st, m->e[i].code) < 0)
                return -1;
        req_clear(m);
    }
    if (c->dirs[0].fr.found || c->dirs[1].fr.found)
        dec->st.v[ST_RMQ_CONNECTIONS]++;
    return 0;
}

/* Connection._segment */
static int conn_segment_(Decoder *dec, conn_t *c, int d, const segment_t *s, int64_t ts) {
    dir_t *dir = &c->dirs[d];
    c->last_ts = ts;
    if (s->flags & TH_SYN && !dir->reasm.has_next) {
        reasm_syn(&dir->reasm, s->seq);
        dir->fr.synced = 1;
        c->has_isn[d] = 1;
        c->isn[d] = s->seq;
    }
    if (s->flags & TH_ACK) {
        reasm_t *other = &c->dirs[1 - d].reasm;
        if (other->pending.n) {
            if (reasm_acked(other, s->ack, ts) < 0 || conn_flush(dec, c, 1 - d) < 0)
                return -1;
        }
    }
    if (s->plen || s->missing) {
        if (!dir->fr.abandoned && !dir->fr.settled) {
            if (reasm_segment(&dir->reasm, s->seq, s->payload, s->plen, s->missing, ts) < 0
                || conn_flush(dec, c, d) < 0)
                return -1;
        }
    }
    if (s->flags & (TH_FIN | TH_RST)) {
        if (s->flags & TH_RST) {
            c->closed = 1;
        } else {
            dir->fin = 1;
            if (c->dirs[1 - d].fin)
                c->closed = 1;
        }
    }
    return 0;
}

/* Connection.segment: reading ahead, it also notes where each direction's last hole closed */
static int conn_segment(Decoder *dec, conn_t *c, int d, const segment_t *s, int64_t ts) {
    if (!dec->reading_ahead)
        return conn_segment_(dec, c, d, s, ts);
    int waiting[2] = {c->dirs[0].reasm.pending.n > 0, c->dirs[1].reasm.pending.n > 0};
    if (conn_segment_(dec, c, d, s, ts) < 0)
        return -1;
    for (int k = 0; k < 2; k++)
        if (waiting[k] && !c->dirs[k].reasm.pending.n) {
            c->has_drained[k] = 1;
            c->drained_file[k] = dec->pos_file;
            c->drained_off[k] = dec->pos_off;
        }
    return 0;
}

/* ======================================================== the decoder */

static void lru_unlink(Decoder *dec, conn_t *c) {
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        dec->lru_first = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    else
        dec->lru_last = c->lprev;
}

static void lru_append(Decoder *dec, conn_t *c) {
    c->lnext = NULL;
    c->lprev = dec->lru_last;
    if (dec->lru_last)
        dec->lru_last->lnext = c;
    else
        dec->lru_first = c;
    dec->lru_last = c;
}

/* CaptureDecoder._account: note what the connection holds now */
static void account(Decoder *dec, conn_t *c) {
    int64_t b = 0;
    for (int d = 0; d < 2; d++)
        b += c->dirs[d].reasm.pending_bytes + (int64_t)buf_len(&c->dirs[d].fr.buf);
    dec->buffered += b - c->buffered;
    c->buffered = b;
}

static void link_conn(Decoder *dec, conn_t *c) {
    lru_append(dec, c);
    dec->n_live++;
    if (dec->n_live > dec->peak_live)
        dec->peak_live = dec->n_live;
    c->born = dec->born++;
    c->prev = dec->last;
    c->next = NULL;
    if (dec->last)
        dec->last->next = c;
    else
        dec->first = c;
    dec->last = c;
}

static int add_conn(Decoder *dec, conn_t *c) {
    uint8_t *rev = c->rkey;
    int rlen = reverse_key(rev, c->key);
    hent_t *e = htab_put(&dec->flows, c->key, c->klen);
    if (!e)
        return -1;
    if (!e->ptr)
        dec->n_flows++;
    e->ptr = c;
    e->value = 0;
    e = htab_put(&dec->flows, rev, (size_t)rlen);
    if (!e) {                   /* the caller frees c: no entry may point at it */
        hent_t *first = htab_get(&dec->flows, c->key, c->klen);
        if (first && first->ptr == c) {
            htab_del(&dec->flows, first);
            dec->n_flows--;
        }
        return -1;
    }
    if (!e->ptr)
        dec->n_flows++;
    else
        c->self_loop = 1;       /* the same 4-tuple both ways: one entry, direction 1 */
    e->ptr = c;
    e->value = 1;
    link_conn(dec, c);
    return 0;
}

/* what only a sweep would act on: a closed connection's linger, a hole's timeout, rows waiting */
static int needs_watch(const conn_t *c) {
    return c->closed || c->dirs[0].reasm.pending.n || c->dirs[1].reasm.pending.n
           || c->live_held[0] || c->live_held[1]
           || c->dirs[0].fr.n_out || c->dirs[1].fr.n_out;
}

/* (a self-connected socket is never swept: the reference skips it, its one flow entry being
 * direction 1) */
static void watch(Decoder *dec, conn_t *c) {
    if (c->watched || c->self_loop || !needs_watch(c))
        return;
    c->watched = 1;
    c->wprev = NULL;
    c->wnext = dec->watch;
    if (dec->watch)
        dec->watch->wprev = c;
    dec->watch = c;
}

static void unwatch(Decoder *dec, conn_t *c) {
    if (!c->watched)
        return;
    if (c->wprev)
        c->wprev->wnext = c->wnext;
    else
        dec->watch = c->wnext;
    if (c->wnext)
        c->wnext->wprev = c->wprev;
    c->watched = 0;
}

static void drop_conn(Decoder *dec, conn_t *c) {
    unwatch(dec, c);
    lru_unlink(dec, c);
    dec->n_live--;
    dec->buffered -= c->buffered;
    if (dec->recent == c)
        dec->recent = NULL;
    hent_t *e = htab_get(&dec->flows, c->key, c->klen);
    if (e && e->ptr == c) {
        htab_del(&dec->flows, e);
        dec->n_flows--;
    }
    e = htab_get(&dec->flows, c->rkey, c->klen);
    if (e && e->ptr == c) {
        htab_del(&dec->flows, e);
        dec->n_flows--;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        dec->first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        dec->last = c->prev;
    conn_release(dec, c);
}

/* CaptureDecoder._evict: finish the connection idle longest, as if the capture ended for it */
static int evict(Decoder *dec) {
    conn_t *c = dec->lru_first;
    dec->st.v[ST_EVICTED]++;
    if (conn_finish(dec, c, c->last_ts) < 0)
        return -1;
    drop_conn(dec, c);
    return 0;
}

/* CaptureDecoder._make_room: evict until one more connection fits (a range's decode too) */
static int make_room(Decoder *dec) {
    while (dec->n_live >= dec->max_connections)
        if (evict(dec) < 0)
            return -1;
    return 0;
}

/* CaptureDecoder._new: a connection for the segment's 4-tuple; its entry in *out */
static hent_t *new_conn(Decoder *dec, const uint8_t *key, size_t klen, const segment_t *s,
                        const char *id, size_t id_len) {
    char base[200], idbuf[220];
    if (make_room(dec) < 0)
        return NULL;
    if (!id) {
        int alen = key[0];
        const uint8_t *src = key + 1, *dst = key + 3 + alen;
        uint16_t sport = rd16be(src + alen), dport = rd16be(dst + alen);
        /* lo, hi = sorted(((src, sport), (dst, dport))): bytes, then port */
        int cmp = memcmp(src, dst, (size_t)alen);
        int swap = cmp > 0 || (cmp == 0 && sport > dport);
        char a[80], b[80];
        /* generations are counted per sorted 4-tuple (the id's text is a function of it) */
        uint8_t sorted[40];
        int slen = swap ? reverse_key(sorted, key) : (int)klen;
        if (!swap)
            memcpy(sorted, key, klen);
        hent_t *g = htab_put(&dec->generation, sorted, (size_t)slen);
        if (!g)
            return NULL;
        g->value++;
        int la = format_endpoint(swap ? dst : src, alen, swap ? dport : sport, a);
        int lb = format_endpoint(swap ? src : dst, alen, swap ? sport : dport, b);
        memcpy(base, a, (size_t)la);
        base[la] = '-';
        memcpy(base + la + 1, b, (size_t)lb);
        int n = la + 1 + lb;
        base[n] = 0;
        id_len = g->value == 1 ? (size_t)n
                               : (size_t)snprintf(idbuf, sizeof idbuf, "%s#%lld", base, (long long)g->value);
        id = g->value == 1 ? base : idbuf;
    }
    uint8_t okey[40];
    size_t olen = klen;
    if ((s->flags & TH_SYN) && (s->flags & TH_ACK))    /* the other side opened it */
        olen = (size_t)reverse_key(okey, key);
    else
        memcpy(okey, key, klen);
    conn_t *c = conn_new(dec, okey, olen, id, id_len);
    if (!c)
        return NULL;
    if (add_conn(dec, c) < 0) {
        conn_free(c);
        return NULL;
    }
    if (!dec->has_plan)
        dec->st.v[ST_CONNECTIONS]++;
    return htab_get(&dec->flows, key, klen);
}

static int by_birth(const void *a, const void *b) {
    uint64_t x = (*(conn_t *const *)a)->born, y = (*(conn_t *const *)b)->born;
    return x < y ? -1 : x > y;
}

/* CaptureDecoder.sweep.  It walks every connection, but only the watched ones can have anything
 * to do (the others' ticks and flushes are no-ops): those, in the order the reference walks. */
static int sweep(Decoder *dec, int64_t ts) {
    dec->packets_since_sweep = 0;
    dec->next_sweep = ts + 1000000000;
    size_t n = 0;
    for (conn_t *c = dec->watch; c; c = c->wnext) {
        COST(PROBES, 1);
        if (GROW(dec->sweeping, dec->cap_sweeping, n, 64) < 0)
            return -1;
        dec->sweeping[n++] = c;
    }
    conn_t **w = dec->sweeping;
    qsort(w, n, sizeof *w, by_birth);
    for (size_t i = 0; i < n; i++) {
        conn_t *c = w[i];
        for (int d = 0; d < 2; d++)
            if (reasm_tick(&c->dirs[d].reasm, ts) < 0)
                return -1;
        if (conn_flush(dec, c, 0) < 0 || conn_flush(dec, c, 1) < 0)
            return -1;
        account(dec, c);
    }
    for (size_t i = 0; !dec->has_plan && i < n; i++) {
        conn_t *c = w[i];
        if (c->closed && ts - c->last_ts > dec->linger_ns) {
            if (conn_finish(dec, c, c->last_ts) < 0)
                return -1;
            drop_conn(dec, c);
            w[i] = NULL;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (w[i] && !needs_watch(w[i]))
            unwatch(dec, w[i]);
    return 0;
}

/* the UTF-8 of a connection id the plan names (NULL: error set) */
static const char *plan_id(PyObject *ids, int64_t i, size_t *len) {
    PyThreadState *g = gil_take();
    Py_ssize_t n = 0;
    const char *id = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(ids, i), &n);
    gil_give(g);
    *len = (size_t)n;
    return id;
}

/* range mode: the entry for a packet as the plan says, NULL with no error for one read ahead
 * that no unfinished connection needs */
static hent_t *planned(Decoder *dec, const uint8_t *key, size_t klen, const segment_t *s,
                       int64_t ts, int64_t offset, int *err) {
    int64_t bkey[2] = {dec->file_index, offset};
    hent_t *b = htab_get(&dec->boundaries, bkey, sizeof bkey);
    hent_t *e = htab_get(&dec->flows, key, klen);
    if (dec->reading_ahead) {
        if (!e || !((conn_t *)e->ptr)->unsettled)
            return NULL;
        if (b) {               /* it ended: a new one starts in the next range */
            conn_t *c = e->ptr;
            c->unsettled = 0;
            dec->unsettled--;
            c->dirs[0].fr.has_limit = c->dirs[1].fr.has_limit = 0;
            if (conn_finish(dec, c, ts) < 0) {
                *err = 1;
                return NULL;
            }
            drop_conn(dec, c);
            return NULL;
        }
        return e;
    }
    if (b) {
        if (e) {
            conn_t *c = e->ptr;
            if (conn_finish(dec, c, ts) < 0) {
                *err = 1;
                return NULL;
            }
            drop_conn(dec, c);
        }
        size_t len;
        const char *id = plan_id(dec->plan_ids, b->value, &len);
        hent_t *n = id ? new_conn(dec, key, klen, s, id, len) : NULL;
        if (!n)
            *err = 1;
        return n;
    }
    if (e)
        return e;
    uint8_t rev[40];
    int rlen = reverse_key(rev, key);
    hent_t *l = htab_get(&dec->live, key, klen);
    const uint8_t *okey = key;
    size_t olen = klen;
    if (!l) {
        l = htab_get(&dec->live, rev, (size_t)rlen);
        okey = rev;
        olen = (size_t)rlen;
    }
    if (l && l->ptr) {         /* evicted once already: its plan start is no longer its start */
        l = NULL;
    }
    if (!l) {                  /* not in the plan (it never misses one) */
        dec->st.v[ST_UNPLANNED]++;
        hent_t *n = new_conn(dec, key, klen, s, NULL, 0);
        if (!n)
            *err = 1;
        return n;
    }
    size_t len;
    const char *id = plan_id(dec->plan_live_ids, l->value, &len);
    l->ptr = dec;              /* taken up (the CaptureDecoder's resumed) */
    if (make_room(dec) < 0) {
        *err = 1;
        return NULL;
    }
    conn_t *c = id ? conn_new(dec, okey, olen, id, len) : NULL;
    if (!c || add_conn(dec, c) < 0) {
        if (c)
            conn_free(c);
        *err = 1;
        return NULL;
    }
    for (int d = 0; d < 2; d++) {
        const dirstart_t *st = &dec->plan_live[2 * l->value + d];
        if (st->has_seq) {
            reasm_start_at(&c->dirs[d].reasm, st->seq);
            framer_start_at(&c->dirs[d].fr, st->offset, st->synced);
        }
    }
    return htab_get(&dec->flows, key, klen);
}

/* the flow entry of the last packet's connection when this packet is one of its (NULL: look it
 * up); self-connected sockets, whose one key means direction 1, are never remembered */
static inline int same_key(const uint8_t *a, const uint8_t *b, size_t n) {
    uint64_t x, y, u, v;
    if (n < 8)
        return !memcmp(a, b, n);
    /* (flow keys are 13 or 37 bytes) eight at a time, the last eight overlapping */
    uint64_t diff = 0;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        diff |= x ^ y;
    }
    memcpy(&u, a + n - 8, 8);
    memcpy(&v, b + n - 8, 8);
    return !(diff | (u ^ v));
}

static hent_t *recent(Decoder *dec, const uint8_t *key, size_t klen) {
    conn_t *c = dec->recent;
    if (!c || klen != c->klen)
        return NULL;
    dec->hit.ptr = c;
    if (same_key(key, c->key, klen))
        dec->hit.value = 0;
    else if (same_key(key, c->rkey, klen))
        dec->hit.value = 1;
    else
        return NULL;
    return &dec->hit;
}

static int segment(Decoder *dec, const segment_t *s, int64_t ts, int64_t offset) {
    if (dec->ports && !(dec->ports[s->sport >> 3] & (1 << (s->sport & 7)))
        && !(dec->ports[s->dport >> 3] & (1 << (s->dport & 7))))
        return 0;
    uint8_t key[40];
    size_t klen = (size_t)flow_key(key, s->alen, s->src, s->sport, s->dst, s->dport);
    hent_t *e;
    dec->pos_file = dec->file_index;
    dec->pos_off = offset;
    if (dec->has_plan) {
        int err = 0;
        e = planned(dec, key, klen, s, ts, offset, &err);
        if (err)
            return -1;
        if (!e)
            return 0;
    } else {
        e = recent(dec, key, klen);
        if (!e)
            e = htab_get(&dec->flows, key, klen);
        if (e) {
            conn_t *c = e->ptr;
            int d = (int)e->value;
            int syn_no_ack = (s->flags & (TH_SYN | TH_ACK)) == TH_SYN;
            /* decoder.starts_new_connection */
            int reused = syn_no_ack && c->has_isn[d] && c->isn[d] != s->seq;
            int quiet = c->closed && ts - c->last_ts > dec->linger_ns;
            if (reused || quiet) {
                if (conn_finish(dec, c, reused ? ts : c->last_ts) < 0)
                    return -1;
                drop_conn(dec, c);
                e = NULL;
            }
        }
        if (!e && !(e = new_conn(dec, key, klen, s, NULL, 0)))
            return -1;
    }
    conn_t *c = e->ptr;
    if (conn_segment(dec, c, (int)e->value, s, ts) < 0)
        return -1;
    watch(dec, c);
    dec->recent = c->self_loop || dec->has_plan ? NULL : c;
    if (dec->reading_ahead) {
        if (c->unsettled && conn_settled(c)) {
            c->unsettled = 0;
            dec->unsettled--;
        }
        return 0;
    }
    account(dec, c);
    lru_unlink(dec, c);
    lru_append(dec, c);
    dec->packets_since_sweep++;
    /* the reference's schedule (its sweep walks every open connection, amortised over at least
     * as many packets); ours walks the watched ones at the same moments */
    if (dec->packets_since_sweep >= 4096 && ts >= dec->next_sweep
        && dec->packets_since_sweep >= (int64_t)dec->n_flows && sweep(dec, ts) < 0)
        return -1;
    while (dec->buffered > dec->max_buffered_bytes && dec->lru_first != c)
        if (evict(dec) < 0)
            return -1;
    if (dec->buffered > dec->peak_buffered)
        dec->peak_buffered = dec->buffered;
    return 0;
}

int decoder_end_range(Decoder *dec) {
    dec->reading_ahead = 1;
    for (conn_t *c = dec->first; c; c = c->next) {
        hent_t *l = htab_get(&dec->limits, c->conn_id, c->conn_id_len);
        if (!l)
            continue;
        for (int d = 0; d < 2; d++) {
            int64_t limit = dec->plan_limits[2 * l->value + d];
            framer_t *f = &c->dirs[d].fr;
            if (limit >= 0) {
                reasm_count_below(&c->dirs[d].reasm, limit - f->offset - (int64_t)buf_len(&f->buf));
                framer_stop_at(f, limit);
            }
        }
        if (!conn_settled(c)) {
            c->unsettled = 1;
            dec->unsettled++;
        }
    }
    return 0;
}

int decoder_packet(Decoder *dec, const packet_t *pkt) {
    if (dec->has_plan && pkt->offset >= dec->end && dec->end >= 0) {
        if (!dec->reading_ahead)
            decoder_end_range(dec);
        if (!dec->unsettled || pkt->offset >= dec->readahead_until)
            return 1;
    } else {
        dec->st.v[ST_PACKETS]++;
        dec->st.v[ST_CAPTURED_BYTES] += pkt->caplen;
    }
    segment_t s;
    stats_t ignored;           /* a packet read ahead is the next range's: it counts there */
    if (!decode_tcp(pkt->linktype, pkt->data, pkt->caplen, &s, dec->reading_ahead ? &ignored : &dec->st))
        return 0;
    return segment(dec, &s, pkt->ts_ns, pkt->offset) < 0 ? -1 : 0;
}

int decoder_finish(Decoder *dec) {
    for (conn_t *c = dec->first; c; c = c->next)
        if (conn_finish(dec, c, c->last_ts) < 0)
            return -1;
    while (dec->first) {
        conn_t *c = dec->first;
        dec->first = c->next;
        conn_free(c);
    }
    dec->last = NULL;
    dec->lru_first = dec->lru_last = NULL;
    dec->n_live = dec->buffered = 0;
    dec->watch = NULL;
    dec->recent = NULL;
    htab_clear(&dec->flows);
    dec->n_flows = 0;
    dec->unsettled = 0;
    return 0;
}

void decoder_clear(Decoder *dec) {
    while (dec->first) {
        conn_t *c = dec->first;
        dec->first = c->next;
        conn_free(c);
    }
    dec->last = NULL;
    dec->lru_first = dec->lru_last = NULL;
    dec->n_live = dec->buffered = 0;
    dec->watch = NULL;
    dec->recent = NULL;
    free_spare(dec);
    PyMem_RawFree(dec->sweeping);
    dec->sweeping = NULL;
    dec->cap_sweeping = 0;
    htab_free(&dec->flows);
    htab_free(&dec->generation);
    htab_free(&dec->boundaries);
    htab_free(&dec->live);
    htab_free(&dec->limits);
    PyMem_RawFree(dec->plan_live);
    PyMem_RawFree(dec->plan_limits);
    dec->plan_live = NULL;
    dec->plan_limits = NULL;
}
