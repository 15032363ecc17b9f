"""The printed summary of a decoded capture: frames per code, error responses, latency
percentiles per request code, unanswered requests, top talkers, and capture health counters.

Layer: ``rocketpy.capture`` (pure stdlib + codes).  :class:`SummaryBuilder` aggregates rows in
process; the Spark job computes the same dictionary with Spark aggregations and prints it with
the same :func:`format_summary`, so both entry points print the same report.

Percentiles are nearest-rank on the exact latencies here; Spark uses ``percentile_approx``.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

from rocketpy.remoting import codes

__all__ = ["SummaryBuilder", "format_summary", "percentile"]


def percentile(sorted_values, q: float):
    """Nearest-rank percentile (q in 0..100) of an already sorted list; None when empty."""
    if not sorted_values:
        return None
    k = max(0, math.ceil(q / 100.0 * len(sorted_values)) - 1)
    return sorted_values[k]


def _code_label(code, response=False):
    if code is None:
        return "undecoded"
    name = codes.response_code_name(code) if response else codes.request_code_name(code)
    return f"{code} {name}" if name else str(code)


class SummaryBuilder:
    def __init__(self):
        self.frames = 0
        self.requests = Counter()           # request code -> frames (incl. oneway)
        self.oneway = Counter()
        self.responses = Counter()          # response code -> frames
        self.error_responses = Counter()    # (request code, response code) -> n, code != 0
        self.latency = defaultdict(list)    # request code -> [ms]
        self.talkers = defaultdict(lambda: [0, 0])   # src -> [frames, bytes]
        self.decode_errors = Counter()
        self.unmatched_responses = 0
        self.first_ts = None
        self.last_ts = None

    def add(self, row: dict) -> None:
        self.frames += 1
        ts = row.get("ts")
        if ts is not None:
            self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        t = self.talkers[row.get("src")]
        t[0] += 1
        t[1] += row.get("frame_len") or 0
        if row.get("error"):
            self.decode_errors[(row.get("error") or "").split(":")[0]] += 1
        code = row.get("code")
        if code is None:
            return
        if row.get("is_response"):
            self.responses[code] += 1
            rc = row.get("request_code")
            if rc is None:
                self.unmatched_responses += 1
            if code != 0:
                self.error_responses[(rc, code)] += 1
            if row.get("latency_ms") is not None:
                self.latency[rc].append(row["latency_ms"])
        else:
            self.requests[code] += 1
            if row.get("is_oneway"):
                self.oneway[code] += 1

    def result(self, stats: dict | None = None, top: int = 10) -> dict:
        stats = dict(stats or {})
        unanswered = stats.pop("unanswered_requests", {}) or {}
        lat = {}
        for code, values in self.latency.items():
            values.sort()
            lat[code] = {"n": len(values), "p50": percentile(values, 50),
                         "p99": percentile(values, 99), "max": values[-1]}
        talkers = sorted(self.talkers.items(), key=lambda kv: (-kv[1][0], -kv[1][1], str(kv[0])))
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
