#include "htab.h"


static hent_t *find(const htab_t *t, const void *key, size_t klen, uint64_t h) {
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        hent_t *e = &t->e[i];
        COST(PROBES, 1);
        if (e->state == 0)
            return NULL;
        if (e->state == 1 && e->hash == h && e->klen == klen && !memcmp(hent_key(e), key, klen))
            return e;
    }
}

hent_t *htab_get(const htab_t *t, const void *key, size_t klen) {
    return t->cap ? find(t, key, klen, hash_bytes(key, klen)) : NULL;
}

static int rehash(htab_t *t) {
    size_t cap = t->cap ? t->cap : 16;
    while (cap < 4 * (t->used + 1))
        cap *= 2;
    hent_t *e = PyMem_RawCalloc(cap, sizeof(hent_t));
    if (!e) {
        no_memory();
        return -1;
    }
    COST(MOVES, cap);                                  /* calloc'd */
    for (size_t i = 0; i < t->cap; i++) {
        hent_t *o = &t->e[i];
        if (o->state != 1)
            continue;
        size_t j = (size_t)o->hash & (cap - 1);
        while (e[j].state) {
            j = (j + 1) & (cap - 1);
            COST(PROBES, 1);
        }
        e[j] = *o;
        COST(MOVES, 1);
    }
    PyMem_RawFree(t->e);
    t->e = e;
    t->cap = cap;
    t->filled = t->used;
    return 0;
}

hent_t *htab_put(htab_t *t, const void *key, size_t klen) {
    uint64_t h = hash_bytes(key, klen);
    hent_t *e = t->cap ? find(t, key, klen, h) : NULL;
    if (e)
        return e;
    if (2 * (t->filled + 1) > t->cap && rehash(t) < 0)
        return NULL;
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    while (t->e[i].state == 1) {
        i = (i + 1) & mask;
        COST(PROBES, 1);
    }
    e = &t->e[i];
    COST(MOVES, 1);
    if (klen <= HTAB_INLINE) {
        memcpy(e->key.in, key, klen);
    } else {
        uint8_t *k = PyMem_RawMalloc(klen);
        if (!k) {
            no_memory();
            return NULL;
        }
        memcpy(k, key, klen);
        e->key.heap = k;
    }
    if (e->state == 0)
        t->filled++;
    e->klen = (uint32_t)klen;
    e->hash = h;
    e->state = 1;
    e->ptr = NULL;
    e->value = 0;
    t->used++;
    return e;
}

static void free_key(hent_t *e) {
    if (e->klen > HTAB_INLINE)
        PyMem_RawFree(e->key.heap);
}

void htab_del(htab_t *t, hent_t *e) {
    free_key(e);
    e->state = 2;
    t->used--;
}

void htab_clear(htab_t *t) {
    COST(MOVES, t->cap);
    for (size_t i = 0; i < t->cap; i++) {
        if (t->e[i].state == 1)
            free_key(&t->e[i]);
        t->e[i].state = 0;
    }
    t->used = t->filled = 0;
}

void htab_free(htab_t *t) {
    htab_clear(t);
    PyMem_RawFree(t->e);
    t->e = NULL;
    t->cap = 0;
}
