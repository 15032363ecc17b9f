"""NameServer processor layer: the NameServer's own settings (Java ``DefaultRequestProcessor``
updateConfig, getConfig, and 5.0's getClientConfigs).

Codes 318, 319 and 47. UPDATE_NAMESRV_CONFIG first asks the
:class:`~rocketpy.namesrv.configguard.ConfigUpdateGuard`: keys or values that would not read
back as themselves are refused (INVALID_PARAMETER), and so is every key of the black list
(NO_PERMISSION) -- in every profile, 5.0 included, where Java 5.0.0 has no black list. A change
can alter every route answer (supportActingMaster), so it bumps the route tables' epoch. The
answer waits until the config file is written (as Java's ``Configuration.update`` persists
before it returns).
"""
from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode

from ..javaprops import PropertiesError, body_to_properties
from .replies import durable, error, ok

__all__ = ["update_namesrv_config", "get_namesrv_config", "get_client_config"]


def update_namesrv_config(proc, request, channel, now_ms):
    if request.body is not None:
        try:
            props = body_to_properties(request.body)
        except PropertiesError:
            return error(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        refusal = proc.config_guard.refusal(props, getattr(channel, "remote_addr", ""))
        if refusal is not None:
            return refusal
        write = proc.configuration.update(props)
        proc.route_info_manager.invalidate_routes()
        return durable(write, ok(), "the config file")
    return ok()


def get_namesrv_config(proc, request, channel, now_ms):
    text = proc.configuration.all_configs_text()
    return ok(text.encode("utf-8", "replace") if text.strip() else None)


def get_client_config(proc, request, channel, now_ms):
    keys = bodies.GetRemoteClientConfigBody.from_json(request.body).keys or []
    text = proc.configuration.client_configs_text(keys)
    return ok(text.encode("utf-8", "replace") if text else None)
