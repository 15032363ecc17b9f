"""NameServer processor layer: the NameServer's own settings (Java ``DefaultRequestProcessor``
updateConfig, getConfig, and 5.0's getClientConfigs).

UPDATE_NAMESRV_CONFIG first asks access control (its own keys change only with a restart) and
the :class:`~rocketpy.namesrv.processor.configguard.ConfigUpdateGuard` (in every profile, 5.0
included, which has no black list in Java), once its body is decoded (off the reactor past 1 KiB). A
change can alter every route answer (supportActingMaster, orderMessageEnable, the service wait),
so it invalidates every snapshot; the answer waits until the config file is written, as Java's
``Configuration.update`` persists before it returns."""
import logging
from functools import partial

from rocketpy.remoting import bodies
from rocketpy.remoting.catalogue import responder
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.fastjson import FASTJSON_1_2_83

from ..configupdate import update_properties
from ..pending import decoded
from ..replies import durable, error, ok

__all__ = ["AdminHandlers"]

log = logging.getLogger("rocketpy.namesrv")


class AdminHandlers:
    """:param configuration: the :class:`~rocketpy.namesrv.config.Configuration`.
    :param invalidate_routes: called after a config update (every route answer may change).
    :param config_guard: the :class:`~rocketpy.namesrv.processor.configguard.ConfigUpdateGuard`.
    :param access_control: the :class:`~rocketpy.namesrv.acl.AccessControl` (None: none).
    """

    def __init__(self, configuration, invalidate_routes, config_guard, dialect=FASTJSON_1_2_83,
                 access_control=None):
        self.configuration = configuration
        self.access_control = access_control
        #: the fastjson release that reads request bodies
        self.dialect = dialect
        self.invalidate_routes = invalidate_routes
        self.config_guard = config_guard

    @responder(RequestCode.UPDATE_NAMESRV_CONFIG, writes=True)
    def update_namesrv_config(self, header, request, channel, now_ms):
        if request.body is None:
            return ok()
        return decoded(request.body, update_properties, partial(self._update, request, channel))

    def _update(self, request, channel, read):
        props, refused = read
        if refused is not None:
            return error(ResponseCode.SYSTEM_ERROR, refused)
        if self.access_control is not None:
            refusal = self.access_control.config_refusal(props, request, channel)
            if refusal is not None:
                log.warning("request %s from %s refused: %s", request.code,
                            getattr(channel, "remote_addr", channel), refusal)
                return error(ResponseCode.NO_PERMISSION, refusal)
        refusal = self.config_guard.refusal(props, getattr(channel, "remote_addr", ""))
        if refusal is not None:
            return refusal
        write = self.configuration.update(props)
        self.invalidate_routes()
        return durable(write, ok(), "the config file")

    @responder(RequestCode.GET_NAMESRV_CONFIG)
    def get_namesrv_config(self, header, request, channel, now_ms):
        text = self.configuration.all_configs_text()
        return ok(text.encode("utf-8", "replace") if text.strip() else None)

    @responder(RequestCode.GET_CLIENT_CONFIG)
    def get_client_config(self, header, request, channel, now_ms):
        return decoded(request.body, self._client_config_keys, self._client_configs)

    def _client_config_keys(self, body, budget):
        return bodies.GetRemoteClientConfigBody.from_json(body, self.dialect, budget).keys or []

    def _client_configs(self, keys):
        text = self.configuration.client_configs_text(keys)
        return ok(text.encode("utf-8", "replace") if text else None)
