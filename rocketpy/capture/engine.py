"""The decode engines: capture bytes to Arrow record batches of the output schema.

Layer: ``rocketpy.capture`` (needs ``pyarrow``), used by the CLI and the Spark job.  Two engines
with one interface:

* :class:`NativeBatchDecoder`: the compiled core ``rocketpy.capture._native`` (C, built by
  ``pip install .``): record walk, link/IP/TCP, reassembly, framing, header decoding, pairing and
  the columns, with no Python object per packet or frame.  Headers it does not read itself and
  body summaries go through the codec (:func:`_header_fallback`, ``rows._summary``).
* :class:`PyBatchDecoder`: the pure-Python reference (:class:`~rocketpy.capture.decoder.CaptureDecoder`
  and :func:`~rocketpy.capture.arrow.rows_to_batch`), which the tests prove the compiled one
  equal to, column by column.

:data:`BatchDecoder` is the compiled one when it was built; otherwise the reference, and
importing this module says so once (:class:`NativeDecoderMissing`).
``ROCKETPY_CAPTURE_ENGINE=python`` picks the reference anyway (benchmarks, checks).
"""
from __future__ import annotations

import os
import warnings
from typing import BinaryIO, Iterator

import pyarrow as pa

from rocketpy.remoting import codes
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.frame import decode_header
from rocketpy.remoting.kernel import built_extension

from . import rows as _rows
from .arrow import ARROW_SCHEMA, rows_to_batch
from .decoder import Stats
from .plan import scan_range
from .readers import CaptureFormatError, CaptureInfo
from .rows import COLUMNS
from .source import RowDecoder, decode_inputs

__all__ = ["BatchDecoder", "PyBatchDecoder", "NativeBatchDecoder", "NATIVE", "ENGINES", "SCANNERS",
           "decode_batches",
           "NativeDecoderMissing", "BATCH_ROWS", "batch_jsonl", "ext_json_column"]

#: rows per record batch
BATCH_ROWS = 16384
#: bytes handed to the compiled decoder per call
BLOCK = 4 << 20


class NativeDecoderMissing(RuntimeWarning):
    """The compiled decoder is not built: the pure-Python one is used (same rows, slower)."""


class PyBatchDecoder(RowDecoder):
    """The reference engine: :class:`CaptureDecoder` rows, converted to batches."""

    name = "python"

    def __init__(self, ports=None, plan=None, batch_rows: int = BATCH_ROWS, **options):
        super().__init__(ports=ports, plan=plan, **options)
        self.batch_rows = batch_rows
        self._rows: list = []      # not a batch yet (kept for finish() if a file breaks)

    def decode(self, f: BinaryIO, name: str | None, info: CaptureInfo, index: int = 0,
               start: int | None = None, end: int | None = None,
               readahead: int = 0) -> Iterator[pa.RecordBatch]:
        """Batches of the packets of ``f`` (positioned at ``start``, a record boundary, or at
        the first record); returns whether it read to the file's end.  With ``end`` (range
        mode), the records from ``end`` on are read only as far as the unfinished connections
        need, and at most ``readahead`` bytes."""
        rows = self._rows          # (kept for finish() when the file breaks part-way)
        rows_of = super().decode(f, name, info, index, start, end, readahead)
        while True:
            try:
                rows.append(next(rows_of))
            except StopIteration as done:
                eof = done.value
                break
            if len(rows) >= self.batch_rows:
                yield rows_to_batch(rows)
                rows.clear()
        if rows:
            yield rows_to_batch(rows)
            rows.clear()
        return eof

    def finish(self) -> Iterator[pa.RecordBatch]:
        out = self._rows + list(super().finish())
        self._rows.clear()
        for i in range(0, len(out), self.batch_rows):
            yield rows_to_batch(out[i:i + self.batch_rows])


def _header_fallback(serialize_type: int, header: bytes, verify: bool):
    """The codec's reading of a header the compiled core leaves to it: ``(True, columns)`` or
    ``(False, the row's error text)``.  ``verify``: only whether it decodes (hunting for a frame
    start, as ``framing.plausible_frame_start``)."""
    try:
        cmd = decode_header(serialize_type, header)
    except (RemotingCodecError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    except (TypeError, OverflowError):
        if verify:
            return False, ""
        raise
    c = _rows._header_columns(cmd)
    ext = cmd.ext_fields
    return True, (c["code"], c["flag"], c["opaque"], c["language"], c["version"], c["remark"],
                  None if ext is None else list(ext.items()))


def _native_module():
    if os.environ.get("ROCKETPY_CAPTURE_ENGINE", "").lower() == "python":
        return None
    try:
        from . import _native
        if built_extension(_native) is None:
            raise ImportError("only its C source directory is there")
    except ImportError as exc:
        warnings.warn(f"the compiled capture decoder is not built ({exc}); the pure-Python "
                      "decoder runs instead: the same rows, 15-30x slower", NativeDecoderMissing,
                      stacklevel=3)
        return None
    return configure_native(_native)


def configure_native(native):
    """Hand the compiled core (this package's, or a test's counting build of it) the tables and
    callbacks it reads rows with; ``native``."""
    native.configure(
        columns=list(COLUMNS), request_names=_rows._REQUEST_NAMES,
        response_names=_rows._RESPONSE_NAMES, version_names=_rows._VERSION_NAMES,
        language_names=_rows._LANGUAGE_NAMES,
        language_by_name={name: int(m) for name, m in codes.LanguageCode.__members__.items()},
        header_fallback=_header_fallback, summary=_rows._summary,
        capture_format_error=CaptureFormatError)
    return native


NATIVE = _native_module()


def _blocks(f: BinaryIO) -> Iterator[memoryview]:
    """The stream's bytes, :data:`BLOCK` at a time, read into one reused buffer (a fresh block
    per read costs a page fault per 4 KiB).  Each block is valid until the next is read: the
    compiled decoder copies whatever it keeps."""
    buf = memoryview(bytearray(BLOCK))
    while True:
        n = f.readinto(buf)
        if not n:
            return
        yield buf[:n]


def _info_tuple(info: CaptureInfo) -> tuple:
    if info.kind == "pcap":
        return ("pcap", info.byte_order, info.linktype, info.snaplen, info.ticks_per_sec,
                info.extra)
    return ("pcapng", info.byte_order, [(i.linktype, i.snaplen, i.ticks_per_sec, i.ts_offset_s)
                                        for i in info.interfaces])


def _string(validity, offsets, chars, n: int, nulls: int = -1):
    return pa.Array.from_buffers(pa.string(), n, [validity and pa.py_buffer(validity),
                                                  pa.py_buffer(offsets), pa.py_buffer(chars)],
                                 null_count=nulls)


def _to_batch(taken) -> pa.RecordBatch:
    """A record batch around the compiled decoder's column buffers (no copy)."""
    n, cols = taken
    arrays = []
    for field, col in zip(ARROW_SCHEMA, cols):
        t = field.type
        if pa.types.is_map(t):
            validity, offsets, key_off, key_chars, val_off, val_chars, entries = col
            entries_arr = pa.StructArray.from_arrays(
                [_string(None, key_off, key_chars, entries, 0),
                 _string(None, val_off, val_chars, entries, 0)],
                fields=[t.key_field, t.item_field])
            arrays.append(pa.Array.from_buffers(
                t, n, [validity and pa.py_buffer(validity), pa.py_buffer(offsets)],
                children=[entries_arr]))
        elif pa.types.is_string(t):
            validity, offsets, chars, nulls = col
            arrays.append(_string(validity, offsets, chars, n, nulls))
        else:
            validity, data, _, nulls = col
            arrays.append(pa.Array.from_buffers(t, n, [validity and pa.py_buffer(validity),
                                                       pa.py_buffer(data)], null_count=nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class NativeBatchDecoder:
    """The compiled engine (same interface as :class:`PyBatchDecoder`)."""

    name = "native"

    def __init__(self, ports=None, plan=None, batch_rows: int = BATCH_ROWS, **options):
        self._d = NATIVE.Decoder(ports=ports, batch_rows=batch_rows, **options)
        if plan is not None:
            self._d.set_plan(plan.boundaries, plan.live, plan.limits)

    def _batches(self, flush: bool = False) -> Iterator[pa.RecordBatch]:
        for taken in self._d.take(flush):
            yield _to_batch(taken)

    def decode(self, f: BinaryIO, name: str | None, info: CaptureInfo, index: int = 0,
               start: int | None = None, end: int | None = None,
               readahead: int = 0) -> Iterator[pa.RecordBatch]:
        d = self._d
        d.begin_file(name, index, _info_tuple(info), info.data_offset if start is None else start,
                     -1 if end is None else end, readahead)
        eof = True
        for block in _blocks(f):
            more = d.feed(block)
            yield from self._batches()
            if not more:
                eof = False
                break
        d.end_file(eof)
        if end is not None and eof:
            d.end_range()
        yield from self._batches(flush=True)
        return eof

    def finish(self) -> Iterator[pa.RecordBatch]:
        self._d.finish()
        yield from self._batches(flush=True)

    @property
    def stats(self) -> Stats:
        return Stats(self._d.stats())

    @property
    def edges(self) -> dict:
        return self._d.edges

    @property
    def unsettled(self) -> int:
        return self._d.unsettled

    @property
    def table(self) -> dict:
        return self._d.table


def native_scan_range(f: BinaryIO, info: CaptureInfo, start: int | None, end: int, ports=None,
                      linger_ns: int = 2_000_000_000) -> dict:
    """:func:`rocketpy.capture.plan.scan_range` in the compiled core (same result)."""
    scanner = NATIVE.Scanner(_info_tuple(info), info.data_offset if start is None else start,
                             end, ports, linger_ns)
    error = None
    try:
        for block in _blocks(f):
            if not scanner.feed(block):
                break
    except CaptureFormatError as exc:
        error = str(exc)
    out = scanner.result()
    if error is not None:
        out["error"] = error
    return out


def decode_batches(inputs, ports=None, stats: Stats | None = None, errors: list | None = None,
                   one_capture: bool = False, engine=None, names=None,
                   **options) -> Iterator[pa.RecordBatch]:
    """Record batches of every capture among ``inputs`` (see
    :func:`~rocketpy.capture.source.decode_inputs`), by ``engine`` (default: the compiled one
    when it is built)."""
    cls = engine or BatchDecoder
    return decode_inputs(inputs, lambda: cls(ports=ports, **options), stats, errors,
                         one_capture, names)


ENGINES = {"python": PyBatchDecoder, "native": NativeBatchDecoder}
SCANNERS = {"python": scan_range, "native": native_scan_range}
BatchDecoder = NativeBatchDecoder if NATIVE is not None else PyBatchDecoder


# ---- JSON text from batches (the CLI's --format json, ext_fields in CSV) -----------------------

def _buffers(arr: pa.Array):
    """A column's buffers in the compiled writer's layout; None for a map whose entries are a
    slice of another array (the writer reads them from 0)."""
    bufs = arr.buffers()
    if pa.types.is_map(arr.type):
        entries = arr.values
        if arr.offset or entries.offset or any(c.offset for c in entries.flatten()):
            return None
        return (bufs[0], bufs[1], bufs[4], bufs[5], bufs[7], bufs[8], 0)
    return (bufs[0], bufs[1], bufs[2] if len(bufs) > 2 else None, arr.offset)


def batch_jsonl(batch: pa.RecordBatch) -> bytes:
    """JSON Lines of a batch, as ``json.dumps(row, ensure_ascii=False)`` writes each row."""
    if NATIVE is not None:
        cols = [_buffers(c) for c in batch.columns]
        if None not in cols:
            return NATIVE.jsonl(batch.num_rows, cols)
    import json
    return "".join(json.dumps(row, ensure_ascii=False) + "\n"
                   for row in _json_rows(batch)).encode("utf-8")


def _json_rows(batch: pa.RecordBatch):
    ext = batch.schema.get_field_index("ext_fields")
    for row in batch.to_pylist():
        value = row["ext_fields"] if ext >= 0 else None
        if value is not None:
            row["ext_fields"] = dict(value)
        yield row


def ext_json_column(arr: pa.Array) -> pa.Array:
    """The ext_fields map column as a column of JSON text (for CSV)."""
    spec = _buffers(arr) if NATIVE is not None else None
    if spec is not None:
        validity, offsets, chars = NATIVE.ext_json(len(arr), spec)
        return _string(validity, offsets, chars, len(arr))
    import json
    return pa.array([None if v is None else json.dumps(dict(v), ensure_ascii=False)
                     for v in arr.to_pylist()], pa.string())
