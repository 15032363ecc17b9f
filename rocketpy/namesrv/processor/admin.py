"""NameServer processor layer: the NameServer's own settings (Java ``DefaultRequestProcessor``
updateConfig, getConfig, and 5.0's getClientConfigs).

Codes 318, 319 and 47. UPDATE_NAMESRV_CONFIG refuses any key of the black list
(``configBlackList`` plus configBlackList, configStorePath, kvConfigPath, rocketmqHome) with
NO_PERMISSION, except on 5.0.0, which has no black list. A change can alter every route answer
(supportActingMaster), so it bumps the route tables' epoch.
"""
from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode

from ..javaprops import PropertiesError, body_to_properties
from .replies import error, ok

__all__ = ["update_namesrv_config", "get_namesrv_config", "get_client_config"]


def update_namesrv_config(proc, request, channel, now_ms):
    if request.body is not None:
        try:
            props = body_to_properties(request.body)
        except PropertiesError:
            return error(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if proc.profile.config_blacklist and any(key in props for key in proc.config_blacklist):
            return error(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        proc.configuration.update(props)
        proc.route_info_manager.invalidate_routes()
    return ok()


def get_namesrv_config(proc, request, channel, now_ms):
    text = proc.configuration.all_configs_text()
    return ok(text.encode("utf-8", "replace") if text.strip() else None)


def get_client_config(proc, request, channel, now_ms):
    keys = bodies.GetRemoteClientConfigBody.from_json(request.body).keys or []
    text = proc.configuration.client_configs_text(keys)
    return ok(text.encode("utf-8", "replace") if text else None)
