"""``rocketpy-capture``: decode RocketMQ captures in-process, without Spark.

Layer: ``rocketpy.capture`` entry point (console script ``rocketpy-capture =
rocketpy.capture.cli:main``).  The decode engine (:mod:`rocketpy.capture.engine`, compiled when
built) hands over batches of rows; the format's writer (:mod:`rocketpy.capture.formats`) and the
summary work from those.  It imports only what the chosen format and options need (JSON Lines
and the table, with their summary, need neither pyarrow nor numpy), and those in its writer
thread while the compiled core is already decoding.  The same decoder runs inside the Spark job
(``tools/capture_job.py``) for anything bigger.

    rocketpy-capture capture.pcap                       # a table, then the summary
    rocketpy-capture dumps/ --format json | jq .        # one JSON object per frame
    rocketpy-capture a.pcapng --format parquet -o frames.parquet --plots plots/
"""
from __future__ import annotations

import argparse
import os
import sys
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
    from .formats import FORMATS
    p = _Parser(
        prog=PROG,
        description="Decode RocketMQ remoting frames from pcap/pcapng captures (in-process).")
    p.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                   help="capture files, directories (searched recursively) or globs")
    p.add_argument("--format", choices=list(FORMATS), default="table",
                   help="; ".join(f"{f.name}: {f.help}" + ("" if f.stream else ", needs --output")
                                  for f in FORMATS.values()) + " (default: table)")
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


def _missing(packages) -> tuple | None:
    """``(package, why)`` for the first of ``packages`` that cannot be imported (found without
    importing it: the writer thread imports it while the core decodes), else None."""
    import importlib.util
    for name in sorted(packages):
        try:
            if importlib.util.find_spec(name) is None:
                return name, f"No module named {name!r}"
        except (ImportError, ValueError) as exc:
            return name, str(exc)
    return None


def _needs(package: str, why) -> int:
    return _fail(f"needs {package}, a dependency of rocketpy ({why}): pip install {package}")


class _Pipeline:
    """Hands batches to ``consume`` (summary, writer) in a second thread: the compiled decoder
    keeps one core busy while pyarrow (which lets go of the GIL while it encodes, compresses and
    aggregates) writes on the other.  The thread first runs ``prepare`` (the writer's imports:
    pyarrow and numpy take longer than a small capture's decoding); the decoder goes on
    meanwhile, up to :data:`AHEAD_BYTES` of batches waiting.  An error in either ends the decode
    with it."""

    #: batches the decoder may be ahead of the writer, in bytes of their columns
    AHEAD_BYTES = 128 << 20

    def __init__(self, consume, prepare):
        import collections
        import threading
        self.consume = consume
        self.prepare = prepare
        self.waiting = collections.deque()
        self.bytes = 0
        self.turn = threading.Condition()
        self.error = None
        self.thread = threading.Thread(target=self._run, name="rocketpy-capture-writer",
                                       daemon=True)

    def _get(self):
        with self.turn:
            while not self.waiting:
                self.turn.wait()
            part = self.waiting.popleft()
            if part is not None:
                self.bytes -= part.nbytes
            self.turn.notify_all()
            return part

    def _run(self):
        try:
            self.prepare()
        except BaseException as exc:       # handed to the decoding thread
            self.error = exc
        while True:
            part = self._get()
            if part is None:
                return
            if self.error is None:
                try:
                    self.consume(part)
                except BaseException as exc:   # handed to the decoding thread
                    self.error = exc

    def put(self, part):
        if self.error is not None:
            raise self.error
        with self.turn:
            while self.waiting and self.bytes + part.nbytes > self.AHEAD_BYTES:
                self.turn.wait()
            self.waiting.append(part)
            self.bytes += part.nbytes
            self.turn.notify_all()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        with self.turn:
            self.waiting.append(None)
            self.turn.notify_all()
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
    from .formats import FORMATS, OutputError
    args = build_parser().parse_args(argv)
    fmt = FORMATS[args.format]
    to_stdout = not args.output
    if not fmt.stream and to_stdout:
        return _fail(f"--format {fmt.name} needs --output FILE")
    if to_stdout and sys.stdout is None:
        return _fail("standard output is closed: give --output FILE")
    want_summary = (args.summary == "yes" or
                    (args.summary == "auto" and not (fmt.data and to_stdout)))
    if args.plots:
        from .plots import PLOTS_HINT, plots_available
        if not plots_available():
            return _fail(PLOTS_HINT)
        try:                         # before decoding: a bad directory fails at once
            os.makedirs(args.plots, exist_ok=True)
        except OSError as exc:
            return _fail(f"cannot write plots to {args.plots}: {exc.strerror or exc}")
    engine = _load_engine()
    # pyarrow.compute and numpy: for the plots, --errors-only and the reference decoder (whose
    # rows every writer and the summary read as Arrow); the compiled core counts the summary
    aggregate = bool(args.plots or args.errors_only) or engine.NATIVE is None
    missing = _missing(set(fmt.needs) | ({"pyarrow", "numpy"} if aggregate else set()))
    if missing:
        return _needs(*missing)
    from .source import expand_inputs
    from .stats import Stats
    from .summary import format_summary, summary_builder
    try:
        found = expand_inputs(args.inputs)
    except FileNotFoundError as exc:
        return _fail(f"no such file or directory: {exc}")
    if not found:   # e.g. an empty directory: nothing to decode is not a success
        return _fail(f"no capture files (pcap, pcapng, gzip) in {' '.join(args.inputs)}")
    stats = Stats()
    errors: list = []
    summary = summary_builder(engine.BatchDecoder.name)
    rate: dict = {}
    writer = fmt.writer(args.output)
    counted, decoded = [0], [0]

    def prepare():
        writer.prepare()
        if aggregate:
            from . import groups  # noqa: F401 (pyarrow.compute, numpy)

    def consume(part):
        decoded[0] += part.num_rows
        if want_summary or args.plots:
            summary.add_part(part)
        if args.plots:
            _count_rate(part.to_arrow(), rate)
        if args.errors_only:
            import pyarrow.compute as pc
            batch = part.to_arrow()
            part = engine.ArrowPart(batch.filter(pc.is_valid(batch.column("error"))))
        writer.write(part)
        counted[0] += part.num_rows

    try:
        with _Pipeline(consume, prepare) as pipeline:
            for part in engine.decode_parts(args.inputs, ports=args.ports, stats=stats,
                                            errors=errors, one_capture=args.one_capture):
                pipeline.put(part)
        writer.close()
    except BrokenPipeError:
        # the reader went away (| head): stop quietly, and keep Python's exit flush quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail(f"output closed after at least {counted[0]} frames", 0)
    except KeyboardInterrupt:
        return _fail(f"interrupted after at least {counted[0]} frames", 130)
    except OutputError as exc:
        return _fail(f"cannot write {args.output or 'the output'}: {exc}", 1)
    except ImportError as exc:       # the writer's imports failed after all (a broken install)
        return _needs(exc.name or "pyarrow", exc)
    for path, msg in errors:
        print(f"{PROG}: {path}: {msg}", file=sys.stderr)
    if want_summary:
        dest = sys.stderr if (fmt.data and to_stdout) else sys.stdout
        if dest is sys.stdout and to_stdout:
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
