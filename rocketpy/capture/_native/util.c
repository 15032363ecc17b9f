/* Buffers, counters and name tables shared by the decoder's parts. */
#include "core.h"
#include "htab.h"

const char *const STAT_NAMES[ST_COUNT] = {
    "non_ip", "truncated_headers", "non_tcp", "ip_fragments", "retransmitted_bytes", "gaps",
    "gap_bytes", "snaplen_cut_bytes", "skipped_bytes", "resyncs", "damaged_frames",
    "connections", "rocketmq_connections", "truncated_records", "packets", "captured_bytes",
    "readahead_exhausted", "unplanned_packets", "evicted_connections",
};

config_t CFG;
__thread PyThreadState *gil_released;

int no_memory(void) {
    PyThreadState *g = gil_take();
    PyErr_NoMemory();
    gil_give(g);
    return -1;
}

int buf_grow(buf_t *b, size_t extra) {
    size_t live = b->end - b->start;
    if (b->start && b->start >= live / 2) {   /* reuse the consumed front (amortised) */
        memmove(b->p, b->p + b->start, live);
        COST(BYTES, live);
        b->start = 0;
        b->end = live;
        if (b->cap - live >= extra)
            return 0;
    }
    if (extra > SIZE_MAX / 4 - live) {
        no_memory();
        return -1;
    }
    size_t want = b->end + extra, cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    uint8_t *p = PyMem_RawRealloc(b->p, cap);
    if (!p) {
        no_memory();
        return -1;
    }
    COST(BYTES, b->end);
    b->p = p;
    b->cap = cap;
    return 0;
}

void buf_free(buf_t *b) {
    PyMem_RawFree(b->p);
    b->p = NULL;
    b->start = b->end = b->cap = 0;
}

int grow(void **items, size_t *cap, size_t n, size_t size, size_t first) {
    if (n < *cap)
        return 0;
    size_t want = *cap ? 2 * *cap : first;
    void *p = PyMem_RawRealloc(*items, want * size);
    if (!p) {
        no_memory();
        return -1;
    }
    COST(BYTES, n * size);
    *items = p;
    *cap = want;
    return 0;
}

/* the index position of code, or the empty one where it would go */
static size_t uidx_find(const stats_t *st, int32_t code) {
    size_t mask = st->cap_uidx - 1;
    size_t i = (size_t)hash_number((uint32_t)code) & mask;
    COST(PROBES, 1);
    while (st->uidx[i] && st->unanswered[2 * (st->uidx[i] - 1)] != code) {
        i = (i + 1) & mask;
        COST(PROBES, 1);
    }
    return i;
}

/* one more unanswered request with this code (a dict in the reference): 0, or -1 (set) */
int stats_unanswered(stats_t *st, int32_t code) {
    st->unanswered_touched = 1;
    if (st->cap_uidx) {
        uint32_t k = st->uidx[uidx_find(st, code)];
        if (k) {
            st->unanswered[2 * (k - 1) + 1]++;
            return 0;
        }
    }
    if (grow((void **)&st->unanswered, &st->cap_unanswered, st->n_unanswered, 2 * sizeof(int64_t), 16) < 0)
        return -1;
    if (2 * (st->n_unanswered + 1) > st->cap_uidx) {      /* at most half full: rebuild bigger */
        size_t cap = st->cap_uidx ? 2 * st->cap_uidx : 64;
        uint32_t *idx = PyMem_RawCalloc(cap, sizeof *idx);
        if (!idx)
            return no_memory();
        PyMem_RawFree(st->uidx);
        st->uidx = idx;
        st->cap_uidx = cap;
        COST(MOVES, cap);                             /* calloc'd */
        for (size_t i = 0; i < st->n_unanswered; i++) {
            idx[uidx_find(st, (int32_t)st->unanswered[2 * i])] = (uint32_t)i + 1;
            COST(MOVES, 1);
        }
    }
    st->unanswered[2 * st->n_unanswered] = code;
    st->unanswered[2 * st->n_unanswered + 1] = 1;
    st->uidx[uidx_find(st, code)] = (uint32_t)++st->n_unanswered;
    return 0;
}

void stats_free(stats_t *st) {
    PyMem_RawFree(st->unanswered);
    PyMem_RawFree(st->uidx);
    memset(st, 0, sizeof *st);
}

size_t sorted_at(const int64_t *v, size_t n, int64_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

str_t table_name(const name_table_t *t, int64_t v) {
    if (v >= 0 && v < DIRECT_NAMES)
        return t->direct[v];
    size_t i = sorted_at(t->values, t->n, v);
    return i < t->n && t->values[i] == v ? t->names[i] : STR_NULL;
}

int buffers_of(PyObject *spec, int n, Py_buffer *b, int *have) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < n) {
        PyErr_SetString(PyExc_ValueError, "a column is a tuple of its buffers");
        return -1;
    }
    for (int j = 0; j < n; j++) {
        PyObject *o = PyTuple_GET_ITEM(spec, j);
        have[j] = 0;
        if (o == Py_None)
            continue;
        if (PyObject_GetBuffer(o, &b[j], PyBUF_SIMPLE) < 0)
            return -1;
        have[j] = 1;
    }
    return 0;
}
