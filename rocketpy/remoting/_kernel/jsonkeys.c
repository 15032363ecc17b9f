/* Whether a JSON text (a request body json.loads read) writes a key twice in one object: json
 * keeps the last value, a fastjson bean property the first (rocketpy.remoting.fastjson,
 * repeats_keys, is the oracle).  One pass over the text: each object gets a serial number and its
 * keys go into one hash table keyed by (serial, the key's bytes).  Raw bytes are compared, so a
 * key holding a backslash (an escape spells one key two ways) or anything but a plain JSON text
 * (fastjson's unquoted keys, single quotes, comments) is answered "cannot tell".
 *
 * The open objects' keys are kept on one stack (an object's keys are contiguous there: a nested
 * object is closed before its parent's next key); an object's first SMALL keys are compared one
 * by one, a bigger object's go into one keyed hash table by (object serial, bytes), so a
 * registration's 10,000 topic names cost a table of their own size and its topic configs none. */
#include <stdlib.h>

#include "kernel.h"

/* 16 bytes a key (the text is below 4 GiB): the low half of the hash, the object, the span */
/* 16 bytes a key (the text is below 4 GiB): the low half of the hash, the object, the span */
typedef struct { uint32_t hash, serial, at, len; } key_entry_t;

typedef struct {
    key_entry_t *e;            /* serial 0: empty */
    size_t cap, used;
} key_table_t;

typedef struct { uint32_t at, len; } span_t;

/* an open object or array: its serial (0: an array) and where its keys begin on the stack */
typedef struct { uint32_t serial, first; } frame_t;

#define SMALL 16

static int table_grow(key_table_t *t) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    key_entry_t *e = calloc(cap, sizeof *e);
    if (!e)
        return -1;
    COST(MOVES, cap);                                  /* calloc'd */
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].serial)
            continue;
        size_t j = (size_t)t->e[i].hash & (cap - 1);
        while (e[j].serial) {
            j = (j + 1) & (cap - 1);
            COST(PROBES, 1);
        }
        e[j] = t->e[i];
        COST(MOVES, 1);
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 0;
}

/* 1 the key is in the table already, 0 added, -1 out of memory */
static int table_add(key_table_t *t, const uint8_t *text, uint32_t serial, span_t k) {
    if (2 * (t->used + 1) > t->cap && table_grow(t) < 0)
        return -1;
    uint32_t h = (uint32_t)(rk_hash_bytes(text + k.at, k.len) ^ mum(serial ^ RK_HASH_KEY[2], RK_HASH_KEY[0]));
    size_t i = (size_t)h & (t->cap - 1);
    for (; t->e[i].serial; i = (i + 1) & (t->cap - 1)) {
        key_entry_t *o = &t->e[i];
        COST(PROBES, 1);
        if (o->hash == h && o->serial == serial && o->len == k.len && !memcmp(text + o->at, text + k.at, k.len))
            return 1;
    }
    t->e[i] = (key_entry_t){h, serial, k.at, k.len};
    COST(MOVES, 1);
    t->used++;
    return 0;
}

/* whether the object of frame f already has key k (1), or not (0, and it is recorded), -1 out
 * of memory */
static int seen_key(key_table_t *t, const uint8_t *text, const frame_t *f, span_t **keys,
                    size_t *n_keys, size_t *cap_keys, span_t k) {
    size_t here = *n_keys - f->first;
    if (here < SMALL) {
        for (size_t j = f->first; j < *n_keys; j++) {
            COST(PROBES, 1);
            if ((*keys)[j].len == k.len && !memcmp(text + (*keys)[j].at, text + k.at, k.len))
                return 1;
        }
    } else {
        if (here == SMALL)             /* the object grew big: its keys so far into the table */
            for (size_t j = f->first; j < *n_keys; j++)
                if (table_add(t, text, f->serial, (*keys)[j]) < 0)
                    return -1;
        int r = table_add(t, text, f->serial, k);
        if (r)
            return r;
    }
    if (*n_keys == *cap_keys) {
        span_t *grown = realloc(*keys, (*cap_keys = *cap_keys ? 2 * *cap_keys : 64) * sizeof *grown);
        if (!grown)
            return -1;
        COST(BYTES, *n_keys * sizeof *grown);
        *keys = grown;
    }
    (*keys)[(*n_keys)++] = k;
    return 0;
}

int rk_repeated_keys(const uint8_t *p, size_t n) {
    key_table_t table = {NULL, 0, 0};
    frame_t *frames = NULL;
    span_t *keys = NULL;
    size_t depth = 0, cap = 0, n_keys = 0, cap_keys = 0;
    uint32_t next_serial = 0;
    int expect_key = 0, result = n >= UINT32_MAX ? RK_KEYS_UNKNOWN : 0;
    for (size_t i = 0; i < n && !result; i++) {
        uint8_t c = p[i];
        if (c == '"') {
            size_t start = ++i;
            int escaped = 0;
            for (;;) {                         /* the closing quote: one not escaped */
                const uint8_t *q = i < n ? memchr(p + i, '"', n - i) : NULL;
                COST(BYTES, (q ? (size_t)(q - p) + 1 : n) - i);
                if (!q) {
                    i = n;
                    break;
                }
                size_t back = 0;
                while (p + start < q - back && q[-1 - (ptrdiff_t)back] == '\\') {
                    back++;
                    COST(BYTES, 1);
                }
                i = (size_t)(q - p);
                if (!(back & 1))
                    break;
                escaped = 1;
                i++;
            }
            if (!escaped && i < n && memchr(p + start, '\\', i - start))
                escaped = 1;
            COST(BYTES, i < n ? i - start : 0);
            if (i >= n) {
                result = RK_KEYS_UNKNOWN;      /* an open string: not a text json read */
            } else if (expect_key) {
                span_t k = {(uint32_t)start, (uint32_t)(i - start)};
                if (escaped)
                    result = RK_KEYS_UNKNOWN;
                else if ((result = seen_key(&table, p, &frames[depth - 1], &keys, &n_keys, &cap_keys, k)) < 0)
                    result = RK_KEYS_NO_MEMORY;
                expect_key = 0;
            }
        } else if (c == '{' || c == '[') {
            if (depth == cap) {
                frame_t *grown = realloc(frames, (cap = cap ? 2 * cap : 64) * sizeof *grown);
                if (!grown) {
                    result = RK_KEYS_NO_MEMORY;
                    break;
                }
                COST(BYTES, depth * sizeof *grown);
                frames = grown;
            }
            frames[depth++] = (frame_t){c == '{' ? ++next_serial : 0, (uint32_t)n_keys};
            expect_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (!depth)
                result = RK_KEYS_UNKNOWN;
            else
                n_keys = frames[--depth].first;   /* its keys leave the stack */
            expect_key = 0;
        } else if (c == ',') {
            expect_key = depth && frames[depth - 1].serial;
        } else if (expect_key && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            result = RK_KEYS_UNKNOWN;          /* an unquoted or single-quoted key, a comment */
        } else if (c == '\'' || c == '/') {
            result = RK_KEYS_UNKNOWN;          /* fastjson's forms outside keys */
        }
    }
    free(table.e);
    free(frames);
    free(keys);
    return result;
}
