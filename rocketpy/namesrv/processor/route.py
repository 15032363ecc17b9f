"""NameServer processor layer: route lookups (Java ``ClientRequestProcessor``,
``ClusterTestRequestProcessor``, ``ZoneRouteRPCHook``; ``getBrokerClusterInfo``).

Codes 105 and 106. GET_ROUTEINFO_BY_TOPIC answers standard JSON to clients of version >=
V4_9_4 (401) or that send ``acceptStandardJsonOnly=true``, fastjson's legacy form otherwise; it
is served from the :class:`~rocketpy.namesrv.route_cache.RouteCache`. In zone mode (5.x, ext
``__ZONE_MODE=true`` and a ``__ZONE_NAME``) the answer keeps only that zone's brokers (and every
broker group without a master) and is re-encoded in the legacy form, as the Java hook does.

:func:`answer_stamp` says when a route answer may be reused as it was encoded (the transport's
:mod:`~rocketpy.transport.answercache`): it reads exactly the inputs of
:func:`get_route_info_by_topic` besides the request's own bytes, so the two live side by side.
"""
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import MissingFieldError
from rocketpy.remoting.headers import ZONE_MODE, ZONE_NAME, GetRouteInfoRequestHeader

from ..answers import encode_cluster_info, encode_topic_route
from ..model import MASTER_ID, ORDER_TOPIC_CONFIG
from .replies import error, ok

__all__ = ["get_route_info_by_topic", "get_broker_cluster_info", "filter_by_zone", "answer_stamp"]

#: MQVersion.Version.V4_9_4
_V4_9_4 = 401


def _not_found(proc, topic):
    """``FAQUrl.suggestTodo(APPLY_TOPIC_URL)`` ends the remark; the page moved in 5.1."""
    return error(ResponseCode.TOPIC_NOT_EXIST,
                 f"No topic route info in name server for the topic: {topic}"
                 f"\nSee {proc.profile.topic_not_exist_faq_url} for further details.")


def filter_by_zone(route, zone_name):
    """``ZoneRouteRPCHook.filterByZoneName``: drop other zones' master-bearing broker groups."""
    kept, removed = [], {}
    for broker_data in route.broker_datas:
        if (broker_data.broker_addrs.get(MASTER_ID) is None
                or (broker_data.zone_name or "").lower() == zone_name.lower()
                and broker_data.zone_name is not None):
            kept.append(broker_data)
        else:
            removed[broker_data.broker_name] = broker_data
    route.broker_datas = kept
    route.queue_datas = [qd for qd in route.queue_datas if qd.broker_name not in removed]
    if route.filter_server_table:
        for broker_data in removed.values():
            for addr in broker_data.broker_addrs.values():
                route.filter_server_table.pop(addr, None)
    return route


def _zone(proc, request):
    if not proc.profile.serve_5x_codes:
        return None
    ext = request.ext_fields or {}
    if str(ext.get(ZONE_MODE, "")).lower() != "true":
        return None
    zone = ext.get(ZONE_NAME)
    return zone if zone and zone.strip() else None


def _not_ready(proc, now_ms):
    """5.x ``needWaitForService``: still inside ``waitSecondsForService`` after the start."""
    config = proc.namesrv_config
    return (proc.profile.wait_for_service and config.need_wait_for_service
            and now_ms - proc.startup_ms < config.wait_seconds_for_service * 1000)


def get_route_info_by_topic(proc, request, channel, now_ms):
    # Every client polls every topic every 30 s: read the two fields directly instead of the
    # whole GetRouteInfoRequestHeader (same rules: topic required, parseBoolean).
    # What the answer depends on besides the request's bytes is listed in answer_stamp below.
    ext = request.ext_fields or {}
    topic = ext.get("topic")
    if topic is None:
        raise MissingFieldError("topic", GetRouteInfoRequestHeader.JAVA_NAME)
    config = proc.namesrv_config
    if _not_ready(proc, now_ms):
        return error(ResponseCode.SYSTEM_ERROR, "name server not ready")
    cluster_test = proc.cluster_test
    order_conf = None
    if cluster_test or config.order_message_enable:
        order_conf = proc.kv_config_manager.get_kv_config(ORDER_TOPIC_CONFIG, topic)
    standard = not cluster_test and (
        request.version >= _V4_9_4 or str(ext.get("acceptStandardJsonOnly")).lower() == "true")
    zone = _zone(proc, request)
    if zone is None:
        body = proc.route_cache.lookup(topic, standard, order_conf)
    else:
        route = proc.route_info_manager.pickup_topic_route_data(topic)
        body = None
        if route is not None:
            route.order_topic_conf = order_conf
            body = encode_topic_route(filter_by_zone(route, zone), False, True)
    if body is None:
        return _not_found(proc, topic)
    return ok(body)


def answer_stamp(proc, request, channel, now_ms):
    """For GET_ROUTEINFO_BY_TOPIC: a zero-argument callable whose value changes whenever
    :func:`get_route_info_by_topic` may answer this same request differently, or None when
    this answer must not be reused.

    Besides the request's own bytes (topic, client version, ``acceptStandardJsonOnly``), the
    answer reads: the topic's route version and the table epoch (the
    :class:`~rocketpy.namesrv.route_cache.RouteCache` rule), ``orderMessageEnable`` and the
    topic's ORDER_TOPIC_CONFIG value, and the "not ready" window (``needWaitForService``,
    ``waitSecondsForService``). The stamp reads exactly those. Answers that depend on anything
    else are not reused: zone filtering, cluster-test mode, the window itself, a missing topic.
    """
    if proc.cluster_test or _not_ready(proc, now_ms) or _zone(proc, request) is not None:
        return None
    topic = (request.ext_fields or {}).get("topic")
    if not topic:
        return None
    rim = proc.route_info_manager
    route_version = rim.route_version
    get_kv_config = proc.kv_config_manager.get_kv_config
    config = proc.namesrv_config

    def stamp():  # called on every reuse: route queries are most of the traffic
        order = config.order_message_enable
        return (route_version(topic), rim.epoch, order,
                get_kv_config(ORDER_TOPIC_CONFIG, topic) if order else None,
                config.need_wait_for_service, config.wait_seconds_for_service)

    return stamp


def get_broker_cluster_info(proc, request, channel, now_ms):
    return ok(encode_cluster_info(proc.route_info_manager, proc.profile.v5_registration))
