/* A small open-addressing hash table from byte strings to a pointer and an integer. */
#ifndef ROCKETPY_NATIVE_HTAB_H
#define ROCKETPY_NATIVE_HTAB_H
#include "core.h"

#define HTAB_INLINE 40         /* keys up to this long (flow keys, 4-tuples) live in the entry */

typedef struct {
    uint64_t hash;
    void *ptr;
    int64_t value;
    uint32_t klen;
    uint8_t state;             /* 0 empty, 1 used, 2 deleted */
    union {
        uint8_t *heap;
        uint8_t in[HTAB_INLINE];
    } key;
} hent_t;

static inline const uint8_t *hent_key(const hent_t *e) {
    return e->klen <= HTAB_INLINE ? e->key.in : e->key.heap;
}

typedef struct {
    hent_t *e;
    size_t cap, used, filled;  /* filled counts deleted slots too */
} htab_t;

/* A keyed hash (wyhash's construction): sixteen bytes at a time folded through a full 64x64->128
 * bit multiply with secret, per-process keys (getrandom at import).  Flow keys and bodies come
 * from strangers; with the keys inside the multiply, which input differences cancel depends on
 * the keys, so colliding inputs cannot be prepared (an xor-then-multiply hash lets a flipped top
 * bit be cancelled in the next word whatever its seed). */
extern uint64_t HASH_KEY[3];

static inline uint64_t mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t rd64le(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = HASH_KEY[0] ^ mum(n ^ HASH_KEY[1], HASH_KEY[2]), a, b;
    size_t i = n;
    for (; i > 16; p += 16, i -= 16)
        h = mum(rd64le(p) ^ HASH_KEY[1], rd64le(p + 8) ^ h);
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
    return mum(HASH_KEY[1] ^ n, mum(a ^ HASH_KEY[1], b ^ h));
}

hent_t *htab_get(const htab_t *t, const void *key, size_t klen);
/* insert or find: the entry (new ones zeroed: ptr NULL, value 0), NULL on error (set) */
hent_t *htab_put(htab_t *t, const void *key, size_t klen);
void htab_del(htab_t *t, hent_t *e);
void htab_clear(htab_t *t);
void htab_free(htab_t *t);

#endif
