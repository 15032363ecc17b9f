"""The decode engines: capture bytes to batches of the output schema.

Layer: ``rocketpy.capture``, used by the CLI and the Spark job.  Two engines with one interface:

* :class:`NativeBatchDecoder`: the compiled core ``rocketpy.capture._native`` (C, built by
  ``pip install .``): record walk, link/IP/TCP, reassembly, framing, header decoding, pairing and
  the columns, with no Python object per packet or frame.  Headers it does not read itself and
  body summaries go through the codec (:func:`_header_fallback`, ``rows._summary``).
* :class:`PyBatchDecoder`: the pure-Python reference (:class:`~rocketpy.capture.decoder.CaptureDecoder`
  and :func:`~rocketpy.capture.arrow.rows_to_batch`), which the tests prove the compiled one
  equal to, column by column.

Each batch comes out as a *part* (:class:`NativePart`, :class:`RowsPart`, :class:`ArrowPart`):
Arrow only when asked for (``to_arrow``, which imports pyarrow), JSON Lines and rows straight
from the compiled core's buffers.  So a format that writes no Arrow starts without pyarrow and
numpy, and the CLI's writer thread imports them while the core is already decoding; the engines'
``decode``/``finish`` hand over Arrow record batches unless made with ``arrow=False``.

:data:`BatchDecoder` is the compiled one when it was built; otherwise the reference, and
importing this module says so once (:class:`NativeDecoderMissing`).
``ROCKETPY_CAPTURE_ENGINE=python`` picks the reference anyway (benchmarks, checks).
"""
from __future__ import annotations

import json
import os
import warnings
from typing import BinaryIO, Iterator

from rocketpy.remoting import codes

from . import schema
from .readers import CaptureFormatError, CaptureInfo
from .source import RowDecoder, decode_inputs
from .stats import Stats

__all__ = ["BatchDecoder", "PyBatchDecoder", "NativeBatchDecoder", "NATIVE", "ENGINES", "SCANNERS",
           "decode_batches", "decode_parts", "ArrowPart", "RowsPart", "NativePart",
           "NativeDecoderMissing", "BATCH_ROWS", "batch_jsonl", "ext_json_column"]

#: rows per record batch
BATCH_ROWS = 16384
#: bytes handed to the compiled decoder per call
BLOCK = 4 << 20


class NativeDecoderMissing(RuntimeWarning):
    """The compiled decoder is not built: the pure-Python one is used (same rows, slower)."""


# ---- parts: one batch of rows, as Arrow only when asked ------------------------------------

class ArrowPart:
    """A record batch of the output schema; ``nbytes``: what it holds in memory."""

    __slots__ = ("num_rows", "nbytes", "_batch")

    def __init__(self, batch):
        self._batch = batch
        self.num_rows = batch.num_rows
        self.nbytes = batch.nbytes

    def to_arrow(self):
        return self._batch

    def jsonl(self) -> bytes:
        """JSON Lines of the rows (the CLI's ``--format json``)."""
        return batch_jsonl(self.to_arrow())

    def rows(self) -> list[dict]:
        return self.to_arrow().to_pylist()


class RowsPart(ArrowPart):
    """The reference decoder's row dicts, made a record batch when first asked (the batch is
    what every writer reads: it makes each string encodable, as the compiled core does)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[dict]):
        self._rows, self._batch, self.num_rows = rows, None, len(rows)
        self.nbytes = sum(r["frame_len"] for r in rows)     # (at most: bodies are not kept)

    def to_arrow(self):
        if self._batch is None:
            from .arrow import rows_to_batch
            self._batch, self._rows = rows_to_batch(self._rows), None
        return self._batch


class NativePart(ArrowPart):
    """The compiled decoder's columns of one batch: its own buffers (no copy); JSON Lines and
    rows are read from them without pyarrow."""

    __slots__ = ("_columns",)

    def __init__(self, taken):
        self.num_rows, self._columns = taken
        self._batch = None
        self.nbytes = sum(memoryview(b).nbytes for col in self._columns for b in col[:-1]
                          if b is not None)

    def to_arrow(self):
        if self._batch is None:
            from .arrow import columns_to_batch
            self._batch = columns_to_batch(self.num_rows, self._columns)
        return self._batch

    def jsonl(self) -> bytes:
        # the writer's layout: each column's buffers, then its first row (0: not a slice)
        return NATIVE.jsonl(self.num_rows, [col[:-1] + (0,) for col in self._columns])

    def tally(self, tally) -> None:
        """Count the batch into a ``_native.Tally`` (the summary)."""
        tally.add(self.num_rows, self._columns)

    def rows(self) -> list[dict]:
        """The rows as JSON reads them back (``ext_fields`` a dict), without pyarrow."""
        return [json.loads(line) for line in self.jsonl().splitlines()]


def _as_batches(parts: Iterator) -> Iterator:
    """The record batches of ``parts``; returns what the parts' generator returned."""
    while True:
        try:
            part = next(parts)
        except StopIteration as done:
            return done.value
        yield part.to_arrow()


class PyBatchDecoder(RowDecoder):
    """The reference engine: :class:`CaptureDecoder` rows, converted to batches."""

    name = "python"

    def __init__(self, ports=None, plan=None, batch_rows: int = BATCH_ROWS, arrow: bool = True,
                 **options):
        super().__init__(ports=ports, plan=plan, **options)
        self.batch_rows = batch_rows
        self.arrow = arrow
        self._rows: list = []      # not a batch yet (kept for finish() if a file breaks)

    def decode(self, f: BinaryIO, name: str | None, info: CaptureInfo, index: int = 0,
               start: int | None = None, end: int | None = None,
               readahead: int = 0) -> Iterator:
        """Batches of the packets of ``f`` (positioned at ``start``, a record boundary, or at
        the first record); returns whether it read to the file's end.  With ``end`` (range
        mode), the records from ``end`` on are read only as far as the unfinished connections
        need, and at most ``readahead`` bytes."""
        parts = self._parts(f, name, info, index, start, end, readahead)
        return (yield from (_as_batches(parts) if self.arrow else parts))

    def _parts(self, f, name, info, index, start, end, readahead):
        rows = self._rows          # (kept for finish() when the file breaks part-way)
        rows_of = super().decode(f, name, info, index, start, end, readahead)
        while True:
            try:
                rows.append(next(rows_of))
            except StopIteration as done:
                eof = done.value
                break
            if len(rows) >= self.batch_rows:
                yield RowsPart(rows[:])
                rows.clear()
        if rows:
            yield RowsPart(rows[:])
            rows.clear()
        return eof

    def finish(self) -> Iterator:
        out = self._rows + list(super().finish())
        self._rows.clear()
        for i in range(0, len(out), self.batch_rows):
            part = RowsPart(out[i:i + self.batch_rows])
            yield part.to_arrow() if self.arrow else part


# ---- the compiled core, configured from Python ----------------------------------------------

def _header_fallback(serialize_type: int, header: bytes, verify: bool):
    """The codec's reading of a header the compiled core leaves to it: ``(True, columns)`` or
    ``(False, the row's error text)``.  ``verify``: only whether it decodes (hunting for a frame
    start, as ``framing.plausible_frame_start``).  (The codec is imported at the first such
    header, not at start-up.)"""
    from rocketpy.remoting.errors import RemotingCodecError
    from rocketpy.remoting.frame import decode_header

    from .rows import header_columns
    try:
        cmd = decode_header(serialize_type, header)
    except (RemotingCodecError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    except (TypeError, OverflowError):
        if verify:
            return False, ""
        raise
    c = header_columns(cmd)
    ext = cmd.ext_fields
    return True, (c["code"], c["flag"], c["opaque"], c["language"], c["version"], c["remark"],
                  None if ext is None else list(ext.items()))


def _summary(broker, cluster, registration, body):
    """``rows._summary`` (the codec reads the body), imported at the first body to read."""
    from .rows import _summary as summary
    return summary(broker, cluster, registration, body)


def _summary_markers():
    """``rows.SUMMARY_MARKERS`` (the codec's wire names), asked for at the first body."""
    from .rows import SUMMARY_MARKERS
    return SUMMARY_MARKERS


def _native_module():
    if os.environ.get("ROCKETPY_CAPTURE_ENGINE", "").lower() == "python":
        return None
    try:
        from . import _native
        # (rocketpy.remoting.kernel.built_extension's test, without loading the header kernel)
        if getattr(_native, "__file__", None) is None:
            raise ImportError("only its C source directory is there")
    except ImportError as exc:
        warnings.warn(f"the compiled capture decoder is not built ({exc}); the pure-Python "
                      "decoder runs instead: the same rows, 15-30x slower", NativeDecoderMissing,
                      stacklevel=3)
        return None
    return configure_native(_native)


def configure_native(native):
    """Hand the compiled core (this package's, or a test's counting build of it) the schema,
    tables and callbacks it reads rows with; ``native``."""
    native.configure(
        columns=list(schema.SCHEMA), request_names=schema.REQUEST_NAMES,
        response_names=schema.RESPONSE_NAMES, version_names=schema.VERSION_NAMES,
        language_names=schema.LANGUAGE_NAMES, serialize_names=schema.SERIALIZE_NAMES,
        language_by_name={name: int(m) for name, m in codes.LanguageCode.__members__.items()},
        flag_response=schema.FLAG_RESPONSE, flag_oneway=schema.FLAG_ONEWAY,
        registration=schema.REGISTRATION, header_fallback=_header_fallback, summary=_summary,
        summary_markers=_summary_markers, capture_format_error=CaptureFormatError)
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


class NativeBatchDecoder:
    """The compiled engine (same interface as :class:`PyBatchDecoder`)."""

    name = "native"

    def __init__(self, ports=None, plan=None, batch_rows: int = BATCH_ROWS, arrow: bool = True,
                 **options):
        self._d = NATIVE.Decoder(ports=ports, batch_rows=batch_rows, **options)
        self.arrow = arrow
        if plan is not None:
            self._d.set_plan(plan.boundaries, plan.live, plan.limits)

    def _batches(self, flush: bool = False) -> Iterator:
        for taken in self._d.take(flush):
            part = NativePart(taken)
            yield part.to_arrow() if self.arrow else part

    def decode(self, f: BinaryIO, name: str | None, info: CaptureInfo, index: int = 0,
               start: int | None = None, end: int | None = None,
               readahead: int = 0) -> Iterator:
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

    def finish(self) -> Iterator:
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


def python_scan_range(*args, **kwargs) -> dict:
    """:func:`rocketpy.capture.plan.scan_range` (the planner's module, imported when used)."""
    from .plan import scan_range
    return scan_range(*args, **kwargs)


def decode_batches(inputs, ports=None, stats: Stats | None = None, errors: list | None = None,
                   one_capture: bool = False, engine=None, names=None,
                   **options) -> Iterator:
    """Record batches of every capture among ``inputs`` (see
    :func:`~rocketpy.capture.source.decode_inputs`), by ``engine`` (default: the compiled one
    when it is built)."""
    cls = engine or BatchDecoder
    return decode_inputs(inputs, lambda: cls(ports=ports, **options), stats, errors,
                         one_capture, names)


def decode_parts(inputs, **options) -> Iterator:
    """:func:`decode_batches` as parts (no Arrow until a consumer asks for it)."""
    return decode_batches(inputs, arrow=False, **options)


ENGINES = {"python": PyBatchDecoder, "native": NativeBatchDecoder}
SCANNERS = {"python": python_scan_range, "native": native_scan_range}
BatchDecoder = NativeBatchDecoder if NATIVE is not None else PyBatchDecoder


# ---- JSON text from batches (the CLI's --format json, ext_fields in CSV) -----------------------

def _buffers(arr):
    """A column's buffers in the compiled writer's layout; None for a map whose entries are a
    slice of another array (the writer reads them from 0)."""
    import pyarrow as pa
    bufs = arr.buffers()
    if pa.types.is_map(arr.type):
        entries = arr.values
        if arr.offset or entries.offset or any(c.offset for c in entries.flatten()):
            return None
        return (bufs[0], bufs[1], bufs[4], bufs[5], bufs[7], bufs[8], 0)
    return (bufs[0], bufs[1], bufs[2] if len(bufs) > 2 else None, arr.offset)


def batch_jsonl(batch) -> bytes:
    """JSON Lines of a batch, as ``json.dumps(row, ensure_ascii=False)`` writes each row."""
    if NATIVE is not None:
        cols = [_buffers(c) for c in batch.columns]
        if None not in cols:
            return NATIVE.jsonl(batch.num_rows, cols)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n"
                   for row in _json_rows(batch)).encode("utf-8")


def _json_rows(batch):
    ext = batch.schema.get_field_index("ext_fields")
    for row in batch.to_pylist():
        value = row["ext_fields"] if ext >= 0 else None
        if value is not None:
            row["ext_fields"] = dict(value)
        yield row


def ext_json_column(arr):
    """The ext_fields map column as a column of JSON text (for CSV)."""
    import pyarrow as pa

    from .arrow import string_array
    spec = _buffers(arr) if NATIVE is not None else None
    if spec is not None:
        validity, offsets, chars = NATIVE.ext_json(len(arr), spec)
        return string_array(validity, offsets, chars, len(arr))
    return pa.array([None if v is None else json.dumps(dict(v), ensure_ascii=False)
                     for v in arr.to_pylist()], pa.string())
