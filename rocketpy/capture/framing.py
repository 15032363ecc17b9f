"""Frame extraction from one reassembled TCP direction, with resynchronisation.

Layer: ``rocketpy.capture`` (pure: stdlib + the codec).  Mirrors Java ``NettyDecoder``
(a ``LengthFieldBasedFrameDecoder``: int32 length, 16 MiB limit) on a stream that may have
holes in it and may start anywhere, which a live socket never does.  So, unlike
``rocketpy.remoting.splitter.split_frames`` (same length rule, used by the independent
test count), this extractor is gap-aware and finds RocketMQ by content:

* a direction whose capture saw the SYN starts in step at byte 0; one that starts mid-stream
  starts *hunting*: it scans for the first offset where a plausible frame begins (length within
  the limit, serialize type 0 or 1, header length inside the frame, and a header the codec's
  ``decode_header`` accepts), so RocketMQ is recognised on any port;
* every frame is checked the same way before it is accepted, so a non-RocketMQ stream falls
  into hunting and, after ``abandon_after`` bytes without a single frame, is dropped;
* a gap inside a frame whose length is known keeps the stream in step (the frame is reported
  damaged, with its header decoded when the header arrived whole); a gap across a frame
  boundary, or before the length is known, sends the extractor hunting after the gap.

Byte ranges (the Spark job decodes a capture in ranges): a range picks a stream up at a known
stream offset and hunts from there (:meth:`FrameExtractor.start_at`, remembering where it found
the first frame and what it skipped before it, so the job can check that against the previous
range), and stops at the offset where the next range takes over (:meth:`FrameExtractor.stop_at`:
the frame that straddles it is finished, nothing after it is cut).
"""
from __future__ import annotations

from typing import NamedTuple

from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.frame import decode_header
from rocketpy.remoting.layout import (CANDIDATE_TAIL, DEFAULT_MAX_FRAME_LENGTH,
                                      FRAME_START_CANDIDATE, IMPLAUSIBLE as BAD, PLAUSIBLE as OK,
                                      UNDECIDED as MORE, frame_total, has_prefix,
                                      header_bytes, plausible_binary_fields, plausible_prefix,
                                      read_prefix)

__all__ = ["Frame", "FrameExtractor", "plausible_frame_start"]

#: hunting stops trusting a header this long without seeing it whole
_MAX_HUNT_HEADER = 1 << 20


class Frame(NamedTuple):
    """A frame cut from a stream.  ``lost`` > 0 marks a damaged frame: ``data`` then holds what
    arrived of it (up to ``data``'s end) and ``lost`` the bytes of it the capture lacks;
    ``header`` is its decoded header (a RemotingCommand without body) when that arrived whole."""
    data: bytes
    ts_ns: int          # when the last byte arrived (the frame became decodable)
    offset: int         # byte offset of the frame in the direction's stream
    length: int         # full frame length, length prefix included (from the prefix)
    lost: int = 0
    header: object = None
    error: str | None = None


def plausible_frame_start(buf, i: int, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                          need_header: bool = True):
    """OK / BAD / MORE (need more bytes) for a frame starting at ``buf[i]``: the layout's
    prefix checks and, with ``need_header``, a header the codec decodes."""
    verdict = plausible_prefix(buf, i, max_frame_length)
    if verdict != OK or not need_header:
        return verdict
    stype, header = header_bytes(buf, i)
    if header is None:
        if not plausible_binary_fields(buf, i):
            return BAD
        return MORE if read_prefix(buf, i)[2] <= _MAX_HUNT_HEADER else BAD
    try:
        decode_header(stype, header)
    except (RemotingCodecError, ValueError, TypeError, OverflowError):
        return BAD
    return OK


class FrameExtractor:
    """Sink for :class:`~rocketpy.capture.reassembly.Reassembler`; collects :class:`Frame` s in
    ``self.out`` (the owner drains it after each call)."""

    __slots__ = ("buf", "offset", "synced", "skip", "out", "stats", "found",
                 "abandoned", "abandon_after", "hunted", "max_frame_length", "_need", "limit",
                 "settled", "cut", "head", "picked_up", "first_frame", "head_skipped")

    def __init__(self, stats: dict, synced: bool = False, abandon_after: int = 17 << 20,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH):
        self.buf = bytearray()
        self.offset = 0            # stream offset of buf[0]
        self.synced = synced
        self.skip = 0              # bytes still to discard (rest of a damaged frame)
        self.out: list[Frame] = []
        self.stats = stats
        self.found = False         # at least one frame seen: this is RocketMQ
        self.abandoned = False
        self.abandon_after = abandon_after
        self.hunted = 0
        self.max_frame_length = max_frame_length
        self._need = 0             # bytes the buffer must reach before parsing is worth it
        self.limit: int | None = None   # stream offset where a later byte range takes over
        self.settled = False       # reached ``limit``: every later byte is the next range's
        self.cut: int | None = None     # where it settled, when that was a frame boundary
        self.head = False          # hunting from a range's start, before its first frame
        self.picked_up: int | None = None     # the offset that hunt started from
        self.first_frame: int | None = None   # offset of that first frame
        self.head_skipped = 0      # bytes skipped before it (not counted as skipped_bytes)

    # ---- byte ranges ------------------------------------------------------------------------

    def start_at(self, offset: int, synced: bool = False) -> None:
        """Pick the stream up at ``offset`` (a range boundary): hunt for the first frame, unless
        one is known to start there."""
        self.offset = offset
        self.synced = synced
        self.head = not synced
        if not synced:
            self.picked_up = offset

    def stop_at(self, limit: int) -> None:
        """Frames starting at or after ``limit`` belong to the next range."""
        self.limit = limit
        self._check_limit(0)

    def _check_limit(self, pos: int) -> bool:
        """Settle when the bytes from ``buf[pos]`` on are all the next range's: the stream is at
        a frame boundary (or hunting) at or after ``limit``. True when it settled."""
        if self.limit is None or self.skip or self.offset + pos < self.limit:
            return False
        self.settled = True
        self.cut = self.offset + pos if self.synced else None
        self.offset += len(self.buf)
        del self.buf[:]
        return True

    # ---- Reassembler sink -------------------------------------------------------------------

    def data(self, data: bytes, ts: int) -> None:
        if self.abandoned or self.settled:
            return
        if self.skip:
            k = min(self.skip, len(data))
            self.skip -= k
            self.offset += k
            if self._check_limit(0) or k == len(data):
                return
            data = data[k:]
        buf = self.buf
        if not buf:
            if self.found and self.synced:
                data = self._whole_frames(data, ts)
                if not data:
                    return
        buf += data
        if len(buf) < self._need:
            return
        self._parse(ts)

    def _whole_frames(self, data: bytes, ts: int) -> bytes:
        """Cut the whole frames at the start of ``data`` without buffering them; the rest.

        The usual segment of an in-step stream holds whole frames (most often exactly one), so
        they are sliced from the segment itself. The checks are those of
        :func:`plausible_frame_start` without the header (as ``_parse`` applies them once a
        stream is known to be RocketMQ); anything else is left to ``_parse``.
        """
        n = len(data)
        pos = 0
        mfl = self.max_frame_length
        out = self.out
        offset = self.offset
        limit = self.limit
        while True:
            if limit is not None and offset + pos >= limit:
                break
            if plausible_prefix(data, pos, mfl) != OK:
                break
            total = frame_total(data, pos)
            if n - pos < total:
                break
            out.append(Frame(data if total == n else data[pos:pos + total], ts, offset + pos,
                             total))
            pos += total
        if pos:
            self.offset = offset + pos
            data = data[pos:]
        return data

    def gap(self, n: int, ts: int) -> None:
        if self.abandoned or self.settled:
            return
        if self.skip:
            k = min(self.skip, n)
            self.skip -= k
            self.offset += k
            n -= k
            if self._check_limit(0) or not n:
                return
        buf = self.buf
        self._need = 0
        if self.synced and plausible_prefix(buf, 0, self.max_frame_length) == OK:
            total = frame_total(buf)
            have = len(buf)
            rest = total - have
            lost = min(n, rest)
            self._damaged(total, lost, ts,
                          f"frame incomplete: {lost} of its {total} bytes lost in the capture")
            self.offset += have + n
            del buf[:]
            if n < rest:                 # the gap ends inside this frame: still in step
                self.skip = rest - n
            elif n > rest:               # the gap runs past the frame's end: hunt after it
                self.synced = False
                self._count("resyncs")
            self._check_limit(0)
            return
        self._count_skipped(len(buf))
        self.offset += len(buf) + n
        del buf[:]
        if self.synced:
            self.synced = False
            self._count("resyncs")
        self._check_limit(0)

    def finish(self, ts: int) -> None:
        """End of stream: a partial frame left over is reported damaged."""
        buf = self.buf
        if not self.abandoned and not self.settled and buf:
            if self.synced and plausible_prefix(buf, 0, self.max_frame_length) == OK:
                total = frame_total(buf)
                self._damaged(total, total - len(buf), ts,
                              f"capture ended mid-frame: {len(buf)} of {total} bytes seen")
            else:
                self._count_skipped(len(buf))
        self.offset += len(buf)
        del buf[:]

    # ---- internals --------------------------------------------------------------------------

    def _count(self, key, n=1):
        self.stats[key] = self.stats.get(key, 0) + n

    def _count_skipped(self, n):
        if n:
            if self.head:
                self.head_skipped += n
            else:
                self._count("skipped_bytes", n)

    def _damaged(self, total, lost, ts, msg):
        buf = self.buf
        header = None
        stype, raw = header_bytes(buf)
        if raw is not None:
            try:
                header = decode_header(stype, raw)
            except (RemotingCodecError, ValueError):
                header = None
        self._count("damaged_frames")
        self.out.append(Frame(bytes(buf), ts, self.offset, total, lost, header, msg))

    def _parse(self, ts: int) -> None:
        buf = self.buf
        mfl = self.max_frame_length
        out = self.out
        pos = 0            # end of the frames taken so far
        need = 0
        hunt_from = 0
        while True:
            if self.limit is not None and self._check_limit(pos):
                self._need = 0
                return
            if not self.synced:
                if pos:
                    del buf[:pos]
                    self.offset += pos
                    pos = 0
                if self._hunt(hunt_from) < 0:
                    self._need = 0
                    return
                hunt_from = 0
            n = len(buf)
            if not has_prefix(buf, pos):
                break
            total = frame_total(buf, pos)
            if n - pos < total:
                # check the header as soon as it is whole, not only when the frame is
                verdict = plausible_frame_start(buf, pos, mfl, need_header=not self.found)
                if verdict == MORE:
                    break
                if verdict == OK:
                    need = total
                    break
            elif plausible_frame_start(buf, pos, mfl, need_header=not self.found) == OK:
                out.append(Frame(bytes(buf[pos:pos + total]), ts, self.offset + pos, total))
                self.found = True
                pos += total
                continue
            # not a frame where one should start: lose step and hunt from the next byte
            self.synced = False
            self._count("resyncs")
            hunt_from = 1
        if pos:
            del buf[:pos]
            self.offset += pos
        self._need = need

    def _hunt(self, pos: int) -> int:
        """Find the next plausible frame start at or after ``pos``; -1 when the buffer is used
        up (keeping a tail that might start one)."""
        buf = self.buf
        mfl = self.max_frame_length
        while True:
            m = FRAME_START_CANDIDATE.search(buf, pos)
            if m is None:
                self._drop(len(buf) - min(len(buf) - pos, CANDIDATE_TAIL))
                return -1
            i = m.start()
            verdict = plausible_frame_start(buf, i, mfl)
            if verdict == OK:
                if self._drop(i):
                    return -1
                self.synced = True
                if self.head:
                    self.head = False
                    self.first_frame = self.offset
                return 0
            if verdict == MORE:
                self._drop(i)
                return -1
            pos = i + 1

    def _drop(self, k: int) -> bool:
        """Skip ``k`` bytes while hunting; True when that settled or abandoned the stream."""
        if k <= 0:
            return False
        limit = self.limit
        if limit is not None and self.offset + k >= limit:
            self._count_skipped(max(0, limit - self.offset))
            self.offset += k
            del self.buf[:k]
            return self._check_limit(0)
        self._count_skipped(k)
        del self.buf[:k]
        self.offset += k
        self.hunted += k
        if not self.found and self.hunted > self.abandon_after:
            self.abandoned = True
            self.offset += len(self.buf)
            del self.buf[:]
            return True
        return False
