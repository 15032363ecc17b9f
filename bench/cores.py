#!/usr/bin/env python3
"""Benchmark: route queries per core -- rocketpy beside the loopback ceiling (issue 33).

The load of issue 33: 10 brokers x 100 topics (``nsload.py seed``), then ``nsload.c`` with 16
connections x 8 requests in flight, a random topic per request. The server runs on ``--cores``
and the load generator on the other CPUs (the affinity ``taskset`` sets, so the two never share
a core), or with ``--shared`` both on every CPU, as issue 33's first figures were taken. Each run
prints route queries/s, p50/p99, SYSTEM_BUSY (any non-zero answer code) and the server's CPU
microseconds per query: its processes' CPU time over the measured window / the queries in it, a
figure that depends far less than queries/s on what else the machine runs.

Beside rocketpy runs the ceiling (``bench/ceiling.c``, built here with gcc): a single-threaded
epoll server that answers every request with one pre-encoded answer -- rocketpy's own answer to
a route query of this load, so both send the same bytes. Nothing can answer this load faster
here. Two shares of it are printed: of its queries/s (issue 33's figure: 0.56; goal for one
worker >= 0.75), which is bounded by the load generator when the server keeps up with it, and
of its CPU per query (ceiling / rocketpy), what the server's core would give were it the bound.
``--compare COMMIT`` adds that commit's rocketpy (exported and built here) as another row. The
servers run back to back, the order turning every round, ``--repeat`` times; medians are printed
with the spread, since other work on the machine moves every figure.

    python3 bench/cores.py                          # server on the last CPU, load on the rest
    python3 bench/cores.py --shared --compare 21f3da4
    python3 bench/cores.py --cores 8-15 --repeat 5  # a bigger machine
    python3 bench/cores.py --shared --workers 1,2   # 1 and 2 processes (--workers N)

``--workers`` takes the worker counts to measure (``rocketnamesrv --workers N``: a route writer
and N - 1 workers, issue 33 part 2); the server's CPU is that of all its processes. With N
processes give the server N CPUs (``--cores``), or ``--shared`` on a machine with too few.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchserver import ROOT, export, start_server
from server_bench import build_nsload, cpu_seconds, seed_in_background, timed_run

#: issue 33's figures on the 2-core machine, one run (for the table; not measured here)
JAVA_4_9_8 = {"qps": 32_548, "p99_ms": 10.7, "pinned_qps": 20_053}
TOPICS = 100


def cpu_list(text):
    """``"1"``, ``"0,2"``, ``"8-15"`` -> a sorted list of CPU numbers."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def pinned(cpus):
    """A ``preexec_fn`` that keeps the child (and every thread and process it starts) on
    ``cpus``."""
    return lambda: os.sched_setaffinity(0, cpus)


def tree_cpu_seconds(pid):
    """CPU seconds of ``pid`` and its descendants (worker processes, once there are any)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu_seconds(p) or 0.0
        todo.extend(children.get(p, ()))
    return total


def build_ceiling(work):
    exe = Path(work) / "ceiling"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(ROOT / "bench" / "ceiling.c")], check=True)
    return exe


def read_answer(sock):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise SystemExit("cores: the server closed the connection")
            data += chunk
        return data
    head = exactly(4)
    return head + exactly(int.from_bytes(head, "big"))


def sample_answer(port, version, work):
    """rocketpy's answer to one route query of the load (Topic0, ``version``), written to a
    file for the ceiling: ``(path, opaque offset, opaque length)``."""
    sys.path.insert(0, str(ROOT))
    from rocketpy.remoting import RemotingCommand
    from rocketpy.remoting.layout import PREFIX_SIZE, request_without_opaque
    opaque = 1234567
    request = RemotingCommand.request(105, {"topic": "Topic0"}, opaque=opaque, version=version)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request.encode())
        answer = read_answer(sock)
    split = request_without_opaque(answer)   # the codec finds the opaque, in a response too
    if split is None or split[1] != str(opaque).encode():
        raise SystemExit("cores: cannot find the opaque in the server's answer")
    path = Path(work) / f"answer-{version}.bin"
    path.write_bytes(answer)
    return path, PREFIX_SIZE + len(split[0][0]), len(split[1])


def load(nsload, port, args, cpus, pid):
    """One nsload run against ``port``; its figures and the server's CPU per query."""
    cmd = [str(nsload), "127.0.0.1", str(port), str(args.conns), str(args.window),
           str(args.seconds), str(args.warmup), str(TOPICS), str(args.version)]
    return timed_run(cmd, pid, args.warmup, cpus, tree_cpu_seconds)


def run_rocketpy(work, nsload, args, server_cpus, load_cpus, tree, workers=1):
    extra = [f"--workers={workers}"] if workers > 1 else []
    proc, port, _ = start_server(tree, work, [*args.server_arg, *extra], cpus=server_cpus)
    seeder = seed_in_background("--addr", f"127.0.0.1:{port}", "--brokers", "10", "--topics",
                                str(TOPICS), "--hold", str(args.seconds + 30))
    try:
        time.sleep(2.0)
        answer = sample_answer(port, args.version, work)
        return load(nsload, port, args, load_cpus, proc.pid), answer
    finally:
        seeder.terminate()
        seeder.wait()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def run_ceiling(exe, answer, nsload, args, server_cpus, load_cpus):
    path, at, length = answer
    proc = subprocess.Popen([str(exe), str(path), str(at), str(length)], stdout=subprocess.PIPE,
                            text=True, preexec_fn=pinned(server_cpus))
    try:
        port = int(proc.stdout.readline().split()[1])
        return load(nsload, port, args, load_cpus, proc.pid)
    finally:
        proc.kill()
        proc.wait()


def spread(values, digits=0):
    fmt = f"{{:,.{digits}f}}"
    med = statistics.median(values)
    return (fmt.format(med) if len(values) == 1
            else f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})")


def table(rows):
    ceiling = rows["ceiling"]
    print("| server | queries/s | p50 ms | p99 ms | server CPU us/query | SYSTEM_BUSY/errors "
          "| share of the ceiling: queries/s | : CPU per query |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        def share(of):
            pairs = zip(runs, ceiling)
            return "1" if name == "ceiling" else spread([of(r, c) for r, c in pairs], 2)

        def column(key, digits=0):
            return spread([r[key] for r in runs], digits)
        qps = share(lambda r, c: r["qps"] / c["qps"])
        cpu = share(lambda r, c: c["server_cpu_us_per_op"] / r["server_cpu_us_per_op"])
        print(f"| {name} | {column('qps')} | {column('p50_ms', 2)} | {column('p99_ms', 2)} "
              f"| {column('server_cpu_us_per_op', 2)} | {sum(r['errors'] for r in runs)} "
              f"| {qps} | {cpu} |")
    print(f"| Java 4.9.8 (issue 33; not measured here) | {JAVA_4_9_8['qps']:,} (pinned: "
          f"{JAVA_4_9_8['pinned_qps']:,}) | | {JAVA_4_9_8['p99_ms']} | | 0 | 0.15 | |")
    print("\nmedians (min-max) of the rounds, each share from one back-to-back pair; the machine "
          "may be shared with other work: compare within one run")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", default=None,
                   help="CPUs for the server (default: the last one); the load runs on the rest")
    p.add_argument("--load-cores", default=None, help="CPUs for the load generator")
    p.add_argument("--shared", action="store_true",
                   help="server and load generator both on every CPU (not pinned apart)")
    p.add_argument("--workers", default="1", help="worker counts to measure, e.g. 1,2")
    p.add_argument("--compare", metavar="COMMIT", help="also run this commit's rocketpy")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--version", type=int, default=401, help="client version (401: standard JSON)")
    p.add_argument("--server-arg", action="append", default=[],
                   help="extra rocketnamesrv option, e.g. --server-arg=--no-answer-cache")
    args = p.parse_args()
    available = sorted(os.sched_getaffinity(0))
    if args.shared:
        server_cpus = load_cpus = available
    else:
        server_cpus = cpu_list(args.cores) if args.cores else available[-1:]
        load_cpus = (cpu_list(args.load_cores) if args.load_cores
                     else [c for c in available if c not in server_cpus])
        if not load_cpus or set(load_cpus) & set(server_cpus):
            p.error("the load generator needs CPUs of its own (--cores, --load-cores), or --shared")
    try:
        workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        p.error(f"--workers {args.workers!r}: expected counts such as 1,2")
    if not all(1 <= w <= 64 for w in workers):
        p.error(f"--workers {args.workers!r}: each count 1..64")
    print(f"# server on CPUs {server_cpus}, load on {load_cpus}; {args.conns} conns x "
          f"{args.window} in flight, {args.seconds:g} s ({args.warmup:g} s warm-up), "
          f"{args.repeat} rounds, load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rocketpy-cores-") as work:
        nsload = build_nsload(work)
        ceiling = build_ceiling(work)
        servers = [(f"rocketpy, {n} worker{'s' if n > 1 else ''}", ROOT, n) for n in workers]
        if args.compare:
            old = export(args.compare, work, built=True)
            servers.append((f"rocketpy {args.compare}, 1 worker", old, 1))
        rows = {"ceiling": [], **{name: [] for name, _, _ in servers}}
        answer = None
        for i in range(args.repeat):
            order = [*servers, ("ceiling", None, 0)]
            if i % 2:
                order.reverse()
            if answer is None and order[0][0] == "ceiling":  # (it sends rocketpy's answer)
                order = order[1:] + order[:1]
            for name, tree, n in order:
                if tree is None:
                    r = run_ceiling(ceiling, answer, nsload, args, server_cpus, load_cpus)
                else:
                    r, answer = run_rocketpy(work, nsload, args, server_cpus, load_cpus, tree, n)
                rows[name].append(r)
                print(json.dumps({"round": i + 1, "server": name, **r}), flush=True)
    print()
    table(rows)


if __name__ == "__main__":
    main()
