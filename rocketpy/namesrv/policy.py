"""NameServer policy layer: the differences between Java NameServer releases, as objects.

A :class:`~rocketpy.namesrv.profile.BehaviourProfile` states one release's facts; this module is
their only reader. :func:`policies_for` turns a profile, once, in
:func:`rocketpy.service.tap.makeService` (as ``twisted.names`` builds its resolvers), into the
registration policy (:mod:`rocketpy.namesrv.brokers`), the :class:`LivenessPolicy`, the
:class:`WireShape` (what answers look like), the :class:`HandlerSet` (the switches the handlers
consult) and the :class:`~rocketpy.namesrv.config.ConfigShape`. Which codes a release serves is
the protocol catalogue's (:mod:`rocketpy.remoting.catalogue`), read with the policies' ``release``.
Nothing else tests a profile (``tests/test_policy_layering.py`` checks it)."""
from dataclasses import dataclass
from functools import lru_cache

from rocketpy.remoting import bodies
from rocketpy.remoting.codes import SerializeType
from rocketpy.remoting.fastjson import FASTJSON_1_2_69, FASTJSON_1_2_83
from rocketpy.remoting.headers import ZONE_MODE, ZONE_NAME, QueryDataVersionRequestHeader
from rocketpy.remoting.javahash import hashmap_order

from .brokers import Registration5, Registration49
from .config import ConfigShape
from .javaorder import HighWater, chm_capacity, hashmap_capacity, ordered
from .model import DEFAULT_BROKER_TIMEOUT_MS
from .profile import DEFAULT_PROFILE

_FASTJSON = {dialect.version: dialect for dialect in (FASTJSON_1_2_69, FASTJSON_1_2_83)}

__all__ = ["Policies", "WireShape", "LivenessPolicy", "HandlerSet", "policies_for", "as_policies"]

_JSON = int(SerializeType.JSON)

_BROKER_ADDR_FIELDS = {spec.attr: spec.wire for spec in QueryDataVersionRequestHeader.FIELDS}
#: 4.9 scans every 10 s (a fixed schedule); 5.x every scanNotActiveBrokerInterval ms.
_SCAN_INTERVAL_49_MS = 10_000


def _hash_ordered(mapping, capacity):
    return {key: mapping[key] for key in hashmap_order(list(mapping), capacity)}


class WireShape:
    """What the answers of one release look like; bodies are the codec's beans
    (:mod:`rocketpy.remoting.bodies`), built from route records in Java's map orders."""

    def __init__(self, *, own_version, reply_in_request_type, broker_fields_5x, state_version,
                 topic_set, concurrent_tables, null_register_body_remark, null_body_remark,
                 broker_addr_hash_site, faq_url, header_dialect, null_broker_id_remarks):
        #: ``version`` of every answer (Java ``MQVersion.CURRENT_VERSION``)
        self.own_version = own_version
        #: the fastjson release whose parser reads the requests' JSON headers
        self.header_dialect = header_dialect
        #: the FAQ page TOPIC_NOT_EXIST's remark points to (``FAQUrl.APPLY_TOPIC_URL``)
        self.faq_url = faq_url
        self._reply_in_request_type = reply_in_request_type
        self._broker_fields_5x = broker_fields_5x
        self._state_version = state_version
        self._topic_set = topic_set
        self._concurrent = concurrent_tables
        #: what Java answers a REGISTER_BROKER whose body fastjson reads as null
        self.null_register_body_remark = null_register_body_remark
        #: what Java answers a request whose absent JSON body ``RemotingSerializable.decode``
        #: reads (QUERY_DATA_VERSION, REGISTER_TOPIC_IN_NAMESRV); None: it reads null (5.1+)
        self.null_body_remark = null_body_remark
        #: what Java answers a REGISTER_BROKER and an UNREGISTER_BROKER without ``brokerId``
        #: (None: it answers SUCCESS)
        self.null_register_id_remark, self.null_unregister_id_remark = null_broker_id_remarks
        self._broker_addr_hash_site = broker_addr_hash_site

    def broker_addr_remark(self, cluster_name, broker_addr):
        """What Java answers when it looks a live broker up with a null cluster or address
        (QUERY_DATA_VERSION, BROKER_HEARTBEAT): 5.x's ``BrokerAddrInfo.hashCode`` reads
        ``clusterName.length() + brokerAddr.length()`` and throws (the remark is JDK 15+'s
        helpful message, as in the genuine captures); None when it does not throw (both given,
        or 4.9.8, whose HashMap finds nothing under a null address)."""
        if self._broker_addr_hash_site is None:
            return None
        missing = ("cluster_name" if cluster_name is None else
                   "broker_addr" if broker_addr is None else None)
        if missing is None:
            return None
        missing = _BROKER_ADDR_FIELDS[missing]   # BrokerAddrInfo's fields: the headers' names
        return (f'java.lang.NullPointerException: Cannot invoke "String.length()" because '
                f'"this.{missing}" is null, {self._broker_addr_hash_site}')

    def serialize_type(self, request, failed):
        """4.9 answers in the request's serialisation (its error path in its own, JSON); 5.x
        always in its own."""
        return request.serialize_type if self._reply_in_request_type and not failed else _JSON

    def high_water(self, initial):
        """A route table's growth tracker: HashMap in 4.9, ConcurrentHashMap in 5.x."""
        return HighWater(initial, self._concurrent)

    def topic_set(self, items):
        """``TopicList.topicList`` filled with ``items``: a HashSet (4.9), a
        CopyOnWriteArraySet (5.0) or a ConcurrentHashMap key set (5.1+)."""
        unique = list(dict.fromkeys(items))
        if self._topic_set == "insertion":
            return unique
        if self._topic_set == "chm":
            return ordered(unique, chm_capacity(len(unique)))
        return ordered(unique, hashmap_capacity(len(unique)))

    # -- bodies

    @staticmethod
    def _addrs(addrs):
        return _hash_ordered(addrs, hashmap_capacity(len(addrs)))

    def broker_data(self, broker_data):
        five = self._broker_fields_5x
        return bodies.BrokerData(
            broker_addrs=self._addrs(broker_data.broker_addrs), broker_name=broker_data.broker_name,
            cluster=broker_data.cluster,
            enable_acting_master=broker_data.enable_acting_master if five else None,
            zone_name=broker_data.zone_name if five else None)

    @staticmethod
    def _mapping_info(info):
        """A static-topic ``TopicQueueMappingInfo`` as the route writes it (its seven fields,
        ``currIdMap`` in ConcurrentHashMap order)."""
        ids = info.curr_id_map
        if isinstance(ids, tuple):   # the route tables' MappingInfo: (id, logic id) pairs
            ids = dict(ids)
        if isinstance(ids, dict):
            ids = _hash_ordered(ids, chm_capacity(len(ids)))
        return bodies.TopicQueueMappingInfo(
            bname=info.bname, curr_id_map=ids, dirty=info.dirty, epoch=info.epoch,
            scope=info.scope, topic=info.topic, total_queues=info.total_queues)

    def route(self, route, order_topic_conf=None):
        """A ``TopicRouteData`` record as the codec's bean."""
        mapping = route.topic_queue_mapping_by_broker
        if mapping is not None:
            mapping = {name: self._mapping_info(info) for name, info in
                       _hash_ordered(mapping, hashmap_capacity(len(mapping))).items()}
        filters = route.filter_server_table
        return bodies.TopicRouteData(
            broker_datas=[self.broker_data(bd) for bd in route.broker_datas],
            filter_server_table=_hash_ordered(filters, hashmap_capacity(len(filters))),
            order_topic_conf=order_topic_conf,
            queue_datas=[bodies.QueueData(broker_name=qd.broker_name, perm=qd.perm,
                                          read_queue_nums=qd.read_queue_nums,
                                          topic_sys_flag=qd.topic_sys_flag,
                                          write_queue_nums=qd.write_queue_nums)
                         for qd in route.queue_datas],
            topic_queue_mapping_by_broker=mapping)

    def cluster_info(self, rim):
        """GET_BROKER_CLUSTER_INFO's ``ClusterInfo``."""
        return bodies.ClusterInfo(
            broker_addr_table={name: self.broker_data(rim.broker_addr_table[name])
                               for name in rim.brokers_in_order()},
            cluster_addr_table={c: rim.cluster_broker_names(c) for c in rim.clusters_in_order()})

    def data_version(self, data_version):
        """A stored ``DataVersion`` (4.9's has no stateVersion)."""
        return bodies.DataVersion(
            counter=data_version.counter, timestamp=data_version.timestamp,
            state_version=data_version.state_version if self._state_version else None)

    def member_group(self, cluster_name, broker_name, addrs):
        """GET_BROKER_MEMBER_GROUP's ``GetBrokerMemberGroupResponseBody``."""
        return bodies.GetBrokerMemberGroupResponseBody(broker_member_group=bodies.BrokerMemberGroup(
            broker_addrs=self._addrs(addrs), broker_name=broker_name, cluster=cluster_name))


class LivenessPolicy:
    """When a live broker expires, and what keeps it alive."""

    def __init__(self, *, fixed_timeout_ms, query_always_refreshes):
        self._fixed = fixed_timeout_ms
        self._query_always_refreshes = query_always_refreshes

    def timeout(self, requested_ms):
        """A registration's heartbeat timeout: 4.9's fixed 120 s, else what the broker asked
        for (``heartbeatTimeoutMillis``) or 120 s."""
        if self._fixed is not None:
            return self._fixed
        return DEFAULT_BROKER_TIMEOUT_MS if requested_ms is None else requested_ms

    def scan_interval_ms(self, namesrv_config):
        return _SCAN_INTERVAL_49_MS if self._fixed is not None else \
            namesrv_config.scan_not_active_broker_interval

    def refreshes_on_query(self, changed):
        """QUERY_DATA_VERSION refreshes liveness: 4.9 only when unchanged, 5.x always."""
        return self._query_always_refreshes or not changed


class HandlerSet:
    """The switches a release's handlers consult, and what its processor does with a code it
    does not serve."""

    def __init__(self, *, answers_unknown_code, topic_list_switches, zone_hook,
                 wait_for_service):
        #: 4.9's processor returns null for an unknown code (no answer); 5.x answers
        #: REQUEST_CODE_NOT_SUPPORTED
        self.answers_unknown_code = answers_unknown_code
        self._topic_list_switches = topic_list_switches
        self._zone_hook = zone_hook
        self._wait_for_service = wait_for_service

    def zone(self, ext_fields):
        """``ZoneRouteRPCHook`` (5.x): the zone a route query asks to be filtered by, or None."""
        mode = ext_fields.get(ZONE_MODE) if ext_fields else None
        if mode is None or not self._zone_hook or str(mode).lower() != "true":
            return None
        zone = ext_fields.get(ZONE_NAME)
        return zone if zone and zone.strip() else None

    def not_ready(self, namesrv_config, uptime_ms):
        """5.3 ``needWaitForService``: still inside ``waitSecondsForService`` after the start."""
        return (self._wait_for_service and namesrv_config.need_wait_for_service
                and uptime_ms < namesrv_config.wait_seconds_for_service * 1000)

    def all_topics_enabled(self, namesrv_config):
        """5.x ``enableAllTopicList``; 4.9 has no switch."""
        return not self._topic_list_switches or namesrv_config.enable_all_topic_list

    def lists_enabled(self, namesrv_config):
        """5.x ``enableTopicList`` (the other topic lists); 4.9 has no switch."""
        return not self._topic_list_switches or namesrv_config.enable_topic_list


@dataclass(frozen=True)
class Policies:
    """Every policy of one release."""

    name: str
    #: the :class:`~rocketpy.remoting.catalogue.Release` imitated (which codes it serves)
    release: object
    routes: object
    liveness: LivenessPolicy
    wire: WireShape
    handlers: HandlerSet
    config: ConfigShape

    @property
    def config_shape(self):
        """What :func:`rocketpy.namesrv.config.config_shape` reads."""
        return self.config


def _null_broker_id_remarks(p):
    """What Java answers a REGISTER_BROKER and an UNREGISTER_BROKER without ``brokerId``: the
    processor unboxes the header's null ``Long`` for the route manager's ``long`` (nothing
    changed yet), JDK 15+'s helpful message as in the genuine captures; None where Java answers
    without unboxing it (5.x queues an unregistration)."""
    package, register_method, _ = p.register_npe_site

    def remark(header, method, line):
        if line is None:
            return None
        return ('java.lang.NullPointerException: Cannot invoke "java.lang.Long.longValue()" '
                f'because the return value of "org.apache.rocketmq.{package}.header.namesrv.'
                f'{header}.getBrokerId()" is null, org.apache.rocketmq.namesrv.processor.'
                f"DefaultRequestProcessor.{method}(DefaultRequestProcessor.java:{line})")
    register_line, unregister_line = p.broker_id_unboxing_lines
    return (remark("RegisterBrokerRequestHeader", register_method, register_line),
            remark("UnRegisterBrokerRequestHeader", "unregisterBroker", unregister_line))


def _npe_remark(site):
    package, method, line = site
    return (f'java.lang.NullPointerException: Cannot invoke "org.apache.rocketmq.{package}.body.'
            'RegisterBrokerBody.getTopicConfigSerializeWrapper()" because "registerBrokerBody" is '
            f"null, org.apache.rocketmq.namesrv.processor.DefaultRequestProcessor.{method}"
            f"(DefaultRequestProcessor.java:{line})")


#: the line of fastjson's ``JSON.parseObject(byte[], Type, Feature...)`` that reads
#: ``bytes.length`` (alibaba/fastjson ``src/main/java/com/alibaba/fastjson/JSON.java``)
_PARSE_OBJECT_BYTES_LINE = {"1.2.69": 407, "1.2.83": 405}


def _null_body_remark(p):
    """5.0.0's ``RemotingSerializable.decode`` hands an absent body to fastjson, whose
    ``bytes.length`` throws; the remark is ``exceptionSimpleDesc`` of that NullPointerException
    with the JDK 15+ helpful message (fastjson is built with local variable names), as in the
    genuine captures' REGISTER_BROKER remark. 4.9.8 throws inside the JDK's ``new String(null,
    UTF_8)``, whose message and frame depend on the JDK build: its remark says what was missing.
    5.1+ checks for null first."""
    if not p.query_data_version_needs_body:
        return None
    if not p.v5_registration:
        return "java.lang.NullPointerException: QUERY_DATA_VERSION carries no DataVersion body"
    return ('java.lang.NullPointerException: Cannot read the array length because "bytes" is '
            f"null, com.alibaba.fastjson.JSON.parseObject(JSON.java:"
            f"{_PARSE_OBJECT_BYTES_LINE[p.fastjson]})")


def policies_for(profile):
    """The policies of ``profile`` (a :class:`~rocketpy.namesrv.profile.BehaviourProfile`),
    each built by keyword from the facts that mean it."""
    p = profile
    if p.v5_registration:
        routes = Registration5(
            wipe_needs_acting_master=p.prime_slave_wipe_needs_acting_master,
            by_address=p.unregister_by_address, merges_topics=p.register_topic_merges,
            body_broker_version=p.compressed_body_broker_version,
            queues_unregistrations=p.queued_unregistration)
    else:
        routes = Registration49(body_broker_version=p.compressed_body_broker_version,
                                queues_unregistrations=p.queued_unregistration)
    return Policies(
        name=p.name, release=p.release, routes=routes,
        liveness=LivenessPolicy(
            fixed_timeout_ms=p.fixed_broker_timeout_ms,
            query_always_refreshes=p.query_data_version_always_refreshes),
        wire=WireShape(
            own_version=p.server_version, reply_in_request_type=p.reply_in_request_serialize_type,
            broker_fields_5x=p.broker_fields_5x, state_version=p.data_version_state,
            topic_set=p.topic_list_set, concurrent_tables=p.concurrent_tables,
            null_register_body_remark=_npe_remark(p.register_npe_site),
            null_broker_id_remarks=_null_broker_id_remarks(p),
            null_body_remark=_null_body_remark(p),
            broker_addr_hash_site=p.broker_addr_hash_site,
            faq_url=p.topic_not_exist_faq_url, header_dialect=_FASTJSON[p.fastjson]),
        handlers=HandlerSet(
            answers_unknown_code=p.answer_unknown_code,
            topic_list_switches=p.topic_list_switches, zone_hook=p.zone_route_hook,
            wait_for_service=p.wait_for_service),
        config=ConfigShape.of_release(p.release, p.sorted_config_text))


def as_policies(value=None):
    """``value`` as :class:`Policies`: policies as they are, a profile (default: 5.3) as its
    policies, built once per profile."""
    return value if isinstance(value, Policies) else _policies_of(value or DEFAULT_PROFILE)


_policies_of = lru_cache(maxsize=None)(policies_for)
