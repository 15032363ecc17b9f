"""TCP reassembly for one direction of one connection.

Layer: ``rocketpy.capture`` (pure stdlib).  No Java counterpart: on the wire, Netty's
``LengthFieldBasedFrameDecoder`` in ``NettyDecoder`` sees the byte stream the kernel already
reassembled; a capture has to redo that work, with the capture's own defects on top.

What it copes with, and how:

* out-of-order segments: buffered by sequence number until the hole before them fills;
* retransmissions and overlaps: bytes before the next expected sequence number are dropped
  (the first copy wins, as in Wireshark's default), partly-new segments are trimmed;
* lost segments (dropped by the capture, so never retransmitted): a hole is declared lost
  ``reorder_ns`` after the peer acknowledged data beyond it (it has the bytes, nobody will
  resend them; the delay tolerates captures that reorder packets slightly), when the hole is
  older than ``hole_timeout_ns`` of capture time, when more than ``max_pending_bytes`` or
  ``max_pending_segments`` wait behind it, or at the end of the stream.  The sink is told the exact gap size, and the data
  behind a lost hole keeps its own capture time (it reached the receiver then); data behind a
  hole filled by a retransmission gets the retransmission's time, when the receiver got it;
* captures starting mid-stream: without a SYN the first segment seen starts the stream;
* packets cut by the snap length: the captured part is delivered and the cut-off tail (known
  from the IP length) becomes a gap at once;
* a stream picked up at a byte-range boundary (the Spark job): :meth:`Reassembler.start_at`
  starts it at a known sequence number (earlier bytes were the previous range's); a range
  reading ahead past its end (:meth:`Reassembler.count_below`) counts only losses below the
  next range's bytes, and no retransmission: the packets it reads ahead are the next range's,
  which counts them.

Sequence numbers are compared modulo 2**32 relative to the next expected byte.  Segments waiting
behind a hole are kept by their place in the stream (a 64-bit position that never wraps) in a
heap, so finding the first one and draining them in stream order costs O(log n) each, whatever
order a stranger sends them in (Suricata keeps them in a tree, ``src/stream-tcp-list.c``).  When
several waiting segments start at or before the next expected byte, the one starting first is
delivered first; the rest is trimmed as a retransmission.
"""
from __future__ import annotations

from heapq import heappop, heappush

__all__ = ["Reassembler", "MAX_PENDING_SEGMENTS"]

_MASK = 0xFFFFFFFF
#: segments one direction keeps behind a hole (32 MiB of full-sized ones is ~23,000)
MAX_PENDING_SEGMENTS = 32768


def _rel(a: int, b: int) -> int:
    """Signed distance a - b in sequence space."""
    d = (a - b) & _MASK
    return d - 0x100000000 if d & 0x80000000 else d


class Reassembler:
    """Feed segments in capture order; the sink receives ``data(bytes, ts_ns)`` and
    ``gap(nbytes, ts_ns)`` calls in stream order, until its ``settled`` says it wants no more
    (a byte range's stream reached the next range's part)."""

    __slots__ = ("sink", "next", "at", "pending", "order", "pending_bytes", "hole_since",
                 "max_pending_bytes", "max_pending_segments", "hole_timeout_ns",
                 "stats", "doomed_at", "reorder_ns", "ceiling")

    def __init__(self, sink, stats: dict, max_pending_bytes: int = 32 << 20,
                 hole_timeout_ns: int = 10_000_000_000, reorder_ns: int = 100_000_000,
                 max_pending_segments: int = MAX_PENDING_SEGMENTS):
        self.sink = sink
        self.next: int | None = None
        self.at = 0            # the next expected byte's place in the stream (never wraps)
        # place -> (payload, missing, ts), and the places in a heap (the first one on top)
        self.pending: dict[int, tuple[bytes, int, int]] = {}
        self.order: list[int] = []
        self.pending_bytes = 0
        self.max_pending_segments = max_pending_segments
        self.hole_since = 0
        self.max_pending_bytes = max_pending_bytes
        self.hole_timeout_ns = hole_timeout_ns
        self.reorder_ns = reorder_ns
        self.doomed_at: int | None = None   # when the peer acknowledged past the hole
        self.stats = stats
        self.ceiling: int | None = None     # reading ahead: bytes from here on are the next range's

    def start_at(self, seq: int) -> None:
        """Pick the stream up at ``seq`` (a byte-range boundary)."""
        self.next = seq & _MASK

    def count_below(self, ahead: int) -> None:
        """From now on the packets are read ahead: count losses only below the byte ``ahead``
        bytes past the next expected one, and no retransmission (the next range counts them)."""
        if self.next is not None:
            self.ceiling = (self.next + ahead) & _MASK

    def syn(self, seq: int) -> None:
        if self.next is None:
            self.next = (seq + 1) & _MASK

    def segment(self, seq: int, payload: bytes, missing: int, ts: int) -> None:
        n = len(payload) + missing
        if n == 0 or self.sink.settled:
            return
        nxt = self.next
        if nxt is None:
            self.next = nxt = seq
        if seq == nxt and not self.pending:         # the common case: in order, nothing waiting
            self.next = (nxt + n) & _MASK
            self.at += n
            self._deliver(payload, missing, ts)
            return
        rel = _rel(seq, nxt)
        if rel < 0:
            new = self._new_part(rel, payload, missing)
            if new is None:
                return
            payload, missing = new
            seq, rel, n = nxt, 0, n + rel
        if rel == 0:
            self.next = (nxt + n) & _MASK
            self.at += n
            self._deliver(payload, missing, ts)
            self._drain(ts)
            self.doomed_at = None
            if self.pending:
                self.hole_since = ts
        else:
            place = self.at + rel
            old = self.pending.get(place)
            if old is None or len(old[0]) + old[1] < n:
                if old is not None:
                    self.pending_bytes -= len(old[0]) + old[1]
                else:
                    if not self.pending:
                        self.hole_since = ts
                    heappush(self.order, place)
                self.pending[place] = (payload, missing, ts)
                self.pending_bytes += n
            else:
                self._retransmitted(n)
            if (self.pending_bytes > self.max_pending_bytes
                    or len(self.pending) > self.max_pending_segments):
                self.skip_hole(ts)
            else:
                self.tick(ts)

    def acked(self, ack: int, ts: int) -> None:
        """The peer acknowledged ``ack``: a hole it has acknowledged past can never fill."""
        if self.pending and self.doomed_at is None and _rel(ack, self.next) > 0:
            if _rel(ack, self.next) > self.order[0] - self.at:
                self.doomed_at = ts
        self.tick(ts)

    def tick(self, ts: int) -> None:
        if self.pending and not self.sink.settled and (ts - self.hole_since > self.hole_timeout_ns or (
                self.doomed_at is not None and ts - self.doomed_at >= self.reorder_ns)):
            self.skip_hole(ts)

    def skip_hole(self, ts: int) -> None:
        """Declare the bytes up to the first buffered segment lost and carry on from there."""
        if not self.pending or self.sink.settled:
            return
        nxt = self.next
        gap = self.order[0] - self.at
        if gap > 0:
            lost = gap if self.ceiling is None else min(gap, max(0, _rel(self.ceiling, nxt)))
            if lost:
                self.stats["gaps"] = self.stats.get("gaps", 0) + 1
                self.stats["gap_bytes"] = self.stats.get("gap_bytes", 0) + lost
            self.sink.gap(gap, ts)
            self.next = (nxt + gap) & _MASK
            self.at += gap
        self._drain(ts, own_ts=True)
        self.doomed_at = None
        if self.pending:
            self.hole_since = ts

    def finish(self, ts: int) -> None:
        while self.pending and not self.sink.settled:
            self.skip_hole(ts)

    # -----------------------------------------------------------------------------------------

    def _new_part(self, rel: int, payload: bytes, missing: int):
        """(payload, missing) of what a segment starting ``rel`` < 0 bytes before the next
        expected byte adds, or None (counted) when it is all retransmitted."""
        k = -rel
        n = len(payload) + missing
        if k >= n:
            self._retransmitted(n)
            return None
        if k <= len(payload):
            return payload[k:], missing
        return b"", missing - (k - len(payload))

    def _retransmitted(self, n: int) -> None:
        if self.ceiling is None:
            self.stats["retransmitted_bytes"] = self.stats.get("retransmitted_bytes", 0) + n

    def _deliver(self, payload: bytes, missing: int, ts: int) -> None:
        if self.sink.settled:        # the next byte range's bytes
            return
        if payload:
            self.sink.data(payload, ts)
        if missing:
            if self.ceiling is None:
                self.stats["snaplen_cut_bytes"] = self.stats.get("snaplen_cut_bytes", 0) + missing
            self.sink.gap(missing, ts)

    def _drain(self, ts: int, own_ts: bool = False) -> None:
        """Deliver the waiting segments that start at or before the next expected byte, the
        first-starting first."""
        pending, order = self.pending, self.order
        while order and order[0] <= self.at:
            place = heappop(order)
            payload, missing, seg_ts = pending.pop(place)
            n = len(payload) + missing
            self.pending_bytes -= n
            rel = place - self.at
            if rel < 0:
                new = self._new_part(rel, payload, missing)
                if new is None:
                    continue
                payload, missing = new
                n += rel
            self.next = (self.next + n) & _MASK
            self.at += n
            self._deliver(payload, missing, seg_ts if own_ts else ts)
