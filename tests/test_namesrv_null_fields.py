"""Request headers without a field the handler reads, answered as each release's handler answers
them. Java's header decoding only logs a missing field (RemotingCommand.decodeCommandCustomHeader
catches its own "the custom field <...> is null" at 4.9.8, 5.0.0 and 5.3.3), so the handler runs
with null: these handlers look null up in a HashMap, find nothing and answer SUCCESS, where
rocketpy answered SYSTEM_ERROR "the custom field <...> is null"."""
import pytest

from processorutil import call, make, register
from rocketpy.namesrv import KVConfigManager
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting.codes import RequestCode, ResponseCode

PROFILES = [PROFILE_49, PROFILE_50, PROFILE_53]


def _server(tmp_path, profile):
    proc = make(tmp_path, profile)
    assert register(proc).code == ResponseCode.SUCCESS
    return proc


def _route(proc):
    answer = call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
    assert answer.code == ResponseCode.SUCCESS
    return answer.body


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_write_perm_without_a_broker_name_counts_no_topic(tmp_path, profile):
    """operateWritePermOfBroker: queueDataMap.get(null) finds no queue data: count 0."""
    proc = _server(tmp_path, profile)
    before = _route(proc)
    codes = [(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount")]
    if profile is not PROFILE_49:
        codes.append((RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount"))
    for code, count in codes:
        answer = call(proc, code, {})
        assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {count: "0"}), code
    assert _route(proc) == before
    answer = call(proc, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert answer.ext_fields == {"wipeTopicCount": "2"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_delete_topic_without_a_topic_deletes_nothing(tmp_path, profile):
    proc = _server(tmp_path, profile)
    before = _route(proc)
    for ext in ({}, {"clusterName": "C"}):
        answer = call(proc, RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert _route(proc) == before


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_delete_kv_config_without_namespace_or_key_deletes_nothing(tmp_path, profile):
    proc = _server(tmp_path, profile)
    kv = {"namespace": "NS", "key": "k"}
    assert call(proc, RequestCode.PUT_KV_CONFIG, dict(kv, value="v")).code == ResponseCode.SUCCESS
    for ext in ({}, {"namespace": "NS"}, {"key": "k"}):
        answer = call(proc, RequestCode.DELETE_KV_CONFIG, ext)
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None), ext
    answer = call(proc, RequestCode.GET_KV_CONFIG, kv)
    assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {"value": "v"})


@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_broker_member_group_without_a_broker_name_is_an_empty_group(tmp_path, profile):
    """getBrokerMemberGroup: brokerAddrTable (a ConcurrentHashMap) .get(null) throws, is logged,
    and the group built from the header's null name and cluster goes out empty."""
    proc = _server(tmp_path, profile)
    answer = call(proc, RequestCode.GET_BROKER_MEMBER_GROUP, {"clusterName": "C"})
    assert (answer.code, answer.body) == (
        ResponseCode.SUCCESS, b'{"brokerMemberGroup":{"brokerAddrs":{},"cluster":"C"}}')
    answer = call(proc, RequestCode.GET_BROKER_MEMBER_GROUP, {})
    assert (answer.code, answer.body) == (ResponseCode.SUCCESS,
                                          b'{"brokerMemberGroup":{"brokerAddrs":{}}}')


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_put_kv_config_without_namespace_or_key_answers_javas_own_check(tmp_path, profile):
    """putKVConfig tests namespace and key itself: SYSTEM_ERROR 'namespace or key is null'."""
    proc = _server(tmp_path, profile)
    for ext in ({"key": "k", "value": "v"}, {"namespace": "NS", "value": "v"}, {}):
        answer = call(proc, RequestCode.PUT_KV_CONFIG, ext)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR,
                                                "namespace or key is null"), ext
    answer = call(proc, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert answer.code == ResponseCode.QUERY_NOT_FOUND


@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_register_topic_without_a_topic_registers_nothing(tmp_path, profile):
    """registerTopic: topicQueueTable (a ConcurrentHashMap) .containsKey(null) throws and is
    logged: SUCCESS, no topic. The body is still decoded first: a broken one fails."""
    proc = _server(tmp_path, profile)
    topics = call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body
    body = b'{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"writeQueueNums":4}]}'
    answer = call(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {}, body=body)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body == topics
    answer = call(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {}, body=b'{"queueDatas":[')
    assert answer.code == ResponseCode.SYSTEM_ERROR and "JSONException" in answer.remark


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_put_kv_config_without_a_value_stores_a_null_the_file_leaves_out(tmp_path, profile):
    """putKVConfig does not check the value: HashMap.put(key, null) replaces "v", getKVConfig
    then finds null (QUERY_NOT_FOUND), and fastjson leaves the null out of the KVTable body and
    of the file; the log keeps the record, so a restart holds the null too."""
    from test_namesrv_kvlog import Disk
    disk = Disk()
    kv = KVConfigManager("/kv.json", store=disk, log=disk)
    proc = make(tmp_path, profile)
    proc = DefaultRequestProcessor(proc.route_info_manager, kv, profile=profile,
                                   configuration=proc.configuration)
    ns_k = {"namespace": "NS", "key": "k"}
    assert call(proc, RequestCode.PUT_KV_CONFIG, dict(ns_k, value="v")).code == ResponseCode.SUCCESS
    answer = call(proc, RequestCode.PUT_KV_CONFIG, ns_k)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert disk.segments_[1].endswith(b'["NS","k",null]\n')
    for server in (proc, None):
        if server is None:   # a restart replays the file and the log
            restarted = disk.restart()
            server = DefaultRequestProcessor(proc.route_info_manager, restarted, profile=profile,
                                             configuration=proc.configuration)
        answer = call(server, RequestCode.GET_KV_CONFIG, ns_k)
        assert (answer.code, answer.remark, answer.ext_fields) == (
            ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NS Key: k", {})
        answer = call(server, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
        assert (answer.code, answer.body) == (ResponseCode.SUCCESS, b'{"table":{}}')
    assert kv.persist()
    assert disk.file == '{"configTable":{"NS":{}}}'
    assert kv.entries == 1


def test_register_topic_without_a_body_is_javas_null_pointer_exception_in_5_0(tmp_path):
    """5.0.0's RemotingSerializable.decode hands the absent body to fastjson 1.2.69, whose
    JSON.parseObject(byte[], ...) reads bytes.length (JSON.java:407): SYSTEM_ERROR with that
    NullPointerException, nothing registered; 5.3.3's decode reads null and answers SUCCESS."""
    ext = {"topic": "T9"}
    for profile, code, remark in (
            (PROFILE_50, ResponseCode.SYSTEM_ERROR,
             'java.lang.NullPointerException: Cannot read the array length because "bytes" is '
             "null, com.alibaba.fastjson.JSON.parseObject(JSON.java:407)"),
            (PROFILE_53, ResponseCode.SUCCESS, None)):
        proc = _server(tmp_path / profile.name, profile)
        topics = call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body
        answer = call(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, ext)
        assert (answer.code, answer.remark, answer.body) == (code, remark, None), profile.name
        assert call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body == topics


_ADDR = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
         "brokerId": "0"}
_NPE = 'java.lang.NullPointerException: Cannot invoke "String.length()" because "this.{}" is null, '
_HASH_SITE = {
    "5.0": "org.apache.rocketmq.common.BrokerAddrInfo.hashCode(BrokerAddrInfo.java:61)",
    "5.3": "org.apache.rocketmq.namesrv.routeinfo.BrokerAddrInfo.hashCode(RouteInfoManager.java:1161)"}


def _live(proc):
    return {key: (info.last_update_ms, info.data_version)
            for key, info in proc.route_info_manager.broker_live_table.items()}


@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_broker_lookups_without_cluster_or_address_are_javas_null_pointer_exception(
        tmp_path, profile):
    """QUERY_DATA_VERSION and BROKER_HEARTBEAT look the broker up by a BrokerAddrInfo, whose
    hashCode reads clusterName.length() + brokerAddr.length(): a null one throws, the processor
    answers exceptionSimpleDesc of it, and no live entry is refreshed. The fields the handlers
    do not read (brokerName, brokerId, even unparsable) change nothing."""
    proc = _server(tmp_path, profile)
    version = call(proc, RequestCode.QUERY_DATA_VERSION, _ADDR, body=b"{}").body
    for now, code, body in ((5000, RequestCode.QUERY_DATA_VERSION, version),
                            (6000, RequestCode.BROKER_HEARTBEAT, None)):
        before = _live(proc)
        for drop, named in (("clusterName", "clusterName"), ("brokerAddr", "brokerAddr")):
            ext = {k: v for k, v in _ADDR.items() if k != drop}
            answer = call(proc, code, ext, body=body, now=now)
            assert (answer.code, answer.remark, answer.body) == (
                ResponseCode.SYSTEM_ERROR, _NPE.format(named) + _HASH_SITE[profile.name], None)
        answer = call(proc, code, {"brokerName": "broker-a"}, body=body, now=now)
        assert answer.remark == _NPE.format("clusterName") + _HASH_SITE[profile.name]
        assert _live(proc) == before
        answer = call(proc, code, {"clusterName": "C", "brokerAddr": "127.0.0.1:10911",
                                   "brokerId": "x"}, body=body, now=now)
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
        assert _live(proc) != before


def test_query_data_version_without_an_address_is_changed_in_4_9(tmp_path):
    """4.9.8 reads brokerAddr alone: HashMap.get(null) finds no live broker, so the version
    counts as changed, nothing is refreshed and no version is sent back; without the fields it
    does not read (cluster, name, id) the answer is as with them."""
    proc = _server(tmp_path, PROFILE_49)
    before = _live(proc)
    ext = {k: v for k, v in _ADDR.items() if k != "brokerAddr"}
    answer = call(proc, RequestCode.QUERY_DATA_VERSION, ext, body=b"{}", version=409, now=5000)
    assert (answer.code, answer.remark, answer.ext_fields, answer.body) == (
        ResponseCode.SUCCESS, None, {"changed": "true"}, None)
    assert _live(proc) == before
    full = call(proc, RequestCode.QUERY_DATA_VERSION, _ADDR, body=b"{}", version=409)
    answer = call(proc, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "127.0.0.1:10911"},
                  body=b"{}", version=409)
    assert (answer.code, answer.ext_fields, answer.body) == (
        ResponseCode.SUCCESS, full.ext_fields, full.body)
    assert full.body is not None


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_a_body_that_is_json_null_is_a_null_bean(tmp_path, profile):
    """JSON.parseObject("null", C.class) is null: QUERY_DATA_VERSION then counts the version
    as changed (prev.equals(null) is false), REGISTER_TOPIC_IN_NAMESRV registers nothing and
    answers SUCCESS, and REGISTER_BROKER dereferences the null RegisterBrokerBody (the
    processor's NullPointerException, the remark the genuine 5.0.0 capture holds)."""
    proc = _server(tmp_path, profile)
    version = profile.server_version
    ext = {"clusterName": "C", "brokerAddr": "127.0.0.1:10911"}
    stored = call(proc, RequestCode.QUERY_DATA_VERSION, ext, body=b"{}", version=version).body
    for body in (b"null", b" /* c */ null "):
        answer = call(proc, RequestCode.QUERY_DATA_VERSION, ext, body=body, version=version)
        assert (answer.code, answer.ext_fields, answer.body) == (
            ResponseCode.SUCCESS, {"changed": "true"}, stored), body
        answer = register(proc, body=body, version=version)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR, proc.policies.wire.null_register_body_remark)
        assert "registerBrokerBody" in answer.remark
        if profile is not PROFILE_49:
            topics = call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body
            answer = call(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T9"}, body=body)
            assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
            assert call(proc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body == topics
