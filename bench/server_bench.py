#!/usr/bin/env python3
"""Benchmark: rocketpy's NameServer over loopback, with the neutral load generators of
``../shared/bench`` (``nsload.c`` for route queries, ``nsload.py`` for registrations).

    python3 bench/server_bench.py                 # start twistd rocketnamesrv, run everything
    python3 bench/server_bench.py --seconds 20    # longer runs
    python3 bench/server_bench.py --addr 127.0.0.1:9876   # measure a server already running
                                                          # (e.g. a Java NameServer, back to back)

1. Route queries: 10 brokers each registered with the same 100 topics (``nsload.py seed``), then
   ``nsload.c`` with 16 connections x 8 requests in flight, random topic per request, for client
   versions 401 (standard JSON answers) and 63 (the C++ client; legacy JSON).
2. Re-registrations of one 1,000-topic broker (unchanged data version), 4 connections x 2 in
   flight, as every broker re-registers every 30 s (``nsload.py register``).

With ``--without-kernel-too`` the route queries run first against a server without the compiled
header kernel (``ROCKETPY_NO_KERNEL=1``), then with it, back to back.

Prints one JSON line per run and a table comparing with the Java 4.9.8 NameServer's figures
recorded on this machine class (``../shared/fixtures/perf.md``). The load generator shares the
machine with the server: compare servers in one run, back to back.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchserver import ROOT, start_server, target  # noqa: E402

SHARED_BENCH = ROOT.parent / "shared" / "bench"

#: perf.md: genuine Java 4.9.8 NameServer, same load, same machine class (ranges: low, high).
JAVA = {
    "route-401": {"qps": (44_000, 50_000), "p50_ms": (2.3, 2.6), "p99_ms": (6.7, 8.4)},
    "route-63": {"qps": (44_000, 59_000), "p50_ms": (2.0, 2.6), "p99_ms": (5.2, 6.8)},
    "register-1000": {"qps": (3_874, 3_874), "p50_ms": (1.6, 1.6), "p99_ms": (8.3, 8.3)},
    "register-10000": {"qps": (358, 358), "p50_ms": (20, 20), "p99_ms": (58, 58)},
}


def build_nsload(workdir):
    exe = Path(workdir) / "nsload"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(SHARED_BENCH / "nsload.c")],
                   check=True)
    return exe


def cpu_seconds(pid):
    """User + system CPU time of ``pid`` so far (None when unknown)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def timed_run(cmd, pid, warmup, cpus=None, cpu_of=cpu_seconds):
    """Run a load generator (on the CPUs ``cpus``, when given); its JSON figures plus the
    server's CPU time per operation over the measured window (after the warm-up; ``cpu_of(pid)``
    reads it), which does not depend on what else the machine does."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))
    time.sleep(warmup)
    before = cpu_of(pid)
    out, _ = proc.communicate()
    after = cpu_of(pid)
    if proc.returncode:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    if before is not None and after is not None and result.get("ops"):
        result["server_cpu_us_per_op"] = round((after - before) / result["ops"] * 1e6, 2)
    return result


def seed_in_background(*args):
    """``nsload.py seed ...`` holding its brokers' connections open while the load runs."""
    return subprocess.Popen([sys.executable, str(SHARED_BENCH / "nsload.py"), "seed", *args],
                            stdout=subprocess.DEVNULL)


def route_runs(exe, host, port, args, pid):
    seeder = seed_in_background("--addr", f"{host}:{port}", "--brokers", "10", "--topics", "100",
                                "--hold", str(2 * (args.seconds + 2) + 5))
    time.sleep(2.0)
    results = {}
    try:
        for version in (401, 63):
            results[f"route-{version}"] = timed_run(
                [str(exe), host, str(port), "16", "8", str(args.seconds), str(args.warmup), "100",
                 str(version)], pid, args.warmup)
    finally:
        seeder.terminate()
        seeder.wait()
    return results


def register_runs(host, port, args, pid):
    results = {}
    for topics in args.register_topics:
        results[f"register-{topics}"] = timed_run(
            [sys.executable, str(SHARED_BENCH / "nsload.py"), "register", "--addr", f"{host}:{port}",
             "--topics", str(topics), "--conns", "4", "--window", "2", "--seconds",
             str(args.seconds), "--warmup", str(args.warmup)], pid, args.warmup)
    return results


def table(results):
    lines = ["| run | ops/s | p50 ms | p99 ms | server CPU us/op | Java ops/s (perf.md) | Java p99 ms "
             "| ratio ops/s |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        java = JAVA.get(name)
        if java:
            lo, hi = java["qps"]
            ratio = f"{r['qps'] / hi:.2f}x-{r['qps'] / lo:.2f}x" if lo != hi else f"{r['qps'] / lo:.2f}x"
            jq = f"{lo:,}-{hi:,}" if lo != hi else f"{lo:,}"
            jp = "-".join(str(v) for v in sorted(set(java["p99_ms"])))
        else:
            ratio = jq = jp = "-"
        cpu = r.get("server_cpu_us_per_op", "-")
        lines.append(f"| {name} | {r['qps']:,} | {r['p50_ms']} | {r['p99_ms']} | {cpu} | {jq} | {jp} "
                     f"| {ratio} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", help="measure this running server instead of starting rocketnamesrv")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--register-topics", type=int, nargs="*", default=[1000])
    p.add_argument("--skip-routes", action="store_true")
    p.add_argument("--skip-register", action="store_true")
    p.add_argument("--server-arg", action="append", default=[],
                   help="extra rocketnamesrv option, e.g. --server-arg=--no-answer-cache")
    p.add_argument("--without-kernel-too", action="store_true",
                   help="route queries first to a server without the compiled header kernel "
                        "(ROCKETPY_NO_KERNEL=1: the pure-Python codec), then with it")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as work:
        exe = build_nsload(work)
        results = {}
        if args.without_kernel_too and not args.addr and not args.skip_routes:
            os.environ["ROCKETPY_NO_KERNEL"] = "1"
            proc, host, port = target(work, None, args.server_arg)
            try:
                for name, r in route_runs(exe, host, port, args, proc.pid).items():
                    results[f"{name} (no kernel)"] = r
            finally:
                del os.environ["ROCKETPY_NO_KERNEL"]
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        proc, host, port = target(work, args.addr, args.server_arg)
        try:
            if not args.skip_routes:
                results.update(route_runs(exe, host, port, args, proc and proc.pid))
            if not args.skip_register:
                if proc is not None:  # a fresh server: the seeded brokers must not weigh on it
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
                    proc, port, _ = start_server(ROOT, work, args.server_arg)
                results.update(register_runs(host, port, args, proc and proc.pid))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    for name, r in results.items():
        print(json.dumps({"run": name, **r}))
    print(table(results))


if __name__ == "__main__":
    main()
