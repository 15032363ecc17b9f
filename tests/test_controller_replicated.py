"""The controller group on etcd, pure parts: a follower answers as Java's DLedger follower
(CONTROLLER_NOT_LEADER on the event-queue requests, the leader named in GET_METADATA_INFO, no
elections of its own), a leader whose lease lapsed stops leading by itself, and the log entries
the leader writes rebuild the same state on another controller (in order, each once, a gap
refused); the gateway bodies' compare-and-swap says what it must."""
import json

import pytest

from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.controller.replicas import ReplicasInfoManager
from rocketpy.controller.replicated import (EtcdSettings, Leadership, NotCommitted, ReplicaLog,
                                            ReplicationError, append_txn, b64, campaign_txn,
                                            entry_key, key_prefix, parse_leader, range_request,
                                            unb64)
from rocketpy.controller.store import snapshot_text
from rocketpy.namesrv import Channel
from rocketpy.remoting import RemotingCommand, headers as H
from rocketpy.remoting.codes import ResponseCode as RC

PROPS = {"controllerDLegerGroup": "g",
         "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9879;n2-127.0.0.1:9880",
         "controllerDLegerSelfId": "n1", "bindAddress": "127.0.0.1"}
GROUP = dict(cluster_name="c", broker_name="b")
CH = Channel(1, "127.0.0.1:1001")
CHANNELS = {1: CH, 2: Channel(2, "127.0.0.1:1002")}
PREFIX = key_prefix("g")


def _processor(leadership, persist=None):
    pushes = []
    processor = ControllerRequestProcessor(
        ControllerConfiguration.from_properties(PROPS), leadership=leadership, persist=persist,
        notify=lambda address, command: pushes.append((address, command)))
    processor.pushes = pushes
    return processor


def _call(processor, code, header=None, body=None, now_ms=1000, oneway=False, channel=CH):
    request = RemotingCommand.request(code, None if header is None else header.to_ext_fields(),
                                      body, opaque=7, oneway=oneway)
    return processor.process(request, channel, now_ms)


def _join(processor, broker_id, now_ms=1000):
    addr = f"127.0.0.1:{10000 + broker_id}"
    answer = _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=broker_id, register_check_code=f"{addr};1", **GROUP), now_ms=now_ms)
    _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr=addr, broker_id=broker_id, epoch=0, max_offset=broker_id,
        heartbeat_timeout_mills=10000, **GROUP), now_ms=now_ms, oneway=True,
        channel=CHANNELS[broker_id])
    return answer


def _elect_and_sync(processor):
    """Broker 1 master, the sync state set {1, 2}."""
    _join(processor, 1)
    _join(processor, 2)
    assert _call(processor, 1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=False, **GROUP)).code == RC.SUCCESS
    assert _call(processor, 1001, H.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1),
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}').code == RC.SUCCESS


def test_follower_answers_as_java_follower():
    leadership = Leadership("n1", "127.0.0.1:9879")
    leadership.follow("n0", "127.0.0.1:9878")
    processor = _processor(leadership)
    for code, header in ((1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=1, register_check_code="a;1", **GROUP)),
            (1012, H.GetNextBrokerIdRequestHeader(**GROUP)),
            (1004, H.GetReplicaInfoRequestHeader(broker_name="b")),
            (1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP))):
        answer = _call(processor, code, header)
        assert (answer.code, answer.remark) == (RC.CONTROLLER_NOT_LEADER,
                                                "The controller is not in leader state"), code
    assert processor.replicas.replica_info_table == {}
    meta = H.GetMetaDataResponseHeader.from_ext_fields(_call(processor, 1005).ext_fields)
    assert (meta.controller_leader_id, meta.controller_leader_address, meta.is_leader) == (
        "n0", "127.0.0.1:9878", False)
    # heartbeats and the config are every controller's own
    heartbeat = H.BrokerHeartbeatRequestHeader(
        broker_addr="a", broker_id=1, epoch=0, max_offset=0, heartbeat_timeout_mills=10000, **GROUP)
    assert _call(processor, 904, heartbeat).code == RC.SUCCESS
    assert _call(processor, 1010).code == RC.SUCCESS


def test_leader_answers_until_its_lease_lapses():
    leadership = Leadership("n1", "127.0.0.1:9879")
    leadership.lead(deadline_ms=5000)
    processor = _processor(leadership)
    assert _join(processor, 1).code == RC.SUCCESS
    meta = H.GetMetaDataResponseHeader.from_ext_fields(_call(processor, 1005).ext_fields)
    assert (meta.controller_leader_id, meta.controller_leader_address, meta.is_leader) == (
        "n1", "127.0.0.1:9879", True)
    answer = _call(processor, 1004, H.GetReplicaInfoRequestHeader(broker_name="b"), now_ms=5000)
    assert answer.code == RC.CONTROLLER_NOT_LEADER
    meta = H.GetMetaDataResponseHeader.from_ext_fields(_call(processor, 1005, now_ms=5000).ext_fields)
    assert meta.is_leader is False


def test_only_the_leader_elects_when_a_master_dies():
    leadership = Leadership("n1", "127.0.0.1:9879")
    leadership.lead(deadline_ms=10 ** 9)
    processor = _processor(leadership)
    _elect_and_sync(processor)
    processor.pushes.clear()
    leadership.follow("n0", "127.0.0.1:9878")
    processor.on_channel_close(CH, 2000)             # the master's connection is gone
    processor.scan_inactive_master(3000)
    state = processor.replicas.sync_state_info_table["b"]
    assert (state.master_broker_id, state.master_epoch) == (1, 1)
    assert processor.pushes == []
    leadership.lead(deadline_ms=10 ** 9)
    processor.scan_inactive_master(3000)             # the leader's scan finds the dead master
    state = processor.replicas.sync_state_info_table["b"]
    assert (state.master_broker_id, state.master_epoch) == (2, 2)
    assert [address for address, _ in processor.pushes] == ["127.0.0.1:10002"]


def test_entries_rebuild_the_leaders_state_on_a_follower():
    """What the leader records for each change, applied by another controller, gives the same
    state; the echo of an applied entry is skipped; a gap is refused."""
    leadership = Leadership("n1", "127.0.0.1:9879")
    leadership.lead(deadline_ms=10 ** 9)
    leader_log = None
    written = []

    def persist(events):
        written.append(leader_log.record(events))

    processor = _processor(leadership, persist=persist)
    leader_log = ReplicaLog(processor.replicas, PREFIX)
    _elect_and_sync(processor)
    processor.on_channel_close(CH, 2000)
    assert [seq for seq, _ in written] == [1, 2, 3, 4, 5]
    kvs = [{"key": b64(entry_key(PREFIX, seq)), "value": b64(value)} for seq, value in written]

    follower = ReplicaLog(ReplicasInfoManager(), PREFIX)
    assert all(follower.apply_kv(kv) for kv in kvs)
    assert snapshot_text(follower.manager) == snapshot_text(processor.replicas)
    assert follower.manager.sync_state_info_table["b"].master_broker_id == 2
    assert not follower.apply_kv(kvs[2])              # a watch echo of an applied entry
    assert not leader_log.apply_kv(kvs[4])            # the leader's own entry, already applied
    other = ReplicaLog(ReplicasInfoManager(), PREFIX)
    other.apply_kv(kvs[0])
    with pytest.raises(ReplicationError, match="gap"):
        other.apply_kv(kvs[2])
    with pytest.raises(ReplicationError):
        other.apply_kv({"key": b64(entry_key(PREFIX, 2)), "value": b64(b'[{"type": "Nope"}]')})
    assert not other.apply_kv({"key": b64(PREFIX + "leader"), "value": b64(b"{}")})
    other.reset()
    assert (other.seq, other.manager.replica_info_table) == (0, {})
    # a leader that steps down reads the log again: its broker count (the 10,000 bound) must
    # not grow by the whole table each time
    counted = follower.manager.broker_count()
    for _ in range(3):
        follower.reset()
        assert all(follower.apply_kv(kv) for kv in kvs)
    assert follower.manager.broker_count() == counted > 0


def test_gateway_bodies_compare_and_swap():
    txn = append_txn(PREFIX, 7, [b"x", b"y"], leader_revision=42)
    compares = {unb64(c["key"]).decode(): c["create_revision"] for c in txn["compare"]}
    assert compares == {PREFIX + "leader": "42", entry_key(PREFIX, 7): "0"}
    assert [unb64(p["request_put"]["key"]).decode() for p in txn["success"]] == [
        entry_key(PREFIX, 7), entry_key(PREFIX, 8)]
    assert entry_key(PREFIX, 7) < entry_key(PREFIX, 10)        # keys sort as numbers
    campaign = campaign_txn(PREFIX, "n1", "127.0.0.1:9879", 99)
    put = campaign["success"][0]["request_put"]
    assert put["lease"] == "99" and campaign["compare"][0]["create_revision"] == "0"
    assert parse_leader(put["value"]) == ("n1", "127.0.0.1:9879")
    assert parse_leader(b64("nonsense")) == (None, None)
    ranged = range_request(PREFIX, 3)
    assert unb64(ranged["key"]).decode() == entry_key(PREFIX, 3)
    assert unb64(ranged["range_end"]).decode() == PREFIX + "log0"
    json.dumps(txn), json.dumps(campaign)


def test_etcd_settings_one_line_errors():
    settings = EtcdSettings.from_properties({
        "controllerEtcdEndpoints": "http://127.0.0.1:2379, http://127.0.0.1:2380/",
        "controllerEtcdLeaseTtl": "2"})
    assert (settings.endpoints, settings.lease_ttl, settings.timeout_ms) == (
        ["http://127.0.0.1:2379", "http://127.0.0.1:2380"], 2, 3000)
    for props, message in (({}, "needs controllerEtcdEndpoints"),
                           ({"controllerEtcdEndpoints": "127.0.0.1:2379"}, "not http://host:port"),
                           ({"controllerEtcdEndpoints": "http://a:1", "controllerEtcdLeaseTtl": "0"},
                            "controllerEtcdLeaseTtl must be a positive integer")):
        with pytest.raises(ValueError, match=message):
            EtcdSettings.from_properties(props)


def test_an_election_etcd_did_not_commit_pushes_nothing():
    """The leader's own election whose entry etcd refused: no NOTIFY_BROKER_ROLE_CHANGED (the
    change is dropped with the state the leader reads again), and a broker's request that
    changed something is answered SYSTEM_ERROR, not its success."""
    leadership = Leadership("n1", "127.0.0.1:9879")
    leadership.lead(deadline_ms=10 ** 9)
    refuse = []

    def persist(events):
        def job():
            if refuse:
                raise NotCommitted("not committed in etcd: another controller leads")
        return job

    processor = _processor(leadership, persist=persist)
    _elect_and_sync(processor)
    processor.pushes.clear()
    refuse.append(True)
    processor.on_channel_close(CH, 2000)
    assert processor.pushes == []
    answer = _call(processor, 1012, H.GetNextBrokerIdRequestHeader(**GROUP))
    assert answer.code == RC.SUCCESS                 # a read needs no commit
    answer = _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=3, register_check_code="127.0.0.1:10003;1", **GROUP))
    assert answer.code == RC.SYSTEM_ERROR and "another controller leads" in answer.remark
    assert processor.handler_failures == {}          # etcd's refusal is no bug


def _service_options(tmp_path, *args):
    from rocketpy.service.tap import Options
    options = Options()
    options.parseOptions(["--kvConfigPath", str(tmp_path / "kv.json"), "--listen", "tcp:0",
                          "-D", f"configStorePath={tmp_path}/ns.properties",
                          "-D", f"controllerStorePath={tmp_path}/ctl",
                          "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
                          "-D", "controllerDLegerPeers=n0-127.0.0.1:19878;n1-127.0.0.1:19879",
                          "-D", "controllerDLegerSelfId=n1", "-D", "controllerType=etcd", *args])
    return options


def test_etcd_settings_stop_the_start_in_one_line(tmp_path):
    from twisted.internet.task import Clock

    from rocketpy.service.startup import StartError
    from rocketpy.service.tap import makeService
    with pytest.raises(StartError) as caught:
        makeService(_service_options(tmp_path), reactor=Clock())
    assert str(caught.value) == "rocketnamesrv: controllerType=etcd needs controllerEtcdEndpoints"


def test_etcd_controller_reads_no_local_store_and_starts_as_follower(tmp_path):
    """The group's state is etcd's: a local snapshot (here unreadable) is not loaded, and until
    it has read etcd and won the election the controller does not answer as leader."""
    from twisted.internet.task import Clock

    from rocketpy.service.tap import makeService
    (tmp_path / "ctl").mkdir()
    (tmp_path / "ctl" / "replicas.json").write_text("{not json")
    top = makeService(_service_options(
        tmp_path, "-D", "controllerEtcdEndpoints=http://127.0.0.1:1"), reactor=Clock())
    controller = top.controller
    assert controller.group is not None and controller.group.prefix == key_prefix("g")
    processor = controller.processor
    assert processor.leadership.self_address == "127.0.0.1:19879"
    answer = _call(processor, 1004, H.GetReplicaInfoRequestHeader(broker_name="b"))
    assert answer.code == RC.CONTROLLER_NOT_LEADER
    meta = H.GetMetaDataResponseHeader.from_ext_fields(_call(processor, 1005).ext_fields)
    assert (meta.controller_leader_id, meta.is_leader) == (None, False)
