"""NameServer processor layer: the NameServer's own settings (Java ``DefaultRequestProcessor``
updateConfig, getConfig, and 5.0's getClientConfigs).

Codes 318, 319 and 47. UPDATE_NAMESRV_CONFIG refuses any key of the black list
(``configBlackList`` plus configBlackList, configStorePath, kvConfigPath, rocketmqHome) with
NO_PERMISSION, except on 5.0.0, which has no black list. A change can alter every route answer
(supportActingMaster, orderMessageEnable, the service wait), so it invalidates every route
snapshot.
"""
from rocketpy.remoting import bodies
from rocketpy.remoting.codes import RequestCode, ResponseCode

from ..javaprops import PropertiesError, body_to_properties
from .replies import error, ok, responder

__all__ = ["AdminHandlers"]


class AdminHandlers:
    """:param configuration: the :class:`~rocketpy.namesrv.config.Configuration`.
    :param invalidate_routes: called after a config update (every route answer may change).
    :param handler_set: the :class:`~rocketpy.namesrv.policy.HandlerSet` (the black list rule).
    """

    def __init__(self, configuration, invalidate_routes, handler_set):
        self.configuration = configuration
        self.invalidate_routes = invalidate_routes
        self.handlers = handler_set
        self.blacklist = configuration.blacklist()   # Java reads it once, at start

    @responder(RequestCode.UPDATE_NAMESRV_CONFIG)
    def update_namesrv_config(self, header, request, channel, now_ms):
        if request.body is not None:
            try:
                props = body_to_properties(request.body)
            except PropertiesError:
                return error(ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if self.handlers.refuses_update(props, self.blacklist):
                return error(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            self.configuration.update(props)
            self.invalidate_routes()
        return ok()

    @responder(RequestCode.GET_NAMESRV_CONFIG)
    def get_namesrv_config(self, header, request, channel, now_ms):
        text = self.configuration.all_configs_text()
        return ok(text.encode("utf-8", "replace") if text.strip() else None)

    @responder(RequestCode.GET_CLIENT_CONFIG)
    def get_client_config(self, header, request, channel, now_ms):
        keys = bodies.GetRemoteClientConfigBody.from_json(request.body).keys or []
        text = self.configuration.client_configs_text(keys)
        return ok(text.encode("utf-8", "replace") if text else None)
