"""NameServer processor layer: the KV-config requests (Java ``DefaultRequestProcessor``
putKVConfig, getKVConfig, deleteKVConfig, getKVListByNamespace).

Codes 100, 101, 102 and 219. The namespace ORDER_TOPIC_CONFIG feeds route answers
(``orderTopicConf``) and REGISTER_BROKER answers; the route cache keys on the value it read, so
these handlers need not invalidate anything.
"""
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.headers import (DeleteKVConfigRequestHeader, GetKVConfigRequestHeader,
                                       GetKVListByNamespaceRequestHeader, PutKVConfigRequestHeader)

from .replies import error, ok

__all__ = ["put_kv_config", "get_kv_config", "delete_kv_config", "get_kv_list_by_namespace"]


def put_kv_config(proc, request, channel, now_ms):
    header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    if header.namespace is None or header.key is None:
        return error(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    proc.kv_config_manager.put_kv_config(header.namespace, header.key, header.value)
    return ok()


def get_kv_config(proc, request, channel, now_ms):
    header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    value = proc.kv_config_manager.get_kv_config(header.namespace, header.key)
    if value is not None:
        return ok(ext_fields={"value": value})
    return error(ResponseCode.QUERY_NOT_FOUND,
                 f"No config item, Namespace: {header.namespace} Key: {header.key}", {})


def delete_kv_config(proc, request, channel, now_ms):
    header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    proc.kv_config_manager.delete_kv_config(header.namespace, header.key)
    return ok()


def get_kv_list_by_namespace(proc, request, channel, now_ms):
    header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
    body = proc.kv_config_manager.get_kv_list_by_namespace(header.namespace)
    if body is not None:
        return ok(body)
    return error(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
