#!/usr/bin/env python3
"""Benchmark: a client's route queries while others flood PUT_KV_CONFIG (issue 12, part 2),
this tree against an older commit, back to back on the same machine.

    python3 bench/kv_flood.py                          # against 82db837 (before the writer)
    python3 bench/kv_flood.py --old HEAD~3 --seconds 20
    python3 bench/kv_flood.py --old ''                 # this tree only

Each scenario starts ``twistd -n rocketnamesrv`` (from this tree, then from ``git archive`` of
``--old``), registers one broker, then for ``--seconds``: ``conns`` connections pipeline
PUT_KV_CONFIG (``window`` in flight each, values of ``size`` bytes, 8 keys per connection)
while one light client asks GET_ROUTEINFO_BY_TOPIC one query at a time. Printed per run: the
light client's route latency (median, p99, max, count), the puts acknowledged per second, and
for a server with the writer thread the writes it did for those puts (its log at shutdown:
the group commit).

Scenarios (the issue's, plus small puts from many connections, where group commit shows):
``2x64KiB`` (2 connections, 64 KiB values), ``4x256KiB``, ``16x1KiB`` (window 1).
The new server refuses values over ``kvConfigMaxValueBytes`` (64 KiB by default), so it runs
with ``-D kvConfigMaxValueBytes=262144`` (the old one warns about an unknown key and ignores
it). Prints a table and one JSON line per run.
"""
import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from benchserver import ROOT, export, start_server  # noqa: E402
from rocketpy.remoting import RemotingCommand  # noqa: E402
from serverproc import RemotingClient  # noqa: E402

WRITER = re.compile(r"writer stopped: (\d+) writes asked for, (\d+) done")
SCENARIOS = {"2x64KiB": (2, 8, 64 * 1024), "4x256KiB": (4, 8, 256 * 1024),
             "16x1KiB": (16, 1, 1024)}


def register(port):
    body = json.dumps({"topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1},
        "topicConfigTable": {t: {"topicName": t, "readQueueNums": 8, "writeQueueNums": 8,
                                 "perm": 6} for t in ("TopicA", "TopicB")}}}).encode()
    conn = RemotingClient(port, timeout=120)
    answer = conn.call(103, {"brokerName": "b", "brokerAddr": "127.0.0.1:10911",
                             "clusterName": "C", "haServerAddr": "127.0.0.1:10912",
                             "brokerId": "0", "compressed": "false",
                             "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body)
    assert answer.code == 0, answer
    return conn


def flood(port, index, window, size, stop, acked, errors):
    conn = RemotingClient(port, timeout=120)
    value = "x" * size
    sent = got = 0
    try:
        while not stop.is_set():
            while sent - got < window:
                sent += 1
                ext = {"namespace": "flood", "key": f"c{index}-k{sent % 8}", "value": value}
                conn.send_frame(RemotingCommand.request(100, ext, opaque=sent, version=479).encode())
            answer = conn.read_frame()
            got += 1
            if answer.code == 0:
                acked[index] += 1
            else:
                errors.append((answer.code, answer.remark))
    except OSError:
        pass
    finally:
        conn.close()


def run(tree, label, scenario, seconds):
    conns, window, size = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory(prefix="kv-flood-") as workdir:
        proc, port, log = start_server(tree, workdir, ["-D", "kvConfigMaxValueBytes=262144"],
                                       kv_path=Path(workdir) / "kv" / "kvConfig.json")
        try:
            broker = register(port)
            light = RemotingClient(port, timeout=120)
            for _ in range(50):                           # warm up
                light.call(105, {"topic": "TopicA"})
            stop = threading.Event()
            acked = [0] * conns
            errors = []
            threads = [threading.Thread(target=flood, args=(port, i, window, size, stop, acked, errors),
                                        daemon=True) for i in range(conns)]
            started = time.monotonic()
            for t in threads:
                t.start()
            latencies = []
            while time.monotonic() - started < seconds:
                t0 = time.perf_counter()
                answer = light.call(105, {"topic": "TopicA"})
                latencies.append((time.perf_counter() - t0) * 1000)
                assert answer.code == 0, answer
            stop.set()
            elapsed = time.monotonic() - started
            for t in threads:
                t.join(120)
            broker.close()
            light.close()
        finally:
            proc.terminate()
            proc.wait(60)
        text = log.read_text(errors="replace")
        writer = WRITER.search(text)
        latencies.sort()
        return {
            "server": label, "scenario": scenario, "seconds": round(elapsed, 1),
            "route_p50_ms": round(statistics.median(latencies), 2),
            "route_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2),
            "route_max_ms": round(latencies[-1], 1), "route_queries": len(latencies),
            "puts_acked": sum(acked), "puts_per_s": round(sum(acked) / elapsed, 1),
            "put_errors": len(errors),
            "writes": int(writer.group(2)) if writer else None,
            "writes_asked": int(writer.group(1)) if writer else None,
        }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="82db837", help="commit to compare with ('' for none)")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="kv-flood-trees-") as trees:
        old = export(args.old, trees) if args.old else None
        for scenario in args.scenario or list(SCENARIOS):
            for tree, label in ((old, f"old {args.old}"), (ROOT, "new")):
                if tree is None:
                    continue
                result = run(tree, label, scenario, args.seconds)
                print(json.dumps(result), flush=True)
                results.append(result)
    print(f"\n{'scenario':10} {'server':14} {'route p50':>10} {'p99':>9} {'max':>9} "
          f"{'queries':>8} {'puts/s':>8} {'writes':>8}")
    for r in results:
        writes = "" if r["writes"] is None else f"{r['writes']}/{r['writes_asked']}"
        print(f"{r['scenario']:10} {r['server']:14} {r['route_p50_ms']:>8} ms {r['route_p99_ms']:>6} ms "
              f"{r['route_max_ms']:>6} ms {r['route_queries']:>8} {r['puts_per_s']:>8} {writes:>8}")


if __name__ == "__main__":
    main()
