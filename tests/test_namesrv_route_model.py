"""RouteInfoManager against a small reference model, under random operation sequences.

Hypothesis drives register / re-register / unregister / channel close / expiry / write-perm /
topic deletion, with channel-caused unregistrations either applied at once or queued and
applied later (the BatchUnregistrationService), and after every step compares the manager's
tables with a model written from the Java semantics in a few dicts -- no indexes, no Java
ordering, no versions. It also checks the manager's own indexes (channel -> live entries,
broker -> topics) against its tables.

Model scope (5.x, acting master off): three broker groups (a, b in cluster C1; c in C2), ids
0 and 1 with fixed addresses, four topics, every registration carrying at least two topics.
"""
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rocketpy.namesrv import Channel, NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import (Registration, DataVersion, TopicConfig, TopicConfigWrapper,
                                    UnRegisterBrokerRequest)
from rocketpy.namesrv.profile import PROFILE_53

NAMES = ("a", "b", "c")
CLUSTER = {"a": "C1", "b": "C1", "c": "C2"}
TOPICS = ("T1", "T2", "T3", "T4")
TIMEOUT = 120_000


def addr_of(name, bid):
    return f"10.0.0.{NAMES.index(name) + 1}:{10911 + 10 * bid}"


class Model:
    def __init__(self):
        self.groups = {}    # name -> {id: addr}
        self.live = {}      # addr -> dict(channel, last, dv, gen, name)
        self.topics = {}    # topic -> {name: perm}
        self.gen = 0

    def register(self, name, bid, topics, perm, dv, channel, now):
        addr = addr_of(name, bid)
        group = self.groups.setdefault(name, {})
        first = bid not in group
        group[bid] = addr
        prev = self.live.get(addr)
        changed = first or prev is None or prev["dv"] != dv
        if bid == min(group):   # master, or prime slave of a master-less group
            for t in topics:
                if changed or name not in self.topics.get(t, {}):
                    self.topics.setdefault(t, {})[name] = perm
        self.gen += 1
        self.live[addr] = dict(channel=channel, last=now, dv=dv, gen=self.gen, name=name)

    def unregister(self, name, addr, channel=None, gen=None):
        live = self.live.get(addr)
        if channel is not None and live is not None and (live["channel"], live["gen"]) != (channel, gen):
            return
        self.live.pop(addr, None)
        group = self.groups.get(name)
        if group is None:
            return
        for bid in [b for b, a in group.items() if a == addr]:
            del group[bid]
        if not group:
            del self.groups[name]
            for t in list(self.topics):
                self.topics[t].pop(name, None)
                if not self.topics[t]:
                    del self.topics[t]

    def channel_requests(self, channel):
        return [(self.live[a]["name"], a, channel, self.live[a]["gen"])
                for a in self.live if self.live[a]["channel"] == channel]

    def expired(self, now):
        return [(v["name"], a, v["channel"], v["gen"]) for a, v in self.live.items()
                if v["last"] + TIMEOUT < now]

    def perms(self, name, wipe):
        count = 0
        for t, by_name in self.topics.items():
            if name in by_name:
                by_name[name] = by_name[name] & ~2 if wipe else 6
                count += 1
        return count


class RouteMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
        self.model = Model()
        self.now = 0
        self.counter = 0
        self.last_registration = {}   # addr -> (topics, perm, dv)
        self.pending = []             # queued channel-caused requests (real, model)

    def _advance(self, dt):
        self.now += dt

    @rule(name=st.sampled_from(NAMES), bid=st.sampled_from((0, 1)),
          topics=st.sets(st.sampled_from(TOPICS), min_size=2), perm=st.sampled_from((6, 7, 4)),
          fresh=st.booleans(), channel=st.integers(1, 3), dt=st.integers(0, 60_000))
    def register(self, name, bid, topics, perm, fresh, channel, dt):
        self._advance(dt)
        addr = addr_of(name, bid)
        if not fresh and addr in self.last_registration:
            topics, perm, dv = self.last_registration[addr]      # a periodic re-registration
        else:
            self.counter += 1
            dv = DataVersion(self.counter, 1000 + self.counter, 0)
        topics = sorted(topics)
        self.last_registration[addr] = (topics, perm, dv)
        w = TopicConfigWrapper(dv, {t: TopicConfig(t, 4, 4, perm) for t in topics})
        result = self.rim.register_broker(Registration(CLUSTER[name], addr, name, bid, "ha", w, [],
                                          channel, self.now,
                                          enable_acting_master=False))
        assert result is not None
        self.model.register(name, bid, topics, perm, dv, channel, self.now)

    @rule(name=st.sampled_from(NAMES), bid=st.sampled_from((0, 1)))
    def unregister(self, name, bid):
        addr = addr_of(name, bid)
        self.rim.unregister_brokers([UnRegisterBrokerRequest(CLUSTER[name], addr, name, bid)])
        self.model.unregister(name, addr)

    def _apply(self, real, model, queued):
        if queued:
            self.pending.append((real, model))
        else:
            self.rim.unregister_brokers(real)
            for request in model:
                self.model.unregister(*request)

    @rule(channel=st.integers(1, 3), queued=st.booleans())
    def close_channel(self, channel, queued):
        real = self.rim.on_channel_destroy(Channel(channel, "x"))
        model = self.model.channel_requests(channel)
        assert sorted((r.broker_addr, r.channel_id, r.live_generation is not None) for r in real) == \
            sorted((a, c, True) for _, a, c, _ in model)
        self._apply(real, model, queued)

    @rule(dt=st.integers(0, 200_000), queued=st.booleans())
    def expire(self, dt, queued):
        self._advance(dt)
        found = self.rim.scan_not_active_broker(self.now)
        model = self.model.expired(self.now)
        assert sorted(r.broker_addr for r, _ in found) == sorted(a for _, a, _, _ in model)
        self._apply([r for r, _ in found], model, queued)

    @rule()
    def drain(self):
        for real, model in self.pending:
            self.rim.unregister_brokers(real)
            for request in model:
                self.model.unregister(*request)
        self.pending.clear()

    @rule(name=st.sampled_from(NAMES), wipe=st.booleans())
    def write_perm(self, name, wipe):
        if wipe:
            count = self.rim.wipe_write_perm_of_broker(name)
        else:
            count = self.rim.add_write_perm_of_broker(name)
        assert count == self.model.perms(name, wipe)

    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic):
        self.rim.delete_topic(topic)
        self.model.topics.pop(topic, None)

    @invariant()
    def tables_match_the_model(self):
        if not hasattr(self, "rim"):
            return
        rim, model = self.rim, self.model
        assert {n: d.broker_addrs for n, d in rim.broker_addr_table.items()} == model.groups
        assert {t: {n: q.perm for n, q in m.items()} for t, m in rim.topic_queue_table.items()} \
            == model.topics
        clusters = {}
        for name in model.groups:
            clusters.setdefault(CLUSTER[name], set()).add(name)
        assert {c: set(n) for c, n in rim.cluster_addr_table.items()} == clusters
        assert {a: (v.channel_id, v.last_update_ms) for (_, a), v in rim.broker_live_table.items()} \
            == {a: (v["channel"], v["last"]) for a, v in model.live.items()}

    @invariant()
    def indexes_are_consistent(self):
        if not hasattr(self, "rim"):
            return
        rim = self.rim
        by_channel = {}
        for key, live in rim.broker_live_table.items():
            by_channel.setdefault(live.channel_id, set()).add(key)
        assert {c: set(keys) for c, keys in rim._by_channel.items()} == by_channel
        by_broker = {}
        for topic, queue_map in rim.topic_queue_table.items():
            for name in queue_map:
                by_broker.setdefault(name, set()).add(topic)
        assert {n: set(rim.topics_of_broker(n)) for n in by_broker} == by_broker
        # the shapes: one object per layout, each used by exactly its members
        shapes = rim.shapes.shapes()
        assert len({shape.key for shape in shapes}) == len(shapes)
        users = {}
        for topic, shape in rim.topic_queue_table.items():
            users.setdefault(id(shape), set()).add(topic)
        assert {id(shape): set(rim.shapes.members(shape)) for shape in shapes} == users
        assert {name for shape in shapes for name in shape} == set(by_broker)
        assert rim.queue_data_count == sum(map(len, rim.topic_queue_table.values()))
        for topic in TOPICS:
            route = rim.pickup_topic_route_data(topic)
            exists = topic in rim.topic_queue_table and any(
                n in rim.broker_addr_table for n in rim.topic_queue_table[topic])
            assert (route is not None) == exists


TestRouteModel = RouteMachine.TestCase
TestRouteModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
