"""NameServer state layer: the JSON bodies the Java NameServer writes, from route records.

fastjson writes a bean's fields sorted by name and skips nulls; maps come out in their Java
iteration order in the legacy form and sorted in the standard form (``MapSortField``), with
``Long``/``Integer`` map keys unquoted only in the legacy form. Each function builds the plain
dict Java's bean would serialise to (fields in fastjson order, maps in Java order) and hands it
to :func:`rocketpy.remoting.fastjson.dumps`.

Version differences: ``BrokerData`` has ``enableActingMaster`` (always written) and
``zoneName`` (when set) since 5.0; ``DataVersion`` has ``stateVersion`` since 5.0.
"""
from rocketpy.remoting import fastjson
from rocketpy.remoting.javahash import hashmap_order

from .javaorder import chm_capacity, hashmap_capacity

__all__ = ["broker_data_json", "topic_route_json", "encode_topic_route", "encode_cluster_info",
           "encode_topic_list", "encode_broker_member_group", "encode_data_version"]


def _addrs(addrs):
    return {bid: addrs[bid] for bid in hashmap_order(list(addrs), hashmap_capacity(len(addrs)))}


def broker_data_json(broker_data, v5):
    out = {"brokerAddrs": _addrs(broker_data.broker_addrs), "brokerName": broker_data.broker_name,
           "cluster": broker_data.cluster}
    if v5:
        out["enableActingMaster"] = broker_data.enable_acting_master
        if broker_data.zone_name is not None:
            out["zoneName"] = broker_data.zone_name
    return out


def _queue_data_json(qd):
    return {"brokerName": qd.broker_name, "perm": qd.perm, "readQueueNums": qd.read_queue_nums,
            "topicSysFlag": qd.topic_sys_flag, "writeQueueNums": qd.write_queue_nums}


_MAPPING_FIELDS = ("bname", "currIdMap", "dirty", "epoch", "scope", "topic", "totalQueues")


def _mapping_info_json(info):
    """``TopicQueueMappingInfo`` as fastjson writes it (its seven bean fields)."""
    if not isinstance(info, dict):
        return info
    out = {}
    for name in _MAPPING_FIELDS:
        value = info.get(name)
        if name == "currIdMap" and isinstance(value, dict):
            value = {k: value[k] for k in hashmap_order(list(value), chm_capacity(len(value)))}
        out[name] = value
    return out


def topic_route_json(route, v5):
    mapping = route.topic_queue_mapping_by_broker
    if mapping is not None:
        mapping = {name: _mapping_info_json(mapping[name])
                   for name in hashmap_order(list(mapping), hashmap_capacity(len(mapping)))}
    filters = route.filter_server_table
    return {
        "brokerDatas": [broker_data_json(bd, v5) for bd in route.broker_datas],
        "filterServerTable": {a: filters[a] for a in hashmap_order(list(filters),
                                                                  hashmap_capacity(len(filters)))},
        "orderTopicConf": route.order_topic_conf,
        "queueDatas": [_queue_data_json(qd) for qd in route.queue_datas],
        "topicQueueMappingByBroker": mapping,
    }


def encode_topic_route(route, standard, v5):
    """GET_ROUTEINFO_BY_TOPIC body: standard JSON (clients >= V4_9_4 or acceptStandardJsonOnly)
    or fastjson's legacy form.

    Routes are rebuilt for every topic of a broker whose registration changed, so the common
    shape (no filter servers, no static-topic mapping) is written by hand; the tests prove it
    equal to :func:`rocketpy.remoting.fastjson.dumps` of :func:`topic_route_json`.
    """
    if route.filter_server_table or route.topic_queue_mapping_by_broker is not None:
        return fastjson.dumps(topic_route_json(route, v5), standard=standard)
    return _route_fast(route, standard, v5).encode("utf-8", "replace")  # as fastjson.dumps


def _route_fast(route, standard, v5):
    esc = fastjson.escape_string
    parts = ['{"brokerDatas":[']
    for i, bd in enumerate(route.broker_datas):
        if i:
            parts.append(",")
        addrs = bd.broker_addrs
        if standard:
            ids = sorted(addrs)
            inner = ",".join(f'"{bid}":{esc(addrs[bid], True)}' for bid in ids)
        else:
            ids = hashmap_order(list(addrs), hashmap_capacity(len(addrs)))
            inner = ",".join(f"{bid}:{esc(addrs[bid])}" for bid in ids)
        parts.append(f'{{"brokerAddrs":{{{inner}}},"brokerName":{esc(bd.broker_name, standard)},'
                     f'"cluster":{esc(bd.cluster, standard)}')
        if v5:
            parts.append(',"enableActingMaster":true' if bd.enable_acting_master
                         else ',"enableActingMaster":false')
            if bd.zone_name is not None:
                parts.append(f',"zoneName":{esc(bd.zone_name, standard)}')
        parts.append("}")
    parts.append('],"filterServerTable":{}')
    if route.order_topic_conf is not None:
        parts.append(f',"orderTopicConf":{esc(route.order_topic_conf, standard)}')
    parts.append(',"queueDatas":[')
    parts.append(",".join(
        f'{{"brokerName":{esc(qd.broker_name, standard)},"perm":{qd.perm},'
        f'"readQueueNums":{qd.read_queue_nums},"topicSysFlag":{qd.topic_sys_flag},'
        f'"writeQueueNums":{qd.write_queue_nums}}}' for qd in route.queue_datas))
    parts.append("]}")
    return "".join(parts)


def encode_cluster_info(rim, v5):
    """GET_BROKER_CLUSTER_INFO body (always legacy JSON)."""
    brokers = {name: broker_data_json(rim.broker_addr_table[name], v5)
               for name in rim.brokers_in_order()}
    clusters = {c: rim.cluster_broker_names(c) for c in rim.clusters_in_order()}
    return fastjson.dumps({"brokerAddrTable": brokers, "clusterAddrTable": clusters})


def encode_topic_list(topics, broker_addr=None):
    return fastjson.dumps({"brokerAddr": broker_addr, "topicList": topics})


def encode_broker_member_group(cluster_name, broker_name, addrs):
    """GET_BROKER_MEMBER_GROUP body (``GetBrokerMemberGroupResponseBody``)."""
    return fastjson.dumps({"brokerMemberGroup": {
        "brokerAddrs": _addrs(addrs), "brokerName": broker_name, "cluster": cluster_name}})


def encode_data_version(data_version, v5):
    return fastjson.dumps(data_version.to_json(with_state_version=v5))
