"""The capture summary (rocketpy.capture.summary.SummaryBuilder), its group-by
(rocketpy.capture.groups) and the compiled core's count of it (CompiledSummaryBuilder, the C
Tally) equal a straightforward pure-Python computation over the rows: on every genuine capture,
in chunks of any size, and on rows with decode errors, unmatched responses and undecoded
frames; and the CLI's path does not import pandas or Acero."""
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rocketpy.capture.arrow import rows_to_batch
from rocketpy.capture.cli import _count_rate
from rocketpy.capture.engine import NativePart, decode_batches, decode_parts
from rocketpy.capture.groups import from_numpy, group_counts, to_numpy
from rocketpy.capture.rows import COLUMNS
from rocketpy.capture.summary import NOT_ERRORS, CompiledSummaryBuilder, SummaryBuilder

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"


def nearest_rank(values, q):
    return values[max(0, math.ceil(q / 100.0 * len(values)) - 1)]


def expected_summary(rows, top=10):
    """The summary's definition, one row at a time."""
    out = {"frames": len(rows), "requests": Counter(), "oneway": Counter(),
           "responses": Counter(), "error_responses": Counter(), "unmatched_responses": 0,
           "decode_errors": Counter()}
    latency, talkers = {}, {}
    for r in rows:
        t = talkers.setdefault(r["src"], [0, 0])
        t[0] += 1
        t[1] += r["frame_len"] or 0
        if r["error"] is not None:
            out["decode_errors"][r["error"].split(":")[0]] += 1
        code = r["code"]
        if code is None:
            continue
        if not r["is_response"]:
            out["requests"][code] += 1
            out["oneway"][code] += bool(r["is_oneway"])
            continue
        out["responses"][code] += 1
        out["unmatched_responses"] += r["request_code"] is None
        if code not in NOT_ERRORS:
            out["error_responses"][f"{r['request_code']}:{code}"] += 1
        if r["latency_ms"] is not None:
            latency.setdefault(r["request_code"], []).append(r["latency_ms"])
    for key in ("requests", "oneway", "responses", "error_responses", "decode_errors"):
        out[key] = {k: v for k, v in out[key].items() if v}
    out["latency_ms"] = {code: {"n": len(v), "p50": nearest_rank(v, 50), "p99": nearest_rank(v, 99),
                                "max": v[-1]}
                         for code, v in ((c, sorted(v)) for c, v in latency.items())}
    out["top_talkers"] = [(src, n, b) for src, (n, b) in sorted(
        talkers.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:top]]
    ts = [r["ts"] for r in rows]
    out["first_ts"], out["last_ts"] = (min(ts), max(ts)) if ts else (None, None)
    out["unanswered_requests"], out["stats"] = {}, {}
    return out


def summary_of(batches, chunk_rows):
    sb = SummaryBuilder(chunk_rows=chunk_rows)
    for b in batches:
        sb.add_batch(b)
    return sb.result()


def edge_rows():
    """Rows the genuine captures lack: decode errors, undecoded frames, unmatched and error
    responses, a null frame length, equal talkers told apart by bytes and then address."""
    rows = []

    def row(**values):
        r = dict.fromkeys(COLUMNS)
        r.update({"ts": 1.0 + len(rows), "src": "10.0.0.9:1", "dst": "10.0.0.1:9876",
                  "frame_len": 10, "is_response": False, "is_oneway": False, **values})
        rows.append(r)
    row(error="HeaderDecodeError: bad JSON", frame_len=None)
    row(error="HeaderDecodeError: other")
    row(error="TruncatedFrameError: 3 bytes", src="10.0.0.8:1")
    row(code=105, opaque=1)
    row(code=105, opaque=2, is_oneway=True, src="10.0.0.7:1", frame_len=30)
    row(code=17, is_response=True, src="10.0.0.6:1", frame_len=20)          # unmatched error
    row(code=0, is_response=True, src="10.0.0.6:1", frame_len=20)           # unmatched
    row(code=17, is_response=True, request_code=105, latency_ms=2.5, src="10.0.0.5:1")
    row(code=0, is_response=True, request_code=105, latency_ms=7.25, src="10.0.0.5:2")
    row(code=0, is_response=True, request_code=105, latency_ms=0.5, src="10.0.0.5:3")
    row(code=-1, is_response=True, request_code=-7, latency_ms=1.0, src="10.0.0.5:3")
    return rows


def genuine_batches():
    return list(decode_batches([str(FIXTURES)]))


def test_the_summary_of_every_genuine_capture_is_the_rows_summary():
    batches = genuine_batches()
    rows = [r for b in batches for r in b.to_pylist()]
    assert len(rows) > 3000 and len({r["src"] for r in rows}) > 100
    want = expected_summary(rows)
    for chunk_rows in (1 << 20, 1000, 1):     # one chunk; talkers and latencies across chunks
        assert summary_of(batches, chunk_rows) == want, chunk_rows


@pytest.mark.parametrize("chunk_rows", [1 << 20, 3])
def test_the_summary_of_rows_with_errors_and_unmatched_responses(chunk_rows):
    rows = edge_rows()
    batches = [rows_to_batch(rows[i:i + 4]) for i in range(0, len(rows), 4)]
    got = summary_of(batches, chunk_rows)
    assert got == expected_summary(rows)
    assert got["decode_errors"] == {"HeaderDecodeError": 2, "TruncatedFrameError": 1}
    assert got["error_responses"] == {"None:17": 1, "105:17": 1, "-7:-1": 1}
    assert got["unmatched_responses"] == 2
    assert got["top_talkers"] == [("10.0.0.9:1", 3, 20), ("10.0.0.6:1", 2, 40),
                                  ("10.0.0.5:3", 2, 20), ("10.0.0.7:1", 1, 30),
                                  ("10.0.0.5:1", 1, 10), ("10.0.0.5:2", 1, 10),
                                  ("10.0.0.8:1", 1, 10)]


def test_the_compiled_summary_of_every_genuine_capture_is_the_rows_summary():
    parts = list(decode_parts([str(FIXTURES)]))
    assert parts and all(isinstance(p, NativePart) for p in parts)
    rows = [r for p in parts for r in p.to_arrow().to_pylist()]
    compiled = CompiledSummaryBuilder()
    for part in parts:
        compiled.add_part(part)
    stats = {"unanswered_requests": {105: 2, 17: 0}, "packets": 9}
    want = dict(expected_summary(rows), unanswered_requests={105: 2}, stats={"packets": 9})
    reference = SummaryBuilder()
    for part in parts:
        reference.add_part(part)
    assert compiled.result(stats) == want == reference.result(stats)
    assert compiled.result(stats, top=3)["top_talkers"] == want["top_talkers"][:3]
    lat = {}
    for r in rows:
        if r["is_response"] and r["latency_ms"] is not None:
            lat.setdefault(r["request_code"], []).append(r["latency_ms"])
    assert compiled.latencies() == {k: sorted(v) for k, v in lat.items()} and len(lat) > 5


def _take_layout(batch):
    """A record batch's buffers as the compiled decoder hands a batch over (take())."""
    cols = []
    for arr in batch.columns:
        bufs = arr.buffers()
        if pa.types.is_map(arr.type):
            cols.append((bufs[0], bufs[1], bufs[4], bufs[5], bufs[7], bufs[8], len(arr.values)))
        else:
            cols.append((bufs[0], bufs[1], bufs[2] if len(bufs) > 2 else None, arr.null_count))
    return NativePart((batch.num_rows, cols))


def test_the_compiled_summary_of_rows_with_errors_and_unmatched_responses():
    rows = edge_rows()
    compiled = CompiledSummaryBuilder()
    for i in range(0, len(rows), 4):
        compiled.add_part(_take_layout(rows_to_batch(rows[i:i + 4])))
    assert compiled.result() == expected_summary(rows)


def test_the_compiled_summary_refuses_a_batch_that_is_not_the_core_s():
    compiled = CompiledSummaryBuilder()
    part = _take_layout(rows_to_batch(edge_rows()))
    with pytest.raises(ValueError, match="shorter than the batch"):
        compiled.add_part(NativePart((part.num_rows + 9, part._columns)))
    with pytest.raises(ValueError, match="not of the configured columns"):
        compiled.add_part(NativePart((part.num_rows, part._columns[:-1])))
    assert compiled.result()["frames"] == 0


def test_an_empty_summary():
    for builder in (SummaryBuilder(), CompiledSummaryBuilder()):
        s = builder.result({"unanswered_requests": {105: 2, 17: 0}})
        assert s["frames"] == 0 and s["top_talkers"] == [] and s["latency_ms"] == {}
        assert s["unanswered_requests"] == {105: 2} and s["first_ts"] is None


def test_group_counts_are_a_counter_of_the_rows():
    """Nulls are a group; more columns than an int64 can number at once are renumbered on
    the way (five columns of 10,000 values: 10**20 combinations)."""
    rng = random.Random(5)
    n = 20000
    cols = [[rng.randrange(10000) if rng.random() > 0.01 else None for _ in range(n)]
            for _ in range(5)]
    cols.append([rng.choice(["a", "b", None]) for _ in range(n)])
    arrays = [pa.chunked_array([pa.array(c[:7000]), pa.array(c[7000:])]) for c in cols]
    got = {tuple(g[:-1]): g[-1] for g in group_counts(arrays)}
    assert got == Counter(zip(*cols))
    assert group_counts([pa.array([], pa.int32())]) == []


def test_numpy_conversions_read_sliced_and_null_values():
    arr = pa.array([1, None, 3, 4, None, 6], pa.int32()).slice(1)
    assert to_numpy(arr, np.int32, null=-1).tolist() == [-1, 3, 4, -1, 6]
    chunked = pa.chunked_array([arr, pa.array([], pa.int32()), pa.array([7], pa.int32())])
    assert to_numpy(chunked, np.int32).tolist() == [0, 3, 4, 0, 6, 7]
    assert from_numpy(np.arange(3, dtype=np.int64)).to_pylist() == [0, 1, 2]


def test_request_rate_per_code_and_second():
    batches = genuine_batches()
    want = {}
    for r in (r for b in batches for r in b.to_pylist()):
        if not r["is_response"] and r["code"] is not None:
            series = want.setdefault(r["code"], {})
            series[math.floor(r["ts"])] = series.get(math.floor(r["ts"]), 0) + 1
    rate = {}
    for b in batches:
        _count_rate(b, rate)
    assert rate == want and len(want) > 10


def test_the_cli_does_not_import_pandas_or_acero(tmp_path):
    """They cost 0.17 s of the start: pyarrow imports pandas for conversions the summary
    and the writers do not need, and Table.group_by runs on Acero."""
    code = ("import sys\nfrom rocketpy.capture.cli import main\n"
            f"assert main([{str(FIXTURES)!r}, '--format', 'parquet', '-o', "
            f"{str(tmp_path / 'f.parquet')!r}]) == 0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'"
            " or m == 'pyarrow.acero'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]" and "top talkers" in out.stdout
