"""Benchmark: the controller group on etcd under two faults, with ``twistd rocketnamesrv``
controllers and a 3-member etcd on 127.0.0.1 (Debian's ``etcd-server``); ``--old COMMIT`` runs
that commit's tree the same way first.

* ``sizes`` (issue 31 hole 7): one leader, one connection sends 10 CONTROLLER_APPLY_BROKER_ID
  with a 2 MB ``registerCheckCode`` (etcd refuses a request over 1.5 MiB), each followed by a
  genuine one, one at a time (each answered, a leader again, before the next), then all
  written before any answer is read; prints the step-downs the log shows and how many genuine
  changes succeeded.
* ``freeze`` (issue 32 part 5): three controllers; the etcd member the leader talks to is
  stopped (SIGSTOP) for 10 s, then continued; GET_METADATA_INFO is asked of every controller
  every 20 ms, and the time no controller answered as leader is printed, with what the
  controllers logged about it.

    python3 bench/controller_etcd_faults.py [sizes|freeze|both] [--old 21f3da4] [--rounds 3]
"""
import argparse
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from benchserver import export, start_server  # noqa: E402
from etcdproc import etcd_cluster, free_ports  # noqa: E402
from serverproc import wait_until  # noqa: E402
from rocketpy.remoting import RemotingCommand, headers as H  # noqa: E402
from serverproc import RemotingClient  # noqa: E402


def _controller(tree, work, self_id, peers, endpoints, ttl=2):
    store = Path(work) / f"store-{self_id}"
    proc, _, log = start_server(tree, work, [
        "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=bench",
        "-D", f"controllerDLegerPeers={peers}", "-D", f"controllerDLegerSelfId={self_id}",
        "-D", f"controllerStorePath={store}", "-D", "bindAddress=127.0.0.1",
        "-D", "controllerType=etcd", "-D", f"controllerEtcdEndpoints={','.join(endpoints)}",
        "-D", f"controllerEtcdLeaseTtl={ttl}"])
    return proc, log


def _is_leader(port, timeout=0.5):
    try:
        client = RemotingClient(port, timeout=timeout)
    except OSError:
        return False
    try:
        return H.GetMetaDataResponseHeader.from_ext_fields(client.call(1005).ext_fields).is_leader
    except (OSError, ValueError):
        return False
    finally:
        client.close()


def sizes(tree, label):
    for pipelined in (False, True):
        _sizes(tree, label, pipelined)


def _sizes(tree, label, pipelined):
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-etcd-") as work, \
            etcd_cluster(work) as (endpoints, _):
        (port,) = free_ports(1)
        proc, log = _controller(tree, work, "n0", f"n0-127.0.0.1:{port}", endpoints)
        try:
            wait_until(lambda: _is_leader(port), "the leader", 30)
            client = RemotingClient(port, timeout=60)
            frames = []
            for i in range(10):
                for name, code in ((f"big-{i}", "x" * (2 << 20)),
                                   (f"genuine-{i}", f"127.0.0.1:{20000 + i};1")):
                    header = H.ApplyBrokerIdRequestHeader(
                        cluster_name="c", broker_name=name, applied_broker_id=1,
                        register_check_code=code)
                    frames.append(RemotingCommand.request(
                        1013, header.to_ext_fields(), opaque=len(frames) + 1, version=479).encode())
            answers = {}
            if pipelined:
                client.send_frame(b"".join(frames))
            for frame in frames:
                if not pipelined:
                    client.send_frame(frame)
                    answer = client.read_frame()
                    answers[answer.opaque] = answer
                    wait_until(lambda: _is_leader(port, timeout=2), "a leader again", 30)
            while len(answers) < len(frames):
                answer = client.read_frame()
                answers[answer.opaque] = answer
            client.close()
            genuine = sum(answers[2 * i + 2].code == 0 for i in range(10))
            big = sum(answers[2 * i + 1].code == 0 for i in range(10))
            time.sleep(3)
            text = log.read_text(errors="replace")
            print(f"{label}: 10 x 2 MB registerCheckCode + 10 genuine, "
                  f"{'pipelined' if pipelined else 'one at a time'}: "
                  f"{text.count(' stops leading')} step-downs, {genuine} of 10 genuine changes "
                  f"committed, {big} oversized accepted", flush=True)
        finally:
            proc.kill()
            proc.wait(10)


def freeze(tree, label, rounds):
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-etcd-") as work, \
            etcd_cluster(work) as (endpoints, etcds):
        ports = free_ports(3)
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        controllers = [_controller(tree, work, f"n{i}", peers, endpoints) for i in range(3)]
        try:
            for n in range(rounds):
                leader = wait_until(lambda: next((p for p in ports if _is_leader(p)), None),
                                    "a leader", 30)
                time.sleep(2)
                # the member the leader's gateway talks to: the first that answers it (its
                # endpoint list starts with the first); freeze that one
                frozen = etcds[n % len(etcds)]
                frozen.send_signal(signal.SIGSTOP)
                stopped = time.monotonic()
                gaps, gap_started = [], None
                while time.monotonic() - stopped < 10:
                    led = any(_is_leader(p, timeout=0.3) for p in ports)
                    now = time.monotonic()
                    if not led and gap_started is None:
                        gap_started = now
                    elif led and gap_started is not None:
                        gaps.append(now - gap_started)
                        gap_started = None
                    time.sleep(0.02)
                frozen.send_signal(signal.SIGCONT)
                if gap_started is not None:
                    gaps.append(time.monotonic() - gap_started)
                print(f"{label}: round {n + 1}, etcd member {n % len(etcds)} frozen 10 s "
                      f"(leader was {ports.index(leader)}): no controller answered as leader for "
                      + (", ".join(f"{g:.2f} s" for g in gaps) if gaps else "0 s"), flush=True)
                time.sleep(4)
            for i, (_, log) in enumerate(controllers):
                text = log.read_text(errors="replace")
                spells = re.findall(r"has a leader again \(\S+\) after (\d+) ms", text)
                print(f"{label}: controller n{i} logged {text.count('has no leader')} leaderless "
                      f"spells" + (f" ({', '.join(spells)} ms)" if spells else "")
                      + f", {text.count(' stops leading')} step-downs", flush=True)
        finally:
            for proc, _ in controllers:
                proc.kill()
                proc.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fault", nargs="?", default="both", choices=("sizes", "freeze", "both"))
    parser.add_argument("--old", help="a commit to run first, the same way")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as work:
        if args.old:
            tree = export(args.old, work)
            for so in ROOT.glob("rocketpy/*/_*.so"):
                (tree / so.relative_to(ROOT)).write_bytes(so.read_bytes())
            runs.append((tree, f"old {args.old}"))
        runs.append((ROOT, "new"))
        for tree, label in runs:
            if args.fault in ("sizes", "both"):
                sizes(tree, label)
            if args.fault in ("freeze", "both"):
                freeze(tree, label, args.rounds)


if __name__ == "__main__":
    main()
