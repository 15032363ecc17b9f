"""Issue 31: every name, address and check code the NameServer's and the controller's tables
keep has a length bound (rocketpy/remoting/lengths.py; Java has none), refused where it is read
with a clear answer and nothing kept; a name of the bound is kept."""
import json
import struct
import zlib

import pytest

from processorutil import make, register
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv import Channel
from rocketpy.remoting import RemotingCommand, bodies, headers as H
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.errors import BodyDecodeError, InvalidFieldError
from rocketpy.remoting.lengths import MAX_NAME_LENGTH

LONG = "x" * (MAX_NAME_LENGTH + 1)
EDGE = "y" * MAX_NAME_LENGTH
CH = Channel(1, "127.0.0.1:50000")


def _json_body(topic):
    """Two topics (5.x refuses a new broker's registration of one: a topic's own route)."""
    return json.dumps({"topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1},
        "topicConfigTable": {name: {"topicName": name, "readQueueNums": 4, "writeQueueNums": 4,
                                    "perm": 6} for name in ("T0", topic)}}}).encode()


def _compressed_body(topic):
    out = b""
    for part in (b'{"counter":1,"timestamp":1}', 2, b"T0 4 4 6 SINGLE_TAG",
                 f"{topic} 4 4 6 SINGLE_TAG".encode(), b"[]", 0):
        out += struct.pack(">i", part) if isinstance(part, int) else struct.pack(">i", len(part)) + part
    return zlib.compress(out)


@pytest.mark.parametrize("field", ["brokerName", "brokerAddr", "clusterName", "haServerAddr"])
def test_a_registration_header_name_past_the_bound_is_refused(tmp_path, field):
    proc = make(tmp_path)
    answer = _register_with(proc, field, LONG)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert f"<{field}> is not a valid value" in answer.remark and len(answer.remark) < 300
    assert proc.route_info_manager.broker_addr_table == {}
    assert _register_with(make(tmp_path / "edge"), field, EDGE).code == ResponseCode.SUCCESS


def _register_with(proc, field, value):
    fields = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
              "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "false"}
    fields[field] = value
    body = _json_body("T")
    fields["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
    return proc.process(RemotingCommand.request(103, fields, body, opaque=1, version=479), CH, 1000)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_registration_topic_past_the_bound_is_refused(tmp_path, compressed):
    """The fast readers and the beans alike: nothing of the registration is applied."""
    make_body = _compressed_body if compressed else _json_body
    proc = make(tmp_path)
    answer = register(proc, body=make_body(LONG), compressed=str(compressed).lower())
    if hasattr(answer, "finish"):
        answer = answer.finish(answer.work())
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark.startswith("[REFUSED]") and str(MAX_NAME_LENGTH) in answer.remark
    assert proc.route_info_manager.topic_queue_table == {}
    answer = register(make(tmp_path / "edge"), body=make_body(EDGE),
                      compressed=str(compressed).lower())
    if hasattr(answer, "finish"):
        answer = answer.finish(answer.work())
    assert answer.code == ResponseCode.SUCCESS


def test_bean_names_and_map_keys_past_the_bound():
    for cls, body in ((bodies.TopicRouteData, {"queueDatas": [{"brokerName": LONG}]}),
                      (bodies.TopicRouteData, {"brokerDatas": [{"brokerAddrs": {"0": LONG}}]}),
                      (bodies.ClusterInfo, {"clusterAddrTable": {LONG: ["b"]}}),
                      (bodies.ClusterInfo, {"clusterAddrTable": {"c": [LONG]}}),
                      (bodies.TopicConfigSerializeWrapper, {"topicConfigTable": {LONG: {}}}),
                      (bodies.RegisterBrokerBody, {"filterServerList": [LONG]}),
                      (bodies.TopicQueueMappingInfo, {"bname": LONG})):
        with pytest.raises(BodyDecodeError, match=f"over the {MAX_NAME_LENGTH}"):
            cls.from_json(json.dumps(body).encode())
    assert bodies.QueueData.from_json(json.dumps({"brokerName": EDGE}).encode()).broker_name == EDGE


def test_a_header_field_past_the_bound_is_refused_strict_or_not():
    with pytest.raises(InvalidFieldError, match="at most 1024 characters"):
        H.GetRouteInfoRequestHeader.from_ext_fields({"topic": LONG})
    with pytest.raises(InvalidFieldError):
        H.GetRouteInfoRequestHeader.from_ext_fields({"topic": LONG}, strict=False)
    assert H.PutKVConfigRequestHeader.from_ext_fields(
        {"namespace": "n", "key": "k", "value": LONG}).value == LONG   # KV: its own bounds
    assert len(str(InvalidFieldError("topic", LONG, "x"))) < 120


def test_a_controller_check_code_or_address_past_the_bound_is_refused():
    """A 2 MB registerCheckCode (refused by etcd, which cost the leader its leadership) is
    refused where it is read."""
    props = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
             "controllerDLegerSelfId": "n0"}
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(props))
    for ext in ({"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1",
                 "registerCheckCode": "127.0.0.1:1;" + "1" * (2 << 20)},
                {"clusterName": "c", "brokerName": "b", "brokerAddress": LONG, "brokerId": "1"}):
        code = (RequestCode.CONTROLLER_APPLY_BROKER_ID if "registerCheckCode" in ext
                else RequestCode.CONTROLLER_REGISTER_BROKER)
        answer = processor.process(RemotingCommand.request(int(code), ext, None, opaque=3), CH, 1)
        assert answer.code == ResponseCode.SYSTEM_ERROR and len(answer.remark) < 300, answer
    assert processor.replicas.sync_state_info_table == {}
