"""Who may speak for a broker (issue 12, part 4): ``brokerAllowNetworks`` and
``brokerIdentityBinding``, against the real processor and route tables, in every profile."""
import json
import zlib

import pytest

from brokerbody import register_body
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.acl import AclConfigError
from rocketpy.namesrv.broker_access import BrokerAccessPolicy
from rocketpy.remoting import RemotingCommand

GENUINE = Channel(1, "10.0.0.5:40001")
GENUINE_AGAIN = Channel(2, "10.0.0.5:40002")      # the same host, a new connection
OTHER = Channel(3, "10.0.0.9:40003")
OUTSIDE = Channel(4, "192.168.7.7:40004")


def _processor(profile="5.3", **props):
    configuration = Configuration.from_properties(props, as_policies(profile_for(profile)))
    rim = RouteInfoManager(configuration.namesrv_config, profile_for(profile))
    return DefaultRequestProcessor(rim, KVConfigManager("/nonexistent/kv.json"),
                                   configuration=configuration,
                                   submit_unregistration=lambda r: rim.unregister_brokers([r]) or True)


def _register(proc, channel, addr="10.0.0.5:10911", name="broker-a", broker_id=0, oneway=False):
    body = register_body(("TopicA", "TopicB"), 1)
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "haServerAddr": addr,
           "brokerId": str(broker_id), "compressed": "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    version = proc.policies.wire.own_version   # 4.9's broker speaks 409, 5.3's 479
    return proc.process(RemotingCommand.request(103, ext, body, opaque=1, version=version,
                                                oneway=oneway), channel, 1000)


def _broker_request(proc, code, channel, addr="10.0.0.5:10911", name="broker-a", oneway=False):
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "brokerId": "0"}
    # QUERY_DATA_VERSION carries the broker's DataVersion (4.9.8 and 5.0.0 fail it without one)
    body = b'{"counter":1,"stateVersion":0,"timestamp":1}' if code == 322 else None
    return proc.process(RemotingCommand.request(code, ext, body, opaque=2, version=479,
                                                oneway=oneway), channel, 2000)


def _addrs(proc, name="broker-a"):
    data = proc.route_info_manager.broker_addr_table.get(name)
    return None if data is None else dict(data.broker_addrs)


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3"])
def test_identity_binding_refuses_other_hosts_while_the_registration_is_live(profile):
    proc = _processor(profile, brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    hijack = _register(proc, OTHER, addr="10.0.0.9:10911")
    assert hijack.code == 16 and hijack.remark.startswith(
        "broker broker-a id 0 is held by 10.0.0.5 while its registration is live")
    assert _register(proc, OTHER, name="evil").code == 16          # its address, another name
    assert _broker_request(proc, 104, OTHER).code == 16            # UNREGISTER_BROKER
    assert _broker_request(proc, 322, OTHER).code == 16            # QUERY_DATA_VERSION
    assert _addrs(proc) == {0: "10.0.0.5:10911"}
    assert proc.broker_access.refused == {"network": 0, "identity": 4}
    # the same host on a new connection (a restart) takes it over; its own requests pass
    assert _register(proc, GENUINE_AGAIN).code == 0
    assert _broker_request(proc, 322, GENUINE_AGAIN).code == 0
    # once the registration is gone, the identity is free
    assert _broker_request(proc, 104, GENUINE_AGAIN).code == 0
    assert _addrs(proc) is None
    assert _register(proc, OTHER, addr="10.0.0.9:10911").code == 0
    assert _addrs(proc) == {0: "10.0.0.9:10911"}


def test_a_oneway_heartbeat_from_another_host_is_dropped():
    proc = _processor(brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    rim = proc.route_info_manager
    assert _broker_request(proc, 904, OTHER, oneway=True) is None
    assert rim.broker_live_info("C", "10.0.0.5:10911").last_update_ms == 1000   # not refreshed
    assert _broker_request(proc, 904, GENUINE, oneway=True) is None
    assert rim.broker_live_info("C", "10.0.0.5:10911").last_update_ms == 2000


def test_allow_list_refuses_broker_requests_from_elsewhere_and_keeps_reads_open():
    proc = _processor(brokerAllowNetworks="10.0.0.0/24, ::1")
    refused = _register(proc, OUTSIDE)
    assert (refused.code, refused.remark) == (16, "request code 103 (REGISTER_BROKER) is a broker "
                                                  "request and client 192.168.7.7 is not in "
                                                  "brokerAllowNetworks")
    assert _addrs(proc) is None
    for code in (104, 322, 904):
        assert _broker_request(proc, code, OUTSIDE).code == 16, code
    assert _register(proc, GENUINE).code == 0
    route = proc.process(RemotingCommand.request(105, {"topic": "TopicA"}, opaque=3, version=479),
                         OUTSIDE, 3000)
    assert route.code == 0
    assert proc.broker_access.refused["network"] == 4


def test_off_by_default_like_java():
    proc = _processor()
    assert proc.broker_access.codes == frozenset()
    assert _register(proc, GENUINE).code == 0
    assert _register(proc, OTHER, addr="10.0.0.9:10911").code == 0     # Java takes it
    assert _addrs(proc) == {0: "10.0.0.9:10911"}


def test_bad_networks_stop_the_start():
    with pytest.raises(AclConfigError, match="brokerAllowNetworks: '10.0.0.0/33'"):
        BrokerAccessPolicy.from_properties({"brokerAllowNetworks": "10.0.0.0/33"}, None)


def test_hosts_of_departed_connections_are_forgotten():
    proc = _processor(brokerIdentityBinding="true")
    for i in range(300):
        channel = Channel(100 + i, f"10.1.{i // 250}.{i % 250}:1")
        assert _register(proc, channel, addr=f"10.1.0.{i}:10911", name=f"b{i}").code == 0
        assert _broker_request(proc, 104, channel, addr=f"10.1.0.{i}:10911", name=f"b{i}").code == 0
    assert len(proc.broker_access._hosts) < 130
    assert len(proc.broker_access._by_addr) < 130 and len(proc.broker_access._by_name) < 130


def _cluster_request(proc, code, channel, cluster, addr, name, broker_id, topics=("TopicA", "TopicB")):
    """A broker request naming ``cluster`` (not the victim's "C")."""
    body = register_body(topics, 1) if code == 103 else None
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr,
           "brokerId": str(broker_id)}
    if body is not None:
        ext.update(compressed="false", bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF))
    return proc.process(RemotingCommand.request(code, ext, body, opaque=3,
                                                version=proc.policies.wire.own_version), channel, 1500)


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3"])
def test_identity_binding_holds_whatever_cluster_name_or_id_a_request_names(profile):
    """Issue 20, item 1: another cluster + the victim's address + name + an unused id slipped
    past the binding in 5.x (the live table is keyed by (cluster, address) there)."""
    proc = _processor(profile, brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    victim = "10.0.0.5:10911"
    attacks = [(104, "Other", victim, "broker-a", 99),        # unregister: victim gone (5.3)
               (103, "Other", victim, "broker-a", 1),         # register: group without master
               (103, "Other", victim, "evil", 0),             # its address in another cluster
               (103, "Other", "10.0.0.9:10911", "broker-a", 1),   # its name in another cluster
               (104, "Other", "10.0.0.9:10911", "broker-a", 0),
               (322, "Other", victim, "broker-a", 99)]
    if profile != "4.9":   # 4.9.8 has no BROKER_HEARTBEAT
        attacks.append((904, "Other", victim, "broker-a", 99))
    for code, cluster, addr, name, broker_id in attacks:
        answer = _cluster_request(proc, code, OTHER, cluster, addr, name, broker_id)
        assert answer.code == 16, (code, cluster, addr, name, broker_id, answer)
        assert "is held by 10.0.0.5" in answer.remark, answer.remark
    assert _addrs(proc) == {0: "10.0.0.5:10911"}
    assert sorted(proc.route_info_manager.cluster_addr_table) == ["C"]
    route = proc.process(RemotingCommand.request(105, {"topic": "TopicA"}, opaque=4, version=479),
                         OUTSIDE, 3000)
    assert route.code == 0 and b"10.0.0.5:10911" in route.body
    assert proc.broker_access.refused["identity"] == len(attacks)
    # a slave of the group on another host, in the group's cluster, is still welcome
    assert _cluster_request(proc, 103, OTHER, "C", "10.0.0.9:10911", "broker-a", 1).code == 0
    assert _addrs(proc) == {0: "10.0.0.5:10911", 1: "10.0.0.9:10911"}
    # the genuine host may move its own broker (the other host's slave is live: the name is not)
    assert _cluster_request(proc, 103, GENUINE_AGAIN, "C", victim, "broker-a", 0).code == 0


def _register_topic(proc, channel, topic="Hijacked", name="broker-a"):
    body = json.dumps({"brokerDatas": [], "queueDatas": [
        {"brokerName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
         "topicSysFlag": 0}]}).encode()
    return proc.process(RemotingCommand.request(217, {"topic": topic}, body, opaque=5,
                                                version=479), channel, 1500)


@pytest.mark.parametrize("profile", ["5.0", "5.3"])   # 4.9.8 has no REGISTER_TOPIC_IN_NAMESRV
def test_register_topic_naming_another_hosts_live_group_is_refused(profile):
    """REGISTER_TOPIC_IN_NAMESRV adds queues to the groups its body names: with the binding, a
    host may not add a topic to a group another host has live (it did, in every profile)."""
    proc = _processor(profile, brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    refused = _register_topic(proc, OTHER)
    assert refused.code == 16, refused
    assert refused.remark == ("broker broker-a is held by 10.0.0.5 while its registration is "
                              "live; refused request code 217 (REGISTER_TOPIC_IN_NAMESRV) from "
                              "10.0.0.9 (brokerIdentityBinding)")
    assert "Hijacked" not in proc.route_info_manager.topic_queue_table
    assert proc.broker_access.refused["identity"] == 1
    # the group's own host, and a group nobody holds live, as Java does
    assert _register_topic(proc, GENUINE_AGAIN, topic="Own").code == 0
    assert _register_topic(proc, OTHER, topic="Free", name="nobody").code == 0
    # a slave of the group on the other host may speak for its group too
    assert _cluster_request(proc, 103, OTHER, "C", "10.0.0.9:10911", "broker-a", 1).code == 0
    assert _register_topic(proc, OTHER, topic="FromSlave").code == 0
    assert "Own" in proc.route_info_manager.topic_queue_table


class _CountingRoutes:
    """The route tables as the policy sees them, counting live-table lookups."""

    def __init__(self, rim):
        self._rim, self.lookups = rim, 0

    def __getattr__(self, name):
        return getattr(self._rim, name)

    @property
    def broker_live_table(self):
        outer, table = self, self._rim.broker_live_table

        class Counting:
            def get(self, key, default=None):
                outer.lookups += 1
                return table.get(key, default)

            def values(self):
                return table.values()

            def __contains__(self, key):
                outer.lookups += 1
                return key in table
        return Counting()


def _identity_check_lookups(members):
    """Live-table lookups of 100 identity checks naming a group of ``members`` under another
    cluster, and an address live in ``members`` clusters, from the host holding them."""
    proc = _processor("5.3", brokerIdentityBinding="true")
    for i in range(members):
        ext = {"brokerName": "big", "brokerAddr": f"10.0.0.5:{20000 + i}", "clusterName": "C",
               "haServerAddr": "x", "brokerId": str(i), "compressed": "false"}
        body = register_body(("T", "U"), 1)
        ext["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
        assert proc.process(RemotingCommand.request(103, ext, body, opaque=1, version=479),
                            GENUINE, 1000).code == 0
        assert _cluster_request(proc, 103, GENUINE, f"K{i}", "10.0.0.5:10911", f"own{i}",
                                0).code == 0
    counting = _CountingRoutes(proc.route_info_manager)
    proc.broker_access.rim = counting
    for _ in range(50):
        assert _cluster_request(proc, 904, GENUINE, "Other", "10.0.0.5:1", "big", 7).code == 0
        assert _cluster_request(proc, 904, GENUINE, "K0", "10.0.0.5:10911", "own0", 0).code == 0
    assert _cluster_request(proc, 904, OTHER, "Other", "10.0.0.9:1", "big", 7).code == 16
    return counting.lookups


def test_identity_check_costs_the_same_whatever_the_group_or_cluster_count():
    """A request's identity check does not walk the named group's members or the clusters an
    address is live in (it did: 100 requests cost 100 x members lookups)."""
    small, big = _identity_check_lookups(64), _identity_check_lookups(128)
    assert big <= small + 8, (small, big)


@pytest.mark.parametrize("profile", ["5.0", "5.3"])
def test_a_header_without_the_fields_the_handler_ignores_is_still_checked(profile):
    """QUERY_DATA_VERSION and BROKER_HEARTBEAT read their header as Java does (an absent field
    is null), so the check reads it so too: a header without brokerName or brokerId, which the
    handler takes, must not slip past a check that could not read it (it did: another host kept
    the victim's registration alive)."""
    proc = _processor(profile, brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    live = proc.route_info_manager.broker_live_table
    before = {key: info.last_update_ms for key, info in live.items()}
    for code, missing in ((904, "brokerName"), (322, "brokerId"), (322, "brokerName")):
        ext = {"brokerName": "broker-a", "brokerAddr": "10.0.0.5:10911", "clusterName": "C",
               "brokerId": "0"}
        del ext[missing]
        body = b'{"counter":1,"stateVersion":0,"timestamp":1}' if code == 322 else None
        answer = proc.process(RemotingCommand.request(code, ext, body, opaque=3, version=479),
                              OTHER, 90_000)
        assert answer.code == 16, (code, missing, answer)
    assert {key: info.last_update_ms for key, info in live.items()} == before


@pytest.mark.parametrize("profile", ["5.0", "5.3"])
def test_a_register_topic_body_is_checked_as_the_handler_reads_it(profile):
    """The check reads REGISTER_TOPIC_IN_NAMESRV's body as the release's fastjson does, like
    the handler: under 1.2.69 (5.0) ``queue_datas`` is no property, so ``queueDatas`` names the
    group; read as 1.2.83 the check took ``queue_datas`` (empty) and let the topic in."""
    proc = _processor(profile, brokerIdentityBinding="true")
    assert _register(proc, GENUINE).code == 0
    queue = {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
             "topicSysFlag": 0}
    for body in ({"queue_datas": [], "queueDatas": [queue]},
                 {"queueDatas": [queue], "queue_datas": []}):
        answer = proc.process(RemotingCommand.request(
            217, {"topic": "Hijacked"}, json.dumps(body).encode(), opaque=6, version=479),
            OTHER, 1500)
        assert answer.code in (0, 16)
        assert "Hijacked" not in proc.route_info_manager.topic_queue_table, (body, answer)
