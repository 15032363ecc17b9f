"""NameServer processor layer: topic administration and topic lists (Java
``DefaultRequestProcessor`` wipe/addWritePermOfBroker, getAllTopicListFromNameserver,
deleteTopicInNamesrv, registerTopicToNamesrv, getTopicsByCluster and the system and unit topic
lists). 5.x answers SYSTEM_ERROR "disable" for lists switched off (``enableAllTopicList`` /
``enableTopicList``); 4.9 has no switches."""
import logging
from functools import partial

from rocketpy.remoting import bodies
from rocketpy.remoting.catalogue import responder
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.fastjson import FASTJSON_1_2_83
from rocketpy.remoting.headers import (AddWritePermOfBrokerResponseHeader,
                                       WipeWritePermOfBrokerResponseHeader)

from ..model import QueueData
from ..pending import Pending, decoded
from ..replies import error, ok

__all__ = ["TopicHandlers"]

log = logging.getLogger("rocketpy.namesrv")

_DISABLED = error(ResponseCode.SYSTEM_ERROR, "disable")
#: from this many topics GET_ALL_TOPIC_LIST_FROM_NAMESERVER's and GET_TOPICS_BY_CLUSTER's lists
#: are ordered and encoded off the reactor (a Pending): 20,000 topics cost about 80 ms of
#: Java-order hashing
OFFLOAD_TOPIC_LIST_FROM = 20_000


def _topic_list(topics, broker_addr=None):
    return ok(bodies.TopicList(broker_addr=broker_addr, topic_list=topics))


def _offloaded_list(order, keep):
    """A topic list whose Java order and JSON are built off the reactor (``order()``, pure),
    then kept by the tables (``keep(items)``, on the reactor) while they stay as they were."""
    def work():
        items = order()
        return items, bodies.TopicList(topic_list=items).to_json()

    def finish(done):
        keep(done[0])
        return ok(done[1])
    return Pending(work, finish)


class TopicHandlers:
    """:param handler_set: the :class:`~rocketpy.namesrv.policy.HandlerSet` (the list switches)."""

    def __init__(self, route_info_manager, namesrv_config, handler_set, route_bounds,
                 dialect=FASTJSON_1_2_83, null_body_remark=None, broker_access=None):
        self.routes = route_info_manager
        #: the fastjson release that reads request bodies
        self.dialect = dialect
        #: Java's answer when it decodes an absent body (WireShape.null_body_remark)
        self.null_body_remark = null_body_remark
        self.config = namesrv_config
        self.handlers = handler_set
        self.bounds = route_bounds
        #: the :class:`~rocketpy.namesrv.broker_access.BrokerAccessPolicy` (None: every host may
        #: name any group)
        self.access = broker_access
        #: topics from which the all-topic list is built by a Pending
        self.offload_from = OFFLOAD_TOPIC_LIST_FROM

    # Without a broker name Java looks up null in each topic's HashMap of queue data, finds
    # none, and answers a count of 0 (operateWritePermOfBroker at 4.9.8, 5.0.0 and 5.3.3).
    @responder(RequestCode.WIPE_WRITE_PERM_OF_BROKER, java_decode=True, writes=True)
    def wipe_write_perm_of_broker(self, header, request, channel, now_ms):
        count = 0 if header.broker_name is None else \
            self.routes.wipe_write_perm_of_broker(header.broker_name)
        return ok(header=WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count))

    @responder(RequestCode.ADD_WRITE_PERM_OF_BROKER, java_decode=True, writes=True)
    def add_write_perm_of_broker(self, header, request, channel, now_ms):
        count = 0 if header.broker_name is None else \
            self.routes.add_write_perm_of_broker(header.broker_name)
        return ok(header=AddWritePermOfBrokerResponseHeader(add_topic_count=count))

    @responder(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    def get_all_topic_list_from_nameserver(self, header, request, channel, now_ms):
        if not self.handlers.all_topics_enabled(self.config):
            return _DISABLED
        if len(self.routes.topic_queue_table) >= self.offload_from:
            later = self.routes.all_topic_list_work()
            if later is not None:
                return _offloaded_list(*later)
        return _topic_list(self.routes.get_all_topic_list())

    # Without a topic Java removes null from the topic table: 4.9.8's HashMap holds no null key,
    # 5.x's ConcurrentHashMap throws and deleteTopic logs it; SUCCESS, nothing deleted.
    @responder(RequestCode.DELETE_TOPIC_IN_NAMESRV, java_decode=True, writes=True)
    def delete_topic_in_namesrv(self, header, request, channel, now_ms):
        if header.topic is not None:
            self.routes.delete_topic(header.topic, header.cluster_name or None)
        return ok()

    # Without a topic Java still decodes the body, then registerTopic asks its ConcurrentHashMap
    # for null, which throws, and logs it: SUCCESS, nothing registered (5.0.0 and 5.3.3).
    # Without a body 5.0.0's decode fails inside fastjson; 5.3.3's reads null: SUCCESS.
    @responder(RequestCode.REGISTER_TOPIC_IN_NAMESRV, java_decode=True, writes=True)
    def register_topic_in_namesrv(self, header, request, channel, now_ms):
        if not request.body and self.null_body_remark is not None:
            return error(ResponseCode.SYSTEM_ERROR, self.null_body_remark)
        return decoded(request.body, self._route,
                       partial(self._register_topic, header, channel))

    def _route(self, body, budget):
        # a body that is JSON null is a null TopicRouteData: nothing registered
        return None if not body else bodies.TopicRouteData.from_request(body, self.dialect,
                                                                        budget)

    def _register_topic(self, header, channel, route):
        refusal = None if self.access is None else self.access.topic_refusal(route, channel)
        if refusal is not None:
            log.warning("request %s from %s refused: %s",
                        int(RequestCode.REGISTER_TOPIC_IN_NAMESRV),
                        getattr(channel, "remote_addr", channel), refusal)
            return error(ResponseCode.NO_PERMISSION, refusal)
        if route is not None:
            queue_datas = [QueueData(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums,
                                     qd.perm, qd.topic_sys_flag) for qd in route.queue_datas or ()]
            if queue_datas and header.topic is not None:
                refusal = self.bounds.topic_refusal(self.routes, header.topic, queue_datas)
                if refusal is not None:
                    return refusal
                self.routes.register_topic(header.topic, queue_datas)
        return ok()

    # 5.1+ checks enableTopicList before it decodes the header, 5.0.0 after: the same answers,
    # since Java's decoding only logs a missing cluster. Without one every release answers an
    # empty list (getTopicsByCluster(null) catches its NullPointerException).
    @responder(RequestCode.GET_TOPICS_BY_CLUSTER, java_decode=True)
    def get_topics_by_cluster(self, header, request, channel, now_ms):
        if not self.handlers.lists_enabled(self.config):
            return _DISABLED
        if len(self.routes.topic_queue_table) >= self.offload_from:
            later = self.routes.topics_by_cluster_work(header.cluster)
            if later is not None:
                return _offloaded_list(*later)
        return _topic_list(self.routes.get_topics_by_cluster(header.cluster))

    @responder(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    def get_system_topic_list_from_ns(self, header, request, channel, now_ms):
        return _topic_list(*self.routes.get_system_topic_list())

    def _unit_list(self, topics):
        return _topic_list(topics()) if self.handlers.lists_enabled(self.config) else _DISABLED

    @responder(RequestCode.GET_UNIT_TOPIC_LIST)
    def get_unit_topic_list(self, header, request, channel, now_ms):
        return self._unit_list(self.routes.get_unit_topics)

    @responder(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)
    def get_has_unit_sub_topic_list(self, header, request, channel, now_ms):
        return self._unit_list(self.routes.get_has_unit_sub_topic_list)

    @responder(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
    def get_has_unit_sub_un_unit_topic_list(self, header, request, channel, now_ms):
        return self._unit_list(self.routes.get_has_unit_sub_un_unit_topic_list)
