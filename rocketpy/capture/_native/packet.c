/* Link, IP and TCP headers: a captured packet to a TCP segment (rocketpy/capture/layers.py,
 * its general path: the Python one-read shortcut for Ethernet + IPv4 is proven to agree with it). */
#include "core.h"
#include <arpa/inet.h>

static int is_vlan(uint16_t t) { return t == 0x8100 || t == 0x88A8 || t == 0x9100 || t == 0x9200; }

/* offset of the IP header and the IP version, or 0 when not IP */
static int l3_offset(uint32_t linktype, const uint8_t *d, size_t n, size_t *off, int *ver) {
    uint16_t etype;
    size_t o;
    if (linktype == 1) {
        if (n < 14)
            return 0;
        o = 12;
        etype = rd16be(d + 12);
        while (is_vlan(etype)) {
            o += 4;
            if (n < o + 2)
                return 0;
            etype = rd16be(d + o);
        }
        o += 2;
    } else if (linktype == 113) {
        if (n < 16)
            return 0;
        o = 16;
        etype = rd16be(d + 14);
        while (is_vlan(etype)) {
            if (n < o + 4)
                return 0;
            etype = rd16be(d + o + 2);
            o += 4;
        }
    } else if (linktype == 276) {
        if (n < 20)
            return 0;
        o = 20;
        etype = rd16be(d);
    } else if (linktype == 0 || linktype == 108) {
        if (n < 4)
            return 0;
        uint32_t fam;
        if (linktype == 108) {
            fam = rd32be(d);
        } else {
            fam = rd32le(d);
            if (fam > 0xFFFF)        /* written on a big-endian host */
                fam = rd32be(d);
        }
        *off = 4;
        if (fam == 2) {
            *ver = 4;
            return 1;
        }
        if (fam == 10 || fam == 24 || fam == 28 || fam == 30) {
            *ver = 6;
            return 1;
        }
        return 0;
    } else if (linktype == 101 || linktype == 12 || linktype == 14 || linktype == 228 || linktype == 229) {
        if (!n)
            return 0;
        int v = d[0] >> 4;
        if (v != 4 && v != 6)
            return 0;
        *off = 0;
        *ver = v;
        return 1;
    } else {
        return 0;
    }
    if (etype == 0x0800) {
        *off = o;
        *ver = 4;
        return 1;
    }
    if (etype == 0x86DD) {
        *off = o;
        *ver = 6;
        return 1;
    }
    return 0;
}

static int ipv6_ext(uint8_t h) {
    return h == 0 || h == 43 || h == 60 || h == 51 || h == 135 || h == 139 || h == 140;
}

int decode_tcp(uint32_t linktype, const uint8_t *d, size_t n, segment_t *seg, stats_t *st) {
    size_t off, l4, end;
    int ver;
    if (!l3_offset(linktype, d, n, &off, &ver)) {
        st->v[ST_NON_IP]++;
        return 0;
    }
    if (ver == 4) {
        if (n < off + 20) {
            st->v[ST_TRUNCATED_HEADERS]++;
            return 0;
        }
        uint8_t vihl = d[off];
        uint16_t total = rd16be(d + off + 2), frag = rd16be(d + off + 6);
        uint8_t proto = d[off + 9];
        if (proto != 6) {
            st->v[ST_NON_TCP]++;
            return 0;
        }
        if (frag & 0x3FFF) {
            st->v[ST_IP_FRAGMENTS]++;
            return 0;
        }
        seg->alen = 4;
        memcpy(seg->src, d + off + 12, 4);
        memcpy(seg->dst, d + off + 16, 4);
        l4 = off + (size_t)(vihl & 0x0F) * 4;
        end = total ? off + total : n;      /* TSO: total length 0 on some captures */
    } else {
        if (n < off + 40) {
            st->v[ST_TRUNCATED_HEADERS]++;
            return 0;
        }
        uint16_t plen = rd16be(d + off + 4);
        uint8_t nxt = d[off + 6];
        seg->alen = 16;
        memcpy(seg->src, d + off + 8, 16);
        memcpy(seg->dst, d + off + 24, 16);
        l4 = off + 40;
        while (nxt != 6) {
            if (nxt == 44) {
                st->v[ST_IP_FRAGMENTS]++;
                return 0;
            }
            if (!ipv6_ext(nxt) || n < l4 + 2) {
                st->v[ST_NON_TCP]++;
                return 0;
            }
            uint8_t hl = d[l4 + 1], ext = nxt;
            nxt = d[l4];
            l4 += ext == 51 ? ((size_t)hl + 2) * 4 : ((size_t)hl + 1) * 8;   /* AH: 4-byte words */
        }
        end = plen ? off + 40 + plen : n;
    }
    if (n < l4 + 14) {
        st->v[ST_TRUNCATED_HEADERS]++;
        return 0;
    }
    const uint8_t *t = d + l4;
    seg->sport = rd16be(t);
    seg->dport = rd16be(t + 2);
    seg->seq = rd32be(t + 4);
    seg->ack = rd32be(t + 8);
    size_t p = l4 + (size_t)(t[12] >> 4) * 4;
    seg->flags = t[13];
    if (end < p) {
        st->v[ST_TRUNCATED_HEADERS]++;
        return 0;
    }
    if (end > n) {
        seg->payload = p < n ? d + p : d + n;
        seg->plen = p < n ? (uint32_t)(n - p) : 0;
        seg->missing = (uint32_t)(end - (p > n ? p : n));
    } else {
        seg->payload = d + p;
        seg->plen = (uint32_t)(end - p);
        seg->missing = 0;
    }
    return 1;
}

static char *decimal(char *p, unsigned v) {
    char digits[10];
    int n = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = digits[--n];
    return p;
}

/* (a connection per new 4-tuple formats two of these: no printf) */
int format_endpoint(const uint8_t *addr, int alen, uint16_t port, char *out) {
    char *p = out;
    if (alen == 4) {
        for (int i = 0; i < 4; i++) {
            p = decimal(p, addr[i]);
            *p++ = i < 3 ? '.' : ':';
        }
    } else {
        char text[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, addr, text, sizeof text);
        size_t n = strlen(text);
        *p++ = '[';
        memcpy(p, text, n);
        p += n;
        *p++ = ']';
        *p++ = ':';
    }
    p = decimal(p, port);
    *p = 0;
    return (int)(p - out);
}
