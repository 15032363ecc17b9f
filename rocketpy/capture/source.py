"""Finding and opening capture files: local paths, globs, directories, and filesystem URIs.

Layer: ``rocketpy.capture`` (pure stdlib; optional ``pyarrow.fs``/``fsspec`` for remote URIs,
imported only when such a URI is given).  The Spark job lists its inputs through Spark itself
(any Hadoop filesystem); this module serves the in-process path and the executors' byte-range
reads.  Gzip-compressed captures (``.pcap.gz``) are read transparently (not splittable).
"""
from __future__ import annotations

import glob
import gzip
import os
from typing import BinaryIO, Iterator

from .decoder import CaptureDecoder, Stats
from .readers import CaptureFormatError, iter_packets, read_capture_info

__all__ = ["expand_inputs", "open_binary", "decode_file", "decode_paths", "is_capture_head",
           "local_path"]

_CAPTURE_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                   b"\xa1\xb2\x3c\x4d", b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34",
                   b"\x0a\x0d\x0d\x0a"}


def is_capture_head(head: bytes) -> bool:
    return head[:4] in _CAPTURE_MAGICS or head[:2] == b"\x1f\x8b"


def _is_uri(path: str) -> bool:
    """A non-local filesystem URI (``hdfs://``, ``s3a://``, ...); ``file:`` URIs are local."""
    scheme, sep, _ = path.partition(":")
    return bool(sep) and len(scheme) > 1 and scheme.isalnum() and scheme != "file" \
        and path[len(scheme) + 1:].startswith("/")


def local_path(path: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` -> ``/x`` (Hadoop lists local files as ``file:/x``)."""
    if path.startswith("file:"):
        rest = path[5:]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):          # file://host/x: drop the (local) host
                rest = "/" + rest.partition("/")[2]
        return rest
    return path


_local = local_path


def expand_inputs(inputs) -> list[str]:
    """Paths, globs and directories (walked recursively; files kept when their first bytes are
    a pcap/pcapng/gzip magic) to a sorted, de-duplicated list of files."""
    out: list[str] = []
    for item in inputs:
        if _is_uri(item):
            out.append(item)
            continue
        p = _local(item)
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches:
            raise FileNotFoundError(item)
        for m in matches:
            if os.path.isdir(m):
                for root, _dirs, files in os.walk(m):
                    for name in sorted(files):
                        fp = os.path.join(root, name)
                        try:
                            with open(fp, "rb") as f:
                                if is_capture_head(f.read(4)):
                                    out.append(fp)
                        except OSError:
                            continue
            elif os.path.exists(m):
                out.append(m)
            else:
                raise FileNotFoundError(m)
    seen = set()
    return [p for p in sorted(out) if not (p in seen or seen.add(p))]


def open_binary(path: str) -> BinaryIO:
    """A binary stream for a local path or a filesystem URI (``pyarrow.fs``, else ``fsspec``)."""
    if not _is_uri(path):
        return open(_local(path), "rb", buffering=0)
    try:
        from pyarrow import fs as pafs
        filesystem, inner = pafs.FileSystem.from_uri(path)
        return filesystem.open_input_file(inner)
    except Exception:
        import fsspec           # noqa: PLC0415 - optional dependency
        return fsspec.open(path, "rb").open()


def _maybe_gunzip(f: BinaryIO, head: bytes) -> BinaryIO:
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f)
    return f


def decode_file(path: str, ports=None, stats: Stats | None = None, name: str | None = None,
                **options) -> Iterator[dict]:
    """Rows of one capture file, in the order frames complete."""
    stats = stats if stats is not None else Stats()
    raw = open_binary(path)
    try:
        head = raw.read(4)
        raw.seek(0)
        f = _maybe_gunzip(raw, head)
        head = f.read(1 << 16)
        info = read_capture_info(head)
        f.seek(info.data_offset)
        dec = CaptureDecoder(name or path, ports=ports, stats=stats, **options)
        out = dec.out
        packet = dec.packet
        n = nbytes = 0
        for pkt in iter_packets(f, info, stats=stats):
            n += 1
            nbytes += pkt.caplen
            packet(pkt)
            if out:
                yield from out
                out.clear()
        dec.finish()
        yield from out
        out.clear()
        stats["files"] = stats.get("files", 0) + 1
        stats["packets"] = stats.get("packets", 0) + n
        stats["captured_bytes"] = stats.get("captured_bytes", 0) + nbytes
    finally:
        raw.close()


def decode_paths(inputs, ports=None, stats: Stats | None = None, errors: list | None = None,
                 **options) -> Iterator[dict]:
    """Rows of every capture among ``inputs`` (see :func:`expand_inputs`).  A file that is not
    a capture is reported in ``errors`` (path, message) and skipped, never fatal."""
    stats = stats if stats is not None else Stats()
    for path in expand_inputs(inputs):
        try:
            yield from decode_file(path, ports=ports, stats=stats, **options)
        except (CaptureFormatError, OSError, EOFError) as exc:
            stats["bad_files"] = stats.get("bad_files", 0) + 1
            if errors is not None:
                errors.append((path, str(exc)))
