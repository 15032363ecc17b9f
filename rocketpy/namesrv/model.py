"""NameServer state layer: the records of the route tables (Java ``QueueData``, ``BrokerData``,
``BrokerLiveInfo``, ``DataVersion``, ``TopicConfig``, ``RegisterBrokerResult``,
``UnRegisterBrokerRequestHeader``, ``TopicRouteData``, ``TopicQueueMappingInfo``), and
:class:`Registration`, one REGISTER_BROKER as the route tables take it.

Plain slotted dataclasses with Python names, so the tables do not depend on how a body was
encoded; the :class:`~rocketpy.namesrv.policy.WireShape` turns them into the codec's bodies.
What a route answer is made of is frozen: the tables replace a record instead of changing it, so
a route snapshot can never change under an answer built from it, and a decoded registration
handed over twice is the same value both times."""
from dataclasses import dataclass, field

__all__ = ["PERM_PRIORITY", "PERM_READ", "PERM_WRITE", "PERM_INHERIT", "MASTER_ID",
           "DEFAULT_BROKER_TIMEOUT_MS", "DataVersion", "TopicConfig", "TopicConfigWrapper",
           "QueueData", "BrokerData", "BrokerLiveInfo", "RegisterBrokerResult", "Registration",
           "UnRegisterBrokerRequest", "MappingInfo", "TopicRouteData", "MinBrokerIdChange",
           "FLAG_UNIT",
           "FLAG_UNIT_SUB", "SYNC_BROKER_MEMBER_GROUP_PREFIX", "ORDER_TOPIC_CONFIG",
           "SYSTEM_TOPIC_PREFIX", "SYSTEM_TOPICS", "is_system_topic"]

# PermName
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
# TopicSysFlag
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2
#: MixAll.MASTER_ID
MASTER_ID = 0
#: RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
DEFAULT_BROKER_TIMEOUT_MS = 120_000
#: TopicValidator.SYSTEM_TOPIC_PREFIX
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX
SYNC_BROKER_MEMBER_GROUP_PREFIX = SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"
#: TopicValidator.SYSTEM_TOPIC_SET (5.3.3): the auto-create template topic, schedule, benchmark,
#: transaction, trace, self-test, offset-moved and RocksDB checkpoint topics.
SYSTEM_TOPICS = frozenset((
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"))
#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def is_system_topic(topic):
    """``TopicValidator.isSystemTopic``."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version; Java's ``equals`` compares all three fields."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The part of a broker's ``TopicConfig`` the NameServer keeps."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """``TopicConfigSerializeWrapper`` (+ the static-topic ``topicQueueMappingInfoMap`` of
    ``TopicConfigAndMappingSerializeWrapper``: topic -> the codec's ``TopicQueueMappingInfo``).
    A decoded registration: never changed once made, so the same object means the same tables."""

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_config_table: "dict[str, TopicConfig]" = field(default_factory=dict)
    topic_queue_mapping_info_map: "dict[str, dict]" = field(default_factory=dict)
    #: a digest of the body it was decoded from ("nothing changed" compares it, never the
    #: object's identity); None for one made in code, which is always walked
    digest: "bytes | None" = field(default=None, compare=False)
    #: the topics of ``topic_config_table`` the tables lacked, found off the reactor (a
    #: :class:`~rocketpy.namesrv.shapes.FreshTopics`), or None
    fresh: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker group; ``broker_addrs`` is replaced, never changed in place."""

    cluster: str
    broker_name: str
    broker_addrs: "dict[int, str]" = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: "str | None" = None


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """One live broker address. ``generation`` changes on every registration, so a queued
    channel-caused unregistration can tell it is older than the broker's latest registration;
    a heartbeat replaces the record (its time moved on), keeping the generation."""

    last_update_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    channel_id: "int | None"
    ha_server_addr: "str | None"
    broker_name: str
    generation: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    ha_server_addr: "str | None" = None
    master_addr: "str | None" = None


@dataclass(frozen=True, slots=True)
class Registration:
    """One REGISTER_BROKER as the route tables take it (``RegisterBrokerRequestHeader``, its
    decoded body and where it came from), passed whole from the processor through the bounds
    and the release's policy to the writer. ``channel_id`` is the connection's id (never the
    connection); ``wrapper`` and ``filter_servers`` are the body's, None until it is read;
    ``zone_name``, ``timeout_millis`` and ``enable_acting_master`` are read only where the
    release has them."""

    cluster_name: "str | None"
    broker_addr: "str | None"
    broker_name: "str | None"
    broker_id: "int | None"
    ha_server_addr: "str | None" = None
    wrapper: "TopicConfigWrapper | None" = None
    filter_servers: "list[str] | None" = None
    channel_id: "int | None" = None
    now_ms: int = 0
    zone_name: "str | None" = None
    timeout_millis: "int | None" = None
    enable_acting_master: "bool | None" = None


@dataclass(frozen=True, slots=True)
class UnRegisterBrokerRequest:
    """``UnRegisterBrokerRequestHeader``, plus the channel that caused it (if one did).

    A request caused by a channel event (close, idle, exception, expiry) carries that channel's
    id and the live entry's generation; it is dropped when applied if the broker has since
    registered again (apache/rocketmq#11043). A broker's own UNREGISTER_BROKER carries neither.
    """

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    channel_id: "int | None" = None
    live_generation: "int | None" = None


@dataclass(frozen=True, slots=True)
class MappingInfo:
    """A static topic's ``TopicQueueMappingInfo`` as the route tables keep it: the seven fields
    a route answer writes, ``curr_id_map`` as ``((queue id, logic queue id), ...)`` in the
    order it was read (it fixes the ConcurrentHashMap's order within a bucket), or None. An
    immutable value, unlike the codec's bean (which also keeps what it did not know)."""

    bname: "str | None"
    curr_id_map: "tuple[tuple[int, int | None], ...] | None" = ()
    dirty: "bool | None" = False
    epoch: "int | None" = 0
    scope: "str | None" = "__global__"
    topic: "str | None" = None
    total_queues: "int | None" = 0

    @classmethod
    def of(cls, info):
        """The record of ``info`` (the codec's ``TopicQueueMappingInfo``, or one of these)."""
        if type(info) is cls:
            return info
        ids = info.curr_id_map
        return cls(info.bname, None if ids is None else tuple(ids.items()), info.dirty,
                   info.epoch, info.scope, info.topic, info.total_queues)

    def ids(self):
        """``currIdMap`` as a dict (None when it was null)."""
        return None if self.curr_id_map is None else dict(self.curr_id_map)


@dataclass(slots=True)
class TopicRouteData:
    """What ``pickupTopicRouteData`` returns; lists already in the Java iteration order."""

    queue_datas: "list[QueueData]"
    broker_datas: "list[BrokerData]"
    filter_server_table: "dict[str, list[str] | None]"
    topic_queue_mapping_by_broker: "dict | None" = None
    order_topic_conf: "str | None" = None


@dataclass(frozen=True, slots=True)
class MinBrokerIdChange:
    """A broker group's smallest brokerId changed (5.x ``notifyMinBrokerIdChanged``): who is
    told, and what. The route state reports it; the processor layer makes the request."""

    targets: "tuple[str, ...]"
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: "str | None" = None
    ha_broker_addr: "str | None" = None
