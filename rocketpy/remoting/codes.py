"""Wire codec layer: the number tables of the RocketMQ remoting protocol (Java ``RequestCode``,
``ResponseCode``, ``RemotingSysResponseCode``, ``LanguageCode``, ``SerializeType`` and
``MQVersion.Version``).

Each table is the union over the apache/rocketmq tags 4.0.0-incubating to 5.3.3 (and the codes
later releases add), so peers of any version get names, including codes that later left the Java
source (the ACL codes 50-54, the 5.0.0-PREVIEW logical-queue codes). A renumbered name keeps its
5.3.3 value; of two names sharing a value, 5.3.3's is defined first and canonical, the other an
IntEnum alias. :class:`RequestCode` is derived from the protocol catalogue
(:mod:`rocketpy.remoting.catalogue`), where each code's releases are stated; comments here name
the tags a response code is limited to.

Unknown numbers must pass through as plain ints (a 5.x NameServer answers them
REQUEST_CODE_NOT_SUPPORTED), so the helpers return None for them and never raise. The ROCKETMQ
binary header carries ``code`` and ``version`` as signed 16-bit integers: the pop codes from
200050 up only survive a JSON header."""

from enum import IntEnum

from .catalogue import RequestCode

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
    "VERSION_NAMES",
    "version_name",
    "version_ordinal",
    "release_ordinal",
]

# RemotingCommand flag bits: bit 0 set = response (else request), bit 1 set = oneway request.
RPC_TYPE = 0
RPC_ONEWAY = 1
FLAG_RESPONSE = 1 << RPC_TYPE
FLAG_ONEWAY = 1 << RPC_ONEWAY


class ResponseCode(IntEnum):
    """``RemotingSysResponseCode`` (0-4) and ``ResponseCode`` of every tag, by value.

    "since X": not in 4.9.8, first in 5.x release X; "only in": no longer in 5.3.3; "was N in":
    that tag numbered the name N.
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
    LMQ_QUOTA_EXCEEDED = 2017  # since 5.5.0 (rocketmq-rust's inventory of Java 5.5.0)
    LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 2018  # since 5.5.0 (the same; Lite topics, RIP-83)
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


#: MQVersion's names by ordinal (``409`` -> ``"V4_9_8"``), without building the enum
VERSION_NAMES = dict(enumerate(_version_names()))
_VERSION_ORDINALS = {name: ordinal for ordinal, name in VERSION_NAMES.items()}
_HIGHER_VERSION = len(VERSION_NAMES) - 1


def __getattr__(name):
    """:class:`MQVersion` and ``CURRENT_VERSION``, built at their first use: an IntEnum of ~960
    members takes 20 ms, and what reads only names (the capture CLI) starts without it."""
    if name not in ("MQVersion", "CURRENT_VERSION"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    version = IntEnum("MQVersion", [(n, o) for o, n in VERSION_NAMES.items()], module=__name__,
                      qualname="MQVersion")
    version.__doc__ = "``MQVersion.Version``: member value = Java ordinal (V4_9_8=409, V5_3_3=479)."
    # MQVersion.CURRENT_VERSION of rocketmq-all-5.3.3, the version rocketpy speaks.
    globals().update(MQVersion=version, CURRENT_VERSION=version.V5_3_3)
    return globals()[name]


# Iterating an IntEnum skips aliases, so these map each value to its canonical name.
_REQUEST_NAMES = {member.value: member.name for member in RequestCode}
_RESPONSE_NAMES = {member.value: member.name for member in ResponseCode}
_LANGUAGE_NAMES = {member.value: member.name for member in LanguageCode}


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
    return _by_value(VERSION_NAMES, version)


def version_desc(version):
    """Like Java's ``MQVersion.getVersionDesc``: ordinals past the end read as HIGHER_VERSION.

    Java throws for a negative ordinal; this returns None for it, and for non-integers.
    """
    if isinstance(version, int) and version > _HIGHER_VERSION:
        return VERSION_NAMES[_HIGHER_VERSION]
    return version_name(version)


def version_ordinal(name):
    """Ordinal of an MQVersion name (``"V5_0_0"`` -> ``413``), else None."""
    return _by_name(_VERSION_ORDINALS, name)


def release_ordinal(text):
    """The ``version`` a release speaks, from what a person types: ``"4.9.8"``, ``"V4_9_8"``
    or the number itself (``"409"``); None for anything else."""
    text = (text or "").strip()
    if text.isdigit():
        return int(text)
    return version_ordinal(text if text.startswith("V") else "V" + text.replace(".", "_"))
