"""GET_TOPICS_BY_CLUSTER and GET_ALL_TOPIC_LIST on a large route table: time per answer, and the
straightforward per-broker walk (Java's) for comparison.

    PYTHONPATH=. python bench/topic_lists.py [brokers] [topics per broker]
"""
import sys
import time

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import DataVersion, Registration, TopicConfig, TopicConfigWrapper
from rocketpy.namesrv.profile import PROFILE_53


def build(brokers, per_broker):
    r = RouteInfoManager(NamesrvConfig(), PROFILE_53)
    for b in range(brokers):
        table = {f"T-{b}-{i}": TopicConfig(f"T-{b}-{i}", 8, 8, 6) for i in range(per_broker)}
        r.register_broker(Registration("C", f"10.0.{b // 250}.{b % 250}:10911", f"broker-{b}", 0,
                                       "ha", TopicConfigWrapper(DataVersion(1, 1000, 0), table, {}),
                                       None, b + 1, 0))
    return r


def walk(r, cluster):
    topics = r.topics_in_order()
    items = []
    for name in r.cluster_broker_names(cluster):
        items.extend(t for t in topics if name in r.topic_queue_table[t])
    return r.wire.topic_set(items)


def timed(label, call):
    start = time.perf_counter()
    result = call()
    print(f"{label:32s} {time.perf_counter() - start:8.3f} s")
    return result


def main():
    brokers = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    per_broker = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    r = build(brokers, per_broker)
    print(f"{brokers} brokers x {per_broker} topics ({len(r.topic_queue_table)} topics)")
    new = timed("get_topics_by_cluster (first)", lambda: r.get_topics_by_cluster("C"))
    timed("get_topics_by_cluster (again)", lambda: r.get_topics_by_cluster("C"))
    old = timed("per-broker walk (reference)", lambda: walk(r, "C"))
    assert new == old
    timed("get_all_topic_list (first)", r.get_all_topic_list)
    timed("get_all_topic_list (again)", r.get_all_topic_list)


if __name__ == "__main__":
    main()
