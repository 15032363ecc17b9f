#!/usr/bin/env python3
"""Long overload soak (issue 6, overload): thousands of flooding connections against the real
server while one well-behaved client keeps asking for a route.

Starts ``twistd -n rocketnamesrv`` on 127.0.0.1 (tests/serverproc.py), registers one broker
(topics TopicA, TopicB), then runs ``tests/floodclient.py`` in a subprocess: ``--connections``
sockets, each pushing pipelined requests (route queries, an unknown topic, cluster info, the
topic list) as fast as the kernel takes them, ``--never-read`` of them never reading. Meanwhile a
light client in this process asks GET_ROUTEINFO_BY_TOPIC every 50 ms and checks every answer.

    python3 bench/overload_soak.py                         # 3,000 connections, 60 s
    python3 bench/overload_soak.py --connections 5000 --seconds 300 --never-read 200
    python3 bench/overload_soak.py -D serverTurnMillis=100 -D serverFairRequestsPerTurn=8

Prints a line every ``--report`` seconds (connections held, answers/s, SYSTEM_BUSY/s, the light
client's worst latency, server RSS) and a summary table plus one JSON line: connections held,
requests answered per second (served and shed), shed count (the flood's SYSTEM_BUSY answers and
the server's own ``overload.end`` count), the light client's p50/p99/max and errors, the
server's memory. Exit status 1 if the light client got a wrong answer or no answer within 3 s
(the Java client's default NameServer timeout).
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from serverproc import RemotingClient, running_server  # noqa: E402
from test_e2e_server import register, rss_kib  # noqa: E402

JAVA_CLIENT_TIMEOUT = 3.0
END = re.compile(r"system no longer busy: (\d+) requests from (\d+) connections shed")


class LightClient(threading.Thread):
    """GET_ROUTEINFO_BY_TOPIC every ``interval`` s; latencies and errors."""

    def __init__(self, port, interval=0.05):
        super().__init__(daemon=True)
        self.client = RemotingClient(port, timeout=30)
        self.interval = interval
        self.latencies = []
        self.errors = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                answer = self.client.call(105, {"topic": "TopicA"})
            except OSError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            took = time.monotonic() - started
            self.latencies.append(took)
            if answer.code != 0 or b"127.0.0.1:10911" not in (answer.body or b""):
                self.errors.append(f"code {answer.code} {answer.remark}")
            time.sleep(self.interval)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--never-read", type=int, default=100)
    parser.add_argument("--report", type=float, default=5.0)
    parser.add_argument("-D", dest="defines", action="append", default=[],
                        help="server property, e.g. -D serverTurnMillis=100 (repeatable)")
    args = parser.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < args.connections + 300:
        sys.exit(f"the hard open files limit ({hard}) is too low for {args.connections} "
                 "connections")
    server_args = [a for d in args.defines for a in ("-D", d)]
    with running_server(*server_args, listen="tcp:0:interface=127.0.0.1:backlog=4096") as server:
        broker = RemotingClient(server.port)
        register(broker)
        baseline = rss_kib(server.proc.pid)
        light = LightClient(server.port)
        light.start()
        flood = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "..", "tests", "floodclient.py"),
             "--port", str(server.port), "--connections", str(args.connections),
             "--seconds", str(args.seconds), "--never-read", str(args.never_read),
             "--report", str(args.report)],
            stdout=subprocess.PIPE, text=True)
        peak = baseline
        previous = {"t": 0.0, "answers": 0, "system_busy": 0}
        seen = 0
        print(f"{'t':>6} {'held':>6} {'answers/s':>10} {'busy/s':>8} {'light max':>10} "
              f"{'rss MiB':>8}")
        result = None
        for line in flood.stdout:
            row = json.loads(line)
            rss = rss_kib(server.proc.pid)
            peak = max(peak, rss)
            if "t" not in row:
                result = row
                break
            span = max(row["t"] - previous["t"], 1e-9)
            recent = light.latencies[seen:]
            seen = len(light.latencies)
            print(f"{row['t']:6.1f} {row['connections_held']:6d} "
                  f"{(row['answers'] - previous['answers']) / span:10.0f} "
                  f"{(row['system_busy'] - previous['system_busy']) / span:8.0f} "
                  f"{max(recent, default=0.0):10.3f} {rss / 1024:8.1f}", flush=True)
            previous = row
            register(broker)  # a broker re-registers every 30 s; this one keeps its connection
        flood.wait()
        light.stop.set()
        light.join(10)
        try:
            end_line = server.wait_for_log(END.pattern, timeout=60)
            shed_server, shed_connections = map(int, END.search(end_line).groups())
        except AssertionError:
            shed_server = shed_connections = None
        still_ok = broker.call(105, {"topic": "TopicB"}).code == 0
    lat = light.latencies
    summary = {
        "connections": args.connections, "seconds": args.seconds, "never_read": args.never_read,
        "connections_held": result and result["connections_held"],
        "closed_by_server": result and result["closed_by_server"],
        "answers_per_s": result and result["answers_per_s"],
        "served_per_s": result and round((result["answers"] - result["system_busy"])
                                         / args.seconds),
        "system_busy": result and result["system_busy"],
        "shed_logged_by_server": shed_server, "shed_connections": shed_connections,
        "light_calls": len(lat), "light_errors": len(light.errors),
        "light_p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
        "light_p99_ms": round(percentile(lat, 0.99) * 1000, 1),
        "light_max_ms": round(max(lat, default=0.0) * 1000, 1),
        "rss_baseline_mib": round(baseline / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
        "broker_still_served": still_ok,
    }
    width = max(map(len, summary))
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(summary))
    bad = light.errors or max(lat, default=0.0) >= JAVA_CLIENT_TIMEOUT or not still_ok
    if light.errors:
        print("light client errors:", *light.errors[:5], sep="\n  ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
