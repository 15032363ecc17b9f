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
  the tests check both paths give the same result for every captured body.
"""
import json
from operator import itemgetter

from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import BodyDecodeError

from ..model import DataVersion, TopicConfig, TopicConfigWrapper
from .replies import Reply, error, java_exception_remark

__all__ = ["decode_registration", "decode_json_fast", "wrapper_from_bean", "data_version_from_bean",
           "RegistrationBodies"]

#: MQVersion.Version.V3_0_11: older brokers send a bare TopicConfigSerializeWrapper.
V3_0_11 = 37
V4_9_8 = 409

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
    mapping = {}
    for topic, info in (getattr(bean, "topic_queue_mapping_info_map", None) or {}).items():
        mapping[topic] = info.canonical().to_obj() if hasattr(info, "canonical") else info
    return TopicConfigWrapper(data_version_from_bean(bean.data_version) or DataVersion(),
                              table, mapping)


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
                for old in [k for k in self._last if not is_live(k)]:
                    del self._last[old]
                self._sweep_at = max(64, 2 * len(self._last))
            if len(self._last) >= self.limit:
                self._last.clear()
        self._last[key] = [body, compressed, version, decoded, crc]

    def forget(self, key):
        self._last.pop(key, None)


def _decode(proc, request, header):
    body = request.body
    if request.version < V3_0_11:
        if not body:
            return TopicConfigWrapper(), None
        return wrapper_from_bean(bodies.TopicConfigSerializeWrapper.from_json(body)), None
    if body and not header.compressed:
        try:
            return decode_json_fast(body)
        except _Unusual:
            pass
    version = request.version if proc.profile.v5_registration else min(request.version, V4_9_8)
    try:
        decoded = bodies.RegisterBrokerBody.decode(body, header.compressed, broker_version=version)
    except BodyDecodeError:
        if not header.compressed:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                return error(ResponseCode.SYSTEM_ERROR, _NULL_BODY_REMARKS[proc.profile.name])
        return error(ResponseCode.SYSTEM_ERROR, _UNDECODABLE_REMARK)
    return wrapper_from_bean(decoded.topic_config_serialize_wrapper), decoded.filter_server_list


def decode_registration(proc, request, header):
    """(wrapper, filter servers), or the Reply Java gives when the body fails its CRC check
    (``bodyCrc32``, when not 0) or does not decode."""
    key = (header.cluster_name, header.broker_addr)
    cache = proc.registration_bodies
    body = request.body or b""
    entry = cache.entry(key, body, header.compressed, request.version)
    crc = header.body_crc32
    if crc and (entry is None or entry[4] != crc):
        if bodies.body_crc32(body) != crc:
            return error(ResponseCode.SYSTEM_ERROR, "crc32 not match", {})
        if entry is not None:
            entry[4] = crc
    if entry is not None:
        return entry[3]
    decoded = _decode(proc, request, header)
    if isinstance(decoded, Reply):
        return decoded
    rim = proc.route_info_manager
    cache.put(key, body, header.compressed, request.version, decoded,
              lambda k: rim.query_broker_topic_config(*k) is not None, crc)
    return decoded
