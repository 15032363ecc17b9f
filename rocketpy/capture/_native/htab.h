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

/* the keyed hash is the header kernel's (rocketpy/remoting/_kernel/kernel.h) */
#define HASH_KEY RK_HASH_KEY
#define hash_bytes rk_hash_bytes

/* a number's keyed hash (opaques, stream places, codes): every bit mixed first (splitmix64's
 * finalizer), then the keyed multiply. mum alone leaves numbers that differ only in high bits
 * (opaques i << 16, places a segment size apart) sharing the product's low bits, so their slots
 * came from the high half alone, a stride that clustered for some keys (probes 6.5x for 4x the
 * requests in test_capture_complexity) */
static inline uint64_t hash_number(uint64_t x) {
    x ^= HASH_KEY[1];
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return mum(x ^ (x >> 31), HASH_KEY[2]);
}

hent_t *htab_get(const htab_t *t, const void *key, size_t klen);
/* insert or find: the entry (new ones zeroed: ptr NULL, value 0), NULL on error (set) */
hent_t *htab_put(htab_t *t, const void *key, size_t klen);
void htab_del(htab_t *t, hent_t *e);
void htab_clear(htab_t *t);
void htab_free(htab_t *t);

#endif
