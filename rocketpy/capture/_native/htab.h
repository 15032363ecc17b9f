/* A small open-addressing hash table from byte strings to a pointer and an integer. */
#ifndef ROCKETPY_NATIVE_HTAB_H
#define ROCKETPY_NATIVE_HTAB_H
#include "core.h"

typedef struct {
    uint8_t *key;
    uint32_t klen;
    uint8_t state;             /* 0 empty, 1 used, 2 deleted */
    uint64_t hash;
    void *ptr;
    int64_t value;
} hent_t;

typedef struct {
    hent_t *e;
    size_t cap, used, filled;  /* filled counts deleted slots too */
} htab_t;

/* eight bytes at a time, multiply-xorshift mixing (splitmix64's constants) */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, v;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
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
