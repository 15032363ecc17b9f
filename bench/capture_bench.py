"""Capture-decoder benchmark: for the same file, in one run, back to back,

* a page-cache read (``cat``) and tshark's plain dissection (no RocketMQ dissector: the cost of
  merely walking the packets), the two references of issue 11;
* ``rocketpy-capture`` in-process with the compiled engine and with the pure-Python one, to
  Parquet and to JSON Lines (and, with ``--baseline DIR``, a previous release's CLI from that
  checkout);
* the Spark job on ``local[1]`` and ``local[2]`` (byte ranges);

then the start-up of ``rocketpy-capture`` (issue 33): on a 1 KB capture (a genuine fixture), the
CLI end to end per format, beside the bare interpreter (``python -c pass``), and when it hands
the decoder its first block of the capture ("starts decoding": the time from starting the
process); and, for a capture made of one long connection (``--one-conn-mb``), the Spark job on
``local[1]``/``local[2]`` and the bytes each range task read (max/mean).  The file is built by
replaying the genuine fixture flows with new addresses, ports and sequence numbers; the
one-connection capture tiles one synthetic conversation.  Not a test; run by hand:

    python bench/capture_bench.py [--size-mb 1024] [--one-conn-mb 2048] [--baseline ../old]
                                  [--baseline-engine native] [--repeat 5]

The quick paths (``cat``, tshark, the compiled engine's CLI, the baseline's, the start-up runs)
are run ``--repeat`` times, round robin (a shared machine's load then falls on all of them
alike), and reported as the best run and the spread (best / median / worst); the slow ones once.
The issue 33 figures: 151 MB (``--size-mb 144``) and the 1 KB capture, old and new, tshark beside.
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


def build_small(path: str) -> tuple[int, int]:
    """The 1 KB capture of the start-up figures: the smallest genuine fixture, as it is."""
    smallest = min(FIXTURES.glob("*.pcap"), key=lambda p: p.stat().st_size)
    shutil.copyfile(smallest, path)
    return smallest.stat().st_size, 1


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


def round_robin(contenders: dict) -> dict:
    """Each of ``contenders`` (label -> run()) :data:`REPEAT` times, taking turns; label ->
    sorted [(wall, CPU seconds)]."""
    out = {label: [] for label in contenders}
    for _ in range(REPEAT[0]):
        for label, run in contenders.items():
            wall = run()
            out[label].append((wall, LAST_CPU[0]))
    return {label: sorted(runs) for label, runs in out.items()}


def spread(runs) -> str:
    walls = [w for w, _ in runs]
    return (f"best {walls[0]:.3f} / median {walls[len(walls) // 2]:.3f} / worst {walls[-1]:.3f} s"
            f", CPU {runs[0][1]:.2f} s (best run)")


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


def bench_cli(path, fmt, engine, out, checkout=ROOT):
    """The CLI of ``checkout`` in a fresh interpreter (the engine is chosen at import), writing
    to ``out`` (run from the checkout: ``python -m`` puts the working directory first)."""
    env = {"PYTHONPATH": str(checkout), "ROCKETPY_CAPTURE_ENGINE": engine}
    return timed([sys.executable, "-m", "rocketpy.capture.cli", os.path.abspath(path),
                  "--format", fmt, "-o", os.path.abspath(out)], env=env, cwd=checkout)


#: the CLI, with the moment it hands the decoder the capture's first block printed to stderr
#: (``perf_counter`` is CLOCK_MONOTONIC: the parent reads the same clock)
FIRST_BLOCK = """
import sys, time
from rocketpy.capture import engine
blocks = engine._blocks
def first(f):
    sys.stderr.write(f"first-block {time.perf_counter()!r}\\n")
    engine._blocks = blocks
    yield from blocks(f)
engine._blocks = first
from rocketpy.capture.cli import main
sys.exit(main(sys.argv[1:]))
"""


def bench_first_block(path, fmt, out, checkout=ROOT):
    """Seconds from starting the CLI to its first block handed to the decoder (the compiled
    engine; :data:`LAST_CPU`: the whole run's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", FIRST_BLOCK, os.path.abspath(path), "--format",
                           fmt, "-o", os.path.abspath(out)], check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=checkout,
                          env=dict(os.environ, PYTHONPATH=str(checkout),
                                   ROCKETPY_CAPTURE_ENGINE="native"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stamp = next(line for line in done.stderr.splitlines() if line.startswith("first-block "))
    return float(stamp.split()[1]) - t


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


def start_up(a, tmp) -> None:
    """The 1 KB capture: the CLI end to end per format and when it starts decoding, beside the
    bare interpreter; this tree and the baseline (with ``--baseline``), round robin."""
    small = a.out + ".small.pcap"
    build_small(small)
    kb = os.path.getsize(small) / 1e3
    trees = {"this tree": ROOT, **({"previous release": Path(a.baseline)} if a.baseline else {})}
    quick = {("python -c pass", ""): lambda: timed([sys.executable, "-c", "pass"])}
    for tree, checkout in trees.items():
        for fmt, extra in (("parquet", ()), ("json", ()), ("table", ("--summary", "no"))):
            quick[(tree, f"--format {fmt} {' '.join(extra)}")] = functools.partial(
                timed, [sys.executable, "-m", "rocketpy.capture.cli", small, "--format", fmt,
                        *extra, "-o", str(tmp / f"small.{fmt}")],
                env={"PYTHONPATH": str(checkout), "ROCKETPY_CAPTURE_ENGINE": "native"},
                cwd=checkout)
        for fmt in ("parquet", "json"):
            quick[(tree, f"--format {fmt}: starts decoding")] = functools.partial(
                bench_first_block, small, fmt, str(tmp / f"first.{fmt}"), checkout)
    print(f"\n== start-up: {small}, {kb:.1f} KB ({REPEAT[0]} runs each, round robin) ==",
          flush=True)
    for (tree, what), runs in round_robin(quick).items():
        print(f"{tree + ' ' + what:<58} {spread(runs)}", flush=True)


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
    print(f"\n== {a.out}: {mb:.0f} MB ({REPEAT[0]} runs each, round robin) ==", flush=True)
    subprocess.run(["cat", a.out], check=True, stdout=subprocess.DEVNULL)     # into the cache
    quick = {"cat": lambda: timed(["cat", a.out])}
    labels = {"cat": "page-cache read (cat)"}
    if not a.skip_tshark and shutil.which("tshark"):
        quick["tshark"] = lambda: timed(["tshark", "-n", "-r", a.out])
        labels["tshark"] = "tshark plain dissection"
    for fmt in ("parquet", "json"):
        quick[("native", fmt)] = functools.partial(bench_cli, a.out, fmt, "native",
                                                   str(tmp / f"o.{fmt}"))
        labels[("native", fmt)] = f"rocketpy-capture --format {fmt} (native)"
        if a.baseline and a.baseline_engine == "native":
            quick[("baseline", fmt)] = functools.partial(
                bench_cli, a.out, fmt, "native", str(tmp / f"b.{fmt}"), Path(a.baseline))
            labels[("baseline", fmt)] = f"previous release --format {fmt} (native)"
    for key, runs in round_robin(quick).items():
        wall, cpu[key] = runs[0]
        rate[key] = line(labels[key], mb, wall, spread(runs))
    slow = [("python", fmt) for fmt in ("parquet", "json") if not a.skip_python]
    if a.baseline and a.baseline_engine == "python":
        slow += [("baseline", fmt) for fmt in ("parquet", "json")]
    for who, fmt in slow:
        checkout = Path(a.baseline) if who == "baseline" else ROOT
        wall = bench_cli(a.out, fmt, "python", str(tmp / f"{who}.{fmt}"), checkout)
        cpu[(who, fmt)] = LAST_CPU[0]
        rate[(who, fmt)] = line(f"{'previous release' if who == 'baseline' else 'rocketpy-capture'}"
                                f" --format {fmt} (python)", mb, wall, f"CPU {LAST_CPU[0]:.1f} s")
    start_up(a, tmp)
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
    print("\n== against the goals of issues 11 and 33 ==")
    if "tshark" in rate:
        for who in ("native", "baseline"):
            if (who, "parquet") in rate:
                print(f"parquet ({'this tree' if who == 'native' else 'previous release'}) / "
                      f"tshark plain dissection: {rate[(who, 'parquet')] / rate['tshark']:.1f}x "
                      "(best runs; goal >= 25x)")
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
