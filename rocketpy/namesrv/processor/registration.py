"""NameServer processor layer: REGISTER_BROKER bodies to route-table input (Java
``DefaultRequestProcessor.extractRegisterBrokerBodyFromRequest`` / ``RegisterBrokerBody.decode``).

Brokers re-register every 30 s with the same body (a 10,000-topic broker sends ~1.3 MB), so:

* the last body of each broker address is kept with its decoded form; an identical body
  (compared byte for byte, not by CRC) is not decoded again, and the route table sees the very
  same decoded object (which lets it skip the topic walk, see
  :mod:`rocketpy.namesrv.route_info_manager`);
* Java checks ``bodyCrc32`` first (``DefaultRequestProcessor.checksum``); the cache remembers
  which header CRC its body was verified against, so an identical body with the same header
  CRC is not summed again (the CRC of 1.5 MB costs about as much as the rest of the request);
  any other CRC is checked in full;
* a plain JSON body is read with the C ``json`` parser straight into route records; anything
  unusual (fastjson's unquoted keys, static-topic mappings, a wrong type) goes through the
  codec's full :class:`rocketpy.remoting.bodies.RegisterBrokerBody`, which is the reference --
  the tests check both paths give the same result for every captured body;
* a compressed body is read by the codec's own lazy, bounded reader
  (:func:`rocketpy.remoting.bodies.read_compressed`: same parts, same bound, same errors), but
  its topic lines become route records directly, the numbers of a line parsed once per
  distinct ``"r w perm type ..."`` tail (a broker's lines share a few): about 3x faster than
  the codec's beans. Odd lines (``+7``, ``-1``, bad fields, bad UTF-8) go to the codec's
  ``TopicConfig.from_part``, which gives their values or raises its own error;
* a body that is not in the cache and is big (:func:`worth_a_thread`) is decoded by a
  :class:`~rocketpy.namesrv.pending.Pending`: its ``work`` (CRC, inflate, parse) touches
  nothing shared and may leave the reactor thread; its ``finish`` caches the result and goes on
  with the registration. A compressed body's cost is unknown until it is inflated (a 160 KB
  body can hold 3 million topic lines), so every compressed body past 128 bytes qualifies.
"""
import json
import logging
from functools import partial
from operator import itemgetter

from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import BodyDecodeError

from ..model import DataVersion, TopicConfig, TopicConfigWrapper
from ..pending import Pending
from ..settings import int_values
from .replies import Reply, error, java_exception_remark

log = logging.getLogger("rocketpy.namesrv")

__all__ = ["decode_registration", "decode_json_fast", "max_topics_from_properties",
           "forget_departed_brokers",
           "MAX_TOPICS_KEY", "DEFAULT_MAX_TOPICS", "TooManyTopics", "decode_compressed_fast", "worth_a_thread",
           "wrapper_from_bean", "data_version_from_bean", "RegistrationBodies"]

#: MQVersion.Version.V3_0_11: older brokers send a bare TopicConfigSerializeWrapper.
V3_0_11 = 37

# What the Java NameServer answers when fastjson reads a non-JSON (e.g. zlib) registration body
# as null and the processor dereferences it (helpful NullPointerException message, JDK 14+).
_NPE = 'Cannot invoke "org.apache.rocketmq.{}.body.RegisterBrokerBody.getTopicConfigSerializeWrapper()"' \
       ' because "registerBrokerBody" is null'
_AT = "org.apache.rocketmq.namesrv.processor.DefaultRequestProcessor.{}(DefaultRequestProcessor.java:{})"
_NULL_BODY_REMARKS = {
    "4.9": java_exception_remark("java.lang.NullPointerException", _NPE.format("common.protocol"),
                                 _AT.format("registerBrokerWithFilterServer", 254)),
    "5.0": java_exception_remark("java.lang.NullPointerException", _NPE.format("common.protocol"),
                                 _AT.format("registerBroker", 228)),
    "5.3": java_exception_remark("java.lang.NullPointerException", _NPE.format("remoting.protocol"),
                                 _AT.format("registerBroker", 242)),
}
_UNDECODABLE_REMARK = java_exception_remark(
    "org.apache.rocketmq.remoting.exception.RemotingCommandException",
    "Failed to decode RegisterBrokerBody")


def data_version_from_bean(bean):
    if bean is None:
        return None
    return DataVersion(bean.counter or 0, bean.timestamp or 0, bean.state_version or 0)


def wrapper_from_bean(bean):
    """A codec ``TopicConfig(AndMapping)SerializeWrapper`` as route-table input."""
    table = {}
    for name, config in (bean.topic_config_table or {}).items():
        topic = config.topic_name if config.topic_name is not None else name
        table[name] = TopicConfig(topic, config.read_queue_nums, config.write_queue_nums,
                                  config.perm, config.topic_sys_flag)
    return TopicConfigWrapper(data_version_from_bean(bean.data_version) or DataVersion(), table,
                              _mapping(getattr(bean, "topic_queue_mapping_info_map", None)))


def _mapping(infos):
    """Static-topic ``TopicQueueMappingInfo`` beans as the route table keeps them."""
    return {topic: info.canonical().to_obj() if hasattr(info, "canonical") else info
            for topic, info in (infos or {}).items()}


class _Unusual(Exception):
    """The fast path does not handle this body; use the codec."""


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_TOPIC_FIELDS = itemgetter("topicName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag")


def _int(value, default):
    if value is None:
        return default
    if type(value) is not int or not -(1 << 31) <= value < 1 << 31:
        raise _Unusual
    return value


def _long(value):
    if value is None:
        return 0
    if type(value) is not int:
        raise _Unusual
    return value


def decode_json_fast(body):
    """(wrapper, filter servers) of a plain-JSON RegisterBrokerBody, or raise ``_Unusual``."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        raise _Unusual from None
    if type(obj) is not dict:
        raise _Unusual
    filters = obj.get("filterServerList")
    if filters is None:
        filters = []
    elif type(filters) is not list or any(type(f) is not str for f in filters):
        raise _Unusual
    wrapper = obj.get("topicConfigSerializeWrapper")
    if wrapper is None:
        wrapper = {}
    if type(wrapper) is not dict or wrapper.get("topicQueueMappingInfoMap"):
        raise _Unusual
    version = wrapper.get("dataVersion")
    if version is None:
        version = {}
    if type(version) is not dict:
        raise _Unusual
    data_version = DataVersion(_long(version.get("counter")), _long(version.get("timestamp")),
                               _long(version.get("stateVersion")))
    configs = wrapper.get("topicConfigTable")
    if configs is None:
        configs = {}
    if type(configs) is not dict:
        raise _Unusual
    table = {}
    fields = _TOPIC_FIELDS
    for name, config in configs.items():
        # the usual entry (every field there, a name and four Java ints) in one C call and one
        # test; anything else (absent or null fields, odd types) field by field
        try:
            topic, read, write, perm, flag = fields(config)
        except (KeyError, TypeError):
            topic = read = None
        if not (topic.__class__ is str
                and read.__class__ is write.__class__ is perm.__class__ is flag.__class__ is int
                and _INT_MIN <= read <= _INT_MAX and _INT_MIN <= write <= _INT_MAX
                and _INT_MIN <= perm <= _INT_MAX and _INT_MIN <= flag <= _INT_MAX):
            topic, read, write, perm, flag = _topic_fields(name, config)
        table[name] = TopicConfig(topic, read, write, perm, flag)
    return TopicConfigWrapper(data_version, table, {}), filters


def _topic_fields(name, config):
    """(topicName, readQueueNums, writeQueueNums, perm, topicSysFlag) with Java's defaults for
    absent or null fields; ``_Unusual`` for anything the codec should judge."""
    if config.__class__ is not dict:
        raise _Unusual
    get = config.get
    topic = get("topicName")
    if topic is None:
        topic = name
    elif topic.__class__ is not str:
        raise _Unusual
    return (topic, _int(get("readQueueNums"), 16), _int(get("writeQueueNums"), 16),
            _int(get("perm"), 6), _int(get("topicSysFlag"), 0))


def decode_compressed_fast(body, broker_version, max_topics=0):
    """(wrapper, filter servers) of a compressed RegisterBrokerBody; raises the codec's
    :class:`~rocketpy.remoting.errors.BodyDecodeError` where the codec would, and
    :class:`TooManyTopics` before reading a topic line when the body declares more than
    ``max_topics`` (0: no bound)."""
    def read_topics(lines, count):
        if max_topics and count > max_topics:
            raise TooManyTopics(f"declares {count} topics")
        return _route_topics(lines)

    data_version, table, filters, infos = bodies.read_compressed(body, broker_version, read_topics)
    return TopicConfigWrapper(data_version_from_bean(data_version), table, _mapping(infos)), filters


#: Distinct line tails remembered per body (each a few dozen bytes): a broker's topics share a
#: handful; a hostile body with a different tail on every line just misses.
_KNOWN_TAILS = 4096


def _route_topics(lines):
    """Topic lines (``name r w perm type [attributes]``) as route records, by name. A line's
    numbers depend only on what follows its name, so each distinct tail is judged once."""
    table = {}
    known = {}
    for i, raw in enumerate(lines):
        name, _, tail = raw.partition(b" ")
        numbers = known.get(tail)
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError:
            numbers = None
        if numbers is None:
            name, numbers = _line(raw, i)
            if len(known) < _KNOWN_TAILS:
                known[tail] = numbers
        table[name] = TopicConfig(name, numbers[0], numbers[1], numbers[2], 0)
    return table


def _line(raw, i):
    """(topic name, (readQueueNums, writeQueueNums, perm)) of one topic line, judged as Java's
    ``TopicConfig.decode`` (the attributes never fail a line, and the NameServer drops them);
    the codec's :meth:`~rocketpy.remoting.bodies.TopicConfig.from_part` for anything odd, which
    gives its values (``+7``) or raises its error."""
    parts = raw.split(b" ", 5)
    if len(parts) >= 5 and parts[4] in _FILTER_TYPES:
        read, write, perm = parts[1], parts[2], parts[3]
        if (len(read) < 10 and len(write) < 10 and len(perm) < 10 and read.isdigit()
                and write.isdigit() and perm.isdigit()):
            try:
                return raw.decode("utf-8").partition(" ")[0], (int(read), int(write), int(perm))
            except UnicodeDecodeError:
                pass
    config = bodies.TopicConfig.from_part(raw, i)
    return config.topic_name, (config.read_queue_nums, config.write_queue_nums, config.perm)


_FILTER_TYPES = frozenset(t.encode() for t in bodies.TOPIC_FILTER_TYPES)


#: Bodies not in the cache and bigger than these (bytes) are decoded by a Pending, off the
#: reactor thread under the transport. Decoding there costs the same CPU and still shares the
#: GIL, which the reactor gets back within the switch interval (1 ms under the decode pool), so
#: a body is worth a thread when its *worst* decode takes longer than a millisecond or two; the
#: trip itself costs 60-120 µs. Worst cases measured (``bench/registration_bomb.py --part
#: thresholds``): compressed, repeated topic lines, 10-35 µs per body byte (124 B: 1.3 ms,
#: 3.9 KB: 142 ms); plain, tiny topics ``"1a":{}``, 0.2-0.35 µs per byte (8 KiB: 1.6 ms,
#: 256 KiB: 88 ms). Genuine bodies cost less (plain ~25 µs per KiB: every captured one, up to
#: ~50 topics, is decoded on the spot).
COMPRESSED_INLINE_MAX = 128
PLAIN_INLINE_MAX = 8 * 1024


def worth_a_thread(body, compressed):
    """True when decoding ``body`` may cost more than a trip to a worker thread."""
    return len(body) > (COMPRESSED_INLINE_MAX if compressed else PLAIN_INLINE_MAX)


class RegistrationBodies:
    """The last registration body of each broker address, with its decoded form.

    Entries of brokers that are gone are dropped whenever the cache has doubled since the last
    sweep (``is_live``), so it holds about the live brokers, not every address ever seen.
    """

    def __init__(self, limit=4096):
        self.limit = limit
        self._last = {}
        self._sweep_at = 64

    def get(self, key, body, compressed, version):
        entry = self.entry(key, body, compressed, version)
        return None if entry is None else entry[3]

    def entry(self, key, body, compressed, version):
        """``[body, compressed, version, decoded, verified header CRC or 0]`` for an identical
        body, else None."""
        entry = self._last.get(key)
        if entry is not None and entry[1] == compressed and entry[2] == version and entry[0] == body:
            return entry
        return None

    def put(self, key, body, compressed, version, decoded, is_live=None, crc=0):
        if key not in self._last:
            if is_live is not None and len(self._last) >= self._sweep_at:
                self.forget_departed(is_live)
            if len(self._last) >= self.limit:
                self._last.clear()
        self._last[key] = [body, compressed, version, decoded, crc]

    def forget(self, key):
        self._last.pop(key, None)

    def forget_departed(self, is_live):
        """Drop the entries of brokers that are gone (``is_live(key)`` False): their bodies
        and decoded tables are the biggest thing a departed broker leaves behind."""
        for old in [k for k in self._last if not is_live(k)]:
            del self._last[old]
        self._sweep_at = max(64, 2 * len(self._last))


#: rocketpy's bound on the topics of one registration (Java has none); 0 turns it off.
MAX_TOPICS_KEY = "registerBrokerMaxTopics"
#: Applying a registration puts each new topic in the route tables on the reactor thread (~6 µs
#: a topic), and a plain body is parsed by one ``json.loads`` that holds the GIL (~1.3 µs an
#: object): 200,000 topics stall the server about a second. A plain body within the 16 MiB frame
#: limit holds at most ~125,000 genuine topic entries; only a compressed body can carry more.
DEFAULT_MAX_TOPICS = 200_000
#: JSON objects and arrays a plain body may hold per allowed topic (a 5.x entry has two objects,
#: its config and its attributes), plus a few for the body's own structure.
_CONTAINERS_PER_TOPIC = 4
_CONTAINERS_SLACK = 1024


class TooManyTopics(Exception):
    """A registration over ``registerBrokerMaxTopics``; ``detail`` says what the body holds."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


def max_topics_from_properties(props):
    """``registerBrokerMaxTopics`` from ``-D`` / ``-c`` properties; ValueError when bad."""
    table = ((MAX_TOPICS_KEY, "max_topics", DEFAULT_MAX_TOPICS, ""),)
    return int_values(props, table).get("max_topics", DEFAULT_MAX_TOPICS)


def _too_many_topics(exc, max_topics):
    log.warning("registration refused: the body %s, over %s=%s", exc.detail, MAX_TOPICS_KEY,
                max_topics)
    return error(ResponseCode.SYSTEM_ERROR,
                 f"[REFUSED] the registration body {exc.detail}, over {MAX_TOPICS_KEY}={max_topics}")


def _decode(profile, request_version, body, compressed, max_topics=0):
    """(wrapper, filter servers) or the Reply for an undecodable body or one over
    ``max_topics`` topics (0: no bound); pure (any thread)."""
    try:
        decoded = _decode_unbounded(profile, request_version, body, compressed, max_topics)
        if max_topics and not isinstance(decoded, Reply):
            count = len(decoded[0].topic_config_table)
            if count > max_topics:
                raise TooManyTopics(f"holds {count} topics")
    except TooManyTopics as exc:
        return _too_many_topics(exc, max_topics)
    return decoded


def _decode_unbounded(profile, request_version, body, compressed, max_topics):
    if max_topics and body and not compressed:
        # a cheap count before json.loads, which holds the GIL for the whole parse
        containers = body.count(b"{") + body.count(b"[")
        if containers > max_topics * _CONTAINERS_PER_TOPIC + _CONTAINERS_SLACK:
            raise TooManyTopics(f"holds {containers} JSON objects and arrays")
    if request_version < V3_0_11:
        if not body:
            return TopicConfigWrapper(), None
        return wrapper_from_bean(bodies.TopicConfigSerializeWrapper.from_json(body)), None
    version = profile.compressed_body_broker_version or request_version
    try:
        if compressed and body:
            return decode_compressed_fast(body, version, max_topics)
        if body:
            try:
                return decode_json_fast(body)
            except _Unusual:
                pass
        decoded = bodies.RegisterBrokerBody.decode(body, compressed, broker_version=version)
    except BodyDecodeError:
        if not compressed:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                return error(ResponseCode.SYSTEM_ERROR, _NULL_BODY_REMARKS[profile.name])
        return error(ResponseCode.SYSTEM_ERROR, _UNDECODABLE_REMARK)
    return wrapper_from_bean(decoded.topic_config_serialize_wrapper), decoded.filter_server_list


def _crc_mismatch():
    return error(ResponseCode.SYSTEM_ERROR, "crc32 not match", {})


def _checked_decode(profile, request_version, body, compressed, crc, max_topics=0):
    """The work of a Pending: Java's ``bodyCrc32`` check, then the decode; pure (any thread)."""
    if crc and bodies.body_crc32(body) != crc:
        return _crc_mismatch()
    return _decode(profile, request_version, body, compressed, max_topics)


def decode_registration(proc, request, header):
    """(wrapper, filter servers), or the Reply Java gives when the body fails its CRC check
    (``bodyCrc32``, when not 0) or does not decode; for a big body not seen before, a
    :class:`~rocketpy.namesrv.pending.Pending` of either."""
    key = (header.cluster_name, header.broker_addr)
    cache = proc.registration_bodies
    body = request.body or b""
    compressed = header.compressed
    entry = cache.entry(key, body, compressed, request.version)
    crc = header.body_crc32
    if entry is None:
        work = partial(_checked_decode, proc.profile, request.version, body, compressed, crc,
                       proc.register_max_topics)
        remember = partial(_remember, proc, key, request, compressed, crc)
        if worth_a_thread(body, compressed):
            return Pending(work, remember)
        return remember(work())
    if crc and entry[4] != crc:
        if bodies.body_crc32(body) != crc:
            return _crc_mismatch()
        entry[4] = crc
    return entry[3]


def _remember(proc, key, request, compressed, crc, decoded):
    """Cache a decoded body (on the reactor thread: the cache is shared state)."""
    if isinstance(decoded, Reply):
        return decoded
    cache = proc.registration_bodies
    cache.put(key, request.body or b"", compressed, request.version, decoded,
              _live_test(proc.route_info_manager), crc)
    return decoded


def _live_test(rim):
    """``is_live(key)`` for the cache's keys ``(cluster, broker address)``."""
    return lambda key: rim.broker_live_info(*key) is not None


def forget_departed_brokers(proc):
    """Drop the cached registration bodies of brokers no longer live (after brokers leave)."""
    proc.registration_bodies.forget_departed(_live_test(proc.route_info_manager))
