/* One direction of a TCP connection: reassembly (reassembly.py) and frame cutting (framing.py). */
#ifndef ROCKETPY_NATIVE_STREAM_H
#define ROCKETPY_NATIVE_STREAM_H
#include "core.h"

typedef struct {
    int64_t ts, offset, lost;
    int64_t length;            /* the whole frame, as its prefix says */
    size_t data_at, data_len;  /* what arrived of it, in the direction's arena */
    const uint8_t *borrowed;   /* or there: in the packet being decoded (framer_t.borrow) */
    int damaged;
    size_t error_at, error_len;   /* damaged: why (in the arena) */
} frame_t;

typedef struct {
    buf_t buf;
    int64_t offset, skip, hunted, abandon_after, need;
    int synced, found, abandoned;
    int has_limit, settled, has_cut, head, has_first, has_picked_up;
    int64_t limit, cut, first_frame, head_skipped, picked_up;
    frame_t *out;
    size_t n_out, cap_out;
    buf_t arena;               /* bytes of the frames in `out` */
    int borrow;                /* the bytes fed now stay valid until `out` is taken (a packet's
                                * payload, its frames taken before the next packet): whole
                                * frames in them are not copied to the arena */
    stats_t *st;
    header_t *scratch;         /* for checking headers while hunting */
} framer_t;

/* A segment waiting behind a hole, in a slot that does not move while it waits. */
typedef struct {
    int64_t place;             /* its first byte's place in the stream (never wraps) */
    uint32_t len, missing;
    int64_t ts;
    uint8_t *data;
} pend_t;

typedef struct { int64_t place; uint32_t slot; } pkey_t;

/* The waiting segments (reassembly.py's `pending` and `order`): slots, a min-heap of their
 * places (the first one on top) and an index place -> slot (open addressing with a keyed hash,
 * so a stranger cannot make its probes long), each operation O(1) or O(log n). */
typedef struct {
    pend_t *slot;
    size_t n_slot, cap_slot;   /* slots used at most so far; free ones chained through `len` */
    uint32_t free;             /* 1 + a free slot, 0: none */
    pkey_t *heap;
    size_t n, cap_heap;
    uint32_t *idx;             /* 1 + slot, 0: empty */
    size_t cap_idx;
} pstore_t;

typedef struct {
    framer_t *sink;
    int has_next, has_doomed, has_ceiling;
    uint32_t next, ceiling;     /* reading ahead: bytes from `ceiling` on are the next range's */
    int64_t at;                 /* the next expected byte's place in the stream */
    pstore_t pending;
    int64_t pending_bytes, hole_since, doomed_at;
    int64_t max_pending_bytes, max_pending_segments, hole_timeout_ns, reorder_ns;
    stats_t *st;
} reasm_t;

void framer_init(framer_t *f, stats_t *st, header_t *scratch, int64_t abandon_after);
void framer_free(framer_t *f);
int framer_data(framer_t *f, const uint8_t *data, size_t n, int64_t ts);
int framer_gap(framer_t *f, int64_t n, int64_t ts);
int framer_finish(framer_t *f, int64_t ts);
void framer_start_at(framer_t *f, int64_t offset, int synced);
void framer_stop_at(framer_t *f, int64_t limit);
void framer_reset_out(framer_t *f);
/* the bytes of a frame in `out` */
static inline const uint8_t *frame_data(const framer_t *f, const frame_t *fr) {
    return fr->borrowed ? fr->borrowed : buf_data(&f->arena) + fr->data_at;
}

void reasm_init(reasm_t *r, framer_t *sink, stats_t *st, int64_t max_pending_bytes,
                int64_t max_pending_segments, int64_t hole_timeout_ns);
void reasm_free(reasm_t *r);
/* a dropped connection's: frees the waiting segments, keeps arrays up to `keep` bytes each */
void reasm_release(reasm_t *r, size_t keep);
void reasm_syn(reasm_t *r, uint32_t seq);
void reasm_start_at(reasm_t *r, uint32_t seq);
void reasm_count_below(reasm_t *r, int64_t ahead);
int reasm_segment(reasm_t *r, uint32_t seq, const uint8_t *payload, uint32_t plen,
                  uint32_t missing, int64_t ts);
int reasm_acked(reasm_t *r, uint32_t ack, int64_t ts);
int reasm_tick(reasm_t *r, int64_t ts);
int reasm_finish(reasm_t *r, int64_t ts);

#endif
