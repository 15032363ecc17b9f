"""Route snapshots never serve a stale route, and a route changes only with its version.

A Hypothesis state machine registers, re-registers (with zone, acting master, filter servers,
static-topic mappings), unregisters, closes channels, expires brokers, wipes and adds write
permission, deletes topics (everywhere or per cluster), registers topics and flips
supportActingMaster; after every step every topic's snapshot body, in both JSON styles and with
and without an orderTopicConf, must equal the answer computed afresh, and a topic whose version
did not change must answer what it answered before (the mutation gate reported every topic a
step touched). The invariant reads through the snapshots first, so stale bodies exist whenever a
step changes something.
"""
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import (DataVersion, QueueData, Registration, TopicConfig,
                                    TopicConfigWrapper, UnRegisterBrokerRequest)
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_53
from rocketpy.remoting.bodies import TopicQueueMappingInfo

NAMES = ("a", "b", "c")
CLUSTER = {"a": "C1", "b": "C1", "c": "C2"}
TOPICS = ("T1", "T2", "T3")


def addr_of(name, bid):
    return f"10.0.0.{NAMES.index(name) + 1}:{10911 + 10 * bid}"


class RouteBodies:
    """Route bodies as the route handler reads them: from the topic's snapshot (kept per
    dialect; one carrying an orderTopicConf is encoded each time)."""

    def __init__(self, rim):
        self.rim = rim
        self.wire = rim.wire

    def lookup(self, topic, standard, order_topic_conf=None):
        snapshot = self.rim.route_snapshot(topic)
        if snapshot is None or snapshot.route is None:
            return None
        encode = lambda: self.wire.route(snapshot.route, order_topic_conf).to_json(standard)
        return encode() if order_topic_conf is not None else snapshot.body(standard, encode)

    def build(self, topic, standard, order_topic_conf=None):
        """The body computed afresh."""
        route = self.rim.pickup_topic_route_data(topic)
        return None if route is None else self.wire.route(route, order_topic_conf).to_json(standard)


class SnapshotMachine(RuleBasedStateMachine):
    profile = PROFILE_53

    @initialize()
    def setup(self):
        self.rim = RouteInfoManager(NamesrvConfig(), self.profile)
        self.bodies = RouteBodies(self.rim)
        self.now = 0
        self.counter = 0
        self.seen = {}

    @rule(name=st.sampled_from(NAMES), bid=st.sampled_from((0, 1)),
          topics=st.sets(st.sampled_from(TOPICS), min_size=2), perm=st.sampled_from((6, 4, 7)),
          same_version=st.booleans(), acting=st.sampled_from((None, False, True)),
          zone=st.sampled_from((None, "z1", "z2")), filters=st.sampled_from((None, [], ["fs"])),
          mapped=st.booleans(), channel=st.integers(1, 3), dt=st.integers(0, 90_000))
    def register(self, name, bid, topics, perm, same_version, acting, zone, filters, mapped,
                 channel, dt):
        self.now += dt
        if not same_version:
            self.counter += 1
        mapping = {}
        if mapped:
            mapping = {t: TopicQueueMappingInfo(bname=name, curr_id_map={0: 0}, epoch=self.counter,
                                                topic=t, total_queues=1) for t in topics}
        wrapper = TopicConfigWrapper(DataVersion(self.counter, 7, 0),
                                     {t: TopicConfig(t, 4, 4, perm) for t in sorted(topics)}, mapping)
        self.rim.register_broker(Registration(
            CLUSTER[name], addr_of(name, bid), name, bid, "ha", wrapper, filters, channel, self.now,
            zone_name=zone, enable_acting_master=acting))

    @rule(name=st.sampled_from(NAMES), bid=st.sampled_from((0, 1)))
    def unregister(self, name, bid):
        self.rim.unregister_brokers(
            [UnRegisterBrokerRequest(CLUSTER[name], addr_of(name, bid), name, bid)])

    @rule(channel=st.integers(1, 3))
    def close_channel(self, channel):
        self.rim.unregister_brokers(self.rim.on_channel_destroy(channel))

    @rule(dt=st.integers(0, 200_000))
    def expire(self, dt):
        self.now += dt
        self.rim.unregister_brokers([r for r, _ in self.rim.scan_not_active_broker(self.now)])

    @rule(name=st.sampled_from(NAMES), wipe=st.booleans())
    def write_perm(self, name, wipe):
        if wipe:
            self.rim.wipe_write_perm_of_broker(name)
        else:
            self.rim.add_write_perm_of_broker(name)

    @rule(topic=st.sampled_from(TOPICS), cluster=st.sampled_from((None, "C1", "C2")))
    def delete_topic(self, topic, cluster):
        self.rim.delete_topic(topic, cluster)

    @rule(topic=st.sampled_from(TOPICS), name=st.sampled_from(NAMES), perm=st.sampled_from((6, 2)))
    def register_topic(self, topic, name, perm):
        self.rim.register_topic(topic, [QueueData(name, 2, 2, perm)])

    @rule(on=st.booleans())
    def acting_master_support(self, on):
        self.rim.config.support_acting_master = on
        self.rim.invalidate_routes()     # what UPDATE_NAMESRV_CONFIG does

    @invariant()
    def snapshot_bodies_are_never_stale(self):
        if not hasattr(self, "rim"):
            return
        for topic in TOPICS + ("NONE",):
            for standard in (False, True):
                for conf in (None, "a:4"):
                    fresh = self.bodies.build(topic, standard, conf)
                    assert self.bodies.lookup(topic, standard, conf) == fresh
                    key = (topic, standard, conf)
                    version = self.rim.route_version(topic)
                    if key in self.seen and self.seen[key][0] == version:
                        assert self.seen[key][1] == fresh, "changed without a new version"
                    self.seen[key] = (version, fresh)


TestRouteSnapshots = SnapshotMachine.TestCase
TestRouteSnapshots.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)


class SnapshotMachine49(SnapshotMachine):
    profile = PROFILE_49


TestRouteSnapshots49 = SnapshotMachine49.TestCase
TestRouteSnapshots49.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)


def test_snapshot_body_is_reused_when_nothing_changed():
    rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
    bodies = RouteBodies(rim)
    w = TopicConfigWrapper(DataVersion(1, 1, 0), {t: TopicConfig(t) for t in ("T1", "T2")})
    rim.register_broker(Registration("C", "a:1", "a", 0, "ha", w, [], 1, 0))
    first = bodies.lookup("T1", True)
    version = rim.route_version("T1")
    rim.register_broker(Registration("C", "a:1", "a", 0, "ha", w, [], 1, 30_000))   # periodically
    assert bodies.lookup("T1", True) is first
    assert rim.route_version("T1") == version
    rim.wipe_write_perm_of_broker("a")
    assert bodies.lookup("T1", True) != first


def test_deleted_and_recreated_topic_is_not_served_from_an_old_entry():
    rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
    bodies = RouteBodies(rim)
    w = TopicConfigWrapper(DataVersion(1, 1, 0), {t: TopicConfig(t, 8, 8) for t in ("T1", "T2")})
    rim.register_broker(Registration("C", "a:1", "a", 0, "ha", w, [], 1, 0))
    old = bodies.lookup("T1", False)
    rim.delete_topic("T1")
    assert bodies.lookup("T1", False) is None
    rim.register_topic("T1", [QueueData("a", 2, 2, 6)])
    assert bodies.lookup("T1", False) != old
    assert bodies.lookup("T1", False) == bodies.build("T1", False)


def test_filter_servers_registered_under_a_shared_address_reach_every_group_listing_it(tmp_path):
    """A broker address listed by group a registers again as group b with filter servers: the
    filter table is keyed by address, so a's routes show them too (Java's pickupTopicRouteData
    looks each address up); a's route kept from before is not answered."""
    import json
    from brokerbody import register_body
    from processorutil import call, make, register
    proc = make(tmp_path)
    assert register(proc, name="a", topics=("T1", "T2")).code == 0
    route = lambda: json.loads(call(proc, 105, {"topic": "T1"}).body)["filterServerTable"]
    assert route() == {}
    assert register(proc, name="b", topics=("U1", "U2"),
                    body=register_body(("U1", "U2"), filters=("fs:1",))).code == 0
    assert route() == {"127.0.0.1:10911": ["fs:1"]}
