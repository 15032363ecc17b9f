/* Capture-file records: classic pcap and pcapng (rocketpy/capture/readers.py, same checks in the
 * same order, same error messages).  The file arrives in blocks (walker_feed); a record cut by a
 * block's end waits in `carry` for the next block. */
#include "core.h"
#include <stdarg.h>

/* a CaptureFormatError (under the GIL); -1 */
static int capture_error(const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyThreadState *g = gil_take();
    PyErr_FormatV(CaptureFormatError, fmt, va);
    gil_give(g);
    va_end(va);
    return -1;
}

PyObject *CaptureFormatError;

static const unsigned __int128 TPS_SATURATED = (unsigned __int128)1 << 100;

void walker_free(walker_t *w) {
    PyMem_RawFree(w->ifaces);
    w->ifaces = NULL;
    w->n_ifaces = w->cap_ifaces = 0;
    buf_free(&w->carry);
}

int walker_add_iface(walker_t *w, uint32_t linktype, uint32_t snaplen, unsigned __int128 tps,
                     int64_t ts_offset_s) {
    if (GROW(w->ifaces, w->cap_ifaces, w->n_ifaces, 4) < 0)
        return -1;
    iface_t *f = &w->ifaces[w->n_ifaces++];
    f->linktype = linktype;
    f->snaplen = snaplen;
    f->ticks_per_sec = tps;
    f->ts_offset_s = ts_offset_s;
    return 0;
}

static unsigned __int128 tsresol(uint8_t v) {
    if (v & 0x80) {
        unsigned k = v & 0x7F;
        return k >= 100 ? TPS_SATURATED : (unsigned __int128)1 << k;
    }
    unsigned __int128 r = 1;
    for (unsigned i = 0; i < v; i++) {
        r *= 10;
        if (r >= TPS_SATURATED)
            return TPS_SATURATED;
    }
    return r;
}

/* readers._parse_idb on body[0:n] (n >= 8) */
static int parse_idb(walker_t *w, const uint8_t *body, size_t n) {
    int be = w->be;
    uint32_t linktype = rd16(body, be), snaplen = rd32(body + 4, be);
    unsigned __int128 tps = 1000000;
    int64_t ts_offset = 0;
    size_t pos = 8;
    while (pos + 4 <= n) {
        uint16_t code = rd16(body + pos, be), length = rd16(body + pos + 2, be);
        pos += 4;
        if (code == 0 || pos + length > n)
            break;
        if (code == 9 && length >= 1)
            tps = tsresol(body[pos]);
        else if (code == 14 && length >= 8)
            ts_offset = (int64_t)rd64(body + pos, be);
        pos += ((size_t)length + 3) & ~(size_t)3;
    }
    return walker_add_iface(w, linktype, snaplen, tps, ts_offset);
}

/* 1 = the record at p is `*size` bytes (all there or not), 0 = need more bytes to know, -1 = error */
static int record_size(walker_t *w, const uint8_t *p, size_t have, int64_t off, size_t *size) {
    if (w->kind == 0) {
        size_t hlen = 16 + w->extra;
        if (have < hlen) {
            *size = hlen;
            return 0;
        }
        uint32_t incl = rd32(p + 8, w->be);
        if (incl > MAX_RECORD) {
            capture_error("pcap record at %lld claims %u bytes", (long long)off, incl);
            return -1;
        }
        *size = hlen + incl;
        return 1;
    }
    if (have < 12) {
        *size = 12;
        return 0;
    }
    uint32_t btype = rd32(p, w->be), blen;
    if (btype == PCAPNG_MAGIC) {
        /* a section header: its byte-order magic decides how everything after it is read */
        w->be = !(p[8] == 0x4d && p[9] == 0x3c && p[10] == 0x2b && p[11] == 0x1a);
        w->n_ifaces = 0;       /* a new section numbers its interfaces from 0 */
    }
    blen = rd32(p + 4, w->be);
    if (blen < 12 || blen % 4 || blen > MAX_RECORD + 64) {
        capture_error("pcapng block at %lld has bad length %u", (long long)off, blen);
        return -1;
    }
    *size = blen;
    return 1;
}

static int block_ts(const iface_t *f, uint32_t hi, uint32_t lo, int64_t off, int64_t *ts) {
    unsigned __int128 ticks = (unsigned __int128)((uint64_t)hi << 32 | lo);
    __int128 ns = (__int128)(ticks * 1000000000u / f->ticks_per_sec);
    ns += (__int128)f->ts_offset_s * 1000000000;
    if (ns < (__int128)INT64_MIN || ns > (__int128)INT64_MAX) {
        capture_error("packet block at %lld has a timestamp outside 64-bit nanoseconds",
                     (long long)off);
        return -1;
    }
    *ts = (int64_t)ns;
    return 0;
}

static const uint32_t MIN_BLOCK[7] = {12, 20, 32, 16, 12, 12, 32};   /* by block type 0..6 */

/* one whole record at p (size bytes): 0 go on, 1 stop, -1 error */
static int process_record(walker_t *w, const uint8_t *p, size_t size, int64_t off, packet_fn fn,
                          void *ctx) {
    packet_t pkt;
    int be = w->be;
    pkt.offset = off;
    if (w->kind == 0) {
        size_t hlen = 16 + w->extra;
        uint64_t sec = rd32(p, be), frac = rd32(p + 4, be);
        pkt.ts_ns = (int64_t)(sec * 1000000000u + frac * (1000000000u / w->ticks_per_sec));
        pkt.linktype = w->linktype;
        pkt.caplen = (uint32_t)(size - hlen);    /* record_size's checked reading */
        pkt.origlen = rd32(p + 12, be);
        pkt.data = p + hlen;
        return fn(ctx, &pkt);
    }
    uint32_t btype = rd32(p, be), blen = (uint32_t)size;
    uint32_t min = btype < 7 ? MIN_BLOCK[btype] : 12;
    if (blen < min) {
        capture_error("pcapng block at %lld (type %u) is %u bytes, too short for its fields",
                     (long long)off, btype, blen);
        return -1;
    }
    if (btype == 6 || btype == 2) {
        uint32_t if_id, hi, lo, cap, orig;
        if (btype == 6) {
            if_id = rd32(p + 8, be);
            hi = rd32(p + 12, be);
            lo = rd32(p + 16, be);
            cap = rd32(p + 20, be);
            orig = rd32(p + 24, be);
        } else {
            if_id = rd16(p + 8, be);
            hi = rd32(p + 12, be);
            lo = rd32(p + 16, be);
            cap = rd32(p + 20, be);
            orig = rd32(p + 24, be);
        }
        if (cap > blen - 32) {
            capture_error("packet block at %lld claims %u bytes in a %u-byte block",
                         (long long)off, cap, blen);
            return -1;
        }
        if (if_id >= w->n_ifaces) {
            capture_error("packet block at %lld names unknown interface %u",
                         (long long)off, if_id);
            return -1;
        }
        const iface_t *f = &w->ifaces[if_id];
        if (block_ts(f, hi, lo, off, &pkt.ts_ns) < 0)
            return -1;
        pkt.linktype = f->linktype;
        pkt.caplen = cap;
        pkt.origlen = orig;
        pkt.data = p + 28;
        return fn(ctx, &pkt);
    }
    if (btype == 3) {
        if (!w->n_ifaces) {
            capture_error("simple packet block at %lld before any interface", (long long)off);
            return -1;
        }
        const iface_t *f = &w->ifaces[0];
        uint32_t orig = rd32(p + 8, be), cap = orig < blen - 16 ? orig : blen - 16;
        if (f->snaplen && f->snaplen < cap)
            cap = f->snaplen;
        pkt.ts_ns = 0;
        pkt.linktype = f->linktype;
        pkt.caplen = cap;
        pkt.origlen = orig;
        pkt.data = p + 12;
        return fn(ctx, &pkt);
    }
    if (btype == 1)
        return parse_idb(w, p + 8, blen - 12) < 0 ? -1 : 0;
    return 0;
}

int walker_feed(walker_t *w, const uint8_t *data, size_t n, packet_fn fn, void *ctx) {
    size_t size;
    int r;
    /* first finish the record cut by the previous block */
    while (buf_len(&w->carry)) {
        r = record_size(w, buf_data(&w->carry), buf_len(&w->carry), w->offset, &size);
        if (r < 0)
            return -1;
        size_t have = buf_len(&w->carry);
        if (have < size) {
            size_t take = size - have < n ? size - have : n;
            if (buf_append(&w->carry, data, take) < 0)
                return -1;
            data += take;
            n -= take;
            if (buf_len(&w->carry) < size)
                return 0;
            if (r == 0)
                continue;      /* now the header is whole: learn the size */
        }
        r = process_record(w, buf_data(&w->carry), size, w->offset, fn, ctx);
        w->offset += size;
        buf_clear(&w->carry);
        if (r)
            return r;
    }
    size_t pos = 0;
    while (pos < n) {
        r = record_size(w, data + pos, n - pos, w->offset, &size);
        if (r < 0)
            return -1;
        if (r == 0 || n - pos < size)
            break;
        r = process_record(w, data + pos, size, w->offset, fn, ctx);
        pos += size;
        w->offset += size;
        if (r)
            return r;
    }
    if (pos < n && buf_append(&w->carry, data + pos, n - pos) < 0)
        return -1;
    return 0;
}

PyObject *walker_feed_py(walker_t *w, int *busy, PyObject *data, packet_fn fn, void *ctx) {
    Py_buffer view;
    if (in_use(*busy) || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    *busy = 1;
    gil_released = PyEval_SaveThread();
    int r = walker_feed(w, view.buf, (size_t)view.len, fn, ctx);
    PyEval_RestoreThread(gil_released);
    gil_released = NULL;
    *busy = 0;
    PyBuffer_Release(&view);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r == 0);
}

int walker_truncated(walker_t *w) {
    int cut = buf_len(&w->carry) > 0;
    buf_clear(&w->carry);
    return cut;
}
