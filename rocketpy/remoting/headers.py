"""Wire codec layer: typed custom headers of the NameServer's requests and responses.

Java mirrors a command's ``extFields`` into a ``CommandCustomHeader`` bean by reflection
(``decodeCommandCustomHeader`` / ``makeCustomHeaderToNet``); every field travels as a string.
Here each header class declares its fields once (:class:`F` specs) and one base class converts
both ways, with Java's rules:

* ``Long``/``Integer``: ``parseLong``/``parseInt`` -- an optional sign and decimal digits only,
  within the Java range (:func:`~rocketpy.remoting.numbers.parse_java_integer`). ``Boolean``:
  ``parseBoolean`` (``"true"`` in any case, else false).
* A name, address or check code the tables keep
  (:data:`~rocketpy.remoting.lengths.KEPT_HEADER_FIELDS`) is refused past
  :data:`~rocketpy.remoting.lengths.MAX_NAME_LENGTH` characters (a rocketpy bound).
* Output: ``Long.toString``/``Boolean.toString``; ``None`` is left out; primitive fields
  (``boolean compressed``, ``Integer bodyCrc32 = 0``) always have a value, so Java always sends
  them.
* Key order: ``extFields`` is a ``HashMap``, so :meth:`CommandHeader.to_ext_fields` returns
  HashMap iteration order (:mod:`rocketpy.remoting.javahash`), inserting in declaration order
  (Java's ``HashSet<Field>`` order differs only for two keys in one bucket; in the captures both
  orders agree).

Tolerance: undeclared keys (``AccessKey``, ``Signature``, ``__ZONE_NAME``) are ignored; the C++
client's JSON numbers and booleans become the string fastjson would have made.

Strictness: Java only *logs* a missing ``@CFNotNull`` field or a bad number and fails later
(usually an NPE answered SYSTEM_ERROR). ``from_ext_fields`` raises
:class:`~rocketpy.remoting.errors.MissingFieldError` /
:class:`~rocketpy.remoting.errors.InvalidFieldError` so the processor can answer a precise remark;
``strict=False`` gives Java's lenient result for tools that must read whatever a peer sent.

One class per header covers every version (fields a version lacks are nullable and absent):
``RegisterBrokerRequestHeader`` gains ``heartbeatTimeoutMillis`` and ``enableActingMaster`` in
5.0; ``BrokerHeartbeatRequestHeader`` (5.0+) gains brokerId, heartbeatTimeoutMills and
electionPriority after 5.0.0; the route, delete-topic and register-topic headers extend
``TopicRequestHeader`` / ``RpcRequestHeader`` since 5.1 (``lo``, ``ns``, ``nsd``, ``bname``,
``oway``); ``GetBrokerMemberGroupRequestHeader`` and ``NotifyMinBrokerIdChangeRequestHeader`` are
5.0+.

Which code carries which header is the protocol catalogue's (:mod:`rocketpy.remoting.catalogue`,
by class name): :data:`REQUEST_HEADERS` and :data:`RESPONSE_HEADERS` are resolved from it here,
and a class it names that this module lacks stops the import."""
from typing import Any, NamedTuple

from .catalogue import resolve
from .errors import InvalidFieldError, MissingFieldError
from .javahash import hashmap_order
from .lengths import KEPT_HEADER_FIELDS, MAX_NAME_LENGTH
from .numbers import INT32, INT64, NumberError, parse_java_integer

__all__ = [
    "STRING", "INTEGER", "LONG", "BOOLEAN", "F", "CommandHeader",
    "ZONE_NAME", "ZONE_MODE",
    "RegisterBrokerRequestHeader", "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader", "GetRouteInfoRequestHeader",
    "QueryDataVersionRequestHeader", "QueryDataVersionResponseHeader",
    "PutKVConfigRequestHeader", "GetKVConfigRequestHeader", "GetKVConfigResponseHeader",
    "DeleteKVConfigRequestHeader", "GetKVListByNamespaceRequestHeader",
    "WipeWritePermOfBrokerRequestHeader", "WipeWritePermOfBrokerResponseHeader",
    "AddWritePermOfBrokerRequestHeader", "AddWritePermOfBrokerResponseHeader",
    "DeleteTopicFromNamesrvRequestHeader", "RegisterTopicRequestHeader", "CreateTopicRequestHeader",
    "RegisterOrderTopicRequestHeader", "GetTopicsByClusterRequestHeader",
    "BrokerHeartbeatRequestHeader", "GetBrokerMemberGroupRequestHeader",
    "NotifyMinBrokerIdChangeRequestHeader", "DeleteTopicRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "AlterSyncStateSetRequestHeader", "AlterSyncStateSetResponseHeader",
    "ElectMasterRequestHeader", "ElectMasterResponseHeader",
    "RegisterBrokerToControllerRequestHeader", "RegisterBrokerToControllerResponseHeader",
    "GetReplicaInfoRequestHeader", "GetReplicaInfoResponseHeader", "GetMetaDataResponseHeader",
    "NotifyBrokerRoleChangedRequestHeader", "CleanControllerBrokerDataRequestHeader",
    "GetNextBrokerIdRequestHeader", "GetNextBrokerIdResponseHeader",
    "ApplyBrokerIdRequestHeader", "ApplyBrokerIdResponseHeader",
    "REQUEST_HEADERS", "RESPONSE_HEADERS", "request_header_class", "response_header_class",
    "decode_request_header",
]

#: Raw extFields keys the NameServer reads without a header field (Java ``MixAll``).
ZONE_NAME = "__ZONE_NAME"
ZONE_MODE = "__ZONE_MODE"

# Java field types. Each is (name, lower bound, upper bound) for the integer types.
STRING = "String"
INTEGER = "Integer"
LONG = "Long"
BOOLEAN = "Boolean"

_RANGES = {INTEGER: INT32, LONG: INT64}


class F(NamedTuple):
    """One header field: wire (Java) name, Python attribute, Java type, ``@CFNotNull``, default."""

    wire: str
    attr: str
    type: str
    required: bool = False
    default: Any = None


def _java_string(value):
    """The string fastjson makes of a JSON scalar when it fills a ``HashMap<String,String>``."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _parse(spec, raw, header_name):
    """Convert one extFields string to the field's Java type."""
    text = _java_string(raw)
    kind = spec.type
    if kind is STRING:
        return text
    if kind is BOOLEAN:
        return text.lower() == "true"  # Boolean.parseBoolean (equalsIgnoreCase, ASCII)
    if len(text) < 10 and text.isascii() and text.isdigit():   # the usual: fits any Java int
        return int(text)
    try:
        return parse_java_integer(text, _RANGES[kind])   # Long.parseLong / Integer.parseInt
    except NumberError:
        where = f" in {header_name}" if header_name else ""
        raise InvalidFieldError(spec.wire, raw, f"a Java {kind}{where}") from None


def _format(spec, value, header_name):
    """Convert one attribute value to its extFields string (``Object.toString``)."""
    kind = spec.type
    if kind is STRING:
        if not isinstance(value, str):
            raise InvalidFieldError(spec.wire, value, f"a str for {header_name}")
        return value
    if kind is BOOLEAN:
        if not isinstance(value, bool):
            raise InvalidFieldError(spec.wire, value, f"a bool for {header_name}")
        return "true" if value else "false"
    low, high = _RANGES[kind]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidFieldError(spec.wire, value, f"a Java {kind} for {header_name}")
    return str(value)


class CommandHeader:
    """Base of the typed headers; a subclass only declares ``FIELDS`` (and ``JAVA_NAME``)."""

    FIELDS: "tuple[F, ...]" = ()
    #: Simple name of the Java class this header mirrors.
    JAVA_NAME = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        attrs = [spec.attr for spec in cls.FIELDS]
        wires = [spec.wire for spec in cls.FIELDS]
        if len(set(attrs)) != len(attrs) or len(set(wires)) != len(wires):
            raise TypeError(f"{cls.__name__}: duplicate field in FIELDS")
        for spec in cls.FIELDS:
            if spec.type not in (STRING, INTEGER, LONG, BOOLEAN):
                raise TypeError(f"{cls.__name__}.{spec.attr}: unknown Java type {spec.type!r}")
        cls._ATTRS = frozenset(attrs)
        #: the string fields the tables keep, bounded (remoting/lengths.py)
        cls._KEPT = frozenset(spec.attr for spec in cls.FIELDS
                              if spec.type is STRING and spec.wire in KEPT_HEADER_FIELDS)
        cls._DEFAULTS = {spec.attr: spec.default for spec in cls.FIELDS}
        # HashMap iteration order of a map holding every field (Java's extFields). A header
        # with some fields None iterates in the same relative order, because a map of at most
        # 12 keys stays in one 16-bucket table.
        if len(wires) > 12:
            raise TypeError(f"{cls.__name__}: over 12 fields; to_ext_fields assumes one table size")
        order = hashmap_order(wires)
        rank = {wire: i for i, wire in enumerate(order)}
        cls._OUTPUT_ORDER = tuple(sorted(cls.FIELDS, key=lambda spec: rank[spec.wire]))
        if not cls.JAVA_NAME:
            cls.JAVA_NAME = cls.__name__

    def __init__(self, **values):
        if not self._ATTRS.issuperset(values):
            unknown = sorted(set(values) - self._ATTRS)
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(unknown)}")
        self.__dict__.update(self._DEFAULTS)
        self.__dict__.update(values)

    @classmethod
    def from_ext_fields(cls, ext_fields, *, strict=True):
        """Read a header from a command's ``ext_fields`` (``None`` reads as ``{}``).

        Raises :class:`MissingFieldError` for an absent required field and
        :class:`InvalidFieldError` for a value that does not parse, unless ``strict`` is false
        (then, as Java, the field keeps its default).
        """
        ext = ext_fields or {}
        self = cls.__new__(cls)
        values = self.__dict__
        for spec in cls.FIELDS:
            raw = ext.get(spec.wire)
            if raw is None:
                if spec.required and strict:
                    raise MissingFieldError(spec.wire, cls.JAVA_NAME)
                values[spec.attr] = spec.default
            elif raw.__class__ is str and spec.type is STRING:   # most fields: as they are
                if len(raw) > MAX_NAME_LENGTH and spec.attr in cls._KEPT:   # refused, strict or not
                    raise InvalidFieldError(spec.wire, raw, f"at most {MAX_NAME_LENGTH} characters")
                values[spec.attr] = raw
            elif raw.__class__ is str and spec.type is BOOLEAN:
                values[spec.attr] = raw.lower() == "true"         # Boolean.parseBoolean
            else:
                try:
                    values[spec.attr] = _parse(spec, raw, cls.JAVA_NAME)
                except InvalidFieldError:
                    if strict:
                        raise
                    values[spec.attr] = spec.default
        return self

    def to_ext_fields(self):
        """The ``extFields`` map Java writes for this header: ``None`` fields left out, keys in
        ``HashMap`` order, every value a string."""
        name = self.JAVA_NAME
        out = {}
        for spec in self._OUTPUT_ORDER:
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.wire] = _format(spec, value, name)
        return out

    def missing_fields(self):
        """Wire names of required fields that are ``None`` (what Java would log)."""
        return [spec.wire for spec in self.FIELDS
                if spec.required and getattr(self, spec.attr) is None]

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self._ATTRS)

    __hash__ = None  # mutable, like the Java beans

    def __repr__(self):
        inner = ", ".join(f"{spec.attr}={getattr(self, spec.attr)!r}" for spec in self.FIELDS
                          if getattr(self, spec.attr) is not None)
        return f"{type(self).__name__}({inner})"


# Fields of 5.x's RpcRequestHeader / TopicRequestHeader, inherited by the topic headers. All
# nullable; a 5.x client sends them only when set (namespace, broker name, logical, oneway).
_RPC_FIELDS = (
    F("ns", "rpc_namespace", STRING),
    F("nsd", "rpc_namespaced", BOOLEAN),
    F("bname", "rpc_broker_name", STRING),
    F("oway", "rpc_oneway", BOOLEAN),
)
_TOPIC_RPC_FIELDS = (F("lo", "rpc_logic", BOOLEAN),) + _RPC_FIELDS


class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103). ``compressed`` and ``bodyCrc32`` are primitives with defaults."""

    FIELDS = (
        F("brokerName", "broker_name", STRING, True),
        F("brokerAddr", "broker_addr", STRING, True),
        F("clusterName", "cluster_name", STRING, True),
        F("haServerAddr", "ha_server_addr", STRING, True),
        F("brokerId", "broker_id", LONG, True),
        F("heartbeatTimeoutMillis", "heartbeat_timeout_millis", LONG),  # 5.0+
        F("enableActingMaster", "enable_acting_master", BOOLEAN),  # 5.0+
        F("compressed", "compressed", BOOLEAN, False, False),
        F("bodyCrc32", "body_crc32", INTEGER, False, 0),
    )


class RegisterBrokerResponseHeader(CommandHeader):
    """Answer to REGISTER_BROKER: set for a slave whose master is registered."""

    FIELDS = (
        F("haServerAddr", "ha_server_addr", STRING),
        F("masterAddr", "master_addr", STRING),
    )


class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    FIELDS = (
        F("brokerName", "broker_name", STRING, True),
        F("brokerAddr", "broker_addr", STRING, True),
        F("clusterName", "cluster_name", STRING, True),
        F("brokerId", "broker_id", LONG, True),
    )


class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105). ``acceptStandardJsonOnly`` since 4.9.4."""

    FIELDS = (
        F("topic", "topic", STRING, True),
        F("acceptStandardJsonOnly", "accept_standard_json_only", BOOLEAN),
    ) + _TOPIC_RPC_FIELDS


class QueryDataVersionRequestHeader(CommandHeader):
    """QUERY_DATA_VERSION (322); the body is the broker's DataVersion."""

    FIELDS = (
        F("brokerName", "broker_name", STRING, True),
        F("brokerAddr", "broker_addr", STRING, True),
        F("clusterName", "cluster_name", STRING, True),
        F("brokerId", "broker_id", LONG, True),
    )


class QueryDataVersionResponseHeader(CommandHeader):
    """Answer to QUERY_DATA_VERSION."""

    FIELDS = (F("changed", "changed", BOOLEAN, True),)


class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    FIELDS = (
        F("namespace", "namespace", STRING, True),
        F("key", "key", STRING, True),
        F("value", "value", STRING, True),
    )


class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    FIELDS = (
        F("namespace", "namespace", STRING, True),
        F("key", "key", STRING, True),
    )


class GetKVConfigResponseHeader(CommandHeader):
    """Answer to GET_KV_CONFIG."""

    FIELDS = (F("value", "value", STRING),)


class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    FIELDS = (
        F("namespace", "namespace", STRING, True),
        F("key", "key", STRING, True),
    )


class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    FIELDS = (F("namespace", "namespace", STRING, True),)


class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    FIELDS = (F("brokerName", "broker_name", STRING, True),)


class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    """Answer to WIPE_WRITE_PERM_OF_BROKER: how many topics lost write permission."""

    FIELDS = (F("wipeTopicCount", "wipe_topic_count", INTEGER, True),)


class AddWritePermOfBrokerRequestHeader(CommandHeader):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    FIELDS = (F("brokerName", "broker_name", STRING, True),)


class AddWritePermOfBrokerResponseHeader(CommandHeader):
    """Answer to ADD_WRITE_PERM_OF_BROKER."""

    FIELDS = (F("addTopicCount", "add_topic_count", INTEGER, True),)


class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV (216); ``clusterName`` optional (null = every cluster)."""

    FIELDS = (
        F("topic", "topic", STRING, True),
        F("clusterName", "cluster_name", STRING),
    ) + _TOPIC_RPC_FIELDS


class RegisterTopicRequestHeader(CommandHeader):
    """REGISTER_TOPIC_IN_NAMESRV (217); the body is a TopicRouteData."""

    FIELDS = (F("topic", "topic", STRING, True),) + _TOPIC_RPC_FIELDS


class RegisterOrderTopicRequestHeader(CommandHeader):
    """Java declares it (topic, orderTopicString); no NameServer request code uses it."""

    FIELDS = (
        F("topic", "topic", STRING, True),
        F("orderTopicString", "order_topic_string", STRING, True),
    )


class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    FIELDS = (F("cluster", "cluster", STRING, True),)


class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904, 5.0+; oneway from acting-master brokers).

    ``heartbeatTimeoutMills`` (sic: not Millis) is Java's spelling.
    """

    FIELDS = (
        F("clusterName", "cluster_name", STRING, True),
        F("brokerAddr", "broker_addr", STRING, True),
        F("brokerName", "broker_name", STRING, True),
        F("brokerId", "broker_id", LONG),  # after 5.0.0
        F("epoch", "epoch", INTEGER),
        F("maxOffset", "max_offset", LONG),
        F("confirmOffset", "confirm_offset", LONG),
        F("heartbeatTimeoutMills", "heartbeat_timeout_mills", LONG),  # after 5.0.0
        F("electionPriority", "election_priority", INTEGER),  # after 5.0.0
    )


class GetBrokerMemberGroupRequestHeader(CommandHeader):
    """GET_BROKER_MEMBER_GROUP (901, 5.0+)."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING, True),
        F("brokerName", "broker_name", STRING, True),
    )


class NotifyMinBrokerIdChangeRequestHeader(CommandHeader):
    """NOTIFY_MIN_BROKER_ID_CHANGE (905, 5.0+): sent *by* the NameServer to a broker group."""

    FIELDS = (
        F("minBrokerId", "min_broker_id", LONG),
        F("brokerName", "broker_name", STRING),
        F("minBrokerAddr", "min_broker_addr", STRING),
        F("offlineBrokerAddr", "offline_broker_addr", STRING),
        F("haBrokerAddr", "ha_broker_addr", STRING),
    )


class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215): sent to a *broker* (``mqadmin deleteTopic``'s first half)."""

    FIELDS = (F("topic", "topic", STRING, True),) + _TOPIC_RPC_FIELDS


class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17): sent to a *broker* (``mqadmin updateTopic``); ``attributes``
    and ``force`` since 5.0 (absent from a 4.9 request, which reads the same). Read by simulated
    brokers only, so 5.x's RPC fields (``lo``, ``bname``, ...) are left out: they are ignored."""

    FIELDS = (
        F("topic", "topic", STRING, True),
        F("defaultTopic", "default_topic", STRING, True),
        F("readQueueNums", "read_queue_nums", INTEGER, True),
        F("writeQueueNums", "write_queue_nums", INTEGER, True),
        F("perm", "perm", INTEGER, True),
        F("topicFilterType", "topic_filter_type", STRING, True),
        F("topicSysFlag", "topic_sys_flag", INTEGER),
        F("order", "order", BOOLEAN, True, False),
        F("attributes", "attributes", STRING),
        F("force", "force", BOOLEAN, False, False),
    )


class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300): sent to a *broker* (``mqadmin topicList -c``)."""

    FIELDS = (F("topic", "topic", STRING, True),) + _TOPIC_RPC_FIELDS


# --- the 5.x controller (RIP-44): its port serves brokers and mqadmin; it pushes 1008 to brokers.
# Fields as at 5.3.3 (``remoting/protocol/header/controller/``). ``@CFNotNull`` fields that Java
# initialises ("", -1, false) are never null there, so here they are optional with that default.
# ``invokeTime`` defaults to the sender's clock in Java; the codec has none, so it stays None.

class AlterSyncStateSetRequestHeader(CommandHeader):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master reports its new sync state set (body)."""

    FIELDS = (
        F("brokerName", "broker_name", STRING),
        F("masterBrokerId", "master_broker_id", LONG),
        F("masterEpoch", "master_epoch", INTEGER),
        F("invokeTime", "invoke_time", LONG),
    )


class AlterSyncStateSetResponseHeader(CommandHeader):
    """Answer to CONTROLLER_ALTER_SYNC_STATE_SET (``int``: always sent)."""

    FIELDS = (F("newSyncStateSetEpoch", "new_sync_state_set_epoch", INTEGER, False, 0),)


class ElectMasterRequestHeader(CommandHeader):
    """CONTROLLER_ELECT_MASTER (1002), from a broker or ``mqadmin electMaster``."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING, False, ""),
        F("brokerName", "broker_name", STRING, False, ""),
        F("brokerId", "broker_id", LONG, False, -1),
        F("designateElect", "designate_elect", BOOLEAN, False, False),
        F("invokeTime", "invoke_time", LONG),
    )


class ElectMasterResponseHeader(CommandHeader):
    """Answer to CONTROLLER_ELECT_MASTER (the body is an ElectMasterResponseBody)."""

    FIELDS = (
        F("masterBrokerId", "master_broker_id", LONG),
        F("masterAddress", "master_address", STRING),
        F("masterEpoch", "master_epoch", INTEGER),
        F("syncStateSetEpoch", "sync_state_set_epoch", INTEGER),
    )


class RegisterBrokerToControllerRequestHeader(CommandHeader):
    """CONTROLLER_REGISTER_BROKER (1003, 5.1.1+)."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
        F("brokerId", "broker_id", LONG),
        F("brokerAddress", "broker_address", STRING),
        F("invokeTime", "invoke_time", LONG),
    )


class RegisterBrokerToControllerResponseHeader(CommandHeader):
    """Answer to CONTROLLER_REGISTER_BROKER (the body is the SyncStateSet)."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
        F("masterBrokerId", "master_broker_id", LONG),
        F("masterAddress", "master_address", STRING),
        F("masterEpoch", "master_epoch", INTEGER),
        F("syncStateSetEpoch", "sync_state_set_epoch", INTEGER),
    )


class GetReplicaInfoRequestHeader(CommandHeader):
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    FIELDS = (F("brokerName", "broker_name", STRING),)


class GetReplicaInfoResponseHeader(CommandHeader):
    """Answer to CONTROLLER_GET_REPLICA_INFO (the body is the SyncStateSet)."""

    FIELDS = (
        F("masterBrokerId", "master_broker_id", LONG),
        F("masterAddress", "master_address", STRING),
        F("masterEpoch", "master_epoch", INTEGER),
    )


class GetMetaDataResponseHeader(CommandHeader):
    """Answer to CONTROLLER_GET_METADATA_INFO (1005, which has no request header); ``isLeader``
    is a primitive, always sent."""

    FIELDS = (
        F("group", "group", STRING),
        F("controllerLeaderId", "controller_leader_id", STRING),
        F("controllerLeaderAddress", "controller_leader_address", STRING),
        F("isLeader", "is_leader", BOOLEAN, False, False),
        F("peers", "peers", STRING),
    )


class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """NOTIFY_BROKER_ROLE_CHANGED (1008): pushed oneway *by* the controller to a broker."""

    FIELDS = (
        F("masterAddress", "master_address", STRING),
        F("masterEpoch", "master_epoch", INTEGER),
        F("syncStateSetEpoch", "sync_state_set_epoch", INTEGER),
        F("masterBrokerId", "master_broker_id", LONG),
    )


class CleanControllerBrokerDataRequestHeader(CommandHeader):
    """CLEAN_BROKER_DATA (1011, ``mqadmin cleanBrokerMetadata``); ``brokerName`` is
    ``@CFNotNull`` and has no default."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING, True),
        F("brokerControllerIdsToClean", "broker_controller_ids_to_clean", STRING),
        F("isCleanLivingBroker", "is_clean_living_broker", BOOLEAN, False, False),
        F("invokeTime", "invoke_time", LONG),
    )


class GetNextBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012, 5.1.1+)."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
    )


class GetNextBrokerIdResponseHeader(CommandHeader):
    """Answer to CONTROLLER_GET_NEXT_BROKER_ID."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
        F("nextBrokerId", "next_broker_id", LONG),
    )


class ApplyBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_APPLY_BROKER_ID (1013, 5.1.1+); ``registerCheckCode`` is
    ``address;timestamp``."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
        F("appliedBrokerId", "applied_broker_id", LONG),
        F("registerCheckCode", "register_check_code", STRING),
    )


class ApplyBrokerIdResponseHeader(CommandHeader):
    """Answer to CONTROLLER_APPLY_BROKER_ID."""

    FIELDS = (
        F("clusterName", "cluster_name", STRING),
        F("brokerName", "broker_name", STRING),
    )


_CLASSES = {name: cls for name, cls in globals().items()
            if isinstance(cls, type) and issubclass(cls, CommandHeader)}
#: Request code -> header class of the request (codes absent here carry no custom header), from
#: the catalogue's declarations.
REQUEST_HEADERS = resolve("request", _CLASSES, __name__)
#: Request code -> header class of its successful answer, from the catalogue's declarations.
RESPONSE_HEADERS = resolve("reply", _CLASSES, __name__)


def request_header_class(code):
    """Header class of a request code, or ``None`` (no header, or a code we do not know)."""
    try:
        return REQUEST_HEADERS.get(code)
    except TypeError:
        return None


def response_header_class(code):
    """Header class of the successful answer to a request code, or ``None``."""
    try:
        return RESPONSE_HEADERS.get(code)
    except TypeError:
        return None


def decode_request_header(command, *, strict=True):
    """The typed header of a request command, or ``None`` if its code has none."""
    cls = request_header_class(command.code)
    return None if cls is None else cls.from_ext_fields(command.ext_fields, strict=strict)
