"""Benchmark: the controller's push fan-out (issue 31 hole 6). One connection to the controller of
``twistd rocketnamesrv`` (``enableControllerInNamesrv=true``) makes up N brokers of one group,
each with a listen address of its choice (here N ports of a sink on 127.0.0.1 that accepts,
reads and counts), and asks an election: the controller pushes NOTIFY_BROKER_ROLE_CHANGED to
every live broker of the group. Prints the most push connections open at once at the sink and
the server's most open descriptors, the connections made, and those still open 10 s later. ``--old COMMIT`` runs that commit's tree the same way first.

    python3 bench/controller_pushes.py [--brokers 5000] [--old 21f3da4]
"""
import argparse
import os
import selectors
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchserver import ROOT, export, start_server  # noqa: E402
from controller_failover import (Conn, _free_port, _request, _wait_port,  # noqa: E402
                                 controller_args)
from rocketpy.remoting import headers as H  # noqa: E402


class Sink(threading.Thread):
    """N listening ports; counts the connections accepted and those open at once."""

    def __init__(self, n):
        super().__init__(daemon=True)
        self.selector = selectors.DefaultSelector()
        self.ports = []
        for _ in range(n):
            s = socket.create_server(("127.0.0.1", 0), backlog=64)
            s.setblocking(False)
            self.selector.register(s, selectors.EVENT_READ, "listen")
            self.ports.append(s.getsockname()[1])
        self.open = self.most = self.accepted = 0
        self.running = True

    def run(self):
        while self.running:
            for key, _ in self.selector.select(0.05):
                if key.data == "listen":
                    try:
                        conn, _ = key.fileobj.accept()
                    except BlockingIOError:
                        continue
                    conn.setblocking(False)
                    self.selector.register(conn, selectors.EVENT_READ, "conn")
                    self.accepted += 1
                    self.open += 1
                    self.most = max(self.most, self.open)
                    continue
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionError:
                    data = b""
                if data:
                    continue
                self.selector.unregister(key.fileobj)
                key.fileobj.close()
                self.open -= 1


def _fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def run(tree, n, label):
    controller_port = _free_port()
    sink = Sink(n)
    sink.start()
    with tempfile.TemporaryDirectory() as work:
        proc, _, _ = start_server(tree, work, controller_args(work, controller_port))
        try:
            _wait_port(controller_port)
            conn = Conn(controller_port)
            names = dict(cluster_name="C", broker_name="made-up")
            for broker_id, port in enumerate(sink.ports, 1):
                addr = f"127.0.0.1:{port}"
                conn.call(_request(1013, H.ApplyBrokerIdRequestHeader(
                    applied_broker_id=broker_id, register_check_code=f"{addr};1", **names)))
                conn.call(_request(1003, H.RegisterBrokerToControllerRequestHeader(
                    broker_id=broker_id, broker_address=addr, invoke_time=1, **names)))
                conn.send(_request(904, H.BrokerHeartbeatRequestHeader(
                    broker_addr=addr, broker_id=broker_id, epoch=0, max_offset=0,
                    heartbeat_timeout_mills=600000, **names), oneway=True))
            base_fds = _fds(proc.pid)
            started = time.monotonic()
            answer = conn.call(_request(1002, H.ElectMasterRequestHeader(
                broker_id=1, designate_elect=False, **names)))
            most_fds = 0
            while time.monotonic() - started < 10:
                most_fds = max(most_fds, _fds(proc.pid))
                time.sleep(0.02)
            print(f"{label}: election code {answer.code}; {n} brokers: at most {sink.most} push "
                  f"connections open at once at the sink, server descriptors +{most_fds - base_fds} "
                  f"at most; {sink.accepted} connections, {sink.open} still open after 10 s",
                  flush=True)
        finally:
            proc.kill()
            proc.wait(10)
            sink.running = False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=5000)
    parser.add_argument("--old", help="a commit to run first, the same way")
    args = parser.parse_args(argv)
    if args.old:
        with tempfile.TemporaryDirectory() as work:
            tree = export(args.old, work)
            for so in ROOT.glob("rocketpy/*/_*.so"):
                (tree / so.relative_to(ROOT)).write_bytes(so.read_bytes())
            run(tree, args.brokers, f"old {args.old}")
    run(ROOT, args.brokers, "new")


if __name__ == "__main__":
    main()
