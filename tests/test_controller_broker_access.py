"""The controller port's broker requests under ``brokerAllowNetworks`` and
``brokerIdentityBinding`` (the NameServer's keys): before, anyone reaching the controller port
could apply for broker ids and heartbeat brokers up to the 10,000 bounds, heartbeat as a live
broker from another host, or shrink its master's sync state set. A real ``twistd rocketnamesrv``
hosting the controller; peers connect from 127.0.0.1 (the genuine broker), .2 (another host of
the brokers' network) and .3 (outside it); 127.0.0.1 only, everything closed by the test."""
import re
import socket
import tempfile
import urllib.request

import pytest

from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.controller.access import ControllerBrokerAccess
from rocketpy.namesrv import Channel
from rocketpy.remoting import RemotingCommand, bodies as B, headers as H
from serverproc import PATIENCE, RemotingClient, running_server

GROUP = dict(cluster_name="DefaultCluster", broker_name="broker-a")
GENUINE, OTHER, OUTSIDE = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(client, code, header, body=None):
    return client.call(code, header.to_ext_fields(), body)


def _heartbeat(addr, broker_id, group=GROUP):
    return H.BrokerHeartbeatRequestHeader(
        broker_addr=addr, broker_id=broker_id, epoch=1, max_offset=0, confirm_offset=0,
        heartbeat_timeout_mills=60000, election_priority=1, **group)


def _apply(addr, broker_id, group=GROUP):
    return H.ApplyBrokerIdRequestHeader(applied_broker_id=broker_id,
                                        register_check_code=f"{addr};1", **group)


@pytest.mark.network
def test_controller_broker_requests_from_outside_or_for_another_hosts_broker_are_refused():
    port = _free_port()
    with tempfile.TemporaryDirectory() as store, running_server(
            "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=group1",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{port}", "-D", "controllerDLegerSelfId=n0",
            "-D", f"controllerStorePath={store}", "-D", "bindAddress=127.0.0.1",
            "-D", f"brokerAllowNetworks={GENUINE},{OTHER}",
            "-D", "brokerIdentityBinding=true", "--web=tcp:0:interface=127.0.0.1") as server:
        assert server.port != port
        web = server.wait_for_log(r"rocketpy web endpoint on (http://\S+)")
        url = re.search(r"(http://\S+?)/? ", web + " ").group(1)
        clients = [RemotingClient(port, source=s) for s in (GENUINE, OTHER, OUTSIDE)]
        genuine, other, outsider = clients
        try:
            # outside the brokers' networks: no ids, no heartbeats (the bounds stay free)
            for code, header in ((1013, _apply("127.0.0.3:10911", 1, dict(
                    cluster_name="DefaultCluster", broker_name="squat"))),
                                 (904, _heartbeat("127.0.0.3:10911", 1, dict(
                    cluster_name="DefaultCluster", broker_name="squat")))):
                refused = _call(outsider, code, header)
                assert refused.code == 16, refused
            assert refused.remark == ("request code 904 (BROKER_HEARTBEAT) is a broker request "
                                      "to the controller and client 127.0.0.3 is not in "
                                      "brokerAllowNetworks"), refused.remark
            # the genuine broker still gets its id, registers and heartbeats
            addr = "127.0.0.1:10911"
            answer = _call(genuine, 1012, H.GetNextBrokerIdRequestHeader(**GROUP))
            broker_id = H.GetNextBrokerIdResponseHeader.from_ext_fields(
                answer.ext_fields).next_broker_id
            assert _call(genuine, 1013, _apply(addr, broker_id)).code == 0
            assert _call(genuine, 1003, H.RegisterBrokerToControllerRequestHeader(
                broker_id=broker_id, broker_address=addr, invoke_time=1, **GROUP)).code == 0
            assert _call(genuine, 904, _heartbeat(addr, broker_id)).code == 0
            elect = H.ElectMasterRequestHeader(broker_id=broker_id, **GROUP)
            assert _call(genuine, 1002, elect).code == 0
            # another host may not speak for it while its heartbeats are live
            hijack = _call(other, 904, _heartbeat("127.0.0.2:10911", broker_id))
            assert hijack.code == 16 and hijack.remark == (
                f"broker broker-a id {broker_id} of cluster DefaultCluster is held by 127.0.0.1 "
                "while its heartbeats are live; refused request code 904 (BROKER_HEARTBEAT) "
                "from 127.0.0.2 (brokerIdentityBinding)"), hijack
            squat = _call(other, 1013, _apply(addr, broker_id + 1))
            assert squat.code == 16 and "broker address 127.0.0.1:10911 is held by 127.0.0.1" \
                in squat.remark, squat
            shrink = _call(other, 1001, H.AlterSyncStateSetRequestHeader(
                broker_name="broker-a", master_broker_id=broker_id, master_epoch=1),
                B.SyncStateSet(sync_state_set=[broker_id], sync_state_set_epoch=1).to_json())
            assert shrink.code == 16, shrink
            assert _call(other, 1002, elect).code == 16
            # its own broker, from the brokers' network, is welcome
            own = dict(cluster_name="DefaultCluster", broker_name="broker-b")
            assert _call(other, 1013, _apply("127.0.0.2:10911", 1, own)).code == 0
            assert _call(other, 904, _heartbeat("127.0.0.2:10911", 1, own)).code == 0
            info = _call(outsider, 1004, H.GetReplicaInfoRequestHeader(broker_name="broker-a"))
            assert info.code == 0 and H.GetReplicaInfoResponseHeader.from_ext_fields(
                info.ext_fields).master_broker_id == broker_id      # reads stay open
            metrics = urllib.request.urlopen(f"{url}/metrics", timeout=PATIENCE).read().decode()
            assert 'rocketpy_controller_broker_requests_refused_total{reason="network"} 2.0' \
                in metrics
            assert 'rocketpy_controller_broker_requests_refused_total{reason="identity"} 4.0' \
                in metrics
        finally:
            for client in clients:
                client.close()


def test_off_by_default_a_designated_election_is_administrative_and_a_oneway_is_dropped():
    props = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
             "controllerDLegerSelfId": "n0", "bindAddress": "127.0.0.1"}
    configuration = ControllerConfiguration.from_properties(props)
    processor = ControllerRequestProcessor(configuration)
    assert not ControllerBrokerAccess.from_properties(
        configuration.all_configs, processor.heartbeats, processor.replicas).enabled
    processor.broker_access = ControllerBrokerAccess.from_properties(
        {"brokerAllowNetworks": "10.0.0.0/8"}, processor.heartbeats, processor.replicas)
    outside = Channel(1, "192.168.1.1:5000")
    designated = H.ElectMasterRequestHeader(designate_elect=True, broker_id=1, **GROUP)
    answer = processor.process(RemotingCommand.request(1002, designated.to_ext_fields(),
                                                       opaque=1), outside, 1000)
    assert answer.code != 16, answer     # not a broker request: adminAllowNetworks decides
    own = H.ElectMasterRequestHeader(designate_elect=False, broker_id=1, **GROUP)
    answer = processor.process(RemotingCommand.request(1002, own.to_ext_fields(), opaque=2),
                               outside, 1000)
    assert answer.code == 16, answer
    beat = RemotingCommand.request(904, _heartbeat("192.168.1.1:10911", 1).to_ext_fields(),
                                   opaque=3, oneway=True)
    assert processor.process(beat, outside, 1000) is None
    assert processor.heartbeats.broker_live_table == {}
    assert processor.broker_access.refused == {"network": 2, "identity": 0}
