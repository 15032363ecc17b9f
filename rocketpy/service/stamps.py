"""Service layer: which NameServer answers the transport may reuse, and their validity stamps
(the namesrv side of :mod:`rocketpy.transport.answercache`).

Only GET_ROUTEINFO_BY_TOPIC is worth it (clients poll every topic's route every 30 s). Its answer
(see :mod:`rocketpy.namesrv.processor.route`) is a function of the request's own bytes (topic,
client version, ``acceptStandardJsonOnly``) and of: the topic's route version and the route
table's epoch (:class:`~rocketpy.namesrv.route_cache.RouteCache`'s own validity rule), the
``orderMessageEnable`` switch and the topic's ORDER_TOPIC_CONFIG value, and whether the 5.3
"name server not ready" window is over. The stamp reads exactly those; requests whose answer
depends on anything else (zone mode, cluster test, the wait window) are not cached.
"""
from ..namesrv.model import ORDER_TOPIC_CONFIG
from ..remoting.codes import RequestCode

__all__ = ["RouteAnswerStamps"]

_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)


class RouteAnswerStamps:
    """``stamps(request, channel, now_ms)`` -> a stamp callable for cacheable route queries."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, request, channel, now_ms):
        if request.code != _ROUTE:
            return None
        proc = self.processor
        if proc.cluster_test:
            return None
        config = proc.namesrv_config
        if (proc.profile.wait_for_service and config.need_wait_for_service
                and now_ms - proc.startup_ms < config.wait_seconds_for_service * 1000):
            return None
        ext = request.ext_fields
        if not ext:
            return None
        topic = ext.get("topic")
        if not topic or str(ext.get("__ZONE_MODE", "")).lower() == "true":
            return None
        rim = proc.route_info_manager
        kv = proc.kv_config_manager

        def stamp():
            order = config.order_message_enable
            return (rim.route_version(topic), rim.epoch, order, config.need_wait_for_service,
                    kv.get_kv_config(ORDER_TOPIC_CONFIG, topic) if order else None)

        return stamp
