"""Benchmark: the controller group on etcd (``controllerType=etcd``) against the single
controller's file store, with ``twistd rocketnamesrv`` processes and a 3-member etcd cluster on
127.0.0.1 (Debian's ``etcd-server``).

Two numbers: the time of one durable change (CONTROLLER_APPLY_BROKER_ID of a new group, answered
once the change is in the event log: ``fsync`` for the file store, committed by etcd for the
group), sequential requests from one client; and the failover time, from SIGKILL of the leader
controller until a survivor answers GET_METADATA_INFO as leader (the killed one is restarted
between kills). Prints medians; runs in well under 2 minutes.

    python3 bench/controller_etcd.py [--changes 200] [--kills 3] [--ttl 2]
"""
import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from etcdproc import etcd_cluster, free_ports  # noqa: E402
from serverproc import wait_until  # noqa: E402
from rocketpy.remoting import headers as H  # noqa: E402
from serverproc import RemotingClient, running_server  # noqa: E402


def _args(self_id, peers, store, endpoints=None, ttl=2):
    args = ["-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=bench",
            "-D", f"controllerDLegerPeers={peers}", "-D", f"controllerDLegerSelfId={self_id}",
            "-D", f"controllerStorePath={store}", "-D", "bindAddress=127.0.0.1"]
    if endpoints:
        args += ["-D", "controllerType=etcd", "-D", f"controllerEtcdEndpoints={','.join(endpoints)}",
                 "-D", f"controllerEtcdLeaseTtl={ttl}"]
    return args


def _leader(ports):
    for port in ports:
        try:
            client = RemotingClient(port, timeout=3)
        except OSError:
            continue
        try:
            meta = H.GetMetaDataResponseHeader.from_ext_fields(client.call(1005).ext_fields)
            if meta.is_leader:
                return port
        except OSError:
            pass
        finally:
            client.close()
    return None


def _changes(port, count, tag):
    client = RemotingClient(port, timeout=20)
    times = []
    try:
        for i in range(count):
            header = H.ApplyBrokerIdRequestHeader(
                cluster_name="c", broker_name=f"{tag}-{i}", applied_broker_id=1,
                register_check_code=f"127.0.0.1:{20000 + i};1")
            started = time.perf_counter()
            answer = client.call(1013, header.to_ext_fields())
            times.append(time.perf_counter() - started)
            assert answer.code == 0, answer
    finally:
        client.close()
    return times


def _ms(values):
    values = sorted(values)
    return (f"median {statistics.median(values) * 1000:.1f} ms, "
            f"p90 {values[int(len(values) * 0.9)] * 1000:.1f} ms")


def run(changes, kills, ttl):
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-etcd-") as tmp, \
            etcd_cluster(tmp) as (endpoints, _), contextlib.ExitStack() as stack:
        (single,) = free_ports(1)
        server = stack.enter_context(running_server(
            *_args("n0", f"n0-127.0.0.1:{single}", os.path.join(tmp, "file"))))
        server.wait_for_log(r"The ControllerManager boot success\.", timeout=20)
        print(f"file store, fsync per change: {_ms(_changes(single, changes, 'file'))}")

        ports = free_ports(3)
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        contexts = {}

        def start(i):
            cm = running_server(*_args(f"n{i}", peers, os.path.join(tmp, f"s{i}"), endpoints, ttl))
            contexts[ports[i]] = cm
            return cm.__enter__()

        servers = {ports[i]: start(i) for i in range(3)}
        try:
            leader = wait_until(lambda: _leader(ports), "a leader", 30)
            print(f"etcd group (3 etcd members), commit per change: "
                  f"{_ms(_changes(leader, changes, 'etcd'))}")
            failovers = []
            for _ in range(kills):
                leader = wait_until(lambda: _leader(ports), "a leader", 30)
                killed = time.monotonic()
                servers[leader].kill()
                others = [p for p in ports if p != leader]
                wait_until(lambda: _leader(others), "a new leader", 30)
                failovers.append(time.monotonic() - killed)
                contexts[leader].__exit__(None, None, None)
                servers[leader] = start(ports.index(leader))
                servers[leader].wait_for_log(r"controller state read from etcd", timeout=20)
            print(f"failover, SIGKILL of the leader to a new leader (lease TTL {ttl} s): "
                  + ", ".join(f"{f:.2f} s" for f in failovers)
                  + f"; median {statistics.median(failovers):.2f} s")
        finally:
            for cm in contexts.values():
                cm.__exit__(None, None, None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--ttl", type=int, default=2)
    options = parser.parse_args()
    run(options.changes, options.kills, options.ttl)


if __name__ == "__main__":
    main()
