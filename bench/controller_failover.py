"""Benchmark: time from a master's death to the new master's route, with the controller inside
``twistd rocketnamesrv`` (``enableControllerInNamesrv=true``), at 10 and 500 broker groups.

Each group has two controller-mode brokers speaking what the captured 5.3.3 brokers send
(blocking sockets on 127.0.0.1): ids applied, registered, a heartbeat, the first elected, the
sync state set grown to both; the master registers its topic at the NameServer as brokerId 0.
Then, for a few groups, the master's controller connection is reset (as a SIGKILL leaves it) and
three times are taken: until the NOTIFY_BROKER_ROLE_CHANGED push reaches the survivor's listen
port, and until GET_ROUTEINFO_BY_TOPIC shows the survivor as brokerId 0 once it registered
(as a promoted 5.3.3 broker does on the push). Prints the medians; runs in well under 2 minutes.

    python3 bench/controller_failover.py [--groups 10,500] [--kills 5]
"""
import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchserver import ROOT, start_server  # noqa: E402
from rocketpy.broker.outer_api import BrokerConfig, BrokerOuterAPI  # noqa: E402
from rocketpy.broker.topics import TopicConfigManager  # noqa: E402
from rocketpy.remoting import RemotingCommand, decode_frame, headers as H  # noqa: E402
from rocketpy.remoting.bodies import TopicConfig, TopicRouteData  # noqa: E402


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        self.opaque = 0

    def frame(self):
        while True:
            if len(self.buf) >= 4:
                end = 4 + int.from_bytes(self.buf[:4], "big")
                if len(self.buf) >= end:
                    data, self.buf = self.buf[:end], self.buf[end:]
                    return decode_frame(data)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def call(self, request):
        self.opaque += 1
        request.opaque = self.opaque
        self.sock.sendall(request.encode())
        return self.frame()

    def send(self, request):
        self.sock.sendall(request.encode())


def _request(code, header, body=None, oneway=False):
    return RemotingCommand.request(code, header.to_ext_fields(), body, oneway=oneway, version=479)


class Broker:
    def __init__(self, group, broker_id, controller_port):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.group, self.broker_id = group, broker_id
        self.names = dict(cluster_name="DefaultCluster", broker_name=group)
        self.controller = Conn(controller_port)

    def join(self):
        c = self.controller
        c.call(_request(1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=self.broker_id, register_check_code=f"{self.addr};1", **self.names)))
        c.call(_request(1003, H.RegisterBrokerToControllerRequestHeader(
            broker_id=self.broker_id, broker_address=self.addr, invoke_time=1, **self.names)))
        c.send(_request(904, H.BrokerHeartbeatRequestHeader(
            broker_addr=self.addr, broker_id=self.broker_id, epoch=0, max_offset=0,
            heartbeat_timeout_mills=120000, **self.names), oneway=True))

    def register_at_namesrv(self, namesrv):
        host, port = self.addr.rsplit(":", 1)
        config = BrokerConfig(broker_cluster_name="DefaultCluster", broker_name=self.group,
                              broker_id=0, broker_ip1=host, listen_port=int(port))
        topics = TopicConfigManager("DefaultCluster", self.group, 0, [TopicConfig(
            topic_name=f"T-{self.group}", read_queue_nums=4, write_queue_nums=4, perm=6)])
        answer = namesrv.call(BrokerOuterAPI(None).registration(config, topics.wrapper(0)))
        assert answer.code == 0, answer

    def wait_push(self, master_epoch):
        """The first push of ``master_epoch`` (the controller keeps its push connection open:
        the first election's push came over it already)."""
        if getattr(self, "pushes", None) is None:
            self.listener.settimeout(20)
            conn, _ = self.listener.accept()
            conn.settimeout(20)
            self.pushes = Conn.__new__(Conn)
            self.pushes.sock, self.pushes.buf = conn, b""
        while True:
            push = self.pushes.frame()
            if push.ext_fields["masterEpoch"] == str(master_epoch):
                return push


def _route_master(namesrv, topic):
    answer = namesrv.call(RemotingCommand.request(105, {"topic": topic}, version=479))
    if answer.code != 0:
        return None
    route = TopicRouteData.from_json(answer.body)
    return route.broker_datas[0].broker_addrs.get(0) if route.broker_datas else None


def controller_args(work, controller_port):
    """The server's options for a single controller on ``controller_port``."""
    return ["-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
            "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={work}/ctl",
            "-D", "bindAddress=127.0.0.1"]


def run(groups, kills):
    controller_port = _free_port()
    with tempfile.TemporaryDirectory() as work:
        proc, port, _ = start_server(ROOT, work, controller_args(work, controller_port))
        try:
            _wait_port(controller_port)
            namesrv = Conn(port)
            started = time.perf_counter()
            pairs = []
            for g in range(groups):
                name = f"group-{g}"
                b1, b2 = Broker(name, 1, controller_port), Broker(name, 2, controller_port)
                b1.join()
                b2.join()
                b1.controller.call(_request(1002, H.ElectMasterRequestHeader(
                    broker_id=1, designate_elect=False, **b1.names)))
                b1.controller.call(_request(1001, H.AlterSyncStateSetRequestHeader(
                    broker_name=name, master_broker_id=1, master_epoch=1),
                    b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}'))
                b1.register_at_namesrv(namesrv)
                pairs.append((b1, b2))
            setup = time.perf_counter() - started
            push_ms, route_ms = [], []
            for b1, b2 in pairs[:kills]:
                t0 = time.perf_counter()
                b1.controller.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                              b"\x01\x00\x00\x00\x00\x00\x00\x00")
                b1.controller.sock.close()
                push = b2.wait_push(2)
                t1 = time.perf_counter()
                assert push.ext_fields["masterBrokerId"] == "2", push
                b2.register_at_namesrv(namesrv)
                while _route_master(namesrv, f"T-{b2.group}") != b2.addr:
                    pass
                t2 = time.perf_counter()
                push_ms.append((t1 - t0) * 1000)
                route_ms.append((t2 - t0) * 1000)
            print(f"{groups:4d} groups ({2 * groups} brokers, set up in {setup:.1f} s): master death "
                  f"-> push {statistics.median(push_ms):.1f} ms, -> new master's route "
                  f"{statistics.median(route_ms):.1f} ms (median of {len(push_ms)}; "
                  f"max {max(route_ms):.1f} ms)")
        finally:
            proc.terminate()
            proc.wait(10)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"controller port {port} never opened")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="10,500")
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    for n in (int(x) for x in args.groups.split(",")):
        run(n, min(args.kills, n))


if __name__ == "__main__":
    main()
