"""PySpark job: RocketMQ wire captures (pcap/pcapng) -> a table of frames, at any scale.

Layer: ``tools/`` (the only place pyspark is imported); the decoding itself is
``rocketpy.capture`` -- the same engines the in-process ``rocketpy-capture`` runs (the compiled
core when it is built), so both produce the same rows (schema: ``rocketpy.capture.rows.SCHEMA``,
documented in docs/capture.md).

    spark-submit tools/capture_job.py INPUT... --output DIR [--format parquet|json|csv]
        [--port N]... [--chunk-mb 128] [--one-capture] [--plots] [--no-summary]

INPUT: files, directories (recursive) and globs on any Hadoop filesystem Spark can list
(``file:``, ``hdfs://``, ``s3a://``, ...).  Output in DIR: ``frames/`` (the table),
``summary.txt`` / ``summary.json`` (also printed), ``plots/latency.png`` and ``plots/rate.png``.

How the work is spread (it follows bytes, not connections: see ``rocketpy.capture.plan``):

* files are listed by Spark's Hadoop FileSystem on the driver (path and size only);
* captures up to ``--chunk-mb`` are packed into tasks and decoded whole, in the task;
* larger captures, and every file of a rotated set read as one capture (``--one-capture``), are
  cut into byte ranges: a first stage reads each range's TCP headers (the plan), the driver
  works out every connection's id and stream offsets from them, then each range decodes its own
  packets (reading ahead only to finish its last frames) and the driver stitches what crosses
  range boundaries (responses to requests of earlier ranges).  Nothing is shuffled.
* executors read their byte ranges with Python I/O: local paths directly, other URIs through
  ``pyarrow.fs`` (HDFS, S3, GCS) or ``fsspec``; the job ships the ``rocketpy`` package, compiled
  core included, to them as an archive unpacked in each executor's working directory
  (``--no-ship-code`` when it is installed there).
* in local mode the driver (and its UI) listen on 127.0.0.1 unless ``SPARK_LOCAL_IP`` or
  ``spark.driver.bindAddress``/``spark.driver.host`` say otherwise (:func:`loopback_defaults`).
* progress (bytes read, tasks per stage) goes to stderr while it runs.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time

__all__ = ["main", "run", "build_parser", "loopback_defaults"]

try:                                    # run from a source checkout: the repo root holds rocketpy
    import rocketpy
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import rocketpy

SHIPPED_NAME = "rocketpy-capture-code"
#: started by spark-submit (which merges this process's stderr into the JVM's stdout)
SUBMITTED = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="capture_job.py",
                                description="Decode RocketMQ frames from captures with Spark.")
    p.add_argument("inputs", nargs="+", metavar="INPUT")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="where frames/ and the summary go; refused when DIR/frames exists")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the frames (and summary) an earlier run left in --output")
    p.add_argument("--format", choices=spark_formats(), default="parquet",
                   help="; ".join(f"{f.name}: {f.help}" for f in _formats().values()
                                  if f.spark) + " (default: parquet)")
    p.add_argument("--port", type=int, action="append", dest="ports",
                   help="only segments to/from this port (repeatable; default: all ports)")
    p.add_argument("--chunk-mb", type=float, default=128.0,
                   help="byte-range size (default 128 MiB, an HDFS block); smaller captures are "
                        "decoded whole in one task")
    p.add_argument("--one-capture", action="store_true",
                   help="the inputs are one capture split by rotation (tcpdump -C/-G/-W): read "
                        "in order of their first packet, connections carrying on across files")
    p.add_argument("--engine", choices=("auto", "native", "python"), default="auto",
                   help="decoder on the executors (default: the compiled one when it imports)")
    p.add_argument("--plots", action="store_true", help="write plots/latency.png and rate.png")
    p.add_argument("--no-summary", action="store_true")
    p.add_argument("--master", help="Spark master when run with plain python (default local[*])")
    p.add_argument("--no-ship-code", action="store_true",
                   help="do not ship the rocketpy package to the executors (it is installed there)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


# ---- pieces that run on executors (they import rocketpy there) --------------------------------

def _use_shipped_code():
    """Put the shipped package (compiled core included) first on the executor's path."""
    try:
        from pyspark import SparkFiles
        path = SparkFiles.get(SHIPPED_NAME)
    except Exception:
        return
    if os.path.isdir(path) and path not in sys.path:
        sys.path.insert(0, path)


def _engine(name):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the driver reports which engine ran, once
        from rocketpy.capture import engine
    return engine.BatchDecoder if name == "auto" else engine.ENGINES[name]


class _Progress:
    """Executor side of the progress display: counts the bytes a task reads and tells the
    driver every half second (one UDP datagram; best effort, nothing waits for it).  ``addr``
    is the driver's ``(host, port, token)``: the token, which travels only inside the job,
    prefixes every datagram."""

    def __init__(self, addr, key):
        self.key, self.done, self.last = key, 0, 0.0
        self.addr, self.token = (tuple(addr[:2]), addr[2]) if addr else (None, None)
        self.sock = None
        if addr:
            try:
                self.sock = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET,
                                          socket.SOCK_DGRAM)
            except OSError:
                self.sock = None

    def add(self, n):
        self.done += n
        now = time.monotonic()
        if self.sock is not None and now - self.last >= 0.5:
            self.last = now
            self.send()

    def send(self):
        if self.sock is not None:
            try:
                self.sock.sendto(f"{self.token} {self.key} {self.done}".encode(), self.addr)
            except OSError:
                pass

    def close(self):
        self.send()
        if self.sock is not None:
            self.sock.close()


class _Counting:
    """A file object that counts what is read from it."""

    def __init__(self, f, progress):
        self.f, self.progress = f, progress

    def read(self, n=-1):
        data = self.f.read(n)
        self.progress.add(len(data))
        return data

    def readinto(self, b):
        n = self.f.readinto(b)
        self.progress.add(n or 0)
        return n

    def __getattr__(self, name):
        return getattr(self.f, name)


def _whole_files(tasks, opts, acc, progress_addr):
    """mapInArrow function: each input row's id names a list of (path, name, size) decoded
    whole, file by file."""
    def fn(batches):
        _use_shipped_code()
        from rocketpy.capture.stats import Stats
        from rocketpy.capture.engine import decode_batches
        cls = _engine(opts["engine"])
        for batch in batches:
            for tid in batch.column(0).to_pylist():
                stats, errors = Stats(), []
                names = {path: name for path, name, _ in tasks[tid]}
                for path, name, size in tasks[tid]:
                    yield from decode_batches([path], ports=opts["ports"], stats=stats,
                                              errors=errors, engine=cls, names=names)
                    _Progress(progress_addr, f"w{tid}:{name}").add(size)
                acc.add({"stats": dict(stats), "engines": {cls.name: 1},
                         "errors": [(names[p], m) for p, m in errors]})
    return fn


def _open_range(r, progress):
    import contextlib

    from rocketpy.capture.source import open_capture
    from rocketpy.capture.split import seek_record

    @contextlib.contextmanager
    def opened():
        with open_capture(r.path) as (f, info):
            start = seek_record(f, info, r.start, r.name)
            yield _Counting(f, progress), info, start
    return opened()


def _plan_ranges(ranges, opts, progress_addr):
    """mapInArrow function: range ids -> (id, pickled plan of the range's TCP headers)."""
    def fn(batches):
        _use_shipped_code()
        import pyarrow as pa
        from rocketpy.capture.engine import SCANNERS, NATIVE
        from rocketpy.capture.readers import CaptureFormatError
        scan = SCANNERS["native" if NATIVE is not None and opts["engine"] != "python"
                        else "python"]
        for batch in batches:
            for rid in batch.column(0).to_pylist():
                r = ranges[rid]
                progress = _Progress(progress_addr, f"p{rid}")
                try:
                    with _open_range(r, progress) as (f, info, start):
                        result = scan(f, info, start, r.end, opts["ports"])
                except (CaptureFormatError, OSError, EOFError) as exc:
                    result = {"packets": 0, "captured_bytes": 0, "flows": {}, "error": str(exc)}
                progress.close()
                yield pa.RecordBatch.from_pydict({"rid": [rid], "scan": [pickle.dumps(result)]})
    return fn


def _decode_ranges(ranges, infos, opts, acc, progress_addr):
    """mapInArrow function: (range id, pickled RangePlan) -> frame rows of that range."""
    def fn(batches):
        _use_shipped_code()
        import contextlib

        from rocketpy.capture.plan import decode_range, next_file
        from rocketpy.capture.readers import CaptureFormatError
        from rocketpy.capture.source import open_capture
        cls = _engine(opts["engine"])
        for batch in batches:
            rows = batch.to_pydict()
            for rid, blob in zip(rows["rid"], rows["plan"]):
                r = ranges[rid]
                dec = cls(ports=opts["ports"], plan=pickle.loads(blob))
                progress = _Progress(progress_addr, f"d{rid}")
                following = None
                nxt = next_file(ranges, rid)
                if nxt is not None:
                    @contextlib.contextmanager
                    def opened(nxt=nxt, progress=progress):
                        with open_capture(nxt.path) as (f2, _info):
                            yield _Counting(f2, progress)
                    following = (nxt, infos[nxt.file_index], opened)
                errors = []
                try:
                    with _open_range(r, progress) as (f, info, start):
                        yield from decode_range(dec, r, info, f, start, following)
                except (CaptureFormatError, OSError, EOFError) as exc:
                    errors.append((r.name, str(exc)))     # what came before it still counts
                    yield from dec.finish()
                progress.close()
                acc.add({"stats": dict(dec.stats), "edges": {rid: dec.edges},
                         "engines": {dec.name: 1}, "task_bytes": {rid: progress.done},
                         "errors": errors})
    return fn


class _JobAccumulator:
    """Merges what tasks report: counters, per-range edges and bytes, engines used."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        from rocketpy.capture.stats import Stats
        out = dict(a)
        out["stats"] = Stats(a.get("stats", {})).merge(b.get("stats", {}))
        for key in ("edges", "task_bytes"):
            out[key] = {**a.get(key, {}), **b.get(key, {})}    # a retried task reports again
        out["engines"] = Stats(a.get("engines", {})).merge(b.get("engines", {}))
        out["errors"] = a.get("errors", []) + b.get("errors", [])
        return out


def _accumulator(sc):
    from pyspark.accumulators import AccumulatorParam

    class P(_JobAccumulator, AccumulatorParam):
        pass
    return sc.accumulator({}, P())


# ---- driver -----------------------------------------------------------------------------------

class _Console:
    """Where progress and notes go: stderr.  Under spark-submit the Python driver's stderr is
    merged into the JVM's stdout (PythonRunner), so there it is the JVM's System.err."""

    def __init__(self, sc):
        self.err = sc._jvm.java.lang.System.err if SUBMITTED else None

    def line(self, text):
        if self.err is not None:
            self.err.println(text)
            self.err.flush()
        else:
            print(text, file=sys.stderr, flush=True)


def _list_inputs(spark, inputs):
    """[(uri, size, walked)] of every file under the inputs, through Hadoop's FileSystem;
    ``walked``: found in a directory (not named, nor matched by a glob)."""
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
                        out.append((f.getPath().toString(), f.getLen(), True))
            else:
                out.append((st.getPath().toString(), st.getLen(), False))
    seen = set()
    return [x for x in sorted(out) if not (x[0] in seen or seen.add(x[0]))]


_SHIPPED: set = set()


def _ship_code(sc):
    """Ship the rocketpy package -- compiled core included, which a zip on the Python path
    could not load -- as an archive each executor unpacks into its working directory and puts
    first on its path (``addFile`` of a directory works in local mode only)."""
    if sc.applicationId in _SHIPPED:
        return
    _SHIPPED.add(sc.applicationId)
    pkg = os.path.dirname(os.path.abspath(rocketpy.__file__))
    staging = tempfile.mkdtemp(prefix="rocketpy-capture-")
    shutil.copytree(pkg, os.path.join(staging, "code", "rocketpy"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_native"))
    archive = shutil.make_archive(os.path.join(staging, SHIPPED_NAME), "zip",
                                  os.path.join(staging, "code"))
    sc.addArchive(f"{archive}#{SHIPPED_NAME}")


class _ProgressDisplay(threading.Thread):
    """Driver side: tasks' byte counts (UDP datagrams from the executors, and the totals of
    finished tasks) and Spark's task counts, every few seconds, on the console.

    The port is open to whoever can reach the driver: a datagram counts only with this job's
    random token, and at most :data:`MAX_PROGRESS_KEYS` tasks are remembered."""

    MAX_PROGRESS_KEYS = 1 << 16

    def __init__(self, sc, console, total_bytes, interval=3.0):
        super().__init__(daemon=True)
        self.sc, self.console, self.total, self.interval = sc, console, total_bytes, interval
        self.stop = threading.Event()
        self.t0 = time.time()
        self.seen: dict = {}
        self.phase = "planning"
        host = sc.getConf().get("spark.driver.host", "127.0.0.1")
        self.sock = None
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.socket(family, socket.SOCK_DGRAM)
            self.sock.bind((host, 0))
            self.sock.settimeout(0.2)
            self.addr = (*self.sock.getsockname()[:2], secrets.token_hex(16))
        except OSError:
            self.sock, self.addr = None, None

    def count(self, datagram: bytes) -> None:
        """Take one executor datagram ``token key bytes``; anything else is ignored."""
        fields = datagram.decode("ascii", "replace").split()
        if len(fields) != 3 or fields[0] != self.addr[2]:
            return
        key, n = fields[1], int(fields[2])
        if key in self.seen or len(self.seen) < self.MAX_PROGRESS_KEYS:
            self.seen[key] = max(self.seen.get(key, 0), n)

    def done(self, prefix):
        return sum(v for k, v in self.seen.items() if k.startswith(prefix))

    def line(self):
        tracker = self.sc.statusTracker()
        parts = []
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info:
                parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks "
                             f"({info.numActiveTasks} running)")
        prefix = {"planning": "p", "decoding": ("d", "w")}[self.phase]
        done = sum(self.done(p) for p in prefix) if isinstance(prefix, tuple) else self.done(prefix)
        pct = f" {100.0 * min(done, self.total) / self.total:.0f}%" if self.total else ""
        return (f"[capture_job {time.time() - self.t0:6.1f}s] {self.phase}: read "
                f"{min(done, self.total) / 1e6:.1f}/{self.total / 1e6:.1f} MB{pct}; "
                + ("; ".join(parts) or "waiting"))

    def run(self):
        last, next_print = None, time.time() + self.interval
        while not self.stop.is_set():
            if self.sock is not None:
                try:
                    self.count(self.sock.recv(512))
                except (OSError, ValueError):
                    pass
            else:
                self.stop.wait(0.2)
            if time.time() >= next_print:
                next_print = time.time() + self.interval
                try:
                    ln = self.line()
                except Exception:
                    return
                if ln != last:
                    self.console.line(ln)
                    last = ln
        if self.sock is not None:
            self.sock.close()


def _spark_schema():
    from rocketpy.capture.schema import SCHEMA
    return ", ".join(f"`{n}` {t}" for n, t in SCHEMA)


def _walked_capture(path):
    """A file found in a directory is decoded when its first bytes are a capture's (a pcap,
    pcapng or gzip magic), as rocketpy-capture decides: a README.md beside the captures is
    not a bad file."""
    from rocketpy.capture.source import is_capture_head, open_binary
    try:
        with open_binary(path) as f:
            return is_capture_head(f.read(4))
    except OSError:
        return True   # unreadable: reported as a bad file by the probe


def _probe(files, one_capture, console):
    """(path, name, size, CaptureInfo or None for gzip) per readable capture, in capture order
    for a rotated set; files found in a directory that are not captures are left out, named
    files that are not are reported and left out."""
    from rocketpy.capture.readers import CaptureFormatError
    from rocketpy.capture.source import first_timestamp, local_path
    from rocketpy.capture.split import probe
    out, bad = [], 0
    for uri, size, walked in files:
        path = local_path(uri) if uri.startswith("file:") else uri
        if walked and not _walked_capture(path):
            continue
        try:
            info = probe(path)
            first = first_timestamp(path) if one_capture else 0
        except CaptureFormatError as exc:
            if "gzip" in str(exc) and not one_capture:
                out.append((path, path, size, None, 0))
                continue
            console.line(f"[capture_job] {path}: {exc}")
            bad += 1
            continue
        except (OSError, EOFError) as exc:
            console.line(f"[capture_job] {path}: {exc}")
            bad += 1
            continue
        out.append((path, path, size, info, first))
    if one_capture:
        out.sort(key=lambda x: (x[4] is None, x[4] or 0, x[0]))
    return [x[:4] for x in out], bad


def run(spark, argv) -> dict:
    """Run the job in an existing session; returns the summary dictionary."""
    from rocketpy.capture.arrow import rows_to_batch
    from rocketpy.capture.stats import Stats
    from rocketpy.capture.plan import Planner, plan_ranges, stitch
    from rocketpy.capture.summary import format_summary

    if __name__ != "__main__":      # imported (tests): ship our functions by value
        from pyspark import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    args = build_parser().parse_args(argv)
    sc = spark.sparkContext
    console = _Console(sc)
    frames_path = args.output.rstrip("/") + "/frames"
    if not args.overwrite and _exists(spark, frames_path):   # before any work
        raise SystemExit(f"capture_job: {frames_path} exists (an earlier run's frames): "
                         "give --overwrite to replace them, or another --output")
    if not args.no_ship_code:
        _ship_code(sc)
    files, bad_files = _probe(_list_inputs(spark, args.inputs), args.one_capture, console)
    chunk = int(args.chunk_mb * (1 << 20))
    total_bytes = sum(size for _, _, size, _ in files)
    whole = [f for f in files if not args.one_capture and (f[3] is None or f[2] <= chunk)]
    split = [f for f in files if f not in whole]
    ranges = plan_ranges(split, chunk, args.one_capture)
    # pack whole files into tasks of about one chunk each, at least one task per core
    cores = max(1, sc.defaultParallelism)
    target = max(1, min(chunk, sum(f[2] for f in whole) // cores + 1))
    tasks, cur, cur_bytes = [], [], 0
    for path, name, size, _ in sorted(whole, key=lambda x: -x[2]):
        cur.append((path, name, size))
        cur_bytes += size
        if cur_bytes >= target:
            tasks.append(cur)
            cur, cur_bytes = [], 0
    if cur:
        tasks.append(cur)
    if not tasks and not ranges:
        raise SystemExit("capture_job: no capture among the inputs")
    opts = {"engine": args.engine, "ports": args.ports}
    acc = _accumulator(sc)
    progress = _ProgressDisplay(sc, console, total_bytes)
    if not args.quiet:
        progress.start()
        console.line(f"[capture_job] {len(files)} files, {total_bytes / 1e6:.1f} MB: "
                     f"{len(tasks)} whole-file tasks, {len(ranges)} byte ranges")
    t0 = time.time()
    schema = _spark_schema()
    parts = []
    planner = None
    if ranges:
        scans = {rid: pickle.loads(blob) for rid, blob in
                 spark.range(len(ranges), numPartitions=len(ranges))
                 .mapInArrow(_plan_ranges(ranges, opts, progress.addr), "rid long, scan binary")
                 .collect()}
        planner = Planner(ranges, scans)
        plans = [(r.index, pickle.dumps(planner.plan(r))) for r in ranges]
        infos = {i: f[3] for i, f in enumerate(split)}
        parts.append(spark.createDataFrame(sc.parallelize(plans, len(plans)),
                                           "rid long, plan binary")
                     .mapInArrow(_decode_ranges(ranges, infos, opts, acc, progress.addr), schema))
    progress.phase = "decoding"
    if tasks:
        parts.append(spark.range(len(tasks), numPartitions=len(tasks))
                     .mapInArrow(_whole_files(tasks, opts, acc, progress.addr), schema))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    out_dir = args.output.rstrip("/")
    _write(df, args.format, frames_path, "overwrite")
    value = acc.value
    stats = Stats(value.get("stats", {}))
    if planner is not None:
        rows, settled = stitch(ranges, value.get("edges", {}))
        stats.merge(planner.stats).merge(settled)
        if rows:
            import pyarrow as pa
            _write(spark.createDataFrame(pa.Table.from_batches([rows_to_batch(rows)])),
                   args.format, frames_path, "append")
    elapsed = time.time() - t0
    progress.stop.set()
    engines = dict(value.get("engines", {}))
    if engines.get("python") and args.engine == "auto":
        console.line("[capture_job] the compiled decoder did not load on the executors: they used "
                     "the pure-Python one (the same rows, slower); see docs/capture.md")
    failed = {name for name, _ in value.get("errors", [])}
    for name, msg in value.get("errors", []):
        console.line(f"[capture_job] {name}: {msg}")
    stats["files"] = len(files) - len(failed)
    if bad_files or failed:
        stats["bad_files"] = bad_files + len(failed)
    task_bytes = list(value.get("task_bytes", {}).values())
    summary = {}
    if not args.no_summary:
        summary = _summary(_read_back(spark, args.format, frames_path, schema), stats)
    summary.update({"elapsed_s": elapsed, "input_bytes": total_bytes, "engines": engines,
                    "range_task_bytes": {"max": max(task_bytes, default=0),
                                         "mean": sum(task_bytes) / max(1, len(task_bytes)),
                                         "tasks": len(task_bytes)}})
    if not args.no_summary:
        text = format_summary(summary)
        text += (f"\n\ndecoded {total_bytes / 1e6:.1f} MB in {elapsed:.1f} s "
                 f"({total_bytes / 1e6 / max(elapsed, 1e-9):.1f} MB/s, "
                 f"{summary['frames'] / max(elapsed, 1e-9):.0f} frames/s)")
        print(text, flush=True)
        _write_text(spark, out_dir + "/summary.txt", text)
        _write_text(spark, out_dir + "/summary.json",
                    json.dumps(summary, default=str, indent=1, sort_keys=True))
        if args.plots:
            _plots(spark, _read_back(spark, args.format, frames_path, schema), out_dir, console)
    return summary


#: CSV as RFC 4180 writes it: fields with a delimiter, quote or line break in double quotes,
#: a quote inside doubled; ext_fields (a map) as its JSON text
_CSV = {"header": True, "quote": '"', "escape": '"', "multiLine": True}


def _write_csv(df, path, mode):
    from pyspark.sql import functions as F
    df.withColumn("ext_fields", F.to_json("ext_fields")).write.mode(mode).options(**_CSV).csv(path)


def _read_csv(spark, path, schema):
    return (spark.read.options(**_CSV)
            .schema(schema.replace("`ext_fields` map<string,string>", "`ext_fields` string"))
            .csv(path))


def _hadoop_path(spark, uri):
    """``(FileSystem, Path)`` of ``uri`` (a local path: ``file:``) through Hadoop."""
    if "://" not in uri and not uri.startswith("file:"):
        uri = "file:" + os.path.abspath(uri)
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def _exists(spark, uri):
    fs, path = _hadoop_path(spark, uri)
    return bool(fs.exists(path))


#: the Spark writer of each format of rocketpy.capture.formats.FORMATS marked ``spark``, and
#: how the job reads it back for the summary: (write(df, path, mode), read(spark, path, schema))
SPARK_WRITERS = {
    "parquet": (lambda df, path, mode: df.write.mode(mode).parquet(path),
                lambda spark, path, schema: spark.read.parquet(path)),
    "json": (lambda df, path, mode: df.write.mode(mode).json(path),
             lambda spark, path, schema: spark.read.schema(schema).json(path)),
    "csv": (_write_csv, _read_csv),
}


def _formats():
    from rocketpy.capture.formats import FORMATS
    return FORMATS


def spark_formats(formats=None, writers=None) -> list[str]:
    """The formats the job offers: those of the table marked ``spark``, each of which must have
    a Spark writer here (a start-up error names the one that has none)."""
    names = [f.name for f in (formats or _formats()).values() if f.spark]
    missing = [name for name in names if name not in (SPARK_WRITERS if writers is None
                                                      else writers)]
    if missing:
        raise RuntimeError(f"capture_job: the format table offers {', '.join(missing)} to "
                           "Spark, but the job has no Spark writer for it (SPARK_WRITERS)")
    return names


def _write(df, fmt, path, mode):
    SPARK_WRITERS[fmt][0](df, path, mode)


def _read_back(spark, fmt, path, schema):
    return SPARK_WRITERS[fmt][1](spark, path, schema)


def _write_text(spark, uri, text):
    """Write a small text file through Hadoop's FileSystem (works on any filesystem)."""
    if "://" not in uri and not uri.startswith("file:"):
        with open(uri, "w", encoding="utf-8") as f:
            f.write(text)
        return
    fs, path = _hadoop_path(spark, uri)
    out = fs.create(path, True)
    out.write(bytearray(text.encode("utf-8")))
    out.close()


def _summary(table, stats) -> dict:
    from pyspark.sql import functions as F
    from rocketpy.capture.summary import NOT_ERRORS
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
    summary = {
        "frames": agg["n"],
        "requests": counts(req, "code"),
        "oneway": counts(req.where(F.col("is_oneway")), "code"),
        "responses": counts(rsp, "code"),
        "error_responses": {f"{k[0]}:{k[1]}": v for k, v in
                            counts(rsp.where(~F.col("code").isin(*sorted(NOT_ERRORS))),
                                   "request_code", "code").items()},
        "latency_ms": lat,
        "unanswered_requests": {int(k): v for k, v in unanswered.items() if v},
        "unmatched_responses": rsp.where(F.col("request_code").isNull()).count(),
        "decode_errors": errors,
        "top_talkers": [(r["src"], r["n"], r["b"] or 0) for r in talkers],
        "first_ts": agg["t0"],
        "last_ts": agg["t1"],
        "stats": stats,
    }
    table.unpersist()
    return summary


def _plots(spark, table, out_dir, console):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from rocketpy.capture.plots import PLOTS_HINT, plot_latency, plot_rate, plots_available
    if not plots_available():
        console.line(f"[capture_job] {PLOTS_HINT}")
        return
    local = out_dir[5:] if out_dir.startswith("file:") else out_dir
    if "://" in local:
        local = tempfile.mkdtemp(prefix="capture-plots-")
        console.line(f"[capture_job] plots written locally to {local}")
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


def _quiet_jvm():
    """Spark's ~45 startup INFO lines are noise here: WARN and up only (CAPTURE_JOB_LOG_LEVEL
    overrides).  Spark sets its logging up when the first SparkContext logs, resetting any level
    set before, so set it up first, then lower it; ``spark.log.level`` keeps it there."""
    from pyspark import SparkContext
    SparkContext._ensure_initialized()
    jvm = SparkContext._jvm
    level = os.environ.get("CAPTURE_JOB_LOG_LEVEL", "WARN").upper()
    jvm.org.apache.spark.SparkConf().initializeLogIfNecessary(False)
    log4j = jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    configurator.setRootLevel(log4j.Level.toLevel(level))
    # "Unable to load native-hadoop library": Spark's own fallback works, nothing to act on
    configurator.setLevel("org.apache.hadoop.util.NativeCodeLoader", log4j.Level.ERROR)
    return level


LOOPBACK = "127.0.0.1"
#: what says where the driver listens; a user who set any of them has chosen
_ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")


def loopback_defaults(master, is_set, environ, submitted):
    """``(environment, settings)`` that keep a ``local[...]`` job on 127.0.0.1 unless the user
    chose an address (``SPARK_LOCAL_IP``, ``spark.driver.bindAddress`` or ``.host``).

    Spark's own default is the host's external address, and its UI listens on every interface
    whatever the driver keys say (it binds to ``SPARK_LOCAL_IP`` or ``0.0.0.0``): run with plain
    python, the JVM is not started yet and ``SPARK_LOCAL_IP`` covers everything; under
    spark-submit it already runs, so the UI is turned off unless ``spark.ui.enabled`` was set."""
    if not master.startswith("local") or environ.get("SPARK_LOCAL_IP") \
            or any(is_set(key) for key in _ADDRESS_KEYS):
        return {}, {}
    settings = {key: LOOPBACK for key in _ADDRESS_KEYS}
    if not submitted:
        return {"SPARK_LOCAL_IP": LOOPBACK}, settings
    if not is_set("spark.ui.enabled"):
        settings["spark.ui.enabled"] = "false"
    return {}, settings


def main(argv=None) -> int:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    args = build_parser().parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName("rocketpy-capture")
               .config("spark.ui.showConsoleProgress", "false")     # ours is on stderr
               .config("spark.sql.debug.maxToStringFields", "1000"))
    master = args.master or (None if SUBMITTED else os.environ.get("MASTER", "local[*]"))
    if master:                                # else spark-submit's --master
        builder = builder.master(master)
    given = SparkConf()                       # under spark-submit: its --master and --conf
    environ, settings = loopback_defaults(master or given.get("spark.master", "local[*]"),
                                          given.contains, os.environ, SUBMITTED)
    os.environ.update(environ)
    for key, value in settings.items():
        builder = builder.config(key, value)
    level = _quiet_jvm()
    spark = builder.config("spark.log.level", level).getOrCreate()
    try:
        run(spark, argv if argv is not None else sys.argv[1:])
    except FileNotFoundError as exc:
        print(f"capture_job: no such file or directory: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
