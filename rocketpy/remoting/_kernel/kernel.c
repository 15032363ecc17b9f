/* The header kernel (kernel.h): the ROCKETMQ binary header and the usual JSON header, moved
 * here from the capture core so that the codec and the capture core read with one reader. */
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kernel.h"

uint64_t RK_HASH_KEY[3] = {0x9E3779B97F4A7C15ULL, 0xBF58476D1CE4E5B9ULL, 0x94D049BB133111EBULL};
#ifdef ROCKETPY_COUNT_COST
uint64_t rk_cost[COST_KINDS];
#endif

void rk_header_reset(rk_header_t *h) {
    h->code = h->flag = h->opaque = h->version = h->language = 0;
    h->remark = STR_NULL;
    h->has_ext = h->raw_controls = 0;
    h->opaque_at = h->opaque_end = 0;
    h->n_ext = 0;
    h->n_kidx = 0;
    h->text_len = 0;
}

void rk_header_free(rk_header_t *h) {
    free(h->ext);
    free(h->kidx);
    free(h->text);
    memset(h, 0, sizeof *h);
}

/* room for n more decoded bytes; the strings already stored must not move, so this is called
 * once per header, before any is stored: 0, or -1 */
static int text_reserve(rk_header_t *h, size_t n) {
    if (h->text_len + n <= h->text_cap)
        return 0;
    size_t cap = h->text_cap ? h->text_cap : 256;
    while (cap < h->text_len + n)
        cap *= 2;
    uint8_t *t = realloc(h->text, cap);
    if (!t)
        return -1;
    COST(BYTES, h->text_len);
    h->text = t;
    h->text_cap = cap;
    return 0;
}

/* strict UTF-8, as bytes.decode("utf-8") */
int rk_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16)               /* ASCII, sixteen bytes at a time */
        if (_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(s + i))))
            break;
#endif
    for (uint64_t w; i + 8 <= n; i += 8) {     /* ASCII, eight bytes at a time */
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ULL)
            break;
    }
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) {
            k = 1;
            cp = c & 0x1F;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2;
            cp = c & 0x0F;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}


int rk_add_ext(rk_header_t *h, str_t k, str_t v) {
    if (h->n_ext == h->cap_ext) {
        size_t cap = h->cap_ext ? 2 * h->cap_ext : 16;
        kv_t *e = realloc(h->ext, cap * sizeof *e);
        if (!e)
            return -1;
        COST(BYTES, h->n_ext * sizeof *e);
        h->ext = e;
        h->cap_ext = cap;
    }
    h->ext[h->n_ext].key = k;
    h->ext[h->n_ext].value = v;
    h->n_ext++;
    return 0;
}

#define KIDX_FROM 16           /* fewer extFields entries are compared one by one */

/* the index position of key k, or the empty one where it would go */
static size_t kidx_find(const rk_header_t *h, str_t k) {
    size_t mask = h->cap_kidx - 1;
    for (size_t i = (size_t)rk_hash_bytes((const uint8_t *)k.p, (size_t)k.n) & mask;; i = (i + 1) & mask) {
        uint32_t e = h->kidx[i];
        COST(PROBES, 1);
        if (!e || (h->ext[e - 1].key.n == k.n && !memcmp(h->ext[e - 1].key.p, k.p, (size_t)k.n)))
            return i;
    }
}

/* index the entries not indexed yet (at most half full; rebuilt, sized to this header, when
 * it grows or begins): 0, or -1 */
static int kidx_update(rk_header_t *h) {
    if (!h->n_kidx || 2 * (h->n_ext + 1) > h->cap_kidx) {
        size_t cap = 64;
        while (cap < 4 * (h->n_ext + 1))
            cap *= 2;
        if (cap != h->cap_kidx) {
            uint32_t *idx = malloc(cap * sizeof *idx);
            if (!idx)
                return -1;
            free(h->kidx);
            h->kidx = idx;
            h->cap_kidx = cap;
        }
        memset(h->kidx, 0, h->cap_kidx * sizeof *h->kidx);
        COST(MOVES, h->cap_kidx);
        h->n_kidx = 0;
    }
    for (; h->n_kidx < h->n_ext; h->n_kidx++) {
        h->kidx[kidx_find(h, h->ext[h->n_kidx].key)] = (uint32_t)h->n_kidx + 1;
        COST(MOVES, 1);
    }
    return 0;
}

/* is k a key of extFields already (the codec keeps the last of two equal keys): 1, 0, or -1.
 * By hash past a few entries, so a header of n entries costs O(n), not O(n^2). */
static int has_key(rk_header_t *h, str_t k) {
    if (h->n_ext < KIDX_FROM) {
        for (size_t i = 0; i < h->n_ext; i++) {
            COST(PROBES, 1);
            if (h->ext[i].key.n == k.n && !memcmp(h->ext[i].key.p, k.p, (size_t)k.n))
                return 1;
        }
        return 0;
    }
    if (kidx_update(h) < 0)
        return -1;
    return h->kidx[kidx_find(h, k)] != 0;
}

static int language_by_name(const rk_language_t *langs, size_t n_langs, str_t name, int32_t *value) {
    for (size_t i = 0; i < n_langs; i++)
        if (langs[i].len == (size_t)name.n && !memcmp(langs[i].name, name.p, langs[i].len)) {
            *value = langs[i].value;
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- ROCKETMQ binary header */

int rk_read_rocketmq(const uint8_t *p, size_t n, rk_header_t *h) {
    rk_header_reset(h);
    if (n < RMQ_FIXED_SIZE)
        return 0;
    h->code = (int16_t)rk_rd16be(p + RMQ_CODE_AT);
    h->language = (int8_t)p[RMQ_LANGUAGE_AT];
    h->version = (int16_t)rk_rd16be(p + RMQ_VERSION_AT);
    h->opaque = (int32_t)rk_rd32be(p + RMQ_OPAQUE_AT);
    h->opaque_at = RMQ_OPAQUE_AT;
    h->opaque_end = RMQ_OPAQUE_AT + RMQ_OPAQUE_SIZE;
    h->flag = (int32_t)rk_rd32be(p + RMQ_FLAG_AT);
    uint64_t remark_len = rk_rd32be(p + RMQ_REMARK_LENGTH_AT), pos = RMQ_FIXED_SIZE;
    if (pos + remark_len > n || !rk_utf8_valid(p + pos, (size_t)remark_len))
        return 0;
    h->remark = remark_len ? str_of((const char *)p + pos, (size_t)remark_len) : STR_NULL;
    pos += remark_len;
    if (pos + RMQ_EXT_LENGTH_SIZE > n)
        return 0;
    uint64_t ext_len = rk_rd32be(p + pos);
    pos += RMQ_EXT_LENGTH_SIZE;
    uint64_t end = pos + ext_len;
    if (end > n)
        return 0;
    if (ext_len) {
        h->has_ext = 1;
        while (pos < end) {
            if (pos + RMQ_KEY_LENGTH_SIZE > end)
                return 0;
            uint64_t klen = rk_rd16be(p + pos);
            pos += RMQ_KEY_LENGTH_SIZE;
            if (pos + klen + RMQ_VALUE_LENGTH_SIZE > end)
                return 0;
            str_t key = str_of((const char *)p + pos, (size_t)klen);
            pos += klen;
            uint64_t vlen = rk_rd32be(p + pos);
            pos += RMQ_VALUE_LENGTH_SIZE;
            if (pos + vlen > end)
                return 0;
            str_t value = str_of((const char *)p + pos, (size_t)vlen);
            pos += vlen;
            if (!rk_utf8_valid((const uint8_t *)key.p, (size_t)key.n)
                || !rk_utf8_valid((const uint8_t *)value.p, (size_t)value.n))
                return 0;       /* the codec says why */
            int dup = has_key(h, key);
            if (dup)
                return dup < 0 ? -1 : 0;   /* the codec keeps the last of two equal keys */
            if (rk_add_ext(h, key, value) < 0)
                return -1;
        }
    }
    return pos == n;
}

/* ---------------------------------------------------------------- JSON header */

typedef struct {
    const uint8_t *p, *end;
    uint8_t *out;               /* decoded strings go here (room reserved up front) */
    size_t *out_len;
    int *raw_controls;
} cur_t;

static inline void ws(cur_t *c) {
    if (c->p < c->end && *c->p > ' ')         /* (what follows a token without whitespace) */
        return;
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex4(const uint8_t *p, uint32_t *v) {
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        r <<= 4;
        if (c >= '0' && c <= '9')
            r |= c - '0';
        else if (c >= 'a' && c <= 'f')
            r |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            r |= c - 'A' + 10;
        else
            return 0;
    }
    *v = r;
    return 1;
}

/* the bytes of eight that are '"', '\\' or a control character (where string() stops), as their high bits; the
 * lowest one flagged is exact (a false flag only ever sits above a true one; on a big-endian
 * machine the first in memory may be false, which only costs the byte-by-byte path a step) */
static inline uint64_t special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t a = w ^ (ones * '"'), b = w ^ (ones * '\\');
    /* (w - 0x20 each) & ~w: a byte under 0x20 (a raw control character, 0x1A among them) */
    return (((a - ones) & ~a) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & highs;
}

/* a string at c->p ('"'): 1 with *s (decoded into c->out, or not stored when keep == 0), 0 punt.
 * The output never outgrows the input, for which the caller reserved room (and 32 bytes more:
 * plain bytes are copied eight, or with SSE2 sixteen, at a time). */
static int string(cur_t *c, str_t *s, int keep) {
    const uint8_t *p = c->p + 1, *end = c->end;
    uint8_t *o = keep ? c->out + *c->out_len : NULL, *o0 = o;
    while (p < end) {
#ifdef __SSE2__
        /* sixteen at a time: '"', '\\' or a byte under 0x20 (max(b, 0x1F) == 0x1F) stops */
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                      control = _mm_set1_epi8(0x1F);
        while (end - p >= 16) {
            __m128i w = _mm_loadu_si128((const __m128i *)p);
            if (keep)
                _mm_storeu_si128((__m128i *)o, w);
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, backslash)),
                _mm_cmpeq_epi8(_mm_max_epu8(w, control), control)));
            if (m) {
                size_t k = (size_t)__builtin_ctz(m);
                o += keep ? k : 0;
                p += k;
                goto special;
            }
            o += keep ? 16 : 0;
            p += 16;
        }
#endif
        while (end - p >= 8) {                 /* plain bytes, eight at a time */
            uint64_t w, m;
            memcpy(&w, p, 8);
            if (keep)
                memcpy(o, p, 8);
            if ((m = special8(w))) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                size_t k = (size_t)__builtin_ctzll(m) >> 3;
#else
                size_t k = (size_t)__builtin_clzll(m) >> 3;
#endif
                o += keep ? k : 0;
                p += k;
                break;
            }
            o += keep ? 8 : 0;
            p += 8;
        }
#ifdef __SSE2__
    special:
#endif
        if (p >= end)
            break;
        uint8_t ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            if (keep) {
                *s = str_of((const char *)o0, (size_t)(o - o0));
                *c->out_len += (size_t)(o - o0);
            }
            return 1;
        }
        if (ch == '\\') {
            if (end - p < 2)
                return 0;
            uint8_t e = p[1];
            uint8_t v;
            switch (e) {
            case '"': v = '"'; break;
            case '\\': v = '\\'; break;
            case '/': v = '/'; break;
            case 'b': v = '\b'; break;
            case 'f': v = '\f'; break;
            case 'n': v = '\n'; break;
            case 'r': v = '\r'; break;
            case 't': v = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (end - p < 6 || !hex4(p + 2, &cp))
                    return 0;
                p += 6;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return 0;                       /* a lone low surrogate */
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo)
                        || lo < 0xDC00 || lo > 0xDFFF)
                        return 0;                   /* a lone high surrogate */
                    p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (keep) {
                    if (cp < 0x80) {
                        *o++ = (uint8_t)cp;
                    } else if (cp < 0x800) {
                        *o++ = (uint8_t)(0xC0 | cp >> 6);
                        *o++ = (uint8_t)(0x80 | (cp & 0x3F));
                    } else if (cp < 0x10000) {
                        *o++ = (uint8_t)(0xE0 | cp >> 12);
                        *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
                        *o++ = (uint8_t)(0x80 | (cp & 0x3F));
                    } else {
                        *o++ = (uint8_t)(0xF0 | cp >> 18);
                        *o++ = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
                        *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
                        *o++ = (uint8_t)(0x80 | (cp & 0x3F));
                    }
                }
                continue;
            }
            default:
                return 0;
            }
            if (keep)
                *o++ = v;
            p += 2;
            continue;
        }
        if (ch == 0x1A)
            return 0;     /* raw control characters are fastjson's reading; 0x1A the codec's call */
        if (ch < 0x20)
            *c->raw_controls = 1;
        if (keep)
            *o++ = ch;
        p++;
    }
    return 0;
}

/* a Java int (JSON integer without fraction or exponent, in range): 1, else 0 */
static int java_int(cur_t *c, int32_t *v) {
    const uint8_t *p = c->p;
    int neg = 0;
    if (p < c->end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= c->end || *p < '0' || *p > '9')
        return 0;
    int64_t r = 0;
    if (*p == '0') {
        p++;
    } else {
        int digits = 0;
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (++digits > 11)
                return 0;
            r = r * 10 + (*p++ - '0');
        }
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return 0;
    if (neg)
        r = -r;
    if (r < INT32_MIN || r > INT32_MAX)
        return 0;
    *v = (int32_t)r;
    c->p = p;
    return 1;
}

static int literal(cur_t *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n))
        return 0;
    c->p += n;
    return 1;
}

/* `"key" :` (decoded into *key when given): 1, else 0 */
static int member_key(cur_t *c, str_t *key) {
    if (c->p >= c->end || *c->p != '"' || !string(c, key, key != NULL))
        return 0;
    ws(c);
    if (c->p >= c->end || *c->p != ':')
        return 0;
    c->p++;
    ws(c);
    return 1;
}

/* '{' and what follows: 1 a member, 0 the empty object ('}' eaten), -1 not an object */
static int object_start(cur_t *c) {
    if (c->p >= c->end || *c->p != '{')
        return -1;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    return 1;
}

/* after an object member: 1 another follows (',' eaten), 0 the object ended ('}' eaten), -1 not
 * JSON */
static int next_member(cur_t *c) {
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    if (c->p >= c->end || *c->p != ',')
        return -1;
    c->p++;
    ws(c);
    return 1;
}

static int key_is(str_t k, const char *name) {
    size_t n = strlen(name);
    return (size_t)k.n == n && !memcmp(k.p, name, n);
}


enum { K_CODE, K_FLAG, K_OPAQUE, K_VERSION, K_LANGUAGE, K_REMARK, K_EXT, K_COUNT };

int rk_read_json(const uint8_t *p, size_t n, rk_header_t *h, const rk_language_t *langs,
                 size_t n_langs) {
    rk_header_reset(h);
    if (n < 2 || p[0] != JSON_HEADER_START || p[1] == 0 || !rk_utf8_valid(p, n))
        return 0;
    if (text_reserve(h, n + 32) < 0)
        return -1;
    cur_t c = {p, p + n, h->text, &h->text_len, &h->raw_controls};
    int seen[K_COUNT] = {0};
    int32_t language = 0;
    h->code = h->flag = h->opaque = h->version = 0;
    h->remark = STR_NULL;
    if (object_start(&c) <= 0)
        return 0;        /* `{}`: the codec refuses it (Java answers none); not an object */
    {
        for (;;) {
            str_t key;
            if (!member_key(&c, &key))
                return 0;
            int k = key_is(key, "code") ? K_CODE : key_is(key, "flag") ? K_FLAG
                  : key_is(key, "opaque") ? K_OPAQUE : key_is(key, "version") ? K_VERSION
                  : key_is(key, "language") ? K_LANGUAGE : key_is(key, "remark") ? K_REMARK
                  : key_is(key, "extFields") ? K_EXT : -1;
            if (k >= 0 && seen[k]++)
                return 0;                  /* the last one wins: the codec's business */
            switch (k) {
            case K_CODE: if (!java_int(&c, &h->code)) return 0; break;
            case K_FLAG: if (!java_int(&c, &h->flag)) return 0; break;
            case K_OPAQUE:
                h->opaque_at = (size_t)(c.p - p);
                if (!java_int(&c, &h->opaque))
                    return 0;
                h->opaque_end = (size_t)(c.p - p);
                break;
            case K_VERSION: if (!java_int(&c, &h->version)) return 0; break;
            case K_LANGUAGE: {
                str_t name;
                if (c.p >= c.end || *c.p != '"' || !string(&c, &name, 1) || !language_by_name(langs, n_langs, name, &language))
                    return 0;
                break;
            }
            case K_REMARK:
                if (literal(&c, "null"))
                    h->remark = STR_NULL;
                else if (c.p >= c.end || *c.p != '"' || !string(&c, &h->remark, 1))
                    return 0;
                break;
            case K_EXT: {
                if (literal(&c, "null"))
                    break;
                int members = object_start(&c);
                if (members < 0)
                    return 0;
                h->has_ext = 1;
                while (members) {
                    str_t ek, ev;
                    if (!member_key(&c, &ek) || c.p >= c.end || *c.p != '"' || !string(&c, &ev, 1))
                        return 0;
                    int dup = has_key(h, ek);
                    if (dup)
                        return dup < 0 ? -1 : 0;
                    if (rk_add_ext(h, ek, ev) < 0)
                        return -1;
                    members = next_member(&c);
                    if (members < 0)
                        return 0;
                }
                break;
            }
            default:
                /* another key may name a property in another spelling (fastjson's smart
                 * match: "Code", "ext_fields"): the codec's business; only Java's own
                 * serializeTypeCurrentRPC is skipped here, when it is a name or null (any
                 * other value the codec judges as EnumDeserializer does) */
                if (!key_is(key, "serializeTypeCurrentRPC"))
                    return 0;
                if (!literal(&c, "null")
                    && (c.p >= c.end || *c.p != '"' || !string(&c, NULL, 0)))
                    return 0;
            }
            int more = next_member(&c);
            if (more < 0)
                return 0;
            if (!more)
                break;
        }
    }
    ws(&c);                            /* json.loads allows trailing whitespace */
    if (c.p != c.end)
        return 0;
    h->language = language;
    return 1;
}

