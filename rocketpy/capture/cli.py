"""``rocketpy-capture``: decode RocketMQ captures in-process, without Spark.

Layer: ``rocketpy.capture`` entry point (console script ``rocketpy-capture =
rocketpy.capture.cli:main``).  The decode engine (:mod:`rocketpy.capture.engine`, compiled when
built) hands over Arrow record batches; the writers and the summary work from those batches.
The same decoder runs inside the Spark job (``tools/capture_job.py``) for anything bigger.

    rocketpy-capture capture.pcap                       # a table, then the summary
    rocketpy-capture dumps/ --format json | jq .        # one JSON object per frame
    rocketpy-capture a.pcapng --format parquet -o frames.parquet --plots plots/
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings

__all__ = ["main", "build_parser"]

PROG = "rocketpy-capture"


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``rocketpy-capture: argument --port: ...``),
    not its usage block first; status 2, argparse's."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (rocketpy-capture --help lists the options)\n")


def _port(text: str) -> int:
    """A TCP port, 1..65535."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and 1 <= int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1..65535)")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Decode RocketMQ remoting frames from pcap/pcapng captures (in-process).")
    p.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                   help="capture files, directories (searched recursively) or globs")
    p.add_argument("--format", choices=("table", "json", "csv", "parquet"), default="table",
                   help="table (default): readable lines; json: one object per frame (JSON "
                        "Lines) on stdout; csv (RFC 4180); parquet: needs --output")
    p.add_argument("-o", "--output", help="write frames here instead of stdout")
    p.add_argument("--port", type=_port, action="append", dest="ports",
                   help="only TCP segments to/from this port (repeatable; default: any port, "
                        "RocketMQ is found by content)")
    p.add_argument("--summary", choices=("auto", "yes", "no"), default="auto",
                   help="print the summary (to stderr for json/csv on stdout; default auto: "
                        "yes except for json/csv on stdout)")
    p.add_argument("--plots", metavar="DIR", help="write latency.png and rate.png here "
                                                   "(needs the plots extra: matplotlib)")
    p.add_argument("--errors-only", action="store_true", help="only frames with an error")
    p.add_argument("--one-capture", action="store_true",
                   help="the files are one capture split by rotation (tcpdump -C/-G/-W): read "
                        "them in order of their first packet, connections carrying on from one "
                        "file into the next")
    return p


def _fail(message: str, status: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return status


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


class OutputError(Exception):
    """Writing the frames failed (a read error of a capture is reported per file instead)."""


class _Writer:
    """Writes record batches in one of the formats; ``close()`` finishes the file.  Parquet
    gets a row group per :data:`~rocketpy.capture.arrow.ROW_GROUP_ROWS` rows, not per batch.
    Its OS errors come out as :class:`OutputError` (a closed pipe stays BrokenPipeError)."""

    def __init__(self, fmt: str, output: str | None):
        self.fmt = fmt
        self.output = output
        self.out = None
        self.parquet = None
        self.row_group: list = []
        self.row_group_rows = 0
        self.csv = None

    def write(self, batch) -> None:
        with _output_errors():
            self._write(batch)

    def _write(self, batch) -> None:
        from . import engine
        if self.fmt == "parquet":
            from .arrow import ROW_GROUP_ROWS, parquet_writer
            if self.parquet is None:             # opened at once: a bad path fails at once
                self.parquet = parquet_writer(self.output, batch.schema)
            self.row_group.append(batch)
            self.row_group_rows += batch.num_rows
            if self.row_group_rows >= ROW_GROUP_ROWS:
                self._write_row_group()
            return
        out = self._stream()
        if self.fmt == "json":
            out.write(engine.batch_jsonl(batch))
        elif self.fmt == "csv":
            import pyarrow as pa
            import pyarrow.csv as pacsv
            i = batch.schema.get_field_index("ext_fields")
            batch = batch.set_column(i, pa.field("ext_fields", pa.string()),
                                     engine.ext_json_column(batch.column(i)))
            if self.csv is None:
                self.csv = pacsv.CSVWriter(out, batch.schema, write_options=pacsv.WriteOptions(
                    quoting_style="needed"))
            self.csv.write_batch(batch)
        else:
            for row in batch.to_pylist():
                out.write(_table_line(row).encode("utf-8") + b"\n")
        out.flush()

    def _stream(self):
        if self.out is None:
            self.out = open(self.output, "wb") if self.output else sys.stdout.buffer
        return self.out

    def _write_row_group(self) -> None:
        import pyarrow as pa
        if self.row_group:
            self.parquet.write_table(pa.Table.from_batches(self.row_group))
        self.row_group, self.row_group_rows = [], 0

    def close(self, schema) -> None:
        with _output_errors():
            self._close(schema)

    def _close(self, schema) -> None:
        if self.fmt == "parquet":
            if self.parquet is None:              # no frame at all: still a valid, empty file
                from .arrow import parquet_writer
                self.parquet = parquet_writer(self.output, schema)
            self._write_row_group()
            self.parquet.close()
        elif self.fmt == "csv" and self.csv is None:
            from rocketpy.capture.rows import COLUMNS
            self._stream().write((",".join(f'"{c}"' for c in COLUMNS) + "\n").encode())
        if self.csv is not None:
            self.csv.close()
        if self.out is not None and self.output:
            self.out.close()


@contextlib.contextmanager
def _output_errors():
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from exc


class _Pipeline:
    """Hands batches to ``consume`` (summary, writer) in a second thread: the compiled decoder
    keeps one core busy while pyarrow (which lets go of the GIL while it encodes, compresses and
    aggregates) writes on the other.  An error in ``consume`` ends the decode with it."""

    def __init__(self, consume):
        import queue
        import threading
        self.consume = consume
        self.queue = queue.Queue(maxsize=4)
        self.error = None
        self.thread = threading.Thread(target=self._run, name="rocketpy-capture-writer",
                                       daemon=True)

    def _run(self):
        while True:
            batch = self.queue.get()
            if batch is None:
                return
            if self.error is None:
                try:
                    self.consume(batch)
                except BaseException as exc:   # handed to the decoding thread
                    self.error = exc

    def put(self, batch):
        if self.error is not None:
            raise self.error
        self.queue.put(batch)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.queue.put(None)
        self.thread.join()
        if self.error is not None and exc[0] is None:
            raise self.error
        return False


def _load_engine():
    """The engine module; its one fallback warning as one line of ours."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from . import engine
    for w in caught:
        print(f"{PROG}: {w.message}", file=sys.stderr)
    return engine


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away (| head): stop quietly, and keep Python's exit flush quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail("output closed", 0)


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.format == "parquet" and not args.output:
        return _fail("--format parquet needs --output FILE")
    if not args.output and sys.stdout is None:
        return _fail("standard output is closed: give --output FILE")
    if args.plots:
        from .plots import PLOTS_HINT, plots_available
        if not plots_available():
            return _fail(PLOTS_HINT)
        try:                         # before decoding: a bad directory fails at once
            os.makedirs(args.plots, exist_ok=True)
        except OSError as exc:
            return _fail(f"cannot write plots to {args.plots}: {exc.strerror or exc}")
    try:
        engine = _load_engine()
    except ImportError as exc:
        return _fail(f"needs pyarrow, a dependency of rocketpy ({exc}): pip install pyarrow")
    from .decoder import Stats
    from .source import expand_inputs
    from .summary import SummaryBuilder, format_summary
    try:
        found = expand_inputs(args.inputs)
    except FileNotFoundError as exc:
        return _fail(f"no such file or directory: {exc}")
    if not found:   # e.g. an empty directory: nothing to decode is not a success
        return _fail(f"no capture files (pcap, pcapng, gzip) in {' '.join(args.inputs)}")
    stats = Stats()
    errors: list = []
    summary = SummaryBuilder()
    rate: dict = {}
    to_stdout = not args.output
    want_summary = (args.summary == "yes" or
                    (args.summary == "auto" and not (args.format in ("json", "csv") and to_stdout)))
    writer = _Writer(args.format, args.output)
    counted, decoded = [0], [0]

    def consume(batch):
        decoded[0] += batch.num_rows
        summary.add_batch(batch)
        if args.plots:
            _count_rate(batch, rate)
        if args.errors_only:
            import pyarrow.compute as pc
            batch = batch.filter(pc.is_valid(batch.column("error")))
        writer.write(batch)
        counted[0] += batch.num_rows

    try:
        with _Pipeline(consume) as pipeline:
            for batch in engine.decode_batches(args.inputs, ports=args.ports, stats=stats,
                                               errors=errors, one_capture=args.one_capture):
                pipeline.put(batch)
        writer.close(engine.ARROW_SCHEMA)
    except BrokenPipeError:
        # the reader went away (| head): stop quietly, and keep Python's exit flush quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail(f"output closed after at least {counted[0]} frames", 0)
    except KeyboardInterrupt:
        return _fail(f"interrupted after at least {counted[0]} frames", 130)
    except OutputError as exc:
        return _fail(f"cannot write {args.output or 'the output'}: {exc}", 1)
    for path, msg in errors:
        print(f"{PROG}: {path}: {msg}", file=sys.stderr)
    if want_summary:
        dest = sys.stderr if (args.format in ("json", "csv") and to_stdout) else sys.stdout
        if dest is sys.stdout and args.format == "table" and to_stdout:
            print(file=dest)
        print(format_summary(summary.result(stats)), file=dest)
    if args.plots:
        from .plots import plot_latency, plot_rate
        try:
            plot_latency(summary.latencies(), os.path.join(args.plots, "latency.png"))
            plot_rate(rate, os.path.join(args.plots, "rate.png"))
        except OSError as exc:
            return _fail(f"cannot write plots to {args.plots}: {exc.strerror or exc}", 1)
    return 1 if errors and not decoded[0] else 0


def _count_rate(batch, rate: dict) -> None:
    """Requests per (code, second), for the rate plot."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from .groups import group_counts
    req = batch.filter(pc.and_(pc.invert(batch.column("is_response")),
                               pc.is_valid(batch.column("code"))))
    seconds = pc.cast(pc.floor(req.column("ts")), pa.int64())
    for code, s, n in group_counts([req.column("code"), seconds]):
        series = rate.setdefault(code, {})
        series[s] = series.get(s, 0) + n


if __name__ == "__main__":
    sys.exit(main())
