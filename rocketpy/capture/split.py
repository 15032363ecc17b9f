"""Splitting one large capture into byte ranges that are read independently.

Layer: ``rocketpy.capture`` (pure stdlib), run by Spark executors (``tools/capture_job.py``).
Spark's ``binaryFile`` source reads a whole file into one row and fails past 2 GB; instead the
job plans ``[start, end)`` ranges on the driver and each task reads only its range (plus the tail
of its last record).  A task owns the packets whose record *starts* in its range: it finds the
first record boundary at or after ``start`` with the same plausibility chain pcap splitters use
(:func:`~rocketpy.capture.readers.find_pcap_record`), so every packet is read exactly once
across the tasks.  Each packet keeps its file offset, which is its capture order, so the
per-flow reducer can restore the order after the shuffle.
"""
from __future__ import annotations

from typing import Iterator

from .layers import decode_tcp
from .readers import (CaptureFormatError, CaptureInfo, find_pcap_record, find_pcapng_block,
                      iter_packets, read_capture_info)
from .source import open_binary

__all__ = ["plan_ranges", "range_packets", "range_segments", "flow_key", "probe"]

#: bytes read after ``start`` to find the first record boundary: eight records of the largest
#: snap length (262144) fit.
RESYNC_WINDOW = 4 << 20


def probe(path: str) -> CaptureInfo:
    """The capture header of ``path`` (raises CaptureFormatError for a non-capture)."""
    with open_binary(path) as f:
        head = f.read(1 << 16)
    if head[:2] == b"\x1f\x8b":
        raise CaptureFormatError("gzip-compressed capture: not splittable")
    return read_capture_info(head)


def plan_ranges(info: CaptureInfo, size: int, chunk: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges covering the records of a ``size``-byte capture."""
    start = info.data_offset
    if size <= start:
        return []
    chunk = max(chunk, 2 * RESYNC_WINDOW)
    out = []
    while start < size:
        end = min(size, start + chunk)
        if size - end < chunk // 4:       # no tiny last range
            end = size
        out.append((start, end))
        start = end
    return out


def range_packets(path: str, info: CaptureInfo, start: int, end: int, stats: dict | None = None,
                  f=None) -> Iterator:
    """Packets whose record starts in ``[start, end)`` (``start`` need not be a boundary)."""
    own = f is None
    if own:
        f = open_binary(path)
    try:
        if start > info.data_offset:
            # pcapng blocks sit on 4-byte boundaries: round up, never owning an earlier block
            base = start + (-start % 4) if info.kind == "pcapng" else start
            f.seek(base)
            window = f.read(RESYNC_WINDOW)
            if info.kind == "pcap":
                i = find_pcap_record(window, info)
            else:
                i = find_pcapng_block(window, info)
            if i is None:
                raise CaptureFormatError(f"{path}: no record boundary within {RESYNC_WINDOW} "
                                         f"bytes after offset {start}")
            b = base + i
            if b >= end:
                return
            f.seek(b)
        else:
            b = info.data_offset
            f.seek(b)
        yield from iter_packets(f, info, start=b, end=end, stats=stats)
    finally:
        if own:
            f.close()


def flow_key(seg) -> bytes:
    """Both directions of a TCP connection map to one key (lower endpoint first)."""
    a = seg.src + seg.sport.to_bytes(2, "big")
    b = seg.dst + seg.dport.to_bytes(2, "big")
    return a + b if a <= b else b + a


def range_segments(path: str, info: CaptureInfo, start: int, end: int, ports=None,
                   stats: dict | None = None) -> Iterator[tuple]:
    """(flow key, offset, ts_ns, segment) for the TCP segments of one range."""
    ports = frozenset(ports) if ports else None
    for pkt in range_packets(path, info, start, end, stats):
        seg = decode_tcp(pkt.linktype, pkt.data, stats)
        if seg is None:
            continue
        if ports is not None and seg.sport not in ports and seg.dport not in ports:
            continue
        yield flow_key(seg), pkt.offset, pkt.ts_ns, seg
