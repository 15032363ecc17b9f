#!/usr/bin/env python3
"""Benchmark: ``rocketpy-brokersim`` with 2,000 brokers x 50 topics against ``twistd
rocketnamesrv`` for 5 minutes, and ``rocketpy-admin`` against the loaded server.

    python3 bench/brokersim_bench.py                       # the full run (about 6 minutes)
    python3 bench/brokersim_bench.py --brokers 200 --seconds 60   # a quick one
    python3 bench/brokersim_bench.py --addr 127.0.0.1:9876 # a server already running (Java?)

What runs, all on this machine (the simulator, the server and the load share the cores):

1. ``rocketpy-brokersim``: 1,000 master/slave groups (2,000 brokers) in 2 clusters, 50 topics
   per group, each topic on 2 groups (25,000 topics; plus every broker's system topics), 4.9.8
   brokers with JSON headers re-registering every 30 s with 10 % jitter, first registrations
   spread over the first period. It reports registration latency p50/p99 and rates.
2. After the first period, route queries for ``Topic0..Topic99`` (hosted by the first groups)
   from ``../shared/bench/nsload.c`` (8 connections x 8 in flight) until the end: the route
   queries per second the server answers while it carries the brokers.
3. The server's resident memory (``VmRSS``), sampled every 5 s.
4. In the middle of the run, ``rocketpy-admin clusterList`` (2,000 rows; each broker's
   statistics are asked for and refused, nothing listens at the simulated addresses) and
   ``rocketpy-admin topicRoute``, each timed 3 times as a whole process, start-up included.

Prints the brokersim summary, then one JSON line with every figure.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchserver import target  # noqa: E402
from server_bench import ROOT, build_nsload


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class RssSampler(threading.Thread):
    def __init__(self, pid, every=5.0):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples = pid, every, []
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(self.every):
            value = rss_kib(self.pid)
            if value is not None:
                self.samples.append(value)


def timed_admin(env, *argv, runs=3):
    """Wall seconds of ``rocketpy-admin ARGV`` as a process (median of ``runs``), its status
    and the length of its output."""
    times, status, size = [], None, 0
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", *argv], env=env,
                              capture_output=True, text=True, timeout=300)
        times.append(time.perf_counter() - started)
        status, size = proc.returncode, len(proc.stdout.splitlines())
    return {"seconds": round(statistics.median(times), 3), "all": [round(t, 3) for t in times],
            "status": status, "lines": size}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", help="a running NameServer instead of starting rocketnamesrv")
    p.add_argument("--brokers", type=int, default=2000)
    p.add_argument("--topics", type=int, default=50)
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--period", type=float, default=30.0)
    p.add_argument("--server-arg", action="append", default=[])
    args = p.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="rocketpy-simbench-") as work:
        exe = build_nsload(work)
        proc, host, port = target(work, args.addr, args.server_arg)
        addr = f"{host}:{port}"
        sampler = RssSampler(proc.pid) if proc is not None else None
        if sampler:
            sampler.start()
        figures = {"brokers": args.brokers, "topics_per_group": args.topics, "seconds": args.seconds}
        try:
            sim = subprocess.Popen(
                [sys.executable, "-m", "rocketpy.broker.simcli", "-n", addr, "--brokers",
                 str(args.brokers), "--replicas", "2", "--clusters", "2", "--topics",
                 str(args.topics), "--topic-spread", "2", "--topic-prefix", "Topic", "--period",
                 str(args.period), "--duration", str(args.seconds), "--progress", "15",
                 "--seed", "1", "--json"],
                env=env, stdout=subprocess.PIPE, text=True)
            time.sleep(args.period)  # every broker has registered once
            load_seconds = max(args.seconds - args.period - 5, 5)
            load = subprocess.Popen([str(exe), host, str(port), "8", "8", str(load_seconds), "5",
                                     "100", "401"], stdout=subprocess.PIPE, text=True)
            time.sleep(max(load_seconds / 2 - 10, 1))
            figures["clusterList"] = timed_admin(env, "clusterList", "-n", addr)
            figures["topicRoute"] = timed_admin(env, "topicRoute", "-t", "Topic0", "-n", addr)
            out, _ = load.communicate()
            figures["route_load"] = json.loads(out.strip().splitlines()[-1])
            sim_out, _ = sim.communicate(timeout=args.seconds + 300)
            report = json.loads(sim_out)
        finally:
            if sampler:
                sampler.done.set()
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    sys.path.insert(0, str(ROOT))  # this checkout's rocketpy, as the subprocesses use
    from rocketpy.broker.simcli import format_report
    print(format_report(report), end="")
    figures["registration"] = report["namesrv"][addr]
    figures["registration"]["errors"] = report["errors"]
    if sampler and sampler.samples:
        figures["server_rss_mib"] = {"max": round(max(sampler.samples) / 1024, 1),
                                     "last": round(sampler.samples[-1] / 1024, 1)}
    try:  # no RocketMQ jars here: a bare JVM start is the floor under mqadmin's start time
        started = time.perf_counter()
        subprocess.run(["java", "-version"], capture_output=True, timeout=60)
        figures["bare_jvm_start_seconds"] = round(time.perf_counter() - started, 3)
    except (OSError, subprocess.SubprocessError):
        pass
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
