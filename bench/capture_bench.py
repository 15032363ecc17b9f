"""Capture-decoder benchmark: build a large capture by replaying the genuine fixture flows with
new addresses, ports and sequence numbers, then time

* a plain read of the file (the disk/page-cache ceiling),
* the in-process decoder (``rocketpy.capture.decode_paths``, what ``rocketpy-capture`` runs),
* the Spark job (``tools/capture_job.py``) on ``local[1]`` and ``local[2]``, with the capture
  split into byte ranges (one big file) or, with ``--files N``, as N separate files,

and print MB/s and frames/s for each.  Not a test; run by hand:

    python bench/capture_bench.py --size-mb 1024 [--out /tmp/rmq-bench.pcap] [--skip-spark]
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
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


def build(path: str, size: int) -> tuple[int, int]:
    """Write a pcap of at least ``size`` bytes; returns (bytes, replicas)."""
    base, span = _fixture_packets()
    t0 = 1_800_000_000_000_000_000
    written, k = 24, 0
    with open(path, "wb", buffering=16 << 20) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        while written < size:
            ip = bytes((10, (k >> 16) & 255, (k >> 8) & 255, k & 255))
            dseq = (k * 2_654_435_761) & 0xFFFFFFFF
            dport = k % 20000
            chunks = []
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
                t = t0 + k * span + ts
                chunks.append(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000 // 1000,
                                          len(b), len(b)))
                chunks.append(bytes(b))
            blob = b"".join(chunks)
            f.write(blob)
            written += len(blob)
            k += 1
    return written, k


def split_files(path: str, n: int, outdir: str) -> list[str]:
    """Cut the capture into ``n`` pcap files at packet boundaries."""
    from rocketpy.capture.readers import iter_packets, read_capture_info
    os.makedirs(outdir, exist_ok=True)
    size = os.path.getsize(path)
    per = size // n + 1
    paths = []
    with open(path, "rb") as f:
        head = f.read(24)
        info = read_capture_info(head)
        f.seek(24)
        out, cur = None, 0
        for pkt in iter_packets(f, info):
            if out is None or cur >= per:
                if out:
                    out.close()
                paths.append(os.path.join(outdir, f"part{len(paths):03d}.pcap"))
                out = open(paths[-1], "wb", buffering=8 << 20)
                out.write(head)
                cur = 24
            sec, ns = divmod(pkt.ts_ns, 1_000_000_000)
            out.write(struct.pack("<IIII", sec, ns // 1000, pkt.caplen, pkt.origlen))
            out.write(pkt.data)
            cur += 16 + pkt.caplen
        out.close()
    return paths


def bench_read(path):
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(16 << 20)
            if not b:
                break
            n += len(b)
    return n, time.perf_counter() - t


def bench_inprocess(path):
    from rocketpy.capture import Stats, decode_paths
    stats = Stats()
    t = time.perf_counter()
    frames = sum(1 for _ in decode_paths([path], stats=stats))
    return frames, time.perf_counter() - t, stats


def bench_spark(inputs, master, chunk_mb, outdir):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import capture_job
    spark = (SparkSession.builder.master(master).appName("capture-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t = time.perf_counter()
        capture_job.run(spark, [*inputs, "--output", outdir, "--chunk-mb", str(chunk_mb),
                                    "--no-summary"])
        el = time.perf_counter() - t
        frames = spark.read.parquet(outdir + "/frames").count()
    finally:
        spark.stop()
    return frames, el


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=float, default=1024)
    p.add_argument("--out", default="/tmp/rmq-capture-bench.pcap")
    p.add_argument("--chunk-mb", type=float, default=64)
    p.add_argument("--files", type=int, default=0, help="also run Spark on N separate files")
    p.add_argument("--skip-inprocess", action="store_true")
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--masters", default="local[1],local[2]")
    a = p.parse_args(argv)
    size = int(a.size_mb * (1 << 20))
    if not os.path.exists(a.out) or os.path.getsize(a.out) < size:
        t = time.perf_counter()
        n, k = build(a.out, size)
        print(f"built {a.out}: {n / 1e6:.0f} MB, {k} replicas of the fixture flows, "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    mb = os.path.getsize(a.out) / 1e6
    n, el = bench_read(a.out)
    print(f"plain read          : {mb:8.0f} MB in {el:7.1f} s = {mb / el:8.1f} MB/s", flush=True)
    if not a.skip_inprocess:
        frames, el, stats = bench_inprocess(a.out)
        from rocketpy.capture.rows import _memo_summary
        memo = _memo_summary.cache_info()
        print(f"in-process          : {mb:8.0f} MB in {el:7.1f} s = {mb / el:8.1f} MB/s, "
              f"{frames / el:9.0f} frames/s ({frames} frames, {stats.get('packets')} packets; "
              f"body summaries remembered {memo.hits} times, computed {memo.misses})", flush=True)
    if not a.skip_spark:
        runs = [("split", [a.out])]
        if a.files:
            runs.append((f"{a.files} files", split_files(a.out, a.files, a.out + ".parts")))
        for label, inputs in runs:
            for master in a.masters.split(","):
                frames, el = bench_spark(inputs, master, a.chunk_mb, a.out + ".spark-out")
                print(f"spark {master:<9} {label:<8}: {mb:8.0f} MB in {el:7.1f} s = "
                      f"{mb / el:8.1f} MB/s, {frames / el:9.0f} frames/s ({frames} frames)",
                      flush=True)


if __name__ == "__main__":
    main()
