"""End to end: ``twistd rocketnamesrv`` with ``enableControllerInNamesrv=true``, two brokers of
one group in controller mode (blocking sockets speaking what the captured 5.3.3 brokers send),
their master killed, the NOTIFY_BROKER_ROLE_CHANGED push arriving on the survivor's listen port;
then the controller killed with SIGKILL and restarted on the same store: ids, master, epochs and
sync state set survive; and a graceful stop with the master connected deposes nobody. 127.0.0.1 only; every process and socket closed by the test."""
import contextlib
import socket
import tempfile

import pytest

from rocketpy.remoting import bodies as B, headers as H
from rocketpy.remoting.command import FLAG_ONEWAY, RemotingCommand
from serverproc import PATIENCE, RemotingClient, accept_pushed_frame, running_server

pytestmark = pytest.mark.network

GROUP = dict(cluster_name="DefaultCluster", broker_name="broker-a")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _controller_args(port, store):
    return ("-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=group1",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{port}", "-D", "controllerDLegerSelfId=n0",
            "-D", f"controllerStorePath={store}", "-D", "bindAddress=127.0.0.1")


class Broker:
    """One controller-mode broker: a listen socket (where pushes arrive) and its controller
    connection."""

    def __init__(self, controller_port):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(PATIENCE)
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.client = RemotingClient(controller_port)
        self.broker_id = None

    def call(self, code, header=None, body=None):
        return self.client.call(code, None if header is None else header.to_ext_fields(), body)

    def join(self):
        """1012 next id, 1013 apply it, 1003 register, a first heartbeat: what ReplicasManager
        does at start."""
        answer = self.call(1012, H.GetNextBrokerIdRequestHeader(**GROUP))
        broker_id = H.GetNextBrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
        answer = self.call(1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=broker_id, register_check_code=f"{self.addr};1", **GROUP))
        assert answer.code == 0, answer
        self.broker_id = broker_id
        answer = self.call(1003, H.RegisterBrokerToControllerRequestHeader(
            broker_id=broker_id, broker_address=self.addr, invoke_time=1, **GROUP))
        assert answer.code == 0, answer
        self.heartbeat()
        return answer

    def heartbeat(self):
        header = H.BrokerHeartbeatRequestHeader(
            broker_addr=self.addr, broker_id=self.broker_id, epoch=1, max_offset=0,
            confirm_offset=0, heartbeat_timeout_mills=10000, election_priority=2147483647,
            **GROUP)
        self.client.send_frame(RemotingCommand.request(
            904, header.to_ext_fields(), oneway=True, version=479).encode())

    def replica_info(self):
        answer = self.call(1004, H.GetReplicaInfoRequestHeader(broker_name="broker-a"))
        header = H.GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields)
        return answer, header, B.SyncStateSet.from_json(answer.body)

    def pushed(self):
        """The first frame the controller pushes to this broker's listen port."""
        return accept_pushed_frame(self.listener)

    def close(self):
        self.client.close()
        self.listener.close()


@contextlib.contextmanager
def _brokers(port, n):
    brokers = [Broker(port) for _ in range(n)]
    try:
        yield brokers
    finally:
        for b in brokers:
            b.close()


def test_failover_push_and_durable_restart():
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="rocketpy-controller-") as store:
        with running_server(*_controller_args(port, store)) as server:
            server.wait_for_log(r"The ControllerManager boot success\.")
            with _brokers(port, 2) as (b1, b2):
                b1.join()
                answer = b1.call(1002, H.ElectMasterRequestHeader(
                    broker_id=b1.broker_id, designate_elect=False, **GROUP))
                assert answer.code == 0
                assert H.ElectMasterResponseHeader.from_ext_fields(
                    answer.ext_fields).master_broker_id == 1
                answer = b2.join()
                assert H.RegisterBrokerToControllerResponseHeader.from_ext_fields(
                    answer.ext_fields).master_address == b1.addr
                answer = b1.call(1001, H.AlterSyncStateSetRequestHeader(
                    broker_name="broker-a", master_broker_id=1, master_epoch=1),
                    b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
                assert (answer.code, answer.ext_fields) == (0, {"newSyncStateSetEpoch": "2"})
                b1.client.reset()                      # the master dies
                push = b2.pushed()
                assert (push.code, push.flag) == (1008, FLAG_ONEWAY)
                assert push.ext_fields == {"masterAddress": b2.addr, "masterBrokerId": "2",
                                           "syncStateSetEpoch": "3", "masterEpoch": "2"}
                assert push.body == b'{"syncStateSet":[2],"syncStateSetEpoch":3}'
                _, header, sss = b2.replica_info()
                assert (header.master_broker_id, header.master_epoch) == (2, 2)
                server.kill()                          # kill -9: nothing acknowledged is lost
        with running_server(*_controller_args(port, store)) as server:
            server.wait_for_log(r"The ControllerManager boot success\.")
            with _brokers(port, 1) as (b3,):
                answer, header, sss = b3.replica_info()
                assert answer.code == 0
                assert (header.master_broker_id, header.master_address, header.master_epoch) == (
                    2, b2.addr, 2)
                assert (sss.sync_state_set, sss.sync_state_set_epoch) == ([2], 3)
                answer = b3.call(1012, H.GetNextBrokerIdRequestHeader(**GROUP))
                assert answer.ext_fields["nextBrokerId"] == "3"
                b3.broker_id, b3.addr = 2, b2.addr     # the master is back, heartbeating ...
                b3.heartbeat()
                assert b3.replica_info()[1].master_broker_id == 2
                assert server.stop() == 0              # ... when the controller stops (SIGTERM)
        # closing its own connections on the way out deposed nobody
        with running_server(*_controller_args(port, store)) as server:
            server.wait_for_log(r"The ControllerManager boot success\.")
            with _brokers(port, 1) as (b4,):
                _, header, sss = b4.replica_info()
                assert (header.master_broker_id, header.master_epoch) == (2, 2)
                assert (sss.sync_state_set, sss.sync_state_set_epoch) == ([2], 3)
