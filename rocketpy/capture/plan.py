"""Decoding one capture in byte ranges, in parallel, with the rows of a whole-capture decode.

Layer: ``rocketpy.capture`` (pure: stdlib + the decoder), run by the Spark job
(``tools/capture_job.py``) and by the tests without Spark.  Work follows bytes, not
connections: a capture dominated by one long connection splits as evenly as any other.

1. **Plan** (:func:`scan_range`, parallel, TCP headers only): each range reports, per 4-tuple,
   "pieces" of its packets: where they start (the first packet, every SYN, every packet after
   more than ``linger_ns`` of silence: the only places a new connection can begin), their
   flags, and how far each direction's sequence numbers got.
2. **Planner** (:class:`Planner`, on the driver, small): replays the pieces in capture order with
   the decoder's own rule (:func:`~rocketpy.capture.decoder.starts_new_connection`), so it knows
   every connection's id, orientation and stream offsets; from that each range gets a
   :class:`~rocketpy.capture.decoder.RangePlan`: the packets that open connections, the
   connections already open when it starts and where their streams stand, and where the next
   range takes each stream over.
3. **Decode** (:func:`decode_range`, parallel): a range decodes its own packets, then reads ahead
   only for connections whose last frame is unfinished (the frame that straddles the boundary is
   decoded whole by the range it started in); the next range picks each stream up where its own
   packets start and hunts for the first frame there.
4. **Stitch** (:func:`stitch`, on the driver, small): pairs the responses whose request lies in an
   earlier range, counts the requests never answered, and checks that where each range found its
   first frame is where the previous range's last frame ended (``range_boundary_mismatches``
   counts otherwise; a stream that only looks like frames inside a body could mislead a hunt).

The rows equal a whole-capture decode's, except where a hole in a stream is only closed by the
10-second timeout (in one process the whole capture shares one clock), or an opaque is reused
across a range boundary while its first request is unanswered.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from rocketpy.remoting import codes

from .decoder import DirStart, RangePlan, starts_new_connection
from .layers import ACK, FIN, RST, SYN, decode_tcp, format_endpoint
from .readers import CaptureFormatError, iter_packets
from .stats import Stats

__all__ = ["Range", "scan_range", "Planner", "decode_range", "next_file", "stitch", "plan_ranges",
           "READAHEAD"]

_MASK = 0xFFFFFFFF


def _rel(a: int, b: int) -> int:
    d = (a - b) & _MASK
    return d - 0x100000000 if d & 0x80000000 else d


class Range(NamedTuple):
    """A byte range of one file of a capture: ``index`` orders ranges in capture order,
    ``capture`` groups the ranges of one capture (a file, or a rotated set read as one)."""
    index: int
    capture: int
    file_index: int
    path: str
    name: str
    start: int
    end: int


def plan_ranges(files, chunk: int, one_capture: bool = False) -> list[Range]:
    """Ranges of about ``chunk`` bytes over ``files`` ([(path, name, size, CaptureInfo)], in
    capture order when ``one_capture``)."""
    from .split import plan_ranges as cut
    out = []
    for fi, (path, name, size, info) in enumerate(files):
        for a, b in cut(info, size, chunk):
            out.append(Range(len(out), 0 if one_capture else fi, fi, path, name, a, b))
    return out


# ---- 1. plan: TCP headers of a range ------------------------------------------------------

def _side_key(seg):
    """(canonical 4-tuple, side of the sender: 0 = the lower endpoint)."""
    a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
    return ((a + b), 0) if a <= b else ((b + a), 1)


def scan_range(f, info, start: int | None, end: int, ports=None,
               linger_ns: int = 2_000_000_000) -> dict:
    """The plan of one range (reference implementation; the compiled core has the same,
    ``_native.plan_scan``): packets and bytes it owns, and per 4-tuple its pieces

    ``(at, ts0, ts1, side, flags, seq, fin0, fin1, rst, first0, hwm0, first1, hwm1)``: record
    offset, first and last capture time, the first packet's sending side, flags and sequence
    number; per side whether it sent FIN, the sequence number of its first payload byte here
    and how far past it its bytes reached.  A record the reader refuses ends the scan there
    (``"error"`` says why; the range's decode meets and reports the same record)."""
    ports = frozenset(ports) if ports else None
    flows: dict = {}
    last: dict = {}
    packets = captured = 0
    error = None
    try:
        for pkt in iter_packets(f, info, start=start):
            if pkt.offset >= end:
                break
            packets += 1
            captured += pkt.caplen
            _scan_packet(pkt, ports, linger_ns, flows, last)
    except CaptureFormatError as exc:
        error = str(exc)
    out = {"packets": packets, "captured_bytes": captured,
           "flows": {k: [tuple(p) for p in v] for k, v in flows.items()}}
    if error is not None:
        out["error"] = error
    return out


def _scan_packet(pkt, ports, linger_ns, flows, last) -> None:
    """One packet into its 4-tuple's current piece."""
    seg = decode_tcp(pkt.linktype, pkt.data)
    if seg is None or (ports is not None and seg.sport not in ports
                       and seg.dport not in ports):
        return
    key, side = _side_key(seg)
    ts = pkt.ts_ns
    piece = last.get(key)
    if piece is None or seg.flags & SYN or ts - piece[2] > linger_ns:
        piece = [pkt.offset, ts, ts, side, seg.flags, seg.seq, False, False, False,
                 None, 0, None, 0]
        flows.setdefault(key, []).append(piece)
        last[key] = piece
    piece[2] = ts
    if seg.flags & FIN:
        piece[6 + side] = True
    if seg.flags & RST:
        piece[8] = True
    n = len(seg.payload) + seg.missing
    if n:
        i = 9 + 2 * side
        if piece[i] is None:
            piece[i] = seg.seq
            piece[i + 1] = n
        else:
            h = piece[i + 1]
            at = h + _rel(seg.seq, (piece[i] + h) & _MASK)
            piece[i + 1] = max(h, at + n)


# ---- 2. planner: connections across ranges --------------------------------------------------

class _Conn:
    __slots__ = ("id", "okey", "zero", "isn", "base", "hwm", "fin", "closed", "last_ts",
                 "ranges", "ended_by")

    def __init__(self, conn_id, okey, zero):
        self.id = conn_id
        self.okey = okey           # 4-tuple of direction 0
        self.zero = zero           # the canonical side that is direction 0
        self.isn = [None, None]
        self.base = [None, None]   # sequence number of each direction's first stream byte
        self.hwm = [0, 0]          # stream offset each direction's bytes reached
        self.fin = [False, False]
        self.closed = False
        self.last_ts = 0
        self.ranges: list[int] = []
        self.ended_by = None       # the packet that opened the next connection on its 4-tuple

    def start(self, d: int) -> DirStart:
        if self.base[d] is None:
            return DirStart(None, 0)
        # nothing sent after the SYN yet: the first frame starts right there
        synced = self.isn[d] is not None and self.hwm[d] == 0
        return DirStart((self.base[d] + self.hwm[d]) & _MASK, self.hwm[d], synced)


class Planner:
    """Replays every range's pieces in capture order (all of them before any range decodes:
    they are small) and makes each range's :class:`RangePlan`."""

    def __init__(self, ranges: list[Range], scans: dict, linger_ns: int = 2_000_000_000):
        self.ranges = ranges
        self.linger_ns = linger_ns
        self.stats = Stats()
        self._boundaries: dict[int, dict] = {r.index: {} for r in ranges}
        self._live: dict[int, dict] = {r.index: {} for r in ranges}
        self._hwm_after: dict[tuple, tuple] = {}       # (conn id, range) -> hwm per direction
        self.conns: dict[str, _Conn] = {}
        generation: dict = {}
        current: dict = {}
        last_capture = None
        for r in ranges:
            if r.capture != last_capture:       # connections never cross captures
                current, generation, last_capture = {}, {}, r.capture
            scan = scans[r.index]
            for key, pieces in scan["flows"].items():
                for piece in pieces:
                    c = self._piece(r, key, piece, current, generation)
                    if not c.ranges or c.ranges[-1] != r.index:
                        c.ranges.append(r.index)
            for c in {id(c): c for c in current.values()}.values():
                if c.ranges and c.ranges[-1] == r.index:
                    self._hwm_after[(c.id, r.index)] = tuple(
                        c.hwm[d] if c.base[d] is not None else None for d in (0, 1))
        self.stats["connections"] = len(self.conns)

    def _piece(self, r: Range, key, piece, current: dict, generation: dict) -> _Conn:
        at, ts0, ts1, side, flags, seq, fin0, fin1, rst, first0, hwm0, first1, hwm1 = piece
        c = current.get(key)
        new = c is None
        if not new:
            d = 0 if side == c.zero else 1
            new = starts_new_connection(c.closed, c.last_ts, c.isn[d],
                                        flags & (SYN | ACK) == SYN, seq, ts0,
                                        self.linger_ns) is not None
        if new:
            lo = format_endpoint(key[0], key[1])
            hi = format_endpoint(key[2], key[3])
            base = f"{lo}-{hi}"
            g = generation[base] = generation.get(base, 0) + 1
            conn_id = base if g == 1 else f"{base}#{g}"
            # direction 0 sends the first packet, unless that is a SYN+ACK
            zero = side if not (flags & SYN and flags & ACK) else 1 - side
            okey = key if zero == 0 else (key[2], key[3], key[0], key[1])
            if c is not None:
                c.ended_by = ((r.file_index, at), conn_id)
            c = current[key] = self.conns[conn_id] = _Conn(conn_id, okey, zero)
            self._boundaries[r.index][(r.file_index, at)] = conn_id
        elif not c.ranges or c.ranges[-1] != r.index:
            self._live[r.index][c.okey] = (c.id, (c.start(0), c.start(1)))
        d = 0 if side == c.zero else 1
        if flags & SYN and c.base[d] is None:
            c.base[d] = (seq + 1) & _MASK
            c.isn[d] = seq
        for s, first, hwm, fin in ((0, first0, hwm0, fin0), (1, first1, hwm1, fin1)):
            dd = 0 if s == c.zero else 1
            if first is not None:
                if c.base[dd] is None:
                    c.base[dd] = first
                at_ = c.hwm[dd] + _rel(first, (c.base[dd] + c.hwm[dd]) & _MASK)
                c.hwm[dd] = max(c.hwm[dd], at_ + hwm)
            c.fin[dd] = c.fin[dd] or fin
        c.closed = c.closed or rst or (c.fin[0] and c.fin[1])
        c.last_ts = ts1
        return c

    def plan(self, r: Range) -> RangePlan:
        """The plan of range ``r``: besides its own, the packets that end its connections
        later (reading ahead, it stops there)."""
        boundaries = dict(self._boundaries[r.index])
        limits = {}
        for conn_id in set(self._boundaries[r.index].values()) | {
                v[0] for v in self._live[r.index].values()}:
            c = self.conns[conn_id]
            if c.ended_by is not None:
                boundaries[c.ended_by[0]] = c.ended_by[1]
            i = c.ranges.index(r.index)
            if i + 1 < len(c.ranges):
                limits[conn_id] = self._hwm_after[(conn_id, r.index)]
        return RangePlan(boundaries, dict(self._live[r.index]), limits)


# ---- 3. decode a range ---------------------------------------------------------------------

#: how far past its end a range reads for its unfinished frames: four of the largest frames
READAHEAD = 4 * 16 << 20


def decode_range(decoder, r: Range, info, f, start: int, next_file=None,
                 readahead: int = READAHEAD) -> Iterator:
    """Batches of one range: ``decoder`` is a batch engine made with this range's plan; ``f``
    is positioned at ``start``, the range's first record.  It reads at most ``readahead`` bytes
    past its end for its unfinished frames; when the file ends first and the capture goes on in
    another file, ``next_file`` is ``(its first Range, its CaptureInfo, open())``."""
    eof = yield from decoder.decode(f, r.name, info, r.file_index, start, r.end, readahead)
    if eof and decoder.unsettled and next_file is not None:
        nr, next_info, open_next = next_file
        with open_next() as f2:
            yield from decoder.decode(f2, nr.name, next_info, nr.file_index, nr.start, nr.start,
                                      readahead)
    yield from decoder.finish()


def next_file(ranges: list[Range], k: int) -> Range | None:
    """The first range of the next file of range ``k``'s capture (its read-ahead may run past
    the end of its own file), or None."""
    r = ranges[k]
    for n in ranges[k + 1:]:
        if n.capture != r.capture:
            return None
        if n.file_index != r.file_index:
            return n
    return None


# ---- 4. stitch ------------------------------------------------------------------------------

def stitch(ranges: list[Range], edges: dict) -> tuple[list[dict], Stats]:
    """The rows only the whole capture settles (responses whose request is in an earlier range,
    paired here) and the counters it settles (requests never answered, RocketMQ connections,
    bytes a range skipped that belonged to the previous range's last frame).

    ``edges``: range index -> the decoder's edges for that range."""
    rows: list[dict] = []
    stats = Stats()
    unanswered: dict = {}
    conns: dict = {}       # conn id -> state across ranges
    for r in ranges:
        for conn_id, e in (edges.get(r.index) or {}).items():
            st = conns.setdefault(conn_id, {"carried": ({}, {}), "expect": [None, None],
                                            "found": False})
            carried = st["carried"]
            for row, d, pos in e["responses"]:
                req = carried[1 - d].get(row["opaque"])
                if req is not None and _answers(req, tuple(pos)):
                    code, ts, *_ = carried[1 - d].pop(row["opaque"])
                    row["request_code"] = code
                    row["request_code_name"] = codes.request_code_name(code)
                    row["latency_ms"] = (row["ts_ns"] - ts) / 1e6
                rows.append(row)
            for d in (0, 1):
                for opaque, code, ts, pos, drained in e["pending"][d]:
                    carried[d][opaque] = (code, ts, pos, drained)
            st["found"] = st["found"] or e["found"]
            for d, info in enumerate(e["dirs"] or ()):
                _check_boundary(st["expect"], d, info, stats)
    for st in conns.values():
        for table in st["carried"]:
            for code, *_ in table.values():
                unanswered[code] = unanswered.get(code, 0) + 1
        if st["found"]:
            stats.count("rocketmq_connections")
    stats["unanswered_requests"] = unanswered
    return rows, stats


def _answers(req, pos: tuple) -> bool:
    """Does a response at ``pos`` answer this carried request, as a whole-capture decode would
    pair them?  When the request completed before it (in capture order); or when it completed
    as a hole in its direction closed, and the response came while the hole was open (the
    decoder holds such a response until the hole settles)."""
    _code, _ts, req_pos, drained = req
    req_pos = tuple(req_pos)
    return req_pos < pos or (drained is not None and pos < tuple(drained) == req_pos)


def _check_boundary(expect: list, d: int, info: dict, stats: Stats) -> None:
    """Where a range found a direction's first frame against where the previous range's last
    frame ended (``expect[d]``); the bytes it skipped before that are skipped bytes unless they
    were the rest of that frame."""
    picked_up, first, skipped, cut = (info["picked_up"], info["first_frame"],
                                      info["head_skipped"], info["cut"])
    want = expect[d]
    inside = False
    if picked_up is not None:
        if first is None:        # no frame found: all of it must lie inside the previous one
            inside = want is not None and want >= picked_up + skipped
            consistent = inside
        else:
            consistent = first == want
        if not consistent:
            if skipped:
                stats.count("skipped_bytes", skipped)
            if want is not None:
                stats.count("range_boundary_mismatches")
    expect[d] = cut if cut is not None else (want if inside else None)
