#!/usr/bin/env python3
"""Benchmark: the route hole after a NameServer restart, with and without warm restart (issue
34), and the cost of a big route snapshot. Prints numbers; not a test.

    python3 bench/warm_restart.py                      # both parts
    python3 bench/warm_restart.py --part hole --after 40
    python3 bench/warm_restart.py --part load --pairs 1000000

``hole``: a real ``twistd rocketnamesrv`` on 127.0.0.1, a ``rocketpy-brokersim`` broker
registering at a genuine broker's cadence (``--period 30``) and a new client (a fresh connection,
Java's 3 s timeout) asking for the broker's topic route every 200 ms. Once the route is served
the NameServer is restarted -- SIGTERM then start, and ``kill -9`` then start -- with and without
``routeSnapshotPath``; for each run: the answers after the restart by outcome
(``TOPIC_NOT_EXIST`` is the hole), the seconds from the restart to the first SUCCESS and the
longest gap without one.

``load``: ``--pairs`` topic-broker pairs (``--brokers`` brokers, each with its own topics) in
the route tables, taken (the routes part in steps, as the server takes it) and written as the
server writes them; their size on disk; then a server started on the snapshot (its own log line
says how long the load took and in how many steps), and the same load in this process with the
longest single step (what holds the reactor)."""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address [\w.:\[\]-]+:(\d+)")
LOADED = re.compile(r"route snapshot loaded from the (\w+): (\d+) topics, (\d+) topic-broker pairs,"
                    r" (\d+) live brokers .* in ([\d.]+) s \((\d+) steps\)")
TOPIC = "SimTopic-0"
CODES = {0: "SUCCESS", 17: "TOPIC_NOT_EXIST", 1: "SYSTEM_ERROR", 2: "SYSTEM_BUSY"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A twistd rocketnamesrv child; its log lines are kept."""

    def __init__(self, port, workdir, *args):
        from serverproc import server_command
        env = dict(os.environ, HOME=str(workdir), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.proc = subprocess.Popen(
            server_command(f"--kvConfigPath={workdir}/kv.json", *args,
                           listen=f"tcp:{port}:interface=127.0.0.1"),
            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        self.lines = []
        self.booted = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.lines.append(line)
            if BOOT.search(line):
                self.booted.set()
        self.booted.set()

    def wait_booted(self, timeout=120):
        if not self.booted.wait(timeout) or self.proc.poll() is not None:
            raise RuntimeError("the server did not boot:\n" + "\n".join(self.lines[-30:]))

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


def ask_route(port, opaque):
    """One new client's GET_ROUTEINFO_BY_TOPIC: the answer's code name, or why there was none."""
    from rocketpy.remoting import RemotingCommand, decode_frame
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3.0) as sock:
            sock.sendall(RemotingCommand.request(105, {"topic": TOPIC}, opaque=opaque,
                                                 version=479).encode())
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = sock.recv(65536)
                if not chunk:
                    return "closed"
                data += chunk
            code = decode_frame(data[:4 + int.from_bytes(data[:4], "big")]).code
            return CODES.get(code, str(code))
    except socket.timeout:
        return "timeout"
    except OSError:
        return "refused"


class Client(threading.Thread):
    def __init__(self, port, every=0.2):
        super().__init__(daemon=True)
        self.port, self.every = port, every
        self.answers = []          # (monotonic time, outcome)
        self.stopping = threading.Event()

    def run(self):
        n = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            n += 1
            self.answers.append((time.monotonic(), ask_route(self.port, n)))
            next_at += self.every
            self.stopping.wait(max(0.0, next_at - time.monotonic()))


def hole_run(warm, kill, after, period):
    workdir = Path(tempfile.mkdtemp(prefix="rocketpy-warm-"))
    port = free_port()
    args = [f"--routeSnapshotPath={workdir}/routes.snap"] if warm else []
    server = Server(port, workdir, *args)
    server.wait_booted()
    sim = subprocess.Popen(
        [sys.executable, "-m", "rocketpy.broker.simcli", "-n", f"127.0.0.1:{port}", "--brokers", "1",
         "--topics", "4", "--period", str(period), "--jitter", "0", "--ramp", "0.2",
         "--duration", str(after + 3 * period), "--progress", "0", "--version", "5.3.3"],
        cwd=workdir, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    client = Client(port)
    client.start()
    try:
        deadline = time.monotonic() + 30
        while not any(a == "SUCCESS" for _, a in client.answers):
            if time.monotonic() > deadline:
                raise RuntimeError("the broker's route never appeared")
            time.sleep(0.1)
        time.sleep(period / 3)   # a third of the way to the broker's next registration
        restarted = time.monotonic()
        server.stop(signal.SIGKILL if kill else signal.SIGTERM)
        server = Server(port, workdir, *args)
        server.wait_booted()
        time.sleep(after)
    finally:
        client.stopping.set()
        client.join(10)
        server.stop()
        sim.terminate()
        sim.wait(30)
    after_restart = [(t - restarted, a) for t, a in client.answers if t >= restarted]
    outcomes = {}
    for _, answer in after_restart:
        outcomes[answer] = outcomes.get(answer, 0) + 1
    first_ok = next((t for t, a in after_restart if a == "SUCCESS"), None)
    gap, last = 0.0, restarted
    for t, a in client.answers:
        if a == "SUCCESS":
            if t >= restarted:
                gap = max(gap, t - last)
            last = t
    loaded = [m.groups() for m in map(LOADED.search, server.lines) if m]
    return {"warm": warm, "stop": "kill -9" if kill else "SIGTERM", "answers": outcomes,
            "topic_not_exist": outcomes.get("TOPIC_NOT_EXIST", 0),
            "first_success_s": None if first_ok is None else round(first_ok, 2),
            "longest_gap_s": round(gap, 2),
            "loaded": loaded[0] if loaded else None}


def build_tables(pairs, brokers):
    from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
    from rocketpy.namesrv.model import DataVersion, Registration, TopicConfig, TopicConfigWrapper
    rim = RouteInfoManager(NamesrvConfig())
    per = pairs // brokers
    now = int(time.time() * 1000)
    for b in range(brokers):
        table = {f"T{b}-{i}": TopicConfig(f"T{b}-{i}", 8, 8, 6, 0) for i in range(per)}
        rim.register_broker(Registration(
            "DefaultCluster", f"10.0.{b // 250}.{b % 250}:10911", f"broker-{b}", 0,
            f"10.0.{b // 250}.{b % 250}:10912", TopicConfigWrapper(DataVersion(1, now, 0), table),
            [], b + 1, now))
    return rim


def load_part(pairs, brokers):
    from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
    from rocketpy.namesrv.routefile import (MainReader, ReadLimits, RoutesReader, RoutesRef,
                                            encode_main, encode_routes, routes_file_name)
    from rocketpy.namesrv.routeimage import RoutesCapture, capture_main, restore_deltas
    from rocketpy.service.fileio import write_atomic

    started = time.perf_counter()
    rim = build_tables(pairs, brokers)
    out = {"pairs": rim.queue_data_count, "topics": len(rim.topic_queue_table),
           "build_s": round(time.perf_counter() - started, 2)}
    capture, steps, longest = RoutesCapture(rim, "5.3"), 0, 0.0
    t0 = time.perf_counter()
    routes = None
    while routes is None:
        s = time.perf_counter()
        routes = capture.step()
        steps += 1
        longest = max(longest, time.perf_counter() - s)
    main = capture_main(rim, "5.3", int(time.time() * 1000), lambda cid: "10.0.0.1")
    out.update(capture_s=round(time.perf_counter() - t0, 3), capture_steps=steps,
               capture_longest_step_ms=round(longest * 1000, 1))
    t0 = time.perf_counter()
    data, digest = encode_routes(routes)
    ref = RoutesRef(routes_file_name("routes.snap", digest), len(data), digest)
    main_data = encode_main(main, ref)
    out["encode_s"] = round(time.perf_counter() - t0, 2)
    workdir = Path(tempfile.mkdtemp(prefix="rocketpy-warm-load-"))
    write_atomic(str(workdir / ref.file), data)
    write_atomic(str(workdir / "routes.snap"), main_data)
    out["bytes_on_disk"] = len(data) + len(main_data)
    out["bytes_per_pair"] = round(out["bytes_on_disk"] / max(1, out["pairs"]), 1)
    del rim, routes, main
    # the load in this process, step by step as the server does it
    limits = ReadLimits(10_000_000, 10_000_000, 10_000, 10_000)
    t0, cpu0 = time.perf_counter(), time.thread_time()
    longest, longest_cpu, steps = 0.0, 0.0, 0
    main_bytes = (workdir / "routes.snap").read_bytes()
    routes_bytes = (workdir / ref.file).read_bytes()
    read_s = time.perf_counter() - t0
    reader = MainReader(main_bytes, limits, "5.3", int(time.time() * 1000), 120_000, True)
    for part in (reader, None):
        if part is None:
            part = RoutesReader(routes_bytes, limits, "5.3", reader.routes)
        done = False
        while not done:
            s, c = time.perf_counter(), time.thread_time()
            done = part.step()
            steps += 1
            longest = max(longest, time.perf_counter() - s)
            longest_cpu = max(longest_cpu, time.thread_time() - c)
        routes_reader = part
    fresh = RouteInfoManager(NamesrvConfig())
    for delta in restore_deltas(reader.image, routes_reader.image):
        s, c = time.perf_counter(), time.thread_time()
        fresh.apply(delta)
        steps += 1
        longest = max(longest, time.perf_counter() - s)
        longest_cpu = max(longest_cpu, time.thread_time() - c)
    # wall time counts what other processes of a shared machine took meanwhile; CPU time is
    # this step's own work (page faults of new memory included)
    out.update(in_process_load_s=round(time.perf_counter() - t0, 2),
               in_process_load_cpu_s=round(time.thread_time() - cpu0, 2), read_s=round(read_s, 3),
               load_steps=steps, load_longest_step_ms=round(longest * 1000, 1),
               load_longest_step_cpu_ms=round(longest_cpu * 1000, 1),
               loaded_pairs=fresh.queue_data_count)
    del fresh, reader, routes_reader
    # the real server on it
    port = free_port()
    t0 = time.monotonic()
    server = Server(port, workdir, f"--routeSnapshotPath={workdir}/routes.snap",
                    "-D", "namesrvMaxTopics=20000000", "-D", "namesrvMaxTopicBrokerPairs=20000000")
    try:
        server.wait_booted(600)
        out["server_boot_s"] = round(time.monotonic() - t0, 2)
        found = [m.groups() for m in map(LOADED.search, server.lines) if m]
        if found:
            out["server_load_s"], out["server_load_steps"] = float(found[0][4]), int(found[0][5])
        else:
            out["server_log"] = server.lines[-5:]
    finally:
        server.stop()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("hole", "load", "all"), default="all")
    parser.add_argument("--after", type=float, default=40.0,
                        help="seconds the client goes on after a restart (default 40)")
    parser.add_argument("--period", type=float, default=30.0,
                        help="the broker's registerNameServerPeriod (default 30)")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
          "(shared: other work runs beside this)")
    if args.part in ("hole", "all"):
        for warm in (False, True):
            for kill in (False, True):
                result = hole_run(warm, kill, args.after, args.period)
                print(json.dumps(result), flush=True)
    if args.part in ("load", "all"):
        print(json.dumps(load_part(args.pairs, args.brokers)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
