"""The controller's processor beyond the captures: errors answered as Java answers them, the
config update and its black list, answers held until the state is durable, the heartbeat
timeout election, access control of the administrative requests, and the snapshot."""
import pytest

from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.controller.store import (Journal, SnapshotError, load_snapshot, load_state,
                                       snapshot_text)
from rocketpy.controller.replicas import ReplicasInfoManager
from rocketpy.namesrv import Channel
from rocketpy.namesrv.acl import AccessControl, parse_networks
from rocketpy.namesrv.pending import DISK, FileWrite, Pending
from rocketpy.remoting import RemotingCommand, bodies, headers as H
from rocketpy.remoting.codes import ResponseCode as RC

PROPS = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-10.0.0.2:9878",
         "controllerDLegerSelfId": "n0", "bindAddress": "127.0.0.1"}
GROUP = dict(cluster_name="c", broker_name="b")
CH1, CH2 = Channel(1, "127.0.0.1:1001"), Channel(2, "127.0.0.1:1002")


def _processor(**kwargs):
    pushes = []
    processor = ControllerRequestProcessor(
        ControllerConfiguration.from_properties(PROPS),
        notify=lambda address, command: pushes.append((address, command)), **kwargs)
    processor.pushes = pushes
    return processor


def _call(processor, code, header=None, body=None, channel=CH1, now_ms=1000, oneway=False):
    request = RemotingCommand.request(code, None if header is None else header.to_ext_fields(),
                                      body, opaque=7, oneway=oneway)
    return processor.process(request, channel, now_ms)


def _join(processor, broker_id, channel, now_ms=1000, timeout=10000):
    addr = f"127.0.0.1:{10000 + broker_id}"
    assert _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=broker_id, register_check_code=f"{addr};1", **GROUP),
        channel=channel, now_ms=now_ms).code == 0
    _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr=addr, broker_id=broker_id, epoch=0, max_offset=broker_id,
        heartbeat_timeout_mills=timeout, **GROUP), channel=channel, now_ms=now_ms, oneway=True)


def test_unknown_code_and_bad_header_answered_as_java():
    processor = _processor()
    answer = _call(processor, 105)
    assert (answer.code, answer.remark) == (RC.REQUEST_CODE_NOT_SUPPORTED,
                                            " request type 105 not supported")
    request = RemotingCommand.request(1013, {"appliedBrokerId": "x"}, opaque=3)
    answer = processor.process(request, CH1, 0)
    assert answer.code == RC.SYSTEM_ERROR and "appliedBrokerId" in answer.remark
    answer = processor.process(RemotingCommand.request(1006, None, b"{not json"), CH1, 0)
    assert answer.code == RC.SYSTEM_ERROR


def test_empty_requests_answered_as_java():
    """No broker names: Java answers its createResponseCommand(null) placeholder; a body that
    is not properties: "string2Properties error"."""
    processor = _processor()
    for body in (None, b"[]"):
        answer = _call(processor, 1006, body=body)
        assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, "not set any response code")
    answer = _call(processor, 1009, body=b"a=\\u12\n")
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, "string2Properties error")
    assert _call(processor, 1009).code == RC.SUCCESS


def test_metadata_names_the_group_and_every_peer():
    answer = _call(_processor(), 1005)
    assert answer.ext_fields == {"controllerLeaderId": "n0",
                                 "controllerLeaderAddress": "127.0.0.1:9878", "isLeader": "true",
                                 "peers": "n0:127.0.0.1:9878;n1:10.0.0.2:9878;", "group": "g"}


def test_update_config_black_list_and_effect():
    processor = _processor()
    for key in ("configStorePath", "configBlackList", "rocketmqHome", "adminAllowNetworks"):
        answer = _call(processor, 1009, body=f"{key}=/tmp/x\n".encode())
        assert (answer.code, answer.remark) == (RC.NO_PERMISSION,
                                                "Can not update config in black list.")
    # unclean elections switched on at run time take effect at the next election
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    assert _call(processor, 1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=False, **GROUP)).code == 0
    processor.on_channel_close(CH1, 1500)          # master dies; 2 is not in sync: no master
    state = processor.replicas.sync_state_info_table["b"]
    assert state.master_broker_id is None
    assert _call(processor, 1009, body=b"enableElectUncleanMaster=true\n").code == 0
    assert b"enableElectUncleanMaster=true" in _call(processor, 1010).body
    processor.scan_inactive_master(2000)
    assert state.master_broker_id is None          # a dead master is not re-elected ...
    _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr="127.0.0.1:10001", broker_id=1, **GROUP), channel=CH1, now_ms=2000,
        oneway=True)
    processor.on_channel_close(CH1, 2100)
    processor.on_broker_inactive("c", "b", None, 2200)   # ... but 2 now may be, uncleanly
    assert state.master_broker_id == 2


def test_a_reconnected_master_is_not_deposed_by_its_old_connection_closing():
    """The master heartbeats on a new connection before the old one's close is seen: that close
    changes nothing (Java would take the master for dead and elect another)."""
    processor = _processor()
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP))
    _call(processor, 1001, H.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1),
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    new = Channel(3, "127.0.0.1:1003")
    _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr="127.0.0.1:10001", broker_id=1, heartbeat_timeout_mills=10000, **GROUP),
        channel=new, now_ms=1200, oneway=True)
    processor.on_channel_close(CH1, 1300)
    state = processor.replicas.sync_state_info_table["b"]
    assert (state.master_broker_id, state.master_epoch) == (1, 1)
    processor.on_channel_close(new, 1400)                  # the new connection's close does
    assert (state.master_broker_id, state.master_epoch) == (2, 2)


def test_failed_election_retries_bump_the_master_epoch_as_java():
    """No live replica in sync: each of electMasterMaxRetryCount tries applies Java's
    ElectMasterEvent(false), so the master epoch grows by three."""
    processor = _processor()
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP))
    assert [to for to, _ in processor.pushes] == ["127.0.0.1:10001", "127.0.0.1:10002"]
    processor.pushes.clear()
    processor.on_channel_close(CH1, 1500)
    state = processor.replicas.sync_state_info_table["b"]
    assert (state.master_broker_id, state.master_epoch) == (None, 4)
    assert processor.pushes == []
    # the broker's request elected; the dead master's group found no one (counted once)
    assert processor.elections == {"elected": 1, "failed": 1}


def test_heartbeat_timeout_elects_and_pushes():
    processor = _processor()
    _join(processor, 1, CH1, now_ms=0, timeout=3000)
    _join(processor, 2, CH2, now_ms=0, timeout=3000)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP),
          now_ms=0)
    assert _call(processor, 1001, H.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1),
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}', now_ms=0).code == 0
    processor.pushes.clear()
    _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr="127.0.0.1:10002", broker_id=2, heartbeat_timeout_mills=3000, **GROUP),
        channel=CH2, now_ms=2500, oneway=True)
    assert processor.scan_not_active_broker(3000) == set()       # not yet: last + 3000 >= now
    assert processor.scan_not_active_broker(3001) == {CH1}       # broker 1's channel to close
    state = processor.replicas.sync_state_info_table["b"]
    assert (state.master_broker_id, state.master_epoch) == (2, 2)
    assert [(to, c.code, c.ext_fields["masterBrokerId"]) for to, c in processor.pushes] == [
        ("127.0.0.1:10002", 1008, "2")]
    assert processor.elections == {"elected": 2, "failed": 0}


class _Job(FileWrite):
    def __init__(self, log):
        super().__init__("state", lambda: len(log), log.append)


def test_answers_wait_for_the_durable_write():
    writes = []
    processor = _processor(persist=lambda events: _Job(writes))
    request = RemotingCommand.request(1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=1, register_check_code="a:1;1", **GROUP).to_ext_fields(), opaque=9)
    pending = processor.process(request, CH1, 0, offload=True)
    assert isinstance(pending, Pending) and pending.lane == DISK
    assert writes == []                       # nothing acknowledged before the write ...
    answer = pending.finish(pending.work())
    assert (answer.code, answer.opaque, writes) == (0, 9, [0])
    # a read changes nothing and is answered at once; a failed write is not acknowledged
    assert _call(processor, 1012, H.GetNextBrokerIdRequestHeader(**GROUP)).code == 0

    def broken():
        raise OSError(28, "No space left on device")

    processor.persist = lambda events: FileWrite("state", lambda: None, lambda _: broken())
    request = RemotingCommand.request(1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=2, register_check_code="a:2;1", **GROUP).to_ext_fields(), opaque=10)
    answer = processor.process(request, CH1, 0)
    assert answer.code == RC.SYSTEM_ERROR and "No space left on device" in answer.remark


def test_admin_requests_guarded_when_configured():
    access = AccessControl(parse_networks("10.0.0.0/8"), admin_codes={1009, 1011, 1002})
    processor = _processor(access_control=access)
    _join(processor, 1, CH1)
    # a broker's own election is not administrative; a designated one is
    assert _call(processor, 1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=False, **GROUP)).code == 0
    answer = _call(processor, 1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=True, **GROUP))
    assert answer.code == RC.NO_PERMISSION and "adminAllowNetworks" in answer.remark
    for code in (1009, 1011):
        assert _call(processor, code, H.CleanControllerBrokerDataRequestHeader(
            broker_name="b")).code == RC.NO_PERMISSION


def test_snapshot_round_trip_and_refusal():
    processor = _processor()
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=2, designate_elect=False, **GROUP))
    text = snapshot_text(processor.replicas)
    copy = ReplicasInfoManager()
    load_snapshot(copy, text)
    assert snapshot_text(copy) == text
    info = copy.replica_info_table["b"]
    assert (info.next_assign_broker_id, copy.sync_state_info_table["b"].master_broker_id) == (3, 2)
    for bad in ("{", '{"format": 2}', '{"format": 1, "replicaInfoTable": []}'):
        with pytest.raises(SnapshotError):
            load_snapshot(copy, bad)


def test_settings_without_self_peer_refused():
    for props in ({}, {"controllerDLegerPeers": "n0-127.0.0.1:9878"},
                  {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n1"},
                  {"controllerDLegerPeers": "n0:9878", "controllerDLegerSelfId": "n0"}):
        with pytest.raises(ValueError):
            ControllerConfiguration.from_properties(props)


def _groups(n):
    processor = _processor()
    for g in range(n):
        names = dict(cluster_name="c", broker_name=f"b{g}")
        for broker_id in (1, 2):
            channel = Channel(g * 2 + broker_id, f"127.0.0.1:{g}")
            addr = f"127.0.0.1:{20000 + g * 2 + broker_id}"
            _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
                applied_broker_id=broker_id, register_check_code=f"{addr};1", **names),
                channel=channel)
            _call(processor, 904, H.BrokerHeartbeatRequestHeader(
                broker_addr=addr, broker_id=broker_id, heartbeat_timeout_mills=10000, **names),
                channel=channel, oneway=True)
        _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False,
                                                           **names))
        _call(processor, 1001, H.AlterSyncStateSetRequestHeader(
            broker_name=f"b{g}", master_broker_id=1, master_epoch=1),
            b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    return processor


def test_a_master_death_costs_the_same_at_any_number_of_groups():
    """Failover looks at the dead master's group only: the liveness checks one death costs do
    not grow with the number of groups (100, 200, 400)."""
    counts = []
    for n in (100, 200, 400):
        processor = _groups(n)
        calls = []
        check = processor.heartbeats.is_broker_active
        processor.heartbeats.is_broker_active = lambda *a: calls.append(a) or check(*a)
        processor.on_channel_close(Channel(1, "127.0.0.1:0"), 2000)   # group b0's master
        assert processor.replicas.sync_state_info_table["b0"].master_broker_id == 2
        counts.append(len(calls))
    assert counts[0] == counts[1] == counts[2] > 0


class _Disk:
    """The snapshot and the log segments, in memory (AppendLog's interface); ``fail`` makes the
    next append leave a torn line and raise (AppendLog cuts a failed append back; a crash may
    not)."""

    def __init__(self):
        self.snapshot, self.segments, self.fail = None, {}, False
        self.snapshots = 0

    @property
    def log(self):
        return "".join(self.segments[n] for n in sorted(self.segments))

    def append(self, number, data):
        text = data.decode()
        if self.fail:
            self.fail = False
            self.segments[number] = self.segments.get(number, "") + text[:7]
            raise OSError(5, "Input/output error")
        self.segments[number] = self.segments.get(number, "") + text

    def remove_through(self, number):
        self.segments = {n: t for n, t in self.segments.items() if n > number}

    def replace(self, data):
        self.snapshot = data.decode()
        self.snapshots += 1


def _journaled(disk, compact=10_000):
    processor = _processor()
    journal = Journal(processor.replicas, disk, disk.replace, "state", 0, 1, compact)
    processor.persist = journal.record
    return processor, journal


def _restored(disk):
    copy = ReplicasInfoManager()
    seq = load_state(copy, disk.snapshot, [disk.segments[n] for n in sorted(disk.segments)])
    return copy, seq


def test_event_log_appends_only_the_change_and_restores():
    """A change appends its own events (not the state); a restart replays them."""
    disk = _Disk()
    processor, journal = _journaled(disk)
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    size = len(disk.log)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=2, designate_elect=False, **GROUP))
    assert disk.log.count("\n") == 3 and disk.snapshot is None
    grown = len(disk.log) - size
    for g in range(50):     # many more groups: the next change appends as much as before
        _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=1, register_check_code="x:1;1", cluster_name="c", broker_name=f"x{g}"))
    size = len(disk.log)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False,
                                                      cluster_name="c", broker_name="x7"))
    assert len(disk.log) - size <= grown + 2
    copy, seq = _restored(disk)
    assert seq == journal.seq == 54
    assert snapshot_text(copy, seq) == snapshot_text(processor.replicas, seq)


def test_snapshot_every_n_events_and_after_a_failed_append():
    disk = _Disk()
    processor, journal = _journaled(disk, compact=4)
    _join(processor, 1, CH1)
    _join(processor, 2, CH2)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP))
    _call(processor, 1001, H.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1),
        b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    assert (disk.snapshots, disk.log) == (1, "")          # the 4th event: a snapshot, the
    assert journal.segment == 2                           # segments it covers removed
    disk.fail = True
    answer = _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=3, register_check_code="a:3;1", **GROUP))
    assert answer.code == RC.SYSTEM_ERROR                  # not acknowledged ...
    assert disk.log and not disk.log.endswith("\n")        # ... a torn line on disk
    _call(processor, 1012, H.GetNextBrokerIdRequestHeader(**GROUP))
    _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=4, register_check_code="a:4;1", **GROUP))
    assert disk.snapshots == 2 and disk.log == ""           # the write after a failure, the
    assert journal.segment == 3                             # torn segment removed with it
    copy, seq = _restored(disk)
    assert sorted(copy.replica_info_table["b"].brokers) == [1, 2, 3, 4]
    assert copy.sync_state_info_table["b"].sync_state_set_epoch == 2


def test_restore_skips_what_the_snapshot_has_and_a_torn_line():
    disk = _Disk()
    processor, journal = _journaled(disk)
    _join(processor, 1, CH1)
    _call(processor, 1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False, **GROUP))
    log = disk.log
    disk.replace(snapshot_text(processor.replicas, journal.seq).encode())
    disk.segments[1] += '{"seq": 3, "ev'        # a crash mid-append, before the segment went
    copy, seq = _restored(disk)
    assert seq == 2 and copy.sync_state_info_table["b"].master_epoch == 1
    with pytest.raises(SnapshotError):
        load_state(ReplicasInfoManager(), None, ["garbage\n" + log])


def test_broker_ids_and_live_brokers_are_bounded():
    """CONTROLLER_APPLY_BROKER_ID and BROKER_HEARTBEAT are open: a stranger naming new groups
    or ids is refused at the bound, nothing applied; known ids still re-apply and heartbeat,
    and a cleaned id makes room again."""
    processor = _processor(replicas=ReplicasInfoManager(max_brokers=3))
    processor.heartbeats.max_brokers = 3
    applied = []
    for name in ("g1", "g2", "g3", "g4"):
        applied.append(_call(processor, 1013, H.ApplyBrokerIdRequestHeader(
            cluster_name="c", broker_name=name, applied_broker_id=1,
            register_check_code="127.0.0.1:1;1")))
    assert [a.code for a in applied[:3]] == [0, 0, 0]
    assert applied[3].code == RC.SYSTEM_ERROR and "[REFUSED]" in applied[3].remark
    assert "g4" not in processor.replicas.replica_info_table
    again = _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        cluster_name="c", broker_name="g1", applied_broker_id=1,
        register_check_code="127.0.0.1:1;1"))
    assert again.code == 0
    beats = [_call(processor, 904, H.BrokerHeartbeatRequestHeader(
        cluster_name="c", broker_name=f"g{i}", broker_addr="127.0.0.1:1", broker_id=1,
        heartbeat_timeout_mills=1 << 40)) for i in range(1, 5)]
    assert [b.code for b in beats] == [0, 0, 0, RC.SYSTEM_ERROR]
    assert len(processor.heartbeats.broker_live_table) == 3
    assert _call(processor, 1011, H.CleanControllerBrokerDataRequestHeader(
        cluster_name="c", broker_name="g3", is_clean_living_broker=True)).code == 0
    assert _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        cluster_name="c", broker_name="g4", applied_broker_id=1,
        register_check_code="127.0.0.1:1;1")).code == 0
    copy = ReplicasInfoManager(max_brokers=3)
    load_snapshot(copy, snapshot_text(processor.replicas))
    assert copy.broker_count() == 3


def test_sync_state_data_costs_each_group_once_however_often_named():
    """CONTROLLER_GET_SYNC_STATE_DATA names groups in an attacker-sized body: a name repeated
    2n times costs what it costs once (liveness asked per replica, counted)."""
    processor = _processor()
    for broker_id in (1, 2, 3):
        _join(processor, broker_id, CH1)
    asked = []
    active = processor.heartbeats.is_broker_active
    processor.heartbeats.is_broker_active = lambda *a: asked.append(a) or active(*a)
    costs = []
    for n in (500, 1000):
        del asked[:]
        body = ("[" + ",".join(['"b"'] * n) + "]").encode()
        answer = _call(processor, 1006, body=body)
        assert answer.code == 0 and b'"inSyncReplicas"' in answer.body
        costs.append(len(asked))
    assert costs == [3, 3]


def test_strangers_filling_the_live_table_do_not_keep_a_known_broker_dead():
    """Heartbeats naming made-up brokers fill the live table; a broker whose id the controller
    holds still becomes alive (and a made-up cluster for its group does not count as known)."""
    processor = _processor()
    processor.heartbeats.max_brokers = 2
    assert _call(processor, 1013, H.ApplyBrokerIdRequestHeader(
        applied_broker_id=1, register_check_code="127.0.0.1:10001;1", **GROUP)).code == 0
    for i in range(2):
        _call(processor, 904, H.BrokerHeartbeatRequestHeader(
            cluster_name="x", broker_name=f"fake{i}", broker_addr="10.0.0.1:1", broker_id=1,
            heartbeat_timeout_mills=1 << 40))
    stranger = _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        cluster_name="other", broker_name="b", broker_addr="10.0.0.1:1", broker_id=1))
    assert stranger.code == RC.SYSTEM_ERROR
    answer = _call(processor, 904, H.BrokerHeartbeatRequestHeader(
        broker_addr="127.0.0.1:10001", broker_id=1, **GROUP))
    assert answer.code == 0
    assert processor.heartbeats.is_broker_active("c", "b", 1, 1000)


def test_request_bodies_in_fastjson_forms_read_as_java():
    """CONTROLLER_GET_SYNC_STATE_DATA's name list and ALTER_SYNC_STATE_SET's SyncStateSet are
    read by fastjson (``RemotingSerializable.decode``): single quotes, comments, stray commas
    and property names in another case mean what strict JSON means."""
    processor = _processor()
    for broker_id in (1, 2):
        _join(processor, broker_id, CH1)
    strict = _call(processor, 1006, body=b'["b"]')
    lenient = _call(processor, 1006, body=b"[/* the group */'b',]")
    assert strict.code == 0 and b'"inSyncReplicas"' in strict.body
    assert (lenient.code, lenient.body) == (strict.code, strict.body)
    assert bodies.SyncStateSet.from_json(b"{SyncStateSet:['1',2,],'SYNCSTATESETEPOCH':3}") == \
        bodies.SyncStateSet.from_json(b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}')


def test_elections_for_one_dead_master_are_bounded_whatever_the_config_says():
    """electMasterMaxRetryCount can be set from the wire (UPDATE_CONTROLLER_CONFIG); each
    failed election is a logged event that raises the epoch, so the tries are capped."""
    processor = _processor()
    _join(processor, 1, CH1)
    assert _call(processor, 1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=False, **GROUP)).code == 0
    processor.config.elect_master_max_retry_count = 10 ** 9
    epoch = processor.replicas.sync_state_info_table["b"].master_epoch
    assert processor.trigger_elect_master("b", 10 ** 9) is False    # nobody alive to elect
    tries = processor.replicas.sync_state_info_table["b"].master_epoch - epoch
    assert 1 <= tries <= 16
