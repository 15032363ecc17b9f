"""RouteInfoManager: the Java RouteInfoManager's semantics, case by case.

Each test states the Java behaviour it pins (5.3.3 unless a profile is named).
"""
import pytest
from dataclasses import replace

from rocketpy.namesrv import Channel, NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import (DataVersion, QueueData, Registration, TopicConfig,
                                    TopicConfigWrapper, UnRegisterBrokerRequest)
from rocketpy.namesrv.processor.broker import MinBrokerIdNotifier
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import fastjson
from rocketpy.remoting.bodies import TopicQueueMappingInfo

A = "127.0.0.1:10911"
A_SLAVE = "127.0.0.1:10921"
B = "127.0.0.1:20911"


def wrapper(*topics, counter=1, state=0, ts=1000, perm=6, mapping=None):
    return TopicConfigWrapper(DataVersion(counter, ts, state),
                              {t: TopicConfig(t, 8, 8, perm) for t in topics}, mapping or {})


def rim(profile=PROFILE_53, **config):
    return RouteInfoManager(NamesrvConfig(**config), profile)


def register(r, addr=A, name="broker-a", bid=0, topics=("T1", "T2"), channel=1, now=0,
             cluster="C", ha="ha", filters=None, **kw):
    w = kw.pop("w", None) or wrapper(*topics, **{k: kw.pop(k) for k in list(kw)
                                                 if k in ("counter", "state", "ts", "perm", "mapping")})
    return r.register_broker(Registration(cluster, addr, name, bid, ha, w, filters, channel, now,
                                          **kw))


def route_json(r, topic, standard=True):
    route = r.pickup_topic_route_data(topic)
    return None if route is None else fastjson.loads(r.wire.route(route).to_json(standard))


# ------------------------------------------------------------------ registration

def test_first_registration_creates_every_table():
    r = rim()
    result = register(r, filters=["fs1"])
    assert result.ha_server_addr is None and result.master_addr is None
    assert list(r.cluster_addr_table) == ["C"] and "broker-a" in r.cluster_addr_table["C"]
    assert r.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert set(r.topic_queue_table) == {"T1", "T2"}
    assert r.topic_queue_table["T1"]["broker-a"] == QueueData("broker-a", 8, 8, 6, 0)
    assert r.broker_live_table[("C", A)].heartbeat_timeout_ms == 120_000
    assert r.filter_server_table[("C", A)] == ("fs1",)


def test_slave_gets_master_addresses_only_while_master_is_live():
    r = rim()
    register(r, ha="master-ha")
    result = register(r, addr=A_SLAVE, bid=1, channel=2)
    assert (result.ha_server_addr, result.master_addr) == ("master-ha", A)
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    result = register(r, addr=A_SLAVE, bid=1, channel=2)
    assert (result.ha_server_addr, result.master_addr) == (None, None)


def test_same_address_under_another_id_is_replaced():
    """Slave -> master switch: remove <1, addr>, then add <0, addr>."""
    r = rim()
    register(r, addr=A_SLAVE, bid=1, topics=("T1", "T2"))
    register(r, addr=A_SLAVE, bid=0, topics=("T1", "T2"), counter=2)
    assert r.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}


def test_slave_topics_are_ignored_in_49_and_for_old_5x_brokers():
    for profile in (PROFILE_49, PROFILE_53):
        r = rim(profile)
        register(r, topics=("T1",), counter=1)
        register(r, addr=A_SLAVE, bid=1, topics=("T1", "SLAVE_ONLY"), channel=2)
        assert "SLAVE_ONLY" not in r.topic_queue_table


def test_prime_slave_registers_topics_read_only_with_acting_master():
    """5.x: the smallest-id slave of a master-less group is the prime slave; with acting master
    on, its topics are registered without write permission."""
    r = rim()
    register(r, addr=A_SLAVE, bid=1, topics=("T1", "T2"), enable_acting_master=True)
    assert r.topic_queue_table["T1"]["broker-a"].perm == 4
    r2 = rim()
    register(r2, addr=A_SLAVE, bid=1, topics=("T1", "T2"), enable_acting_master=False)
    assert r2.topic_queue_table["T1"]["broker-a"].perm == 6
    r3 = rim(PROFILE_50)   # 5.0.0 wipes even without acting master
    register(r3, addr=A_SLAVE, bid=1, topics=("T1", "T2"), enable_acting_master=False)
    assert r3.topic_queue_table["T1"]["broker-a"].perm == 4


def test_single_topic_registration_before_the_broker_registered_is_refused():
    """5.x returns null (SYSTEM_ERROR 'register broker failed'), yet the cluster and an empty
    BrokerData were already created -- as in Java."""
    r = rim()
    assert register(r, topics=("ONLY",)) is None
    assert r.topic_queue_table == {}
    assert r.broker_addr_table["broker-a"].broker_addrs == {}
    assert "broker-a" in r.cluster_addr_table["C"]
    assert rim(PROFILE_49) is not None and register(rim(PROFILE_49), topics=("ONLY",)) is not None


def test_single_topic_registration_is_merged_not_replacing():
    """After updateTopic the broker registers only the new topic with a higher version."""
    r = rim()
    register(r, topics=("T1", "T2"), counter=1)
    register(r, topics=("NEW",), counter=2)
    assert set(r.topic_queue_table) == {"T1", "T2", "NEW"}


def test_delete_topic_with_broker_registration():
    r = rim(delete_topic_with_broker_registration=True)
    register(r, topics=("T1", "T2"), counter=1)
    register(r, topics=("T1", "T3"), counter=2)
    assert set(r.topic_queue_table) == {"T1", "T3"}


def test_registration_with_older_state_version_is_rejected():
    """An address change for the same id is refused when the live old address has a newer
    stateVersion: the newcomer's live entry is dropped and an empty result returned."""
    r = rim()
    register(r, addr=A, state=5)
    result = register(r, addr=B, state=3, channel=2)
    assert (result.ha_server_addr, result.master_addr) == (None, None)
    assert r.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert ("C", B) not in r.broker_live_table


def test_topic_changes_need_a_new_data_version_in_49():
    """4.9: a master's topics are re-read only on a new DataVersion (or first registration)."""
    r = rim(PROFILE_49)
    register(r, topics=("T1",), counter=1, perm=6)
    register(r, topics=("T1",), counter=1, perm=2)
    assert r.topic_queue_table["T1"]["broker-a"].perm == 6
    register(r, topics=("T1",), counter=2, perm=2)
    assert r.topic_queue_table["T1"]["broker-a"].perm == 2


def test_5x_rereads_a_topic_missing_for_this_broker_even_with_the_same_version():
    r = rim()
    register(r, topics=("T1", "T2"), counter=1)
    r.delete_topic("T1")
    register(r, topics=("T1", "T2"), counter=1)
    assert "T1" in r.topic_queue_table


def test_heartbeat_timeout_and_zone_from_5x_brokers():
    r = rim()
    register(r, timeout_millis=10_000, zone_name="z1", enable_acting_master=True)
    assert r.broker_live_table[("C", A)].heartbeat_timeout_ms == 10_000
    data = r.broker_addr_table["broker-a"]
    assert (data.zone_name, data.enable_acting_master) == ("z1", True)
    assert route_json(r, "T1")["brokerDatas"][0]["zoneName"] == "z1"


def test_static_topic_mappings_are_kept_by_broker_name():
    r = rim()
    info = TopicQueueMappingInfo(bname="broker-a", curr_id_map={0: 0}, dirty=False, epoch=7,
                                 scope="__global__", topic="T1", total_queues=1)
    register(r, topics=("T1",), counter=1, mapping={"T1": info})
    register(r, topics=("T1", "T2"), counter=2, mapping={"T1": info})
    assert r.topic_queue_mapping_info_table["T1"]["broker-a"].epoch == 7
    assert route_json(r, "T1", standard=False)["topicQueueMappingByBroker"]["broker-a"]["epoch"] == 7


# ------------------------------------------------------------------ unregistration and liveness

def test_unregister_removes_emptied_broker_cluster_and_topics():
    r = rim()
    register(r, topics=("T1", "SHARED"))
    register(r, addr=B, name="broker-b", topics=("SHARED", "B_ONLY"), channel=2, cluster="C2")
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    assert set(r.topic_queue_table) == {"SHARED", "B_ONLY"}
    assert "broker-a" not in r.broker_addr_table
    assert "C" not in r.cluster_addr_table
    assert ("C", A) not in r.broker_live_table
    assert r._by_channel.get(1) is None


def test_a_batch_applies_many_unregistrations_at_once():
    r = rim()
    register(r, topics=("T", "U"))
    register(r, addr=A_SLAVE, bid=1, topics=("T", "U"), channel=2)
    register(r, addr=B, name="broker-b", topics=("T", "U"), channel=3)
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0),
                          UnRegisterBrokerRequest("C", A_SLAVE, "broker-a", 1),
                          UnRegisterBrokerRequest("C", B, "broker-b", 0)])
    assert r.topic_queue_table == {} and r.broker_addr_table == {} and r.cluster_addr_table == {}
    assert r.broker_live_table == {}


def test_master_loss_wipes_write_perm_for_acting_master_groups():
    r = rim()
    register(r, topics=("T", "U"), enable_acting_master=True)
    register(r, addr=A_SLAVE, bid=1, topics=("T", "U"), channel=2, enable_acting_master=True)
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    assert r.topic_queue_table["T"]["broker-a"].perm == 4


def test_acting_master_rewrite_in_routes():
    """supportActingMaster: a master-less, read-only group shows its smallest slave as id 0."""
    r = rim(support_acting_master=True)
    register(r, topics=("T", "U"), enable_acting_master=True)
    register(r, addr=A_SLAVE, bid=1, topics=("T", "U"), channel=2, enable_acting_master=True)
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    assert route_json(r, "T")["brokerDatas"][0]["brokerAddrs"] == {"0": A_SLAVE}
    assert r.broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}   # the table is intact
    r.config.support_acting_master = False
    assert route_json(r, "T")["brokerDatas"][0]["brokerAddrs"] == {"1": A_SLAVE}


def test_channel_close_is_found_through_the_channel_index():
    r = rim()
    register(r, channel=7)
    (request,) = r.on_channel_destroy(Channel(7, "x"))
    assert (request.cluster_name, request.broker_addr, request.broker_name, request.broker_id,
            request.channel_id) == ("C", A, "broker-a", 0, 7)
    assert r.on_channel_destroy(8) == []


def test_stale_channel_unregistration_is_dropped_after_reregistration():
    """apache/rocketmq#11043: a close queued for the old channel must not remove the broker
    that has meanwhile registered on a new channel."""
    r = rim()
    register(r, channel=1)
    (stale,) = r.on_channel_destroy(1)
    register(r, channel=2, counter=2)
    r.unregister_brokers([stale])
    assert r.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert r.broker_live_table[("C", A)].channel_id == 2
    (fresh,) = r.on_channel_destroy(2)
    r.unregister_brokers([fresh])
    assert "broker-a" not in r.broker_addr_table


def test_expiry_uses_each_brokers_own_timeout():
    r = rim()
    register(r, now=0, timeout_millis=10_000, channel=1)
    register(r, addr=B, name="broker-b", now=0, channel=2)
    assert r.scan_not_active_broker(10_000) == []
    (expired,) = r.scan_not_active_broker(10_001)
    assert expired[0].broker_name == "broker-a" and expired[1] == 1
    r.update_broker_info_update_timestamp("C", B, 100_000)
    assert [e[0].broker_name for e in r.scan_not_active_broker(220_001)] == ["broker-a", "broker-b"]


def test_49_expiry_ignores_per_broker_timeouts():
    r = rim(PROFILE_49)
    register(r, now=0, timeout_millis=10_000)
    assert r.scan_not_active_broker(120_000) == []
    assert len(r.scan_not_active_broker(120_001)) == 1


def test_50_unregisters_by_id_53_by_address():
    """A request naming the slave's address with the master's id: 5.0.0 removes id 0 (the
    master), 5.1+ removes the entry holding that address (the slave)."""
    for profile, left in ((PROFILE_50, {1: A_SLAVE}), (PROFILE_53, {0: A})):
        r = rim(profile)
        register(r, topics=("T", "U"))
        register(r, addr=A_SLAVE, bid=1, topics=("T", "U"), channel=2)
        r.unregister_brokers([UnRegisterBrokerRequest("C", A_SLAVE, "broker-a", 0)])
        assert r.broker_addr_table["broker-a"].broker_addrs == left


# ------------------------------------------------------------------ admin operations

def test_write_perm_wipe_and_add_count_topics():
    r = rim()
    register(r, topics=("T1", "T2"))
    register(r, addr=B, name="broker-b", topics=("T2", "T3"), channel=2)
    assert r.wipe_write_perm_of_broker("broker-a") == 2
    assert r.topic_queue_table["T2"]["broker-a"].perm == 4
    assert r.topic_queue_table["T2"]["broker-b"].perm == 6
    assert r.add_write_perm_of_broker("broker-a") == 2
    assert r.topic_queue_table["T1"]["broker-a"].perm == 6
    assert r.wipe_write_perm_of_broker("nobody") == 0


def test_delete_topic_everywhere_or_in_one_cluster():
    r = rim()
    register(r, topics=("T", "U"))
    register(r, addr=B, name="broker-b", topics=("T", "U"), channel=2, cluster="C2")
    r.delete_topic("T", "C2")
    assert set(r.topic_queue_table["T"]) == {"broker-a"}
    r.delete_topic("T", "NO_SUCH_CLUSTER")
    assert "T" in r.topic_queue_table
    r.delete_topic("T")
    assert "T" not in r.topic_queue_table and r.pickup_topic_route_data("T") is None


def test_register_topic_only_for_known_brokers():
    r = rim()
    register(r, topics=("T", "U"))
    r.register_topic("X", [QueueData("unknown", 1, 1, 6)])
    assert "X" not in r.topic_queue_table
    r.register_topic("X", [QueueData("broker-a", 2, 2, 6)])
    assert r.topic_queue_table["X"]["broker-a"].read_queue_nums == 2


def test_topic_lists_follow_java_set_order():
    r = rim()
    register(r, topics=("SCHEDULE_TOPIC_XXXX", "TopicA", "TBW102", "DefaultCluster"), cluster="DefaultCluster")
    # 5.3: ConcurrentHashMap key set of 16 -> hash order
    assert r.get_all_topic_list() == ["SCHEDULE_TOPIC_XXXX", "TopicA", "TBW102", "DefaultCluster"]
    topics, addr = r.get_system_topic_list()
    assert topics == ["broker-a", "DefaultCluster"] and addr == A
    assert r.get_topics_by_cluster("nope") == []


def test_unit_topic_lists_use_the_first_queue_datas_flag():
    r = rim()
    w = wrapper("U", "US", "USNU", "PLAIN")
    for topic, flag in (("U", 1), ("US", 3), ("USNU", 2)):   # records are frozen
        w.topic_config_table[topic] = replace(w.topic_config_table[topic], topic_sys_flag=flag)
    register(r, w=w)
    assert sorted(r.get_unit_topics()) == ["U", "US"]
    assert sorted(r.get_has_unit_sub_topic_list()) == ["US", "USNU"]
    assert r.get_has_unit_sub_un_unit_topic_list() == ["USNU"]


def test_cluster_info_json_matches_the_49_shape():
    r = rim(PROFILE_49)
    register(r, cluster="DefaultCluster")
    assert r.wire.cluster_info(r).to_json() == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def test_route_lists_in_java_hash_order():
    """new HashSet(brokerNames) order: broker-b, broker-c, broker-a (seen in the captures)."""
    r = rim()
    for i, name in enumerate(("broker-a", "broker-b", "broker-c")):
        register(r, addr=f"127.0.0.1:{i}", name=name, topics=("T", "X"), channel=i)
    assert [b["brokerName"] for b in route_json(r, "T")["brokerDatas"]] == ["broker-b", "broker-c", "broker-a"]


def test_min_broker_id_change_notifies_the_group():
    sent = []
    r = RouteInfoManager(NamesrvConfig(notify_min_broker_id_changed=True), PROFILE_53)
    r.on_min_broker_id_changed = MinBrokerIdNotifier(lambda addrs, request: sent.append((addrs, request)),
                                                     r.wire)
    register(r, addr=A_SLAVE, bid=1, topics=("T", "U"), enable_acting_master=True)
    register(r, addr=A, bid=0, topics=("T", "U"), enable_acting_master=True, channel=2)
    (addrs, request), = sent
    assert addrs == [A_SLAVE] and request.code == 905 and request.is_oneway
    assert request.ext_fields["minBrokerId"] == "0" and request.ext_fields["minBrokerAddr"] == A
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    assert sent[-1][0] == [A_SLAVE] and sent[-1][1].ext_fields["offlineBrokerAddr"] == A


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53])
def test_live_table_keys_by_profile(profile):
    r = rim(profile)
    register(r)
    key = ("C", A) if profile.v5_registration else (None, A)
    assert key in r.broker_live_table


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53])
def test_departed_brokers_leave_no_epoch_and_no_expiry_entry(profile):
    """Nothing of a broker stays once it has left: its QueueData epoch (which the walk narrowing
    reads) and its expiry heap entry (key and deadline) went only when another registration
    replaced them or the deadline passed, and after a flood of brokers came and went those few
    objects kept the allocator's arenas of the whole flood (issue 21)."""
    r = rim(profile)
    names = [f"broker-{i}" for i in range(3)]
    for i, name in enumerate(names):
        register(r, addr=f"127.0.0.{i + 1}:10911", name=name, topics=(f"T{i}", "shared"),
                 channel=i + 1)
    assert set(r._epochs) == set(names)
    r.unregister_brokers([UnRegisterBrokerRequest("C", "127.0.0.1:10911", names[0], 0)])
    assert set(r._epochs) == set(names[1:])
    r.unregister_brokers([UnRegisterBrokerRequest("C", f"127.0.0.{i + 1}:10911", name, 0)
                          for i, name in enumerate(names) if i])
    assert not r.broker_live_table and not r.topic_queue_table
    assert r._epochs == {} and r.expiry._heap == []


def test_walk_view_is_stale_once_its_broker_left_and_came_back():
    """The epochs are handed out by one clock, and a group set again gets a new one: a view read
    before a broker left and registered again never passes for current, even though its
    epoch entry went with it."""
    r = rim()
    register(r, topics=("T1", "T2"))
    _, still_valid = r.walk_view(Registration("C", A, "broker-a", 0))
    assert still_valid()
    r.unregister_brokers([UnRegisterBrokerRequest("C", A, "broker-a", 0)])
    assert "broker-a" not in r._epochs and not still_valid()
    register(r, topics=("T1", "T2"), counter=2)
    assert not still_valid()
    assert r.walk_view(Registration("C", A, "broker-a", 0))[1]()


def test_expiry_heap_stays_bounded_under_shrinking_timeouts():
    """A hostile 5.x broker re-registering with an ever smaller ``heartbeatTimeoutMillis`` moves
    its deadline earlier each time (each time a heap push): the expiry heap stays a small
    multiple of the live brokers, not one entry per registration."""
    r = rim()
    for i in range(5000):
        register(r, now=0, timeout_millis=10**12 - i, counter=1)
    assert len(r.broker_live_table) == 1
    assert len(r.expiry._heap) <= 2 * len(r.expiry) + 64
    (expired,) = r.scan_not_active_broker(10**12)
    assert expired[0].broker_name == "broker-a"


# ------------------------------------------------------------------ expiry of a channel-less entry

def test_an_expiry_queued_before_the_broker_registered_again_is_dropped_without_a_channel_too():
    """A live entry without a channel (a warm restart's provisional one) expires: the scan queues
    its unregistration; the broker registers before the batch is applied; the stale request
    carries the old entry's generation and removes nothing (apache/rocketmq#11043's rule, which
    rocketpy applied only to requests that name a channel)."""
    r = rim()
    r.register_broker(Registration("C", A, "broker-a", 0, "ha", wrapper("T1", "T2"), None, None, 0))
    [(request, channel_id)] = r.scan_not_active_broker(120_001)
    assert channel_id is None and request.live_generation is not None
    register(r, channel=7, now=120_002)
    r.unregister_brokers([request])
    assert r.broker_live_table[("C", A)].channel_id == 7
    assert route_json(r, "T1")["brokerDatas"][0]["brokerAddrs"] == {"0": A}
    # with no registration in between, the same request removes the broker
    r.unregister_brokers(r.scan_not_active_broker(300_000)[0][:1])
    assert r.pickup_topic_route_data("T1") is None
