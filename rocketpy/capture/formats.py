"""The output formats: one table, read by both front ends.

Layer: ``rocketpy.capture`` (pure stdlib at import; each writer imports what it writes with).
``rocketpy-capture`` (:mod:`rocketpy.capture.cli`) offers every format of :data:`FORMATS` and
writes with its ``writer``; the Spark job (``tools/capture_job.py``) offers those marked
``spark`` and writes them with its own Spark writer, which it must have for each (it refuses to
start otherwise).  A new format is one entry here plus its Spark writer there.

A writer takes the engine's parts (:mod:`rocketpy.capture.engine`): ``prepare()`` imports what it
needs (the CLI calls it in its writer thread while the compiled core is already decoding),
``write(part)`` writes a batch, ``close()`` finishes the output.  Its OS errors come out as
:class:`OutputError` (a closed pipe stays BrokenPipeError).
"""
from __future__ import annotations

import contextlib
import sys
import time
from typing import NamedTuple

from .schema import COLUMNS

__all__ = ["Format", "FORMATS", "OutputError", "table_line"]


class OutputError(Exception):
    """Writing the frames failed (a read error of a capture is reported per file instead)."""


@contextlib.contextmanager
def output_errors():
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from exc


class _StreamWriter:
    """A writer of one byte stream: ``output`` (a path), or standard output when None."""

    def __init__(self, output: str | None):
        self.output = output
        self.out = None

    def prepare(self) -> None:
        """Import what writing needs (nothing, for a plain stream)."""

    def stream(self):
        if self.out is None:
            self.out = open(self.output, "wb") if self.output else sys.stdout.buffer
        return self.out

    def write(self, part) -> None:
        with output_errors():
            out = self.stream()
            self._write(out, part)
            out.flush()

    def close(self) -> None:
        with output_errors():
            self._close()
            if self.out is not None and self.output:
                self.out.close()

    def _close(self) -> None:
        pass


def table_line(r: dict) -> str:
    """One frame as a readable line."""
    kind = "RSP" if r["is_response"] else ("ONE" if r["is_oneway"] else "REQ")
    name = r["code_name"] or (str(r["code"]) if r["code"] is not None else "?")
    if r["is_response"] and r["request_code"] is not None:
        name += f" <- {r['request_code_name'] or r['request_code']}"
    extra = []
    if r["latency_ms"] is not None:
        extra.append(f"{r['latency_ms']:.3f} ms")
    if r["remark"]:
        extra.append(f"remark={r['remark'][:60]!r}")
    if r["body_summary"]:
        extra.append(r["body_summary"])
    if r["error"]:
        extra.append(f"ERROR {r['error']}")
    ts = time.strftime("%H:%M:%S", time.gmtime(r["ts"])) + f".{int(r['ts'] * 1e6) % 1000000:06d}"
    return (f"{ts} {r['src']:>21} > {r['dst']:<21} {kind} {r['serialize_type'] or '-':<8} "
            f"op={r['opaque'] if r['opaque'] is not None else '-':<6} {name} "
            + " ".join(extra)).rstrip()


class TableWriter(_StreamWriter):
    def _write(self, out, part) -> None:
        out.write("".join(table_line(row) + "\n" for row in part.rows()).encode("utf-8"))


class JsonWriter(_StreamWriter):
    def _write(self, out, part) -> None:
        out.write(part.jsonl())


class CsvWriter(_StreamWriter):
    """RFC 4180 (fields quoted where needed), ``ext_fields`` as its JSON text."""

    def __init__(self, output):
        super().__init__(output)
        self.csv = None

    def prepare(self) -> None:
        import pyarrow.csv  # noqa: F401

        from . import arrow  # noqa: F401

    def _write(self, out, part) -> None:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        from .engine import ext_json_column
        batch = part.to_arrow()
        i = batch.schema.get_field_index("ext_fields")
        batch = batch.set_column(i, pa.field("ext_fields", pa.string()),
                                 ext_json_column(batch.column(i)))
        if self.csv is None:
            self.csv = pacsv.CSVWriter(out, batch.schema, write_options=pacsv.WriteOptions(
                quoting_style="needed"))
        self.csv.write_batch(batch)

    def _close(self) -> None:
        if self.csv is None:              # no frame at all: the header line still
            self.stream().write((",".join(f'"{c}"' for c in COLUMNS) + "\n").encode())
        else:
            self.csv.close()


class ParquetWriter:
    """A row group per :data:`~rocketpy.capture.arrow.ROW_GROUP_ROWS` rows, not per batch."""

    def __init__(self, output: str):
        self.output = output
        self.parquet = None
        self.row_group: list = []
        self.row_group_rows = 0

    def prepare(self) -> None:
        import pyarrow.parquet  # noqa: F401

        from . import arrow  # noqa: F401

    def write(self, part) -> None:
        from .arrow import ROW_GROUP_ROWS, parquet_writer
        with output_errors():
            batch = part.to_arrow()
            if self.parquet is None:            # opened at once: a bad path fails at once
                self.parquet = parquet_writer(self.output, batch.schema)
            self.row_group.append(batch)
            self.row_group_rows += batch.num_rows
            if self.row_group_rows >= ROW_GROUP_ROWS:
                self._write_row_group()

    def _write_row_group(self) -> None:
        import pyarrow as pa
        if self.row_group:
            self.parquet.write_table(pa.Table.from_batches(self.row_group))
        self.row_group, self.row_group_rows = [], 0

    def close(self) -> None:
        from .arrow import parquet_writer
        with output_errors():
            if self.parquet is None:            # no frame at all: still a valid, empty file
                self.parquet = parquet_writer(self.output)
            self._write_row_group()
            self.parquet.close()


class Format(NamedTuple):
    """An output format.  ``stream``: one byte stream, which may be standard output (else it
    needs ``--output``); ``data``: machine-readable, so on standard output the summary goes to
    stderr and is off by default; ``needs``: the packages its writer imports; ``spark``: the
    Spark job writes it too."""
    name: str
    help: str
    writer: type
    stream: bool = True
    data: bool = True
    needs: tuple = ()
    spark: bool = True


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("table", "readable lines", TableWriter, data=False, spark=False),
    Format("json", "one object per frame (JSON Lines)", JsonWriter),
    Format("csv", "RFC 4180, ext_fields as JSON text", CsvWriter, needs=("pyarrow",)),
    Format("parquet", "Apache Parquet", ParquetWriter, stream=False, needs=("pyarrow",)),
)}
