"""NameServer processor layer: requests brokers send (Java ``DefaultRequestProcessor``
registerBroker, unregisterBroker, queryBrokerTopicConfig, brokerHeartbeat,
getBrokerMemberGroup).

Codes 103, 104, 322, 904 and 901. Registration bodies become route records in
:mod:`.registration`; a big one comes back as a :class:`~rocketpy.namesrv.pending.Pending`,
and so does the registration's answer. A registration that would take the route state past a
server-wide bound (:mod:`rocketpy.namesrv.route_bounds`) is refused before it is applied.
"""
from functools import partial

from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.headers import (ZONE_NAME, BrokerHeartbeatRequestHeader,
                                       GetBrokerMemberGroupRequestHeader,
                                       QueryDataVersionRequestHeader, RegisterBrokerRequestHeader,
                                       UnRegisterBrokerRequestHeader)

from ..answers import encode_broker_member_group, encode_data_version
from ..model import ORDER_TOPIC_CONFIG, UnRegisterBrokerRequest
from ..pending import Pending
from .registration import data_version_from_bean, decode_registration
from .replies import NOT_SET_REMARK, Reply, error, java_exception_remark, ok

__all__ = ["register_broker", "unregister_broker", "query_data_version", "broker_heartbeat",
           "get_broker_member_group"]


def register_broker(proc, request, channel, now_ms):
    header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
    decoded = decode_registration(proc, request, header)  # checks bodyCrc32 first, as Java
    if isinstance(decoded, Pending):  # a big body: decoded first, maybe on another thread
        return decoded.then(partial(_register, proc, request, header, channel, now_ms))
    return _register(proc, request, header, channel, now_ms, decoded)


def _register(proc, request, header, channel, now_ms, decoded):
    if isinstance(decoded, Reply):
        return decoded
    wrapper, filter_servers = decoded
    v5 = proc.profile.v5_registration
    acting = header.enable_acting_master if v5 else None
    refusal = proc.route_bounds.registration_refusal(
        proc.route_info_manager, header.cluster_name, header.broker_addr, header.broker_name,
        header.broker_id, wrapper, filter_servers, acting)
    if refusal is not None:   # and its body is not kept: it registered nothing
        proc.registration_bodies.forget((header.cluster_name, header.broker_addr))
        return refusal
    result = proc.route_info_manager.register_broker(
        header.cluster_name, header.broker_addr, header.broker_name, header.broker_id,
        header.ha_server_addr, wrapper, filter_servers, channel, now_ms,
        zone_name=(request.ext_fields or {}).get(ZONE_NAME) if v5 else None,
        timeout_millis=header.heartbeat_timeout_millis if v5 else None,
        enable_acting_master=acting)
    if result is None:
        return error(ResponseCode.SYSTEM_ERROR, "register broker failed", {})
    ext = {}
    if result.ha_server_addr is not None:
        ext["haServerAddr"] = result.ha_server_addr
    if result.master_addr is not None:
        ext["masterAddr"] = result.master_addr
    body = None
    if not v5 or proc.namesrv_config.return_order_topic_config_to_broker:
        body = proc.kv_config_manager.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
    return ok(body, ext)


def unregister_broker(proc, request, channel, now_ms):
    header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
    unregister = UnRegisterBrokerRequest(header.cluster_name, header.broker_addr,
                                         header.broker_name, header.broker_id)
    if not proc.profile.queued_unregistration:
        proc.route_info_manager.unregister_brokers([unregister])
    elif not proc.submit_unregistration(unregister):
        return error(ResponseCode.SYSTEM_ERROR, None)
    return ok()


#: 4.9.8 and 5.0.0 decode a missing body as DataVersion and fail (NullPointerException); the
#: remark keeps Java's exception name and says what was missing.
_NO_DATA_VERSION = error(ResponseCode.SYSTEM_ERROR, java_exception_remark(
    "java.lang.NullPointerException", "QUERY_DATA_VERSION carries no DataVersion body"))


def query_data_version(proc, request, channel, now_ms):
    header = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
    if request.body is None and proc.profile.query_data_version_needs_body:
        return _NO_DATA_VERSION
    rim = proc.route_info_manager
    data_version = None
    if request.body:
        data_version = data_version_from_bean(bodies.DataVersion.from_json(request.body))
    changed = rim.is_broker_topic_config_changed(header.cluster_name, header.broker_addr, data_version)
    if proc.profile.query_data_version_always_refreshes or not changed:
        rim.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr, now_ms)
    stored = rim.query_broker_topic_config(header.cluster_name, header.broker_addr)
    body = None if stored is None else encode_data_version(stored, proc.profile.data_version_state)
    return ok(body, {"changed": "true" if changed else "false"})


def broker_heartbeat(proc, request, channel, now_ms):
    header = BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
    proc.route_info_manager.update_broker_info_update_timestamp(
        header.cluster_name, header.broker_addr, now_ms)
    return ok()


def get_broker_member_group(proc, request, channel, now_ms):
    header = GetBrokerMemberGroupRequestHeader.from_ext_fields(request.ext_fields)
    addrs = proc.route_info_manager.get_broker_member_group(header.broker_name)
    body = encode_broker_member_group(header.cluster_name, header.broker_name, addrs)
    return Reply(ResponseCode.SUCCESS, NOT_SET_REMARK, None, body)
