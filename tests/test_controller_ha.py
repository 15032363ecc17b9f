"""The controller group on etcd, end to end: a 3-member etcd cluster and three ``twistd
rocketnamesrv`` controllers with ``controllerType=etcd`` on 127.0.0.1; brokers (blocking sockets
speaking the captured 5.3.3 requests, heartbeating to every controller as a 5.3.3 broker does)
find the leader through CONTROLLER_GET_METADATA_INFO, take ids, elect a master and grow the sync
state set; the followers answer CONTROLLER_NOT_LEADER. The leader controller is killed with
SIGKILL: a follower leads, with the brokers' ids, master, epochs and sync state set, and new
requests work there (a third broker's id; the master's death elects the slave and pushes its
role). Every process is started and stopped by the test, data dirs in a temporary directory."""
import contextlib
import os
import signal
import socket
import tempfile
import time

import pytest

from rocketpy.remoting import bodies as B, headers as H
from rocketpy.remoting.codes import ResponseCode as RC
from rocketpy.remoting.command import RemotingCommand
from etcdproc import etcd_cluster, free_ports
from serverproc import PATIENCE, RemotingClient, accept_pushed_frame, running_server, wait_until

pytestmark = pytest.mark.network

GROUP = dict(cluster_name="DefaultCluster", broker_name="broker-a")
#: the lease a silent leader's election key outlives (seconds)
LEASE_TTL = 4


def _controller_args(self_id, peers, endpoints, store):
    return ("-D", "enableControllerInNamesrv=true", "-D", "controllerType=etcd",
            "-D", f"controllerEtcdEndpoints={','.join(endpoints)}",
            "-D", f"controllerEtcdLeaseTtl={LEASE_TTL}",
            "-D", "controllerDLegerGroup=group1", "-D", f"controllerDLegerPeers={peers}",
            "-D", f"controllerDLegerSelfId={self_id}", "-D", f"controllerStorePath={store}",
            "-D", "bindAddress=127.0.0.1")


def _metadata(port):
    """(leaderId, leaderAddress, isLeader) from one controller, None if it does not answer."""
    try:
        client = RemotingClient(port, timeout=3)
    except OSError:
        return None
    try:
        answer = client.call(1005)
        meta = H.GetMetaDataResponseHeader.from_ext_fields(answer.ext_fields)
        return meta.controller_leader_id, meta.controller_leader_address, meta.is_leader
    except OSError:
        return None
    finally:
        client.close()


def _leader(ports, ids):
    """The id every answering controller names as leader, once the named one says it leads."""
    answers = {i: _metadata(p) for i, p in zip(ids, ports)}
    answers = {i: a for i, a in answers.items() if a is not None}
    leaders = {a[0] for a in answers.values()}
    if len(leaders) != 1 or None in leaders:
        return None
    leader = leaders.pop()
    return leader if answers.get(leader, (None, None, False))[2] else None


class Broker:
    """A controller-mode broker: a listen socket for pushes, a connection to every controller
    (heartbeats to all, requests to the leader)."""

    def __init__(self, ports):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(PATIENCE)
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.clients = {port: RemotingClient(port) for port in ports}
        self.broker_id = None

    def call(self, port, code, header=None, body=None):
        return self.clients[port].call(code, None if header is None else header.to_ext_fields(),
                                       body)

    def join(self, port):
        answer = self.call(port, 1012, H.GetNextBrokerIdRequestHeader(**GROUP))
        assert answer.code == RC.SUCCESS, answer
        broker_id = H.GetNextBrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
        answer = self.call(port, 1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=broker_id, register_check_code=f"{self.addr};1", **GROUP))
        assert answer.code == RC.SUCCESS, answer
        self.broker_id = broker_id
        answer = self.call(port, 1003, H.RegisterBrokerToControllerRequestHeader(
            broker_id=broker_id, broker_address=self.addr, invoke_time=1, **GROUP))
        assert answer.code == RC.SUCCESS, answer
        self.heartbeat()
        return answer

    def heartbeat(self):
        header = H.BrokerHeartbeatRequestHeader(
            broker_addr=self.addr, broker_id=self.broker_id, epoch=1, max_offset=0,
            confirm_offset=0, heartbeat_timeout_mills=30000, election_priority=2147483647,
            **GROUP)
        frame = RemotingCommand.request(904, header.to_ext_fields(), oneway=True,
                                        version=479).encode()
        for port, client in list(self.clients.items()):
            try:
                client.send_frame(frame)
            except OSError:
                del self.clients[port]       # the killed controller

    def pushed(self):
        return accept_pushed_frame(self.listener)

    def close(self):
        for client in self.clients.values():
            client.close()
        self.listener.close()


def _replica_info(broker, port):
    answer = broker.call(port, 1004, H.GetReplicaInfoRequestHeader(broker_name="broker-a"))
    assert answer.code == RC.SUCCESS, answer
    header = H.GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields)
    sync = B.SyncStateSet.from_json(answer.body)
    return (header.master_broker_id, header.master_address, header.master_epoch,
            sorted(sync.sync_state_set), sync.sync_state_set_epoch)


def test_leader_killed_a_follower_leads_with_the_brokers_state():
    ids = ["n0", "n1", "n2"]
    ports = free_ports(3)
    peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(ids, ports))
    with tempfile.TemporaryDirectory(prefix="rocketpy-ha-") as tmp, \
            etcd_cluster(tmp) as (endpoints, _), contextlib.ExitStack() as stack:
        servers = {}
        for self_id in ids:
            store = os.path.join(tmp, f"store-{self_id}")
            servers[self_id] = stack.enter_context(
                running_server(*_controller_args(self_id, peers, endpoints, store)))
        for server in servers.values():
            server.wait_for_log(r"The ControllerManager boot success\.")
        port_of = dict(zip(ids, ports))
        leader = wait_until(lambda: _leader(ports, ids), "a leader named by every controller", step=0.05)
        followers = [i for i in ids if i != leader]
        lport = port_of[leader]
        meta = _metadata(port_of[followers[0]])
        assert meta == (leader, f"127.0.0.1:{lport}", False)

        brokers = [Broker(ports), Broker(ports)]
        stack.callback(lambda: [b.close() for b in brokers])
        b1, b2 = brokers
        b1.join(lport)
        answer = b1.call(lport, 1002, H.ElectMasterRequestHeader(
            broker_id=b1.broker_id, designate_elect=False, **GROUP))
        assert answer.code == RC.SUCCESS
        b2.join(lport)
        answer = b1.call(lport, 1001, H.AlterSyncStateSetRequestHeader(
            broker_name="broker-a", master_broker_id=1, master_epoch=1),
            b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        assert answer.code == RC.SUCCESS, answer
        before = _replica_info(b1, lport)
        assert before == (1, b1.addr, 1, [1, 2], 2)
        # a follower answers as Java's: not the leader, nothing changed there
        answer = b2.call(port_of[followers[0]], 1004,
                         H.GetReplicaInfoRequestHeader(broker_name="broker-a"))
        assert (answer.code, answer.remark) == (RC.CONTROLLER_NOT_LEADER,
                                                "The controller is not in leader state")

        killed = time.monotonic()
        servers[leader].kill()                     # kill -9 the leader controller
        new_leader = wait_until(lambda: _leader([port_of[i] for i in followers], followers),
                                "a new leader", step=0.05)
        failover = time.monotonic() - killed
        print(f"\nfailover: leader killed -> follower {new_leader} leads in {failover:.2f} s "
              f"(lease TTL {LEASE_TTL} s)")
        assert new_leader in followers
        nport = port_of[new_leader]
        for b in brokers:
            b.heartbeat()
        assert _replica_info(b2, nport) == before
        b3 = Broker([nport])
        brokers.append(b3)
        b3.join(nport)
        assert b3.broker_id == 3
        # the master dies: the new leader elects the slave and pushes its role
        for client in b1.clients.values():
            client.close()
        b1.clients = {}
        push = b2.pushed()
        assert push.code == 1008
        pushed = H.NotifyBrokerRoleChangedRequestHeader.from_ext_fields(push.ext_fields)
        assert (pushed.master_broker_id, pushed.master_epoch) == (2, 2)
        after = _replica_info(b2, nport)
        assert after[:3] == (2, b2.addr, 2) and after[3] == [2]
        # the other survivor holds the same state: it answers it once it leads
        other = next(i for i in followers if i != new_leader)
        servers[new_leader].stop()                 # a graceful stop hands over at once
        assert wait_until(lambda: _leader([port_of[other]], [other]), "the last leader", step=0.05) == other
        # b2 keeps its own connection there: replacing it would close the old one, which the
        # controller rightly takes for the master's death and elects (a race the test lost once)
        assert port_of[other] in b2.clients
        assert _replica_info(b2, port_of[other]) == after
        answer = b2.call(port_of[other], 1012, H.GetNextBrokerIdRequestHeader(**GROUP))
        assert H.GetNextBrokerIdResponseHeader.from_ext_fields(
            answer.ext_fields).next_broker_id == 4


def test_leader_cut_from_etcd_stops_answering_as_leader():
    """etcd frozen (SIGSTOP): the leader cannot keep its lease alive, so once the lease it last
    kept alive would have expired it answers CONTROLLER_NOT_LEADER and GET_METADATA_INFO says it
    does not lead; etcd back (SIGCONT), it campaigns again and leads with its state."""
    ports = free_ports(1)
    with tempfile.TemporaryDirectory(prefix="rocketpy-ha-") as tmp, \
            etcd_cluster(tmp, members=1) as (endpoints, (etcd,)), \
            contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server(*_controller_args(
            "n0", f"n0-127.0.0.1:{ports[0]}", endpoints, os.path.join(tmp, "store"))))
        server.wait_for_log(r"The ControllerManager boot success\.")
        wait_until(lambda: _leader(ports, ["n0"]), "the controller to lead", step=0.05)
        broker = Broker(ports)
        stack.callback(broker.close)
        broker.join(ports[0])
        assert broker.call(ports[0], 1002, H.ElectMasterRequestHeader(
            broker_id=1, designate_elect=False, **GROUP)).code == RC.SUCCESS
        before = _replica_info(broker, ports[0])
        etcd.send_signal(signal.SIGSTOP)
        try:
            def refused():
                answer = broker.call(ports[0], 1004,
                                     H.GetReplicaInfoRequestHeader(broker_name="broker-a"))
                return answer.code == RC.CONTROLLER_NOT_LEADER and answer
            answer = wait_until(refused, "the leader to stop leading", step=0.05)
            assert answer.remark == "The controller is not in leader state"
            assert _metadata(ports[0])[2] is False
        finally:
            etcd.send_signal(signal.SIGCONT)
        wait_until(lambda: _leader(ports, ["n0"]), "the controller to lead again", step=0.05)
        assert _replica_info(broker, ports[0]) == before
