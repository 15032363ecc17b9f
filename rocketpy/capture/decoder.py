"""Connections and the capture decoder: segments in, paired frame rows out.

Layer: ``rocketpy.capture`` (pure: stdlib + the codec).  The client side of Java
``NettyRemotingAbstract`` keeps a ``responseTable`` from opaque to the pending request and
completes it when a response with that opaque arrives; :class:`Connection` does the same from
the outside, per connection and direction, to join each response to its request and measure
latency.  Oneway requests (flag bit 1) are never waited for, as in ``invokeOnewayImpl``.

:class:`CaptureDecoder` is fed packets in capture order (one capture file, or a rotated set of
files one after the other) and collects rows in ``out``.  This is the reference decoder: the
compiled core (:mod:`rocketpy.capture.engine`) is proven to give the same rows.

Byte ranges (the Spark job): a decoder given a :class:`RangePlan` decodes one byte range of a
capture.  The plan, made from every range's TCP headers beforehand (:mod:`rocketpy.capture.plan`),
says which packets open a connection and under which id, how the connections already open when
the range starts are oriented, where their streams stand, and where the next range takes each
stream over.  At the range's end (:meth:`CaptureDecoder.end_range`) the decoder keeps reading the
connections whose last frame is unfinished ("read-ahead") until each stream reaches the offset the
next range starts from.  What only the whole capture can settle is handed over in ``edges``:
requests still waiting for an answer, responses whose request is not in this range, and where
each stream's first and last frame lie, which the job checks against the neighbouring ranges.
"""
from __future__ import annotations

from collections import Counter, OrderedDict, deque
from typing import NamedTuple

from .framing import FrameExtractor
from .layers import ACK, FIN, RST, SYN, decode_tcp, format_endpoint
from .reassembly import MAX_PENDING_SEGMENTS, Reassembler
from rocketpy.remoting import codes

from .rows import frame_row
from .stats import Stats

__all__ = ["Connection", "CaptureDecoder", "Stats", "RangePlan", "DirStart",
           "starts_new_connection"]

MAX_PENDING_REQUESTS = 1 << 16
#: live connections a whole-capture decode keeps (half-open ones cost ~2.5 KB each)
MAX_CONNECTIONS = 100_000
#: bytes all live connections may hold between them: segments waiting behind a hole and
#: unfinished frames (one connection alone is bounded by its own limits, ~100 MiB)
MAX_BUFFERED_BYTES = 256 << 20


def starts_new_connection(closed: bool, last_ts: int, isn, syn_no_ack: bool, seq: int,
                          ts: int, linger_ns: int) -> str | None:
    """Does a packet on a known 4-tuple open a new connection?  ``"reused"`` when it is a SYN
    with another initial sequence number than the old connection's, ``"quiet"`` when the old
    one closed (FIN both ways, or RST) and was quiet for ``linger_ns``; else None.  The decoder
    and the Spark job's planner both ask this."""
    if syn_no_ack and isn is not None and isn != seq:
        return "reused"
    if closed and ts - last_ts > linger_ns:
        return "quiet"
    return None


class DirStart(NamedTuple):
    """Where a direction's stream stands when a byte range starts: the sequence number of its
    next byte (None: nothing sent yet), that byte's stream offset, and whether a frame is known
    to start there (the stream's first byte after its SYN); otherwise the range hunts for one."""
    seq: int | None
    offset: int
    synced: bool = False


class RangePlan(NamedTuple):
    """What a byte range needs from the whole capture (made by :mod:`rocketpy.capture.plan`).

    ``boundaries``: (file index, record offset) of each packet that opens a connection -> its
    id; ``live``: connections open when the range starts, by the 4-tuple of direction 0 ->
    (id, (DirStart, DirStart)); ``limits``: id -> per direction the stream offset where the
    next range takes over (None: the direction sends nothing later)."""
    boundaries: dict
    live: dict
    limits: dict


class _Direction:
    __slots__ = ("reasm", "frames", "endpoint_src", "endpoint_dst", "fin")

    def __init__(self, stats, src, dst, options):
        self.frames = FrameExtractor(stats, abandon_after=options.get("abandon_after", 17 << 20))
        self.reasm = Reassembler(self.frames, stats,
                                 max_pending_bytes=options.get("max_pending_bytes", 32 << 20),
                                 max_pending_segments=options.get("max_pending_segments",
                                                                  MAX_PENDING_SEGMENTS),
                                 hole_timeout_ns=options.get("hole_timeout_ns", 10_000_000_000))
        self.endpoint_src = src
        self.endpoint_dst = dst
        self.fin = False


class Connection:
    """Both directions of one TCP connection (index 0 = the side seen sending first)."""

    def __init__(self, key, conn_id: str, decoder: "CaptureDecoder"):
        src, sport, dst, dport = key
        a, b = format_endpoint(src, sport), format_endpoint(dst, dport)
        self.key = key
        self.conn_id = conn_id
        self.decoder = decoder
        self.stats = stats = decoder.stats
        self.out = decoder.out
        options = decoder.options
        self.dirs = (_Direction(stats, a, b, options), _Direction(stats, b, a, options))
        # per direction: opaque -> (code, ts_ns, position of the packet that completed it)
        self.requests: tuple[dict, dict] = ({}, {})
        # responses waiting for a hole to settle, in the order they came:
        # number -> (row, direction, where it completed)
        self.held: dict[int, tuple[dict, int, tuple]] = {}
        self._held_count = 0
        # per direction of the held responses: opaque -> their numbers, first first; and the
        # ones whose request has just arrived (so a release touches only what it can release)
        self._held_by: tuple[dict, dict] = ({}, {})
        self._woken: set = set()
        self.last_ts = 0
        self.closed = False
        self.isn: list[int | None] = [None, None]
        # reading ahead: where each direction's last hole closed (a response that came while
        # it was open waited there for its request, as ``held`` does)
        self.drained: list = [None, None]

    def buffered(self) -> int:
        """Bytes this connection holds: segments behind a hole and unfinished frames."""
        return sum(dd.reasm.pending_bytes + len(dd.frames.buf) for dd in self.dirs)

    def segment(self, d: int, seg, ts: int) -> None:
        if self.decoder.reading_ahead:
            waiting = [bool(dd.reasm.pending) for dd in self.dirs]
            self._segment(d, seg, ts)
            for k, dd in enumerate(self.dirs):
                if waiting[k] and not dd.reasm.pending:
                    self.drained[k] = self.decoder.pos
            return
        self._segment(d, seg, ts)

    def _segment(self, d: int, seg, ts: int) -> None:
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
            if not dirn.frames.abandoned and not dirn.frames.settled:
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
        if self.decoder.plan is not None:
            self.decoder.hand_over(self)
            return
        for row, *_ in self.held.values():
            self.out.append(row)
        self._clear_held()
        unanswered = self.stats.setdefault("unanswered_requests", {})
        for table in self.requests:
            for code, *_ in table.values():
                unanswered[code] = unanswered.get(code, 0) + 1
            table.clear()
        if self.found:
            self.stats.count("rocketmq_connections")

    @property
    def found(self) -> bool:
        return self.dirs[0].frames.found or self.dirs[1].frames.found

    @property
    def settled(self) -> bool:
        """Range mode: every direction has reached the offset where the next range takes over
        (or has no such offset, or is not RocketMQ)."""
        return all(dd.frames.settled or dd.frames.abandoned or dd.frames.limit is None
                   for dd in self.dirs)

    def ended(self, ts: int) -> None:
        """Range mode, reading ahead: a packet opens a new connection on this 4-tuple, so this
        one ends here, as it would in a whole-capture decode."""
        for dd in self.dirs:
            dd.frames.limit = None
        self.finish(ts)

    def _flush(self, d: int) -> None:
        """Turn the frames direction ``d`` produced into rows, pairing as we go."""
        dirn = self.dirs[d]
        frames = dirn.frames.out
        if frames:
            dirn.frames.out = []
            mine, theirs = self.requests[d], self.requests[1 - d]
            file = self.decoder.file
            for fr in frames:
                row = frame_row(fr, file, dirn.endpoint_src, dirn.endpoint_dst, self.conn_id)
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
                        self._hold(row, d)
                    else:
                        self._unanswering(row, d, self.decoder.pos)
                elif not row["is_oneway"]:
                    if len(mine) >= MAX_PENDING_REQUESTS:
                        code, *_ = mine.pop(next(iter(mine)))
                        un = self.stats.setdefault("unanswered_requests", {})
                        un[code] = un.get(code, 0) + 1
                    mine[opaque] = (row["code"], row["ts_ns"], self.decoder.pos)
                    waiting = self._held_by[1 - d].get(opaque)
                    if waiting:
                        self._woken.add(waiting[0])
                    self.out.append(row)
                else:
                    self.out.append(row)
        if self.held:
            self._release_held()

    def _hold(self, row: dict, d: int) -> None:
        k = self._held_count
        self._held_count += 1
        self.held[k] = (row, d, self.decoder.pos)
        self._held_by[d].setdefault(row["opaque"], deque()).append(k)

    def _clear_held(self) -> None:
        self.held = {}
        self._held_by = ({}, {})
        self._woken = set()

    def _release_held(self) -> None:
        """Pair or let go, in the order they came, the held responses whose request arrived
        (only the first of several with one opaque can pair) and those of a direction whose
        other direction has no hole any more; the others stay held.  It never looks at the
        others, so holding n responses costs O(n log n) however often this runs."""
        todo = self._woken
        self._woken = set()
        for d in (0, 1):
            if self._held_by[d] and not self.dirs[1 - d].reasm.pending:
                todo.update(k for ks in self._held_by[d].values() for k in ks)
        for k in sorted(todo):
            row, d, pos = self.held[k]
            req = self.requests[1 - d].pop(row["opaque"], None)
            if req is not None:
                self._pair(row, req)
                self.out.append(row)
            elif self.dirs[1 - d].reasm.pending:
                continue
            else:
                self._unanswering(row, d, pos)
            del self.held[k]
            ks = self._held_by[d][row["opaque"]]
            ks.popleft()                    # it was the first of its opaque
            if not ks:
                del self._held_by[d][row["opaque"]]

    def _unanswering(self, row: dict, d: int, pos: tuple) -> None:
        """A response with no request in sight: on a byte range, its request may be in an
        earlier range (the job pairs it); otherwise it stays unpaired."""
        if self.decoder.plan is not None:
            self.decoder.edge(self)["responses"].append((row, d, pos))
        else:
            self.out.append(row)

    def _pair(self, row: dict, req) -> None:
        code, ts, _pos = req
        row["request_code"] = code
        row["request_code_name"] = codes.request_code_name(code)
        row["latency_ms"] = (row["ts_ns"] - ts) / 1e6


class CaptureDecoder:
    """Packets of one capture in capture order -> rows in ``self.out``.

    ``ports``: only TCP segments with a source or destination port in this set (default: all;
    RocketMQ is recognised by content).  Connections that closed (FIN both ways, or RST) are
    finished once they have been quiet for ``linger_ns`` of capture time, so memory follows the
    number of open connections, not the capture size.  That number is bounded too (as
    Suricata's flow manager bounds its flow table): past ``max_connections`` live connections,
    or ``max_buffered_bytes`` held by all of them together, the connection that has been idle
    longest is finished as if the capture ended for it (counted as ``evicted_connections``);
    its later packets, if any, start a new one.  A range's decode (``plan``, the Spark job) keeps
    the same bounds: one range of a hostile capture can open as many connections.  ``file`` names the capture the next packets
    come from (:meth:`begin_file` switches it, for a rotated set read as one capture).
    """

    def __init__(self, file: str | None = None, ports=None, stats: Stats | None = None,
                 linger_ns: int = 2_000_000_000, plan: RangePlan | None = None,
                 max_connections: int = MAX_CONNECTIONS,
                 max_buffered_bytes: int = MAX_BUFFERED_BYTES, **options):
        self.file = file
        self.file_index = 0
        self.ports = frozenset(ports) if ports else None
        self.stats = stats if stats is not None else Stats()
        self.out: list[dict] = []
        self.flows: dict = {}            # 4-tuple -> (Connection, direction)
        self.generation: Counter = Counter()
        self.options = options
        self.linger_ns = linger_ns
        self.max_connections = max(1, max_connections)
        self.max_buffered_bytes = max_buffered_bytes
        # whole-capture mode: live connections, least recently active first, and what they hold
        self.active: OrderedDict = OrderedDict()    # Connection -> bytes it held when last seen
        self.buffered = 0
        self.peak_connections = self.peak_buffered = 0    # the most they ever were
        self._next_sweep = 0
        self._packets_since_sweep = 0
        self.plan = plan
        self.edges: dict = {}            # range mode: conn id -> what the job settles
        self.resumed: set = set()        # range mode: the plan's live connections taken up
        self.reading_ahead = False
        self.unsettled: set = set()
        self.pos = (0, 0)                # (file index, record offset) of the current packet

    def begin_file(self, name: str | None, index: int = 0) -> None:
        self.file = name
        self.file_index = index

    def packet(self, pkt) -> None:
        """Feed one :class:`~rocketpy.capture.readers.Packet`."""
        # a packet read ahead is the next range's: it counts there
        seg = decode_tcp(pkt.linktype, pkt.data, None if self.reading_ahead else self.stats)
        if seg is None:
            return
        self.segment(seg, pkt.ts_ns, pkt.offset)

    def segment(self, seg, ts: int, offset: int | None = None) -> None:
        if self.ports is not None and seg.sport not in self.ports and seg.dport not in self.ports:
            return
        self.pos = (self.file_index, offset)
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        if self.plan is not None:
            entry = self._planned(key, seg, ts, offset)
            if entry is None:
                return
        else:
            entry = self.flows.get(key)
            if entry is not None:
                conn, d = entry
                why = starts_new_connection(conn.closed, conn.last_ts, conn.isn[d],
                                            seg.flags & (SYN | ACK) == SYN, seg.seq, ts,
                                            self.linger_ns)
                if why is not None:
                    conn.finish(ts if why == "reused" else None)
                    self._drop(conn)
                    entry = None
            if entry is None:
                entry = self._new(key, seg)
        conn, d = entry
        conn.segment(d, seg, ts)
        if self.reading_ahead:
            if conn.settled:
                self.unsettled.discard(conn)
            return
        self._account(conn)
        self.active.move_to_end(conn)
        self._packets_since_sweep += 1
        # sweeping walks every open connection: amortise it over at least as many packets
        if (self._packets_since_sweep >= 4096 and ts >= self._next_sweep
                and self._packets_since_sweep >= len(self.flows)):
            self.sweep(ts)
        while self.buffered > self.max_buffered_bytes and next(iter(self.active)) is not conn:
            self._evict()
        self.peak_buffered = max(self.peak_buffered, self.buffered)

    def _account(self, conn) -> None:
        """Whole-capture mode: note what ``conn`` holds now."""
        b = conn.buffered()
        self.buffered += b - self.active.get(conn, 0)
        self.active[conn] = b

    def _evict(self) -> None:
        """Finish the connection idle longest, as if the capture ended for it."""
        conn = next(iter(self.active))
        self.stats.count("evicted_connections")
        conn.finish()
        self._drop(conn)

    def _new(self, key, seg, conn_id: str | None = None):
        self._make_room()
        src, sport, dst, dport = key
        if conn_id is None:
            lo, hi = sorted(((src, sport), (dst, dport)))
            base = f"{format_endpoint(*lo)}-{format_endpoint(*hi)}"
            self.generation[base] += 1
            g = self.generation[base]
            conn_id = base if g == 1 else f"{base}#{g}"
        # a SYN+ACK seen first means the other side opened the connection
        if seg.flags & SYN and seg.flags & ACK:
            key = (dst, dport, src, sport)
        conn = Connection(key, conn_id, self)
        self._add(key, conn)
        if self.plan is None:
            self.stats.count("connections")
        return self.flows[(src, sport, dst, dport)]

    def _make_room(self) -> None:
        """Evict until one more connection fits (a range's decode too: one range of a hostile
        capture can open as many connections as a whole one)."""
        while len(self.active) >= self.max_connections:
            self._evict()

    def _add(self, key, conn) -> None:
        self.flows[key] = (conn, 0)
        self.flows[(key[2], key[3], key[0], key[1])] = (conn, 1)
        self.active[conn] = 0
        self.peak_connections = max(self.peak_connections, len(self.active))

    def _drop(self, conn):
        self.buffered -= self.active.pop(conn, 0)
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
            self._account(conn)
            if conn.closed and ts - conn.last_ts > self.linger_ns and self.plan is None:
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
        self.active.clear()
        self.buffered = 0

    # ---- byte ranges ----------------------------------------------------------------------

    def _planned(self, key, seg, ts, offset):
        """The (connection, direction) a packet of a byte range belongs to, as the plan says;
        None for a packet read ahead that no unfinished connection needs."""
        plan = self.plan
        conn_id = plan.boundaries.get((self.file_index, offset))
        entry = self.flows.get(key)
        if self.reading_ahead:
            if entry is None or entry[0] not in self.unsettled:
                return None
            if conn_id is not None:          # it ended: a new one starts in the next range
                self.unsettled.discard(entry[0])
                entry[0].ended(ts)
                self._drop(entry[0])
                return None
            return entry
        if conn_id is not None:
            if entry is not None:
                entry[0].finish(ts)
                self._drop(entry[0])
            return self._new(key, seg, conn_id)
        if entry is not None:
            return entry
        rkey = (key[2], key[3], key[0], key[1])
        okey = key if key in plan.live else rkey
        live = plan.live.get(okey)
        if live is None or okey in self.resumed:   # not in the plan (it never misses one), or
            self.stats.count("unplanned_packets")  # evicted once already: no longer its start
            return self._new(key, seg)
        conn_id, starts = live
        self.resumed.add(okey)
        self._make_room()
        conn = Connection(okey, conn_id, self)
        for dd, start in zip(conn.dirs, starts):
            if start.seq is not None:
                dd.reasm.start_at(start.seq)
                dd.frames.start_at(start.offset, start.synced)
        self._add(okey, conn)
        return self.flows[key]

    def end_range(self) -> None:
        """The range's own packets are done: from now on only read ahead for the connections
        whose streams have not reached the offset where the next range takes over."""
        self.reading_ahead = True
        seen = set()
        for conn, _d in self.flows.values():
            if id(conn) in seen:
                continue
            seen.add(id(conn))
            limits = self.plan.limits.get(conn.conn_id)
            if limits is None:
                continue
            for dd, limit in zip(conn.dirs, limits):
                if limit is not None:
                    frames = dd.frames
                    dd.reasm.count_below(limit - frames.offset - len(frames.buf))
                    frames.stop_at(limit)
            if not conn.settled:
                self.unsettled.add(conn)

    def edge(self, conn) -> dict:
        e = self.edges.get(conn.conn_id)
        if e is None:
            e = self.edges[conn.conn_id] = {"found": False, "dirs": None,
                                            "pending": ([], []), "responses": []}
        return e

    def hand_over(self, conn) -> None:
        """Range mode: what a finished connection leaves for the job to settle."""
        e = self.edge(conn)
        if not conn.settled:
            self.stats.count("readahead_exhausted")
        e["responses"].extend(conn.held.values())
        conn._clear_held()
        for d, table in enumerate(conn.requests):
            e["pending"][d].extend((opaque, *req, conn.drained[d]) for opaque, req in table.items())
            table.clear()
        e["found"] = e["found"] or conn.found
        e["dirs"] = [{"picked_up": dd.frames.picked_up, "first_frame": dd.frames.first_frame,
                      "head_skipped": dd.frames.head_skipped, "cut": dd.frames.cut}
                     for dd in conn.dirs]
