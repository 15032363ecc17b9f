"""Typed custom headers: Java's conversions, required fields, tolerance, HashMap key order.

The golden tests read every captured header; these pin the rules on small inputs, including the
ones no capture exercises (bad numbers, C++ JSON literals, 5.x RPC fields).
"""
import pytest
from hypothesis import given, settings, strategies as st

from rocketpy.remoting import RemotingCommand, headers as H
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.errors import InvalidFieldError, MissingFieldError, RemotingCodecError
from rocketpy.remoting.javahash import hashmap_order

# REGISTER_BROKER's extFields exactly as a genuine 4.9.8 broker sent them (rmq49-sc-probe.pcap).
REGISTER_49 = {"brokerId": "0", "bodyCrc32": "269210565", "clusterName": "DefaultCluster",
               "brokerAddr": "127.0.0.1:52061", "haServerAddr": "127.0.0.1:52062",
               "compressed": "false", "brokerName": "broker-a"}


def test_register_broker_header_reads_and_writes_the_genuine_map():
    header = H.RegisterBrokerRequestHeader.from_ext_fields(REGISTER_49)
    assert (header.broker_name, header.broker_addr, header.cluster_name) == (
        "broker-a", "127.0.0.1:52061", "DefaultCluster")
    assert (header.broker_id, header.body_crc32, header.compressed) == (0, 269210565, False)
    assert header.heartbeat_timeout_millis is None and header.enable_acting_master is None
    written = header.to_ext_fields()
    assert written == REGISTER_49 and list(written) == list(REGISTER_49)


def test_built_header_writes_primitives_and_hashmap_order():
    header = H.RegisterBrokerRequestHeader(
        broker_name="b", broker_addr="1.2.3.4:10911", cluster_name="C", ha_server_addr="h",
        broker_id=1, heartbeat_timeout_millis=30000, enable_acting_master=True)
    ext = header.to_ext_fields()
    # Java's primitives (boolean compressed, Integer bodyCrc32 = 0) are always sent
    assert ext["compressed"] == "false" and ext["bodyCrc32"] == "0"
    assert ext["heartbeatTimeoutMillis"] == "30000" and ext["enableActingMaster"] == "true"
    assert list(ext) == ["heartbeatTimeoutMillis", "brokerId", "bodyCrc32", "clusterName",
                         "brokerAddr", "enableActingMaster", "haServerAddr", "compressed",
                         "brokerName"]  # as the 5.0 acting-master capture has it


def test_response_header_of_a_slave():
    ext = H.RegisterBrokerResponseHeader(master_addr="127.0.0.1:30911",
                                         ha_server_addr="127.0.0.1:30912").to_ext_fields()
    assert list(ext) == ["haServerAddr", "masterAddr"]
    assert H.RegisterBrokerResponseHeader().to_ext_fields() == {}  # a master: "extFields":{}


@pytest.mark.parametrize("text, value", [
    ("true", True), ("TRUE", True), ("True", True), ("false", False), ("yes", False),
    ("1", False), ("", False), (" true", False),
])
def test_boolean_parses_like_java(text, value):
    header = H.GetRouteInfoRequestHeader.from_ext_fields(
        {"topic": "T", "acceptStandardJsonOnly": text})
    assert header.accept_standard_json_only is value


@pytest.mark.parametrize("text, value", [
    ("0", 0), ("+5", 5), ("-7", -7), ("007", 7), ("9223372036854775807", (1 << 63) - 1),
    ("-9223372036854775808", -(1 << 63)), ("\u0663", 3),  # Character.digit takes any Nd digit
])
def test_long_parses_like_java(text, value):
    ext = dict(REGISTER_49, brokerId=text)
    assert H.RegisterBrokerRequestHeader.from_ext_fields(ext).broker_id == value


@pytest.mark.parametrize("text", [
    "", " 1", "1 ", "1_000", "0x10", "1.0", "1e3", "--1", "+", "9223372036854775808",
    "-9223372036854775809", "one",
])
def test_bad_long_raises_invalid_field(text):
    with pytest.raises(InvalidFieldError) as info:
        H.RegisterBrokerRequestHeader.from_ext_fields(dict(REGISTER_49, brokerId=text))
    assert info.value.field == "brokerId" and info.value.value == text
    assert isinstance(info.value, RemotingCodecError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("text", ["2147483648", "-2147483649", "12345678901"])
def test_integer_range_is_javas(text):
    with pytest.raises(InvalidFieldError) as info:
        H.RegisterBrokerRequestHeader.from_ext_fields(dict(REGISTER_49, bodyCrc32=text))
    assert info.value.field == "bodyCrc32"
    assert H.RegisterBrokerRequestHeader.from_ext_fields(
        dict(REGISTER_49, bodyCrc32="2147483647")).body_crc32 == 2147483647


@pytest.mark.parametrize("missing", ["brokerName", "brokerAddr", "clusterName", "haServerAddr",
                                     "brokerId"])
def test_missing_required_field_is_named(missing):
    ext = {k: v for k, v in REGISTER_49.items() if k != missing}
    with pytest.raises(MissingFieldError) as info:
        H.RegisterBrokerRequestHeader.from_ext_fields(ext)
    assert info.value.field == missing
    assert missing in str(info.value) and "RegisterBrokerRequestHeader" in str(info.value)


def test_optional_primitives_default_like_java():
    ext = {k: v for k, v in REGISTER_49.items() if k not in ("compressed", "bodyCrc32")}
    header = H.RegisterBrokerRequestHeader.from_ext_fields(ext)
    assert header.compressed is False and header.body_crc32 == 0


def test_no_ext_fields_at_all():
    with pytest.raises(MissingFieldError) as info:
        H.GetRouteInfoRequestHeader.from_ext_fields(None)
    assert info.value.field == "topic"
    assert H.NotifyMinBrokerIdChangeRequestHeader.from_ext_fields(None).to_ext_fields() == {}


def test_lenient_mode_is_javas_logged_failure():
    """Java logs a missing @CFNotNull field or a bad number and goes on with the default."""
    ext = {"brokerAddr": "a", "clusterName": "c", "haServerAddr": "h", "brokerId": "x",
           "bodyCrc32": "zz", "compressed": "TRUE"}
    header = H.RegisterBrokerRequestHeader.from_ext_fields(ext, strict=False)
    assert header.broker_name is None and header.broker_id is None
    assert header.body_crc32 == 0 and header.compressed is True
    assert header.missing_fields() == ["brokerName", "brokerId"]


def test_extra_keys_are_ignored():
    ext = {"Signature": "s", "topic": "TopicA", "AccessKey": "rocketmq2", "OnsChannel": "ALIYUN",
           "__ZONE_MODE": "true"}
    header = H.GetRouteInfoRequestHeader.from_ext_fields(ext)
    assert header.topic == "TopicA" and header.to_ext_fields() == {"topic": "TopicA"}


def test_json_literals_from_the_cpp_client():
    """C++ clients write some extFields as JSON numbers/booleans: read them as Java would."""
    header = H.GetRouteInfoRequestHeader.from_ext_fields(
        {"topic": "T", "acceptStandardJsonOnly": True})
    assert header.accept_standard_json_only is True
    header = H.UnRegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": 0})
    assert header.broker_id == 0
    header = H.GetTopicsByClusterRequestHeader.from_ext_fields({"cluster": 42})
    assert header.cluster == "42"
    with pytest.raises(InvalidFieldError):
        H.UnRegisterBrokerRequestHeader.from_ext_fields(
            {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": True})
    with pytest.raises(InvalidFieldError):
        H.UnRegisterBrokerRequestHeader.from_ext_fields(
            {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": 1.5})


def test_rpc_fields_of_5x_topic_headers():
    ext = {"topic": "T", "lo": "true", "ns": "my-ns", "nsd": "false", "bname": "broker-a",
           "oway": "false"}
    header = H.GetRouteInfoRequestHeader.from_ext_fields(ext)
    assert (header.rpc_logic, header.rpc_namespace, header.rpc_namespaced,
            header.rpc_broker_name, header.rpc_oneway) == (True, "my-ns", False, "broker-a", False)
    out = header.to_ext_fields()
    assert out == ext and list(out) == hashmap_order(ext)


def test_heartbeat_header_of_5x():
    ext = {"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:40911",
           "brokerName": "broker-a"}
    header = H.BrokerHeartbeatRequestHeader.from_ext_fields(ext)  # 5.0.0 sends only these
    assert header.broker_id is None and header.heartbeat_timeout_mills is None
    assert header.to_ext_fields() == ext and list(header.to_ext_fields()) == list(ext)


def test_write_rejects_values_of_the_wrong_type():
    with pytest.raises(InvalidFieldError) as info:
        H.WipeWritePermOfBrokerResponseHeader(wipe_topic_count="3").to_ext_fields()
    assert info.value.field == "wipeTopicCount"
    with pytest.raises(InvalidFieldError):
        H.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=1 << 31).to_ext_fields()
    with pytest.raises(InvalidFieldError):
        H.QueryDataVersionResponseHeader(changed="true").to_ext_fields()
    with pytest.raises(InvalidFieldError):
        H.GetKVConfigResponseHeader(value=3).to_ext_fields()
    with pytest.raises(TypeError):
        H.GetKVConfigResponseHeader(valu="x")


def test_response_counts_and_flags():
    assert H.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=9).to_ext_fields() == {
        "wipeTopicCount": "9"}
    assert H.AddWritePermOfBrokerResponseHeader(add_topic_count=13).to_ext_fields() == {
        "addTopicCount": "13"}
    assert H.QueryDataVersionResponseHeader(changed=False).to_ext_fields() == {"changed": "false"}
    assert H.GetKVConfigResponseHeader(value="v1").to_ext_fields() == {"value": "v1"}


def test_registry():
    assert H.request_header_class(RequestCode.REGISTER_BROKER) is H.RegisterBrokerRequestHeader
    assert H.request_header_class(105) is H.GetRouteInfoRequestHeader
    assert H.request_header_class(106) is None  # GET_BROKER_CLUSTER_INFO has no header
    assert H.request_header_class(9999) is None
    assert H.request_header_class([]) is None
    assert H.response_header_class(322) is H.QueryDataVersionResponseHeader
    for code, cls in H.REQUEST_HEADERS.items():
        assert isinstance(code, RequestCode) and issubclass(cls, H.CommandHeader)
    cmd = RemotingCommand.request(101, {"namespace": "ns", "key": "k"})
    assert H.decode_request_header(cmd) == H.GetKVConfigRequestHeader(namespace="ns", key="k")
    assert H.decode_request_header(RemotingCommand.request(206)) is None


def test_declaration_is_checked():
    with pytest.raises(TypeError):
        class Bad(H.CommandHeader):
            FIELDS = (H.F("a", "a", H.STRING), H.F("a", "b", H.STRING))
    with pytest.raises(TypeError):
        class Bad2(H.CommandHeader):
            FIELDS = (H.F("a", "a", "Short"),)


# --- Hypothesis: every header class round trips ------------------------------------------

_STRATEGIES = {
    H.STRING: st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    H.INTEGER: st.integers(-(1 << 31), (1 << 31) - 1),
    H.LONG: st.integers(-(1 << 63), (1 << 63) - 1),
    H.BOOLEAN: st.booleans(),
}
_CLASSES = sorted({*H.REQUEST_HEADERS.values(), *H.RESPONSE_HEADERS.values(),
                   H.RegisterOrderTopicRequestHeader}, key=lambda c: c.__name__)


@st.composite
def _header(draw, cls):
    values = {}
    for spec in cls.FIELDS:
        strategy = _STRATEGIES[spec.type]
        if not spec.required:
            strategy = st.one_of(st.none(), strategy) if spec.default is None else strategy
        values[spec.attr] = draw(strategy)
    return cls(**values)


@pytest.mark.parametrize("cls", _CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_header_roundtrips(cls, data):
    header = data.draw(_header(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    assert list(ext) == hashmap_order(ext)
    assert cls.from_ext_fields(ext) == header
    assert cls.from_ext_fields(dict(ext, AccessKey="k", Signature="s")) == header
