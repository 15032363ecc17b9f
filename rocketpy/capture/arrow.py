"""Rows to Apache Arrow: the output schema as an Arrow schema, record batches (from the reference
rows and from the compiled core's column buffers), the CLI's Parquet writer.

Layer: ``rocketpy.capture`` output helper; needs ``pyarrow`` (the ``spark`` extra), imported by
the parts that are asked for Arrow (:mod:`rocketpy.capture.engine`), the CLI's Arrow formats and
the Spark job's executors (``mapInArrow``); ``pyarrow.parquet`` only by :func:`parquet_writer`.
The Arrow types follow :data:`rocketpy.capture.schema.SCHEMA` one to one, so the in-process
Parquet file and the Spark job's Parquet output have the same schema.
"""
from __future__ import annotations

import pyarrow as pa

from .schema import SCHEMA

__all__ = ["ARROW_SCHEMA", "rows_to_batch", "columns_to_batch", "string_array",
           "parquet_writer", "arrow_type", "ROW_GROUP_ROWS"]


def arrow_type(ddl: str) -> pa.DataType:
    return {
        "string": pa.string(), "double": pa.float64(), "bigint": pa.int64(),
        "int": pa.int32(), "boolean": pa.bool_(),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }[ddl]


ARROW_SCHEMA = pa.schema([pa.field(name, arrow_type(t)) for name, t in SCHEMA])
_MAP_COLUMNS = [name for name, t in SCHEMA if t.startswith("map<")]

#: rows per Parquet row group the CLI writes: the decoder's batches are 16Ki rows, and a row
#: group per batch cost 12% more CPU (pages, statistics and footer entries per group and column)
ROW_GROUP_ROWS = 1 << 17
#: columns whose values are all but unique per frame: a dictionary only costs time (ts, ts_ns:
#: 50 ms each per 1.85M frames) before the writer falls back to plain values
_UNIQUE_COLUMNS = {"ts", "ts_ns", "stream_offset", "opaque", "latency_ms"}


def _leaves(field: pa.Field) -> list[str]:
    """The Parquet column paths of a field (a map's keys and values are columns of their own)."""
    if pa.types.is_map(field.type):
        return [f"{field.name}.key_value.key", f"{field.name}.key_value.value"]
    return [field.name]


def parquet_writer(where, schema: pa.Schema = ARROW_SCHEMA) -> "pq.ParquetWriter":
    """A Parquet writer for frames (snappy, the default): a dictionary for the columns whose
    values repeat, and min/max statistics where a reader can skip row groups with them: the
    numbers (rows are in capture order, so ``ts`` ranges prune), ``file`` (files are read one
    after the other) and ``error`` (its null count skips the row groups without one).  Other
    strings are no narrower per row group than per file; their statistics cost 0.1 s of CPU per
    1.85M frames and pruned nothing.  (The Spark job writes its Parquet with Spark's own writer
    and settings; the rows and schema are the same.)"""
    import pyarrow.parquet as pq
    fields = list(schema)
    dictionary = [p for f in fields if f.name not in _UNIQUE_COLUMNS for p in _leaves(f)]
    statistics = [f.name for f in fields
                  if f.name in ("file", "error") or pa.types.is_primitive(f.type)]
    return pq.ParquetWriter(where, schema, use_dictionary=dictionary,
                            write_statistics=statistics)


def rows_to_batch(rows: list[dict]) -> pa.RecordBatch:
    cols = []
    for name, _t in SCHEMA:
        values = [r[name] for r in rows]
        if name in _MAP_COLUMNS:
            values = [None if v is None else list(v.items()) for v in values]
        cols.append(values)
    try:
        arrays = [pa.array(v, type=f.type) for v, f in zip(cols, ARROW_SCHEMA)]
    except UnicodeEncodeError:
        arrays = [pa.array(_utf8(v), type=f.type) for v, f in zip(cols, ARROW_SCHEMA)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def string_array(validity, offsets, chars, n: int, nulls: int = -1) -> pa.Array:
    """A string array around a validity bitmap (or None), int32 offsets and UTF-8 bytes."""
    return pa.Array.from_buffers(pa.string(), n, [validity and pa.py_buffer(validity),
                                                  pa.py_buffer(offsets), pa.py_buffer(chars)],
                                 null_count=nulls)


def columns_to_batch(n: int, cols) -> pa.RecordBatch:
    """A record batch around the compiled decoder's column buffers (no copy): per column
    ``(validity, values, None, nulls)``, ``(validity, offsets, chars, nulls)`` for strings, and
    ``(validity, offsets, key offsets, key chars, value offsets, value chars, entries)`` for
    the map, in :data:`ARROW_SCHEMA`'s order (the order the core was configured with)."""
    arrays = []
    for field, col in zip(ARROW_SCHEMA, cols):
        t = field.type
        if pa.types.is_map(t):
            validity, offsets, key_off, key_chars, val_off, val_chars, entries = col
            entries_arr = pa.StructArray.from_arrays(
                [string_array(None, key_off, key_chars, entries, 0),
                 string_array(None, val_off, val_chars, entries, 0)],
                fields=[t.key_field, t.item_field])
            arrays.append(pa.Array.from_buffers(
                t, n, [validity and pa.py_buffer(validity), pa.py_buffer(offsets)],
                children=[entries_arr]))
        elif pa.types.is_string(t):
            validity, offsets, chars, nulls = col
            arrays.append(string_array(validity, offsets, chars, n, nulls))
        else:
            validity, data, _, nulls = col
            arrays.append(pa.Array.from_buffers(t, n, [validity and pa.py_buffer(validity),
                                                       pa.py_buffer(data)], null_count=nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _utf8(value):
    """``value`` with every string made encodable: a lone surrogate (a header's ``"\\ud800"``)
    becomes '?', as Java's ``String.getBytes(UTF_8)`` writes it."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, (list, tuple)):
        return type(value)(_utf8(v) for v in value)
    return value
