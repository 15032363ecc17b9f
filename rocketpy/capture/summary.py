"""The printed summary of a decoded capture: frames per code, error responses, latency
percentiles per request code, unanswered requests, top talkers, and capture health counters.

Layer: ``rocketpy.capture`` (codes; :class:`SummaryBuilder` reads ``pyarrow`` record batches
with ``pyarrow.compute``, no Python object per frame).  The Spark job computes the same
dictionary with Spark aggregations and prints it with the same :func:`format_summary`, so both
entry points print the same report.

Percentiles are nearest-rank on the exact latencies here; Spark uses ``percentile_approx``.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict

from rocketpy.remoting import codes

__all__ = ["SummaryBuilder", "format_summary", "percentile", "NOT_ERRORS"]

#: Response codes that are not errors: SUCCESS, and the pull statuses a consumer acts on
#: (Java ``MQClientAPIImpl.processPullResponse`` maps them to FOUND's siblings NO_NEW_MSG,
#: NO_MATCHED_MSG, OFFSET_ILLEGAL; SUBSCRIPTION_NOT_LATEST just makes it rebuild its filter).
NOT_ERRORS = frozenset(int(codes.ResponseCode[name]) for name in (
    "SUCCESS", "PULL_NOT_FOUND", "PULL_RETRY_IMMEDIATELY", "PULL_OFFSET_MOVED",
    "SUBSCRIPTION_NOT_LATEST"))


def percentile(sorted_values, q: float):
    """Nearest-rank percentile (q in 0..100) of an already sorted list or array; None when
    empty."""
    if not len(sorted_values):
        return None
    k = max(0, math.ceil(q / 100.0 * len(sorted_values)) - 1)
    value = sorted_values[k]
    return value.as_py() if hasattr(value, "as_py") else value


def _groups(table, keys, aggregations):
    """Rows ``(*keys, *aggregates)`` of a group-by (nulls are a group too)."""
    if not table.num_rows:
        return []
    out = table.group_by(keys, use_threads=False).aggregate(aggregations)
    names = [*(f"{c}_{f}" if c else f for c, f in aggregations), *keys]
    cols = [out[name].to_pylist() for name in names]
    n = len(aggregations)
    return [tuple(row[n:]) + tuple(row[:n]) for row in zip(*cols)]


def _runs(sorted_values):
    """``(value, length)`` of each run of equal values in a sorted array (nulls last)."""
    import pyarrow.compute as pc
    runs = pc.run_end_encode(sorted_values)
    ends = runs.run_ends.to_pylist()
    return list(zip(runs.values.to_pylist(), (b - a for a, b in zip([0] + ends, ends))))


def _code_label(code, response=False):
    if code is None:
        return "undecoded"
    name = codes.response_code_name(code) if response else codes.request_code_name(code)
    return f"{code} {name}" if name else str(code)


#: the columns the summary reads
_COLUMNS = ["ts", "src", "frame_len", "code", "is_response", "is_oneway", "request_code",
            "latency_ms", "error"]


class SummaryBuilder:
    """Aggregates record batches of the output schema (``add_batch``) into the summary, a
    million rows at a time (a group-by per batch would cost more than decoding it)."""

    def __init__(self, chunk_rows: int = 1 << 20):
        self.frames = 0
        self.requests = Counter()           # request code -> frames (incl. oneway)
        self.oneway = Counter()
        self.responses = Counter()          # response code -> frames
        self.error_responses = Counter()    # (request code, response code) -> n, not NOT_ERRORS
        self.latency = defaultdict(list)    # request code -> [arrays of ms]
        self.talkers = defaultdict(lambda: [0, 0])   # src -> [frames, bytes]
        self.decode_errors = Counter()
        self.unmatched_responses = 0
        self.first_ts = None
        self.last_ts = None
        self._pending: list = []
        self._pending_rows = 0
        self._chunk_rows = chunk_rows

    def add_batch(self, batch) -> None:
        if not batch.num_rows:
            return
        self._pending.append(batch.select(_COLUMNS))
        self._pending_rows += batch.num_rows
        if self._pending_rows >= self._chunk_rows:
            self._aggregate()

    def _aggregate(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        if not self._pending:
            return
        t = pa.Table.from_batches(self._pending)
        self._pending, self._pending_rows = [], 0
        self.frames += t.num_rows
        span = pc.min_max(t["ts"]).as_py()
        if span["min"] is not None:
            self.first_ts = span["min"] if self.first_ts is None else min(self.first_ts, span["min"])
            self.last_ts = span["max"] if self.last_ts is None else max(self.last_ts, span["max"])
        for src, b, k in _groups(t, ["src"], [("frame_len", "sum"), ([], "count_all")]):
            talker = self.talkers[src]
            talker[0] += k
            talker[1] += b or 0
        for error in t.filter(pc.is_valid(t["error"]))["error"].to_pylist():
            self.decode_errors[error.split(":")[0]] += 1
        coded = t.filter(pc.is_valid(t["code"]))
        for resp, oneway, code, rc, k in _groups(
                coded, ["is_response", "is_oneway", "code", "request_code"], [([], "count_all")]):
            if not resp:
                self.requests[code] += k
                if oneway:
                    self.oneway[code] += k
                continue
            self.responses[code] += k
            if rc is None:
                self.unmatched_responses += k
            if code not in NOT_ERRORS:
                self.error_responses[(rc, code)] += k
        timed = coded.filter(pc.and_(coded["is_response"], pc.is_valid(coded["latency_ms"])))
        if timed.num_rows:
            timed = timed.sort_by("request_code")
            rcs = timed["request_code"].combine_chunks()
            ms = timed["latency_ms"].combine_chunks()
            start = 0
            for rc, n in _runs(rcs):
                self.latency[rc].append(ms.slice(start, n))
                start += n

    def latencies(self) -> dict:
        """request code -> every latency (ms), for the latency plot."""
        self._aggregate()
        return {code: [v for a in arrays for v in a.to_pylist()]
                for code, arrays in self.latency.items()}

    def result(self, stats: dict | None = None, top: int = 10) -> dict:
        stats = dict(stats or {})
        unanswered = stats.pop("unanswered_requests", {}) or {}
        import pyarrow as pa
        import pyarrow.compute as pc
        self._aggregate()
        lat = {}
        for code, arrays in self.latency.items():
            values = pa.concat_arrays(arrays)
            values = values.take(pc.array_sort_indices(values))
            lat[code] = {"n": len(values), "p50": percentile(values, 50),
                         "p99": percentile(values, 99), "max": values[-1].as_py()}
        talkers = heapq.nsmallest(top, self.talkers.items(),
                                  key=lambda kv: (-kv[1][0], -kv[1][1], str(kv[0])))
        return {
            "frames": self.frames,
            "requests": dict(self.requests),
            "oneway": dict(self.oneway),
            "responses": dict(self.responses),
            "error_responses": {f"{k[0]}:{k[1]}": v for k, v in self.error_responses.items()},
            "latency_ms": lat,
            "unanswered_requests": {int(k): v for k, v in unanswered.items() if v},
            "unmatched_responses": self.unmatched_responses,
            "decode_errors": dict(self.decode_errors),
            "top_talkers": [(k, v[0], v[1]) for k, v in talkers[:top]],
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "stats": stats,
        }


def _fmt_ms(v):
    return "-" if v is None else f"{v:.3f}"


def format_summary(s: dict) -> str:
    """The report as text (same layout for the CLI and the Spark job)."""
    lines = []
    st = s.get("stats") or {}
    span = ""
    if s.get("first_ts") is not None and s.get("last_ts") is not None:
        span = f" over {s['last_ts'] - s['first_ts']:.1f} s"
    lines.append(f"frames: {s['frames']}{span}; requests {sum(s['requests'].values())} "
                 f"(oneway {sum(s['oneway'].values())}), responses {sum(s['responses'].values())}, "
                 f"decode errors {sum(s['decode_errors'].values())}")
    if st:
        keys = ["files", "packets", "captured_bytes", "connections", "rocketmq_connections",
                "retransmitted_bytes", "gaps", "gap_bytes", "snaplen_cut_bytes", "resyncs",
                "skipped_bytes", "damaged_frames", "truncated_records", "ip_fragments",
                "truncated_headers", "bad_files"]
        lines.append("capture: " + ", ".join(f"{k} {st[k]}" for k in keys if st.get(k)))
    lines.append("")
    lines.append(f"{'request code':<40} {'frames':>8} {'oneway':>7} {'answered':>9} "
                 f"{'unanswered':>10} {'p50 ms':>9} {'p99 ms':>9}")
    unanswered = s.get("unanswered_requests") or {}
    lat = s.get("latency_ms") or {}
    for code in sorted(s["requests"]):
        lt = lat.get(code) or {}
        lines.append(f"{_code_label(code):<40} {s['requests'][code]:>8} "
                     f"{s['oneway'].get(code, 0):>7} {lt.get('n', 0):>9} "
                     f"{unanswered.get(code, 0):>10} {_fmt_ms(lt.get('p50')):>9} "
                     f"{_fmt_ms(lt.get('p99')):>9}")
    lines.append("")
    lines.append(f"{'response code':<40} {'frames':>8}")
    for code in sorted(s["responses"]):
        lines.append(f"{_code_label(code, True):<40} {s['responses'][code]:>8}")
    if s.get("unmatched_responses"):
        lines.append(f"responses whose request is not in the capture: {s['unmatched_responses']}")
    if s["error_responses"]:
        lines.append("")
        lines.append("error responses (request code -> response code):")
        for key in sorted(s["error_responses"], key=lambda k: (-s["error_responses"][k], k)):
            rc, code = key.split(":")
            rcl = "?" if rc == "None" else _code_label(int(rc))
            lines.append(f"  {rcl} -> {_code_label(int(code), True)}: {s['error_responses'][key]}")
    if s.get("decode_errors"):
        lines.append("")
        lines.append("frames that did not decode:")
        for k, v in sorted(s["decode_errors"].items()):
            lines.append(f"  {k}: {v}")
    lines.append("")
    lines.append("top talkers (sender, frames, bytes):")
    for src, n, b in s["top_talkers"]:
        lines.append(f"  {src:<46} {n:>8} {b:>12}")
    return "\n".join(lines)
