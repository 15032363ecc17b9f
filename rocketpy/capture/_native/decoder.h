/* Connections and the capture decoder (rocketpy/capture/decoder.py). */
#ifndef ROCKETPY_NATIVE_DECODER_H
#define ROCKETPY_NATIVE_DECODER_H
#include "core.h"
#include "htab.h"
#include "stream.h"

/* opaque -> (code, ts): a dict in insertion order (Connection.requests) */
typedef struct { int32_t opaque, code; int64_t ts, pos_file, pos_off; int alive; } req_t;
typedef struct {
    req_t *e;
    size_t n, cap, live, head;
    int32_t *idx;              /* 1 + entry index, 0 empty */
    size_t idx_cap;
} reqmap_t;

typedef struct {
    reasm_t reasm;
    framer_t fr;
    int fin;
} dir_t;

typedef struct held_s {
    row_t row;
    uint8_t *blob;             /* the row's strings */
    int d;
    int64_t pos_file, pos_off; /* where it completed */
    int alive, todo;           /* still held; picked for the next release */
    /* links are 1 + an index into `held`, 0: none */
    size_t next_same;          /* the next held response of its direction and opaque */
    size_t dprev, dnext;       /* the held responses of its direction, in order */
} held_t;

typedef struct conn_s {
    uint8_t key[40];           /* (src, sport, dst, dport) of direction 0, as flow keys are written */
    uint8_t rkey[40];          /* ... of direction 1 */
    size_t klen;
    char *conn_id, *ep[2];
    size_t conn_id_len, ep_len[2], conn_id_cap;
    dir_t dirs[2];
    reqmap_t requests[2];
    held_t *held;              /* in the order they came; released ones until compacted */
    size_t n_held, cap_held, live_held[2], dead_held;
    size_t held_first[2], held_last[2];   /* per direction (links) */
    htab_t held_by;            /* (direction, opaque) -> first | last << 32 (links) */
    size_t *todo;              /* indices picked for the next release */
    size_t n_todo, cap_todo;
    int64_t last_ts;
    int closed, has_isn[2], self_loop, unsettled;
    int has_drained[2];        /* reading ahead: where each direction's last hole closed */
    int64_t drained_file[2], drained_off[2];
    uint32_t isn[2];
    struct conn_s *prev, *next;   /* every connection, in the order they began */
    uint64_t born;                /* place in that order */
    int watched;                  /* on the sweep's list: closed, or bytes behind a hole */
    struct conn_s *wprev, *wnext;
    struct conn_s *lprev, *lnext; /* every connection, least recently active first */
    int64_t buffered;             /* bytes it held when last seen (Connection.buffered) */
} conn_t;

typedef struct {
    int64_t offset;
    int has_seq, synced;
    uint32_t seq;
} dirstart_t;

typedef struct {
    PyObject_HEAD
    int busy;                  /* in feed (without the GIL): no other call may touch it */
    walker_t w;
    stats_t st;
    columns_t cols;
    PyObject *batches;         /* list of finished column sets */
    int64_t batch_rows;
    uint8_t *ports;            /* bitmap of 65536 ports, NULL: every port */
    int64_t abandon_after, max_pending_bytes, max_pending_segments, hole_timeout_ns, linger_ns;
    int64_t max_connections, max_buffered_bytes;
    conn_t *lru_first, *lru_last;  /* CaptureDecoder.active */
    int64_t n_live, buffered, peak_live, peak_buffered;
    htab_t flows;              /* flow key -> conn (ptr), direction (value) */
    size_t n_flows;
    conn_t *first, *last;
    conn_t *spare;             /* dropped connections kept with their buffers, for new ones */
    size_t n_spare;
    conn_t *recent;            /* the last packet's connection (most packets follow one of theirs) */
    hent_t hit;                /* its flow entry, as recent() hands it out */
    uint64_t born;
    conn_t *watch;             /* the connections a sweep may have to do something for */
    conn_t **sweeping;
    size_t cap_sweeping;
    htab_t generation;
    int64_t next_sweep, packets_since_sweep;
    buf_t file;
    int has_file;
    int64_t file_index;
    header_t hdr, scratch;
    buf_t errbuf;
    summary_cache_t *summaries;
    /* byte ranges */
    int has_plan, reading_ahead;
    htab_t boundaries;         /* (file index, offset) -> conn id (value: index into plan_ids) */
    htab_t live;               /* flow key of direction 0 -> index into plan_live */
    htab_t limits;             /* conn id -> index into plan_limits */
    PyObject *plan_ids;        /* list of str */
    dirstart_t *plan_live;     /* 2 per live connection */
    PyObject *plan_live_ids;   /* list of str */
    int64_t *plan_limits;      /* 2 per connection, -1: none */
    int64_t end, readahead_until, unsettled;
    int64_t pos_file, pos_off;  /* the current packet: (file index, record offset) */
    PyObject *edges;           /* dict conn id -> what the job settles */
} Decoder;

int decoder_packet(Decoder *dec, const packet_t *pkt);
int decoder_finish(Decoder *dec);
int decoder_end_range(Decoder *dec);
void decoder_clear(Decoder *dec);
int decoder_flush_batch(Decoder *dec);

#endif
