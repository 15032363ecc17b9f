/* Per-direction TCP reassembly (reassembly.py) and RocketMQ frame cutting with resynchronisation
 * (framing.py), statement for statement.  Functions returning int: 0 ok, -1 Python error set. */
#include "stream.h"
#include "htab.h"

enum { BAD = 0, OK = 1, MORE = 2 };

static inline int32_t rel32(uint32_t a, uint32_t b) { return (int32_t)(a - b); }

/* ================================ frame extractor ========================================= */

/* a zeroed framer, or a used one scrubbed down to its (empty) buffers */
void framer_init(framer_t *f, stats_t *st, header_t *scratch, int64_t abandon_after) {
    framer_t keep = *f;
    memset(f, 0, sizeof *f);
    f->buf = keep.buf;
    f->arena = keep.arena;
    buf_clear(&f->buf);
    buf_clear(&f->arena);
    f->out = keep.out;
    f->cap_out = keep.cap_out;
    f->st = st;
    f->scratch = scratch;
    f->abandon_after = abandon_after;
}

void framer_free(framer_t *f) {
    buf_free(&f->buf);
    buf_free(&f->arena);
    PyMem_RawFree(f->out);
    f->out = NULL;
    f->n_out = f->cap_out = 0;
}

void framer_reset_out(framer_t *f) {
    f->n_out = 0;
    buf_clear(&f->arena);
}

static int emit(framer_t *f, const uint8_t *data, size_t n, int64_t ts, int64_t offset,
                int64_t length, int64_t lost, const char *error, size_t error_len) {
    if (GROW(f->out, f->cap_out, f->n_out, 8) < 0)
        return -1;
    frame_t *fr = &f->out[f->n_out];
    fr->data_at = buf_len(&f->arena);
    fr->data_len = n;
    fr->borrowed = NULL;
    if (buf_append(&f->arena, data, n) < 0)
        return -1;
    fr->damaged = error != NULL;
    fr->error_at = buf_len(&f->arena);
    fr->error_len = error_len;
    if (error && buf_append(&f->arena, error, error_len) < 0)
        return -1;
    fr->ts = ts;
    fr->offset = offset;
    fr->length = length;
    fr->lost = lost;
    f->n_out++;
    return 0;
}

static inline void count_skipped(framer_t *f, int64_t n) {
    if (n) {
        if (f->head)
            f->head_skipped += n;
        else
            f->st->v[ST_SKIPPED] += n;
    }
}

/* framing.plausible_frame_start; -1 on a Python error */
static int plausible(framer_t *f, const uint8_t *b, size_t avail, int need_header) {
    if (avail < PREFIX_SIZE) {
        if (avail >= LENGTH_SIZE) {
            int64_t total = rk_frame_total(b);
            if (!(2 * LENGTH_SIZE <= total && total <= MAX_FRAME_LENGTH))
                return BAD;
        }
        if (avail > TYPE_AT && rk_frame_type(b) > SER_ROCKETMQ)
            return BAD;
        return MORE;
    }
    int64_t total = rk_frame_total(b);
    int stype = rk_frame_type(b);
    int64_t hlen = rk_frame_header_length(b);
    if (total > MAX_FRAME_LENGTH || stype > SER_ROCKETMQ || hlen == 0 || hlen > total - PREFIX_SIZE)
        return BAD;
    if (stype == SER_JSON) {
        if (avail > PREFIX_SIZE && b[PREFIX_SIZE] != JSON_HEADER_START)
            return BAD;
    } else if (hlen < RMQ_MIN_HEADER) {
        return BAD;
    }
    if (!need_header)
        return OK;
    if ((int64_t)avail < PREFIX_SIZE + hlen) {
        if (stype == SER_ROCKETMQ && avail >= PREFIX_SIZE + RMQ_FLAG_AT + 4) {
            int32_t flag = (int32_t)rd32be(b + PREFIX_SIZE + RMQ_FLAG_AT);
            int8_t language = (int8_t)b[PREFIX_SIZE + RMQ_LANGUAGE_AT];
            if ((flag & ~(CFG.flag_response | CFG.flag_oneway)) || !(0 <= language && language <= RMQ_MAX_LANGUAGE))
                return BAD;
        }
        return hlen <= MAX_HUNT_HEADER ? MORE : BAD;
    }
    int r = decode_header(stype, b + PREFIX_SIZE, (size_t)hlen, f->scratch, 0, NULL, NULL);
    if (r < 0)
        return -1;
    return r ? OK : BAD;
}

/* settle when everything from buf[pos] on is the next range's; 1 when it settled */
static int check_limit(framer_t *f, size_t pos) {
    if (!f->has_limit || f->skip || f->offset + (int64_t)pos < f->limit)
        return 0;
    f->settled = 1;
    f->has_cut = f->synced;
    f->cut = f->offset + (int64_t)pos;
    f->offset += (int64_t)buf_len(&f->buf);
    buf_clear(&f->buf);
    return 1;
}

void framer_start_at(framer_t *f, int64_t offset, int synced) {
    f->offset = offset;
    f->synced = synced;
    f->head = !synced;
    if (!synced) {
        f->has_picked_up = 1;
        f->picked_up = offset;
    }
}

void framer_stop_at(framer_t *f, int64_t limit) {
    f->has_limit = 1;
    f->limit = limit;
    check_limit(f, 0);
}

/* skip k bytes while hunting: 1 when that settled or abandoned the stream */
static int drop(framer_t *f, size_t k) {
    if (!k)
        return 0;
    if (f->has_limit && f->offset + (int64_t)k >= f->limit) {
        int64_t before = f->limit - f->offset;
        count_skipped(f, before > 0 ? before : 0);
        f->offset += (int64_t)k;
        buf_consume(&f->buf, k);
        return check_limit(f, 0);
    }
    count_skipped(f, (int64_t)k);
    buf_consume(&f->buf, k);
    f->offset += (int64_t)k;
    f->hunted += (int64_t)k;
    if (!f->found && f->hunted > f->abandon_after) {
        f->abandoned = 1;
        f->offset += (int64_t)buf_len(&f->buf);
        buf_clear(&f->buf);
        return 1;
    }
    return 0;
}

/* FRAME_START_CANDIDATE.search: the first i >= pos where a frame may start, or -1 */
static int64_t candidate(const uint8_t *b, size_t n, size_t pos) {
    while (pos + 8 <= n) {
        const uint8_t *z = memchr(b + pos, 0, n - 7 - pos);
        COST(BYTES, z ? (size_t)(z - b) + 1 - pos : n - 7 - pos);
        if (!z)
            return -1;
        size_t i = (size_t)(z - b);
        /* a length under 16 MiB (its top byte 0); JSON with its '{', or ROCKETMQ with a header
           under the hunt's bound */
        const uint8_t *f = b + i;
        if ((rk_frame_type(f) == SER_JSON && i + PREFIX_SIZE < n && f[PREFIX_SIZE] == JSON_HEADER_START)
            || (rk_frame_type(f) == SER_ROCKETMQ && rk_frame_header_length(f) < HUNT_BINARY_HEADER_LIMIT))
            return (int64_t)i;
        pos = i + 1;
    }
    return -1;
}

/* 0 found a start (synced), 1 used the buffer up, -1 error */
static int hunt(framer_t *f, size_t pos) {
    for (;;) {
        uint8_t *b = buf_data(&f->buf);
        size_t n = buf_len(&f->buf);
        int64_t i = candidate(b, n, pos);
        if (i < 0) {
            size_t keep = n - pos < PREFIX_SIZE ? n - pos : PREFIX_SIZE;
            drop(f, n - keep);
            return 1;
        }
        int v = plausible(f, b + i, n - (size_t)i, 1);
        if (v < 0)
            return -1;
        if (v == OK) {
            if (drop(f, (size_t)i))
                return 1;
            f->synced = 1;
            if (f->head) {
                f->head = 0;
                f->has_first = 1;
                f->first_frame = f->offset;
            }
            return 0;
        }
        if (v == MORE) {
            drop(f, (size_t)i);
            return 1;
        }
        pos = (size_t)i + 1;
    }
}

static int parse(framer_t *f, int64_t ts) {
    size_t pos = 0, hunt_from = 0;
    int64_t need = 0;
    for (;;) {
        if (f->has_limit && check_limit(f, pos)) {
            f->need = 0;
            return 0;
        }
        if (!f->synced) {
            if (pos) {
                buf_consume(&f->buf, pos);
                f->offset += (int64_t)pos;
                pos = 0;
            }
            int h = hunt(f, hunt_from);
            if (h < 0)
                return -1;
            if (h) {
                f->need = 0;
                return 0;
            }
            hunt_from = 0;
        }
        uint8_t *b = buf_data(&f->buf);
        size_t n = buf_len(&f->buf);
        if (n - pos < PREFIX_SIZE)
            break;
        int64_t total = rk_frame_total(b + pos);
        if ((int64_t)(n - pos) < total) {
            int v = plausible(f, b + pos, n - pos, !f->found);
            if (v < 0)
                return -1;
            if (v == MORE)
                break;
            if (v == OK) {
                need = total;
                break;
            }
        } else {
            int v = plausible(f, b + pos, n - pos, !f->found);
            if (v < 0)
                return -1;
            if (v == OK) {
                if (emit(f, b + pos, (size_t)total, ts, f->offset + (int64_t)pos, total, 0, NULL, 0) < 0)
                    return -1;
                f->found = 1;
                pos += (size_t)total;
                continue;
            }
        }
        /* not a frame where one should start: lose step and hunt from the next byte */
        f->synced = 0;
        f->st->v[ST_RESYNCS]++;
        hunt_from = 1;
    }
    if (pos) {
        buf_consume(&f->buf, pos);
        f->offset += (int64_t)pos;
    }
    f->need = need;
    return 0;
}

/* framing._whole_frames: cut whole frames straight from a segment; returns bytes used, -1 error */
static int64_t whole_frames(framer_t *f, const uint8_t *d, size_t n, int64_t ts) {
    size_t pos = 0;
    int64_t offset = f->offset;
    while (n - pos > PREFIX_SIZE) {
        if (f->has_limit && offset + (int64_t)pos >= f->limit)
            break;
        int64_t total = rk_frame_total(d + pos);
        int stype = rk_frame_type(d + pos);
        int64_t hlen = rk_frame_header_length(d + pos);
        if ((int64_t)(n - pos) < total || total > MAX_FRAME_LENGTH)
            break;
        if (hlen == 0 || hlen > total - PREFIX_SIZE || stype > SER_ROCKETMQ
            || (stype == SER_JSON ? d[pos + PREFIX_SIZE] != JSON_HEADER_START : hlen < RMQ_MIN_HEADER))
            break;
        if (f->borrow) {           /* d is the packet's: the frame stays where it is */
            if (GROW(f->out, f->cap_out, f->n_out, 8) < 0)
                return -1;
            f->out[f->n_out++] = (frame_t){.ts = ts, .offset = offset + (int64_t)pos, .length = total,
                                           .data_len = (size_t)total, .borrowed = d + pos};
        } else if (emit(f, d + pos, (size_t)total, ts, offset + (int64_t)pos, total, 0, NULL, 0) < 0) {
            return -1;
        }
        pos += (size_t)total;
    }
    f->offset = offset + (int64_t)pos;
    return (int64_t)pos;
}

int framer_data(framer_t *f, const uint8_t *data, size_t n, int64_t ts) {
    if (f->abandoned || f->settled)
        return 0;
    if (f->skip) {
        size_t k = (int64_t)n < f->skip ? n : (size_t)f->skip;
        f->skip -= (int64_t)k;
        f->offset += (int64_t)k;
        if (check_limit(f, 0) || k == n)
            return 0;
        data += k;
        n -= k;
    }
    if (!buf_len(&f->buf)) {
        if (f->found && f->synced) {
            int64_t used = whole_frames(f, data, n, ts);
            if (used < 0)
                return -1;
            data += used;
            n -= (size_t)used;
            if (!n)
                return 0;
        }
    }
    if (buf_append(&f->buf, data, n) < 0)
        return -1;
    if ((int64_t)buf_len(&f->buf) < f->need)
        return 0;
    return parse(f, ts);
}

static int damaged(framer_t *f, int64_t total, int64_t lost, int64_t ts, const char *msg, size_t len) {
    f->st->v[ST_DAMAGED]++;
    return emit(f, buf_data(&f->buf), buf_len(&f->buf), ts, f->offset, total, lost, msg, len);
}

int framer_gap(framer_t *f, int64_t n, int64_t ts) {
    char msg[160];
    if (f->abandoned || f->settled)
        return 0;
    if (f->skip) {
        int64_t k = n < f->skip ? n : f->skip;
        f->skip -= k;
        f->offset += k;
        n -= k;
        if (check_limit(f, 0) || !n)
            return 0;
    }
    size_t have = buf_len(&f->buf);
    f->need = 0;
    if (f->synced && have >= PREFIX_SIZE) {
        int v = plausible(f, buf_data(&f->buf), have, 0);
        if (v == OK) {
            int64_t total = rk_frame_total(buf_data(&f->buf));
            int64_t rest = total - (int64_t)have, lost = n < rest ? n : rest;
            int len = snprintf(msg, sizeof msg, "frame incomplete: %lld of its %lld bytes lost in the capture",
                               (long long)lost, (long long)total);
            if (damaged(f, total, lost, ts, msg, (size_t)len) < 0)
                return -1;
            f->offset += (int64_t)have + n;
            buf_clear(&f->buf);
            if (n < rest) {
                f->skip = rest - n;            /* the gap ends inside this frame: still in step */
            } else if (n > rest) {             /* the gap runs past the frame's end: hunt after it */
                f->synced = 0;
                f->st->v[ST_RESYNCS]++;
            }
            check_limit(f, 0);
            return 0;
        }
    }
    count_skipped(f, (int64_t)have);
    f->offset += (int64_t)have + n;
    buf_clear(&f->buf);
    if (f->synced) {
        f->synced = 0;
        f->st->v[ST_RESYNCS]++;
    }
    check_limit(f, 0);
    return 0;
}

int framer_finish(framer_t *f, int64_t ts) {
    char msg[160];
    size_t have = buf_len(&f->buf);
    if (!f->abandoned && !f->settled && have) {
        if (f->synced && have >= PREFIX_SIZE && plausible(f, buf_data(&f->buf), have, 0) == OK) {
            int64_t total = rk_frame_total(buf_data(&f->buf));
            int len = snprintf(msg, sizeof msg, "capture ended mid-frame: %zu of %lld bytes seen",
                               have, (long long)total);
            if (damaged(f, total, total - (int64_t)have, ts, msg, (size_t)len) < 0)
                return -1;
        } else {
            count_skipped(f, (int64_t)have);
        }
    }
    f->offset += (int64_t)have;
    buf_clear(&f->buf);
    return 0;
}

/* ================================ waiting segments ======================================== */

static inline size_t pidx_home(const pstore_t *p, int64_t place) {
    return (size_t)hash_number((uint64_t)place) & (p->cap_idx - 1);
}

/* the index position holding `place`, or the empty one where it would go */
static size_t pidx_find(const pstore_t *p, int64_t place) {
    size_t mask = p->cap_idx - 1, i = pidx_home(p, place);
    COST(PROBES, 1);
    while (p->idx[i] && p->slot[p->idx[i] - 1].place != place) {
        i = (i + 1) & mask;
        COST(PROBES, 1);
    }
    return i;
}

/* room in the index for one more (at most half full): 0, or -1 (set) */
static int pidx_room(pstore_t *p) {
    if (2 * (p->n + 1) <= p->cap_idx)
        return 0;
    size_t cap = p->cap_idx ? 2 * p->cap_idx : 16;
    uint32_t *idx = PyMem_RawCalloc(cap, sizeof *idx);
    if (!idx)
        return no_memory();
    PyMem_RawFree(p->idx);
    p->idx = idx;
    p->cap_idx = cap;
    COST(MOVES, cap);                                  /* calloc'd */
    for (size_t k = 0; k < p->n; k++) {
        idx[pidx_find(p, p->heap[k].place)] = p->heap[k].slot + 1;
        COST(MOVES, 1);
    }
    return 0;
}

/* linear probing's deletion: pull later members of the probe run back over the hole */
static void pidx_remove(pstore_t *p, int64_t place) {
    size_t mask = p->cap_idx - 1, i = pidx_find(p, place), j = i;
    p->idx[i] = 0;
    for (;;) {
        j = (j + 1) & mask;
        COST(PROBES, 1);
        if (!p->idx[j])
            return;
        size_t home = pidx_home(p, p->slot[p->idx[j] - 1].place);
        if (((j - home) & mask) >= ((j - i) & mask)) {   /* home not in (i, j]: may move to i */
            p->idx[i] = p->idx[j];
            p->idx[j] = 0;
            i = j;
        }
    }
}

/* the slot of the segment at `place`, or NULL */
static pend_t *pstore_get(const pstore_t *p, int64_t place) {
    if (!p->n)
        return NULL;
    uint32_t k = p->idx[pidx_find(p, place)];
    return k ? &p->slot[k - 1] : NULL;
}

/* a new segment at `place` (not there yet): its slot, NULL on error (set) */
static pend_t *pstore_add(pstore_t *p, int64_t place) {
    if (pidx_room(p) < 0 || GROW(p->heap, p->cap_heap, p->n, 8) < 0)
        return NULL;
    uint32_t k;
    if (p->free) {
        k = p->free - 1;
        p->free = p->slot[k].len;
    } else {
        if (GROW(p->slot, p->cap_slot, p->n_slot, 8) < 0)
            return NULL;
        k = (uint32_t)p->n_slot++;
    }
    p->slot[k].place = place;
    p->idx[pidx_find(p, place)] = k + 1;
    size_t i = p->n++;                      /* sift up */
    while (i) {
        size_t up = (i - 1) / 2;
        if (p->heap[up].place <= place)
            break;
        p->heap[i] = p->heap[up];
        COST(MOVES, 1);
        i = up;
    }
    p->heap[i].place = place;
    p->heap[i].slot = k;
    return &p->slot[k];
}

/* takes the first segment off (the caller owns its data) */
static pend_t pstore_pop(pstore_t *p) {
    pkey_t top = p->heap[0], last = p->heap[--p->n];
    pend_t out = p->slot[top.slot];
    pidx_remove(p, top.place);
    p->slot[top.slot].len = p->free;
    p->slot[top.slot].data = NULL;
    p->free = top.slot + 1;
    size_t i = 0;                           /* sift down */
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= p->n)
            break;
        if (c + 1 < p->n && p->heap[c + 1].place < p->heap[c].place)
            c++;
        if (last.place <= p->heap[c].place)
            break;
        p->heap[i] = p->heap[c];
        COST(MOVES, 1);
        i = c;
    }
    if (p->n)
        p->heap[i] = last;
    return out;
}

static void pstore_empty(pstore_t *p) {
    for (size_t k = 0; k < p->n; k++)
        PyMem_RawFree(p->slot[p->heap[k].slot].data);
    if (p->n) {
        memset(p->idx, 0, p->cap_idx * sizeof *p->idx);
        COST(MOVES, p->cap_idx);
    }
    p->n = p->n_slot = 0;
    p->free = 0;
}

/* ================================ reassembler ============================================= */

/* a zeroed reassembler, or a released one (empty, its arrays kept) */
void reasm_init(reasm_t *r, framer_t *sink, stats_t *st, int64_t max_pending_bytes,
                int64_t max_pending_segments, int64_t hole_timeout_ns) {
    pstore_t keep = r->pending;
    memset(r, 0, sizeof *r);
    r->pending = keep;
    r->sink = sink;
    r->st = st;
    r->max_pending_bytes = max_pending_bytes;
    r->max_pending_segments = max_pending_segments;
    r->hole_timeout_ns = hole_timeout_ns;
    r->reorder_ns = REORDER_NS;
}

static void keep_upto(void **items, size_t *cap, size_t size, size_t keep) {
    if (*cap * size > keep) {
        PyMem_RawFree(*items);
        *items = NULL;
        *cap = 0;
    }
}

void reasm_release(reasm_t *r, size_t keep) {
    pstore_t *p = &r->pending;
    pstore_empty(p);
    keep_upto((void **)&p->slot, &p->cap_slot, sizeof *p->slot, keep);
    keep_upto((void **)&p->heap, &p->cap_heap, sizeof *p->heap, keep);
    keep_upto((void **)&p->idx, &p->cap_idx, sizeof *p->idx, keep);
}

void reasm_free(reasm_t *r) {
    reasm_release(r, 0);
}

void reasm_syn(reasm_t *r, uint32_t seq) {
    if (!r->has_next) {
        r->has_next = 1;
        r->next = seq + 1;
    }
}

void reasm_start_at(reasm_t *r, uint32_t seq) {
    r->has_next = 1;
    r->next = seq;
}

void reasm_count_below(reasm_t *r, int64_t ahead) {
    if (r->has_next) {
        r->has_ceiling = 1;
        r->ceiling = r->next + (uint32_t)ahead;
    }
}

static void retransmitted(reasm_t *r, int64_t n) {
    if (!r->has_ceiling)       /* read ahead: the next range counts it */
        r->st->v[ST_RETRANSMITTED] += n;
}

static int deliver(reasm_t *r, const uint8_t *payload, uint32_t plen, uint32_t missing, int64_t ts) {
    if (r->sink->settled)          /* the next byte range's bytes */
        return 0;
    if (plen && framer_data(r->sink, payload, plen, ts) < 0)
        return -1;
    if (missing) {
        if (!r->has_ceiling)
            r->st->v[ST_SNAPLEN_CUT] += missing;
        if (framer_gap(r->sink, missing, ts) < 0)
            return -1;
    }
    return 0;
}

/* what a segment rel < 0 bytes before `next` adds: 1 with *skip set, 0 all retransmitted */
static int new_part(reasm_t *r, int64_t rel, uint32_t plen, uint32_t missing,
                    uint32_t *skip_payload, uint32_t *cut_missing) {
    int64_t k = -rel, n = (int64_t)plen + missing;
    if (k >= n) {
        retransmitted(r, n);
        return 0;
    }
    if (k <= plen) {
        *skip_payload = (uint32_t)k;
        *cut_missing = 0;
    } else {
        *skip_payload = plen;
        *cut_missing = (uint32_t)(k - plen);
    }
    return 1;
}

/* deliver the waiting segments that start at or before the next expected byte, first-starting
 * first */
static int drain(reasm_t *r, int64_t ts, int own_ts) {
    pstore_t *ps = &r->pending;
    r->sink->borrow = 0;           /* each one is freed once delivered */
    while (ps->n && ps->heap[0].place <= r->at) {
        pend_t p = pstore_pop(ps);
        int64_t n = (int64_t)p.len + p.missing;
        r->pending_bytes -= n;
        int64_t rel = p.place - r->at;
        uint32_t skip = 0, missing = p.missing;
        if (rel < 0) {
            uint32_t cut;
            if (!new_part(r, rel, p.len, p.missing, &skip, &cut)) {
                PyMem_RawFree(p.data);
                continue;
            }
            missing = p.missing - cut;
            n += rel;
        }
        r->next += (uint32_t)n;
        r->at += n;
        int e = deliver(r, p.data + skip, p.len - skip, missing, own_ts ? p.ts : ts);
        PyMem_RawFree(p.data);
        if (e < 0)
            return -1;
    }
    return 0;
}

static int skip_hole(reasm_t *r, int64_t ts) {
    if (!r->pending.n || r->sink->settled)
        return 0;
    uint32_t nxt = r->next;
    int64_t gap = r->pending.heap[0].place - r->at;
    if (gap > 0) {
        int64_t lost = gap;
        if (r->has_ceiling) {
            int32_t below = rel32(r->ceiling, nxt);
            lost = below <= 0 ? 0 : below < gap ? below : gap;
        }
        if (lost) {
            r->st->v[ST_GAPS]++;
            r->st->v[ST_GAP_BYTES] += lost;
        }
        if (framer_gap(r->sink, gap, ts) < 0)
            return -1;
        r->next = nxt + (uint32_t)gap;
        r->at += gap;
    }
    if (drain(r, ts, 1) < 0)
        return -1;
    r->has_doomed = 0;
    if (r->pending.n)
        r->hole_since = ts;
    return 0;
}

int reasm_tick(reasm_t *r, int64_t ts) {
    if (r->pending.n && !r->sink->settled
        && (ts - r->hole_since > r->hole_timeout_ns
            || (r->has_doomed && ts - r->doomed_at >= r->reorder_ns)))
        return skip_hole(r, ts);
    return 0;
}

int reasm_acked(reasm_t *r, uint32_t ack, int64_t ts) {
    if (r->pending.n && !r->has_doomed && rel32(ack, r->next) > 0
        && rel32(ack, r->next) > r->pending.heap[0].place - r->at) {
        r->has_doomed = 1;
        r->doomed_at = ts;
    }
    return reasm_tick(r, ts);
}

int reasm_finish(reasm_t *r, int64_t ts) {
    while (r->pending.n && !r->sink->settled)
        if (skip_hole(r, ts) < 0)
            return -1;
    return 0;
}

static int reasm_segment_(reasm_t *r, uint32_t seq, const uint8_t *payload, uint32_t plen,
                          uint32_t missing, int64_t ts) {
    int64_t n = (int64_t)plen + missing;
    if (!n || r->sink->settled)
        return 0;
    if (!r->has_next) {
        r->has_next = 1;
        r->next = seq;
    }
    uint32_t nxt = r->next;
    if (seq == nxt && !r->pending.n) {     /* the common case: in order, nothing waiting */
        r->next = nxt + (uint32_t)n;
        r->at += n;
        return deliver(r, payload, plen, missing, ts);
    }
    int32_t rel = rel32(seq, nxt);
    if (rel < 0) {
        uint32_t skip, cut;
        if (!new_part(r, rel, plen, missing, &skip, &cut))
            return 0;
        payload += skip;
        plen -= skip;
        missing -= cut;
        n += rel;
        rel = 0;
    }
    if (rel == 0) {
        r->next = nxt + (uint32_t)n;
        r->at += n;
        if (deliver(r, payload, plen, missing, ts) < 0 || drain(r, ts, 0) < 0)
            return -1;
        r->has_doomed = 0;
        if (r->pending.n)
            r->hole_since = ts;
        return 0;
    }
    int64_t place = r->at + rel;
    pend_t *p = pstore_get(&r->pending, place);
    if (!p || (int64_t)p->len + p->missing < n) {
        uint8_t *copy = PyMem_RawMalloc(plen ? plen : 1);
        if (!copy)
            return no_memory();
        memcpy(copy, payload, plen);
        if (p) {
            r->pending_bytes -= (int64_t)p->len + p->missing;
            PyMem_RawFree(p->data);
        } else {
            if (!r->pending.n)
                r->hole_since = ts;
            if (!(p = pstore_add(&r->pending, place))) {
                PyMem_RawFree(copy);
                return -1;
            }
        }
        p->len = plen;
        p->missing = missing;
        p->ts = ts;
        p->data = copy;
        r->pending_bytes += n;
    } else {
        retransmitted(r, n);
    }
    if (r->pending_bytes > r->max_pending_bytes || (int64_t)r->pending.n > r->max_pending_segments)
        return skip_hole(r, ts);
    return reasm_tick(r, ts);
}

/* the payload is the packet's: whole frames in it are not copied (the caller takes the frames
 * before the next packet); segments that wait behind a hole are copied, and not borrowed */
int reasm_segment(reasm_t *r, uint32_t seq, const uint8_t *payload, uint32_t plen,
                  uint32_t missing, int64_t ts) {
    r->sink->borrow = 1;
    int res = reasm_segment_(r, seq, payload, plen, missing, ts);
    r->sink->borrow = 0;
    return res;
}
