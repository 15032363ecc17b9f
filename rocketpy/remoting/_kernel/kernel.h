/* The one header kernel: a frame's prefix, a ROCKETMQ binary header and the usual JSON header,
 * read as rocketpy.remoting.frame reads them.
 *
 * Pure C (no Python): compiled into rocketpy.remoting._kernel (the server's codec, the answer
 * cache key, the overload peek) and into rocketpy.capture._native (the capture core), so both
 * read a header with the same functions.  It reads only the strict usual forms; anything else
 * (fastjson's lenient forms, keys that are not a property's exact name, a key twice, a lone
 * surrogate, 0x1A, numbers where strings are usual) is answered 0, "ask the Python codec", which
 * stays the oracle: tests/test_header_kernel.py holds the two equal on every genuine capture frame
 * and the fuzz corpus.  The layout constants come from layout_gen.h, which setup.py writes from
 * rocketpy/remoting/layout.py. */
#ifndef ROCKETPY_HEADER_KERNEL_H
#define ROCKETPY_HEADER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "cost.h"
#include "layout_gen.h"

/* A keyed hash (wyhash's construction): sixteen bytes at a time folded through a full 64x64->128
 * bit multiply with secret, per-process keys (getrandom at import).  Flow keys and bodies come
 * from strangers; with the keys inside the multiply, which input differences cancel depends on
 * the keys, so colliding inputs cannot be prepared (an xor-then-multiply hash lets a flipped top
 * bit be cancelled in the next word whatever its seed). */
extern uint64_t RK_HASH_KEY[3];

static inline uint64_t mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t rd64le(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t rk_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = RK_HASH_KEY[0] ^ mum(n ^ RK_HASH_KEY[1], RK_HASH_KEY[2]), a, b;
    size_t i = n;
    for (; i > 16; p += 16, i -= 16)
        h = mum(rd64le(p) ^ RK_HASH_KEY[1], rd64le(p + 8) ^ h);
    if (i >= 8) {                 /* the last 8..16 bytes (overlapping reads) */
        a = rd64le(p);
        b = rd64le(p + i - 8);
    } else if (i >= 4) {
        uint32_t x, y;
        memcpy(&x, p, 4);
        memcpy(&y, p + i - 4, 4);
        a = x;
        b = y;
    } else {
        a = i ? (uint64_t)p[0] << 16 | (uint64_t)p[i >> 1] << 8 | p[i - 1] : 0;
        b = 0;
    }
    return mum(RK_HASH_KEY[1] ^ n, mum(a ^ RK_HASH_KEY[1], b ^ h));
}


typedef struct { const char *p; int32_t n; } str_t;    /* p == NULL: null */
#define STR_NULL ((str_t){NULL, 0})
static inline str_t str_of(const char *p, size_t n) { str_t s = {p, (int32_t)n}; return s; }

typedef struct { str_t key, value; } kv_t;

/* a language name and its code (the JSON header writes the name) */
typedef struct { const char *name; size_t len; int32_t value; } rk_language_t;

typedef struct {
    int32_t code, flag, opaque, version, language;
    str_t remark;
    int has_ext;
    int raw_controls;          /* a string held a raw control character (fastjson's reading) */
    size_t opaque_at, opaque_end;  /* where the opaque is written, in the header */
    kv_t *ext;
    size_t n_ext, cap_ext;
    uint32_t *kidx;            /* extFields keys -> 1 + entry, once there are many */
    size_t cap_kidx, n_kidx;   /* n_kidx: entries indexed so far */
    uint8_t *text;             /* decoded strings live here */
    size_t text_len, text_cap;
} rk_header_t;

static inline uint16_t rk_rd16be(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t rk_rd32be(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* the prefix of the frame at f (PREFIX_SIZE bytes there) */
static inline int64_t rk_frame_total(const uint8_t *f) { return (int64_t)rk_rd32be(f) + LENGTH_SIZE; }
static inline int rk_frame_type(const uint8_t *f) { return f[TYPE_AT]; }
static inline int64_t rk_frame_header_length(const uint8_t *f) {
    return rk_rd32be(f + TYPE_AT) & HEADER_LENGTH_MASK;
}

void rk_header_reset(rk_header_t *h);
void rk_header_free(rk_header_t *h);
/* strict UTF-8, as bytes.decode("utf-8") */
int rk_utf8_valid(const uint8_t *s, size_t n);
/* 1 read, 0 not the usual form (the codec decides), -1 out of memory */
/* one more extFields entry: 0, or -1 (out of memory) */
int rk_add_ext(rk_header_t *h, str_t k, str_t v);
int rk_read_rocketmq(const uint8_t *p, size_t n, rk_header_t *h);
int rk_read_json(const uint8_t *p, size_t n, rk_header_t *h, const rk_language_t *langs,
                 size_t n_langs);

/* jsonkeys.c: whether a JSON text writes a key twice in one object (byte for byte): 1 yes, 0 no,
 * RK_KEYS_UNKNOWN when a key holds an escape or the text is not plain JSON, RK_KEYS_NO_MEMORY */
#define RK_KEYS_UNKNOWN 2
#define RK_KEYS_NO_MEMORY (-1)
int rk_repeated_keys(const uint8_t *p, size_t n);

#endif
