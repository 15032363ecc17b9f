"""DefaultRequestProcessor: the dispatch table, Java's answer rules and error answers."""

import pytest
from hypothesis import given, settings, strategies as st

from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import RemotingCommand, decode_frame, fastjson
from processorutil import CH, call, make, register, register_body

SERVED_53 = {100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 217, 219, 224, 304, 311, 312, 313,
             318, 319, 322, 327, 901, 904}


# ------------------------------------------------------------------ dispatch

def test_served_codes_per_profile(tmp_path):
    assert set(make(tmp_path, PROFILE_53).handlers) == SERVED_53
    assert set(make(tmp_path, PROFILE_50).handlers) == SERVED_53 | {47}
    assert set(make(tmp_path, PROFILE_49).handlers) == SERVED_53 - {217, 901, 904}


def test_unknown_code_5x_answers_3_with_opaque(tmp_path):
    answer = call(make(tmp_path), 9999)
    assert (answer.code, answer.remark, answer.opaque, answer.flag) == (
        3, " request type 9999 not supported", 7, 1)
    assert answer.ext_fields is None and answer.version == 479


def test_unknown_code_49_gets_nothing(tmp_path):
    assert call(make(tmp_path, PROFILE_49), 9999) is None
    assert call(make(tmp_path, PROFILE_49), 904) is None


def test_oneway_is_applied_but_not_answered(tmp_path):
    proc = make(tmp_path)
    assert register(proc, oneway=True) is None
    assert call(proc, 105, {"topic": "T1"}).code == 0


@pytest.mark.parametrize("code", sorted(SERVED_53 | {47}))
def test_missing_header_fields_give_a_clean_error(tmp_path, code):
    proc = make(tmp_path, PROFILE_50)
    answer = call(proc, code)                 # no extFields, no body at all
    assert answer is not None and answer.opaque == 7 and answer.flag == 1
    if code == 105:   # read as Java reads it: the route of the topic null does not exist
        assert answer.code == 17 and "for the topic: null" in answer.remark
    elif code in (101, 219):   # likewise the KV namespace null
        assert answer.code == 22 and "Namespace: null" in answer.remark
    elif code == 224:          # and the cluster null: an empty list
        assert answer.code == 0 and answer.body == b'{"topicList":[]}'
    elif answer.code != 0:
        assert answer.code == 1 and answer.remark


@settings(max_examples=300, deadline=None)
@given(code=st.sampled_from(sorted(SERVED_53 | {47, 9999})),
       ext=st.one_of(st.none(), st.dictionaries(
           st.sampled_from(["topic", "brokerName", "brokerAddr", "clusterName", "brokerId",
                            "haServerAddr", "namespace", "key", "value", "cluster", "compressed",
                            "bodyCrc32", "acceptStandardJsonOnly", "__ZONE_MODE", "__ZONE_NAME"]),
           st.one_of(st.text(max_size=8), st.sampled_from(["0", "1", "-1", "true", "99999999999"])))),
       body=st.one_of(st.none(), st.binary(max_size=40), st.sampled_from(
           [b"{}", b"[]", b"null", b'{"topicConfigSerializeWrapper":1}', b"x=\\u12",
            b'{"queueDatas":[{"brokerName":"b"}]}', b'{"keys":["listenPort"]}'])),
       version=st.sampled_from([0, 36, 399, 409, 413, 479]),
       profile=st.sampled_from([PROFILE_49, PROFILE_50, PROFILE_53]))
def test_no_input_makes_the_processor_raise(tmp_path_factory, code, ext, body, version, profile):
    proc = make(tmp_path_factory.mktemp("fuzz"), profile)
    answer = proc.process(RemotingCommand.request(code, ext, body, opaque=5, version=version), CH, 10)
    if answer is not None:
        assert answer.opaque == 5 and answer.is_response
        decode_frame(answer.encode())


# ------------------------------------------------------------------ answers

def test_register_answers(tmp_path):
    proc = make(tmp_path)
    master = register(proc)
    assert (master.code, master.ext_fields, master.body) == (0, {}, None)
    slave = register(proc, addr="127.0.0.1:10921", bid="1")
    assert slave.ext_fields == {"haServerAddr": "ha", "masterAddr": "127.0.0.1:10911"}
    assert list(slave.ext_fields) == ["haServerAddr", "masterAddr"]   # Java HashMap order
    call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"})
    assert register(proc).body == b'{"table":{"T1":"broker-a:4"}}'
    call(proc, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"})
    assert register(proc).body == b'{"table":{}}'


def test_register_crc_mismatch_and_refusal(tmp_path):
    proc = make(tmp_path)
    bad = register(proc, crc=12345)
    assert (bad.code, bad.remark, bad.ext_fields) == (1, "crc32 not match", {})
    refused = register(proc, topics=("ONLY",))
    assert (refused.code, refused.remark, refused.ext_fields) == (1, "register broker failed", {})
    assert register(proc, crc=0).code == 0      # 0 means "not checked"


def test_register_compressed_body_and_the_50_flag_bug(tmp_path):
    from rocketpy.remoting import bodies
    body = bodies.RegisterBrokerBody.from_json(register_body("T1", "T2")).encode(compress=True)
    proc = make(tmp_path)
    assert register(proc, body=body, compressed="true").code == 0
    assert call(proc, 105, {"topic": "T2"}).code == 0
    # a 5.0 broker says compressed=false: the Java 5.0 NameServer fails with an NPE
    proc50 = make(tmp_path, PROFILE_50)
    answer = register(proc50, body=body, version=413)
    assert answer.code == 1 and "registerBrokerBody\" is null" in answer.remark
    assert answer.ext_fields is None


def test_unregister_is_queued_and_refused_when_full(tmp_path):
    proc = make(tmp_path)
    register(proc)
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C", "brokerId": "0"}
    assert call(proc, 104, ext).code == 0
    assert [r.broker_name for r in proc.submitted] == ["broker-a"]
    assert call(proc, 105, {"topic": "T1"}).code == 0        # applied only when the batch runs
    full = make(tmp_path / "full", accept=False)
    register(full)
    answer = call(full, 104, ext)
    assert (answer.code, answer.remark) == (1, None)
    sync = make(tmp_path / "49", PROFILE_49)                 # 4.9 unregisters at once
    register(sync, version=409)
    call(sync, 104, ext, version=409)
    assert call(sync, 105, {"topic": "T1"}, version=409).code == 17


def test_route_json_style_by_version_and_flag(tmp_path):
    proc = make(tmp_path)
    register(proc)
    legacy = call(proc, 105, {"topic": "T1"}, version=399).body
    standard = call(proc, 105, {"topic": "T1"}, version=401).body
    flagged = call(proc, 105, {"topic": "T1", "acceptStandardJsonOnly": "true"}, version=63).body
    assert b'{0:"127.0.0.1:10911"}' in legacy
    assert b'{"0":"127.0.0.1:10911"}' in standard and standard == flagged
    missing = call(proc, 105, {"topic": "NOPE"})
    assert missing.code == 17 and missing.remark == (
        "No topic route info in name server for the topic: NOPE\n"
        "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")


def test_order_topic_conf_only_when_enabled(tmp_path):
    proc = make(tmp_path)
    register(proc)
    call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"})
    assert b"orderTopicConf" not in call(proc, 105, {"topic": "T1"}).body
    assert call(proc, 318, body=b"orderMessageEnable=true\n").code == 0
    assert fastjson.loads(call(proc, 105, {"topic": "T1"}).body)["orderTopicConf"] == "broker-a:4"


def test_order_topic_conf_bodies_are_not_kept_in_the_route_snapshot(tmp_path):
    """A body carrying an orderTopicConf (a KV value, up to the KV byte bound) is encoded per
    answer, not kept beside the route: 8 configs must not mean 8 kept copies."""
    proc = make(tmp_path)
    register(proc)
    assert call(proc, 318, body=b"orderMessageEnable=true\n").code == 0
    for i in range(8):
        value = f"broker-a:{i + 1};" + "x" * 1000
        call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": value})
        answer = call(proc, 105, {"topic": "T1"})
        assert fastjson.loads(answer.body)["orderTopicConf"] == value
    snapshot = proc.route_info_manager.route_snapshot("T1")
    assert all(b"orderTopicConf" not in body for body in snapshot._bodies.values())
    call(proc, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"})
    assert b"orderTopicConf" not in call(proc, 105, {"topic": "T1"}).body
    assert len(snapshot._bodies) == 1


def test_zone_mode_keeps_the_zone_and_masterless_groups(tmp_path):
    proc = make(tmp_path)
    register(proc, name="a", addr="1:1", __ZONE_NAME="z1", enableActingMaster="false")
    register(proc, name="b", addr="2:1", __ZONE_NAME="z2", enableActingMaster="false")
    body = call(proc, 105, {"topic": "T1", "__ZONE_MODE": "true", "__ZONE_NAME": "Z1"}).body
    route = fastjson.loads(body)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["a"]
    assert [q["brokerName"] for q in route["queueDatas"]] == ["a"]
    assert b"{0:" in body                                     # re-encoded in the legacy form
    both = fastjson.loads(call(proc, 105, {"topic": "T1"}).body)
    assert len(both["brokerDatas"]) == 2


def test_wait_for_service_53_only(tmp_path):
    proc = make(tmp_path, need_wait_for_service=True)
    register(proc)
    early = call(proc, 105, {"topic": "T1"}, now=44_999)
    assert (early.code, early.remark) == (1, "name server not ready")
    assert call(proc, 105, {"topic": "T1"}, now=45_000).code == 0


def test_kv_answers(tmp_path):
    proc = make(tmp_path)
    assert call(proc, 100, {"namespace": "ns", "key": "k", "value": "v"}).ext_fields is None
    found = call(proc, 101, {"namespace": "ns", "key": "k"})
    assert (found.code, found.ext_fields) == (0, {"value": "v"})
    missing = call(proc, 101, {"namespace": "ns", "key": "x"})
    assert (missing.code, missing.remark, missing.ext_fields) == (
        22, "No config item, Namespace: ns Key: x", {})
    assert call(proc, 219, {"namespace": "ns"}).body == b'{"table":{"k":"v"}}'
    nothing = call(proc, 219, {"namespace": "zz"})
    assert (nothing.code, nothing.remark) == (22, "No config item, Namespace: zz")


def test_config_blacklist_in_every_profile(tmp_path):
    """Security is never a version trait: 5.0 refuses black-listed keys too (Java 5.0.0 does
    not, CVE-2023-37582), with Java's remark."""
    for profile in (PROFILE_49, PROFILE_50, PROFILE_53):
        proc = make(tmp_path / profile.name, profile)
        for body in (b"kvConfigPath=/tmp/evil\n", b"configStorePath=/tmp/evil\n",
                     b"tls.server.mode=disabled\n", b"tls.config.file=/tmp/x\n",
                     b"bindAddress=0.0.0.0\n", b"orderMessageEnable=true\nrocketmqHome=/\n"):
            answer = call(proc, 318, body=body)
            assert (answer.code, answer.remark) == (16, "Can not update config in black list."), body
        assert call(proc, 318, body=b"orderMessageEnable=true\n").code == 0
    proc = make(tmp_path / "custom", PROFILE_53, config_black_list="listenPort")
    assert call(proc, 318, body=b"listenPort=1\n").code == 16
    assert call(proc, 318, body=b"bad=\\u1\n").remark == "string2Properties error"


def test_get_client_config_50(tmp_path):
    proc = make(tmp_path, PROFILE_50)
    answer = call(proc, 47, body=b'{"keys":["orderMessageEnable","scanNotActiveBrokerInterval","nope"]}')
    assert answer.code == 0
    assert sorted(answer.body.decode().splitlines()) == [
        "orderMessageEnable=false", "scanNotActiveBrokerInterval=5000"]


def test_topic_list_switches_5x(tmp_path):
    proc = make(tmp_path, enable_all_topic_list=False, enable_topic_list=False)
    for code in (206, 224, 311, 312, 313):
        answer = call(proc, code, {"cluster": "C"})
        assert (answer.code, answer.remark) == (1, "disable")
    assert call(proc, 304).code == 0
    proc49 = make(tmp_path / "49", PROFILE_49, enable_all_topic_list=False)
    assert call(proc49, 206, version=409).code == 0


def test_member_group_keeps_javas_placeholder_remark(tmp_path):
    proc = make(tmp_path)
    register(proc)
    answer = call(proc, 901, {"clusterName": "C", "brokerName": "broker-a"})
    assert (answer.code, answer.remark) == (0, "not set any response code")
    assert answer.body == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911"},'
                           b'"brokerName":"broker-a","cluster":"C"}}')


def test_query_data_version_and_heartbeat_refresh_liveness(tmp_path):
    proc = make(tmp_path)
    register(proc)
    key = ("C", "127.0.0.1:10911")
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C", "brokerId": "0"}
    same = call(proc, 322, ext, b'{"counter":1,"stateVersion":0,"timestamp":1}', now=5000)
    assert same.ext_fields == {"changed": "false"}
    assert fastjson.loads(same.body) == {"counter": 1, "stateVersion": 0, "timestamp": 1}
    assert proc.route_info_manager.broker_live_table[key].last_update_ms == 5000
    changed = call(proc, 322, ext, b'{"counter":2,"stateVersion":0,"timestamp":1}', now=6000)
    assert changed.ext_fields == {"changed": "true"}
    assert proc.route_info_manager.broker_live_table[key].last_update_ms == 6000   # 5.x: always
    call(proc, 904, {"clusterName": "C", "brokerAddr": "127.0.0.1:10911", "brokerName": "broker-a"},
         now=7000, oneway=True)
    assert proc.route_info_manager.broker_live_table[key].last_update_ms == 7000


def test_49_answers_in_the_requests_serialisation(tmp_path):
    proc = make(tmp_path, PROFILE_49)
    request = RemotingCommand.request(106, None, None, opaque=3, version=409, serialize_type=1)
    assert proc.process(request, CH, 0).serialize_type == 1
    assert make(tmp_path / "53").process(request, CH, 0).serialize_type == 0


def test_delete_and_register_topic(tmp_path):
    proc = make(tmp_path)
    register(proc)
    body = b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}'
    assert call(proc, 217, {"topic": "NEW"}, body).code == 0
    assert fastjson.loads(call(proc, 105, {"topic": "NEW"}).body)["queueDatas"][0]["readQueueNums"] == 2
    assert call(proc, 216, {"topic": "NEW", "clusterName": "C"}).code == 0
    assert call(proc, 105, {"topic": "NEW"}).code == 17
    wiped = call(proc, 205, {"brokerName": "broker-a"})
    assert wiped.ext_fields == {"wipeTopicCount": "2"}
    assert call(proc, 327, {"brokerName": "broker-a"}).ext_fields == {"addTopicCount": "2"}


def test_overload_answer_for_the_transport(tmp_path):
    """Java's thread-pool rejection answer, for a transport that sheds load."""
    proc = make(tmp_path)
    answer = proc.overload_response(RemotingCommand.request(105, {"topic": "T"}, opaque=9))
    assert (answer.code, answer.remark, answer.opaque) == (
        2, "[OVERLOAD]system busy, start flow control for a while", 9)
    assert proc.overload_response(RemotingCommand.request(105, oneway=True)) is None
