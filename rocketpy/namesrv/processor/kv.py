"""NameServer processor layer: the KV-config requests (Java ``DefaultRequestProcessor``
putKVConfig, getKVConfig, deleteKVConfig, getKVListByNamespace).

ORDER_TOPIC_CONFIG feeds route and REGISTER_BROKER answers, but route answers that read it are
never reused, so nothing here invalidates anything. A put or delete is answered once the KV file
holds it (as Java answers after ``persist()``); a put over a KV bound (``kvConfigMax*``) is
refused with INVALID_PARAMETER naming the bound."""
from rocketpy.remoting.catalogue import responder
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.headers import GetKVConfigResponseHeader

from ..replies import durable, error, java_string, ok

__all__ = ["KVHandlers"]

_KV_CONFIG = "the KV config"


class KVHandlers:
    """:param kv_config_manager: the :class:`~rocketpy.namesrv.kvconfig.KVConfigManager`."""

    def __init__(self, kv_config_manager):
        self.kv = kv_config_manager

    # putKVConfig checks namespace and key itself (4.9.8, 5.0.0, 5.3.3), not the value: a null
    # value is stored (replacing one there), GET_KV_CONFIG then finds nothing, and the file and
    # KVTable bodies leave it out (fastjson skips a map's null values).
    @responder(RequestCode.PUT_KV_CONFIG, java_decode=True, writes=True)
    def put_kv_config(self, header, request, channel, now_ms):
        if header.namespace is None or header.key is None:
            return error(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        refusal = self.kv.refusal(header.namespace, header.key, header.value)
        if refusal is not None:
            return error(ResponseCode.INVALID_PARAMETER, f"Can not put KV config: {refusal}")
        return durable(self.kv.put_kv_config(header.namespace, header.key, header.value), ok(),
                       _KV_CONFIG)

    # Without a namespace or key Java looks up null: KVConfigManager's HashMap finds nothing
    # (getKVConfig, getKVListByNamespace at 4.9.8, 5.0.0 and 5.3.3), and the remark says null.
    @responder(RequestCode.GET_KV_CONFIG, java_decode=True)
    def get_kv_config(self, header, request, channel, now_ms):
        value = self.kv.get_kv_config(header.namespace, header.key)
        if value is not None:
            return ok(header=GetKVConfigResponseHeader(value=value))
        return error(ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {java_string(header.namespace)} "
                     f"Key: {java_string(header.key)}", GetKVConfigResponseHeader())

    # Without a namespace or key Java removes null from its HashMaps, which hold none (putKVConfig
    # refuses a null namespace or key), and rewrites the unchanged file (deleteKVConfig at 4.9.8,
    # 5.0.0, 5.3.3).
    @responder(RequestCode.DELETE_KV_CONFIG, java_decode=True, writes=True)
    def delete_kv_config(self, header, request, channel, now_ms):
        if header.namespace is None or header.key is None:
            return ok()
        return durable(self.kv.delete_kv_config(header.namespace, header.key), ok(), _KV_CONFIG)

    @responder(RequestCode.GET_KVLIST_BY_NAMESPACE, java_decode=True)
    def get_kv_list_by_namespace(self, header, request, channel, now_ms):
        body = self.kv.get_kv_list_by_namespace(header.namespace)
        if body is not None:
            return ok(body)
        return error(ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {java_string(header.namespace)}")
