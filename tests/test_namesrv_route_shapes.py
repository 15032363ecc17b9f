"""Topics with one queue layout share one shape and one encoded route body (issue 21).

Structural assertions, not timings: the objects the tables hold and the bytes the processor
answers with. An orderTopicConf topic is encoded for itself; a static-topic mapping gives a
topic a route of its own."""
import gc

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import (DataVersion, MappingInfo, Registration, TopicConfig,
                                    TopicConfigWrapper, UnRegisterBrokerRequest)
from rocketpy.namesrv.profile import PROFILE_53
from rocketpy.remoting import fastjson
from rocketpy.remoting.bodies import TopicQueueMappingInfo
from processorutil import call, make, register

TOPICS = [f"T{i}" for i in range(200)]


def wrapper(topics, counter=1, queues=8, mapping=None):
    return TopicConfigWrapper(DataVersion(counter, 1, 0),
                              {t: TopicConfig(t, queues, queues, 6) for t in topics}, mapping or {})


def cluster(brokers=3, topics=TOPICS):
    rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
    for i in range(brokers):
        rim.register_broker(Registration(
            "C", f"10.0.0.{i}:10911", f"b{i}", 0, "ha", wrapper(topics), None, i + 1, 0))
    return rim


def test_topics_with_one_layout_share_one_shape():
    rim = cluster()
    shapes = {id(rim.topic_queue_table[t]) for t in TOPICS}
    assert len(shapes) == 1 and len(rim.shapes) == 1      # the 1- and 2-broker layouts are gone
    assert rim.queue_data_count == 3 * len(TOPICS)
    shape = rim.topic_queue_table["T0"]
    assert list(shape) == ["b0", "b1", "b2"] and sorted(rim.shapes.members(shape)) == sorted(TOPICS)
    # one QueueData object per broker for every topic
    assert len({id(rim.topic_queue_table[t]["b1"]) for t in TOPICS}) == 1
    # a topic that changes layout moves to another shape; the others stay
    rim.register_broker(Registration(   # (5.x refuses a first registration of one topic)
        "C", "10.0.0.9:10911", "b9", 0, "ha", wrapper(["T5", "X"]), None, 9, 0))
    assert list(rim.topic_queue_table["T5"]) == ["b0", "b1", "b2", "b9"]
    assert rim.topic_queue_table["T6"] is shape and "T5" not in rim.shapes.members(shape)
    assert sorted(rim.topics_of_broker("b9")) == ["T5", "X"] and len(rim.shapes) == 3


def test_a_layout_leaves_when_its_last_topic_does():
    rim = cluster(brokers=2, topics=["A", "B"])
    rim.delete_topic("A")
    rim.delete_topic("B")
    assert len(rim.shapes) == 0 and rim.shapes.topics_of_broker("b0") == []


def test_a_brokers_topic_count_is_its_topics_counted_per_layout():
    rim = cluster()
    rim.register_broker(Registration(
        "C", "10.0.0.9:10911", "b9", 0, "ha", wrapper(["T5", "X"], queues=4), None, 9, 0))
    rim.delete_topic("T7")
    rim.unregister_brokers([UnRegisterBrokerRequest("C", "10.0.0.2:10911", "b2", 0)])
    for name in ("b0", "b1", "b2", "b9", "nobody"):
        expected = sum(name in queues for queues in rim.topic_queue_table.values())
        assert rim.topic_count_of_broker(name) == len(rim.topics_of_broker(name)) == expected
    assert rim.topic_count_of_broker("b9") == 2 and rim.topic_count_of_broker("b0") == 199


def test_one_encoded_body_per_layout_and_dialect(tmp_path):
    proc = make(tmp_path)
    for i in range(2):
        register(proc, name=f"broker-{i}", addr=f"127.0.0.1:{10911 + i}",
                 topics=("T1", "T2", "T3"))
    rim = proc.route_info_manager
    bodies = {t: call(proc, 105, {"topic": t}).body for t in ("T1", "T2", "T3")}
    assert bodies["T1"] == bodies["T2"] == bodies["T3"]
    snapshots = {id(rim.route_snapshot(t)) for t in ("T1", "T2", "T3")}
    assert len(snapshots) == 1
    kept = rim.route_snapshot("T1")._bodies
    assert len(kept) == 1 and next(iter(kept.values())) is rim.route_snapshot("T3")._bodies[True]
    legacy = call(proc, 105, {"topic": "T2"}, version=63).body
    assert legacy != bodies["T2"] and kept[False] == legacy and len(kept) == 2


def test_an_order_topic_conf_topic_is_encoded_for_itself(tmp_path):
    proc = make(tmp_path)
    register(proc, topics=("T1", "T2", "T3"))
    assert call(proc, 318, body=b"orderMessageEnable=true\n").code == 0
    call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:8"})
    own = call(proc, 105, {"topic": "T1"}).body
    shared = call(proc, 105, {"topic": "T2"}).body
    assert fastjson.loads(own)["orderTopicConf"] == "broker-a:8"
    assert b"orderTopicConf" not in shared and shared == call(proc, 105, {"topic": "T3"}).body
    rim = proc.route_info_manager
    assert rim.route_snapshot("T1") is rim.route_snapshot("T2")
    assert list(rim.route_snapshot("T2")._bodies.values()) == [shared]


def test_a_mapped_topic_has_a_route_of_its_own():
    rim = cluster(brokers=1, topics=["M", "P"])
    info = TopicQueueMappingInfo(bname="b0", curr_id_map={0: 0}, epoch=1, topic="M", total_queues=1)
    before = rim.route_version("P")
    rim.register_broker(Registration("C", "10.0.0.0:10911", "b0", 0, "ha",
                                     wrapper(["M", "P"], 2, mapping={"M": info}), None, 1, 1))
    assert rim.topic_queue_table["M"] is rim.topic_queue_table["P"]
    assert rim.route_snapshot("M") is not rim.route_snapshot("P")
    assert rim.route_snapshot("M").route.topic_queue_mapping_by_broker == {
        "b0": MappingInfo.of(info)}
    assert rim.route_snapshot("P").route.topic_queue_mapping_by_broker is None
    assert rim.route_version("P") == before and rim.route_version("M") != before


def test_an_equal_table_in_a_new_object_changes_nothing():
    """"Nothing changed" is the content, not the object: a re-registration handing over an
    equal topic table in a new object moves no version and rebuilds no snapshot, and the
    tables keep no decoded registration alive (its records would cost more than the route)."""
    rim = cluster(brokers=1)
    snapshot = rim.route_snapshot("T1")
    generation = rim.snapshots.generation
    again = wrapper(TOPICS)
    rim.register_broker(Registration("C", "10.0.0.0:10911", "b0", 0, "ha", again, None, 1, 30_000))
    assert rim.route_snapshot("T1") is snapshot and rim.snapshots.generation == generation
    table = again.topic_config_table
    assert [r for r in gc.get_referrers(table) if r is not again] == []


def test_remembered_transitions_stay_bounded_while_layouts_live():
    """Every registration walk brings new records; two topics alternating between two layouts
    that other topics keep alive must not make the transition memo grow with the walks."""
    rim = cluster(brokers=1, topics=TOPICS)
    for counter in range(2, 6000):
        perm = 6 if counter % 2 else 4
        table = {t: TopicConfig(t, 8, 8, perm) for t in TOPICS[:2]}
        table["T2"] = TopicConfig("T2", 8, 8, 4)      # keeps the second layout alive
        rim.register_broker(Registration("C", "10.0.0.0:10911", "b0", 0, "ha",
                            TopicConfigWrapper(DataVersion(counter, 1, 0), table), None,
                            1, counter))
    assert len(rim.shapes) <= 3 and len(rim.shapes._moves) <= 4 * len(rim.shapes) + 4096
