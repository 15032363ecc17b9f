"""Connections and the capture decoder: segments in, paired frame rows out.

Layer: ``rocketpy.capture`` (pure: stdlib + the codec).  The client side of Java
``NettyRemotingAbstract`` keeps a ``responseTable`` from opaque to the pending request and
completes it when a response with that opaque arrives; :class:`Connection` does the same from
the outside, per connection and direction, to join each response to its request and measure
latency.  Oneway requests (flag bit 1) are never waited for, as in ``invokeOnewayImpl``.

:class:`CaptureDecoder` is fed packets in capture order (one capture file at a time, or - in
the Spark job - one connection's packets in capture order) and collects rows in ``out``.  The
in-process CLI and the Spark job share it, so both produce the same table.
"""
from __future__ import annotations

from collections import Counter

from .framing import FrameExtractor
from .layers import ACK, FIN, RST, SYN, decode_tcp, format_endpoint
from .reassembly import Reassembler
from rocketpy.remoting import codes

from .rows import frame_row

__all__ = ["Connection", "CaptureDecoder", "Stats"]

MAX_PENDING_REQUESTS = 1 << 16


class Stats(dict):
    """Counters (plain dict so it pickles and merges): packets, bytes, gaps, ..."""

    def merge(self, other: dict) -> "Stats":
        for k, v in other.items():
            if isinstance(v, dict):
                d = self.setdefault(k, {})
                for kk, vv in v.items():
                    d[kk] = d.get(kk, 0) + vv
            else:
                self[k] = self.get(k, 0) + v
        return self


class _Direction:
    __slots__ = ("reasm", "frames", "endpoint_src", "endpoint_dst", "fin")

    def __init__(self, stats, src, dst, options):
        self.frames = FrameExtractor(stats, abandon_after=options.get("abandon_after", 17 << 20))
        self.reasm = Reassembler(self.frames, stats,
                                 max_pending_bytes=options.get("max_pending_bytes", 32 << 20),
                                 hole_timeout_ns=options.get("hole_timeout_ns", 10_000_000_000))
        self.endpoint_src = src
        self.endpoint_dst = dst
        self.fin = False


class Connection:
    """Both directions of one TCP connection (index 0 = the side seen sending first)."""

    def __init__(self, key, conn_id: str, file: str | None, stats: Stats, out: list,
                 options: dict):
        src, sport, dst, dport = key
        a, b = format_endpoint(src, sport), format_endpoint(dst, dport)
        self.key = key
        self.conn_id = conn_id
        self.file = file
        self.stats = stats
        self.out = out
        self.dirs = (_Direction(stats, a, b, options), _Direction(stats, b, a, options))
        self.requests: tuple[dict, dict] = ({}, {})   # per direction: opaque -> (code, ts_ns)
        self.held: list[tuple[dict, int]] = []         # responses waiting for a hole to settle
        self.last_ts = 0
        self.closed = False
        self.isn: list[int | None] = [None, None]

    def segment(self, d: int, seg, ts: int) -> None:
        self.last_ts = ts
        flags = seg.flags
        dirn = self.dirs[d]
        if flags & SYN:
            if dirn.reasm.next is None:
                dirn.reasm.syn(seg.seq)
                dirn.frames.synced = True
                self.isn[d] = seg.seq
        if flags & ACK:
            other = self.dirs[1 - d].reasm
            if other.pending:
                other.acked(seg.ack, ts)
                self._flush(1 - d)
        if seg.payload or seg.missing:
            if not dirn.frames.abandoned:
                dirn.reasm.segment(seg.seq, seg.payload, seg.missing, ts)
                self._flush(d)
        if flags & (FIN | RST):
            if flags & RST:
                self.closed = True
            else:
                dirn.fin = True
                if self.dirs[1 - d].fin:
                    self.closed = True

    def finish(self, ts: int | None = None) -> None:
        ts = self.last_ts if ts is None else ts
        for d in (0, 1):
            self.dirs[d].reasm.finish(ts)
            self.dirs[d].frames.finish(ts)
            self._flush(d)
        for row, _ in self.held:
            self.out.append(row)
        self.held = []
        unanswered = self.stats.setdefault("unanswered_requests", {})
        for table in self.requests:
            for code, _ts in table.values():
                unanswered[code] = unanswered.get(code, 0) + 1
            table.clear()
        if any(self.dirs[d].frames.found for d in (0, 1)):
            self.stats["rocketmq_connections"] = self.stats.get("rocketmq_connections", 0) + 1

    def _flush(self, d: int) -> None:
        """Turn the frames direction ``d`` produced into rows, pairing as we go."""
        dirn = self.dirs[d]
        frames = dirn.frames.out
        if frames:
            dirn.frames.out = []
            mine, theirs = self.requests[d], self.requests[1 - d]
            for fr in frames:
                row = frame_row(fr, self.file, dirn.endpoint_src, dirn.endpoint_dst, self.conn_id)
                opaque = row["opaque"]
                if opaque is None:
                    self.out.append(row)
                    continue
                if row["is_response"]:
                    req = theirs.pop(opaque, None)
                    if req is not None:
                        self._pair(row, req)
                        self.out.append(row)
                    elif self.dirs[1 - d].reasm.pending:
                        # its request may sit behind a hole in the other direction
                        self.held.append((row, d))
                    else:
                        self.out.append(row)
                elif not row["is_oneway"]:
                    if len(mine) >= MAX_PENDING_REQUESTS:
                        code, _ = mine.pop(next(iter(mine)))
                        un = self.stats.setdefault("unanswered_requests", {})
                        un[code] = un.get(code, 0) + 1
                    mine[opaque] = (row["code"], row["ts_ns"])
                    self.out.append(row)
                else:
                    self.out.append(row)
        if self.held:
            self._release_held()

    def _release_held(self) -> None:
        keep = []
        for row, d in self.held:
            req = self.requests[1 - d].pop(row["opaque"], None)
            if req is not None:
                self._pair(row, req)
                self.out.append(row)
            elif self.dirs[1 - d].reasm.pending:
                keep.append((row, d))
            else:
                self.out.append(row)
        self.held = keep

    def _pair(self, row: dict, req) -> None:
        code, ts = req
        row["request_code"] = code
        row["request_code_name"] = codes.request_code_name(code)
        row["latency_ms"] = (row["ts_ns"] - ts) / 1e6


class CaptureDecoder:
    """Packets of one capture in capture order -> rows in ``self.out``.

    ``ports``: only TCP segments with a source or destination port in this set (default: all;
    RocketMQ is recognised by content).  Connections that closed (FIN both ways, or RST) are
    finished once they have been quiet for ``linger_ns`` of capture time, so memory follows the
    number of open connections, not the capture size.
    """

    def __init__(self, file: str | None = None, ports=None, stats: Stats | None = None,
                 linger_ns: int = 2_000_000_000, **options):
        self.file = file
        self.ports = frozenset(ports) if ports else None
        self.stats = stats if stats is not None else Stats()
        self.out: list[dict] = []
        self.flows: dict = {}            # 4-tuple -> (Connection, direction)
        self.generation: Counter = Counter()
        self.options = options
        self.linger_ns = linger_ns
        self._next_sweep = 0
        self._packets_since_sweep = 0

    def packet(self, pkt) -> None:
        """Feed one :class:`~rocketpy.capture.readers.Packet`."""
        stats = self.stats
        seg = decode_tcp(pkt.linktype, pkt.data, stats)
        if seg is None:
            return
        self.segment(seg, pkt.ts_ns)

    def segment(self, seg, ts: int) -> None:
        if self.ports is not None and seg.sport not in self.ports and seg.dport not in self.ports:
            return
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        entry = self.flows.get(key)
        if entry is None:
            entry = self._new(key, seg, ts)
        elif seg.flags & SYN and not seg.flags & ACK:
            conn = entry[0]
            if conn.isn[entry[1]] is not None and conn.isn[entry[1]] != seg.seq:
                conn.finish(ts)                  # the 4-tuple is reused by a new connection
                self._drop(conn)
                entry = self._new(key, seg, ts)
        entry[0].segment(entry[1], seg, ts)
        self._packets_since_sweep += 1
        # sweeping walks every open connection: amortise it over at least as many packets
        if (self._packets_since_sweep >= 4096 and ts >= self._next_sweep
                and self._packets_since_sweep >= len(self.flows)):
            self.sweep(ts)

    def _new(self, key, seg, ts):
        src, sport, dst, dport = key
        lo, hi = sorted(((src, sport), (dst, dport)))
        base = f"{format_endpoint(*lo)}-{format_endpoint(*hi)}"
        self.generation[base] += 1
        g = self.generation[base]
        conn_id = base if g == 1 else f"{base}#{g}"
        # a SYN+ACK seen first means the other side opened the connection
        if seg.flags & SYN and seg.flags & ACK:
            key = (dst, dport, src, sport)
        conn = Connection(key, conn_id, self.file, self.stats, self.out, self.options)
        self.flows[key] = (conn, 0)
        self.flows[(key[2], key[3], key[0], key[1])] = (conn, 1)
        self.stats["connections"] = self.stats.get("connections", 0) + 1
        return self.flows[(src, sport, dst, dport)]

    def _drop(self, conn):
        k = conn.key
        for kk in (k, (k[2], k[3], k[0], k[1])):
            if self.flows.get(kk, (None,))[0] is conn:
                del self.flows[kk]

    def sweep(self, ts: int) -> None:
        self._packets_since_sweep = 0
        self._next_sweep = ts + 1_000_000_000
        done = []
        seen = set()
        for conn, d in self.flows.values():
            if d or id(conn) in seen:
                continue
            seen.add(id(conn))
            for dd in conn.dirs:
                dd.reasm.tick(ts)
            conn._flush(0)
            conn._flush(1)
            if conn.closed and ts - conn.last_ts > self.linger_ns:
                done.append(conn)
        for conn in done:
            conn.finish()
            self._drop(conn)

    def finish(self) -> None:
        seen = set()
        for conn, _d in list(self.flows.values()):
            if id(conn) not in seen:
                seen.add(id(conn))
                conn.finish()
        self.flows.clear()
