"""Wire codec layer: the protocol catalogue -- one declaration per request code, every table
about codes derived from it.

In AMP's manner (``twisted/protocols/amp.py``: a ``Command`` states its arguments, response and
errors once, ``Command.responder`` binds a handler to it), each :class:`Request` states what one
code is: its number and name (Java ``RequestCode``), the :class:`Release` tags that define it,
the typed header of the request and of its answer (:mod:`rocketpy.remoting.headers`, by class
name), its bodies (:mod:`rocketpy.remoting.bodies`), which NameServer and controller releases
serve it, who may send it (:class:`Access`), whether only the controller's leader answers it.
What used to be a table of its own is read from here: :class:`RequestCode`, the header maps,
the release gates of the NameServer's handlers, the ACL and broker-access code sets, the
controller's leader and administrative codes, the metrics' code labels and
``docs/request-codes.md``. :func:`responder` binds a handler to a declaration and
:func:`bind` builds a processor's handler table, refusing at start a served code without a
handler and a handler without a declaration.

Data only, stdlib only: the capture decoder imports the code names without the header or body
classes (each module that owns classes resolves the names it is given, and fails at import on a
name it lacks).

Sources. Codes, names and tags: ``RequestCode.java`` of the apache/rocketmq tags
4.0.0-incubating to 5.3.3 (``remoting/.../protocol/RequestCode.java``; a declaration without
``releases`` is in 4.9.8 and every later tag read, its first tag not recorded); the newest
apache source read, ``develop`` at 5.3.4-SNAPSHOT (2025-09-19), defines no code 5.3.3 lacks.
The codes of later releases (:data:`_JAVA_55`) are those of rocketmq-rust's inventory of Java
5.5.0's ``RequestCode.java`` (``scripts/fixtures/java-5.5-core-inventory.json``,
mxsm/rocketmq-rust dc569df): the Lite-topic codes 200070-200079 (RIP-83, apache/rocketmq#9800,
Lite Mode in 5.5.0's release notes, apache/rocketmq#10238), SWITCH_TIMER_ENGINE and the batch
deletions 5001-5003 (apache/rocketmq#10448); that 5.4.0 lacks them is not proven here, so they
are ``since`` 5.5.0, the first tag the sources show them in. Which releases serve a code:
``DefaultRequestProcessor``/``ClientRequestProcessor`` (NameServer) and
``ControllerRequestProcessor`` (controller) of those tags."""
from dataclasses import dataclass, field
from enum import Enum, IntEnum, IntFlag

__all__ = ["Release", "Releases", "since", "only", "ALWAYS", "Access", "ANY", "BROKER", "ADMIN",
           "Request", "CATALOGUE", "RequestCode", "NAMESRV", "CONTROLLER", "PROPERTIES_TEXT",
           "BROKER_NAMES", "declaration", "served", "codes_with", "resolve", "responder",
           "Binding", "bind", "CatalogueError"]


class CatalogueError(Exception):
    """A declaration, or a processor's handlers, that cannot be used: raised at import or when
    the processor is built, never while serving."""


def _key(tag):
    number, _, pre = tag.partition("-")
    rank = {"PREVIEW": 0, "ALPHA": 1}.get(pre, 2)   # 5.0.0-PREVIEW < 5.0.0-ALPHA < 5.0.0
    return tuple(int(part) for part in number.split(".")) + (rank,)


class Release(Enum):
    """An Apache RocketMQ release (its ``rocketmq-all-*`` tag), ordered by version: 4.9.8 <
    5.0.0-PREVIEW < 5.0.0 < 5.3.3. A NameServer profile imitates one; a declaration's releases
    are ranges of them."""

    V4_0_0_INCUBATING = "4.0.0-incubating"
    V4_1_0_INCUBATING = "4.1.0-incubating"
    V4_2_0 = "4.2.0"
    V4_3_0 = "4.3.0"
    V4_3_1 = "4.3.1"
    V4_3_2 = "4.3.2"
    V4_4_0 = "4.4.0"
    V4_5_0 = "4.5.0"
    V4_5_1 = "4.5.1"
    V4_5_2 = "4.5.2"
    V4_6_0 = "4.6.0"
    V4_6_1 = "4.6.1"
    V4_7_0 = "4.7.0"
    V4_7_1 = "4.7.1"
    V4_8_0 = "4.8.0"
    V4_9_0 = "4.9.0"
    V4_9_1 = "4.9.1"
    V4_9_2 = "4.9.2"
    V4_9_3 = "4.9.3"
    V4_9_4 = "4.9.4"
    V4_9_5 = "4.9.5"
    V4_9_6 = "4.9.6"
    V4_9_7 = "4.9.7"
    V4_9_8 = "4.9.8"
    V5_0_0_PREVIEW = "5.0.0-PREVIEW"
    V5_0_0_ALPHA = "5.0.0-ALPHA"
    V5_0_0 = "5.0.0"
    V5_1_0 = "5.1.0"
    V5_1_1 = "5.1.1"
    V5_1_2 = "5.1.2"
    V5_1_3 = "5.1.3"
    V5_1_4 = "5.1.4"
    V5_2_0 = "5.2.0"
    V5_3_0 = "5.3.0"
    V5_3_1 = "5.3.1"
    V5_3_2 = "5.3.2"
    V5_3_3 = "5.3.3"
    V5_4_0 = "5.4.0"
    V5_5_0 = "5.5.0"

    @property
    def line(self):
        """``"5.3"`` of 5.3.3: the release line a profile is named by."""
        return ".".join(self.value.split(".")[:2])

    @property
    def version_name(self):
        """The ``MQVersion.Version`` name it speaks (``"V5_3_3"``), pre-release tags as their
        release."""
        return "V" + self.value.partition("-")[0].replace(".", "_")

    @classmethod
    def of(cls, text):
        """The release a person names: ``"5.3.3"``, ``"V5_3_3"`` or ``"rocketmq-all-5.3.3"``."""
        text = str(text).strip().removeprefix("rocketmq-all-")
        if text.startswith("V"):
            text = text[1:].replace("_", ".")
        for member in cls:
            if member.value.lower() == text.lower() or member.name == "V" + text.replace(
                    ".", "_").replace("-", "_").upper():
                return member
        raise ValueError(f"unknown RocketMQ release {text!r}")

    def __lt__(self, other):
        if other.__class__ is not Release:
            return NotImplemented
        return _key(self.value) < _key(other.value)

    def __le__(self, other):
        return self == other or self < other

    def __gt__(self, other):
        if other.__class__ is not Release:
            return NotImplemented
        return other < self

    def __ge__(self, other):
        return self == other or self > other


@dataclass(frozen=True)
class Releases:
    """Some releases: ranges ``(first, last)`` of tags, both included, None open-ended
    (:func:`since`, :func:`only`, ``|`` for a union)."""

    ranges: tuple

    def __contains__(self, release):
        return any((first is None or first <= release) and (last is None or release <= last)
                   for first, last in self.ranges)

    def __or__(self, other):
        return Releases(self.ranges + other.ranges)

    def __str__(self):
        """As the docs write it: ``5.1.0+``, ``4.9.8, 5.2.0+``, ``4.5.2 - 5.3.2``."""
        parts = []
        for first, last in self.ranges:
            if first is None and last is None:
                parts.append("every release")
            elif last is None:
                parts.append(f"{first.value}+")
            elif first is None:
                parts.append(f"up to {last.value}")
            elif first == last:
                parts.append(first.value)
            else:
                parts.append(f"{first.value} - {last.value}")
        return ", ".join(parts)


def since(first):
    """``first`` and every later release."""
    return Releases(((first, None),))


def only(first, last):
    """The releases from ``first`` to ``last``, both included."""
    return Releases(((first, last),))


#: every release a declaration covers (4.9.8 and every later tag read; its first not recorded)
ALWAYS = Releases(((None, None),))


class Access(IntFlag):
    """Who may send a request, for the guards (rocketpy's additions; Java takes any request from
    anyone): ``ANY`` (clients' reads), ``BROKER`` (``brokerAllowNetworks``, broker identity
    binding), ``ADMIN`` (``adminAllowNetworks``, ACL); both for a broker request that changes
    what operators own (REGISTER_TOPIC_IN_NAMESRV)."""

    ANY = 0
    BROKER = 1
    ADMIN = 2


#: the servers a code may be served by (a :class:`Request`'s attribute of that name)
NAMESRV, CONTROLLER = "namesrv", "controller"
#: bodies that are no bean: a ``java.util.Properties`` text (the config requests), a JSON list
#: of broker names (CONTROLLER_GET_SYNC_STATE_DATA)
PROPERTIES_TEXT, BROKER_NAMES = "properties text", "broker names"


@dataclass(frozen=True)
class Request:
    """One request code: its facts, each stated once (see the module docstring).

    ``request``/``reply``: the class names (in :mod:`rocketpy.remoting.headers`) of the custom
    header of the request and of its successful answer; ``body``/``reply_body``: a bean's class
    name (in :mod:`rocketpy.remoting.bodies`) or :data:`PROPERTIES_TEXT` / :data:`BROKER_NAMES`;
    ``namesrv``/``controller``: the releases whose NameServer / controller serve it (None: not
    served there); ``access``: required when served; ``leader_only``: a controller that is not
    the leader answers CONTROLLER_NOT_LEADER (the requests Java's ``DLedgerController`` queues
    as events); ``admin_when``: the request header's attribute that, when true, makes a broker
    request administrative (a designated CONTROLLER_ELECT_MASTER); ``names_broker``: its header
    names a broker by ``clusterName``, ``brokerName``, ``brokerId`` and ``brokerAddr`` (the
    NameServer's identity binding checks them); ``alias_of``: a second name for the code."""

    name: str
    code: int
    releases: Releases = ALWAYS
    request: "str | None" = None
    reply: "str | None" = None
    body: "str | None" = None
    reply_body: "str | None" = None
    namesrv: "Releases | None" = None
    controller: "Releases | None" = None
    access: "Access | None" = None
    leader_only: bool = False
    admin_when: "str | None" = None
    names_broker: bool = False
    alias_of: "str | None" = None
    source: "str | None" = field(default=None, compare=False)

    def served_by(self, server, release=None):
        """Whether ``server`` (:data:`NAMESRV`, :data:`CONTROLLER`) serves it, in ``release``
        (None: in any)."""
        releases = getattr(self, server)
        return releases is not None and (release is None or release in releases)

    @property
    def administrative(self):
        """An operator's request (the ACL's and ``adminAllowNetworks``'s), always or by its
        header."""
        return bool(self.access and self.access & Access.ADMIN) or self.admin_when is not None


R = Release
ANY, BROKER, ADMIN = Access.ANY, Access.BROKER, Access.ADMIN
_PREVIEW_ONLY = only(R.V5_0_0_PREVIEW, R.V5_0_0_PREVIEW)   # the logical-queue codes
_JAVA_55 = ("Java 5.5.0's RequestCode.java, as rocketmq-rust inventories it "
            "(scripts/fixtures/java-5.5-core-inventory.json, mxsm/rocketmq-rust dc569df)")

#: Every request code of every release read, by value (aliases after their code); the
#: NameServer's and the controller's serve what their ``namesrv``/``controller`` say.
CATALOGUE = (
    Request("SEND_MESSAGE", 10),
    Request("PULL_MESSAGE", 11),
    Request("QUERY_MESSAGE", 12),
    Request("QUERY_BROKER_OFFSET", 13),
    Request("QUERY_CONSUMER_OFFSET", 14),
    Request("UPDATE_CONSUMER_OFFSET", 15),
    Request("UPDATE_AND_CREATE_TOPIC", 17),
    Request("UPDATE_AND_CREATE_TOPIC_LIST", 18, since(R.V5_3_0)),
    Request("GET_ALL_TOPIC_CONFIG", 21),
    Request("GET_TOPIC_CONFIG_LIST", 22),
    Request("GET_TOPIC_NAME_LIST", 23),
    Request("UPDATE_BROKER_CONFIG", 25),
    Request("GET_BROKER_CONFIG", 26),
    Request("TRIGGER_DELETE_FILES", 27),
    Request("GET_BROKER_RUNTIME_INFO", 28),
    Request("SEARCH_OFFSET_BY_TIMESTAMP", 29),
    Request("GET_MAX_OFFSET", 30),
    Request("GET_MIN_OFFSET", 31),
    Request("GET_EARLIEST_MSG_STORETIME", 32),
    Request("VIEW_MESSAGE_BY_ID", 33),
    Request("HEART_BEAT", 34),
    Request("UNREGISTER_CLIENT", 35),
    Request("CONSUMER_SEND_MSG_BACK", 36),
    Request("END_TRANSACTION", 37),
    Request("GET_CONSUMER_LIST_BY_GROUP", 38),
    Request("CHECK_TRANSACTION_STATE", 39),
    Request("NOTIFY_CONSUMER_IDS_CHANGED", 40),
    Request("LOCK_BATCH_MQ", 41),
    Request("UNLOCK_BATCH_MQ", 42),
    Request("GET_ALL_CONSUMER_OFFSET", 43),
    Request("GET_ALL_DELAY_OFFSET", 45),
    Request("CHECK_CLIENT_CONFIG", 46),
    Request("GET_CLIENT_CONFIG", 47, since(R.V5_0_0),
            body="GetRemoteClientConfigBody", reply_body=PROPERTIES_TEXT,
            namesrv=only(R.V5_0_0, R.V5_1_3), access=ANY),
    Request("UPDATE_AND_CREATE_ACL_CONFIG", 50, only(R.V4_5_2, R.V5_3_2)),
    Request("DELETE_ACL_CONFIG", 51, only(R.V4_5_2, R.V5_3_2)),
    Request("GET_BROKER_CLUSTER_ACL_INFO", 52, only(R.V4_5_2, R.V5_3_2)),
    Request("UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", 53, only(R.V4_5_2, R.V5_3_2)),
    Request("GET_BROKER_CLUSTER_ACL_CONFIG", 54,
            only(R.V4_6_0, R.V4_9_7) | only(R.V5_0_0_PREVIEW, R.V5_3_2)),
    Request("GET_TIMER_CHECK_POINT", 60, since(R.V5_0_0)),
    Request("GET_TIMER_METRICS", 61, since(R.V5_0_0)),
    Request("PUT_KV_CONFIG", 100,
            request="PutKVConfigRequestHeader", namesrv=ALWAYS, access=ADMIN),
    Request("GET_KV_CONFIG", 101,
            request="GetKVConfigRequestHeader", reply="GetKVConfigResponseHeader",
            namesrv=ALWAYS, access=ANY),
    Request("DELETE_KV_CONFIG", 102,
            request="DeleteKVConfigRequestHeader", namesrv=ALWAYS, access=ADMIN),
    Request("REGISTER_BROKER", 103,
            request="RegisterBrokerRequestHeader", reply="RegisterBrokerResponseHeader",
            body="RegisterBrokerBody", reply_body="KVTable", namesrv=ALWAYS, access=BROKER,
            names_broker=True),
    Request("UNREGISTER_BROKER", 104,
            request="UnRegisterBrokerRequestHeader", namesrv=ALWAYS, access=BROKER,
            names_broker=True),
    Request("GET_ROUTEINFO_BY_TOPIC", 105,
            request="GetRouteInfoRequestHeader", reply_body="TopicRouteData",
            namesrv=ALWAYS, access=ANY),
    Request("GET_ROUTEINTO_BY_TOPIC", 105, only(R.V4_0_0_INCUBATING, R.V4_7_0),
            alias_of="GET_ROUTEINFO_BY_TOPIC"),
    Request("GET_BROKER_CLUSTER_INFO", 106,
            reply_body="ClusterInfo", namesrv=ALWAYS, access=ANY),
    Request("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", 200),
    Request("GET_ALL_SUBSCRIPTIONGROUP_CONFIG", 201),
    Request("GET_TOPIC_STATS_INFO", 202),
    Request("GET_CONSUMER_CONNECTION_LIST", 203),
    Request("GET_PRODUCER_CONNECTION_LIST", 204),
    Request("WIPE_WRITE_PERM_OF_BROKER", 205,
            request="WipeWritePermOfBrokerRequestHeader",
            reply="WipeWritePermOfBrokerResponseHeader", namesrv=ALWAYS, access=ADMIN),
    Request("GET_ALL_TOPIC_LIST_FROM_NAMESERVER", 206,
            reply_body="TopicList", namesrv=ALWAYS, access=ANY),
    Request("DELETE_SUBSCRIPTIONGROUP", 207),
    Request("GET_CONSUME_STATS", 208),
    Request("SUSPEND_CONSUMER", 209),
    Request("RESUME_CONSUMER", 210),
    Request("RESET_CONSUMER_OFFSET_IN_CONSUMER", 211),
    Request("RESET_CONSUMER_OFFSET_IN_BROKER", 212),
    Request("ADJUST_CONSUMER_THREAD_POOL", 213),
    Request("WHO_CONSUME_THE_MESSAGE", 214),
    Request("DELETE_TOPIC_IN_BROKER", 215,
            request="DeleteTopicRequestHeader"),
    Request("DELETE_TOPIC_IN_NAMESRV", 216,
            request="DeleteTopicFromNamesrvRequestHeader", namesrv=ALWAYS,
            access=ADMIN),
    Request("REGISTER_TOPIC_IN_NAMESRV", 217, since(R.V5_0_0),
            request="RegisterTopicRequestHeader", body="TopicRouteData",
            namesrv=since(R.V5_0_0), access=BROKER | ADMIN),
    Request("GET_KVLIST_BY_NAMESPACE", 219,
            request="GetKVListByNamespaceRequestHeader", reply_body="KVTable",
            namesrv=ALWAYS, access=ANY),
    Request("RESET_CONSUMER_CLIENT_OFFSET", 220),
    Request("GET_CONSUMER_STATUS_FROM_CLIENT", 221),
    Request("INVOKE_BROKER_TO_RESET_OFFSET", 222),
    Request("INVOKE_BROKER_TO_GET_CONSUMER_STATUS", 223),
    Request("GET_TOPICS_BY_CLUSTER", 224,
            request="GetTopicsByClusterRequestHeader", reply_body="TopicList",
            namesrv=ALWAYS, access=ANY),
    Request("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST", 225, since(R.V5_3_1)),
    Request("QUERY_TOPIC_CONSUME_BY_WHO", 300,
            request="QueryTopicConsumeByWhoRequestHeader"),
    Request("REGISTER_FILTER_SERVER", 301),
    Request("REGISTER_MESSAGE_FILTER_CLASS", 302),
    Request("QUERY_CONSUME_TIME_SPAN", 303),
    Request("GET_SYSTEM_TOPIC_LIST_FROM_NS", 304,
            reply_body="TopicList", namesrv=ALWAYS, access=ANY),
    Request("GET_SYSTEM_TOPIC_LIST_FROM_BROKER", 305),
    Request("CLEAN_EXPIRED_CONSUMEQUEUE", 306),
    Request("GET_CONSUMER_RUNNING_INFO", 307),
    Request("QUERY_CORRECTION_OFFSET", 308),
    Request("CONSUME_MESSAGE_DIRECTLY", 309),
    Request("SEND_MESSAGE_V2", 310),
    Request("GET_UNIT_TOPIC_LIST", 311,
            reply_body="TopicList", namesrv=ALWAYS, access=ANY),
    Request("GET_HAS_UNIT_SUB_TOPIC_LIST", 312,
            reply_body="TopicList", namesrv=ALWAYS, access=ANY),
    Request("GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", 313,
            reply_body="TopicList", namesrv=ALWAYS,
            access=ANY),
    Request("CLONE_GROUP_OFFSET", 314),
    Request("VIEW_BROKER_STATS_DATA", 315),
    Request("CLEAN_UNUSED_TOPIC", 316),
    Request("GET_BROKER_CONSUME_STATS", 317),
    Request("UPDATE_NAMESRV_CONFIG", 318,
            body=PROPERTIES_TEXT, namesrv=ALWAYS, access=ADMIN),
    Request("GET_NAMESRV_CONFIG", 319,
            reply_body=PROPERTIES_TEXT, namesrv=ALWAYS, access=ANY),
    Request("SEND_BATCH_MESSAGE", 320),
    Request("QUERY_CONSUME_QUEUE", 321),
    Request("QUERY_DATA_VERSION", 322,
            request="QueryDataVersionRequestHeader",
            reply="QueryDataVersionResponseHeader", body="DataVersion", reply_body="DataVersion",
            namesrv=ALWAYS, access=BROKER, names_broker=True),
    Request("RESUME_CHECK_HALF_MESSAGE", 323),
    Request("SEND_REPLY_MESSAGE", 324),
    Request("SEND_REPLY_MESSAGE_V2", 325),
    Request("PUSH_REPLY_MESSAGE_TO_CLIENT", 326),
    Request("ADD_WRITE_PERM_OF_BROKER", 327,
            request="AddWritePermOfBrokerRequestHeader",
            reply="AddWritePermOfBrokerResponseHeader", namesrv=ALWAYS, access=ADMIN),
    Request("GET_ALL_PRODUCER_INFO", 328),
    Request("DELETE_EXPIRED_COMMITLOG", 329),
    Request("QUERY_TOPICS_BY_CONSUMER", 343, since(R.V5_0_0)),
    Request("QUERY_SUBSCRIPTION_BY_CONSUMER", 345, since(R.V5_0_0)),
    Request("GET_TOPIC_CONFIG", 351, since(R.V5_0_0)),
    Request("GET_SUBSCRIPTIONGROUP_CONFIG", 352, since(R.V5_0_0)),
    Request("UPDATE_AND_GET_GROUP_FORBIDDEN", 353, since(R.V5_0_0)),
    Request("CHECK_ROCKSDB_CQ_WRITE_PROGRESS", 354, since(R.V5_3_1)),
    Request("EXPORT_ROCKSDB_CONFIG_TO_JSON", 355, since(R.V5_3_2)),
    Request("LITE_PULL_MESSAGE", 361, since(R.V5_0_0)),
    Request("RECALL_MESSAGE", 370, since(R.V5_3_2)),
    Request("QUERY_ASSIGNMENT", 400, since(R.V5_0_0)),
    Request("SET_MESSAGE_REQUEST_MODE", 401, since(R.V5_0_0)),
    Request("GET_ALL_MESSAGE_REQUEST_MODE", 402, since(R.V5_0_0)),
    Request("UPDATE_TOPIC_LOGICAL_QUEUE_MAPPING", 411, _PREVIEW_ONLY),
    Request("QUERY_TOPIC_LOGICAL_QUEUE_MAPPING", 413, _PREVIEW_ONLY),
    Request("SEAL_TOPIC_LOGICAL_QUEUE", 414, _PREVIEW_ONLY),
    Request("REUSE_TOPIC_LOGICAL_QUEUE", 415, _PREVIEW_ONLY),
    Request("CREATE_MESSAGE_QUEUE_FOR_LOGICAL_QUEUE", 416, _PREVIEW_ONLY),
    Request("MIGRATE_TOPIC_LOGICAL_QUEUE_PREPARE", 417, _PREVIEW_ONLY),
    Request("MIGRATE_TOPIC_LOGICAL_QUEUE_COMMIT", 418, _PREVIEW_ONLY),
    Request("MIGRATE_TOPIC_LOGICAL_QUEUE_NOTIFY", 419, _PREVIEW_ONLY),
    Request("DELETE_TOPIC_LOGICAL_QUEUE_MAPPING", 422, _PREVIEW_ONLY),
    Request("UPDATE_AND_CREATE_STATIC_TOPIC", 513, since(R.V5_0_0)),
    Request("GET_BROKER_MEMBER_GROUP", 901, since(R.V5_0_0),
            request="GetBrokerMemberGroupRequestHeader",
            reply_body="GetBrokerMemberGroupResponseBody", namesrv=since(R.V5_0_0), access=ANY),
    Request("ADD_BROKER", 902, since(R.V5_0_0)),
    Request("REMOVE_BROKER", 903, since(R.V5_0_0)),
    Request("BROKER_HEARTBEAT", 904, since(R.V5_0_0),
            request="BrokerHeartbeatRequestHeader", namesrv=since(R.V5_0_0),
            controller=since(R.V5_0_0), access=BROKER, names_broker=True),
    Request("NOTIFY_MIN_BROKER_ID_CHANGE", 905, since(R.V5_0_0),
            request="NotifyMinBrokerIdChangeRequestHeader"),
    Request("EXCHANGE_BROKER_HA_INFO", 906, since(R.V5_0_0)),
    Request("GET_BROKER_HA_STATUS", 907, since(R.V5_0_0)),
    Request("RESET_MASTER_FLUSH_OFFSET", 908, since(R.V5_0_0)),
    Request("CONTROLLER_ALTER_SYNC_STATE_SET", 1001, since(R.V5_0_0),
            request="AlterSyncStateSetRequestHeader",
            reply="AlterSyncStateSetResponseHeader", body="SyncStateSet", reply_body="SyncStateSet",
            controller=since(R.V5_0_0), access=BROKER, leader_only=True),
    Request("CONTROLLER_ELECT_MASTER", 1002, since(R.V5_0_0),
            request="ElectMasterRequestHeader", reply="ElectMasterResponseHeader",
            reply_body="ElectMasterResponseBody", controller=since(R.V5_0_0), access=BROKER,
            admin_when="designate_elect", leader_only=True),
    Request("CONTROLLER_REGISTER_BROKER", 1003, since(R.V5_0_0),
            request="RegisterBrokerToControllerRequestHeader",
            reply="RegisterBrokerToControllerResponseHeader", reply_body="SyncStateSet",
            controller=since(R.V5_0_0), access=BROKER, leader_only=True),
    Request("CONTROLLER_GET_REPLICA_INFO", 1004, since(R.V5_0_0),
            request="GetReplicaInfoRequestHeader",
            reply="GetReplicaInfoResponseHeader", reply_body="SyncStateSet",
            controller=since(R.V5_0_0), access=ANY, leader_only=True),
    Request("CONTROLLER_GET_METADATA_INFO", 1005, since(R.V5_0_0),
            reply="GetMetaDataResponseHeader", controller=since(R.V5_0_0),
            access=ANY),
    Request("CONTROLLER_GET_SYNC_STATE_DATA", 1006, since(R.V5_0_0),
            body=BROKER_NAMES, reply_body="BrokerReplicasInfo",
            controller=since(R.V5_0_0), access=ANY, leader_only=True),
    Request("GET_BROKER_EPOCH_CACHE", 1007, since(R.V5_0_0)),
    Request("NOTIFY_BROKER_ROLE_CHANGED", 1008, since(R.V5_0_0),
            request="NotifyBrokerRoleChangedRequestHeader", body="SyncStateSet"),
    Request("UPDATE_CONTROLLER_CONFIG", 1009, since(R.V5_0_0),
            body=PROPERTIES_TEXT, controller=since(R.V5_0_0), access=ADMIN),
    Request("GET_CONTROLLER_CONFIG", 1010, since(R.V5_0_0),
            reply_body=PROPERTIES_TEXT, controller=since(R.V5_0_0), access=ANY),
    Request("CLEAN_BROKER_DATA", 1011, since(R.V5_0_0),
            request="CleanControllerBrokerDataRequestHeader",
            controller=since(R.V5_0_0), access=ADMIN, leader_only=True),
    Request("CONTROLLER_GET_NEXT_BROKER_ID", 1012, since(R.V5_1_1),
            request="GetNextBrokerIdRequestHeader",
            reply="GetNextBrokerIdResponseHeader", controller=since(R.V5_1_1), access=ANY,
            leader_only=True),
    Request("CONTROLLER_APPLY_BROKER_ID", 1013, since(R.V5_1_1),
            request="ApplyBrokerIdRequestHeader", reply="ApplyBrokerIdResponseHeader",
            controller=since(R.V5_1_1), access=BROKER, leader_only=True),
    Request("BROKER_CLOSE_CHANNEL_REQUEST", 1014, since(R.V5_2_0)),
    Request("CHECK_NOT_ACTIVE_BROKER_REQUEST", 1015, since(R.V5_2_0)),
    Request("GET_BROKER_LIVE_INFO_REQUEST", 1016, since(R.V5_2_0)),
    Request("GET_SYNC_STATE_DATA_REQUEST", 1017, since(R.V5_2_0)),
    Request("RAFT_BROKER_HEART_BEAT_EVENT_REQUEST", 1018, since(R.V5_2_0)),
    Request("UPDATE_COLD_DATA_FLOW_CTR_CONFIG", 2001, since(R.V5_1_2)),
    Request("REMOVE_COLD_DATA_FLOW_CTR_CONFIG", 2002, since(R.V5_1_2)),
    Request("GET_COLD_DATA_FLOW_CTR_INFO", 2003, since(R.V5_1_2)),
    Request("SET_COMMITLOG_READ_MODE", 2004, since(R.V5_1_2)),
    Request("AUTH_CREATE_USER", 3001, since(R.V5_3_0)),
    Request("AUTH_UPDATE_USER", 3002, since(R.V5_3_0)),
    Request("AUTH_DELETE_USER", 3003, since(R.V5_3_0)),
    Request("AUTH_GET_USER", 3004, since(R.V5_3_0)),
    Request("AUTH_LIST_USER", 3005, since(R.V5_3_0)),
    Request("AUTH_CREATE_ACL", 3006, since(R.V5_3_0)),
    Request("AUTH_UPDATE_ACL", 3007, since(R.V5_3_0)),
    Request("AUTH_DELETE_ACL", 3008, since(R.V5_3_0)),
    Request("AUTH_GET_ACL", 3009, since(R.V5_3_0)),
    Request("AUTH_LIST_ACL", 3010, since(R.V5_3_0)),
    Request("SWITCH_TIMER_ENGINE", 5001, since(R.V5_5_0), source=_JAVA_55),
    Request("DELETE_TOPIC_IN_BROKER_LIST", 5002, since(R.V5_5_0), source=_JAVA_55),
    Request("DELETE_SUBSCRIPTION_GROUP_LIST", 5003, since(R.V5_5_0), source=_JAVA_55),
    Request("POP_MESSAGE", 200050, since(R.V5_0_0)),
    Request("ACK_MESSAGE", 200051, since(R.V5_0_0)),
    Request("PEEK_MESSAGE", 200052, since(R.V5_0_0)),
    Request("CHANGE_MESSAGE_INVISIBLETIME", 200053, since(R.V5_0_0)),
    Request("NOTIFICATION", 200054, since(R.V5_0_0)),
    Request("POLLING_INFO", 200055, since(R.V5_0_0)),
    Request("POP_ROLLBACK", 200056, since(R.V5_3_2)),
    Request("POP_LITE_MESSAGE", 200070, since(R.V5_5_0), source=_JAVA_55),
    Request("LITE_SUBSCRIPTION_CTL", 200071, since(R.V5_5_0), source=_JAVA_55),
    Request("ACK_LITE_MESSAGE", 200072, since(R.V5_5_0), source=_JAVA_55),
    Request("NOTIFY_UNSUBSCRIBE_LITE", 200073, since(R.V5_5_0), source=_JAVA_55),
    Request("GET_BROKER_LITE_INFO", 200074, since(R.V5_5_0), source=_JAVA_55),
    Request("GET_PARENT_TOPIC_INFO", 200075, since(R.V5_5_0), source=_JAVA_55),
    Request("GET_LITE_TOPIC_INFO", 200076, since(R.V5_5_0), source=_JAVA_55),
    Request("GET_LITE_CLIENT_INFO", 200077, since(R.V5_5_0), source=_JAVA_55),
    Request("GET_LITE_GROUP_INFO", 200078, since(R.V5_5_0), source=_JAVA_55),
    Request("TRIGGER_LITE_DISPATCH", 200079, since(R.V5_5_0), source=_JAVA_55),
    Request("BATCH_ACK_MESSAGE", 200151, since(R.V5_1_3)),
)

RequestCode = IntEnum("RequestCode", [(r.name, r.code) for r in CATALOGUE], module=__name__,
                      qualname="RequestCode")
RequestCode.__doc__ = ("Java ``RequestCode`` of every release read, by value, derived from "
                       ":data:`CATALOGUE` (a second name of a value is an alias; the releases "
                       "that define each are its declaration's).")

_BY_CODE = {r.code: r for r in CATALOGUE if r.alias_of is None}


def _check(catalogue):
    """Refuse at import what would make a derived table wrong: a served code with no stated
    access (it would be served unguarded), a code declared twice, an alias of nothing, a code
    naming a broker that is no broker request with a header (the identity binding would skip
    it)."""
    names, codes = set(), set()
    for r in catalogue:
        if r.name in names:
            raise CatalogueError(f"request code name {r.name} is declared twice")
        names.add(r.name)
        if r.alias_of is not None:
            if r.alias_of not in names:
                raise CatalogueError(f"{r.name} is an alias of {r.alias_of}, declared before it")
            continue
        if r.code in codes:
            raise CatalogueError(f"request code {r.code} ({r.name}) is declared twice")
        codes.add(r.code)
        served = r.namesrv is not None or r.controller is not None
        if served and r.access is None:
            raise CatalogueError(f"{r.name} ({r.code}) is served but declares no access "
                                 "(Access.ANY, BROKER or ADMIN): it would be served unguarded")
        if r.admin_when is not None and r.request is None:
            raise CatalogueError(f"{r.name} ({r.code}) is administrative by a header it lacks")
        if r.names_broker and (r.request is None or not (r.access or 0) & Access.BROKER):
            raise CatalogueError(f"{r.name} ({r.code}) names a broker but is no broker request "
                                 "with a header (Access.BROKER, request=): the identity "
                                 "binding would not check it")


_check(CATALOGUE)


def declaration(code):
    """The :class:`Request` of ``code`` (an int or a :class:`RequestCode`), None for a code no
    release defines."""
    try:
        return _BY_CODE.get(code)
    except TypeError:   # not hashable: no code
        return None


def served(server, release=None):
    """The declarations ``server`` serves (in ``release``; None: in any release)."""
    return tuple(r for r in _BY_CODE.values() if r.served_by(server, release))


def codes_with(server, test):
    """``frozenset`` of the codes ``server`` serves in some release whose declaration passes
    ``test`` (``lambda r: r.leader_only``): the code sets of the guards and the controller."""
    return frozenset(r.code for r in served(server) if test(r))


def resolve(attribute, classes, where):
    """``{code: class}`` of every declaration naming a class in ``attribute`` (``"request"``,
    ``"reply_body"``...), looked up in ``classes`` (``{name: class}`` of the module ``where``
    that owns them): a name it lacks is a :class:`CatalogueError` when that module is imported.
    Names that are no class (:data:`PROPERTIES_TEXT`, :data:`BROKER_NAMES`) are left out."""
    out = {}
    for r in _BY_CODE.values():
        name = getattr(r, attribute)
        if name is None or name in (PROPERTIES_TEXT, BROKER_NAMES):
            continue
        cls = classes.get(name)
        if cls is None:
            raise CatalogueError(f"{r.name} ({r.code}) names {attribute} {name}, which {where} "
                                 "does not define")
        out[RequestCode(r.code)] = cls
    return out


def responder(code, java_decode=False, writes=False):
    """Mark a method as the handler of ``code``'s declaration (AMP's ``Command.responder``):
    the dispatcher decodes the declared request header first and passes it (None when the code
    has none). A code no release defines is refused at once.

    ``writes``: the handler may change state (the route tables, the KV store, the settings),
    a property of the handler as ``java_decode`` is: the worker processes send such a request
    to the route writer and answer every other one from a replica
    (``rocketpy.transport.forwarding``).

    With ``java_decode`` the header is read as Java reads it: a missing or unparsable field keeps
    its default (``RemotingCommand.decodeCommandCustomHeader`` catches its own "the custom field
    <...> is null" exception and only logs it, in 4.9.8, 5.0.0 and 5.3.3 alike), and the handler
    does with that None what Java does. Without, a missing required field is answered
    SYSTEM_ERROR at once (handlers not yet checked against Java's null paths): a property of the
    handler, not of the code."""
    found = declaration(code)
    if found is None:
        raise CatalogueError(f"no declaration for request code {code}")

    def mark(method):
        method.responds_to = (found, java_decode)
        method.writes = writes
        return method
    return mark


@dataclass(frozen=True)
class Binding:
    """A served code's handler: the bound method, its declaration, how its header is read."""

    handler: object
    declaration: Request
    java_decode: bool


def bind(groups, server, release):
    """``{code: Binding}`` of the marked methods of ``groups`` that ``server`` serves in
    ``release``. Refused (:class:`CatalogueError`) when the processor is built: a code served in
    ``release`` without a handler, a handler for a code ``server`` serves in no release, two
    handlers for one code."""
    found, owners = {}, {}
    for group in groups:
        for name in dir(type(group)):
            mark = getattr(getattr(type(group), name, None), "responds_to", None)
            if mark is None:
                continue
            decl, java_decode = mark
            where = f"{type(group).__name__}.{name}"
            if not decl.served_by(server):
                raise CatalogueError(f"{where} answers {decl.name} ({decl.code}), which no "
                                     f"{server} release serves")
            if decl.code in owners:
                raise CatalogueError(f"{decl.name} ({decl.code}) has two handlers: "
                                     f"{owners[decl.code]} and {where}")
            owners[decl.code] = where
            if decl.served_by(server, release):
                found[decl.code] = Binding(getattr(group, name), decl, java_decode)
    missing = [r for r in served(server, release) if r.code not in found]
    if missing:
        raise CatalogueError(f"{server} {release.value} serves "
                             f"{', '.join(f'{r.name} ({r.code})' for r in missing)} "
                             "with no handler")
    return found
