"""The printed summary of a decoded capture: frames per code, error responses, latency
percentiles per request code, unanswered requests, top talkers, and capture health counters.

Layer: ``rocketpy.capture`` (codes; :class:`SummaryBuilder` reads ``pyarrow`` record batches
with ``pyarrow.compute`` and numpy, no Python object per frame or per talker).  The compiled
decoder's batches are counted by its own ``Tally`` instead (:class:`CompiledSummaryBuilder`: C,
no pyarrow, no numpy, so the CLI's summary adds neither to its start-up), which
``tests/test_capture_summary.py`` holds to :class:`SummaryBuilder` on every fixture.  The Spark
job computes the same dictionary with Spark aggregations and prints it with the same
:func:`format_summary`, so both entry points print the same report.

Percentiles are nearest-rank on the exact latencies here; Spark uses ``percentile_approx``.
"""
from __future__ import annotations

import math
from collections import Counter

from rocketpy.remoting import codes

__all__ = ["SummaryBuilder", "CompiledSummaryBuilder", "summary_builder", "format_summary",
           "percentile", "NOT_ERRORS"]

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
    return value.item() if hasattr(value, "item") else value


def _code_label(code, response=False):
    if code is None:
        return "undecoded"
    name = codes.response_code_name(code) if response else codes.request_code_name(code)
    return f"{code} {name}" if name else str(code)


#: the columns the summary reads
_COLUMNS = ["ts", "src", "frame_len", "code", "is_response", "is_oneway", "request_code",
            "latency_ms", "error"]


class SummaryBuilder:
    """Aggregates record batches of the output schema (``add_batch``) into the summary, 256Ki
    rows at a time, with hash kernels and numpy (:mod:`.groups`): per chunk, a few passes over
    its columns and a Python step per distinct code, not per frame or talker.  (Chunks of 1Mi
    rows cost the same in all but left twice the work for :meth:`result`, after the decoding.)"""

    def __init__(self, chunk_rows: int = 1 << 18):
        self.frames = 0
        self.requests = Counter()           # request code -> frames (incl. oneway)
        self.oneway = Counter()
        self.responses = Counter()          # response code -> frames
        self.error_responses = Counter()    # (request code, response code) -> n, not NOT_ERRORS
        self.decode_errors = Counter()
        self.unmatched_responses = 0
        self.first_ts = None
        self.last_ts = None
        # talkers so far: distinct src (Arrow), and their frames and bytes (numpy int64)
        self._talkers = None
        self._talker_frames = None
        self._talker_bytes = None
        self._timed: list = []              # (request code, latency ms) of answered requests
        self._pending: list = []
        self._pending_rows = 0
        self._chunk_rows = chunk_rows

    def add_part(self, part) -> None:
        """A part of :mod:`rocketpy.capture.engine` (as its record batch)."""
        self.add_batch(part.to_arrow())

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
        from .groups import group_counts
        if not self._pending:
            return
        t = pa.Table.from_batches(self._pending)
        self._pending, self._pending_rows = [], 0
        self.frames += t.num_rows
        span = pc.min_max(t["ts"]).as_py()
        if span["min"] is not None:
            self.first_ts = span["min"] if self.first_ts is None else min(self.first_ts, span["min"])
            self.last_ts = span["max"] if self.last_ts is None else max(self.last_ts, span["max"])
        self._add_talkers(t["src"], t["frame_len"])
        if t["error"].null_count < t.num_rows:
            for error, k in group_counts([t["error"]]):
                if error is not None:
                    self.decode_errors[error.split(":")[0]] += k
        for code, resp, oneway, rc, k in group_counts(
                [t["code"], t["is_response"], t["is_oneway"], t["request_code"]]):
            if code is None:
                continue
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
        timed = pc.and_(pc.and_(pc.is_valid(t["code"]), t["is_response"]),
                        pc.is_valid(t["latency_ms"]))
        self._timed.append((t["request_code"].filter(timed), t["latency_ms"].filter(timed)))

    def _add_talkers(self, src, frame_len) -> None:
        """Adds frames and bytes per sender: the talkers so far and this chunk's senders are
        numbered together (the talkers so far are distinct, so no two share a number)."""
        import numpy as np
        import pyarrow as pa
        from .groups import group_ids, to_numpy
        known = [] if self._talkers is None else [self._talkers]
        ids, (talkers,) = group_ids([pa.chunked_array(known + src.chunks, src.type)])
        k = len(self._talkers) if known else 0
        rows = ids[k:]
        frames = np.bincount(rows, minlength=len(talkers))
        # (weighted counts are float64 sums: exact up to 2**53 bytes, 9 PB, per chunk)
        sent = np.bincount(rows, weights=to_numpy(frame_len, np.int32),
                           minlength=len(talkers)).astype(np.int64)
        if k:
            frames[ids[:k]] += self._talker_frames
            sent[ids[:k]] += self._talker_bytes
        self._talkers, self._talker_frames, self._talker_bytes = talkers, frames, sent

    def _latency_groups(self) -> dict:
        """request code -> its latencies (ms), sorted (numpy), of the chunks aggregated."""
        import numpy as np
        import pyarrow as pa
        from .groups import group_ids, to_numpy
        if not sum(len(rc) for rc, _ in self._timed):
            return {}
        rcs = pa.chunked_array([c for rc, _ in self._timed for c in rc.chunks], pa.int32())
        ms = np.concatenate([to_numpy(lat, np.float64) for _, lat in self._timed])
        ids, (request_codes,) = group_ids([rcs])
        ms = ms[np.argsort(ids, kind="stable")]
        ends = np.cumsum(np.bincount(ids, minlength=len(request_codes))).tolist()
        return {code: np.sort(ms[start:end])
                for code, start, end in zip(request_codes.to_pylist(), [0] + ends, ends)}

    def latencies(self) -> dict:
        """request code -> every latency (ms), for the latency plot."""
        self._aggregate()
        return {code: values.tolist() for code, values in self._latency_groups().items()}

    def _top_talkers(self, top: int) -> list:
        """The ``top`` senders by frames, then bytes, then address."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from .groups import from_numpy
        if self._talkers is None:
            return []
        t = pa.Table.from_arrays([self._talkers, from_numpy(self._talker_frames),
                                  from_numpy(self._talker_bytes)], ["src", "frames", "bytes"])
        t = t.take(pc.select_k_unstable(t, k=min(top, t.num_rows), sort_keys=[
            ("frames", "descending"), ("bytes", "descending"), ("src", "ascending")]))
        return list(zip(*(t[c].to_pylist() for c in ("src", "frames", "bytes"))))

    def result(self, stats: dict | None = None, top: int = 10) -> dict:
        self._aggregate()
        lat = {code: {"n": len(values), "p50": percentile(values, 50),
                      "p99": percentile(values, 99), "max": values[-1].item()}
               for code, values in self._latency_groups().items()}
        return _report({
            "frames": self.frames,
            "requests": dict(self.requests),
            "oneway": dict(self.oneway),
            "responses": dict(self.responses),
            "error_responses": {f"{k[0]}:{k[1]}": v for k, v in self.error_responses.items()},
            "latency_ms": lat,
            "unmatched_responses": self.unmatched_responses,
            "decode_errors": dict(self.decode_errors),
            "top_talkers": self._top_talkers(top),
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }, stats)


def _report(counts: dict, stats: dict | None) -> dict:
    """The summary: the rows' counts, and the decoder's counters (the requests it never saw
    answered among them)."""
    stats = dict(stats or {})
    unanswered = stats.pop("unanswered_requests", {}) or {}
    keys = ["frames", "requests", "oneway", "responses", "error_responses", "latency_ms"]
    out = {k: counts[k] for k in keys}
    out["unanswered_requests"] = {int(k): v for k, v in unanswered.items() if v}
    for k in ("unmatched_responses", "decode_errors", "top_talkers", "first_ts", "last_ts"):
        out[k] = counts[k]
    out["stats"] = stats
    return out


class CompiledSummaryBuilder:
    """:class:`SummaryBuilder` for the compiled decoder's parts, counted in C from their own
    buffers (``_native.Tally``, without the GIL); other parts go to a :class:`SummaryBuilder`
    (none do in one decode: an engine makes parts of one kind)."""

    def __init__(self):
        from .engine import NATIVE
        self._tally = NATIVE.Tally(not_errors=sorted(NOT_ERRORS))

    def add_part(self, part) -> None:
        part.tally(self._tally)

    def latencies(self) -> dict:
        return self._tally.latencies()

    def result(self, stats: dict | None = None, top: int = 10) -> dict:
        return _report(self._tally.counts(top), stats)


def summary_builder(engine_name: str):
    """The summary's builder for the parts an engine makes (its ``name``)."""
    return CompiledSummaryBuilder() if engine_name == "native" else SummaryBuilder()


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
                "evicted_connections",
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
