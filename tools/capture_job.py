"""PySpark job: RocketMQ wire captures (pcap/pcapng) -> a table of frames, at any scale.

Layer: ``tools/`` (the only place pyspark is imported); the decoding itself is
``rocketpy.capture`` (pure), the same code the in-process ``rocketpy-capture`` runs, so both
produce the same rows (schema: ``rocketpy.capture.rows.SCHEMA``, documented in docs/capture.md).

    spark-submit tools/capture_job.py INPUT... --output DIR [--format parquet|json|csv]
        [--port N]... [--chunk-mb 256] [--partitions N] [--plots] [--no-summary]

INPUT: files, directories (recursive) and globs on any Hadoop filesystem Spark can list
(``file:``, ``hdfs://``, ``s3a://``, ...).  Output in DIR: ``frames/`` (the table),
``summary.txt`` / ``summary.json`` (also printed), ``plots/latency.png`` and ``plots/rate.png``.

How it scales:

* files are listed by Spark's Hadoop FileSystem on the driver (path and size only);
* captures up to ``--chunk-mb`` are packed into tasks and decoded whole, in the task, with no
  shuffle (many files in parallel);
* larger captures are cut into byte ranges; each task finds its first record boundary
  (``rocketpy.capture.split``), decodes link/IP/TCP headers and emits TCP segments keyed by
  connection; a shuffle brings each connection's segments together, sorted by file offset
  (= capture order), and each connection is then reassembled, framed, decoded and paired by
  the same ``CaptureDecoder``.  No task ever holds a whole file: Spark's ``binaryFile`` (one
  row per file, 2 GB limit) is not used.  Executors read their byte ranges with Python I/O:
  local paths directly, other URIs through ``pyarrow.fs`` (HDFS, S3, GCS) or ``fsspec``.
* progress (tasks done per stage, bytes read so far) is printed to stderr while it runs.

Capture-health counters (gaps, retransmitted bytes, unanswered requests...) come back through
an accumulator: exact unless Spark retried a task.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import zipfile

__all__ = ["main", "run", "build_parser"]

try:                                    # run from a source checkout: the repo root holds rocketpy
    import rocketpy  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SEG_FIELDS = [("flow", "binary"), ("offset", "bigint"), ("ts_ns", "bigint"), ("src", "binary"),
              ("sport", "int"), ("dst", "binary"), ("dport", "int"), ("seq", "bigint"),
              ("ack", "bigint"), ("flags", "int"), ("payload", "binary"), ("missing", "int")]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="capture_job.py",
                                description="Decode RocketMQ frames from captures with Spark.")
    p.add_argument("inputs", nargs="+", metavar="INPUT")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--format", choices=("parquet", "json", "csv"), default="parquet")
    p.add_argument("--port", type=int, action="append", dest="ports",
                   help="only segments to/from this port (repeatable; default: all ports)")
    p.add_argument("--chunk-mb", type=float, default=256.0,
                   help="byte-range size for splitting large captures (default 256 MiB); "
                        "captures up to this size are decoded whole in one task")
    p.add_argument("--partitions", type=int, default=0,
                   help="shuffle partitions for split captures (default: 2x default parallelism)")
    p.add_argument("--plots", action="store_true", help="write plots/latency.png and rate.png")
    p.add_argument("--no-summary", action="store_true")
    p.add_argument("--master", help="Spark master when run with plain python (default local[*])")
    p.add_argument("--no-ship-code", action="store_true",
                   help="do not add the rocketpy package to the job (it is installed on executors)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


# ---- pieces that run on executors (they import rocketpy there) --------------------------------

class _DictAccumulator:
    """AccumulatorParam merging capture-statistics dicts (Stats.merge semantics)."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        from rocketpy.capture.decoder import Stats
        return Stats(a).merge(b)


def _stats_param():
    from pyspark.accumulators import AccumulatorParam

    class P(_DictAccumulator, AccumulatorParam):
        pass
    return P()


def _decode_whole_files(tasks, ports, acc, bytes_acc):
    """mapInArrow function: each input row's id names a list of (path, name) decoded whole."""
    def fn(batches):
        from rocketpy.capture.arrow import rows_to_batch
        from rocketpy.capture.decoder import Stats
        from rocketpy.capture.readers import CaptureFormatError
        from rocketpy.capture.source import decode_file
        for batch in batches:
            for tid in batch.column(0).to_pylist():
                stats = Stats()
                for path, name, size in tasks[tid]:
                    rows = []
                    try:
                        for row in decode_file(path, ports=ports, stats=stats, name=name):
                            rows.append(row)
                            if len(rows) >= 8192:
                                yield rows_to_batch(rows)
                                rows = []
                    except (CaptureFormatError, OSError, EOFError) as exc:
                        stats["bad_files"] = stats.get("bad_files", 0) + 1
                        print(f"capture_job: {name}: {exc}", file=sys.stderr)
                    if rows:
                        yield rows_to_batch(rows)
                    bytes_acc.add(size)
                acc.add(dict(stats))
    return fn


def _read_ranges(ranges, ports, acc, bytes_acc):
    """mapInArrow function: byte ranges -> TCP segments keyed by (file, connection)."""
    def fn(batches):
        import pyarrow as pa
        from rocketpy.capture.decoder import Stats
        from rocketpy.capture.split import range_segments, probe
        schema = pa.schema([pa.field(n, _pa_type(pa, t)) for n, t in SEG_FIELDS])
        for batch in batches:
            for rid in batch.column(0).to_pylist():
                fidx, path, start, end = ranges[rid]
                stats = Stats()
                info = probe(path)
                prefix = fidx.to_bytes(4, "big")
                cols = [[] for _ in SEG_FIELDS]
                (flow, off, tsl, src, sport, dst, dport, seq, ack, flags, payload,
                 missing) = cols
                n = 0
                for key, offset, ts, seg in range_segments(path, info, start, end, ports, stats):
                    flow.append(prefix + key)
                    off.append(offset)
                    tsl.append(ts)
                    src.append(seg.src)
                    sport.append(seg.sport)
                    dst.append(seg.dst)
                    dport.append(seg.dport)
                    seq.append(seg.seq)
                    ack.append(seg.ack)
                    flags.append(seg.flags)
                    payload.append(seg.payload)
                    missing.append(seg.missing)
                    n += 1
                    if n >= 16384:
                        yield pa.RecordBatch.from_arrays(
                            [pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)
                        for c in cols:
                            c.clear()
                        n = 0
                if n:
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)
                bytes_acc.add(end - start)
                acc.add(dict(stats))
    return fn


def _decode_flows(names, ports, acc):
    """mapInArrow function: segments sorted by (flow, offset) -> frame rows."""
    def fn(batches):
        from rocketpy.capture.arrow import rows_to_batch
        from rocketpy.capture.decoder import CaptureDecoder, Stats
        from rocketpy.capture.layers import Segment
        stats = Stats()
        current = None
        dec = None
        out_rows: list = []
        for batch in batches:
            cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            (flow, _off, tsl, src, sport, dst, dport, seq, ack, flags, payload, missing) = cols
            for i in range(batch.num_rows):
                f = flow[i]
                if f != current:
                    if dec is not None:
                        dec.finish()
                    current = f
                    fidx = int.from_bytes(f[:4], "big")
                    dec = CaptureDecoder(names[fidx], ports=ports, stats=stats)
                    dec.out = out_rows
                dec.segment(Segment(src[i], sport[i], dst[i], dport[i], seq[i], ack[i],
                                    flags[i], payload[i], missing[i]), tsl[i])
                # segment() may have swept: keep the shared out list
                if len(out_rows) >= 8192:
                    yield rows_to_batch(out_rows)
                    out_rows.clear()
        if dec is not None:
            dec.finish()
        if out_rows:
            yield rows_to_batch(out_rows)
        acc.add(dict(stats))
    return fn


def _pa_type(pa, ddl):
    return {"binary": pa.binary(), "bigint": pa.int64(), "int": pa.int32()}[ddl]


# ---- driver -----------------------------------------------------------------------------------

def _list_inputs(spark, inputs):
    """[(uri, size)] of every file under the inputs, through Hadoop's FileSystem."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    Path = jvm.org.apache.hadoop.fs.Path
    out = []
    for item in inputs:
        if "://" not in item and not item.startswith("file:"):
            item = "file:" + os.path.abspath(item)
        path = Path(item)
        fs = path.getFileSystem(conf)
        statuses = fs.globStatus(path)
        if statuses is None or len(statuses) == 0:
            raise FileNotFoundError(item)
        for st in statuses:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    f = it.next()
                    name = f.getPath().getName()
                    if not name.startswith((".", "_")):
                        out.append((f.getPath().toString(), f.getLen()))
            else:
                out.append((st.getPath().toString(), st.getLen()))
    seen = set()
    return [x for x in sorted(out) if not (x[0] in seen or seen.add(x[0]))]


_SHIPPED: set = set()


def _ship_code(sc):
    """Zip the rocketpy package next to this job and add it to the job's Python path."""
    if sc.applicationId in _SHIPPED:
        return
    _SHIPPED.add(sc.applicationId)
    import rocketpy
    pkg = os.path.dirname(os.path.abspath(rocketpy.__file__))
    tmp = tempfile.mkdtemp(prefix="rocketpy-capture-")
    zpath = os.path.join(tmp, "rocketpy.zip")
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for root, _dirs, files in os.walk(pkg):
            if "__pycache__" in root:
                continue
            for name in files:
                if name.endswith(".py"):
                    full = os.path.join(root, name)
                    z.write(full, os.path.relpath(full, os.path.dirname(pkg)))
    sc.addPyFile(zpath)


class _Progress(threading.Thread):
    """Prints active stages' task counts and bytes read, every few seconds, to stderr."""

    def __init__(self, sc, bytes_acc, total_bytes, interval=3.0):
        super().__init__(daemon=True)
        self.sc, self.bytes_acc, self.total, self.interval = sc, bytes_acc, total_bytes, interval
        self.stop = threading.Event()
        self.t0 = time.time()

    def line(self):
        tracker = self.sc.statusTracker()
        parts = []
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info:
                parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks "
                             f"({info.numActiveTasks} running)")
        done = self.bytes_acc.value
        pct = f" {100.0 * done / self.total:.0f}%" if self.total else ""
        return (f"[capture_job {time.time() - self.t0:6.1f}s] read {done / 1e6:.1f}/"
                f"{self.total / 1e6:.1f} MB{pct}; " + ("; ".join(parts) or "planning"))

    def run(self):
        last = None
        while not self.stop.wait(self.interval):
            try:
                ln = self.line()
            except Exception:
                return
            if ln != last:
                print(ln, file=sys.stderr, flush=True)
                last = ln


def _spark_schema():
    from rocketpy.capture.rows import SCHEMA
    return ", ".join(f"`{n}` {t}" for n, t in SCHEMA)


def run(spark, argv) -> dict:
    """Run the job in an existing session; returns the summary dictionary."""
    from pyspark.sql import functions as F

    if __name__ != "__main__":      # imported (tests): ship our functions by value
        from pyspark import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    args = build_parser().parse_args(argv)
    sc = spark.sparkContext
    if not args.no_ship_code:
        _ship_code(sc)
    from rocketpy.capture.source import local_path
    from rocketpy.capture.summary import format_summary

    files = _list_inputs(spark, args.inputs)
    chunk = int(args.chunk_mb * (1 << 20))
    total_bytes = sum(s for _, s in files)

    def readable(uri):
        return local_path(uri) if uri.startswith("file:") else uri

    names = [readable(u) for u, _ in files]
    small, ranges = [], []
    for idx, (uri, size) in enumerate(files):
        if size <= chunk:
            small.append((readable(uri), names[idx], size))
        else:
            from rocketpy.capture.split import plan_ranges, probe
            info = probe(readable(uri))
            for a, b in plan_ranges(info, size, chunk):
                ranges.append((idx, readable(uri), a, b))
    # pack small files into tasks of about one chunk each, at least one task per core
    cores = max(1, sc.defaultParallelism)
    target = max(1, min(chunk, sum(s for *_, s in small) // cores + 1))
    tasks, cur, cur_bytes = [], [], 0
    for item in sorted(small, key=lambda x: -x[2]):
        cur.append(item)
        cur_bytes += item[2]
        if cur_bytes >= target:
            tasks.append(cur)
            cur, cur_bytes = [], 0
    if cur:
        tasks.append(cur)

    acc = sc.accumulator({}, _stats_param())
    bytes_acc = sc.accumulator(0)
    progress = None
    if not args.quiet:
        progress = _Progress(sc, bytes_acc, total_bytes)
        progress.start()
    print(f"[capture_job] {len(files)} files, {total_bytes / 1e6:.1f} MB: {len(tasks)} whole-file "
          f"tasks, {len(ranges)} byte ranges", file=sys.stderr, flush=True)
    t0 = time.time()
    schema = _spark_schema()
    ports = args.ports
    parts = []
    if tasks:
        parts.append(spark.range(len(tasks), numPartitions=len(tasks))
                     .mapInArrow(_decode_whole_files(tasks, ports, acc, bytes_acc), schema))
    if ranges:
        seg_schema = ", ".join(f"`{n}` {t}" for n, t in SEG_FIELDS)
        segs = (spark.range(len(ranges), numPartitions=len(ranges))
                .mapInArrow(_read_ranges(ranges, ports, acc, bytes_acc), seg_schema))
        nparts = args.partitions or max(2, 2 * cores)
        parts.append(segs.repartition(nparts, "flow")
                     .sortWithinPartitions("flow", "offset")
                     .mapInArrow(_decode_flows(names, ports, acc), schema))
    if not parts:
        raise SystemExit("capture_job: no input files")
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    out_dir = args.output.rstrip("/")
    frames_path = out_dir + "/frames"
    if args.format == "parquet":
        df.write.mode("overwrite").parquet(frames_path)
        table = spark.read.parquet(frames_path)
    elif args.format == "json":
        df.write.mode("overwrite").json(frames_path)
        table = spark.read.schema(schema).json(frames_path)
    else:
        df.withColumn("ext_fields", F.to_json("ext_fields")).write.mode("overwrite") \
            .option("header", True).csv(frames_path)
        table = (spark.read.option("header", True)
                 .schema(schema.replace("`ext_fields` map<string,string>", "`ext_fields` string"))
                 .csv(frames_path))
    elapsed = time.time() - t0
    if progress:
        progress.stop.set()
    stats = dict(acc.value)
    stats["files"] = len(files)
    summary = _summary(table, stats) if not args.no_summary else {}
    summary["elapsed_s"] = elapsed
    summary["input_bytes"] = total_bytes
    if not args.no_summary:
        text = format_summary(summary)
        text += (f"\n\ndecoded {total_bytes / 1e6:.1f} MB in {elapsed:.1f} s "
                 f"({total_bytes / 1e6 / max(elapsed, 1e-9):.1f} MB/s, "
                 f"{summary['frames'] / max(elapsed, 1e-9):.0f} frames/s)")
        print(text)
        _write_text(spark, out_dir + "/summary.txt", text)
        _write_text(spark, out_dir + "/summary.json",
                    json.dumps(summary, default=str, indent=1, sort_keys=True))
    if args.plots:
        _plots(spark, table, out_dir)
    return summary


def _write_text(spark, uri, text):
    """Write a small text file through Hadoop's FileSystem (works on any filesystem)."""
    if "://" not in uri and not uri.startswith("file:"):
        with open(uri, "w", encoding="utf-8") as f:
            f.write(text)
        return
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    out.write(bytearray(text.encode("utf-8")))
    out.close()


def _summary(table, stats) -> dict:
    from pyspark.sql import functions as F
    table = table.cache()
    agg = table.agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("t0"),
                    F.max("ts").alias("t1")).collect()[0]
    req = table.where(~F.col("is_response") & F.col("code").isNotNull())
    rsp = table.where(F.col("is_response") & F.col("code").isNotNull())

    def counts(df, *cols):
        return {tuple(r[c] for c in cols) if len(cols) > 1 else r[cols[0]]: r["count"]
                for r in df.groupBy(*cols).count().collect()}

    lat = {}
    for r in (rsp.where(F.col("latency_ms").isNotNull()).groupBy("request_code")
              .agg(F.count(F.lit(1)).alias("n"),
                   F.percentile_approx("latency_ms", [0.5, 0.99], 10000).alias("p"),
                   F.max("latency_ms").alias("mx")).collect()):
        lat[r["request_code"]] = {"n": r["n"], "p50": r["p"][0], "p99": r["p"][1], "max": r["mx"]}
    talkers = (table.groupBy("src").agg(F.count(F.lit(1)).alias("n"),
                                         F.sum("frame_len").alias("b"))
               .orderBy(F.desc("n"), F.desc("b"), "src").limit(10).collect())
    errors = counts(table.where(F.col("error").isNotNull())
                    .withColumn("kind", F.substring_index("error", ":", 1)), "kind")
    stats = dict(stats)
    unanswered = stats.pop("unanswered_requests", {}) or {}
    return {
        "frames": agg["n"],
        "requests": counts(req, "code"),
        "oneway": counts(req.where(F.col("is_oneway")), "code"),
        "responses": counts(rsp, "code"),
        "error_responses": {f"{k[0]}:{k[1]}": v for k, v in
                            counts(rsp.where(F.col("code") != 0), "request_code", "code").items()},
        "latency_ms": lat,
        "unanswered_requests": {int(k): v for k, v in unanswered.items() if v},
        "unmatched_responses": rsp.where(F.col("request_code").isNull()).count(),
        "decode_errors": errors,
        "top_talkers": [(r["src"], r["n"], r["b"] or 0) for r in talkers],
        "first_ts": agg["t0"],
        "last_ts": agg["t1"],
        "stats": stats,
    }


def _plots(spark, table, out_dir):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from rocketpy.capture.plots import plot_latency, plot_rate
    local = out_dir[5:] if out_dir.startswith("file:") else out_dir
    if "://" in local:
        local = tempfile.mkdtemp(prefix="capture-plots-")
        print(f"[capture_job] plots written locally to {local}", file=sys.stderr)
    os.makedirs(os.path.join(local, "plots"), exist_ok=True)
    w = Window.partitionBy("request_code").orderBy(F.rand(1))
    sample = (table.where(F.col("latency_ms").isNotNull())
              .withColumn("k", F.row_number().over(w)).where(F.col("k") <= 5000)
              .select("request_code", "latency_ms").collect())
    latency: dict = {}
    for r in sample:
        latency.setdefault(r["request_code"], []).append(r["latency_ms"])
    req = table.where(~F.col("is_response") & F.col("code").isNotNull())
    span = req.agg(F.min("ts"), F.max("ts")).collect()[0]
    bucket = 1.0
    if span[0] is not None:
        bucket = max(1.0, (span[1] - span[0]) / 1000.0)
    rate: dict = {}
    for r in (req.groupBy("code", F.floor(F.col("ts") / bucket).alias("b")).count().collect()):
        rate.setdefault(r["code"], {})[r["b"] * bucket] = r["count"]
    plot_latency(latency, os.path.join(local, "plots", "latency.png"))
    plot_rate(rate, os.path.join(local, "plots", "rate.png"), bucket_s=bucket)


def main(argv=None) -> int:
    from pyspark.sql import SparkSession
    args = build_parser().parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("rocketpy-capture")
    if args.master:
        builder = builder.master(args.master)
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):     # plain python, not spark-submit
        builder = builder.master(os.environ.get("MASTER", "local[*]"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CAPTURE_JOB_LOG_LEVEL", "WARN"))
    try:
        run(spark, argv if argv is not None else sys.argv[1:])
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
