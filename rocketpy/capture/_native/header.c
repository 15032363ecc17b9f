/* Frame headers to columns, as rocketpy.remoting.frame.decode_header reads them.
 *
 * The usual headers are read here: a ROCKETMQ binary header that decodes cleanly, and a JSON
 * header of the shape rocketpy's own fast reader takes (an object whose code, flag, opaque and
 * version are Java ints, language a known name, remark a string or null, extFields an object of
 * strings or null; serializeTypeCurrentRPC any JSON value, and no other key).  Anything else --
 * broken, odd or merely rare (duplicate keys, lone surrogates, 0x1A inside a string, deep
 * nesting, numbers where strings are usual, fastjson's lenient forms) -- is handed to the codec
 * itself through CFG.header_fallback, so the codec stays the one judge of what a header says
 * and the error message is the codec's own.  Raw control characters inside strings are read as
 * fastjson reads them (the .NET client writes 0x01/0x02 there). */
#include "core.h"
#include "htab.h"

void header_reset(header_t *h) {
    h->n_ext = 0;
    h->has_ext = 0;
    h->n_kidx = 0;
    buf_clear(&h->text);
}

void header_free(header_t *h) {
    PyMem_RawFree(h->ext);
    h->ext = NULL;
    h->n_ext = h->cap_ext = 0;
    PyMem_RawFree(h->kidx);
    h->kidx = NULL;
    h->cap_kidx = h->n_kidx = 0;
    buf_free(&h->text);
}

/* strict UTF-8, as bytes.decode("utf-8") */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
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

static int add_ext(header_t *h, str_t k, str_t v) {
    if (GROW(h->ext, h->cap_ext, h->n_ext, 16) < 0)
        return -1;
    h->ext[h->n_ext].key = k;
    h->ext[h->n_ext].value = v;
    h->n_ext++;
    return 0;
}

#define KIDX_FROM 16           /* fewer extFields entries are compared one by one */

/* the index position of key k, or the empty one where it would go */
static size_t kidx_find(const header_t *h, str_t k) {
    size_t mask = h->cap_kidx - 1;
    for (size_t i = (size_t)hash_bytes((const uint8_t *)k.p, (size_t)k.n) & mask;; i = (i + 1) & mask) {
        uint32_t e = h->kidx[i];
        if (!e || (h->ext[e - 1].key.n == k.n && !memcmp(h->ext[e - 1].key.p, k.p, (size_t)k.n)))
            return i;
    }
}

/* index the entries not indexed yet (at most half full; rebuilt, sized to this header, when
 * it grows or begins): 0, or -1 (set) */
static int kidx_update(header_t *h) {
    if (!h->n_kidx || 2 * (h->n_ext + 1) > h->cap_kidx) {
        size_t cap = 64;
        while (cap < 4 * (h->n_ext + 1))
            cap *= 2;
        if (cap != h->cap_kidx) {
            uint32_t *idx = PyMem_RawMalloc(cap * sizeof *idx);
            if (!idx)
                return no_memory();
            PyMem_RawFree(h->kidx);
            h->kidx = idx;
            h->cap_kidx = cap;
        }
        memset(h->kidx, 0, h->cap_kidx * sizeof *h->kidx);
        h->n_kidx = 0;
    }
    for (; h->n_kidx < h->n_ext; h->n_kidx++)
        h->kidx[kidx_find(h, h->ext[h->n_kidx].key)] = (uint32_t)h->n_kidx + 1;
    return 0;
}

/* is k a key of extFields already (the codec keeps the last of two equal keys): 1, 0, or -1
 * (set).  By hash past a few entries, so a header of n entries costs O(n), not O(n^2). */
static int has_key(header_t *h, str_t k) {
    if (h->n_ext < KIDX_FROM) {
        for (size_t i = 0; i < h->n_ext; i++)
            if (h->ext[i].key.n == k.n && !memcmp(h->ext[i].key.p, k.p, (size_t)k.n))
                return 1;
        return 0;
    }
    if (kidx_update(h) < 0)
        return -1;
    return h->kidx[kidx_find(h, k)] != 0;
}

static str_t language_column(header_t *h, int64_t value) {
    str_t name = table_name(&CFG.language, value);
    if (name.p)
        return name;
    /* str(language) for a byte Java has no name for; h->text has room (reserved by the caller) */
    char *at = (char *)h->text.p + h->text.end;
    int len = sprintf(at, "%lld", (long long)value);
    h->text.end += (size_t)len;
    return str_of(at, (size_t)len);
}

/* ---------------------------------------------------------------- ROCKETMQ binary header */

static int decode_rocketmq(const uint8_t *p, size_t n, header_t *h) {
    if (n < RMQ_FIXED_SIZE)
        return 0;
    h->code = (int16_t)rd16be(p + RMQ_CODE_AT);
    int8_t language = (int8_t)p[RMQ_LANGUAGE_AT];
    h->version = (int16_t)rd16be(p + RMQ_VERSION_AT);
    h->opaque = (int32_t)rd32be(p + RMQ_OPAQUE_AT);
    h->flag = (int32_t)rd32be(p + RMQ_FLAG_AT);
    uint64_t remark_len = rd32be(p + RMQ_REMARK_LENGTH_AT), pos = RMQ_FIXED_SIZE;
    if (pos + remark_len > n || !utf8_valid(p + pos, (size_t)remark_len))
        return 0;
    if (buf_reserve(&h->text, n + 32) < 0)
        return -1;
    h->remark = remark_len ? str_of((const char *)p + pos, (size_t)remark_len) : STR_NULL;
    pos += remark_len;
    if (pos + 4 > n)
        return 0;
    uint64_t ext_len = rd32be(p + pos);
    pos += 4;
    uint64_t end = pos + ext_len;
    if (end > n)
        return 0;
    if (ext_len) {
        h->has_ext = 1;
        while (pos < end) {
            if (pos + 2 > end)
                return 0;
            uint64_t klen = rd16be(p + pos);
            pos += 2;
            if (pos + klen + 4 > end)
                return 0;
            str_t key = str_of((const char *)p + pos, (size_t)klen);
            pos += klen;
            uint64_t vlen = rd32be(p + pos);
            pos += 4;
            if (pos + vlen > end)
                return 0;
            str_t value = str_of((const char *)p + pos, (size_t)vlen);
            pos += vlen;
            if (!utf8_valid((const uint8_t *)key.p, (size_t)key.n)
                || !utf8_valid((const uint8_t *)value.p, (size_t)value.n))
                return 0;       /* the codec says why */
            int dup = has_key(h, key);
            if (dup)
                return dup < 0 ? -1 : 0;   /* the codec keeps the last of two equal keys */
            if (add_ext(h, key, value) < 0)
                return -1;
        }
    }
    if (pos != n)
        return 0;
    h->language = language_column(h, language);
    return 1;
}

/* ---------------------------------------------------------------- JSON header */

typedef struct {
    const uint8_t *p, *end;
    buf_t *out;                 /* decoded strings go here (room reserved up front) */
} cur_t;

static inline void ws(cur_t *c) {
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

/* the bytes of eight that are '"', '\\' or 0x1A (where string() stops), as their high bits; the
 * lowest one flagged is exact (a false flag only ever sits above a true one; on a big-endian
 * machine the first in memory may be false, which only costs the byte-by-byte path a step) */
static inline uint64_t special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t a = w ^ (ones * '"'), b = w ^ (ones * '\\'), z = w ^ (ones * 0x1A);
    return (((a - ones) & ~a) | ((b - ones) & ~b) | ((z - ones) & ~z)) & highs;
}

/* a string at c->p ('"'): 1 with *s (decoded into c->out, or not stored when keep == 0), 0 punt.
 * The output never outgrows the input, for which the caller reserved room (and 32 bytes more:
 * plain bytes are copied eight at a time). */
static int string(cur_t *c, str_t *s, int keep) {
    const uint8_t *p = c->p + 1, *end = c->end;
    uint8_t *o = keep ? c->out->p + c->out->end : NULL, *o0 = o;
    while (p < end) {
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
        if (p >= end)
            break;
        uint8_t ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            if (keep) {
                *s = str_of((const char *)o0, (size_t)(o - o0));
                c->out->end += (size_t)(o - o0);
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

/* any JSON value, checked and skipped (json's scanner grammar): 1, else 0 */
static int skip_value(cur_t *c, int depth) {
    if (c->p >= c->end || depth > 32)
        return 0;
    uint8_t ch = *c->p;
    if (ch == '"')
        return string(c, NULL, 0);
    if (ch == '{' || ch == '[') {
        uint8_t close = ch == '{' ? '}' : ']';
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 1;
        }
        for (;;) {
            if (close == '}' && !member_key(c, NULL))
                return 0;
            if (!skip_value(c, depth + 1))
                return 0;
            ws(c);
            if (c->p >= c->end)
                return 0;
            if (*c->p == close) {
                c->p++;
                return 1;
            }
            if (*c->p != ',')
                return 0;
            c->p++;
            ws(c);
        }
    }
    if (literal(c, "true") || literal(c, "false") || literal(c, "null") || literal(c, "NaN")
        || literal(c, "Infinity") || literal(c, "-Infinity"))
        return 1;
    /* -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? */
    const uint8_t *p = c->p;
    if (p < c->end && *p == '-')
        p++;
    if (p >= c->end || *p < '0' || *p > '9')
        return 0;
    if (*p == '0')
        p++;
    else
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    if (p < c->end && *p == '.') {
        p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return 0;
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return 0;
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    c->p = p;
    return 1;
}

static int key_is(str_t k, const char *name) {
    size_t n = strlen(name);
    return (size_t)k.n == n && !memcmp(k.p, name, n);
}

static int language_by_name(str_t name, int32_t *value);

enum { K_CODE, K_FLAG, K_OPAQUE, K_VERSION, K_LANGUAGE, K_REMARK, K_EXT, K_COUNT };

static int decode_json(const uint8_t *p, size_t n, header_t *h) {
    if (n < 2 || p[0] != '{' || p[1] == 0 || !utf8_valid(p, n))
        return 0;
    if (buf_reserve(&h->text, n + 32) < 0)
        return -1;
    cur_t c = {p, p + n, &h->text};
    int seen[K_COUNT] = {0};
    int32_t language = 0;
    h->code = h->flag = h->opaque = h->version = 0;
    h->remark = STR_NULL;
    if (object_start(&c) > 0) {
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
            case K_OPAQUE: if (!java_int(&c, &h->opaque)) return 0; break;
            case K_VERSION: if (!java_int(&c, &h->version)) return 0; break;
            case K_LANGUAGE: {
                str_t name;
                if (c.p >= c.end || *c.p != '"' || !string(&c, &name, 1) || !language_by_name(name, &language))
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
                    if (add_ext(h, ek, ev) < 0)
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
                 * serializeTypeCurrentRPC is skipped here */
                if (!key_is(key, "serializeTypeCurrentRPC") || !skip_value(&c, 1))
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
    h->language = language_column(h, language);
    return 1;
}

/* ---------------------------------------------------------------- the codec's judgement */

typedef struct { const char *name; size_t len; int32_t value; } lang_t;
static lang_t *LANGS;
static size_t N_LANGS;

int native_set_languages(PyObject *by_name) {
    PyObject *key, *value;
    Py_ssize_t pos = 0, n = PyDict_Size(by_name);
    lang_t *t = PyMem_RawCalloc((size_t)n + 1, sizeof(lang_t));
    if (!t) {
        no_memory();
        return -1;
    }
    size_t i = 0;
    while (PyDict_Next(by_name, &pos, &key, &value)) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(key, &len);
        long v = PyLong_AsLong(value);
        if (!s || (v == -1 && PyErr_Occurred()))
            return -1;
        char *copy = PyMem_RawMalloc((size_t)len + 1);
        if (!copy) {
            no_memory();
            return -1;
        }
        memcpy(copy, s, (size_t)len + 1);
        t[i].name = copy;
        t[i].len = (size_t)len;
        t[i].value = (int32_t)v;
        i++;
    }
    LANGS = t;
    N_LANGS = i;
    return 0;
}

static int language_by_name(str_t name, int32_t *value) {
    for (size_t i = 0; i < N_LANGS; i++)
        if (LANGS[i].len == (size_t)name.n && !memcmp(LANGS[i].name, name.p, LANGS[i].len)) {
            *value = LANGS[i].value;
            return 1;
        }
    return 0;
}

/* append a Python str's UTF-8 ("replace": as the batches built from rows) to h->text:
 * 1 appended at *at with *len bytes, 0 None, -1 error */
static int take_text(header_t *h, PyObject *s, size_t *at, int32_t *len) {
    if (s == Py_None)
        return 0;
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "replace");
    if (!b)
        return -1;
    *at = buf_len(&h->text);
    *len = (int32_t)PyBytes_GET_SIZE(b);
    int r = buf_append(&h->text, PyBytes_AS_STRING(b), (size_t)*len);
    Py_DECREF(b);
    return r < 0 ? -1 : 1;
}

static int fallback_(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                     str_t *err, buf_t *errbuf) {
    PyObject *res = PyObject_CallFunction(CFG.header_fallback, "iy#O", stype, (const char *)p,
                                          (Py_ssize_t)n, want_error ? Py_False : Py_True);
    if (!res)
        return -1;
    int ok = PyObject_IsTrue(PyTuple_GET_ITEM(res, 0)), r = 0;
    PyObject *v = PyTuple_GET_ITEM(res, 1);
    if (!ok) {
        if (want_error && err) {
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(v, &len);
            buf_clear(errbuf);
            if (!s || buf_append(errbuf, s, (size_t)len) < 0)
                r = -1;
            else
                *err = str_of((const char *)buf_data(errbuf), (size_t)len);
        }
        Py_DECREF(res);
        return r;
    }
    /* (code, flag, opaque, language, version, remark, ext items | None) */
    int32_t *ints[4] = {&h->code, &h->flag, &h->opaque, &h->version};
    int idx[4] = {0, 1, 2, 4};
    for (int i = 0; i < 4; i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(v, idx[i]));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(res);
            return -1;
        }
        *ints[i] = (int32_t)x;
    }
    /* the strings' offsets first (the buffer may move), their pointers at the end */
    PyObject *ext = PyTuple_GET_ITEM(v, 6);
    Py_ssize_t n_ext = ext == Py_None ? 0 : PyList_GET_SIZE(ext);
    size_t *at = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(size_t));
    int *present = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(int));
    int32_t *len = PyMem_RawMalloc(((size_t)n_ext * 2 + 2) * sizeof(int32_t));
    if (!at || !present || !len) {
        no_memory();
        r = -1;
    }
    if (!r) {
        present[0] = take_text(h, PyTuple_GET_ITEM(v, 3), &at[0], &len[0]);
        present[1] = present[0] < 0 ? -1 : take_text(h, PyTuple_GET_ITEM(v, 5), &at[1], &len[1]);
        r = present[0] < 0 || present[1] < 0 ? -1 : 0;
    }
    for (Py_ssize_t i = 0; !r && i < n_ext; i++) {
        PyObject *item = PyList_GET_ITEM(ext, i);
        size_t j = 2 + 2 * (size_t)i;
        present[j] = take_text(h, PyTuple_GET_ITEM(item, 0), &at[j], &len[j]);
        present[j + 1] = present[j] < 0 ? -1 : take_text(h, PyTuple_GET_ITEM(item, 1), &at[j + 1], &len[j + 1]);
        if (present[j] < 0 || present[j + 1] < 0 || add_ext(h, STR_NULL, STR_NULL) < 0)
            r = -1;
    }
    if (!r) {
        const char *base = (const char *)buf_data(&h->text);
        h->language = present[0] ? str_of(base + at[0], (size_t)len[0]) : STR_NULL;
        h->remark = present[1] ? str_of(base + at[1], (size_t)len[1]) : STR_NULL;
        h->has_ext = ext != Py_None;
        for (size_t i = 0; i < h->n_ext; i++) {
            size_t j = 2 + 2 * i;
            h->ext[i].key = str_of(base + at[j], (size_t)len[j]);
            h->ext[i].value = str_of(base + at[j + 1], (size_t)len[j + 1]);
        }
    }
    PyMem_RawFree(at);
    PyMem_RawFree(present);
    PyMem_RawFree(len);
    Py_DECREF(res);
    return r < 0 ? -1 : 1;
}

static int fallback(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                    str_t *err, buf_t *errbuf) {
    PyThreadState *g = gil_take();
    int r = fallback_(stype, p, n, h, want_error, err, errbuf);
    gil_give(g);
    return r;
}

int decode_header(int stype, const uint8_t *p, size_t n, header_t *h, int want_error,
                  str_t *err, buf_t *errbuf) {
    header_reset(h);
    int r = 0;
    if (stype == SER_JSON)
        r = decode_json(p, n, h);
    else if (stype == SER_ROCKETMQ)
        r = decode_rocketmq(p, n, h);
    if (r)
        return r;
    header_reset(h);
    return fallback(stype, p, n, h, want_error, err, errbuf);
}
