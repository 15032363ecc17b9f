"""NameServer processor layer: topic administration and topic lists (Java
``DefaultRequestProcessor`` wipe/addWritePermOfBroker, getAllTopicListFromNameserver,
deleteTopicInNamesrv, registerTopicToNamesrv, getTopicsByCluster, getSystemTopicListFromNs,
getUnitTopicList, getHasUnitSubTopicList, getHasUnitSubUnUnitTopicList).

Codes 205, 327, 206, 216, 217, 224, 304, 311, 312, 313. 5.x answers SYSTEM_ERROR "disable" for
the lists when ``enableAllTopicList`` / ``enableTopicList`` are off; 4.9 has no such switches.
"""
from rocketpy.remoting import bodies
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.headers import (AddWritePermOfBrokerRequestHeader,
                                       DeleteTopicFromNamesrvRequestHeader,
                                       GetTopicsByClusterRequestHeader, RegisterTopicRequestHeader,
                                       WipeWritePermOfBrokerRequestHeader)

from ..answers import encode_topic_list
from ..model import QueueData
from .replies import error, ok

__all__ = ["wipe_write_perm_of_broker", "add_write_perm_of_broker",
           "get_all_topic_list_from_nameserver", "delete_topic_in_namesrv",
           "register_topic_in_namesrv", "get_topics_by_cluster", "get_system_topic_list_from_ns",
           "get_unit_topic_list", "get_has_unit_sub_topic_list",
           "get_has_unit_sub_un_unit_topic_list"]

_DISABLED = error(ResponseCode.SYSTEM_ERROR, "disable")


def wipe_write_perm_of_broker(proc, request, channel, now_ms):
    header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
    count = proc.route_info_manager.wipe_write_perm_of_broker(header.broker_name)
    return ok(ext_fields={"wipeTopicCount": str(count)})


def add_write_perm_of_broker(proc, request, channel, now_ms):
    header = AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
    count = proc.route_info_manager.add_write_perm_of_broker(header.broker_name)
    return ok(ext_fields={"addTopicCount": str(count)})


def _lists_enabled(proc):
    return not proc.profile.topic_list_switches or proc.namesrv_config.enable_topic_list


def get_all_topic_list_from_nameserver(proc, request, channel, now_ms):
    if proc.profile.topic_list_switches and not proc.namesrv_config.enable_all_topic_list:
        return _DISABLED
    return ok(encode_topic_list(proc.route_info_manager.get_all_topic_list()))


def delete_topic_in_namesrv(proc, request, channel, now_ms):
    header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
    proc.route_info_manager.delete_topic(header.topic, header.cluster_name or None)
    return ok()


def register_topic_in_namesrv(proc, request, channel, now_ms):
    header = RegisterTopicRequestHeader.from_ext_fields(request.ext_fields)
    if request.body:
        route = bodies.TopicRouteData.from_json(request.body)
        queue_datas = [QueueData(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm,
                                 qd.topic_sys_flag) for qd in route.queue_datas or ()]
        if queue_datas:
            rim = proc.route_info_manager
            refusal = proc.route_bounds.topic_refusal(rim, header.topic, queue_datas)
            if refusal is not None:
                return refusal
            rim.register_topic(header.topic, queue_datas)
    return ok()


def get_topics_by_cluster(proc, request, channel, now_ms):
    header = None
    if not proc.profile.topics_by_cluster_switch_first:    # 5.0.0: a bad header fails first
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
    if not _lists_enabled(proc):
        return _DISABLED
    header = header or GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
    return ok(encode_topic_list(proc.route_info_manager.get_topics_by_cluster(header.cluster)))


def get_system_topic_list_from_ns(proc, request, channel, now_ms):
    topics, broker_addr = proc.route_info_manager.get_system_topic_list()
    return ok(encode_topic_list(topics, broker_addr))


def _unit_list(method):
    def handler(proc, request, channel, now_ms):
        if not _lists_enabled(proc):
            return _DISABLED
        return ok(encode_topic_list(getattr(proc.route_info_manager, method)()))
    handler.__name__ = method
    return handler


get_unit_topic_list = _unit_list("get_unit_topics")
get_has_unit_sub_topic_list = _unit_list("get_has_unit_sub_topic_list")
get_has_unit_sub_un_unit_topic_list = _unit_list("get_has_unit_sub_un_unit_topic_list")
