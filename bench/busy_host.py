#!/usr/bin/env python3
"""Benchmark: route queries on a crowded host -- CPU hogs beside the server (issue 33 part 3).

Issue 33 measured, with 16 CPU hogs sharing the two cores, the route load of 16 then 64 then 16
connections x 8 in flight (``nsload.c``, 10 s each) against rocketpy and Java 4.9.8 in one run:
rocketpy answered 32 requests SYSTEM_BUSY, Java none. The cause was the turn budget: a turn a
contended CPU stretched past ``serverTurnMillis`` shed every connection with more than its fair
share in flight. This runs that load (10 brokers x 100 topics seeded with ``nsload.py seed``)
with ``--hogs`` busy-looping processes started beside the server, and prints per phase the
queries/s, p50/p99 and the answers that were not SUCCESS (``errors``: SYSTEM_BUSY here, every
queried topic exists); ``--compare COMMIT`` runs that commit's server the same way first.

    python3 bench/busy_host.py                       # 16 hogs, phases 16, 64, 16 conns x 8
    python3 bench/busy_host.py --compare 21f3da4 --seconds 10

The hogs run at normal priority for the length of the run only, and are stopped by the
script; the machine is meant to be crowded, so the figures move from run to run.
"""
import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time

from benchserver import ROOT, export, start_server
from server_bench import build_nsload, seed_in_background


def phase(nsload, port, conns, args):
    out = subprocess.run([str(nsload), "127.0.0.1", str(port), str(conns), "8", str(args.seconds),
                          str(args.warmup), "100", str(args.version)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(tree, work, nsload, args):
    proc, port, log = start_server(tree, work)
    seeder = seed_in_background("--addr", f"127.0.0.1:{port}", "--brokers", "10", "--topics",
                                "100", "--hold", str(len(args.phases) * (args.seconds + 5) + 30))
    hogs = []
    try:
        time.sleep(2.0)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.hogs)]
        results = [phase(nsload, port, conns, args) for conns in args.phases]
        shed_lines = log.read_text(errors="replace").count("too many requests and system busy")
        return results, shed_lines
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        seeder.terminate()
        seeder.wait()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hogs", type=int, default=16)
    p.add_argument("--phases", type=int, nargs="+", default=[16, 64, 16],
                   help="connections (x 8 in flight) of each phase")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=0)
    p.add_argument("--version", type=int, default=401)
    p.add_argument("--compare", metavar="COMMIT", help="run this commit's server first")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocketpy-busy-") as work:
        nsload = build_nsload(work)
        servers = [("rocketpy", ROOT)]
        if args.compare:
            servers.insert(0, (f"rocketpy {args.compare}", export(args.compare, work, built=True)))
        rows = []
        for name, tree in servers:
            results, shed_lines = run(tree, work, nsload, args)
            for conns, r in zip(args.phases, results):
                print(json.dumps({"server": name, "hogs": args.hogs, **r}), flush=True)
                rows.append((name, conns, r))
            print(json.dumps({"server": name, "request.shed log lines": shed_lines}), flush=True)
    print("\n| server | connections x 8 | queries/s | p50 ms | p99 ms | not SUCCESS (SYSTEM_BUSY) |"
          "\n|---|---|---|---|---|---|")
    for name, conns, r in rows:
        print(f"| {name} | {conns} | {r['qps']:,} | {r['p50_ms']} | {r['p99_ms']} "
              f"| {r['errors']} |")
    print(f"\n{args.hogs} CPU hogs beside the server, {args.seconds:g} s a phase, on a machine "
          "shared with other work")


if __name__ == "__main__":
    main()
