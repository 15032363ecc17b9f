"""What the Java 5.3.3 NameServer changed against 5.0.0, one test per point of
``docs/java-5.3-changes.md`` that no older test pins (the page names the test of every point).

The 5.3.3 captures do not take these paths: each expectation comes from the Java source at tag
rocketmq-all-5.3.3 (and 5.0.0 to compare), cited in the docs page with file and line.
"""
import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import bodies, decode_frame, fastjson
from rocketpy.remoting.codes import MQVersion, ResponseCode
from rocketpy.transport import RemotingServerFactory
from processorutil import call, make, register, register_body

FAQ_50 = "http://rocketmq.apache.org/docs/faq/"
FAQ_53 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def test_answers_carry_the_servers_own_version(tmp_path):
    """``MQVersion.CURRENT_VERSION``: V5_0_0 (413) -> V5_3_3 (479), whatever the request says."""
    for profile, version in ((PROFILE_50, MQVersion.V5_0_0), (PROFILE_53, MQVersion.V5_3_3)):
        answer = call(make(tmp_path / profile.name, profile), 105, {"topic": "NONE"}, version=63)
        assert answer.version == version


def test_topic_not_exist_points_to_the_faq_page_of_its_version(tmp_path):
    """``FAQUrl.APPLY_TOPIC_URL`` moved in 5.1.0; 4.9 and 5.0 keep the old page."""
    for profile, url in ((PROFILE_49, FAQ_50), (PROFILE_50, FAQ_50), (PROFILE_53, FAQ_53)):
        proc = make(tmp_path / profile.name, profile)
        answer = call(proc, 105, {"topic": "Nope"}, version=profile.server_version)
        assert (answer.code, answer.remark) == (
            ResponseCode.TOPIC_NOT_EXIST,
            f"No topic route info in name server for the topic: Nope\nSee {url} for further details.")


def test_a_null_registration_body_names_the_class_and_line_of_its_version(tmp_path):
    """A zlib body sent as ``compressed=false`` reads as null; Java's NullPointerException names
    RegisterBrokerBody's package and the processor's line, which moved in 5.1."""
    body = bodies.RegisterBrokerBody.from_json(register_body("T1")).encode(compress=True)
    for profile, where in (
            (PROFILE_49, "common.protocol.body.RegisterBrokerBody.getTopicConfigSerializeWrapper()"
                         '" because "registerBrokerBody" is null, org.apache.rocketmq.namesrv.'
                         "processor.DefaultRequestProcessor.registerBrokerWithFilterServer("
                         "DefaultRequestProcessor.java:254)"),
            (PROFILE_50, "common.protocol.body.RegisterBrokerBody.getTopicConfigSerializeWrapper()"
                         '" because "registerBrokerBody" is null, org.apache.rocketmq.namesrv.'
                         "processor.DefaultRequestProcessor.registerBroker("
                         "DefaultRequestProcessor.java:228)"),
            (PROFILE_53, "remoting.protocol.body.RegisterBrokerBody.getTopicConfigSerializeWrapper()"
                         '" because "registerBrokerBody" is null, org.apache.rocketmq.namesrv.'
                         "processor.DefaultRequestProcessor.registerBroker("
                         "DefaultRequestProcessor.java:242)")):
        answer = register(make(tmp_path / profile.name, profile), body=body,
                          version=profile.server_version)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            'java.lang.NullPointerException: Cannot invoke "org.apache.rocketmq.' + where)


def test_query_data_version_without_a_body(tmp_path):
    """4.9.8/5.0.0 decode the missing DataVersion and fail; 5.3.3 reads it as null, so the
    broker's version counts as changed and its liveness is refreshed."""
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "brokerId": "0"}
    remarks = {  # 5.0.0: fastjson 1.2.69's JSON.parseObject(byte[], ...) reads bytes.length
        PROFILE_49: "java.lang.NullPointerException: QUERY_DATA_VERSION carries no DataVersion body",
        PROFILE_50: 'java.lang.NullPointerException: Cannot read the array length because "bytes"'
                    " is null, com.alibaba.fastjson.JSON.parseObject(JSON.java:407)"}
    for profile, remark in remarks.items():
        proc = make(tmp_path / profile.name, profile)
        register(proc, version=profile.server_version)
        answer = call(proc, 322, ext, version=profile.server_version)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert answer.body is None
    proc = make(tmp_path / PROFILE_53.name, PROFILE_53)
    register(proc)
    answer = call(proc, 322, ext)
    assert (answer.code, answer.ext_fields) == (0, {"changed": "true"})
    assert fastjson.loads(answer.body)["counter"] == 1
    with_body = call(proc, 322, ext, body=answer.body)       # the same version: unchanged
    assert with_body.ext_fields == {"changed": "false"}


def test_compressed_body_is_read_by_the_brokers_version(tmp_path):
    """5.0.0 reads a queue-mapping part in every compressed body, so a 4.9 broker's
    (``compressRegister=true``) fails; 5.1+ reads it only from V5_0_0 brokers."""
    plain = bodies.RegisterBrokerBody.from_json(register_body("T1", "T2"))
    body_49 = plain.encode(compress=True, broker_version=MQVersion.V4_9_8)
    body_50 = plain.encode(compress=True, broker_version=MQVersion.V5_0_0)
    assert body_49 != body_50
    proc = make(tmp_path / PROFILE_50.name, PROFILE_50)
    refused = register(proc, body=body_49, compressed="true", version=MQVersion.V4_9_8)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "Failed to decode RegisterBrokerBody" in refused.remark
    assert register(proc, body=body_50, compressed="true", version=MQVersion.V5_0_0).code == 0
    proc = make(tmp_path / PROFILE_53.name, PROFILE_53)
    assert register(proc, body=body_49, compressed="true", version=MQVersion.V4_9_8).code == 0
    assert call(proc, 105, {"topic": "T2"}).code == 0
    assert register(proc, body=body_50, compressed="true", version=MQVersion.V5_0_0).code == 0


def test_topics_by_cluster_without_a_cluster_in_every_release(tmp_path):
    """5.3 checks enableTopicList before decoding the header, 5.0 after; Java's decoding only
    logs the missing ``cluster``, so both say "disable" when lists are off, and every release
    answers an empty list when they are on (getTopicsByCluster(null) catches its NPE)."""
    for profile in (PROFILE_50, PROFILE_53):
        for ext in ({}, {"cluster": "C"}):
            proc = make(tmp_path / profile.name, profile, enable_topic_list=False)
            answer = call(proc, 224, ext)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    for profile in (PROFILE_49, PROFILE_50, PROFILE_53):
        proc = make(tmp_path / profile.name, profile)
        register(proc)
        answer = call(proc, 224, None, version=profile.server_version)
        assert (answer.code, answer.body) == (ResponseCode.SUCCESS, b'{"topicList":[]}')
        assert fastjson.loads(call(proc, 224, {"cluster": "C"}).body)["topicList"]


def test_route_lookups_wait_for_service_only_in_53(tmp_path):
    """``needWaitForService``/``waitSecondsForService`` are new in 5.3 (NamesrvConfig); a 5.0
    NameServer has neither and answers at once."""
    for profile, early in ((PROFILE_50, 0), (PROFILE_53, ResponseCode.SYSTEM_ERROR)):
        proc = make(tmp_path / profile.name, profile, need_wait_for_service=True)
        register(proc)
        assert call(proc, 105, {"topic": "T1"}, now=44_999).code == early
        assert call(proc, 105, {"topic": "T1"}, now=45_000).code == 0


def test_register_topic_merges_into_an_existing_topic_in_53(tmp_path):
    """REGISTER_TOPIC_IN_NAMESRV for a known topic: 5.0 logs "already exist" and keeps the old
    queue data; 5.3 puts the new queue data, stopping at the first broker it does not know."""
    route = (b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
             b'"perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}')
    unknown = route.replace(b"broker-a", b"nobody")
    for profile, queues in ((PROFILE_50, 4), (PROFILE_53, 8)):
        proc = make(tmp_path / profile.name, profile)
        register(proc, version=profile.server_version)
        assert call(proc, 217, {"topic": "T1"}, unknown).code == 0
        assert call(proc, 217, {"topic": "T1"}, route).code == 0
        queue_data = fastjson.loads(call(proc, 105, {"topic": "T1"}).body)["queueDatas"]
        assert [(q["brokerName"], q["readQueueNums"]) for q in queue_data] == [("broker-a", queues)]


def _java_string_hash(text):
    h = 0
    for ch in text:                             # ASCII names: one UTF-16 unit per character
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def _java_table_order(keys, capacity):
    """Iteration order of a Java HashMap/ConcurrentHashMap of ``capacity`` buckets holding
    ``keys`` inserted in this order (an oracle independent of rocketpy.namesrv.javaorder)."""
    def bucket(key):
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(keys, key=bucket)     # stable: a bucket keeps insertion order


def test_topic_lists_come_in_the_order_of_their_java_set(tmp_path):
    """``TopicList.topicList``: a CopyOnWriteArraySet in 5.0 (the route table's order: a
    ConcurrentHashMap of 2,048 buckets), ``ConcurrentHashMap.newKeySet()`` in 5.3 (16 buckets
    for a few topics)."""
    topics = ["orders", "payments", "TopicA", "alpha", "zeta-17", "logs", "x", "metrics"]
    table_order = _java_table_order(topics, 2048)
    set_order = _java_table_order(table_order, 16)
    assert table_order != set_order                # the names tell the two apart
    for profile, expected in ((PROFILE_50, table_order), (PROFILE_53, set_order)):
        proc = make(tmp_path / profile.name, profile)
        register(proc, topics=tuple(topics), version=profile.server_version)
        listed = fastjson.loads(call(proc, 206, version=profile.server_version).body)["topicList"]
        assert listed == expected, profile.name


def test_proxy_protocol_header_is_refused_as_a_frame(tmp_path):
    """5.3 accepts an HAProxy PROXY header before the first frame; rocketpy does not (see the
    docs page): the header reads as an oversized frame, the connection is closed and logged."""
    factory = RemotingServerFactory(make(tmp_path / PROFILE_53.name, PROFILE_53), clock=Clock())
    proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
    proto.makeConnection(transport)
    proto.dataReceived(b"PROXY TCP4 192.0.2.1 127.0.0.1 56324 9876\r\n")
    assert transport.disconnecting
    assert transport.value() == b""


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53], ids=lambda p: p.name)
@pytest.mark.parametrize("ext", [b'"extFields":{},', b'"extFields":{"acceptStandardJsonOnly":"x"},',
                                 b""], ids=["empty", "no-topic", "no-extFields"])
def test_route_query_without_a_topic_is_topic_not_exist_in_every_release(tmp_path, profile, ext):
    """Java's header decoding only logs a missing ``@CFNotNull`` field (it catches its own
    "the custom field <topic> is null"; RemotingCommand.java at 4.9.8, 5.0.0 and 5.3.3), so the
    route of the topic ``null`` is looked up, found missing, and named in the remark. A raw frame
    through the server's protocol, with a broker registered and order messages on (the KV is
    read for a found route only)."""
    proc = make(tmp_path / profile.name, profile, order_message_enable=True)
    register(proc)
    factory = RemotingServerFactory(proc, clock=Clock())
    proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
    proto.makeConnection(transport)
    header = (b'{"code":105,' + ext + b'"flag":0,"language":"JAVA","opaque":42,'
              b'"serializeTypeCurrentRPC":"JSON","version":479}')
    proto.dataReceived((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big")
                       + header)
    answer = decode_frame(transport.value())
    url = FAQ_53 if profile is PROFILE_53 else FAQ_50
    assert (answer.code, answer.opaque, answer.remark) == (
        ResponseCode.TOPIC_NOT_EXIST, 42,
        f"No topic route info in name server for the topic: null\nSee {url} for further details.")
    assert not transport.disconnecting


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_kv_lookups_without_their_fields_find_nothing_in_every_release(tmp_path, profile):
    """GET_KV_CONFIG and GET_KVLIST_BY_NAMESPACE read their header as Java does: an absent
    namespace or key is null, KVConfigManager's HashMap finds nothing under it, and the remark
    says null (DefaultRequestProcessor at 4.9.8 :202/:502, 5.0.0 :189/:503, 5.3.3 :203/:517)."""
    proc = make(tmp_path / profile.name, profile)
    assert call(proc, 100, {"namespace": "ns", "key": "k", "value": "v"}).code == 0
    for ext, remark in (({"key": "k"}, "No config item, Namespace: null Key: k"),
                        ({"namespace": "ns"}, "No config item, Namespace: ns Key: null"),
                        (None, "No config item, Namespace: null Key: null")):
        answer = call(proc, 101, ext, version=profile.server_version)
        assert (answer.code, answer.remark) == (ResponseCode.QUERY_NOT_FOUND, remark)
    answer = call(proc, 219, {}, version=profile.server_version)
    assert (answer.code, answer.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "No config item, Namespace: null")
    assert call(proc, 101, {"namespace": "ns", "key": "k"}).code == 0
