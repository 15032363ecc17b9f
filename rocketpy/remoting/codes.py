"""Wire codec layer: the number tables of the RocketMQ remoting protocol (Java ``RequestCode``,
``ResponseCode``, ``RemotingSysResponseCode``, ``LanguageCode``, ``SerializeType`` and
``MQVersion.Version``).

Each table is the union over the apache/rocketmq tags 4.0.0-incubating to 5.3.3, so peers of any
version get names, including codes that later left the Java source (the ACL codes 50-54, the
5.0.0-PREVIEW logical-queue codes). A renumbered name keeps its 5.3.3 value; of two names sharing
a value, 5.3.3's is defined first and canonical, the other an IntEnum alias. Comments name the
tags a member is limited to.

Unknown numbers must pass through as plain ints (a 5.x NameServer answers them
REQUEST_CODE_NOT_SUPPORTED), so the helpers return None for them and never raise. The ROCKETMQ
binary header carries ``code`` and ``version`` as signed 16-bit integers: the pop codes from
200050 up only survive a JSON header."""

from enum import IntEnum

__all__ = [
    "not_supported_remark",
    "CURRENT_VERSION",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "LanguageCode",
    "MQVersion",
    "OVERLOAD_REMARK",
    "RPC_ONEWAY",
    "RPC_TYPE",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "language_from_name",
    "language_name",
    "request_code_name",
    "response_code_name",
    "version_desc",
    "version_name",
    "version_ordinal",
    "release_ordinal",
]

# RemotingCommand flag bits: bit 0 set = response (else request), bit 1 set = oneway request.
RPC_TYPE = 0
RPC_ONEWAY = 1
FLAG_RESPONSE = 1 << RPC_TYPE
FLAG_ONEWAY = 1 << RPC_ONEWAY


class RequestCode(IntEnum):
    """``RequestCode`` of every tag, by value.

    "since X": not in 4.9.8, first in 5.x release X; "only in": no longer in 5.3.3.
    """

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    UPDATE_AND_CREATE_TOPIC_LIST = 18  # since 5.3.0
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    GET_CLIENT_CONFIG = 47  # since 5.0.0
    UPDATE_AND_CREATE_ACL_CONFIG = 50  # only in 4.5.2..5.3.2
    DELETE_ACL_CONFIG = 51  # only in 4.5.2..5.3.2
    GET_BROKER_CLUSTER_ACL_INFO = 52  # only in 4.5.2..5.3.2
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53  # only in 4.5.2..5.3.2
    GET_BROKER_CLUSTER_ACL_CONFIG = 54  # only in 4.6.0..4.9.7, 5.0.0-PREVIEW..5.3.2
    GET_TIMER_CHECK_POINT = 60  # since 5.0.0
    GET_TIMER_METRICS = 61  # since 5.0.0
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_ROUTEINTO_BY_TOPIC = 105  # alias of GET_ROUTEINFO_BY_TOPIC; only in 4.0.0..4.7.0
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217  # since 5.0.0
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225  # since 5.3.1
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    QUERY_TOPICS_BY_CONSUMER = 343  # since 5.0.0
    QUERY_SUBSCRIPTION_BY_CONSUMER = 345  # since 5.0.0
    GET_TOPIC_CONFIG = 351  # since 5.0.0
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # since 5.0.0
    UPDATE_AND_GET_GROUP_FORBIDDEN = 353  # since 5.0.0
    CHECK_ROCKSDB_CQ_WRITE_PROGRESS = 354  # since 5.3.1
    EXPORT_ROCKSDB_CONFIG_TO_JSON = 355  # since 5.3.2
    LITE_PULL_MESSAGE = 361  # since 5.0.0
    RECALL_MESSAGE = 370  # since 5.3.2
    QUERY_ASSIGNMENT = 400  # since 5.0.0
    SET_MESSAGE_REQUEST_MODE = 401  # since 5.0.0
    GET_ALL_MESSAGE_REQUEST_MODE = 402  # since 5.0.0
    UPDATE_TOPIC_LOGICAL_QUEUE_MAPPING = 411  # only in 5.0.0-PREVIEW
    QUERY_TOPIC_LOGICAL_QUEUE_MAPPING = 413  # only in 5.0.0-PREVIEW
    SEAL_TOPIC_LOGICAL_QUEUE = 414  # only in 5.0.0-PREVIEW
    REUSE_TOPIC_LOGICAL_QUEUE = 415  # only in 5.0.0-PREVIEW
    CREATE_MESSAGE_QUEUE_FOR_LOGICAL_QUEUE = 416  # only in 5.0.0-PREVIEW
    MIGRATE_TOPIC_LOGICAL_QUEUE_PREPARE = 417  # only in 5.0.0-PREVIEW
    MIGRATE_TOPIC_LOGICAL_QUEUE_COMMIT = 418  # only in 5.0.0-PREVIEW
    MIGRATE_TOPIC_LOGICAL_QUEUE_NOTIFY = 419  # only in 5.0.0-PREVIEW
    DELETE_TOPIC_LOGICAL_QUEUE_MAPPING = 422  # only in 5.0.0-PREVIEW
    UPDATE_AND_CREATE_STATIC_TOPIC = 513  # since 5.0.0
    GET_BROKER_MEMBER_GROUP = 901  # since 5.0.0
    ADD_BROKER = 902  # since 5.0.0
    REMOVE_BROKER = 903  # since 5.0.0
    BROKER_HEARTBEAT = 904  # since 5.0.0
    NOTIFY_MIN_BROKER_ID_CHANGE = 905  # since 5.0.0
    EXCHANGE_BROKER_HA_INFO = 906  # since 5.0.0
    GET_BROKER_HA_STATUS = 907  # since 5.0.0
    RESET_MASTER_FLUSH_OFFSET = 908  # since 5.0.0
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001  # since 5.0.0
    CONTROLLER_ELECT_MASTER = 1002  # since 5.0.0
    CONTROLLER_REGISTER_BROKER = 1003  # since 5.0.0
    CONTROLLER_GET_REPLICA_INFO = 1004  # since 5.0.0
    CONTROLLER_GET_METADATA_INFO = 1005  # since 5.0.0
    CONTROLLER_GET_SYNC_STATE_DATA = 1006  # since 5.0.0
    GET_BROKER_EPOCH_CACHE = 1007  # since 5.0.0
    NOTIFY_BROKER_ROLE_CHANGED = 1008  # since 5.0.0
    UPDATE_CONTROLLER_CONFIG = 1009  # since 5.0.0
    GET_CONTROLLER_CONFIG = 1010  # since 5.0.0
    CLEAN_BROKER_DATA = 1011  # since 5.0.0
    CONTROLLER_GET_NEXT_BROKER_ID = 1012  # since 5.1.1
    CONTROLLER_APPLY_BROKER_ID = 1013  # since 5.1.1
    BROKER_CLOSE_CHANNEL_REQUEST = 1014  # since 5.2.0
    CHECK_NOT_ACTIVE_BROKER_REQUEST = 1015  # since 5.2.0
    GET_BROKER_LIVE_INFO_REQUEST = 1016  # since 5.2.0
    GET_SYNC_STATE_DATA_REQUEST = 1017  # since 5.2.0
    RAFT_BROKER_HEART_BEAT_EVENT_REQUEST = 1018  # since 5.2.0
    UPDATE_COLD_DATA_FLOW_CTR_CONFIG = 2001  # since 5.1.2
    REMOVE_COLD_DATA_FLOW_CTR_CONFIG = 2002  # since 5.1.2
    GET_COLD_DATA_FLOW_CTR_INFO = 2003  # since 5.1.2
    SET_COMMITLOG_READ_MODE = 2004  # since 5.1.2
    AUTH_CREATE_USER = 3001  # since 5.3.0
    AUTH_UPDATE_USER = 3002  # since 5.3.0
    AUTH_DELETE_USER = 3003  # since 5.3.0
    AUTH_GET_USER = 3004  # since 5.3.0
    AUTH_LIST_USER = 3005  # since 5.3.0
    AUTH_CREATE_ACL = 3006  # since 5.3.0
    AUTH_UPDATE_ACL = 3007  # since 5.3.0
    AUTH_DELETE_ACL = 3008  # since 5.3.0
    AUTH_GET_ACL = 3009  # since 5.3.0
    AUTH_LIST_ACL = 3010  # since 5.3.0
    POP_MESSAGE = 200050  # since 5.0.0
    ACK_MESSAGE = 200051  # since 5.0.0
    PEEK_MESSAGE = 200052  # since 5.0.0
    CHANGE_MESSAGE_INVISIBLETIME = 200053  # since 5.0.0
    NOTIFICATION = 200054  # since 5.0.0
    POLLING_INFO = 200055  # since 5.0.0
    POP_ROLLBACK = 200056  # since 5.3.2
    BATCH_ACK_MESSAGE = 200151  # since 5.1.3


class ResponseCode(IntEnum):
    """``RemotingSysResponseCode`` (0-4) and ``ResponseCode`` of every tag, by value.

    Comments as in ``RequestCode``; "was N in": that tag numbered the name N.
    """

    RPC_TIME_OUT = -1006  # since 5.0.0
    RPC_SEND_TO_CHANNEL_FAILED = -1004  # since 5.0.0
    RPC_ADDR_IS_NULL = -1002  # since 5.0.0
    RPC_UNKNOWN = -1000  # since 5.0.0
    ASYNC_AND_RETURN_NULL = -2  # only in 5.0.0-PREVIEW..5.0.0-ALPHA
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # since 5.3.2
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209  # since 5.0.0
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209  # alias of POLLING_FULL; only in 4.5.2..5.3.2
    POLLING_TIMEOUT = 210  # since 5.0.0
    DELETE_ACL_CONFIG_FAILED = 210  # alias of POLLING_TIMEOUT; only in 4.5.2..5.3.2
    BROKER_NOT_EXIST = 211  # since 5.0.0
    # alias of BROKER_NOT_EXIST; only in 4.5.2..5.3.2
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    BROKER_DISPATCH_NOT_COMPLETE = 212  # since 5.0.0
    BROADCAST_CONSUMPTION = 213  # since 5.0.0
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501  # since 5.0.0
    ILLEGAL_OPERATION = 604  # since 5.1.1
    GO_AWAY = 1500  # since 5.2.0
    CONTROLLER_FENCED_MASTER_EPOCH = 2000  # since 5.0.0
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001  # since 5.0.0
    CONTROLLER_INVALID_MASTER = 2002  # since 5.0.0
    CONTROLLER_INVALID_REPLICAS = 2003  # since 5.0.0
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004  # since 5.0.0
    CONTROLLER_INVALID_REQUEST = 2005  # since 5.0.0
    CONTROLLER_BROKER_NOT_ALIVE = 2006  # since 5.0.0
    CONTROLLER_NOT_LEADER = 2007  # since 5.0.0
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008  # since 5.0.0
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009  # since 5.0.0
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010  # since 5.1.1
    CONTROLLER_MASTER_STILL_EXIST = 2011  # since 5.1.1
    CONTROLLER_ELECT_MASTER_FAILED = 2012  # since 5.0.0; was 2011 in 5.0.0..5.1.0
    # alias of CONTROLLER_ELECT_MASTER_FAILED; only in 5.0.0..5.1.0
    CONTROLLER_REGISTER_BROKER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013  # since 5.0.0; was 2010 in 5.0.0..5.1.0
    CONTROLLER_BROKER_ID_INVALID = 2014  # since 5.1.1
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015  # since 5.2.0
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016  # since 5.2.0
    USER_NOT_EXIST = 3001  # since 5.3.0
    POLICY_NOT_EXIST = 3002  # since 5.3.0


#: The remark of Java's SYSTEM_BUSY answer when a request finds its executor queue full
#: (``NettyRemotingAbstract``, 4.x-5.3).
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"


class LanguageCode(IntEnum):
    """The byte a ROCKETMQ binary header carries; a JSON header carries the name ("JAVA").

    Java gives each constant an explicit byte equal to its ordinal; ``LanguageCode.valueOf(byte)``
    returns null for any other byte (mirrored by ``language_name`` returning None).
    """

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9  # since 4.1.0
    PHP = 10  # since 4.1.0
    OMS = 11  # since 4.3.0
    RUST = 12  # since 4.9.4
    NODE_JS = 13  # since 5.3.2


class SerializeType(IntEnum):
    """Header encoding, the top byte of a frame's second int32."""

    JSON = 0
    ROCKETMQ = 1


# MQVersion.Version, whose ordinal is the ``version`` of every RemotingCommand. The Java enum
# starts with 3.0.0's pre-releases, then has X_Y_Z_SNAPSHOT followed by X_Y_Z for each release
# line below, and ends with HIGHER_VERSION (ordinal 612). The lists of 4.1.0 through 5.3.3 are
# identical. Two older builds disagree and are not modelled: 4.0.0-incubating had a different
# list above ordinal 213, and 5.0.0-PREVIEW/-ALPHA inserted their own names before V5_0_0
# (PREVIEW sends 413, ALPHA 415, which this table reads as V5_0_0 and V5_0_1).
_V3_0_0_PRERELEASES = (
    "V3_0_0_SNAPSHOT",
    "V3_0_0_ALPHA1",
    "V3_0_0_BETA1",
    "V3_0_0_BETA2",
    "V3_0_0_BETA3",
    "V3_0_0_BETA4",
    "V3_0_0_BETA5",
    "V3_0_0_BETA6_SNAPSHOT",
    "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT",
    "V3_0_0_BETA7",
    "V3_0_0_BETA8_SNAPSHOT",
    "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT",
    "V3_0_0_BETA9",
    "V3_0_0_FINAL",
)

# (major, minor, first patch, last patch), in Java's order. 3.0 runs to .15; 3.3 to 3.9 have no .0.
_RELEASE_LINES = (
    (3, 0, 1, 15),
    (3, 1, 0, 9),
    (3, 2, 0, 9),
    *((3, minor, 1, 9) for minor in range(3, 10)),
    *((major, minor, 0, 9) for major in (4, 5) for minor in range(10)),
)


def _version_names():
    names = list(_V3_0_0_PRERELEASES)
    for major, minor, first, last in _RELEASE_LINES:
        for patch in range(first, last + 1):
            release = f"V{major}_{minor}_{patch}"
            names += (release + "_SNAPSHOT", release)
    names.append("HIGHER_VERSION")
    return tuple(names)


MQVersion = IntEnum(
    "MQVersion",
    [(name, ordinal) for ordinal, name in enumerate(_version_names())],
    module=__name__,
    qualname="MQVersion",
)
MQVersion.__doc__ = "``MQVersion.Version``: member value = Java ordinal (V4_9_8=409, V5_3_3=479)."

# MQVersion.CURRENT_VERSION of rocketmq-all-5.3.3, the version rocketpy speaks.
CURRENT_VERSION = MQVersion.V5_3_3

# Iterating an IntEnum skips aliases, so these map each value to its canonical name.
_REQUEST_NAMES = {member.value: member.name for member in RequestCode}
_RESPONSE_NAMES = {member.value: member.name for member in ResponseCode}
_LANGUAGE_NAMES = {member.value: member.name for member in LanguageCode}
_VERSION_NAMES = {member.value: member.name for member in MQVersion}
_HIGHER_VERSION = MQVersion.HIGHER_VERSION


def _by_value(table, value):
    return table.get(value) if isinstance(value, int) else None


def _by_name(members, name):
    return members.get(name) if isinstance(name, str) else None


def not_supported_remark(code):
    """The remark of REQUEST_CODE_NOT_SUPPORTED (``NettyRemotingAbstract``), leading blank
    included: ``" request type 999 not supported"``."""
    return f" request type {code} not supported"


def request_code_name(code):
    """Canonical name of a request code (``105`` -> ``"GET_ROUTEINFO_BY_TOPIC"``), else None."""
    return _by_value(_REQUEST_NAMES, code)


def response_code_name(code):
    """Canonical name of a response code (``17`` -> ``"TOPIC_NOT_EXIST"``), else None."""
    return _by_value(_RESPONSE_NAMES, code)


def language_name(code):
    """Name a JSON header uses for a binary language byte (``1`` -> ``"CPP"``), else None."""
    return _by_value(_LANGUAGE_NAMES, code)


def language_from_name(name):
    """The LanguageCode for a JSON header's name (case-sensitive, as Java's map), else None."""
    return _by_name(LanguageCode.__members__, name)


def version_name(version):
    """Name of an MQVersion ordinal (``409`` -> ``"V4_9_8"``), else None."""
    return _by_value(_VERSION_NAMES, version)


def version_desc(version):
    """Like Java's ``MQVersion.getVersionDesc``: ordinals past the end read as HIGHER_VERSION.

    Java throws for a negative ordinal; this returns None for it, and for non-integers.
    """
    if isinstance(version, int) and version > _HIGHER_VERSION:
        return _HIGHER_VERSION.name
    return version_name(version)


def version_ordinal(name):
    """Ordinal of an MQVersion name (``"V5_0_0"`` -> ``413``), else None."""
    member = _by_name(MQVersion.__members__, name)
    return None if member is None else member.value


def release_ordinal(text):
    """The ``version`` a release speaks, from what a person types: ``"4.9.8"``, ``"V4_9_8"``
    or the number itself (``"409"``); None for anything else."""
    text = (text or "").strip()
    if text.isdigit():
        return int(text)
    return version_ordinal(text if text.startswith("V") else "V" + text.replace(".", "_"))
