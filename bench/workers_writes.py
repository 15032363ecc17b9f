"""Benchmark: registrations and unregistrations with worker processes (issue 33 part 2).

With ``--workers N`` a state-changing request is answered only once every worker applied it
(on a worker's connection it also travels to the route writer and back), so its latency is the
one-process server's plus that fan-out. Each run starts ``rocketnamesrv`` with 1, then N
processes (back to back, the order turning every round), and drives it from ``--conns``
connections, each a broker of its own that registers ``--topics`` topics, then unregisters,
over and over for ``--seconds``: REGISTER_BROKER then UNREGISTER_BROKER (with ``--steady``,
REGISTER_BROKER of the same topics again: a live broker's period), one in flight per
connection, each answer checked (code 0, its opaque). Prints each request's p50/p99, the
cycles per second and the server's CPU microseconds per cycle (every process's).

    python3 bench/workers_writes.py                       # 1 and 2 processes
    python3 bench/workers_writes.py --workers 1,2,4 --topics 1000
"""
import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchserver import ROOT, start_server  # noqa: E402
from cores import tree_cpu_seconds  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import brokerbody  # noqa: E402
from rocketpy.remoting import RemotingCommand, decode_frame  # noqa: E402


def _read_frame(sock, buf):
    while True:
        if len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big") + 4
            if len(buf) >= size:
                frame = bytes(buf[:size])
                del buf[:size]
                return frame
        data = sock.recv(1 << 16)
        if not data:
            raise SystemExit("workers_writes: the server closed a connection")
        buf += data


def _broker(port, index, topics, stop, out, steady=False):
    name, addr = f"bench-broker-{index}", f"127.0.0.1:{20000 + index}"
    body = brokerbody.register_body([f"BenchTopic-{index}-{t}" for t in range(topics)])
    register = {"brokerName": name, "brokerAddr": addr, "clusterName": "BenchCluster",
                "haServerAddr": addr, "brokerId": "0", "compressed": "false",
                "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    unregister = {"brokerName": name, "brokerAddr": addr, "clusterName": "BenchCluster",
                  "brokerId": "0"}
    sock = socket.create_connection(("127.0.0.1", port))
    buf = bytearray()
    opaque = 0
    try:
        steps = ((103, register, body),) if steady else ((103, register, body),
                                                         (104, unregister, None))
        while not stop.is_set():
            for code, fields, payload in steps:
                opaque += 1
                start = time.perf_counter()
                sock.sendall(RemotingCommand.request(code, fields, payload, opaque=opaque,
                                                     version=479).encode())
                answer = decode_frame(_read_frame(sock, buf))
                took = time.perf_counter() - start
                if (answer.code, answer.opaque) != (0, opaque):
                    out["errors"] += 1
                out[code].append(took)
    finally:
        sock.close()


def run(processes, args, work):
    extra = [f"--workers={processes}"] if processes > 1 else []
    proc, port, _ = start_server(args.tree or ROOT, work, extra)
    try:
        stop = threading.Event()
        out = {103: [], 104: [], "errors": 0}
        threads = [threading.Thread(target=_broker, args=(port, i, args.topics, stop, out, args.steady),
                                    daemon=True) for i in range(args.conns)]
        for t in threads:
            t.start()
        time.sleep(args.warmup)
        for code in (103, 104):
            out[code].clear()
        cpu0, t0 = tree_cpu_seconds(proc.pid), time.monotonic()
        time.sleep(args.seconds)
        cpu1, t1 = tree_cpu_seconds(proc.pid), time.monotonic()
        cycles = len(out[103]) if args.steady else min(len(out[103]), len(out[104]))
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        proc.terminate()
        proc.wait(30)

    def ms(values, q):
        return round(statistics.quantiles(values, n=100)[q - 1] * 1000, 2) if len(values) > 1 else None
    return {"processes": processes, "cycles_per_s": round(cycles / (t1 - t0), 1),
            "register_p50_ms": ms(out[103], 50), "register_p99_ms": ms(out[103], 99),
            "unregister_p50_ms": ms(out[104], 50), "unregister_p99_ms": ms(out[104], 99),
            "server_cpu_us_per_cycle": round((cpu1 - cpu0) / max(cycles, 1) * 1e6, 1),
            "errors": out["errors"]}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", default="1,2", help="process counts, e.g. 1,2")
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steady", action="store_true",
                   help="each broker re-registers the same topics, never unregisters (a live "
                        "broker's every 30 s: a cycle is one REGISTER_BROKER)")
    p.add_argument("--tree", help="the server of this checkout instead (old against new)")
    args = p.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    rows = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(prefix="rocketpy-writes-") as work:
        for i in range(args.repeat):
            for n in (counts if i % 2 == 0 else counts[::-1]):
                r = run(n, args, work)
                rows[n].append(r)
                print(json.dumps({"round": i + 1, **r}), flush=True)
    print("\n| processes | register/unregister cycles/s | REGISTER p50 / p99 ms "
          "| UNREGISTER p50 / p99 ms | server CPU us/cycle | errors |")
    print("|---|---|---|---|---|---|")
    for n, runs in rows.items():
        def med(key):
            values = [r[key] for r in runs if r[key] is not None]
            return round(statistics.median(values), 2) if values else None
        print(f"| {n} | {med('cycles_per_s')} | {med('register_p50_ms')} / "
              f"{med('register_p99_ms')} | {med('unregister_p50_ms')} / "
              f"{med('unregister_p99_ms')} | {med('server_cpu_us_per_cycle')} "
              f"| {sum(r['errors'] for r in runs)} |")
    print("\nmedians of the rounds; the machine may be shared with other work: compare within "
          "one run")


if __name__ == "__main__":
    main()
