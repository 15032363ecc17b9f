"""Wire codec layer: the JSON (and zlib) bodies the NameServer reads and writes: the Java beans of
``org.apache.rocketmq.remoting.protocol`` (``common.protocol`` before 5.1) from ``DataVersion``
to the static-topic ``TopicQueueMappingInfo``/``Detail``.

Each bean declares its properties once (:class:`P`); one base class converts both ways through
:mod:`rocketpy.remoting.fastjson`. Output follows fastjson: properties sorted by name, ``None``
left out, maps in their own order (callers arrange Java's ``HashMap`` order with
:mod:`rocketpy.remoting.javahash`), ``int`` keys for Java's ``Long``/``Integer`` keys (unquoted
in the legacy dialect). ``to_json(standard=True)`` is the dialect routes are sent in to clients
>= V4_9_4.

Exact re-encoding: a parsed bean remembers its keys, in order, and keeps unknown ones
(``extras``), so ``X.from_json(b).to_json() == b`` for what Java writes (a 4.9 ``DataVersion``
stays without ``stateVersion``, a 4.8 ``QueueData`` keeps ``topicSynFlag``). An absent property
takes the Java field's initial value; :meth:`JsonBean.canonical` gives what *Java 5.3* would
write.

The compressed ``RegisterBrokerBody``: a zlib stream of ``int32 length + bytes`` parts --
DataVersion JSON, topic count, one text line per topic (``name readQ writeQ perm filterType``,
from 5.0 plus ``" " + attributes JSON``), the filter server list, and from V5_0_0 the
``TopicQueueMappingInfo`` parts. It is inflated lazily, part by part as Java's
``InflaterInputStream`` reads it, up to :data:`DEFAULT_MAX_INFLATED` (64 MiB, 4x the frame
limit: far more than any genuine body's text form, while a zip bomb stops there); a part whose
length alone passes the bound is refused before it is inflated, and so is a JSON part (the filter
servers, a mapping) over :data:`MAX_JSON_PART`. Every part is charged to the decode's
:class:`~rocketpy.remoting.budget.DecodeBudget` as it is read: inflated bytes as they come, the
declared topic and mapping counts before the first, a JSON part's values before it is parsed.
Every decoding failure raises :class:`~rocketpy.remoting.errors.BodyDecodeError`."""
import json
import struct
from decimal import Decimal
import zlib
from operator import itemgetter
from typing import Any, Callable, NamedTuple

from . import fastjson
from .budget import ITEM_COST, DecodeBudget
from .catalogue import resolve
from .codes import MQVersion
from .errors import BodyDecodeError, CrcMismatchError
from .javahash import concurrent_hashmap_copy_order, concurrent_hashmap_order, hashmap_ordered
from .lengths import MAX_NAME_LENGTH, NameTooLongError, check_name
from .numbers import INT32, INT64, NumberError, cast_to_integer, parse_java_integer

__all__ = [
    "P", "JsonBean", "body_crc32", "check_body_crc32", "DEFAULT_MAX_INFLATED", "MAX_JSON_PART",
    "TOPIC_FILTER_TYPES",
    "DataVersion", "TopicConfig", "TopicConfigSerializeWrapper",
    "TopicConfigAndMappingSerializeWrapper", "TopicQueueMappingInfo", "TopicQueueMappingDetail",
    "LogicQueueMappingItem", "RegisterBrokerBody", "read_compressed", "read_register_broker_body",
    "register_broker_body_records", "charge_plain", "QueueData", "BrokerData",
    "TopicRouteData", "ClusterInfo", "TopicList", "KVTable", "RegisterBrokerResult",
    "BrokerMemberGroup", "GetBrokerMemberGroupResponseBody", "GetRemoteClientConfigBody",
    "GroupList", "java_view", "SyncStateSet", "ElectMasterResponseBody", "ReplicaIdentity",
    "ReplicasInfo", "BrokerReplicasInfo", "EpochEntry", "EpochEntryCache", "broker_name_list",
    "encode_broker_name_list", "REQUEST_BODIES", "REPLY_BODIES",
]

#: Bound on the inflated size of a compressed RegisterBrokerBody (4x the 16 MiB frame limit).
DEFAULT_MAX_INFLATED = 4 * 16 * 1024 * 1024
#: Bound on one JSON part of a compressed RegisterBrokerBody (the filter server list, one
#: ``TopicQueueMappingInfo``): 10,000 filter servers or a mapping of 65,536 queues take well under
#: 1 MiB, and a parse holds a few copies of its text at once.
MAX_JSON_PART = 4 * 1024 * 1024

#: ``TopicFilterType`` enum names.
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def body_crc32(body):
    """``UtilAll.crc32``: CRC-32 of the body, masked to a non-negative Java int."""
    return zlib.crc32(body or b"") & 0x7FFFFFFF


def check_body_crc32(body, expected):
    """``DefaultRequestProcessor.checksum``: a non-zero ``bodyCrc32`` must match the body.

    Raises :class:`CrcMismatchError` (Java answers SYSTEM_ERROR "crc32 not match").
    """
    if expected and expected != body_crc32(body):
        raise CrcMismatchError(f"bodyCrc32 {expected} does not match the body's {body_crc32(body)}")


class _Root(str):
    """A body's name at the root of its location path, carrying the fastjson release that reads
    it (:meth:`JsonBean._smart_match`)."""

    def __new__(cls, name, dialect):
        self = super().__new__(cls, name)
        self.dialect = dialect
        return self


# --- value converters: (load(json_value, where) -> python, dump(python) -> json_value | None)

class Conv(NamedTuple):
    """How one property converts: ``load`` from parsed JSON, ``dump`` back (None = as is)."""

    load: Callable[[Any, Any], Any]
    dump: "Callable[[Any], Any] | None" = None
    #: values of exactly this type are taken as they are, without calling ``load``
    exact: "type | None" = None


def _path(where):
    """Render a location: a str, or a ``(parent, key)`` chain built lazily while parsing."""
    keys = []
    while isinstance(where, tuple):
        where, key = where
        if isinstance(key, int):
            keys.append(f"[{key}]")
        elif isinstance(key, tuple):  # a map key
            keys.append(f"[{key[0]!r}]")
        else:
            keys.append(f".{key}")
    return where + "".join(reversed(keys))


def _fail(where, what, value):
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    raise BodyDecodeError(f"{_path(where)}: {what}, got {text}")


def _load_str(value, where):
    if isinstance(value, str):
        return value
    if value is True or value is False:  # fastjson turns scalars into the String field's text
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    _fail(where, "expected a string", value)


def _int_loader(bounds):
    """An ``int`` (``bounds`` INT32) or ``long`` property as fastjson sets it: the one reader,
    :func:`~rocketpy.remoting.numbers.cast_to_integer`; null leaves the property unset."""
    low, high = bounds
    kind = "int" if bounds is INT32 else "long"

    def load(value, where):
        if value.__class__ is int and low <= value <= high:
            return value
        try:
            return cast_to_integer(value, bounds, kind == "int" or _dialect(where).long_booleans)
        except NumberError as exc:
            _fail(where, f"expected an integer (a Java {kind}: {exc})", value)
    return load


def _dialect(where):
    """The fastjson release reading the body at ``where`` (its root says)."""
    while isinstance(where, tuple):
        where = where[0]
    return getattr(where, "dialect", fastjson.FASTJSON_1_2_83)


def _load_bool(value, where):
    if value is True or value is False:
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if type(value) is int and value in (0, 1):
        return bool(value)
    _fail(where, "expected a boolean", value)


def _load_filter_type(value, where):
    if value in TOPIC_FILTER_TYPES:
        return value
    if type(value) is int and 0 <= value < len(TOPIC_FILTER_TYPES):  # fastjson takes ordinals
        return TOPIC_FILTER_TYPES[value]
    _fail(where, f"expected one of {TOPIC_FILTER_TYPES}", value)


def _load_name(value, where):
    """A name, address or check code a table keeps: a string of at most
    :data:`~rocketpy.remoting.lengths.MAX_NAME_LENGTH` characters (a rocketpy bound)."""
    text = _load_str(value, where)
    if len(text) > MAX_NAME_LENGTH:
        raise NameTooLongError(_path(where), len(text))
    return text


STR = Conv(_load_str, None, str)
#: a string the NameServer or controller keeps (a topic, a broker or cluster name, an address)
NAME = Conv(_load_name)
INT = Conv(_int_loader(INT32))
LONG = Conv(_int_loader(INT64))
BOOL = Conv(_load_bool, None, bool)
FILTER_TYPE = Conv(_load_filter_type)


def list_of(item):
    """A Java ``List``/``Set`` (a JSON array; kept as a list, in order)."""
    load_item, dump_item = item.load, item.dump

    def load(value, where):
        if not isinstance(value, list):
            _fail(where, "expected an array", value)
        return [load_item(v, (where, i)) for i, v in enumerate(value)]

    dump = None if dump_item is None else (lambda items: [dump_item(v) for v in items])
    return Conv(load, dump)


def map_of(value_conv, long_keys=False, keys=STR):
    """A Java ``Map<String, V>`` (its keys read as ``keys``: :data:`NAME` for names a table
    keeps), or ``Map<Long|Integer, V>`` with ``int`` keys."""
    load_value, dump_value = value_conv.load, value_conv.dump
    load_key = _int_loader(INT64) if long_keys else keys.load

    def load(value, where):
        if not isinstance(value, dict):
            _fail(where, "expected an object", value)
        return {load_key(k, where): load_value(v, (where, (k,))) for k, v in value.items()}

    dump = None if dump_value is None else (
        lambda mapping: {k: dump_value(v) for k, v in mapping.items()})
    return Conv(load, dump)


def bean(cls):
    """A nested bean."""
    return Conv(cls._from_obj, _dump_bean)


def _dump_bean(obj):
    return obj.to_obj()


class P(NamedTuple):
    """One bean property: fastjson name, attribute, converter, Java initial value.

    ``factory`` makes a fresh mutable initial value (Java ``= new HashMap<>()``); ``aliases``
    are older names accepted on input (and kept on re-encoding); ``since`` is the first
    ``MQVersion`` whose Java class has the property (None: every version read here, 4.9 on).
    """

    wire: str
    attr: str
    conv: Conv
    default: Any = None
    factory: "Callable[[], Any] | None" = None
    aliases: "tuple[str, ...]" = ()
    since: "int | None" = None


def _flagged(nulls, attr):
    """``nulls`` (an empty tuple until the first: most beans have none) with ``attr`` added."""
    if not nulls:
        nulls = set()
    nulls.add(attr)
    return nulls


class JsonBean:
    """Base of the body types: declare ``PROPS``; get ``from_json``/``to_json`` and friends."""

    PROPS: "tuple[P, ...]" = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        by_wire = {}
        for prop in cls.PROPS:
            for name in (prop.wire,) + prop.aliases:
                by_wire[name] = prop
        cls._BY_WIRE = by_wire
        # wire name -> (attribute, loader, exact type): the parsing hot path
        cls._LOADERS = {name: (prop.attr, prop.conv.load, prop.conv.exact)
                        for name, prop in by_wire.items()}
        # encoding: (wire, attribute, dumper) sorted by name as fastjson sorts bean properties
        cls._OUTPUT = tuple((prop.wire, prop.attr, prop.conv.dump)
                            for prop in sorted(cls.PROPS, key=lambda prop: prop.wire))
        cls._DUMPERS = {name: (prop.attr, prop.conv.dump) for name, prop in by_wire.items()}
        cls._ATTRS = frozenset(prop.attr for prop in cls.PROPS)
        cls._WIRE = {prop.attr: prop.wire for prop in cls.PROPS}
        # One sample initial value per property, only ever compared, never handed out.
        cls._INITIAL = {prop.attr: prop.factory() if prop.factory else prop.default
                        for prop in cls.PROPS}

    @classmethod
    def wire_name(cls, attr):
        """The fastjson name of the property ``attr`` (for readers that only count)."""
        return cls._WIRE[attr]

    def __init__(self, **values):
        unknown = set(values) - self._ATTRS - {"extras"}
        if unknown:
            names = ", ".join(sorted(unknown))
            raise TypeError(f"{type(self).__name__} has no propert(ies) {names}")
        for prop in self.PROPS:
            if prop.attr in values:
                value = values[prop.attr]
            else:
                value = prop.factory() if prop.factory else prop.default
            setattr(self, prop.attr, value)
        self.extras = dict(values.get("extras") or {})
        self._present = None

    # -- decoding

    @classmethod
    def from_json(cls, data, dialect=fastjson.FASTJSON_1_2_83, budget=None):
        """Parse a body (bytes or str) as ``dialect`` (the fastjson release of the Java side)
        reads it: fastjson's output in either dialect, and every form its parser takes beyond
        JSON (:func:`~rocketpy.remoting.fastjson.loads_lenient`, charging ``budget`` as it
        reads), keys matched to properties as :meth:`_smart_match` says."""
        if data is None:
            raise BodyDecodeError(f"{cls.__name__}: no body")
        return cls._from_obj(fastjson.loads_lenient(data, repeats=True, budget=budget),
                             _Root(cls.__name__, dialect))

    @classmethod
    def from_request(cls, data, dialect=fastjson.FASTJSON_1_2_83, budget=None):
        """:meth:`from_json`, but None for a body that is JSON ``null`` (comments and blanks
        around it too), which ``JSON.parseObject`` reads as a null bean."""
        obj = fastjson.loads_lenient(data, repeats=True, budget=budget)
        return None if obj is None else cls._from_obj(obj, _Root(cls.__name__, dialect))

    @classmethod
    def _smart_match(cls, key, where):
        """The property ``JavaBeanDeserializer.smartMatch`` finds for a key that is no
        property's exact name (case ignored; in 1.2.83 also ``_`` and ``-``; a boolean property
        also after ``is``), or None. The dialect rides on the root of ``where``."""
        if not isinstance(key, str):
            return None
        while isinstance(where, tuple):
            where = where[0]
        dialect = getattr(where, "dialect", fastjson.FASTJSON_1_2_83)
        smart = cls.__dict__.get("_SMART")
        if smart is None:
            smart = cls._SMART = {}
        names = smart.get(dialect)
        if names is None:
            names = smart[dialect] = {}
            for name, entry in cls._LOADERS.items():
                names.setdefault(dialect.smart_key(name), entry)
        entry = names.get(dialect.smart_key(key))
        if entry is None and key.startswith("is"):
            entry = names.get(dialect.smart_key(key[2:]))
            if entry is not None and entry[2] is not bool:
                return None
        return entry

    @classmethod
    def _from_obj(cls, obj, where):
        if not isinstance(obj, dict):
            _fail(where, "expected an object", obj)
        loaders = cls._LOADERS
        values = {}
        extras = {}
        smart = None   # properties set through a smart-matched key: a later key for one is ignored
        nulls = ()     # properties an exact key set to null: their flag is set, as a value's
        # a key written twice (its exact name): fastjson's set flag keeps the first value, a
        # first null too (JavaBeanDeserializer.getFieldDeserializer), a later key is ignored
        seen = set() if obj.__class__ is fastjson.Repeated else None
        for key, value in obj.pairs if seen is not None else obj.items():
            entry = loaders.get(key)
            if entry is None:
                entry = cls._smart_match(key, where)
                if entry is None:
                    extras[key] = value
                    continue
                if smart is None:
                    smart = set()
                if entry[0] in smart or entry[0] in values or entry[0] in nulls:
                    continue
                smart.add(entry[0])
            elif smart is not None and entry[0] in smart:
                continue
            if seen is not None:
                if entry[0] in seen:
                    continue
                seen.add(entry[0])
            if value is not None:
                attr, load, exact = entry
                if type(value) is not exact:
                    value = load(value, (where, key))
                    if value is None:   # read as null ("" for an int): left at its initial value
                        nulls = _flagged(nulls, attr)
                        continue
                values[attr] = value
            else:
                nulls = _flagged(nulls, entry[0])
        if len(values) != len(cls.PROPS):
            for prop in cls.PROPS:
                if prop.attr not in values:
                    values[prop.attr] = prop.factory() if prop.factory else prop.default
        values["extras"] = extras
        values["_present"] = dict.fromkeys(obj)
        self = cls.__new__(cls)
        self.__dict__ = values
        return self

    # -- encoding

    def to_obj(self):
        """The JSON-ready dict fastjson would write for this bean."""
        values = self.__dict__
        extras = self.extras
        present = self._present
        if present is None and not extras:  # built here: every non-null property, by name
            out = {}
            for wire, attr, dump in self._OUTPUT:
                value = values[attr]
                if value is not None:
                    out[wire] = value if dump is None else dump(value)
            return out
        out = {}
        done = set()
        if present is not None:  # parsed: the keys it came with, in their order
            for key in present:
                entry = self._DUMPERS.get(key)
                if entry is None:
                    value = extras.get(key)
                    if value is not None:
                        out[key] = value
                    continue
                attr, dump = entry
                if attr in done:
                    continue
                done.add(attr)
                value = values[attr]
                if value is not None:
                    out[key] = value if dump is None else dump(value)
        added = False
        initial = self._INITIAL
        for wire, attr, dump in self._OUTPUT:
            if attr in done:
                continue
            value = values[attr]
            # a property the parsed JSON lacked is written only once it differs from Java's
            # initial value (fastjson would have written it, so it was changed since)
            if value is not None and (present is None or value != initial[attr]):
                out[wire] = value if dump is None else dump(value)
                added = True
        for key, value in extras.items():
            if value is not None and (present is None or key not in present):
                out[key] = value
                added = True
        if added:
            return {key: out[key] for key in sorted(out)}
        return out

    def to_json(self, standard=False):
        """fastjson bytes: legacy dialect by default, ``standard=True`` for V4_9_4+ routes."""
        return fastjson.dumps(self.to_obj(), standard)

    encode = to_json

    def canonical(self):
        """A copy that encodes as Java 5.3 writes these values (forgets the parsed key set)."""
        copy = type(self)._from_obj(self.to_obj(), type(self).__name__)
        _forget(copy)
        return copy

    def for_version(self, version):
        """A copy as a Java peer of ``version`` holds these values: the properties its classes
        lack (``since`` a later version) are dropped, unknown keys forgotten. What a 4.9 broker
        writes of a bean built here, or what a 4.9 ``mqadmin`` prints of a 5.x answer."""
        copy = self.canonical()
        _restrict(copy, version)
        return copy

    # -- value semantics

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return (all(getattr(self, a) == getattr(other, a) for a in self._ATTRS)
                and self.extras == other.extras)

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{prop.attr}={getattr(self, prop.attr)!r}" for prop in self.PROPS)
        return f"{type(self).__name__}({inner})"


def _restrict(value, version):
    """Drop, in place, what a Java peer of ``version`` does not have (see ``for_version``)."""
    if isinstance(value, JsonBean):
        value.extras = {}
        for prop in value.PROPS:
            if prop.since is not None and prop.since > version:
                setattr(value, prop.attr, None)
            else:
                _restrict(getattr(value, prop.attr), version)
    elif isinstance(value, dict):
        for item in value.values():
            _restrict(item, version)
    elif isinstance(value, list):
        for item in value:
            _restrict(item, version)


def java_view(value, version=None):
    """``value`` (a bean, or maps and lists of them) as a Java client re-serialises what it
    decoded: beans as :class:`~rocketpy.remoting.fastjson.Bean` (properties sorted, nulls left
    out), every map a ``HashMap`` in its iteration order, and with ``version`` only the
    properties that version's classes have. Feed it to :func:`fastjson.dumps` (``pretty=True``
    for ``JSON.toJSONString(obj, true)``, as ``mqadmin topicRoute`` prints)."""
    if isinstance(value, JsonBean):
        values = value.__dict__
        return fastjson.Bean(
            (wire, java_view(values[attr], version)) for wire, attr, _ in value._OUTPUT
            if values[attr] is not None
            and (version is None or value._BY_WIRE[wire].since is None
                 or value._BY_WIRE[wire].since <= version))
    if isinstance(value, dict):
        return {key: java_view(item, version) for key, item in hashmap_ordered(value).items()}
    if isinstance(value, list):
        return [java_view(item, version) for item in value]
    return value


def _forget(value):
    """Drop the parsed key memory of a bean tree, so it encodes like a freshly built one."""
    if isinstance(value, JsonBean):
        value._present = None
        for prop in value.PROPS:
            _forget(getattr(value, prop.attr))
    elif isinstance(value, dict):
        for item in value.values():
            _forget(item)
    elif isinstance(value, list):
        for item in value:
            _forget(item)


# --- the beans -------------------------------------------------------------------------------

class DataVersion(JsonBean):
    """``DataVersion``: a broker's topic-config version. ``stateVersion`` since 5.0."""

    PROPS = (
        P("counter", "counter", LONG, 0),
        P("stateVersion", "state_version", LONG, 0, since=MQVersion.V5_0_0),
        P("timestamp", "timestamp", LONG, 0),
    )

    def sort_key(self):
        """Java ``DataVersion.compare`` order: stateVersion, then counter, then timestamp."""
        return (self.state_version, self.counter, self.timestamp)


class TopicConfig(JsonBean):
    """``TopicConfig`` (broker side). ``attributes`` since 5.0 (Java initial value ``{}``)."""

    PROPS = (
        P("attributes", "attributes", map_of(STR), factory=dict, since=MQVersion.V5_0_0),
        P("order", "order", BOOL, False),
        P("perm", "perm", INT, 6),
        P("readQueueNums", "read_queue_nums", INT, 16),
        P("topicFilterType", "topic_filter_type", FILTER_TYPE, "SINGLE_TAG"),
        P("topicName", "topic_name", NAME),
        P("topicSysFlag", "topic_sys_flag", INT, 0),
        P("writeQueueNums", "write_queue_nums", INT, 16),
    )

    def to_text(self, with_attributes=True):
        """``TopicConfig.encode()``: the line of the compressed registration.

        5.x (``with_attributes``): ``name r w perm type `` + attributes JSON (nothing when
        ``attributes`` is None, leaving the trailing blank). 4.x: the first five only.
        """
        text = (f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
                f"{self.perm} {self.topic_filter_type}")
        if with_attributes:
            text += " "
            if self.attributes is not None:
                text += fastjson.dumps(self.attributes).decode("utf-8")
        return text

    @classmethod
    def from_part(cls, raw, index):
        """Topic line number ``index`` of a compressed registration (UTF-8 bytes), as Java
        reads it: ``new String(bytes, UTF_8)`` then :meth:`from_text`."""
        return cls.from_text(_utf8(raw, f"topic config #{index}"), f"TopicConfig #{index}")

    @classmethod
    def from_text(cls, text, where="TopicConfig"):
        """``TopicConfig.decode(String)`` of 5.3: split on blanks; the 6th part is attributes.

        A missing 6th part gives ``attributes=None`` (so re-encoding restores the line); an
        unparsable one is ignored as Java ignores it (``{}``). Fewer than five parts -- Java
        then puts a null topic name into a ConcurrentHashMap and fails -- raises.
        """
        parts = text.split(" ")
        while parts and parts[-1] == "":  # String.split drops trailing empty strings
            parts.pop()
        if len(parts) < 5:
            _fail(where, "topic config line has fewer than 5 fields", text)
        if parts[4] not in TOPIC_FILTER_TYPES:
            _fail(where, f"topicFilterType must be one of {TOPIC_FILTER_TYPES}", parts[4])
        attributes = None
        if len(parts) >= 6:
            if parts[5] == "{}":
                attributes = {}
            else:
                try:
                    parsed = fastjson.loads(parts[5])
                    if not isinstance(parsed, dict):
                        raise BodyDecodeError("attributes are not an object")
                    attributes = {_load_str(k, where): _load_str(v, where)
                                  for k, v in parsed.items() if v is not None}
                except BodyDecodeError:
                    attributes = {}
        self = cls.__new__(cls)
        self.__dict__ = {
            "attributes": attributes, "order": False,
            "perm": _parse_java_int(parts[3], (where, "perm")),
            "read_queue_nums": _parse_java_int(parts[1], (where, "readQueueNums")),
            "topic_filter_type": parts[4], "topic_name": check_name(parts[0], f"{where}'s name"),
            "topic_sys_flag": 0,
            "write_queue_nums": _parse_java_int(parts[2], (where, "writeQueueNums")),
            "extras": {}, "_present": None,
        }
        return self


def _parse_java_int(text, where):
    if text.isascii() and text.isdigit() and len(text) < 10:
        return int(text)
    try:
        return parse_java_integer(text, INT32)                 # Integer.parseInt
    except NumberError as exc:
        _fail(where, f"not a Java int ({exc})", text)


class LogicQueueMappingItem(JsonBean):
    """``LogicQueueMappingItem`` (static topics)."""

    PROPS = (
        P("bname", "bname", NAME),
        P("endOffset", "end_offset", LONG, -1),
        P("gen", "gen", INT, 0),
        P("logicOffset", "logic_offset", LONG, 0),
        P("queueId", "queue_id", INT, 0),
        P("startOffset", "start_offset", LONG, 0),
        P("timeOfEnd", "time_of_end", LONG, -1),
        P("timeOfStart", "time_of_start", LONG, -1),
    )


_TQMI_PROPS = (
    P("bname", "bname", NAME),
    P("currIdMap", "curr_id_map", map_of(INT, long_keys=True), factory=dict),
    P("dirty", "dirty", BOOL, False),
    P("epoch", "epoch", LONG, 0),
    P("scope", "scope", STR, "__global__"),
    P("topic", "topic", NAME),
    P("totalQueues", "total_queues", INT, 0),
)


class TopicQueueMappingInfo(JsonBean):
    """``TopicQueueMappingInfo`` (static topics, 5.0+): ``currIdMap`` has Integer keys."""

    PROPS = _TQMI_PROPS


class TopicQueueMappingDetail(JsonBean):
    """``TopicQueueMappingDetail``: the info plus ``hostedQueues`` (Integer -> items)."""

    PROPS = tuple(sorted(
        _TQMI_PROPS + (P("hostedQueues", "hosted_queues",
                         map_of(list_of(bean(LogicQueueMappingItem)), long_keys=True),
                         factory=dict),),
        key=lambda prop: prop.wire))


_TCSW_PROPS = (
    P("dataVersion", "data_version", bean(DataVersion), factory=DataVersion),
    P("topicConfigTable", "topic_config_table", map_of(bean(TopicConfig), keys=NAME),
      factory=dict),
)


class TopicConfigSerializeWrapper(JsonBean):
    """``TopicConfigSerializeWrapper``: the broker's topics and their DataVersion."""

    PROPS = _TCSW_PROPS


class TopicConfigAndMappingSerializeWrapper(JsonBean):
    """``TopicConfigAndMappingSerializeWrapper`` (5.0+): adds the static-topic mappings."""

    PROPS = tuple(sorted(_TCSW_PROPS + (
        P("mappingDataVersion", "mapping_data_version", bean(DataVersion), factory=DataVersion,
          since=MQVersion.V5_0_0),
        P("topicQueueMappingDetailMap", "topic_queue_mapping_detail_map",
          map_of(bean(TopicQueueMappingDetail)), factory=dict, since=MQVersion.V5_0_0),
        P("topicQueueMappingInfoMap", "topic_queue_mapping_info_map",
          map_of(bean(TopicQueueMappingInfo)), factory=dict, since=MQVersion.V5_0_0),
    ), key=lambda prop: prop.wire))


_I32 = struct.Struct(">i")


class _Inflated:
    """Reads ``int32``-length-prefixed parts from a zlib stream lazily, as Java's
    ``InflaterInputStream`` does: only what the parts need is inflated, never more than
    ``max_inflated`` bytes in all, and a part whose length alone would pass that bound is refused
    before any of it is inflated (a zip bomb costs a few bytes of inflation, not the bound).
    Each inflated chunk is charged to ``budget`` as it comes."""

    _CHUNK = 1 << 16

    def __init__(self, data, max_inflated, budget=None):
        self.budget = budget if budget is not None else DecodeBudget(0)
        self._inflater = zlib.decompressobj()
        self._data = memoryview(data)
        self._in_pos = 0            # input is handed over in _CHUNK slices: zlib copies the
        self._buf = b""             # unconsumed rest of what it is given on every call
        self._pos = 0
        self._inflated = 0
        self._consumed = 0
        self.max_inflated = max_inflated

    def _fill(self, need, what):
        inflater = self._inflater
        while len(self._buf) - self._pos < need:
            source = inflater.unconsumed_tail
            if not source and self._in_pos < len(self._data):
                source = self._data[self._in_pos:self._in_pos + self._CHUNK]
                self._in_pos += len(source)
            room = self.max_inflated - self._inflated
            want = min(max(need - (len(self._buf) - self._pos), self._CHUNK), room)
            chunk = b""
            if want > 0 and not inflater.eof:
                try:
                    chunk = inflater.decompress(source, want)
                except zlib.error as exc:
                    raise BodyDecodeError(f"compressed RegisterBrokerBody: bad zlib data ({exc})") from None
            if not chunk:
                if source and want > 0 and not inflater.eof:
                    continue        # input consumed without output yet (headers, block ends)
                raise BodyDecodeError(
                    f"compressed RegisterBrokerBody: end of compressed data reading {what}")
            self._inflated += len(chunk)
            self.budget.spend(len(chunk), what)
            self._buf = self._buf[self._pos:] + chunk if self._pos < len(self._buf) else chunk
            self._pos = 0

    def read(self, length, what, max_length=None):
        if max_length is not None and length > max_length:
            raise BodyDecodeError(
                f"compressed RegisterBrokerBody: {what} of {length} bytes, over {max_length}")
        if length < 0:
            raise BodyDecodeError(
                f"compressed RegisterBrokerBody: negative length {length} of {what}")
        if self._consumed + length > self.max_inflated:
            raise BodyDecodeError(
                f"compressed RegisterBrokerBody inflates past {self.max_inflated} bytes "
                f"({what} of {length} bytes)")
        self._fill(length, what)
        end = self._pos + length
        chunk = self._buf[self._pos:end]
        self._pos = end
        self._consumed += length
        return chunk

    def read_int(self, what):
        return _I32.unpack(self.read(4, what))[0]

    def read_part(self, what, max_length=None):
        return self.read(self.read_int(what), what, max_length)

    def read_json(self, what):
        """A JSON part (at most :data:`MAX_JSON_PART`), its values charged before it is parsed."""
        raw = self.read_part(what, MAX_JSON_PART)
        self.budget.spend_json(raw, what)
        return raw

    def parts(self, count, what):
        """The next ``count`` parts (the topic lines), exactly as ``count`` calls of
        ``read_part(f"{what} #{i}")`` would give them, with the same errors; a part already
        inflated is sliced out here without those calls (a broker sends one line per topic,
        and a bomb millions). The lines are charged, by the count, before the first."""
        if count > 0:
            self.budget.spend_items(count, f"{count} {what}s")
        unpack = _I32.unpack_from
        buf, pos = self._buf, self._pos
        base = self._consumed - pos                  # consumed at the buffer's start
        bound = min(len(buf), self.max_inflated - base)
        for i in range(count):
            start = pos + 4
            if start <= bound:
                (length,) = unpack(buf, pos)
                end = start + length
                if start <= end <= bound:            # not negative, inflated, within the bound
                    pos = end
                    yield buf[start:end]
                    continue
            # not all inflated yet, or an error to report: the general path, from the same state
            self._pos, self._consumed = pos, base + pos
            yield self.read_part(f"{what} #{i}")
            buf, pos = self._buf, self._pos
            base = self._consumed - pos
            bound = min(len(buf), self.max_inflated - base)
        self._pos, self._consumed = pos, base + pos


def _utf8(raw, what):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyDecodeError(f"{what} is not UTF-8: {exc}") from None


def read_compressed(data, broker_version, read_topics, max_inflated=DEFAULT_MAX_INFLATED,
                    budget=None, check_mappings=None):
    """The parts of a compressed ``RegisterBrokerBody`` (Java ``RegisterBrokerBody.decode``):
    ``(DataVersion, read_topics(lines, count), filter server list, {topic: TopicQueueMappingInfo}
    or None before V5_0_0)``. ``read_topics`` gets the raw topic lines lazily (a bad one raises when
    reached) and the declared count before any is inflated, and returns what its caller keeps: beans
    for :meth:`RegisterBrokerBody.decode`, route records for the NameServer, so both read the wire
    through one lazy, bounded reader (:class:`_Inflated`) charging ``budget``.
    ``check_mappings(count)`` sees the declared mapping count before any mapping is inflated."""
    stream = _Inflated(data, max_inflated, budget)
    data_version = DataVersion.from_json(stream.read_json("DataVersion"), budget=stream.budget)
    count = stream.read_int("topic count")  # a negative count reads no topic, as Java's loop
    topics = read_topics(stream.parts(count, "topic config"), count)
    raw = stream.read_json("filter server list")
    try:  # Java logs a broken list and goes on with an empty one
        filter_servers = list_of(NAME).load(fastjson.loads(raw), "filterServerList")
    except NameTooLongError:
        raise
    except BodyDecodeError:
        filter_servers = []
    infos = None
    if broker_version >= MQVersion.V5_0_0:
        infos = {}
        count = stream.read_int("topic queue mapping count")
        if check_mappings is not None:
            check_mappings(count)
        if count > 0:
            stream.budget.spend_items(count, f"{count} topic queue mappings")
        for i in range(count):
            info = TopicQueueMappingInfo.from_json(stream.read_json(f"topic queue mapping #{i}"),
                                                   budget=stream.budget)
            infos[info.topic] = info
    return data_version, topics, filter_servers, infos


#: a DataVersion's JSON is ~70 bytes; :func:`compressed_topic_count` reads no longer one
_MAX_DATA_VERSION_PART = 1 << 16


def compressed_topic_count(data):
    """The topic count a compressed ``RegisterBrokerBody`` declares, inflating only the
    DataVersion part and the count (what :func:`read_compressed` reads first); None when they do
    not read. For summaries of bodies from strangers: a zip bomb costs a few bytes here."""
    stream = _Inflated(data, 2 * _I32.size + _MAX_DATA_VERSION_PART)
    try:
        stream.read_part("DataVersion")
        return stream.read_int("topic count")
    except BodyDecodeError:
        return None


def _topic_beans(lines, _count):
    table = {}
    for i, raw in enumerate(lines):
        topic = TopicConfig.from_part(raw, i)
        table[topic.topic_name] = topic
    return table


class RegisterBrokerBody(JsonBean):
    """``RegisterBrokerBody``: REGISTER_BROKER's body, JSON or compressed."""

    PROPS = (
        P("filterServerList", "filter_server_list", list_of(NAME), factory=list),
        P("topicConfigSerializeWrapper", "topic_config_serialize_wrapper",
          bean(TopicConfigAndMappingSerializeWrapper),
          factory=TopicConfigAndMappingSerializeWrapper),
    )

    @property
    def data_version(self):
        return self.topic_config_serialize_wrapper.data_version

    @property
    def topic_config_table(self):
        return self.topic_config_serialize_wrapper.topic_config_table

    @classmethod
    def decode(cls, data, compressed, broker_version=MQVersion.V5_3_3,
               max_inflated=DEFAULT_MAX_INFLATED, budget=None, dialect=fastjson.FASTJSON_1_2_83):
        """``RegisterBrokerBody.decode(data, compressed, brokerVersion)`` of 5.3.

        ``broker_version`` is the request's ``version``: the queue-mapping tail of the
        compressed form is read only from V5_0_0 on. No body (``None`` or empty, which Java
        reads as null) gives an empty body whose DataVersion is all zeros, as the Java
        NameServer builds it. ``budget`` is charged as :func:`read_compressed` and
        :func:`charge_plain` say; a JSON body is read as ``dialect`` reads it.
        """
        if not data:
            return cls()
        if not compressed:
            charge_plain(budget, data)
            return cls.from_json(data, dialect, budget)
        data_version, table, filter_servers, infos = read_compressed(
            data, broker_version, _topic_beans, max_inflated, budget)
        self = cls()
        self.filter_server_list = filter_servers
        wrapper = self.topic_config_serialize_wrapper
        wrapper.data_version = data_version
        wrapper.topic_config_table = table
        wrapper.topic_queue_mapping_info_map = infos
        wrapper.mapping_data_version = None
        wrapper.topic_queue_mapping_detail_map = None
        return self

    def encode(self, compress=False, broker_version=MQVersion.V5_3_3, standard=False):
        """``RegisterBrokerBody.encode(compress)`` of a broker of ``broker_version``.

        The compressed form is what a broker of that version writes (Deflater level 9): 4.x
        lines without attributes and no mapping section, 5.x with both. Java first copies the
        topic table into a fresh ``ConcurrentHashMap`` (``cloneTopicConfigTable``: default-sized
        before 5.1.1; since, sized to the table and filled by ``putAll``, which presizes it
        once more) and writes the lines in that copy's order.
        """
        if not compress:
            return self.to_json(standard)
        five = broker_version >= MQVersion.V5_0_0
        wrapper = self.topic_config_serialize_wrapper
        parts = []

        def part(raw):
            parts.append(_I32.pack(len(raw)))
            parts.append(raw)

        part(wrapper.data_version.to_json())
        table = wrapper.topic_config_table or {}
        parts.append(_I32.pack(len(table)))
        if broker_version >= MQVersion.V5_1_1:
            order = concurrent_hashmap_copy_order(table)
        else:
            order = concurrent_hashmap_order(table)
        for name in order:
            part(table[name].to_text(with_attributes=five).encode("utf-8"))
        part(fastjson.dumps(self.filter_server_list or []))
        if five:
            infos = wrapper.topic_queue_mapping_info_map or {}
            parts.append(_I32.pack(len(infos)))
            for info in infos.values():
                part(info.to_json())
        return zlib.compress(b"".join(parts), 9)

    to_json = JsonBean.to_json


# --- a RegisterBrokerBody read straight into the caller's records ---------------------------------
#
# A NameServer keeps only a few numbers of each topic, and brokers send up to ~10,000 topics every
# 30 s, so :func:`read_register_broker_body` makes them without the beans: a plain body with the
# C ``json`` parser, a compressed one with each distinct line tail parsed once. The wire names and
# Java defaults come from the beans' own property specs; anything unusual goes through the beans
# (:meth:`RegisterBrokerBody.decode`, the reference), and tests hold the two equal on every
# captured body and on random ones.

class _Unusual(Exception):
    """The fast reader leaves this body to the beans."""


_TOPIC_ATTRS = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
_TOPIC_NAME = TopicConfig._WIRE["topic_name"]
_TOPIC_FIELDS = itemgetter(*(TopicConfig._WIRE[a] for a in _TOPIC_ATTRS))
_TOPIC_DEFAULTS = tuple(TopicConfig._INITIAL[a] for a in _TOPIC_ATTRS[1:])
_FILTERS, _WRAPPER = (RegisterBrokerBody._WIRE[a] for a in
                      ("filter_server_list", "topic_config_serialize_wrapper"))
_VERSION, _TABLE, _MAPPINGS = (TopicConfigAndMappingSerializeWrapper._WIRE[a] for a in
                               ("data_version", "topic_config_table", "topic_queue_mapping_info_map"))
_COUNTER, _TIMESTAMP, _STATE = (DataVersion._WIRE[a] for a in
                                ("counter", "timestamp", "state_version"))
_INT_MIN, _INT_MAX = INT32
_LONG_MIN, _LONG_MAX = INT64
#: what a genuine topic's entry costs to parse (its ~16 JSON values)
_TOPIC_UNITS = 16 * ITEM_COST
# Keys the fast reader knows; any other (a property in another case, which fastjson matches,
# or one it ignores) sends the body to the beans
_BODY_KEYS = frozenset(RegisterBrokerBody._LOADERS)
_WRAPPER_KEYS = frozenset(TopicConfigAndMappingSerializeWrapper._LOADERS)
_VERSION_KEYS = frozenset(DataVersion._LOADERS)
_TOPIC_KEYS = frozenset(TopicConfig._LOADERS)


def _int_or_default(value, default):
    if value is None:
        return default
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise _Unusual
    return value


def _long_or_zero(value):
    if value is None:
        return 0
    if type(value) is not int or not _LONG_MIN <= value <= _LONG_MAX:
        raise _Unusual
    return value


def _object_or_empty(value, kind=dict):
    if value is None:
        return kind()
    if type(value) is not kind:
        raise _Unusual
    return value


def _read_json(data, topic, data_version, budget=None):
    """The records of a plain body in the usual shape; ``_Unusual`` for anything else. Every
    few thousand topics are reported to ``budget`` (charged already, with the body: where a
    pool may let other work take a turn)."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise _Unusual from None
    if type(obj) is not dict or not obj.keys() <= _BODY_KEYS:
        raise _Unusual
    filters = _object_or_empty(obj.get(_FILTERS), list)
    if any(type(f) is not str or len(f) > MAX_NAME_LENGTH for f in filters):
        raise _Unusual          # the beans read it (and say what is wrong)
    wrapper = _object_or_empty(obj.get(_WRAPPER))
    if wrapper.get(_MAPPINGS) or not wrapper.keys() <= _WRAPPER_KEYS:
        raise _Unusual
    version = _object_or_empty(wrapper.get(_VERSION))
    if not version.keys() <= _VERSION_KEYS:
        raise _Unusual
    configs = _object_or_empty(wrapper.get(_TABLE))
    # a key written twice: json keeps its last value, a bean property its first (fastjson's
    # set flags), so such a body goes to the beans. The usual body's keys are counted here
    # (a topic's attributes are left out: an exact scan counts them when there are some), and
    # every topic key must be a property's exact name (one set of them all, built in C)
    try:
        keys = len(obj) + len(wrapper) + sum(map(len, configs.values()))
        exact = _TOPIC_KEYS.issuperset(set().union(*configs.values()))
    except TypeError:   # a topic config that is no object
        raise _Unusual from None
    if not exact:
        raise _Unusual
    for value in wrapper.values():
        if value.__class__ is dict:
            keys += len(value)
    if fastjson.repeats_keys(data, obj, keys, sum(f.count(":") for f in filters)):
        raise _Unusual
    table = {}
    fields = _TOPIC_FIELDS
    progress = None if budget is None else budget.progress
    for name, config in configs.items():
        # the usual entry (every field there under its exact name, a name and four Java ints) in
        # one C call and two tests; anything else (absent or null fields, odd types) field by field
        try:
            values = fields(config)
            name_, read, write, perm, flag = values
        except (KeyError, TypeError):
            name_ = read = None
        if len(name) > MAX_NAME_LENGTH:
            raise _Unusual      # the beans refuse it, naming it
        if not (name_.__class__ is str and len(name_) <= MAX_NAME_LENGTH
                and read.__class__ is write.__class__ is perm.__class__ is flag.__class__ is int
                and _INT_MIN <= read <= _INT_MAX and _INT_MIN <= write <= _INT_MAX
                and _INT_MIN <= perm <= _INT_MAX and _INT_MIN <= flag <= _INT_MAX):
            values = _topic_values(name, config)
        table[name] = topic(*values)
        if progress is not None and not len(table) & 4095:
            progress(4096 * _TOPIC_UNITS, "topic config table")
    return (data_version(_long_or_zero(version.get(_COUNTER)), _long_or_zero(version.get(_TIMESTAMP)),
                         _long_or_zero(version.get(_STATE))), table, filters, {})


def _topic_values(name, config):
    """A topic's values with Java's defaults for absent or null fields."""
    if config.__class__ is not dict or not config.keys() <= _TOPIC_KEYS:
        raise _Unusual
    get = config.get
    topic = get(_TOPIC_NAME)
    if topic is None:
        topic = name
    elif topic.__class__ is not str or len(topic) > MAX_NAME_LENGTH:
        raise _Unusual
    return (topic,) + tuple(_int_or_default(get(TopicConfig._WIRE[attr]), default)
                            for attr, default in zip(_TOPIC_ATTRS[1:], _TOPIC_DEFAULTS))


#: Distinct line tails remembered per body (each a few dozen bytes): a broker's topics share a
#: handful; a hostile body with a different tail on every line just misses.
_KNOWN_TAILS = 4096
_FILTER_TYPES = frozenset(t.encode() for t in TOPIC_FILTER_TYPES)
#: Units a topic line whose tail is judged (not seen before in the body) costs on top of its
#: charge as an item: 1-4 µs against ~0.1 µs for a known tail, so a body of distinct odd lines
#: (1 M in 2.6 MB took 4 s) stops at a bound of about a second.
JUDGED_LINE_COST = 8 * ITEM_COST


def _topic_lines(lines, topic, budget=None):
    """Topic lines (``name r w perm type [attributes]``) as records, by name. A line's numbers
    depend only on what follows its name, so each distinct tail is judged once (and charged
    :data:`JUDGED_LINE_COST` to ``budget``)."""
    table = {}
    known = {}
    spend = budget.spend if budget is not None else None
    for i, raw in enumerate(lines):
        name, _, tail = raw.partition(b" ")
        numbers = known.get(tail)
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError:
            numbers = None
        if numbers is None:
            if spend is not None:
                spend(JUDGED_LINE_COST, f"topic config #{i}")
            name, numbers = _line(raw, i)
            if len(known) < _KNOWN_TAILS:
                known[tail] = numbers
        table[check_name(name, f"the name of topic config #{i}")] = topic(
            name, numbers[0], numbers[1], numbers[2], 0)
    return table


def _line(raw, i):
    """(topic name, (readQueueNums, writeQueueNums, perm)) of one topic line, judged as Java's
    ``TopicConfig.decode`` (the attributes never fail a line, and the NameServer drops them);
    :meth:`TopicConfig.from_part` for anything odd, which gives its values (``+7``) or raises
    its error."""
    parts = raw.split(b" ", 5)
    if len(parts) >= 5 and parts[4] in _FILTER_TYPES:
        read, write, perm = parts[1], parts[2], parts[3]
        if (len(read) < 10 and len(write) < 10 and len(perm) < 10 and read.isdigit()
                and write.isdigit() and perm.isdigit()):
            try:
                return raw.decode("utf-8").partition(" ")[0], (int(read), int(write), int(perm))
            except UnicodeDecodeError:
                pass
    config = TopicConfig.from_part(raw, i)
    return config.topic_name, (config.read_queue_nums, config.write_queue_nums, config.perm)


def register_broker_body_records(body, topic, data_version):
    """What :func:`read_register_broker_body` makes of a body, from its beans (the reference)."""
    wrapper = body.topic_config_serialize_wrapper if isinstance(body, RegisterBrokerBody) else body
    table = {}
    for name, config in (wrapper.topic_config_table or {}).items():
        table[name] = topic(config.topic_name if config.topic_name is not None else name,
                            config.read_queue_nums, config.write_queue_nums, config.perm,
                            config.topic_sys_flag)
    version = wrapper.data_version or DataVersion()
    return (data_version(version.counter or 0, version.timestamp or 0, version.state_version or 0),
            table, body.filter_server_list if wrapper is not body else None,
            getattr(wrapper, "topic_queue_mapping_info_map", None) or {})


def charge_plain(budget, data):
    """Charge a plain (JSON) body's values to ``budget`` (may be None) before it is parsed: one
    ``json.loads`` holds the GIL and cannot stop halfway."""
    if budget is not None and data:
        budget.spend_json(data, "plain body")


def read_register_broker_body(data, compressed, broker_version, topic, data_version,
                              check_count=None, max_inflated=DEFAULT_MAX_INFLATED, budget=None,
                              check_mappings=None, dialect=fastjson.FASTJSON_1_2_83):
    """A REGISTER_BROKER body made straight into the caller's records, as
    :meth:`RegisterBrokerBody.decode` reads it: ``(data_version(counter, timestamp,
    state_version), {name: topic(name, read, write, perm, topic_sys_flag)}, filter server list,
    {topic: TopicQueueMappingInfo})``. ``check_count(count)`` sees a compressed body's
    topic count before any topic is inflated (and may raise), ``check_mappings(count)`` the
    mapping count; every part is charged to ``budget`` while it is read; a JSON body the usual
    reader cannot take is read as ``dialect`` reads it. Raises what the codec raises.
    """
    if compressed and data:
        def read_topics(lines, count):
            if check_count is not None:
                check_count(count)
            return _topic_lines(lines, topic, budget)

        version, table, filters, infos = read_compressed(data, broker_version, read_topics,
                                                         max_inflated, budget, check_mappings)
        return (data_version(version.counter or 0, version.timestamp or 0,
                             version.state_version or 0), table, filters, infos or {})
    charge_plain(budget, data)
    if data:
        try:
            return _read_json(data, topic, data_version, budget)
        except _Unusual:
            pass
    return register_broker_body_records(
        RegisterBrokerBody.decode(data, compressed, broker_version, dialect=dialect),
        topic, data_version)


class QueueData(JsonBean):
    """``QueueData`` of a route; 4.8 and older named ``topicSysFlag`` ``topicSynFlag``."""

    PROPS = (
        P("brokerName", "broker_name", NAME),
        P("perm", "perm", INT, 0),
        P("readQueueNums", "read_queue_nums", INT, 0),
        P("topicSysFlag", "topic_sys_flag", INT, 0, aliases=("topicSynFlag",)),
        P("writeQueueNums", "write_queue_nums", INT, 0),
    )


class BrokerData(JsonBean):
    """``BrokerData``: one broker group. ``enableActingMaster`` and ``zoneName`` since 5.0."""

    PROPS = (
        P("brokerAddrs", "broker_addrs", map_of(NAME, long_keys=True), factory=dict),
        P("brokerName", "broker_name", NAME),
        P("cluster", "cluster", NAME),
        P("enableActingMaster", "enable_acting_master", BOOL, False, since=MQVersion.V5_0_0),
        P("zoneName", "zone_name", NAME, since=MQVersion.V5_0_0),
    )


class TopicRouteData(JsonBean):
    """``TopicRouteData``: GET_ROUTEINFO_BY_TOPIC's answer (and REGISTER_TOPIC's body)."""

    PROPS = (
        P("brokerDatas", "broker_datas", list_of(bean(BrokerData)), factory=list),
        P("filterServerTable", "filter_server_table", map_of(list_of(NAME), keys=NAME),
          factory=dict),
        P("orderTopicConf", "order_topic_conf", STR),
        P("queueDatas", "queue_datas", list_of(bean(QueueData)), factory=list),
        P("topicQueueMappingByBroker", "topic_queue_mapping_by_broker",
          map_of(bean(TopicQueueMappingInfo)), since=MQVersion.V5_0_0),
    )


class ClusterInfo(JsonBean):
    """``ClusterInfo``: GET_BROKER_CLUSTER_INFO's answer (always the legacy dialect)."""

    PROPS = (
        P("brokerAddrTable", "broker_addr_table", map_of(bean(BrokerData), keys=NAME)),
        P("clusterAddrTable", "cluster_addr_table", map_of(list_of(NAME), keys=NAME)),
    )


class TopicList(JsonBean):
    """``TopicList``: the topic-list answers (a Java Set, kept as a list in wire order)."""

    PROPS = (
        P("brokerAddr", "broker_addr", STR),
        P("topicList", "topic_list", list_of(STR), factory=list),
    )


class KVTable(JsonBean):
    """``KVTable``: a KV namespace (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER's answer)."""

    PROPS = (P("table", "table", map_of(STR), factory=dict),)


class RegisterBrokerResult(JsonBean):
    """``RegisterBrokerResult``: what route registration returns to the processor."""

    PROPS = (
        P("haServerAddr", "ha_server_addr", STR),
        P("kvTable", "kv_table", bean(KVTable)),
        P("masterAddr", "master_addr", STR),
    )


class BrokerMemberGroup(JsonBean):
    """``BrokerMemberGroup`` (5.0+): the live members of one broker group."""

    PROPS = (
        P("brokerAddrs", "broker_addrs", map_of(NAME, long_keys=True), factory=dict),
        P("brokerName", "broker_name", NAME),
        P("cluster", "cluster", NAME),
    )


class GetBrokerMemberGroupResponseBody(JsonBean):
    """GET_BROKER_MEMBER_GROUP's answer body."""

    PROPS = (P("brokerMemberGroup", "broker_member_group", bean(BrokerMemberGroup)),)


class GetRemoteClientConfigBody(JsonBean):
    """GET_CLIENT_CONFIG's request body (5.0 only): the config keys asked for."""

    PROPS = (P("keys", "keys", list_of(STR), factory=list),)


class GroupList(JsonBean):
    """``GroupList``: QUERY_TOPIC_CONSUME_BY_WHO's answer (a broker's; a Java Set, in wire order)."""

    PROPS = (P("groupList", "group_list", list_of(STR), factory=list),)


# --- the 5.x controller's bodies (a Java ``Set<Long>`` of broker ids is kept in wire order) ------

class SyncStateSet(JsonBean):
    """``SyncStateSet``: a broker group's in-sync broker ids and that set's epoch (the body of
    ALTER_SYNC_STATE_SET's request and answer, REGISTER_BROKER / GET_REPLICA_INFO's answers and
    the NOTIFY_BROKER_ROLE_CHANGED push); the epoch is an ``int``, always written."""

    PROPS = (
        P("syncStateSet", "sync_state_set", list_of(LONG)),
        P("syncStateSetEpoch", "sync_state_set_epoch", INT, 0),
    )


class ElectMasterResponseBody(JsonBean):
    """CONTROLLER_ELECT_MASTER's answer body: the group's members and its new sync state set."""

    PROPS = (
        P("brokerMemberGroup", "broker_member_group", bean(BrokerMemberGroup)),
        P("syncStateSet", "sync_state_set", list_of(LONG)),
    )


class ReplicaIdentity(JsonBean):
    """``BrokerReplicasInfo.ReplicaIdentity``: one replica of a broker group."""

    PROPS = (
        P("alive", "alive", BOOL),
        P("brokerAddress", "broker_address", NAME),
        P("brokerId", "broker_id", LONG),
        P("brokerName", "broker_name", NAME),
    )


class ReplicasInfo(JsonBean):
    """``BrokerReplicasInfo.ReplicasInfo``: a group's master and its (not) in-sync replicas."""

    PROPS = (
        P("inSyncReplicas", "in_sync_replicas", list_of(bean(ReplicaIdentity))),
        P("masterAddress", "master_address", NAME),
        P("masterBrokerId", "master_broker_id", LONG),
        P("masterEpoch", "master_epoch", INT),
        P("notInSyncReplicas", "not_in_sync_replicas", list_of(bean(ReplicaIdentity))),
        P("syncStateSetEpoch", "sync_state_set_epoch", INT),
    )


class BrokerReplicasInfo(JsonBean):
    """``BrokerReplicasInfo``: CONTROLLER_GET_SYNC_STATE_DATA's answer, per broker name (whose
    request body is a JSON array of broker names)."""

    PROPS = (P("replicasInfoTable", "replicas_info_table", map_of(bean(ReplicasInfo))),)


class EpochEntry(JsonBean):
    """``EpochEntry``: one master epoch of a broker's log and the offsets it spans."""

    PROPS = (
        P("endOffset", "end_offset", LONG, (1 << 63) - 1),
        P("epoch", "epoch", INT, 0),
        P("startOffset", "start_offset", LONG, 0),
    )


class EpochEntryCache(JsonBean):
    """GET_BROKER_EPOCH_CACHE's answer (a *broker's*, to ``mqadmin getBrokerEpoch``)."""

    PROPS = (
        P("brokerId", "broker_id", LONG, 0),
        P("brokerName", "broker_name", NAME),
        P("clusterName", "cluster_name", NAME),
        P("epochList", "epoch_list", list_of(bean(EpochEntry))),
        P("maxOffset", "max_offset", LONG, 0),
    )


def broker_name_list(data, budget=None):
    """CONTROLLER_GET_SYNC_STATE_DATA's request body: a JSON array of broker names (Java reads
    it as a raw ``List``), a lenient form's reading charged to ``budget``. Raises
    :class:`BodyDecodeError` for anything else."""
    if data is None:
        raise BodyDecodeError("broker name list: no body")
    return list_of(STR).load(fastjson.loads_lenient(data, budget=budget), "brokerNames")


def encode_broker_name_list(names):
    """The same body as mqadmin writes it: ``RemotingSerializable.encode`` of a ``List<String>``
    (fastjson's legacy escaping, so a control character reads back as Java wrote it)."""
    return fastjson.dumps(list(names))


_BEANS = {name: cls for name, cls in globals().items()
          if isinstance(cls, type) and issubclass(cls, JsonBean)}
#: Request code -> bean of its request body, from the catalogue's declarations.
REQUEST_BODIES = resolve("body", _BEANS, __name__)
#: Request code -> bean of its successful answer's body, from the catalogue's declarations.
REPLY_BODIES = resolve("reply_body", _BEANS, __name__)
