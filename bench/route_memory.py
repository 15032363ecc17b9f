#!/usr/bin/env python3
"""Benchmark: route-state memory (issue 12, part 3) with the neutral load generator of
``../shared/bench`` (``nsload.py seed``): RSS before, at the peak and after the brokers leave,
memory per topic-broker entry, and a registration flood past the bound.

    python3 bench/route_memory.py                              # 100 brokers x 10,000 topics
    python3 bench/route_memory.py --brokers 100 --topics 10000 --shared   # every broker, every topic
    python3 bench/route_memory.py --old 82db837                # the same against an older commit
    python3 bench/route_memory.py --flood 3000000 --bound 1000000   # a flood past the bound

Seeding: ``nsload.py seed --brokers B --topics T [--spread] --hold H`` registers B brokers on B
connections (plain JSON bodies, as a 5.x broker sends) and holds them; by default each broker
gets its own slice of the T topics (``--spread``: T topics, T pairs), with ``--shared`` every
broker carries all T (T topics, B x T pairs). The server's resident memory (``VmRSS``) is read
before, every 0.2 s while the brokers register and hold, and again once nsload has exited and
the server has unregistered every broker (its route table empty) and settled.

``--flood N``: registrations of ``N / 10,000`` brokers of 10,000 new topics each, one after
the other; past the bound (``--bound``, ``namesrvMaxTopicBrokerPairs``) they must be refused
with SYSTEM_ERROR, and the latency of a route query asked meanwhile is printed.

Each seed's line carries Java's figure beside it (``java_live_heap_bytes_per_pair``): the
genuine Java 4.9.8 NameServer's live heap after a full GC for the same seeds, measured on this
machine class (``../shared/fixtures/perf.md``; no JVM runs here): 292 bytes per pair with one
broker per topic, 78 with 100 brokers sharing 10,000 topics. See ``docs/reliability.md``.
"""
import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from benchserver import ROOT, export, rss_mib, start_server  # noqa: E402
from brokerbody import flood_registration  # noqa: E402
from rocketpy.remoting import RemotingCommand, decode_frame, fastjson  # noqa: E402
from serverproc import RemotingClient  # noqa: E402

NSLOAD = ROOT.parent / "shared" / "bench" / "nsload.py"
#: the Java 4.9.8 NameServer's live heap per topic-broker pair (1 M pairs, ../shared/fixtures/perf.md)
JAVA_BYTES_PER_PAIR = {"spread": 292, "shared": 78}


def call(port, code, ext=None, body=None, timeout=120):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(RemotingCommand.request(code, ext, body, opaque=1, version=479).encode())
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return decode_frame(buf[:4 + int.from_bytes(buf[:4], "big")])


def broker_count(port):
    """Broker groups the server still holds: GET_BROKER_CLUSTER_INFO, whose answer stays small
    where the all-topic list of 10 M topics (146 MB) is past any frame limit. The one writer
    takes a group's topics out in the step that removes the group."""
    answer = call(port, 106)              # GET_BROKER_CLUSTER_INFO
    if answer.code != 0 or not answer.body:
        return 0
    return len(fastjson.loads_lenient(answer.body)["brokerAddrTable"])   # {0:"addr"}: fastjson's


def seed_and_leave(port, pid, brokers, topics, shared, hold, settle):
    """RSS before / peak / after for one seed; the peak is sampled while nsload holds."""
    before = rss_mib(pid)
    cmd = [sys.executable, str(NSLOAD), "seed", "--addr", f"127.0.0.1:{port}", "--brokers",
           str(brokers), "--topics", str(topics), "--hold", str(hold)]
    if not shared:
        cmd.append("--spread")
    started = time.monotonic()
    seeder = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = before
    while seeder.poll() is None:
        peak = max(peak, rss_mib(pid))
        time.sleep(0.2)
    out = seeder.stdout.read().decode(errors="replace")
    if seeder.returncode != 0:
        raise SystemExit("nsload seed failed:\n" + out)
    seeded = time.monotonic() - started
    # the brokers' connections are closed: wait until the tables are empty, then settle
    deadline = time.monotonic() + 120
    while broker_count(port) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(settle)           # the memory service looks every 5 s
    after = rss_mib(pid)
    pairs = brokers * topics if shared else topics
    java = JAVA_BYTES_PER_PAIR["shared" if shared else "spread"]
    return {"java_live_heap_bytes_per_pair": java, "brokers": brokers, "topics": topics, "pairs": pairs, "shared": shared,
            "rss_before_mib": round(before, 1), "rss_peak_mib": round(peak, 1),
            "rss_after_mib": round(after, 1), "seed_seconds": round(seeded - hold, 1),
            "bytes_per_pair_at_peak": round((peak - before) * 1024 * 1024 / pairs)}


def flood(port, pid, total, per_broker=10_000):
    """Registrations of new brokers with new topics until ``total`` pairs were offered."""
    clients = []
    results = {"accepted": 0, "refused": 0, "remark": None}
    queries = []
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            t0 = time.perf_counter()
            call(port, 105, {"topic": "flood0-0"})
            queries.append(((time.perf_counter() - t0) * 1000, results["refused"] > 0))
            time.sleep(0.05)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    peak = rss_mib(pid)
    for index in range(total // per_broker):
        client = RemotingClient(port, timeout=120)
        answer = client.call(103, *flood_registration(index, per_broker))
        if answer.code == 0:
            results["accepted"] += 1
        else:
            results["refused"] += 1
            results["remark"] = answer.remark
        clients.append(client)
        peak = max(peak, rss_mib(pid))
    stop.set()
    asker.join(10)
    for client in clients:
        client.close()
    results.update({"offered_pairs": total, "rss_peak_mib": round(peak, 1)})
    for label, chosen in (("", queries), ("_while_refusing", [q for q in queries if q[1]])):
        times = sorted(q[0] for q in chosen)
        if times:
            results.update({f"route_query_p50_ms{label}": round(times[len(times) // 2], 2),
                            f"route_query_max_ms{label}": round(times[-1], 1),
                            f"route_queries{label}": len(times)})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--topics", type=int, default=1_000_000)
    parser.add_argument("--shared", action="store_true", help="every broker carries every topic")
    parser.add_argument("--hold", type=float, default=3)
    parser.add_argument("--settle", type=float, default=12, help="seconds after the last broker left")
    parser.add_argument("--old", default="", help="also run this commit, first")
    parser.add_argument("--flood", type=int, default=0, help="pairs offered by a registration flood")
    parser.add_argument("--bound", type=int, default=None, help="namesrvMaxTopicBrokerPairs")
    parser.add_argument("-D", dest="defines", action="append", default=[])
    args = parser.parse_args()
    extra = [a for d in args.defines for a in ("-D", d)]
    if args.bound is not None:
        extra += ["-D", f"namesrvMaxTopicBrokerPairs={args.bound}"]
    with tempfile.TemporaryDirectory(prefix="route-memory-") as workdir:
        trees = [(export(args.old, workdir), f"old {args.old}")] if args.old else []
        trees.append((ROOT, "new"))
        for tree, label in trees:
            with tempfile.TemporaryDirectory(prefix="server-", dir=workdir) as serverdir:
                proc, port, _ = start_server(tree, serverdir, extra)
                try:
                    if args.flood:
                        result = flood(port, proc.pid, args.flood)
                    else:
                        result = seed_and_leave(port, proc.pid, args.brokers, args.topics,
                                                args.shared, args.hold, args.settle)
                finally:
                    proc.terminate()
                    proc.wait(60)
                result["server"] = label
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
