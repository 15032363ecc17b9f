"""Topic lists (GET_TOPICS_BY_CLUSTER, GET_ALL_TOPIC_LIST, unit lists): Java's answers, built
without walking every topic per broker name, and reused until the route tables change."""
import json
import random

import pytest

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import Registration, DataVersion, TopicConfig, TopicConfigWrapper
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53


class CountedTopic(str):
    """A topic name that counts how often it is hashed (each dict lookup or insert)."""
    hashes = 0

    def __hash__(self):
        CountedTopic.hashes += 1
        return str.__hash__(self)


def random_state(profile, seed, brokers, topics, per_broker, clusters=3, topic_type=str):
    rng = random.Random(seed)
    r = RouteInfoManager(NamesrvConfig(), profile)
    names = [topic_type(f"Topic{rng.randrange(10**9)}-{i}") for i in range(topics)]
    for b in range(brokers):
        chosen = rng.sample(names, per_broker)
        wrapper = TopicConfigWrapper(DataVersion(1, 1000, 0),
                                     {t: TopicConfig(t, 8, 8, 6) for t in chosen}, {})
        r.register_broker(Registration(
            f"C{b % clusters}", f"10.0.{b // 250}.{b % 250}:10911", f"broker-{b}", 0, "ha", wrapper,
            None, b + 1, 0))
    return r


def reference_topics_by_cluster(r, cluster):
    """The straightforward walk (Java's): every topic in table order, for each broker name."""
    topics = r.topics_in_order()
    items = []
    for name in r.cluster_broker_names(cluster):
        items.extend(t for t in topics if name in r.topic_queue_table[t])
    return r.wire.topic_set(items)


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53])
@pytest.mark.parametrize("seed", range(4))
def test_topics_by_cluster_equal_the_straightforward_walk(profile, seed):
    r = random_state(profile, seed, brokers=12, topics=60, per_broker=15)
    for cluster in ("C0", "C1", "C2"):
        assert r.get_topics_by_cluster(cluster) == reference_topics_by_cluster(r, cluster)
    assert r.get_topics_by_cluster("nope") == []


def test_topics_by_cluster_work_does_not_scale_with_brokers_times_topics():
    brokers, topics, per_broker = 300, 600, 2
    r = random_state(PROFILE_53, 7, brokers, topics, per_broker, clusters=1,
                     topic_type=CountedTopic)
    pairs, topics = r.queue_data_count, len(r.topic_queue_table)
    CountedTopic.hashes = 0
    answer = r.get_topics_by_cluster("C0")
    work = CountedTopic.hashes
    CountedTopic.hashes = 0
    assert answer == reference_topics_by_cluster(r, "C0")
    reference_work = CountedTopic.hashes
    assert reference_work >= brokers * topics        # the walk hashes every (name, topic)
    assert work <= 4 * (topics + pairs) and work * 20 < reference_work


def test_all_topic_and_unit_lists_are_reused_until_a_change():
    r = random_state(PROFILE_53, 1, brokers=4, topics=20, per_broker=5)
    lists = (r.get_all_topic_list, r.get_unit_topics, r.get_has_unit_sub_topic_list,
             r.get_has_unit_sub_un_unit_topic_list)
    first = [get() for get in lists]
    assert all(get() is held for get, held in zip(lists, first))
    unit = TopicConfig("UnitTopic", 8, 8, 6, topic_sys_flag=1)
    r.register_broker(Registration("C0", "10.9.9.9:10911", "broker-new", 0, "ha",
                      TopicConfigWrapper(DataVersion(1, 1000, 0), {
                          "UnitTopic": unit, "Plain": TopicConfig("Plain", 8, 8, 6)}, {}),
                      None, 99, 0))
    assert "UnitTopic" in r.get_all_topic_list() and "UnitTopic" not in first[0]
    assert r.get_unit_topics() == ["UnitTopic"] and first[1] == []
    r.delete_topic("UnitTopic")
    assert "UnitTopic" not in r.get_all_topic_list() and r.get_unit_topics() == []


def test_a_big_all_topic_list_is_built_off_the_reactor_and_answers_the_same(tmp_path):
    """From ``offload_from`` topics the handler returns a Pending whose work orders a copy of
    the names and encodes them (any thread): the answer is the list as of the request, byte for
    byte what the handler builds on the spot, and is not held once the tables changed."""
    from processorutil import call, make, register
    from rocketpy.namesrv.pending import Pending
    from rocketpy.remoting import RemotingCommand, fastjson
    proc = make(tmp_path)
    register(proc, topics=tuple(f"T{i}" for i in range(40)))
    inline = call(proc, 206).body
    proc.handlers[206].__self__.offload_from = 10
    proc.route_info_manager._listings.clear()
    later = proc.process(RemotingCommand.request(206, {}, None, opaque=5, version=479), None,
                         1000, offload=True)
    assert isinstance(later, Pending)
    assert later.run().body == inline                 # the same bytes
    assert proc.route_info_manager._listings["all"][1] == fastjson.loads(inline)["topicList"]
    later = proc.process(RemotingCommand.request(206, {}, None, opaque=6, version=479), None,
                         1000, offload=True)
    assert not isinstance(later, Pending)             # held: answered on the spot
    proc.route_info_manager._listings.clear()
    later = proc.process(RemotingCommand.request(206, {}, None, opaque=7, version=479), None,
                         1000, offload=True)
    proc.route_info_manager.delete_topic("T3")        # while the work runs elsewhere
    answer = later.run()
    assert b'"T3"' in answer.body                     # the list as of the request...
    assert "all" not in proc.route_info_manager._listings      # ...not held as the new one
    assert b'"T3"' not in call(proc, 206).body


def test_a_big_topics_by_cluster_list_is_built_off_the_reactor_and_answers_the_same(tmp_path):
    from processorutil import call, make, register
    from rocketpy.namesrv.pending import Pending
    from rocketpy.remoting import RemotingCommand
    def made(where):
        proc = make(where)
        register(proc, topics=tuple(f"T{i}" for i in range(30)))
        register(proc, name="broker-b", addr="127.0.0.1:10912",
                 topics=tuple(f"U{i}" for i in range(30)))
        return proc
    (tmp_path / "a").mkdir()
    inline = call(made(tmp_path / "a"), 224, {"cluster": "C"}).body
    proc = made(tmp_path)
    proc.handlers[224].__self__.offload_from = 10

    def ask():
        return proc.process(RemotingCommand.request(224, {"cluster": "C"}, None, opaque=5,
                                                    version=479), None, 1000, offload=True)
    later = ask()
    assert isinstance(later, Pending)
    proc.route_info_manager.delete_topic("T3")        # while the work runs elsewhere
    assert later.run().body == inline                 # the list as of the request, same bytes
    # not kept (the tables changed meanwhile); the next one is, until the tables change
    later = ask()
    assert isinstance(later, Pending)
    fresh = later.run().body
    assert b'"T3"' not in fresh
    held = ask()
    assert not isinstance(held, Pending) and held.body == fresh
    unknown = proc.process(RemotingCommand.request(224, {"cluster": "nope"}, None, opaque=6,
                                                   version=479), None, 1000, offload=True)
    assert not isinstance(unknown, Pending) and unknown.body == call(proc, 224, {"cluster": "nope"}).body


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_53], ids=lambda p: p.name)
def test_a_group_joining_another_cluster_is_in_that_clusters_topic_list_at_once(tmp_path,
                                                                               profile):
    """broker-a's group, known in C, registers again naming cluster C2: it joins C2's set of
    broker names, nothing else changes (same group, same topics), and GET_TOPICS_BY_CLUSTER C2
    lists its topics next (Java walks the sets each time); a list kept from before the join
    (the route versions did not move) is not answered."""
    from processorutil import call, make, register
    proc = make(tmp_path, profile)
    assert register(proc, name="broker-x", addr="127.0.0.1:20911", topics=("X1", "X2"),
                    clusterName="C2").code == 0
    assert register(proc, topics=("A1", "A2")).code == 0
    topics = lambda cluster: json.loads(call(proc, 224, {"cluster": cluster}).body)["topicList"]
    assert (sorted(topics("C2")), sorted(topics("C"))) == (["X1", "X2"], ["A1", "A2"])
    assert register(proc, topics=("A1", "A2"), clusterName="C2").code == 0
    assert sorted(topics("C2")) == ["A1", "A2", "X1", "X2"]
