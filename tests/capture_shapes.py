"""Hostile capture shapes: inputs a stranger can write into a capture to make a decoder do
quadratic work (issue 22 part 3).  Each ``shape(n)`` is a pcap (bytes) whose decoding must cost
O(n); the complexity tests decode them at growing sizes, the ASan fuzz harness mutates them.

* ``ext_fields_json(n)`` / ``ext_fields_binary(n)``: one request whose header has ``n`` distinct
  extFields keys (a duplicate-key check by scan is quadratic);
* ``reversed_segments(n)``: the first segment of a stream is lost, then ``n`` segments arrive
  last-first (a store of waiting segments scanned for the next one is quadratic when drained);
* ``many_holes(n)``: ``n`` one-byte segments, every other byte lost, acknowledged by the peer as
  they come (finding the first waiting segment by scan on each ack and each skipped hole is
  quadratic);
* ``held_responses(n)``: the server's first segment is lost, its ``n`` requests wait behind the
  hole while the client's ``n`` responses come, each held until its request arrives (releasing
  held responses by scanning them all on each packet is quadratic); then the hole fills;
* ``unanswered_codes(n)``: ``n`` requests, each with its own request code, never answered (a
  count per code kept in a list scanned per request is quadratic);
* ``colliding_opaques(n)``: ``n`` requests waiting for their answers, their opaques ``i << 16``
  (an index by opaque that hashes its low bits unkeyed puts them all in one slot: quadratic).
"""
from __future__ import annotations

import capture_synth as cs
from rocketpy.remoting import RemotingCommand

__all__ = ["ext_fields_json", "ext_fields_binary", "reversed_segments", "many_holes",
           "held_responses", "unanswered_codes", "colliding_opaques", "SHAPES"]

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9876)
T0 = 1_700_000_000_000_000_000


def _pcap(segs) -> bytes:
    return cs.write_pcap(cs.packets(segs), cs.LINKTYPES["ether"])


def _ext_fields(n: int, serialize_type: int) -> bytes:
    frame = RemotingCommand.request(105, ext_fields={f"k{i}": "v" for i in range(n)}, opaque=7,
                                    serialize_type=serialize_type).encode()
    return _pcap(cs.conversation([(0, frame)], client=CLIENT, server=SERVER, mss=1460,
                                 acks=False))


def ext_fields_json(n: int) -> bytes:
    return _ext_fields(n, 0)


def ext_fields_binary(n: int) -> bytes:
    return _ext_fields(n, 1)


def _one_way(n: int, seqs, step_ns: int = 1_000):
    """A handshake, then 8-byte segments at the given offsets past the first byte."""
    segs = cs.conversation([], client=CLIENT, server=SERVER, close=False, t0_ns=T0)
    isn = segs[0].seq + 1
    ts = segs[-1].ts_ns
    for k, off in enumerate(seqs):
        segs.append(cs.Seg(ts + (k + 1) * step_ns, *CLIENT, *SERVER, (isn + off) & 0xFFFFFFFF,
                           segs[1].seq + 1, cs.ACK | cs.PSH, off.to_bytes(8, "big")))
    return segs


def reversed_segments(n: int) -> bytes:
    # bytes 0..7 never arrive; 8..8n+7 arrive last-first
    return _pcap(_one_way(n, [8 * k for k in range(n, 0, -1)]))


def many_holes(n: int) -> bytes:
    segs = _one_way(n, [16 * k for k in range(1, n + 1)])
    out = []
    for s in segs:
        out.append(s)
        if s.payload:              # the peer acknowledges what it got (past each hole)
            out.append(cs.Seg(s.ts_ns + 1, *SERVER, *CLIENT, s.ack, (s.seq + 8) & 0xFFFFFFFF,
                              cs.ACK))
    return _pcap(out)


def held_responses(n: int) -> bytes:
    segs = cs.conversation([], client=CLIENT, server=SERVER, close=False, t0_ns=T0)
    cseq, sseq = segs[0].seq + 1, segs[1].seq + 1
    ts = segs[-1].ts_ns
    requests = [RemotingCommand.request(105, ext_fields={"topic": "t"}, opaque=i) for i in range(n)]
    server = []
    for r in requests:
        frame = r.encode()
        server.append(cs.Seg(0, *SERVER, *CLIENT, sseq & 0xFFFFFFFF, cseq, cs.ACK | cs.PSH, frame))
        sseq += len(frame)
    client = []
    for r in requests:
        frame = r.create_response(0).encode()
        # the client acknowledges nothing past the hole: it stays open, never doomed
        client.append(cs.Seg(0, *CLIENT, *SERVER, cseq & 0xFFFFFFFF, server[0].seq, cs.ACK | cs.PSH,
                             frame))
        cseq += len(frame)
    for s in server[1:] + client + server[:1]:
        ts += 1_000
        s.ts_ns = ts
        segs.append(s)
    return _pcap(segs)


def unanswered_codes(n: int) -> bytes:
    frames = [(0, RemotingCommand.request(100_000 + i, opaque=i).encode()) for i in range(n)]
    return _pcap(cs.conversation(frames, client=CLIENT, server=SERVER, mss=1460, acks=False,
                                 coalesce=True))


def colliding_opaques(n: int) -> bytes:
    frames = [(0, RemotingCommand.request(105, opaque=i << 16).encode()) for i in range(n)]
    return _pcap(cs.conversation(frames, client=CLIENT, server=SERVER, mss=1460, acks=False,
                                 coalesce=True))


SHAPES = {"ext_fields_json": ext_fields_json, "ext_fields_binary": ext_fields_binary,
          "reversed_segments": reversed_segments, "many_holes": many_holes,
          "held_responses": held_responses, "unanswered_codes": unanswered_codes,
          "colliding_opaques": colliding_opaques}
