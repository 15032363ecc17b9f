"""Splitting one large capture into byte ranges that are read independently.

Layer: ``rocketpy.capture`` (pure stdlib), run by Spark executors (``tools/capture_job.py``).
Spark's ``binaryFile`` source reads a whole file into one row and fails past 2 GB; instead the
job plans ``[start, end)`` ranges on the driver and each task reads only its range (plus the tail
of its last record, and what :mod:`rocketpy.capture.plan` reads ahead).  A task owns the packets
whose record *starts* in its range: it finds the first record boundary at or after ``start``
with the same plausibility chain pcap splitters use
(:func:`~rocketpy.capture.readers.find_pcap_record`), so every packet is read exactly once
across the tasks.  Each packet keeps its file offset, which is its capture order.
"""
from __future__ import annotations

from .readers import (CaptureFormatError, CaptureInfo, find_pcap_record, find_pcapng_block,
                      read_capture_info)
from .source import open_binary

__all__ = ["plan_ranges", "probe", "seek_record"]

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


def seek_record(f, info: CaptureInfo, start: int, path: str = "") -> int:
    """Position ``f`` at the first record starting at or after ``start`` (any offset) and
    return that record's offset."""
    if start <= info.data_offset:
        f.seek(info.data_offset)
        return info.data_offset
    # pcapng blocks sit on 4-byte boundaries: round up, never owning an earlier block
    base = start + (-start % 4) if info.kind == "pcapng" else start
    f.seek(base)
    window = f.read(RESYNC_WINDOW)
    i = (find_pcap_record if info.kind == "pcap" else find_pcapng_block)(window, info)
    if i is None:
        raise CaptureFormatError(f"{path}: no record boundary within {RESYNC_WINDOW} "
                                 f"bytes after offset {start}")
    f.seek(base + i)
    return base + i
