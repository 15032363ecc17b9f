"""Synthetic RocketMQ captures for the capture-decoder tests (and the benchmark).

Builds TCP conversations carrying real frames (encoded with the project's codec), cuts them
into segments, damages them on purpose (reordering, retransmission, overlap, loss, mid-stream
start, snap-length truncation), wraps them in any supported link type over IPv4 or IPv6, and
writes classic pcap (either byte order, µs or ns) or pcapng.  The writers are deliberately
independent of ``rocketpy.capture`` (which only reads), so a reader bug cannot hide itself.
"""
from __future__ import annotations

import ipaddress
import random
import struct
from dataclasses import dataclass, replace

from rocketpy.remoting import RemotingCommand

SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10


@dataclass
class Seg:
    ts_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes = b""
    snap: int | None = None      # cut the captured packet's TCP payload to this many bytes


# ---- frames -------------------------------------------------------------------------------

def sample_exchange(n: int = 6, rng: random.Random | None = None, big_every: int = 3,
                    start_opaque: int = 1):
    """``n`` request/response pairs plus one oneway request: [(direction, frame bytes)], with
    direction 0 = client -> server.  Mixes JSON and ROCKETMQ headers and multi-segment bodies."""
    rng = rng or random.Random(1)
    out = []
    for i in range(n):
        opaque = start_opaque + i
        st = i % 2
        body = None
        if i % big_every == 0:
            body = ('{"topicConfigSerializeWrapper":{"topicConfigTable":{' + ",".join(
                f'"T{k}":{{"topicName":"T{k}","readQueueNums":8}}' for k in range(60 + i)) +
                '}}}').encode()
        req = RemotingCommand.request(103 if body else 105,
                                      ext_fields={"topic": f"Topic{i}", "brokerName": "b",
                                                  "clusterName": "c"},
                                      body=body, opaque=opaque, version=409, serialize_type=st)
        out.append((0, req.encode()))
        resp = req.create_response(0 if i % 4 else 17, remark=None if i % 4 else "no route",
                                   body=b'{"brokerDatas":[],"queueDatas":[]}' if i % 4 else None)
        out.append((1, resp.encode()))
    one = RemotingCommand.request(104, ext_fields={"brokerName": "b"}, opaque=start_opaque + n,
                                  oneway=True, version=409)
    out.append((0, one.encode()))
    return out


# ---- TCP ------------------------------------------------------------------------------------

def conversation(frames, client=("10.0.0.1", 40000), server=("10.0.0.2", 9876), mss=1000,
                 t0_ns=1_700_000_000_000_000_000, step_ns=1_000_000, isn=(1_000, 4_294_960_000),
                 handshake=True, close=True, acks=True, coalesce=False):
    """Segments of a TCP connection carrying ``frames`` ([(direction, bytes)]).

    Sequence numbers start at ``isn`` (the server's default wraps past 2**32 mid-stream).
    Each data segment piggybacks an ACK for everything the other side sent so far; with
    ``acks`` each one is also answered by a pure ACK.  ``coalesce`` packs consecutive frames of
    one direction into the same segments (as Nagle/pipelining does).
    """
    ends = [client, server]
    nxt = [isn[0], isn[1]]
    ts = t0_ns
    segs: list[Seg] = []

    def mk(d, flags, payload=b""):
        nonlocal ts
        ts += step_ns
        s, t = ends[d], ends[1 - d]
        seg = Seg(ts, s[0], s[1], t[0], t[1], nxt[d] & 0xFFFFFFFF, nxt[1 - d] & 0xFFFFFFFF,
                  flags, payload)
        segs.append(seg)
        nxt[d] += len(payload) + (1 if flags & (SYN | FIN) else 0)
        return seg

    if handshake:
        nxt[1] -= 0
        mk(0, SYN)
        segs[-1].ack = 0
        mk(1, SYN | ACK)
        mk(0, ACK)
    groups = []
    for d, fr in frames:
        if coalesce and groups and groups[-1][0] == d:
            groups[-1][1] += fr
        else:
            groups.append([d, bytearray(fr)])
    for d, data in groups:
        data = bytes(data)
        for i in range(0, len(data), mss):
            mk(d, ACK | PSH, data[i:i + mss])
            if acks:
                mk(1 - d, ACK)
    if close:
        mk(0, FIN | ACK)
        mk(1, FIN | ACK)
        mk(0, ACK)
    return segs


def stream_bytes(frames, direction):
    return b"".join(f for d, f in frames if d == direction)


# ---- damage ---------------------------------------------------------------------------------

def data_segments(segs, direction_src=None):
    return [i for i, s in enumerate(segs) if s.payload and
            (direction_src is None or (s.src, s.sport) == direction_src)]


def reorder(segs, i, j):
    """Move packet ``i`` after packet ``j`` (keeping its timestamp order plausible)."""
    segs = list(segs)
    s = segs.pop(i)
    segs.insert(j, s)
    return _retime(segs)


def _retime(segs):
    ts = sorted(s.ts_ns for s in segs)
    return [replace(s, ts_ns=t) for s, t in zip(segs, ts)]


def retransmit(segs, i, at=None, extend=0):
    """Repeat data segment ``i`` later (at index ``at``); ``extend`` > 0 makes the copy overlap
    into the next segment's bytes (taken from ``next_payload``)."""
    segs = list(segs)
    s = segs[i]
    copy = replace(s)
    if extend:
        following = [x for x in segs[i + 1:] if x.payload and (x.src, x.sport) == (s.src, s.sport)]
        copy.payload = s.payload + following[0].payload[:extend]
    segs.insert(at if at is not None else i + 2, copy)
    return _retime(segs)


def overlap_split(segs, i, cut, back):
    """Replace data segment ``i`` by two segments that overlap by ``back`` bytes."""
    segs = list(segs)
    s = segs[i]
    a = replace(s, payload=s.payload[:cut])
    b = replace(s, seq=(s.seq + cut - back) & 0xFFFFFFFF, payload=s.payload[cut - back:])
    segs[i:i + 1] = [a, b]
    return _retime(segs)


def drop(segs, *indexes):
    keep = set(range(len(segs))) - set(indexes)
    return [s for k, s in enumerate(segs) if k in keep]


def snap(segs, limit_payload):
    """Cut every packet's captured TCP payload to ``limit_payload`` bytes."""
    return [replace(s, snap=limit_payload) if len(s.payload) > limit_payload else s for s in segs]


# ---- link layers and files ------------------------------------------------------------------

def _csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_tcp(seg: Seg, v6=False):
    """IP + TCP bytes of a segment (full length; truncation happens at capture)."""
    tcp = struct.pack("!HHIIBBHHH", seg.sport, seg.dport, seg.seq, seg.ack, 5 << 4, seg.flags,
                      65535, 0, 0) + seg.payload
    if v6:
        src = ipaddress.IPv6Address(_v6(seg.src)).packed
        dst = ipaddress.IPv6Address(_v6(seg.dst)).packed
        return struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64) + src + dst + tcp
    src = ipaddress.IPv4Address(seg.src).packed
    dst = ipaddress.IPv4Address(seg.dst).packed
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    return hdr + tcp


def _v6(addr):
    return addr if ":" in addr else "fd00::" + addr.replace(".", ":")


LINKTYPES = {"ether": 1, "vlan": 1, "qinq": 1, "sll": 113, "sll2": 276, "null": 0, "null_be": 0,
             "loop": 108, "raw": 101, "ipv4": 228}


def link_wrap(kind: str, ip: bytes, v6=False):
    etype = 0x86DD if v6 else 0x0800
    if kind == "ether":
        return b"\x02" * 6 + b"\x04" * 6 + struct.pack("!H", etype) + ip
    if kind == "vlan":
        return b"\x02" * 6 + b"\x04" * 6 + struct.pack("!HHH", 0x8100, 42, etype) + ip
    if kind == "qinq":
        return (b"\x02" * 6 + b"\x04" * 6 + struct.pack("!HHHHH", 0x88A8, 7, 0x8100, 42, etype)
                + ip)
    if kind == "sll":
        return struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, etype) + ip
    if kind == "sll2":
        return struct.pack("!HHIHBB8s", etype, 0, 1, 772, 0, 6, b"\0" * 8) + ip
    if kind == "null":
        return struct.pack("<I", 10 if v6 else 2) + ip
    if kind == "null_be":
        return struct.pack(">I", 10 if v6 else 2) + ip
    if kind == "loop":
        return struct.pack(">I", 24 if v6 else 2) + ip
    if kind in ("raw", "ipv4"):
        return ip
    raise ValueError(kind)


def packets(segs, kind="ether", v6=False):
    """[(ts_ns, captured bytes, original length)]."""
    out = []
    for s in segs:
        full = link_wrap(kind, ip_tcp(s, v6), v6)
        cap = full
        if s.snap is not None and len(s.payload) > s.snap:
            cap = full[:len(full) - len(s.payload) + s.snap]
        out.append((s.ts_ns, cap, len(full)))
    return out


def write_pcap(pkts, linktype, order="<", nanos=False, snaplen=262144) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for ts, cap, orig in pkts:
        sec, frac = divmod(ts, 1_000_000_000)
        if not nanos:
            frac //= 1000
        out.append(struct.pack(order + "IIII", sec, frac, len(cap), orig))
        out.append(cap)
    return b"".join(out)


def _block(order, btype, body):
    pad = (-len(body)) % 4
    total = 12 + len(body) + pad
    return struct.pack(order + "II", btype, total) + body + b"\0" * pad + struct.pack(order + "I", total)


def write_pcapng(pkts, linktype, order="<", tsresol=6, snaplen=262144, extra_iface=True,
                 simple=False) -> bytes:
    """pcapng: SHB, an unused first interface (so packets name interface 1), the capture's
    interface with ``if_tsresol``, then EPBs (or SPBs with ``simple``) and a stray NRB."""
    shb = _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    blocks = [shb]
    if extra_iface:
        blocks.append(_block(order, 1, struct.pack(order + "HHI", 147, 0, 0)))
    opts = struct.pack(order + "HH", 9, 1) + bytes((tsresol,)) + b"\0\0\0" + b"\0\0\0\0"
    blocks.append(_block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts))
    iface = 1 if extra_iface else 0
    per = 10 ** tsresol if not tsresol & 0x80 else 2 ** (tsresol & 0x7F)
    for k, (ts, cap, orig) in enumerate(pkts):
        if simple:
            blocks.append(_block(order, 3, struct.pack(order + "I", orig) + cap))
            continue
        t = ts * per // 1_000_000_000
        blocks.append(_block(order, 6, struct.pack(order + "IIIII", iface, t >> 32,
                                                   t & 0xFFFFFFFF, len(cap), orig) + cap))
        if k == 1:
            blocks.append(_block(order, 4, struct.pack(order + "HH", 0, 0)))   # empty NRB
    return b"".join(blocks)


def many_conversations(n, seed=0, damage=False, mss=1460):
    """``n`` interleaved conversations (distinct client ports), optionally with reordering and
    retransmissions; returns segments sorted by time."""
    rng = random.Random(seed)
    segs = []
    for c in range(n):
        frames = sample_exchange(rng.randint(2, 6), rng, big_every=rng.randint(1, 3),
                                 start_opaque=rng.randint(0, 1 << 20))
        conv = conversation(frames, client=(f"10.1.{c // 250}.{c % 250 + 1}", 20000 + c % 40000),
                            server=("10.9.0.1", rng.choice([9876, 10911, 30000])),
                            t0_ns=1_700_000_000_000_000_000 + c * 3_000_000 + rng.randint(0, 999),
                            step_ns=rng.randint(100_000, 2_000_000), mss=mss,
                            isn=(rng.randrange(1 << 32), rng.randrange(1 << 32)))
        if damage and rng.random() < 0.3:
            d = data_segments(conv)
            if len(d) > 3:
                conv = reorder(conv, d[1], d[2])
                conv = retransmit(conv, d[0], at=d[0] + 3)
        segs += conv
    segs.sort(key=lambda s: s.ts_ns)
    return segs
