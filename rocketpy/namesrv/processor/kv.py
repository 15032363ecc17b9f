"""NameServer processor layer: the KV-config requests (Java ``DefaultRequestProcessor``
putKVConfig, getKVConfig, deleteKVConfig, getKVListByNamespace).

Codes 100, 101, 102 and 219. The namespace ORDER_TOPIC_CONFIG feeds route answers
(``orderTopicConf``) and REGISTER_BROKER answers; route answers that read it are never reused, so
these handlers need not invalidate anything.
"""
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.headers import GetKVConfigResponseHeader

from .replies import error, ok, responder

__all__ = ["KVHandlers"]


class KVHandlers:
    """:param kv_config_manager: the :class:`~rocketpy.namesrv.kvconfig.KVConfigManager`."""

    def __init__(self, kv_config_manager):
        self.kv = kv_config_manager

    @responder(RequestCode.PUT_KV_CONFIG)
    def put_kv_config(self, header, request, channel, now_ms):
        self.kv.put_kv_config(header.namespace, header.key, header.value)
        return ok()

    @responder(RequestCode.GET_KV_CONFIG)
    def get_kv_config(self, header, request, channel, now_ms):
        value = self.kv.get_kv_config(header.namespace, header.key)
        if value is not None:
            return ok(header=GetKVConfigResponseHeader(value=value))
        return error(ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {header.namespace} Key: {header.key}",
                     GetKVConfigResponseHeader())

    @responder(RequestCode.DELETE_KV_CONFIG)
    def delete_kv_config(self, header, request, channel, now_ms):
        self.kv.delete_kv_config(header.namespace, header.key)
        return ok()

    @responder(RequestCode.GET_KVLIST_BY_NAMESPACE)
    def get_kv_list_by_namespace(self, header, request, channel, now_ms):
        body = self.kv.get_kv_list_by_namespace(header.namespace)
        if body is not None:
            return ok(body)
        return error(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
