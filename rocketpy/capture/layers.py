"""Link, IP and TCP header decoding: from a captured packet to a TCP segment.

Layer: ``rocketpy.capture`` (pure stdlib).  Mirrors no Java class; the layouts are those of
libpcap's LINKTYPE_* registry, RFC 791/8200 (IPv4/IPv6) and RFC 9293 (TCP).

Link types: Ethernet (1) with any number of 802.1Q/802.1ad VLAN tags, Linux cooked SLL (113)
and SLL2 (276), BSD loopback NULL (0, host byte order) and LOOP (108, network order), raw IP
(101, and the platform aliases 12 and 14), LINKTYPE_IPV4 (228) and LINKTYPE_IPV6 (229).

Headers are read with precompiled ``struct.Struct.unpack_from`` rather than construct: this
runs once per packet and is ~40x cheaper (see ``readers``); each layout is one named Struct.
Addresses stay raw ``bytes`` (4 or 16) here and are formatted once per connection
(:func:`format_endpoint`), because ``inet_ntop`` per packet is a measurable cost.
"""
from __future__ import annotations

import socket
import struct
from typing import NamedTuple

__all__ = ["Segment", "decode_tcp", "format_endpoint", "LINKTYPES", "SYN", "FIN", "RST", "ACK"]

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

LINKTYPES = {0: "NULL", 1: "EN10MB", 12: "RAW", 14: "RAW", 101: "RAW", 108: "LOOP",
             113: "LINUX_SLL", 228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2"}

_ETHER_IPV4, _ETHER_IPV6 = 0x0800, 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100, 0x9200)
_NULL_IPV6 = (10, 24, 28, 30)   # AF_INET6 on Linux, NetBSD/OpenBSD, FreeBSD, macOS

_U16 = struct.Struct("!H")
_U32LE = struct.Struct("<I")
_U32BE = struct.Struct("!I")
_IPV4 = struct.Struct("!BxHHHBB")        # ver/ihl, total length, id, frag, ttl, proto
_IPV6 = struct.Struct("!HB")             # payload length (at +4), next header (at +6)
_TCP = struct.Struct("!HHIIBB")          # sport dport seq ack data-offset flags
_IPV6_EXT = (0, 43, 60, 51, 135, 139, 140)
#: Ethernet without VLAN tag + IPv4 without options + TCP, in one read: nearly every packet of a
#: capture taken on a host or a switch port (ethertype, ver/ihl, total, frag, proto, src, dst,
#: sport, dport, seq, ack, data offset, flags).
_ETH_IPV4_TCP = struct.Struct("!12xHBxH2xHxB2x4s4sHHIIBB")  # hop-by-hop, routing, dest opts, AH, mobility, HIP, shim6


class Segment(NamedTuple):
    """A TCP segment. ``missing`` = payload bytes cut off by the snap length (known from the
    IP length); ``payload`` is what was captured."""
    src: bytes
    sport: int
    dst: bytes
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    missing: int


def _l3_offset(linktype: int, data: bytes) -> tuple[int, int] | None:
    """(offset of the IP header, IP version) or None when not IP."""
    if linktype == 1:
        if len(data) < 14:
            return None
        off, etype = 12, _U16.unpack_from(data, 12)[0]
        while etype in _VLAN_TPIDS:
            off += 4
            if len(data) < off + 2:
                return None
            etype = _U16.unpack_from(data, off)[0]
        off += 2
    elif linktype == 113:
        if len(data) < 16:
            return None
        off, etype = 16, _U16.unpack_from(data, 14)[0]
        while etype in _VLAN_TPIDS:   # SLL keeps the tag in the payload on some kernels
            if len(data) < off + 4:
                return None
            etype = _U16.unpack_from(data, off + 2)[0]
            off += 4
    elif linktype == 276:
        if len(data) < 20:
            return None
        off, etype = 20, _U16.unpack_from(data, 0)[0]
    elif linktype in (0, 108):
        if len(data) < 4:
            return None
        if linktype == 108:
            fam = _U32BE.unpack_from(data, 0)[0]
        else:
            fam = _U32LE.unpack_from(data, 0)[0]
            if fam > 0xFFFF:          # written on a big-endian host
                fam = _U32BE.unpack_from(data, 0)[0]
        if fam == 2:
            return 4, 4
        if fam in _NULL_IPV6:
            return 4, 6
        return None
    elif linktype in (101, 12, 14, 228, 229):
        if not data:
            return None
        v = data[0] >> 4
        return (0, v) if v in (4, 6) else None
    else:
        return None
    if etype == _ETHER_IPV4:
        return off, 4
    if etype == _ETHER_IPV6:
        return off, 6
    return None


def decode_tcp(linktype: int, data: bytes, stats: dict | None = None) -> Segment | None:
    """Decode a captured packet down to TCP; None for anything else (counted in ``stats``).

    IP fragments are skipped (counted as ``ip_fragments``): RocketMQ peers send TCP segments
    that fit the path MTU, and reassembling IP fragments is out of scope.
    """
    if linktype == 1 and len(data) >= 48:
        etype, vihl, total, frag, proto, src, dst, sport, dport, seq, ack, doff, flags = \
            _ETH_IPV4_TCP.unpack_from(data)
        if etype == _ETHER_IPV4 and vihl == 0x45 and proto == 6 and not frag & 0x3FFF:
            n = len(data)
            end = 14 + total if total else n
            p = 34 + (doff >> 4) * 4
            if end >= p:
                if end > n:
                    return Segment(src, sport, dst, dport, seq, ack, flags,
                                   data[p:] if p < n else b"", end - max(p, n))
                return Segment(src, sport, dst, dport, seq, ack, flags, data[p:end], 0)
    l3 = _l3_offset(linktype, data)
    if l3 is None:
        if stats is not None:
            stats["non_ip"] = stats.get("non_ip", 0) + 1
        return None
    off, ver = l3
    n = len(data)
    if ver == 4:
        if n < off + 20:
            return _short(stats)
        vihl, total, _id, frag, _ttl, proto = _IPV4.unpack_from(data, off)
        if proto != 6:
            return _other(stats)
        if frag & 0x3FFF:
            if stats is not None:
                stats["ip_fragments"] = stats.get("ip_fragments", 0) + 1
            return None
        ihl = (vihl & 0x0F) * 4
        src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
        l4 = off + ihl
        if total == 0:                 # TSO: total length 0 on some captures
            end = n
        else:
            end = off + total
    else:
        if n < off + 40:
            return _short(stats)
        plen, nxt = _IPV6.unpack_from(data, off + 4)
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        l4 = off + 40
        while nxt != 6:
            if nxt == 44:              # fragment header
                if stats is not None:
                    stats["ip_fragments"] = stats.get("ip_fragments", 0) + 1
                return None
            if nxt not in _IPV6_EXT or n < l4 + 2:
                return _other(stats)
            ext = nxt
            nxt, hl = data[l4], data[l4 + 1]
            l4 += (hl + 2) * 4 if ext == 51 else (hl + 1) * 8   # AH counts 4-byte words
        end = off + 40 + plen if plen else n   # jumbogram / TSO: use what is there
    if n < l4 + 14:
        return _short(stats)
    sport, dport, seq, ack, doff, flags = _TCP.unpack_from(data, l4)
    p = l4 + (doff >> 4) * 4
    if end < p:
        return _short(stats)
    if end > n:
        payload = data[p:] if p < n else b""
        missing = end - max(p, n)
    else:
        payload = data[p:end]
        missing = 0
    return Segment(src, sport, dst, dport, seq, ack, flags, payload, missing)


def _short(stats):
    if stats is not None:
        stats["truncated_headers"] = stats.get("truncated_headers", 0) + 1
    return None


def _other(stats):
    if stats is not None:
        stats["non_tcp"] = stats.get("non_tcp", 0) + 1
    return None


def format_endpoint(addr: bytes, port: int) -> str:
    """``1.2.3.4:9876`` or ``[::1]:9876`` (the RocketMQ ``ip:port`` spelling, brackets for v6)."""
    if len(addr) == 4:
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, addr)}]:{port}"
