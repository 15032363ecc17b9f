"""NameServer processor layer: the KV-config requests (Java ``DefaultRequestProcessor``
putKVConfig, getKVConfig, deleteKVConfig, getKVListByNamespace).

Codes 100, 101, 102 and 219. The namespace ORDER_TOPIC_CONFIG feeds route answers
(``orderTopicConf``) and REGISTER_BROKER answers; the route cache keys on the value it read, so
these handlers need not invalidate anything.

A put or delete is answered once the KV file holds it (as Java answers after ``persist()``),
which the transport waits for on its writer thread; a put over one of the KV bounds
(``kvConfigMax*``) is refused with INVALID_PARAMETER and a remark naming the bound.
"""
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.headers import (DeleteKVConfigRequestHeader, GetKVConfigRequestHeader,
                                       GetKVListByNamespaceRequestHeader, PutKVConfigRequestHeader)

from .replies import durable, error, ok

_KV_CONFIG = "the KV config"

__all__ = ["put_kv_config", "get_kv_config", "delete_kv_config", "get_kv_list_by_namespace"]


def put_kv_config(proc, request, channel, now_ms):
    header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    if header.namespace is None or header.key is None:
        return error(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    kv = proc.kv_config_manager
    refusal = kv.refusal(header.namespace, header.key, header.value)
    if refusal is not None:
        return error(ResponseCode.INVALID_PARAMETER, f"Can not put KV config: {refusal}")
    return durable(kv.put_kv_config(header.namespace, header.key, header.value), ok(), _KV_CONFIG)


def get_kv_config(proc, request, channel, now_ms):
    header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    value = proc.kv_config_manager.get_kv_config(header.namespace, header.key)
    if value is not None:
        return ok(ext_fields={"value": value})
    return error(ResponseCode.QUERY_NOT_FOUND,
                 f"No config item, Namespace: {header.namespace} Key: {header.key}", {})


def delete_kv_config(proc, request, channel, now_ms):
    header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
    return durable(proc.kv_config_manager.delete_kv_config(header.namespace, header.key), ok(),
                   _KV_CONFIG)


def get_kv_list_by_namespace(proc, request, channel, now_ms):
    header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
    body = proc.kv_config_manager.get_kv_list_by_namespace(header.namespace)
    if body is not None:
        return ok(body)
    return error(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
