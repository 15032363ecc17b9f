"""Finding and opening capture files: local paths, globs, directories, and filesystem URIs.

Layer: ``rocketpy.capture`` (pure stdlib; optional ``pyarrow.fs``/``fsspec`` for remote URIs,
imported only when such a URI is given; the reference decoder only when a :class:`RowDecoder` is
made, so the compiled engine reads files without it).  The Spark job lists its inputs through Spark itself
(any Hadoop filesystem); this module serves the in-process path and the executors' byte-range
reads.  Gzip-compressed captures (``.pcap.gz``) are read transparently (not splittable).
"""
from __future__ import annotations

import contextlib
import glob
import gzip
import os
from typing import BinaryIO, Iterator

from .readers import CaptureFormatError, CaptureInfo, iter_packets, read_capture_info
from .stats import Stats

__all__ = ["expand_inputs", "open_binary", "open_capture", "decode_file", "decode_paths",
           "decode_inputs", "decode_packets", "RowDecoder", "is_capture_head", "local_path",
           "capture_order", "first_timestamp"]

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


@contextlib.contextmanager
def open_capture(path: str) -> Iterator[tuple[BinaryIO, CaptureInfo]]:
    """``(stream, capture header)`` of a capture file, the stream at its first record."""
    raw = open_binary(path)
    try:
        head = raw.read(4)
        raw.seek(0)
        f = _maybe_gunzip(raw, head)
        head = f.read(1 << 16)
        info = read_capture_info(head)
        f.seek(info.data_offset)
        yield f, info
    finally:
        raw.close()


def first_timestamp(path: str) -> int | None:
    """Capture time of a file's first packet (None: no packet), for ordering a rotated set."""
    with open_capture(path) as (f, info):
        for pkt in iter_packets(f, info):
            return pkt.ts_ns
    return None


def capture_order(paths: list[str], errors: list | None, stats: Stats) -> list[str]:
    """A rotated set (``tcpdump -C/-G/-W``) in capture order: by first timestamp, then name.
    Files that are not captures are reported and left out."""
    keyed = []
    for path in paths:
        try:
            ts = first_timestamp(path)
        except (CaptureFormatError, OSError, EOFError) as exc:
            stats.count("bad_files")
            if errors is not None:
                errors.append((path, str(exc)))
            continue
        keyed.append((ts is None, ts or 0, path))
    return [path for *_, path in sorted(keyed)]


def decode_packets(dec, f: BinaryIO, info: CaptureInfo, start: int | None = None,
                   end: int | None = None, readahead: int = 0) -> Iterator[dict]:
    """Feed ``dec`` (a :class:`CaptureDecoder`) the packets of ``f``; yields rows as frames
    complete, returns whether it read to the end of the file.  With ``end`` (a byte range),
    records from ``end`` on are read only while the decoder has unfinished connections, and at
    most ``readahead`` bytes past ``end``."""
    stats = dec.stats
    out = dec.out
    for pkt in iter_packets(f, info, start=start, stats=stats):
        if end is not None and pkt.offset >= end:
            if not dec.reading_ahead:
                dec.end_range()
            if not dec.unsettled or pkt.offset >= end + readahead:
                return False
        else:
            stats.count("packets")
            stats.count("captured_bytes", pkt.caplen)
        dec.packet(pkt)
        if out:
            yield from out
            out.clear()
    if end is not None and not dec.reading_ahead:
        dec.end_range()
    return True


class RowDecoder:
    """The reference decoder as an engine (the interface of :mod:`rocketpy.capture.engine`'s
    batch engines, yielding row dicts): ``decode`` one file or byte range after another, then
    ``finish``."""

    name = "rows"

    def __init__(self, ports=None, plan=None, **options):
        from .decoder import CaptureDecoder     # (the codec with it: not for the compiled path)
        self.stats = Stats()
        self.dec = CaptureDecoder(None, ports=ports, stats=self.stats, plan=plan, **options)

    def decode(self, f: BinaryIO, name: str | None, info: CaptureInfo, index: int = 0,
               start: int | None = None, end: int | None = None,
               readahead: int = 0) -> Iterator[dict]:
        self.dec.begin_file(name, index)
        return (yield from decode_packets(self.dec, f, info, start, end, readahead))

    def finish(self) -> Iterator[dict]:
        self.dec.finish()
        yield from self.dec.out
        self.dec.out.clear()

    @property
    def edges(self) -> dict:
        return self.dec.edges

    @property
    def unsettled(self) -> int:
        return len(self.dec.unsettled)

    @property
    def table(self) -> dict:
        """The live connection table: its size now and the most it ever was."""
        d = self.dec
        return {"connections": len(d.active), "buffered_bytes": d.buffered,
                "peak_connections": d.peak_connections, "peak_buffered_bytes": d.peak_buffered}


#: what ``errors`` says of a file that ends inside a packet record (decoded up to there)
TRUNCATED = "the file ends inside a packet record (cut short, or still being written): " \
            "decoded up to its last whole packet"


def decode_inputs(inputs, new_decoder, stats: Stats | None = None, errors: list | None = None,
                  one_capture: bool = False, names=None) -> Iterator:
    """What ``new_decoder()`` (an engine) yields for every capture among ``inputs`` (see
    :func:`expand_inputs`).  A file that is not a capture, or breaks part-way (after what came
    before it), or ends inside a record (:data:`TRUNCATED`), is reported in ``errors`` (path,
    message), never fatal.  ``one_capture``: the
    files are a rotated set, decoded as one capture in capture order (connections carry on from
    one file into the next).  ``names``: path -> the name rows give the file."""
    stats = stats if stats is not None else Stats()
    paths = expand_inputs(inputs)
    if one_capture:
        paths = [capture_order(paths, errors, stats)]
    else:
        paths = [[p] for p in paths]
    for group in paths:
        dec = new_decoder()
        for index, path in enumerate(group):
            name = names.get(path, path) if names else path
            cut = dec.stats.get("truncated_records", 0)
            try:
                with open_capture(path) as (f, info):
                    yield from dec.decode(f, name, info, index)
                stats.count("files")
            except (CaptureFormatError, OSError, EOFError) as exc:
                stats.count("bad_files")
                if errors is not None:
                    errors.append((path, str(exc)))
                continue
            if errors is not None and dec.stats.get("truncated_records", 0) > cut:
                errors.append((path, TRUNCATED))
        yield from dec.finish()
        stats.merge(dec.stats)


def decode_file(path: str, ports=None, stats: Stats | None = None, name: str | None = None,
                **options) -> Iterator[dict]:
    """Rows of one capture file, in the order frames complete.  A file that turns out broken
    part-way still gives the rows of what came before, then raises."""
    stats = stats if stats is not None else Stats()
    dec = RowDecoder(ports=ports, **options)
    failed = None
    try:
        with open_capture(path) as (f, info):
            yield from dec.decode(f, name or path, info)
    except (CaptureFormatError, OSError, EOFError) as exc:
        failed = exc
    yield from dec.finish()
    stats.merge(dec.stats)
    if failed is not None:
        raise failed
    stats.count("files")


def decode_paths(inputs, ports=None, stats: Stats | None = None, errors: list | None = None,
                 one_capture: bool = False, **options) -> Iterator[dict]:
    """Rows of every capture among ``inputs`` (the reference decoder; see
    :func:`decode_inputs`)."""
    return decode_inputs(inputs, lambda: RowDecoder(ports=ports, **options), stats, errors,
                         one_capture)
