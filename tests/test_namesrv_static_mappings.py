"""Static topic mappings (``topicQueueMappingInfoMap`` of REGISTER_BROKER) counted, capped,
dropped with their group, and covered by ``brokerIdentityBinding`` (issue 31, holes 2 and 3).

Hole 2: eight registrations of no topic and 3 mappings x 250,000 ``currIdMap`` entries took a
server from 54 to 709 MiB, kept after every connection closed: the bounds counted one pair per
mapping, and Java's table keeps mappings for good. Now each mapping counts one and one per queue
against ``namesrvMaxTopicBrokerPairs``, one mapping holds at most ``namesrvMaxMappingQueues``
queues, and a mapping goes with the last live member of the group that registered it.

Hole 3: from an allowed host, a registration of its own free name ``evil`` carrying a mapping
``{topic: VT, bname: broker-a}`` rewrote the static-topic view of another host's live group (the
Java 5.x client routes a topic with mappings to their logical queues:
``topicRouteData2TopicPublishInfo``). With the binding, a mapping naming a group another host
holds live is refused, as REGISTER_TOPIC_IN_NAMESRV already was. Counted, never timed."""
import json
import zlib

import pytest

from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.model import UnRegisterBrokerRequest
from rocketpy.namesrv.pending import Pending
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv.route_info_manager import mapping_weight
from rocketpy.remoting import RemotingCommand, bodies
from rocketpy.remoting.codes import ResponseCode as RC

GENUINE = Channel(1, "10.0.0.5:40001")
OTHER = Channel(2, "10.0.0.9:40002")


def _processor(**props):
    props = {key: str(value) for key, value in props.items()}
    configuration = Configuration.from_properties(props, as_policies(profile_for("5.3")))
    rim = RouteInfoManager(configuration.namesrv_config, profile_for("5.3"))
    return DefaultRequestProcessor(rim, KVConfigManager("/nonexistent/kv.json"),
                                   configuration=configuration,
                                   submit_unregistration=lambda r: rim.unregister_brokers([r]) or True)


def _mapping(topic, bname, queues=0, epoch=1):
    return {"topic": topic, "bname": bname, "totalQueues": max(queues, 1), "epoch": epoch,
            "currIdMap": {i: i for i in range(queues)}}


def _body(topics, mappings, counter=1):
    """A plain 5.x body; with a topic "Z" besides one alone (5.x refuses a first registration
    of one topic)."""
    topics = list(topics) + ["Z"] * (len(topics) == 1)
    return json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": 1},
        "topicConfigTable": {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4,
                                 "perm": 6} for t in topics},
        "topicQueueMappingInfoMap": {m["topic"]: m for m in mappings}}}).encode()


def _compressed(topics, mappings, counter=1):
    return bodies.RegisterBrokerBody.from_json(_body(topics, mappings, counter)).encode(
        compress=True)


def _register(proc, channel, name, body, compressed=False, addr=None, offload=False):
    addr = addr or f"{channel.remote_addr.split(':')[0]}:10911"
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "haServerAddr": addr,
           "brokerId": "0", "compressed": str(compressed).lower(),
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    answer = proc.process(RemotingCommand.request(103, ext, body, opaque=1, version=479),
                          channel, 1000, offload=offload)
    return answer.run() if isinstance(answer, Pending) else answer


def _held(proc):
    table = proc.route_info_manager.topic_queue_mapping_info_table
    return {(topic, bname) for topic, by_broker in table.items() for bname in by_broker}


# -- hole 2: counted, capped, dropped ----------------------------------------------------------

def test_each_queue_of_a_mapping_counts_against_the_pairs_bound():
    proc = _processor(namesrvMaxTopicBrokerPairs=1000)
    rim = proc.route_info_manager
    fits = [_mapping(f"S{i}", "a", 300) for i in range(3)]              # 3 x 301 = 903
    assert _register(proc, GENUINE, "a", _body(["T"], fits)).code == RC.SUCCESS
    assert rim.mapping_count == 903 == sum(
        mapping_weight(info) for by in rim.topic_queue_mapping_info_table.values()
        for info in by.values())
    answer = _register(proc, OTHER, "b", _body(["T"], [_mapping("X", "b", 100)]))
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, (
        "[REFUSED] the route table would hold 1004 static topic mappings and their queues, "
        "over namesrvMaxTopicBrokerPairs=1000; nothing was applied"))
    assert "X" not in rim.topic_queue_mapping_info_table
    # a mapping replaced gives back what it held: the same group, fewer queues, fits
    fewer = [_mapping(f"S{i}", "a", 10) for i in range(3)]
    assert _register(proc, GENUINE, "a", _body(["T"], fewer, counter=2)).code == RC.SUCCESS
    assert rim.mapping_count == 33
    assert _register(proc, OTHER, "b", _body(["T"], [_mapping("X", "b", 100)])).code == 0


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_one_mapping_holds_at_most_what_the_bound_says(compressed):
    proc = _processor(namesrvMaxMappingQueues=1000)
    make = _compressed if compressed else _body
    big = make(["T"], [_mapping("VT", "a", 1001)])
    answer = _register(proc, GENUINE, "a", big, compressed, offload=True)
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, (
        "[REFUSED] the route table would hold 1001 queues in the static topic mapping of VT, "
        "over namesrvMaxMappingQueues=1000; nothing was applied"))
    assert _held(proc) == set() and proc.route_info_manager.broker_addr_table == {}
    assert proc.route_bounds.refused["namesrvMaxMappingQueues"] == 1
    assert _register(proc, GENUINE, "a", make(["T"], [_mapping("VT", "a", 1000)]),
                     compressed).code == RC.SUCCESS


def test_the_issues_mappings_are_refused_by_default(monkeypatch):
    """3 mappings x 250,000 queues, the registration of the issue: its first mapping costs more
    than the decode budget (an unquoted key's parse is charged ``INT_KEY_COST``), refused
    before it is parsed; past the budget, a mapping holds 64 Ki queues at most."""
    parsed = []
    real = bodies.TopicQueueMappingInfo.from_json.__func__
    monkeypatch.setattr(bodies.TopicQueueMappingInfo, "from_json", classmethod(
        lambda cls, data, **kwargs: parsed.append(1) or real(cls, data, **kwargs)))
    proc = _processor()
    body = _compressed([], [_mapping(f"M{i}", "evil", 250_000) for i in range(3)])
    answer = _register(proc, OTHER, "evil", body, compressed=True, offload=True)
    assert answer.code == RC.SYSTEM_ERROR and answer.remark.startswith(
        "[REFUSED] decoding the registration body costs over 67108864 work units")
    assert (parsed, proc.route_info_manager.mapping_count) == ([], 0)
    proc = _processor(registerBrokerDecodeBudget=0)
    answer = _register(proc, OTHER, "evil", body, compressed=True, offload=True)
    assert answer.code == RC.SYSTEM_ERROR and "namesrvMaxMappingQueues=65536" in answer.remark
    assert proc.route_info_manager.mapping_count == 0


def test_a_mapping_goes_with_the_last_member_of_the_group_that_registered_it():
    proc = _processor()
    rim = proc.route_info_manager
    assert _register(proc, GENUINE, "a", _body(["T"], [_mapping("T", "a", 8)])).code == 0
    assert _register(proc, OTHER, "b", _body(["T"], [_mapping("T", "b", 8)])).code == 0
    route = rim.pickup_topic_route_data("T")
    assert set(route.topic_queue_mapping_by_broker) == {"a", "b"}
    rim.unregister_brokers([UnRegisterBrokerRequest("C", "10.0.0.9:10911", "b", 0)])
    assert _held(proc) == {("T", "a")} and rim.mapping_count == 9
    assert set(rim.pickup_topic_route_data("T").topic_queue_mapping_by_broker) == {"a"}
    # a channel closing does the same (the expiry scan too: both unregister)
    for request in rim.on_channel_destroy(GENUINE):
        rim.unregister_brokers([request])
    assert (_held(proc), rim.mapping_count, rim.topic_queue_mapping_info_table) == (set(), 0, {})
    assert rim.pickup_topic_route_data("T") is None


def test_a_group_without_topics_takes_its_mappings_when_it_leaves():
    """The issue's shape: no topic, mappings of topics nobody serves, then the connection
    closes: nothing of it is kept."""
    proc = _processor()
    rim = proc.route_info_manager
    body = _body([], [_mapping(f"M{i}", "evil", 1000) for i in range(3)])
    assert _register(proc, OTHER, "evil", body).code == RC.SUCCESS
    assert rim.mapping_count == 3003
    for request in rim.on_channel_destroy(OTHER):
        rim.unregister_brokers([request])
    assert (rim.mapping_count, rim.topic_queue_mapping_info_table, rim.broker_addr_table) == \
        (0, {}, {})
    assert rim.snapshots._own == {}      # no version kept per topic once unmapped


def test_a_mapping_of_another_group_goes_with_the_group_that_registered_it():
    """Without the binding a host may name another group (Java keeps what anyone sends), but
    only for as long as its own group is live."""
    proc = _processor()
    rim = proc.route_info_manager
    assert _register(proc, GENUINE, "broker-a", _body(["VT"], [])).code == 0
    assert _register(proc, OTHER, "evil", _body([], [_mapping("VT", "broker-a", 4, 999)])).code == 0
    assert rim.pickup_topic_route_data("VT").topic_queue_mapping_by_broker["broker-a"].epoch == 999
    for request in rim.on_channel_destroy(OTHER):
        rim.unregister_brokers([request])
    assert rim.pickup_topic_route_data("VT").topic_queue_mapping_by_broker is None


# -- hole 3: brokerIdentityBinding covers the mappings ---------------------------------------

@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_a_mapping_naming_another_hosts_live_group_is_refused(compressed):
    proc = _processor(brokerIdentityBinding="true")
    rim = proc.route_info_manager
    make = _compressed if compressed else _body
    assert _register(proc, GENUINE, "broker-a", make(["VT"], []), compressed).code == 0
    before = rim.route_version("VT")
    answer = _register(proc, OTHER, "evil", make([], [_mapping("VT", "broker-a", 4, 999)]),
                       compressed, offload=True)
    assert (answer.code, answer.remark) == (RC.NO_PERMISSION, (
        "broker broker-a is held by 10.0.0.5 while its registration is live; refused request "
        "code 103 (REGISTER_BROKER) from 10.0.0.9 (brokerIdentityBinding)"))
    assert _held(proc) == set() and "evil" not in rim.broker_addr_table
    assert rim.route_version("VT") == before
    assert proc.broker_access.refused["identity"] == 1


def test_mappings_the_binding_lets_through():
    """A mapping of the registering group, of a group nobody holds live, and one the group's own
    host sends for another of its names, are applied as Java applies them."""
    proc = _processor(brokerIdentityBinding="true")
    assert _register(proc, GENUINE, "broker-a", _body(["VT"], [])).code == 0
    assert _register(proc, OTHER, "evil", _body(["E"], [_mapping("E", "evil", 2),
                                                         _mapping("F", "nobody", 2)])).code == 0
    assert _register(proc, GENUINE, "broker-a2", _body(["VT"], [_mapping("VT", "broker-a", 2)]),
                     addr="10.0.0.5:10921").code == 0
    assert _held(proc) == {("E", "evil"), ("F", "nobody"), ("VT", "broker-a")}
