"""Capture-decoder benchmark: for the same file, in one run, back to back,

* a page-cache read (``cat``) and tshark's plain dissection (no RocketMQ dissector: the cost of
  merely walking the packets), the two references of issue 11;
* ``rocketpy-capture`` in-process with the compiled engine and with the pure-Python one, to
  Parquet and to JSON Lines (and, with ``--baseline DIR``, a previous release's CLI from that
  checkout);
* the Spark job on ``local[1]`` and ``local[2]`` (byte ranges);

and, for a capture made of one long connection (``--one-conn-mb``), the Spark job on
``local[1]``/``local[2]`` and the bytes each range task read (max/mean).  The file is built by
replaying the genuine fixture flows with new addresses, ports and sequence numbers; the
one-connection capture tiles one synthetic conversation.  Not a test; run by hand:

    python bench/capture_bench.py [--size-mb 1024] [--one-conn-mb 2048] [--baseline ../main]
                                  [--repeat 3]

The quick paths (``cat``, tshark, the compiled engine's CLI) are timed ``--repeat`` times and
the best run is reported (a shared machine's noise only ever adds time); the slow ones once.
"""
from __future__ import annotations

import argparse
import functools
import os
import resource
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"


def _fixture_packets():
    """[(relative ts_ns, Ethernet/IPv4/TCP bytes)] of every fixture, file after file."""
    out = []
    t = 0
    for f in sorted(FIXTURES.glob("*.pcap")):
        data = f.read_bytes()
        pos, first = 24, None
        last = 0
        while pos + 16 <= len(data):
            sec, usec, incl, _orig = struct.unpack_from("<IIII", data, pos)
            ts = sec * 1_000_000_000 + usec * 1000
            first = ts if first is None else first
            last = ts - first
            out.append((t + last, data[pos + 16:pos + 16 + incl]))
            pos += 16 + incl
        t += last + 1_000_000_000
    return out, t


def _write_pcap(path, size, replica):
    """Write records of ``replica(k)`` ([(ts_ns, bytes)]) until ``size`` bytes; (bytes, k)."""
    written, k = 24, 0
    with open(path, "wb", buffering=16 << 20) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        while written < size:
            chunks = []
            for t, b in replica(k):
                chunks.append(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000 // 1000,
                                          len(b), len(b)))
                chunks.append(b)
            blob = b"".join(chunks)
            f.write(blob)
            written += len(blob)
            k += 1
    return written, k


def build(path: str, size: int) -> tuple[int, int]:
    """The fixture flows, replayed with new addresses, ports and sequence numbers."""
    base, span = _fixture_packets()
    t0 = 1_800_000_000_000_000_000

    def replica(k):
        ip = bytes((10, (k >> 16) & 255, (k >> 8) & 255, k & 255))
        dseq = (k * 2_654_435_761) & 0xFFFFFFFF
        dport = k % 20000
        for ts, pkt in base:
            b = bytearray(pkt)
            if len(b) >= 34 and b[12:14] == b"\x08\x00" and b[23] == 6:
                b[26:30] = ip
                b[30:34] = ip
                l4 = 14 + (b[14] & 15) * 4
                if len(b) >= l4 + 12:
                    sp, dp, seq, ack = struct.unpack_from("!HHII", b, l4)
                    sp = sp if sp < 32768 else 32768 + (sp - 32768 + dport) % 28000
                    dp = dp if dp < 32768 else 32768 + (dp - 32768 + dport) % 28000
                    struct.pack_into("!HHII", b, l4, sp, dp, (seq + dseq) & 0xFFFFFFFF,
                                     (ack + dseq) & 0xFFFFFFFF if ack else 0)
            yield t0 + k * span + ts, bytes(b)
    return _write_pcap(path, size, replica)


def build_one_connection(path: str, size: int) -> tuple[int, int]:
    """One connection carrying ``size`` bytes: a synthetic conversation (registrations, route
    queries, answers, as a broker's connection to a NameServer repeats them) tiled end to end,
    its sequence numbers and clock running on."""
    import capture_synth as cs
    frames = cs.sample_exchange(6, big_every=3) * 400    # registrations and routes, repeated
    head = cs.conversation(frames[:2], step_ns=100_000, close=False)[:3]      # the handshake
    body = cs.conversation(frames, step_ns=100_000, handshake=False, close=False,
                           isn=(head[-1].seq, head[1].seq + 1))
    sent = [sum(len(s.payload) for s in body if s.sport == port) for port in (40000, 9876)]
    span = body[-1].ts_ns - body[0].ts_ns + 100_000
    pk = cs.packets(body)
    base = [(ts, cap) for ts, cap, _ in pk]

    def replica(k):
        if k == 0:
            for ts, cap, _ in cs.packets(head):
                yield ts, cap
        for ts, cap in base:
            b = bytearray(cap)
            sp, _dp, seq, ack = struct.unpack_from("!HHII", b, 34)
            mine, theirs = (sent[0], sent[1]) if sp == 40000 else (sent[1], sent[0])
            struct.pack_into("!II", b, 38, (seq + k * mine) & 0xFFFFFFFF,
                             (ack + k * theirs) & 0xFFFFFFFF)
            yield ts + k * span, bytes(b)
    return _write_pcap(path, size, replica)


#: CPU seconds (user + system) of the last command :func:`timed` ran
LAST_CPU = [0.0]


#: how often the quick paths run (the best run counts); set by ``--repeat``
REPEAT = [1]


def best(run):
    """The fastest of :data:`REPEAT` runs of ``run()`` (wall seconds); :data:`LAST_CPU` is that
    run's."""
    runs = []
    for _ in range(REPEAT[0]):
        runs.append((run(), LAST_CPU[0]))
    wall, LAST_CPU[0] = min(runs)
    return wall


def timed(cmd, env=None, cwd=None):
    """Wall seconds of ``cmd``; its CPU seconds go to :data:`LAST_CPU`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   env=dict(os.environ, **(env or {})), cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall


def bench_cat(path):
    subprocess.run(["cat", path], check=True, stdout=subprocess.DEVNULL)     # into the cache
    return best(lambda: timed(["cat", path]))


def bench_tshark(path):
    return best(lambda: timed(["tshark", "-n", "-r", path]))


def bench_cli(path, fmt, engine, out, checkout=ROOT):
    """The CLI of ``checkout`` in a fresh interpreter (the engine is chosen at import), writing
    to ``out`` (run from the checkout: ``python -m`` puts the working directory first)."""
    env = {"PYTHONPATH": str(checkout), "ROCKETPY_CAPTURE_ENGINE": engine}
    return timed([sys.executable, "-m", "rocketpy.capture.cli", os.path.abspath(path),
                  "--format", fmt, "-o", os.path.abspath(out)], env=env, cwd=checkout)


def bench_spark(inputs, master, chunk_mb, outdir, extra=()):
    """``(frames, cold, warm, summary)``: the job twice in one session -- the first pays for
    starting the Python workers and warming the JVM, the second is what a long-running
    session (or a capture many times larger) sees."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import capture_job
    spark = (SparkSession.builder.master(master).appName("capture-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            summary = capture_job.run(spark, [*inputs, "--output", outdir, "--chunk-mb",
                                              str(chunk_mb), "--no-summary", "--quiet", *extra])
            times.append(time.perf_counter() - t)
        frames = spark.read.parquet(outdir + "/frames").count()
    finally:
        spark.stop()
    return frames, times[0], times[1], summary


def line(label, mb, seconds, note=""):
    print(f"{label:<44} {mb:8.0f} MB {seconds:8.1f} s {mb / seconds:9.1f} MB/s  {note}", flush=True)
    return mb / seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=float, default=1024)
    p.add_argument("--out", default="/tmp/rmq-capture-bench.pcap")
    p.add_argument("--one-conn-mb", type=float, default=2048)
    p.add_argument("--one-conn-out", default="/tmp/rmq-capture-one-conn.pcap")
    p.add_argument("--chunk-mb", type=float, default=128, help="the job's default")
    p.add_argument("--baseline", help="a checkout of the previous release: time its CLI too")
    p.add_argument("--baseline-engine", default="python", choices=("python", "native"),
                   help="the previous release's engine (native: compare compiled cores)")
    p.add_argument("--skip-tshark", action="store_true")
    p.add_argument("--skip-python", action="store_true", help="skip the pure-Python engine")
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--masters", default="local[1],local[2]")
    p.add_argument("--repeat", type=int, default=3, help="runs of each quick path (best counts)")
    a = p.parse_args(argv)
    REPEAT[0] = max(1, a.repeat)
    for path, size, make in ((a.out, a.size_mb, build),
                             (a.one_conn_out, a.one_conn_mb, build_one_connection)):
        size = int(size * (1 << 20))
        if size and (not os.path.exists(path) or os.path.getsize(path) < size):
            t = time.perf_counter()
            n, k = make(path, size)
            print(f"built {path}: {n / 1e6:.0f} MB, {k} replicas, {time.perf_counter() - t:.0f} s",
                  flush=True)
    mb = os.path.getsize(a.out) / 1e6
    tmp = Path(a.out + ".bench-out")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    rate, cpu = {}, {}
    print(f"\n== {a.out}: {mb:.0f} MB ==", flush=True)
    rate["cat"] = line("page-cache read (cat)", mb, bench_cat(a.out))
    if not a.skip_tshark and shutil.which("tshark"):
        rate["tshark"] = line("tshark plain dissection", mb, bench_tshark(a.out))
    engines = ["native"] + ([] if a.skip_python else ["python"])
    for engine in engines:
        for fmt in ("parquet", "json"):
            run = functools.partial(bench_cli, a.out, fmt, engine, str(tmp / f"o.{fmt}"))
            wall = best(run) if engine == "native" else run()
            cpu[(engine, fmt)] = LAST_CPU[0]
            rate[(engine, fmt)] = line(f"rocketpy-capture --format {fmt} ({engine})", mb, wall,
                                       f"CPU {LAST_CPU[0]:.1f} s ({LAST_CPU[0] / wall:.2f} cores)")
    if a.baseline:
        for fmt in ("parquet", "json"):
            def run_baseline(fmt=fmt):
                return bench_cli(a.out, fmt, a.baseline_engine, str(tmp / f"b.{fmt}"), Path(a.baseline))
            wall = best(run_baseline) if a.baseline_engine == "native" else run_baseline()
            rate[("baseline", fmt)] = line(
                f"previous release --format {fmt} ({a.baseline_engine})", mb, wall,
                f"CPU {LAST_CPU[0]:.1f} s")
    if not a.skip_spark:
        for master in a.masters.split(","):
            frames, cold, warm, _ = bench_spark([a.out], master, a.chunk_mb, str(tmp / "spark"))
            rate[("spark", master)] = line(f"spark {master} (byte ranges)", mb, warm,
                                           f"{frames} frames; first job {cold:.1f} s")
    one, cold_rate = {}, {}
    if a.one_conn_mb and not a.skip_spark:
        mb1 = os.path.getsize(a.one_conn_out) / 1e6
        print(f"\n== {a.one_conn_out}: {mb1:.0f} MB, one connection ==", flush=True)
        line("rocketpy-capture --format parquet (native)", mb1,
             best(lambda: bench_cli(a.one_conn_out, "parquet", "native", str(tmp / "one.parquet"))))
        for master in a.masters.split(","):
            frames, cold, warm, summary = bench_spark([a.one_conn_out], master, a.chunk_mb,
                                                      str(tmp / "spark1"))
            cold_rate[master] = mb1 / cold
            tb = summary["range_task_bytes"]
            one[master] = line(f"spark {master} (byte ranges)", mb1, warm,
                               f"{frames} frames; first job {cold:.1f} s; task bytes max/mean "
                               f"{tb['max'] / 1e6:.1f}/{tb['mean'] / 1e6:.1f} MB = "
                               f"{tb['max'] / max(tb['mean'], 1):.2f} over {tb['tasks']} tasks")
    print("\n== against the goals of issue 11 ==")
    if "tshark" in rate:
        print(f"parquet (native) / tshark plain dissection: {rate[('native', 'parquet')] / rate['tshark']:.1f}x "
              "(goal >= 10x)")
    print(f"parquet (native): {rate[('native', 'parquet')]:.0f} MB/s, "
          f"{mb / cpu[('native', 'parquet')]:.0f} MB per CPU second (goal >= 150 MB/s per core)")
    if ("baseline", "json") in rate:
        print(f"json (native) / json (previous release): "
              f"{rate[('native', 'json')] / rate[('baseline', 'json')]:.1f}x (goal >= 5x)")
    if ("python", "json") in rate:
        print(f"json (native) / json (pure-Python engine): "
              f"{rate[('native', 'json')] / rate[('python', 'json')]:.1f}x")
    if len(one) == 2:
        l1, l2 = (one[m] for m in a.masters.split(","))
        c1, c2 = (cold_rate[m] for m in a.masters.split(","))
        print(f"one connection: spark local[2] / local[1]: {l2 / l1:.2f}x, first jobs {c2 / c1:.2f}x "
              "(goal >= 1.6x)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
