"""``rocketpy-capture``: decode small RocketMQ captures in-process, without Spark.

Layer: ``rocketpy.capture`` entry point (console script ``rocketpy-capture =
rocketpy.capture.cli:main``).  For quick looks at a laptop-sized capture; the same decoder runs
inside the Spark job (``tools/capture_job.py``) for anything bigger.

    rocketpy-capture capture.pcap                       # a table, then the summary
    rocketpy-capture dumps/ --format json | jq .        # one JSON object per frame
    rocketpy-capture a.pcapng --format parquet -o frames.parquet --plots plots/
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .rows import COLUMNS
from .source import decode_paths
from .summary import SummaryBuilder, format_summary
from .decoder import Stats

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rocketpy-capture",
        description="Decode RocketMQ remoting frames from pcap/pcapng captures (in-process).")
    p.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                   help="capture files, directories (searched recursively) or globs")
    p.add_argument("--format", choices=("table", "json", "csv", "parquet"), default="table",
                   help="table (default): readable lines; json: one object per frame (JSON "
                        "Lines) on stdout; csv; parquet: needs --output and pyarrow")
    p.add_argument("-o", "--output", help="write frames here instead of stdout")
    p.add_argument("--port", type=int, action="append", dest="ports",
                   help="only TCP segments to/from this port (repeatable; default: any port, "
                        "RocketMQ is found by content)")
    p.add_argument("--summary", choices=("auto", "yes", "no"), default="auto",
                   help="print the summary (to stderr for json/csv on stdout; default auto: "
                        "yes except for json/csv on stdout)")
    p.add_argument("--plots", metavar="DIR", help="write latency.png and rate.png here")
    p.add_argument("--errors-only", action="store_true", help="only frames with an error")
    return p


def _json_default(obj):
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    return str(obj)


def _table_line(r: dict) -> str:
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


def _csv_value(v):
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False, sort_keys=False)
    return v


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    stats = Stats()
    errors: list = []
    summary = SummaryBuilder()
    want_summary = (args.summary == "yes" or
                    (args.summary == "auto" and not (args.format in ("json", "csv")
                                                     and not args.output)))
    rows_iter = decode_paths(args.inputs, ports=args.ports, stats=stats, errors=errors)
    rate: dict = {}
    latency: dict = {}

    def tracked(rows):
        for r in rows:
            summary.add(r)
            if args.plots:
                if not r["is_response"] and r["code"] is not None:
                    series = rate.setdefault(r["code"], {})
                    b = int(r["ts"])
                    series[b] = series.get(b, 0) + 1
                if r["latency_ms"] is not None:
                    latency.setdefault(r["request_code"], []).append(r["latency_ms"])
            if args.errors_only and not r["error"]:
                continue
            yield r

    rows = tracked(rows_iter)
    out = sys.stdout
    close = False
    try:
        if args.format == "parquet":
            if not args.output:
                print("rocketpy-capture: --format parquet needs --output FILE", file=sys.stderr)
                return 2
            from .arrow import write_parquet
            write_parquet(rows, args.output)
        else:
            if args.output:
                out = open(args.output, "w", encoding="utf-8", newline="")
                close = True
            if args.format == "json":
                dumps = json.dumps
                for r in rows:
                    out.write(dumps(r, ensure_ascii=False, default=_json_default))
                    out.write("\n")
            elif args.format == "csv":
                import csv
                w = csv.writer(out)
                w.writerow(COLUMNS)
                for r in rows:
                    w.writerow([_csv_value(r[c]) for c in COLUMNS])
            else:
                for r in rows:
                    out.write(_table_line(r))
                    out.write("\n")
    except BrokenPipeError:
        return 0
    finally:
        if close:
            out.close()
    for path, msg in errors:
        print(f"rocketpy-capture: {path}: {msg}", file=sys.stderr)
    if want_summary:
        dest = sys.stderr if (args.format in ("json", "csv") and not args.output) else sys.stdout
        if dest is sys.stdout and args.format == "table" and not args.output:
            print(file=dest)
        print(format_summary(summary.result(stats)), file=dest)
    if args.plots:
        import os
        from .plots import plot_latency, plot_rate
        os.makedirs(args.plots, exist_ok=True)
        plot_latency(latency, os.path.join(args.plots, "latency.png"))
        plot_rate(rate, os.path.join(args.plots, "rate.png"))
    return 1 if errors and not summary.frames else 0


if __name__ == "__main__":
    sys.exit(main())
