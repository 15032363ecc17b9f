"""Tests for rocketpy.remoting.codes: values against the Java source and the genuine captures."""

import collections
import hashlib
import pathlib
import re

import pytest

from rocketpy.remoting.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    RPC_ONEWAY,
    RPC_TYPE,
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    SerializeType,
    language_from_name,
    language_name,
    request_code_name,
    response_code_name,
    version_desc,
    version_name,
    version_ordinal,
)

PCAP_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"

UNKNOWN_INPUTS = [9999, -12345, 2**40, None, "105", b"105", [105], {}, 1.5]


@pytest.mark.parametrize(
    "name, value",
    [
        ("SEND_MESSAGE", 10),
        ("PULL_MESSAGE", 11),
        ("UPDATE_AND_CREATE_TOPIC", 17),
        ("HEART_BEAT", 34),
        ("GET_CLIENT_CONFIG", 47),
        ("PUT_KV_CONFIG", 100),
        ("GET_KV_CONFIG", 101),
        ("DELETE_KV_CONFIG", 102),
        ("REGISTER_BROKER", 103),
        ("UNREGISTER_BROKER", 104),
        ("GET_ROUTEINFO_BY_TOPIC", 105),
        ("GET_BROKER_CLUSTER_INFO", 106),
        ("WIPE_WRITE_PERM_OF_BROKER", 205),
        ("GET_ALL_TOPIC_LIST_FROM_NAMESERVER", 206),
        ("DELETE_TOPIC_IN_NAMESRV", 216),
        ("REGISTER_TOPIC_IN_NAMESRV", 217),
        ("GET_KVLIST_BY_NAMESPACE", 219),
        ("GET_TOPICS_BY_CLUSTER", 224),
        ("GET_SYSTEM_TOPIC_LIST_FROM_NS", 304),
        ("SEND_MESSAGE_V2", 310),
        ("GET_UNIT_TOPIC_LIST", 311),
        ("GET_HAS_UNIT_SUB_TOPIC_LIST", 312),
        ("GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", 313),
        ("UPDATE_NAMESRV_CONFIG", 318),
        ("GET_NAMESRV_CONFIG", 319),
        ("SEND_BATCH_MESSAGE", 320),
        ("QUERY_DATA_VERSION", 322),
        ("ADD_WRITE_PERM_OF_BROKER", 327),
        ("UPDATE_AND_CREATE_STATIC_TOPIC", 513),
        ("GET_BROKER_MEMBER_GROUP", 901),
        ("BROKER_HEARTBEAT", 904),
        ("NOTIFY_MIN_BROKER_ID_CHANGE", 905),
        ("CONTROLLER_ALTER_SYNC_STATE_SET", 1001),
        ("RAFT_BROKER_HEART_BEAT_EVENT_REQUEST", 1018),
        ("AUTH_LIST_ACL", 3010),
        ("POP_MESSAGE", 200050),
        ("BATCH_ACK_MESSAGE", 200151),
        # gone from the newest Java source, kept for older peers
        ("UPDATE_AND_CREATE_ACL_CONFIG", 50),
        ("GET_BROKER_CLUSTER_ACL_CONFIG", 54),
        ("UPDATE_TOPIC_LOGICAL_QUEUE_MAPPING", 411),
    ],
)
def test_request_code_values(name, value):
    assert RequestCode[name] == value
    assert request_code_name(value) == name


@pytest.mark.parametrize(
    "name, value",
    [
        ("SUCCESS", 0),
        ("SYSTEM_ERROR", 1),
        ("SYSTEM_BUSY", 2),
        ("REQUEST_CODE_NOT_SUPPORTED", 3),
        ("TRANSACTION_FAILED", 4),
        ("FLUSH_DISK_TIMEOUT", 10),
        ("SERVICE_NOT_AVAILABLE", 14),
        ("NO_PERMISSION", 16),
        ("TOPIC_NOT_EXIST", 17),
        ("TOPIC_EXIST_ALREADY", 18),
        ("QUERY_NOT_FOUND", 22),
        ("INVALID_PARAMETER", 29),
        ("TRANSACTION_SHOULD_COMMIT", 200),
        ("POLLING_FULL", 209),
        ("BROKER_NOT_EXIST", 211),
        ("FLOW_CONTROL", 215),
        ("NOT_LEADER_FOR_QUEUE", 501),
        ("GO_AWAY", 1500),
        ("CONTROLLER_ELECT_MASTER_FAILED", 2012),
        ("CONTROLLER_ALTER_SYNC_STATE_SET_FAILED", 2013),
        ("POLICY_NOT_EXIST", 3002),
        ("RPC_UNKNOWN", -1000),
        ("RPC_TIME_OUT", -1006),
        ("ASYNC_AND_RETURN_NULL", -2),
    ],
)
def test_response_code_values(name, value):
    assert ResponseCode[name] == value
    assert response_code_name(value) == name


def test_request_aliases_keep_the_newest_name_canonical():
    # 4.0.0..4.7.0 spelled 105 GET_ROUTEINTO_BY_TOPIC.
    assert RequestCode.GET_ROUTEINTO_BY_TOPIC is RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert RequestCode(105).name == "GET_ROUTEINFO_BY_TOPIC"
    assert request_code_name(105) == "GET_ROUTEINFO_BY_TOPIC"


@pytest.mark.parametrize(
    "alias, canonical, value",
    [
        ("UPDATE_AND_CREATE_ACL_CONFIG_FAILED", "POLLING_FULL", 209),
        ("DELETE_ACL_CONFIG_FAILED", "POLLING_TIMEOUT", 210),
        ("UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED", "BROKER_NOT_EXIST", 211),
        ("CONTROLLER_REGISTER_BROKER_FAILED", "CONTROLLER_ELECT_MASTER_FAILED", 2012),
    ],
)
def test_response_aliases(alias, canonical, value):
    assert ResponseCode[alias] is ResponseCode[canonical]
    assert ResponseCode[alias] == value
    assert response_code_name(value) == canonical


def test_renumbered_controller_codes_use_the_newest_numbers():
    # 5.0.0/5.1.0 had ALTER_SYNC_STATE_SET_FAILED=2010 and ELECT_MASTER_FAILED=2011;
    # 5.1.1 on reuse those numbers for the names below.
    assert response_code_name(2010) == "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED"
    assert response_code_name(2011) == "CONTROLLER_MASTER_STILL_EXIST"


def test_table_sizes():
    # names (with aliases) and distinct values of the union 4.0.0-incubating .. 5.3.3, then the
    # 13 request and 2 response codes Java 5.5.0 adds (rocketmq-rust's inventory of it)
    assert len(RequestCode.__members__) == 173 + 13
    assert len(RequestCode) == 172 + 13
    assert len(ResponseCode.__members__) == 71 + 2
    assert len(ResponseCode) == 67 + 2
    assert len(LanguageCode) == 14
    assert len(MQVersion) == 613


def test_only_pop_codes_overflow_the_binary_header_int16():
    too_wide = {code.name for code in RequestCode if not -(2**15) <= code < 2**15}
    assert too_wide == {
        "POP_MESSAGE",
        "ACK_MESSAGE",
        "PEEK_MESSAGE",
        "CHANGE_MESSAGE_INVISIBLETIME",
        "NOTIFICATION",
        "POLLING_INFO",
        "POP_ROLLBACK",
        "BATCH_ACK_MESSAGE",
        # 5.5.0's Lite-topic codes (RIP-83)
        "POP_LITE_MESSAGE", "LITE_SUBSCRIPTION_CTL", "ACK_LITE_MESSAGE", "NOTIFY_UNSUBSCRIBE_LITE",
        "GET_BROKER_LITE_INFO", "GET_PARENT_TOPIC_INFO", "GET_LITE_TOPIC_INFO",
        "GET_LITE_CLIENT_INFO", "GET_LITE_GROUP_INFO", "TRIGGER_LITE_DISPATCH",
    }
    assert all(-(2**15) <= code < 2**15 for code in ResponseCode)


@pytest.mark.parametrize("value", UNKNOWN_INPUTS + [-1, 5, 48, 218])
def test_unknown_request_codes_are_none(value):
    assert request_code_name(value) is None


@pytest.mark.parametrize("value", UNKNOWN_INPUTS + [-1, 5, 214, 3003])
def test_unknown_response_codes_are_none(value):
    assert response_code_name(value) is None


def test_unknown_codes_stay_plain_ints_in_the_enum():
    with pytest.raises(ValueError):
        RequestCode(9999)


def test_language_codes():
    assert [(member.name, member.value) for member in LanguageCode] == [
        ("JAVA", 0),
        ("CPP", 1),
        ("DOTNET", 2),
        ("PYTHON", 3),
        ("DELPHI", 4),
        ("ERLANG", 5),
        ("RUBY", 6),
        ("OTHER", 7),
        ("HTTP", 8),
        ("GO", 9),
        ("PHP", 10),
        ("OMS", 11),
        ("RUST", 12),
        ("NODE_JS", 13),
    ]
    for member in LanguageCode:
        assert language_name(member.value) == member.name
        assert language_from_name(member.name) == member.value
        assert language_from_name(member.name) is member


@pytest.mark.parametrize("value", UNKNOWN_INPUTS + [14, 255, -1])
def test_unknown_language_code_is_none(value):
    assert language_name(value) is None


@pytest.mark.parametrize("name", ["java", "Java", "", "NODEJS", "C++", None, 0, b"JAVA", []])
def test_unknown_language_name_is_none(name):
    assert language_from_name(name) is None


def test_serialize_type_and_flags():
    assert SerializeType.JSON == 0
    assert SerializeType.ROCKETMQ == 1
    assert (RPC_TYPE, RPC_ONEWAY) == (0, 1)
    assert (FLAG_RESPONSE, FLAG_ONEWAY) == (0b01, 0b10)


@pytest.mark.parametrize(
    "name, ordinal",
    [
        ("V3_0_0_SNAPSHOT", 0),
        ("V3_0_0_ALPHA1", 1),
        ("V3_0_0_FINAL", 15),
        ("V3_0_1_SNAPSHOT", 16),
        ("V3_0_11", 37),
        ("V3_1_8", 63),  # what the PyPI rocketmq C++ client sends
        ("V3_4_9", 121),  # what npm ali-ons sends
        ("V4_0_0", 213),
        ("V4_9_0", 393),
        ("V4_9_3", 399),
        ("V4_9_4", 401),
        ("V4_9_7", 407),
        ("V4_9_8", 409),
        ("V5_0_0", 413),
        ("V5_3_3", 479),
        ("V5_9_9", 611),
        ("HIGHER_VERSION", 612),
    ],
)
def test_version_ordinals(name, ordinal):
    assert MQVersion[name] == ordinal
    assert version_name(ordinal) == name
    assert version_ordinal(name) == ordinal
    assert version_desc(ordinal) == name


def test_version_table_matches_java_enum_order():
    names = [member.name for member in MQVersion]
    assert [member.value for member in MQVersion] == list(range(613))
    # sha256 of "\n".join(Version.values() names) read from rocketmq-all-5.3.3 MQVersion.java
    # (4.1.0 through 5.3.3 declare the same list).
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()
    assert digest == "da7ded6f1e0eec1834b7a9eac4439316446132f5338817bf0e6e485ed79d92a2"
    for index in range(16, 612, 2):
        assert names[index] == names[index + 1] + "_SNAPSHOT"
    assert "V3_3_0" not in MQVersion.__members__
    assert CURRENT_VERSION is MQVersion.V5_3_3


@pytest.mark.parametrize("value", [613, 10**6, -1, None, "409", 4.0])
def test_unknown_version_is_none(value):
    assert version_name(value) is None


def test_version_desc_clamps_like_java():
    assert version_desc(613) == "HIGHER_VERSION"
    assert version_desc(32767) == "HIGHER_VERSION"
    assert version_desc(-1) is None
    assert version_desc("x") is None


@pytest.mark.parametrize("name", ["V3_3_0", "v5_0_0", "V5_0_0_PREVIEW", "", None, 413, []])
def test_unknown_version_name_is_none(name):
    assert version_ordinal(name) is None


def _readme_request_codes():
    """Request codes of every capture, from the last column of the README's table."""
    text = (PCAP_DIR / "README.md").read_text()
    counts = collections.Counter()
    for line in text.splitlines():
        if line.startswith("| rmq"):
            for code, count in re.findall(r"(\d+)×(\d+)", line.split("|")[-2]):
                counts[int(code)] += int(count)
    return counts


# A JSON header as fastjson writes it: keys sorted, so "code" first and "flag" right before
# "language"; a string-valued extField named "flag" has a quoted value and does not match.
_JSON_HEADER = re.compile(
    rb'\{"code":(-?\d+),.{0,4000}?"flag":(\d+),"language":"(\w+)".{0,4000}?"version":(\d+)\}',
    re.S,
)


@pytest.fixture(scope="module")
def capture_json_headers():
    """(code, flag, language, version) of every JSON header found in the genuine captures."""
    headers = []
    for path in sorted(PCAP_DIR.glob("*.pcap")):
        for match in _JSON_HEADER.finditer(path.read_bytes()):
            code, flag, language, version = match.groups()
            headers.append((int(code), int(flag), language.decode(), int(version)))
    return headers


def test_every_request_code_in_the_capture_readme_is_named():
    codes = set(_readme_request_codes())
    assert {47, 100, 103, 105, 106, 322, 901, 904, 9999} <= codes
    unnamed = {code for code in codes if request_code_name(code) is None}
    assert unnamed == {9999}


def test_every_code_in_the_captured_json_headers_is_named(capture_json_headers):
    requests = {code for code, flag, _, _ in capture_json_headers if not flag & FLAG_RESPONSE}
    responses = {code for code, flag, _, _ in capture_json_headers if flag & FLAG_RESPONSE}
    # the scan finds the same request codes the README lists (ROCKETMQ-header captures included)
    assert requests == set(_readme_request_codes())
    assert {request_code_name(code) for code in requests} == {
        "GET_CLIENT_CONFIG",
        "PUT_KV_CONFIG",
        "GET_KV_CONFIG",
        "DELETE_KV_CONFIG",
        "REGISTER_BROKER",
        "UNREGISTER_BROKER",
        "GET_ROUTEINFO_BY_TOPIC",
        "GET_BROKER_CLUSTER_INFO",
        "WIPE_WRITE_PERM_OF_BROKER",
        "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        "DELETE_TOPIC_IN_NAMESRV",
        "REGISTER_TOPIC_IN_NAMESRV",
        "GET_KVLIST_BY_NAMESPACE",
        "GET_TOPICS_BY_CLUSTER",
        "GET_SYSTEM_TOPIC_LIST_FROM_NS",
        "GET_UNIT_TOPIC_LIST",
        "GET_HAS_UNIT_SUB_TOPIC_LIST",
        "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
        "UPDATE_NAMESRV_CONFIG",
        "GET_NAMESRV_CONFIG",
        "QUERY_DATA_VERSION",
        "ADD_WRITE_PERM_OF_BROKER",
        "GET_BROKER_MEMBER_GROUP",
        "BROKER_HEARTBEAT",
        # the 5.3.3 controller's (rmq53-controller-*)
        "CONTROLLER_ALTER_SYNC_STATE_SET",
        "CONTROLLER_ELECT_MASTER",
        "CONTROLLER_REGISTER_BROKER",
        "CONTROLLER_GET_REPLICA_INFO",
        "CONTROLLER_GET_METADATA_INFO",
        "CONTROLLER_GET_SYNC_STATE_DATA",
        "NOTIFY_BROKER_ROLE_CHANGED",
        "UPDATE_CONTROLLER_CONFIG",
        "GET_CONTROLLER_CONFIG",
        "CLEAN_BROKER_DATA",
        "CONTROLLER_GET_NEXT_BROKER_ID",
        "CONTROLLER_APPLY_BROKER_ID",
        None,  # 9999, the probe's unknown code
    }
    assert {response_code_name(code) for code in responses} == {
        "SUCCESS",
        "SYSTEM_ERROR",
        "REQUEST_CODE_NOT_SUPPORTED",
        "TOPIC_NOT_EXIST",
        "QUERY_NOT_FOUND",
        "CONTROLLER_INVALID_MASTER",
        "CONTROLLER_INVALID_CLEAN_BROKER_METADATA",
    }


def test_languages_and_versions_in_the_captured_json_headers(capture_json_headers):
    languages = {language for _, _, language, _ in capture_json_headers}
    versions = {version for _, _, _, version in capture_json_headers}
    assert languages == {"JAVA"}
    assert language_from_name("JAVA") == LanguageCode.JAVA
    assert {version: version_name(version) for version in versions} == {
        399: "V4_9_3",
        401: "V4_9_4",
        409: "V4_9_8",
        413: "V5_0_0",
        479: "V5_3_3",
    }
