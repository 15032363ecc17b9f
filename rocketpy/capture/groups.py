"""Group-by on Arrow columns with pyarrow's hash kernels and numpy, for the summary and the
CLI's rate plot.

Layer: ``rocketpy.capture`` helper (``pyarrow``, ``numpy``).  ``Table.group_by`` runs on Acero,
and importing ``pyarrow.acero`` imports ``pyarrow.dataset`` and pandas: 0.17 s of the CLI's
0.45 s start.  Here ``dictionary_encode`` numbers each column's distinct values (null is a
value too), the numbers combine into one group number per row, and ``numpy.bincount`` counts
and sums per group; no Python object per row.

Arrays cross between pyarrow and numpy through their buffers: ``Array.to_numpy``,
``pa.array`` and ``pa.scalar`` import pandas on first use when it is installed (it is, with
the spark extra), for a conversion these plain numbers do not need.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["group_ids", "group_counts", "to_numpy", "from_numpy"]


def to_numpy(values, dtype, null=0) -> np.ndarray:
    """A fixed-width Arrow array or chunked array of ``dtype`` values as one numpy array (no copy
    for one chunk without nulls), nulls as ``null``."""
    dtype = np.dtype(dtype)
    parts = []
    for chunk in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        if not len(chunk):
            continue
        validity, data = chunk.buffers()[:2]
        part = np.frombuffer(data, dtype, len(chunk), chunk.offset * dtype.itemsize)
        if chunk.null_count:
            bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
            part = np.where(bits[chunk.offset:chunk.offset + len(chunk)].astype(bool), part, null)
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def from_numpy(values: np.ndarray) -> pa.Array:
    """A numeric numpy array as an Arrow array (no copy)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def _encode(values) -> tuple:
    """``(distinct values, each row's index into them as int64)``, in order of first sight."""
    if isinstance(values, pa.ChunkedArray) and not values.num_chunks:
        values = pa.nulls(0, values.type)
    enc = pc.dictionary_encode(values, null_encoding="encode")
    if isinstance(enc, pa.ChunkedArray):      # one dictionary for all chunks
        return enc.chunk(0).dictionary, np.concatenate(
            [to_numpy(c.indices, np.int32) for c in enc.chunks]).astype(np.int64)
    return enc.dictionary, to_numpy(enc.indices, np.int32).astype(np.int64)


def _renumber(ids, parts) -> tuple:
    """``ids`` (mixed-radix numbers over ``parts``, ``(keys, width)`` each, the last one the
    lowest digit) renumbered 0..G-1 in order of first sight, and the G groups' keys."""
    combined, ids = _encode(from_numpy(ids))
    digits = to_numpy(combined, np.int64)
    keys = []
    for part_keys, width in reversed(parts):
        digits, digit = np.divmod(digits, width)
        keys = [k.take(from_numpy(digit)) for k in part_keys] + keys
    return ids, keys


def group_ids(columns) -> tuple:
    """``(ids, keys)`` for the distinct combinations of the columns' values (equal length Arrow
    arrays or chunked arrays): ``ids`` numbers each row's group 0..G-1 (numpy), ``keys`` holds
    one Arrow array of G values per column, the groups' values in that column."""
    ids, span, parts = 0, 1, []
    for column in columns:
        dictionary, idx = _encode(column)
        width = len(dictionary)
        if span * width >= 1 << 63:       # the number would not fit an int64: renumber first
            ids, keys = _renumber(ids, parts)
            span, parts = len(keys[0]), [(keys, len(keys[0]))]
        ids = ids * width + idx
        span *= width
        parts.append(([dictionary], width))
    if len(parts) == 1:
        return ids, parts[0][0]
    return _renumber(ids, parts)


def group_counts(columns) -> list[tuple]:
    """``(*values, rows)`` for each distinct combination of the columns' values (what a
    group-by with ``count_all`` gives; nulls are a group too)."""
    if not len(columns[0]):
        return []
    ids, keys = group_ids(columns)
    counts = np.bincount(ids, minlength=len(keys[0]))
    return list(zip(*(k.to_pylist() for k in keys), counts.tolist()))
