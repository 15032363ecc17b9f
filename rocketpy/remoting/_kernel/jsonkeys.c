/* Whether a JSON text (a request body json.loads read) writes a key twice in one object: json
 * keeps the last value, a fastjson bean property the first (rocketpy.remoting.fastjson,
 * repeats_keys, is the oracle).  One pass over the text: each object gets a serial number and its
 * keys go into one hash table keyed by (serial, the key's bytes).  Raw bytes are compared, so a
 * key holding a backslash (an escape spells one key two ways) or anything but a plain JSON text
 * (fastjson's unquoted keys, single quotes, comments) is answered "cannot tell". */
#include <stdlib.h>

#include "kernel.h"

/* 16 bytes a key (the text is below 4 GiB): the low half of the hash, the object, the span */
typedef struct { uint32_t hash, serial, at, len; } key_entry_t;

typedef struct {
    key_entry_t *e;            /* serial 0: empty */
    size_t cap, used;
} key_table_t;

/* room for `keys` keys (at most half full) without growing again */
static int table_grow(key_table_t *t, size_t keys) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    while (cap < 2 * keys)
        cap *= 2;
    key_entry_t *e = calloc(cap, sizeof *e);
    if (!e)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].serial)
            continue;
        size_t j = (size_t)t->e[i].hash & (cap - 1);
        while (e[j].serial)
            j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 0;
}

/* 1 the key is in the table already, 0 added, -1 out of memory */
static int table_add(key_table_t *t, const uint8_t *text, uint32_t serial, size_t at, size_t len) {
    if (2 * (t->used + 1) > t->cap && table_grow(t, t->used + 1) < 0)
        return -1;
    uint32_t h = (uint32_t)(rk_hash_bytes(text + at, len) ^ mum(serial ^ RK_HASH_KEY[2], RK_HASH_KEY[0]));
    size_t i = (size_t)h & (t->cap - 1);
    for (; t->e[i].serial; i = (i + 1) & (t->cap - 1)) {
        key_entry_t *o = &t->e[i];
        if (o->hash == h && o->serial == serial && o->len == len && !memcmp(text + o->at, text + at, len))
            return 1;
    }
    t->e[i] = (key_entry_t){h, serial, (uint32_t)at, (uint32_t)len};
    t->used++;
    return 0;
}

int rk_repeated_keys(const uint8_t *p, size_t n) {
    key_table_t table = {NULL, 0, 0};
    uint32_t *serials = NULL, next_serial = 0;
    size_t depth = 0, cap = 0;
    int expect_key = 0, result = n >= UINT32_MAX ? RK_KEYS_UNKNOWN : 0;
    size_t colons = 0;                 /* at least the keys: the table is sized once */
    for (size_t i = 0; i < n; i++)
        colons += p[i] == ':';
    if (colons && table_grow(&table, colons) < 0)
        result = RK_KEYS_NO_MEMORY;
    for (size_t i = 0; i < n && !result; i++) {
        uint8_t c = p[i];
        if (c == '"') {
            size_t start = ++i;
            int escaped = 0;
            for (;;) {                         /* the closing quote: one not escaped */
                const uint8_t *q = i < n ? memchr(p + i, '"', n - i) : NULL;
                if (!q) {
                    i = n;
                    break;
                }
                size_t back = 0;
                while (p + start < q - back && q[-1 - (ptrdiff_t)back] == '\\')
                    back++;
                i = (size_t)(q - p);
                if (!(back & 1))
                    break;
                escaped = 1;
                i++;
            }
            if (!escaped && i < n && memchr(p + start, '\\', i - start))
                escaped = 1;
            if (i >= n) {
                result = RK_KEYS_UNKNOWN;      /* an open string: not a text json read */
            } else if (expect_key) {
                if (escaped)
                    result = RK_KEYS_UNKNOWN;
                else if ((result = table_add(&table, p, serials[depth - 1], start, i - start)) < 0)
                    result = RK_KEYS_NO_MEMORY;
                expect_key = 0;
            }
        } else if (c == '{' || c == '[') {
            if (depth == cap) {
                uint32_t *s = realloc(serials, (cap = cap ? 2 * cap : 64) * sizeof *s);
                if (!s) {
                    result = RK_KEYS_NO_MEMORY;
                    break;
                }
                serials = s;
            }
            serials[depth++] = c == '{' ? ++next_serial : 0;
            expect_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (!depth)
                result = RK_KEYS_UNKNOWN;
            else
                depth--;
            expect_key = 0;
        } else if (c == ',') {
            expect_key = depth && serials[depth - 1];
        } else if (expect_key && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            result = RK_KEYS_UNKNOWN;          /* an unquoted or single-quoted key, a comment */
        } else if (c == '\'' || c == '/') {
            result = RK_KEYS_UNKNOWN;          /* fastjson's forms outside keys */
        }
    }
    free(table.e);
    free(serials);
    return result;
}
