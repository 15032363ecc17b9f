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

/* eight bytes at a time, multiply-xorshift mixing (splitmix64's constants); long keys (bodies)
 * in four independent lanes.  Seeded per process at import: flow keys and bodies come from
 * strangers, who must not be able to prepare colliding ones. */
extern uint64_t HASH_SEED;
static inline uint64_t mix8(uint64_t h, const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 31);
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = HASH_SEED ^ n, v;
    if (n >= 64) {
        uint64_t a = h, b = h + 1, c = h + 2, d = h + 3;
        for (; n >= 32; p += 32, n -= 32) {
            a = mix8(a, p);
            b = mix8(b, p + 8);
            c = mix8(c, p + 16);
            d = mix8(d, p + 24);
        }
        h = a ^ (b * 0x9E3779B97F4A7C15ULL) ^ (c * 0xC2B2AE3D27D4EB4FULL) ^ (d * 0x165667B19E3779F9ULL);
    }
    for (; n >= 8; p += 8, n -= 8)
        h = mix8(h, p);
    v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

hent_t *htab_get(const htab_t *t, const void *key, size_t klen);
/* insert or find: the entry (new ones zeroed: ptr NULL, value 0), NULL on error (set) */
hent_t *htab_put(htab_t *t, const void *key, size_t klen);
void htab_del(htab_t *t, hent_t *e);
void htab_clear(htab_t *t);
void htab_free(htab_t *t);

#endif
