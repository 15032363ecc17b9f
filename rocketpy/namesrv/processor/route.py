"""NameServer processor layer: route lookups (Java ``ClientRequestProcessor``,
``ClusterTestRequestProcessor``, ``ZoneRouteRPCHook``; ``getBrokerClusterInfo``).

GET_ROUTEINFO_BY_TOPIC answers standard JSON to clients >= V4_9_4 (or sending
``acceptStandardJsonOnly=true``), fastjson's legacy form otherwise; the topic's route snapshot
keeps the body encoded per dialect. In 5.x zone mode (``__ZONE_MODE=true`` and a
``__ZONE_NAME``) only that zone's brokers and the masterless groups are kept, re-encoded in the
legacy form, as the Java hook does.

An answer is reusable as encoded (``reuse`` names the snapshot's version) when it depends on the
request and the topic's snapshot (or absence) alone: not when it read the KV store
(``orderTopicConf``), the zone or the service-wait window."""
from rocketpy.remoting.catalogue import responder
from rocketpy.remoting.codes import MQVersion, RequestCode, ResponseCode

from ..model import MASTER_ID, ORDER_TOPIC_CONFIG, TopicRouteData
from ..replies import error, java_string, ok

__all__ = ["RouteHandlers", "filter_by_zone"]


def filter_by_zone(route, zone_name):
    """``ZoneRouteRPCHook.filterByZoneName``: a copy without other zones' master-bearing broker
    groups."""
    kept, removed = [], []
    for broker_data in route.broker_datas:
        if (broker_data.broker_addrs.get(MASTER_ID) is None
                or (broker_data.zone_name or "").lower() == zone_name.lower()
                and broker_data.zone_name is not None):
            kept.append(broker_data)
        else:
            removed.append(broker_data)
    names = {broker_data.broker_name for broker_data in removed}
    gone = {addr for broker_data in removed for addr in broker_data.broker_addrs.values()}
    return TopicRouteData(
        [qd for qd in route.queue_datas if qd.broker_name not in names], kept,
        {addr: servers for addr, servers in route.filter_server_table.items() if addr not in gone},
        route.topic_queue_mapping_by_broker)


class RouteHandlers:
    """:param startup_ms: when the NameServer started (``waitSecondsForService``).
    :param cluster_test: ``clusterTest``, read once at start as Java does."""

    def __init__(self, route_info_manager, kv_config_manager, namesrv_config, policies,
                 startup_ms=0, cluster_test=False):
        self.routes = route_info_manager
        self.kv = kv_config_manager
        self.config = namesrv_config
        self.wire = policies.wire
        self.handlers = policies.handlers
        self.startup_ms = startup_ms
        self.cluster_test = cluster_test

    def _not_found(self, topic):
        """``FAQUrl.suggestTodo(APPLY_TOPIC_URL)`` ends the remark; the page moved in 5.1. A
        request without a topic asked for ``null``, which Java's concatenation spells out."""
        return error(ResponseCode.TOPIC_NOT_EXIST,
                     f"No topic route info in name server for the topic: {java_string(topic)}"
                     f"\nSee {self.wire.faq_url} for further details.")

    # Without a topic every release answers TOPIC_NOT_EXIST: pickupTopicRouteData(null) finds
    # nothing (4.9.8's HashMap) or catches the NullPointerException of a ConcurrentHashMap's
    # get(null) and returns null (5.0.0 RouteInfoManager.java, 5.3.3 :700-741).
    @responder(RequestCode.GET_ROUTEINFO_BY_TOPIC, java_decode=True)
    def get_route_info_by_topic(self, header, request, channel, now_ms):
        topic = header.topic
        if self.handlers.not_ready(self.config, now_ms - self.startup_ms):
            return error(ResponseCode.SYSTEM_ERROR, "name server not ready")
        reads_kv = self.cluster_test or self.config.order_message_enable
        order_conf = self.kv.get_kv_config(ORDER_TOPIC_CONFIG, topic) if reads_kv else None
        zone = self.handlers.zone(request.ext_fields)
        snapshot = self.routes.route_snapshot(topic)
        route = None if snapshot is None else snapshot.route
        if route is None:
            reply = self._not_found(topic)
            if reads_kv or zone is not None:
                return reply
            return reply._replace(reuse=(topic, self.routes.route_version(topic)))
        if zone is not None:
            return ok(self.wire.route(filter_by_zone(route, zone), order_conf).to_json())
        standard = not self.cluster_test and (
            request.version >= MQVersion.V4_9_4 or bool(header.accept_standard_json_only))
        if order_conf is None:
            body = snapshot.body(standard, self._encode, route, None, standard)
        else:   # a KV value: the KV store's byte bound holds it, a snapshot's bodies would not
            body = self._encode(route, order_conf, standard)
        return ok(body, reuse=None if reads_kv else (topic, snapshot.version))

    def _encode(self, route, order_conf, standard):
        return self.wire.route(route, order_conf).to_json(standard)

    @responder(RequestCode.GET_BROKER_CLUSTER_INFO)
    def get_broker_cluster_info(self, header, request, channel, now_ms):
        return ok(self.wire.cluster_info(self.routes))
