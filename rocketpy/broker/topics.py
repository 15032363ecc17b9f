"""Broker layer: a broker's topic table and its data version (Java ``TopicConfigManager``), as
much of it as registration needs. Pure: no Twisted; time is passed in (``now_ms``).

A genuine broker starts with its system topics (in the constructor's order; 5.x adds four) and
keeps them with every created topic in a ``ConcurrentHashMap<>(1024)``, whose iteration order
REGISTER_BROKER's JSON body follows. :attr:`TopicConfigManager.table` keeps that order
(:func:`~rocketpy.remoting.javahash.concurrent_hashmap_order`), which makes
:class:`~rocketpy.broker.outer_api.BrokerOuterAPI`'s frames byte-identical to a genuine
broker's. Every change moves the ``DataVersion`` on (``nextVersion``: counter + 1, timestamp =
now), which the NameServer compares to see whether a registration changed anything."""
from ..remoting.bodies import DataVersion, TopicConfig, TopicConfigAndMappingSerializeWrapper
from ..remoting.codes import MQVersion
from ..remoting.javahash import concurrent_hashmap_order

__all__ = ["TopicConfigManager", "system_topics", "TOPIC_TABLE_CAPACITY", "PERM_READ",
           "PERM_WRITE", "PERM_INHERIT"]

#: ``new ConcurrentHashMap<String, TopicConfig>(1024)``: the broker's topic table.
TOPIC_TABLE_CAPACITY = 1024

#: ``PermName``
PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4

#: queue counts of the fixed system topics (``SCHEDULE_TOPIC_QUEUE_NUM``, ``reviveQueueNum``,
#: ``defaultTopicQueueNums``, the benchmark topic's 1024)
_SCHEDULE_QUEUES, _REVIVE_QUEUES, _DEFAULT_QUEUES, _BENCHMARK_QUEUES = 18, 8, 8, 1024


def system_topics(cluster_name, broker_name, version=MQVersion.V5_3_3):
    """The ``TopicConfig`` s a genuine broker of ``version`` starts with (default broker
    settings: autoCreateTopicEnable, clusterTopicEnable, brokerTopicEnable on; no trace topic),
    in the order its constructor puts them."""
    rw = PERM_READ | PERM_WRITE

    def topic(name, queues=1, perm=rw):
        return TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                           perm=perm)
    topics = [
        topic("SELF_TEST_TOPIC"),
        topic("TBW102", _DEFAULT_QUEUES, PERM_INHERIT | rw),
        topic("BenchmarkTest", _BENCHMARK_QUEUES),
        topic(cluster_name, 16, PERM_INHERIT | rw),
        topic(broker_name, 1, PERM_INHERIT | rw),
        topic("OFFSET_MOVED_EVENT"),
        topic("SCHEDULE_TOPIC_XXXX", _SCHEDULE_QUEUES),
        topic(f"{cluster_name}_REPLY_TOPIC"),
    ]
    if version >= MQVersion.V5_0_0:
        topics += [
            topic(f"rmq_sys_REVIVE_LOG_{cluster_name}", _REVIVE_QUEUES),
            topic(f"rmq_sys_SYNC_BROKER_MEMBER_{broker_name}", 1, PERM_INHERIT),
            topic("RMQ_SYS_TRANS_HALF_TOPIC"),
            topic("RMQ_SYS_TRANS_OP_HALF_TOPIC"),
        ]
    return topics


class TopicConfigManager:
    """One broker's topics and ``DataVersion``: ``topics`` in creation order (after the system topics
    unless ``with_system_topics`` is false); ``version`` is the broker's ``MQVersion``, whose 4.x
    topics carry no ``attributes`` and DataVersion no ``stateVersion`` (applied when the body is
    written, :meth:`wrapper`)."""

    def __init__(self, cluster_name, broker_name, now_ms, topics=(), *,
                 version=MQVersion.V5_3_3, with_system_topics=True, data_version=None):
        self.version = version
        created = list(system_topics(cluster_name, broker_name, version)) if with_system_topics else []
        created += list(topics)
        self._created = {}               # name -> TopicConfig, in creation order
        for topic in created:
            self._created[topic.topic_name] = topic
        self._table = None
        self.data_version = data_version if data_version is not None else DataVersion(
            counter=0, state_version=0, timestamp=now_ms)

    @property
    def table(self):
        """``{name: TopicConfig}`` in the Java table's iteration order (a fresh dict)."""
        if self._table is None:
            order = concurrent_hashmap_order(self._created, TOPIC_TABLE_CAPACITY)
            self._table = {name: self._created[name] for name in order}
        return dict(self._table)

    def __len__(self):
        return len(self._created)

    def __contains__(self, name):
        return name in self._created

    def _next_version(self, now_ms):
        """``DataVersion.nextVersion``: counter + 1, timestamp = now."""
        self._table = None
        self.data_version = DataVersion(counter=self.data_version.counter + 1,
                                        state_version=self.data_version.state_version,
                                        timestamp=now_ms)

    def update_topic(self, topic, now_ms):
        """``updateTopicConfig``: create or replace ``topic``; the data version moves on."""
        self._created[topic.topic_name] = topic
        self._next_version(now_ms)

    def delete_topic(self, name, now_ms):
        """``deleteTopicConfig``: False when there is no such topic (nothing changes)."""
        if self._created.pop(name, None) is None:
            return False
        self._next_version(now_ms)
        return True

    def wrapper(self, now_ms):
        """What ``registerBrokerAll`` sends: the table and its DataVersion. A 5.x broker sends a
        ``TopicConfigAndMappingSerializeWrapper`` whose ``mappingDataVersion`` is built at that
        moment (counter 0, timestamp = now) and whose mapping tables are empty (no static
        topics); :meth:`JsonBean.for_version` reduces it to a 4.x broker's. Since 5.1.4
        ``registerBrokerAll`` sends a copy of the table, a default-sized ``ConcurrentHashMap``
        filled in the table's order, so the body follows that copy's order (5.3.3 captures)."""
        table = self.table
        if self.version >= MQVersion.V5_1_4:
            table = {name: table[name] for name in concurrent_hashmap_order(table)}
        wrapper = TopicConfigAndMappingSerializeWrapper(
            data_version=self.data_version, topic_config_table=table,
            mapping_data_version=DataVersion(counter=0, state_version=0, timestamp=now_ms))
        return wrapper if self.version >= MQVersion.V5_0_0 else wrapper.for_version(self.version)
