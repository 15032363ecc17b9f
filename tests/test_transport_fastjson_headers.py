"""JSON request headers in the forms fastjson's parser accepts, each as a real frame through the
server's protocol: what the Java NameServer of the release reads, rocketpy reads and answers
alike (same opaque, same route); what fastjson refuses closes the connection, as Java's decoder
does. docs/protocol.md lists the forms with the fastjson source line of each.

4.9.8 and 5.0.0 read headers with fastjson 1.2.69, 5.3.3 with 1.2.83: both match a bean
property's name in any case, only 1.2.83 also without ``_`` and ``-``."""
import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import bodies, decode_frame
from rocketpy.remoting.codes import LanguageCode, ResponseCode
from rocketpy.transport import RemotingServerFactory
from processorutil import make, register

#: (id, header, the opaque Java reads) for GET_ROUTEINFO_BY_TOPIC of topic T1
ACCEPTED = [
    ("pascal-case", b'{"Code":105,"ExtFields":{"topic":"T1"},"Opaque":7}', 7),
    ("upper-case", b'{"CODE":105,"EXTFIELDS":{"topic":"T1"},"OPAQUE":7,"FLAG":0}', 7),
    ("single-quotes", b"{'code':105,'extFields':{'topic':'T1'},'opaque':7}", 7),
    ("unquoted-keys", b'{code:105,extFields:{topic:"T1"},opaque:7,$x:1}', 7),
    ("numbers-as-strings", b'{"code":"105","extFields":{"topic":"T1"},"opaque":"1,007"}', 1007),
    ("decimal-numbers", b'{"code":105.0,"extFields":{"topic":"T1"},"opaque":7.9,"flag":"0.00"}', 7),
    ("trailing-commas", b'{,"code":105,,"extFields":{"topic":"T1",},"opaque":7,}', 7),
    ("comments", b'{/* route */"code":105, // T1\n"extFields":{"topic":"T1"},"opaque":7}', 7),
    ("null-fields", b'{"code":105,"extFields":{"topic":"T1","x":null},"opaque":7,'
                    b'"remark":null,"version":null,"language":null}', 7),
    ("enum-in-any-case", b'{"code":105,"extFields":{"topic":"T1"},"opaque":7,"language":"java"}', 7),
    ("escapes", b'{"code":105,"extFields":{"topic":"\\x54\\u0031"},"opaque":7}', 7),
    # issue 31: what the genuine 5.3.3 NameServer answered otherwise (a differential)
    ("code-written-twice", b'{"code":999,"extFields":{"topic":"T1"},"flag":0,"language":"JAVA",'
                           b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":479,"code":105}', 7),
    ("opaque-written-twice", b'{"code":105,"extFields":{"topic":"T1"},"opaque":9,"opaque":7}', 7),
    ("int-wrapped-by-scanFieldInt", b'{"code":4294967401,"extFields":{"topic":"T1"},"opaque":7}', 7),
]

#: (id, a header fastjson refuses, the nearest form it accepts)
REFUSED = [
    ("not-a-number", b'{"code":"abc","opaque":7}', b'{"code":"105","opaque":7}'),
    ("int-overflow", b'{"code":105,"opaque":2147483648}', b'{"code":105,"opaque":"2147483647"}'),
    ("numeric-key", b'{"code":105,0:"x","opaque":7}', b'{"code":105,x0:"x","opaque":7}'),
    ("garbage-after", b'{"code":105,"opaque":7} x', b'{"code":105,"opaque":7} // x'),
    ("unclosed", b"{'code':105,'opaque':7", b"{'code':105,'opaque':7}"),
    ("bad-identifier", b'{"code":105,#x:1,"opaque":7}', b'{"code":105,_x:1,"opaque":7}'),
    ("eoi-in-key", b'{"code":105,"extFields":{"to\x1apic":"T1"},"opaque":7,}',
     b'{"code":105,"extFields":{"topic":"T1","v":"a\x1ab"},"opaque":7,}'),
    ("bad-comment", b'{"code":105,/x,"opaque":7}', b'{"code":105,/*x*/"opaque":7}'),
]


def _connection(proc):
    factory = RemotingServerFactory(proc, clock=Clock())
    proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
    proto.makeConnection(transport)
    return proto, transport


def _send(proto, header):
    proto.dataReceived((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big")
                       + header)


def _server(tmp_path, profile):
    proc = make(tmp_path / profile.name, profile)
    assert register(proc).code == 0
    return _connection(proc)


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_53], ids=lambda p: p.name)
@pytest.mark.parametrize("name,header,opaque", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_fastjson_form_is_read_and_answered(tmp_path, profile, name, header, opaque):
    proto, transport = _server(tmp_path, profile)
    _send(proto, header)
    answer = decode_frame(transport.value())
    assert (answer.code, answer.opaque, answer.flag) == (ResponseCode.SUCCESS, opaque, 1), name
    route = bodies.TopicRouteData.from_json(answer.body)
    assert [b.broker_name for b in route.broker_datas] == ["broker-a"]
    assert proto.peer_language == LanguageCode.JAVA   # an enum name in any case; null: Java's
    assert not transport.disconnecting


@pytest.mark.parametrize("name,refused,accepted", REFUSED, ids=[r[0] for r in REFUSED])
def test_what_fastjson_refuses_closes_the_connection(tmp_path, name, refused, accepted):
    """Java's decoder fails on these and closes the channel; their nearest accepted form is
    answered."""
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, accepted)
    assert decode_frame(transport.value()).opaque in (7, 2147483647), name
    assert not transport.disconnecting
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, refused)
    assert transport.value() == b"" and transport.disconnecting, name


def test_an_extfields_object_or_array_value_is_its_json_text(tmp_path):
    """Issue 31: Java's HashMap<String, String> takes an object value as the text of the
    JSONObject fastjson parsed (StringCodec: toString()), and an array as its JSONArray's text;
    rocketpy closed the connection."""
    for value, topic in ((b'{"a":1}', '{"a":1}'), (b'{"b":null,"a":[1,2.50,true],"a":2}', '{"a":2}'),
                         (b'[1,{"x":"y"},null]', '[1,{"x":"y"},null]')):
        proto, transport = _server(tmp_path, PROFILE_53)
        _send(proto, b'{"code":105,"extFields":{"topic":' + value + b'},"opaque":7}')
        answer = decode_frame(transport.value())
        assert (answer.code, answer.opaque) == (ResponseCode.TOPIC_NOT_EXIST, 7), value
        assert f"for the topic: {topic}\n" in answer.remark, answer.remark
        assert not transport.disconnecting


@pytest.mark.parametrize("header", [b"{}", b" { } ", b"{,}", b"{/* nothing */}"])
def test_a_header_with_no_member_gets_no_answer(tmp_path, header):
    """Issue 31: the genuine 5.3.3 NameServer answers ``{}`` with nothing (rocketpy answered
    REQUEST_CODE_NOT_SUPPORTED); a header with a member is answered."""
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, header)
    assert transport.value() == b"" and transport.disconnecting
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, b'{"x":1}')
    assert decode_frame(transport.value()).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


@pytest.mark.parametrize("key", [b"ext_fields", b"EXT-FIELDS", b"Ext_Fields"])
def test_separators_in_a_key_are_ignored_by_53_only(tmp_path, key):
    """1.2.83's smartMatch retries a key without ``_`` and ``-`` (``fnv1a_64_extract``); 1.2.69
    does not, so 4.9.8 and 5.0.0 leave extFields out and look up the topic null."""
    header = b'{"code":105,"' + key + b'":{"topic":"T1"},"opaque":7}'
    for profile, code in ((PROFILE_53, ResponseCode.SUCCESS), (PROFILE_50, ResponseCode.TOPIC_NOT_EXIST),
                          (PROFILE_49, ResponseCode.TOPIC_NOT_EXIST)):
        proto, transport = _server(tmp_path, profile)
        _send(proto, header)
        answer = decode_frame(transport.value())
        assert (answer.code, answer.opaque) == (code, 7), profile.name
        if code == ResponseCode.TOPIC_NOT_EXIST:
            assert "for the topic: null" in answer.remark


def test_extfields_keys_stay_case_sensitive(tmp_path):
    """extFields is a map: its keys are not bean properties, so ``Topic`` is not ``topic``."""
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, b'{"Code":105,"ExtFields":{"Topic":"T1"},"Opaque":7}')
    answer = decode_frame(transport.value())
    assert (answer.code, answer.opaque) == (ResponseCode.TOPIC_NOT_EXIST, 7)


@pytest.mark.parametrize("header, opaque", [
    # the fast scans of ASMDeserializerFactory's class, then JavaBeanDeserializer's loop from the
    # first sorted property: a key written again in that order takes its last value (issue 31,
    # as the genuine 5.3.3 NameServer answers)
    (b'{"code":105,"extFields":{"topic":"T1"},"opaque":7,"opaque":8}', 8),
    (b'{"opaque":7,"code":105,"extFields":{"topic":"T1"},"opaque":8}', 8),
    # a key no fast scan reads (another spelling, other quotes, blanks before a colon) goes
    # through smartMatch: the property keeps its first value (its setFlags bit)
    (b'{"code":105,"Opaque":7,"extFields":{"topic":"T1"},"opaque":8}', 7),
    (b"{'code':105,'extFields':{'topic':'T1'},'opaque':7,'opaque':8,}", 7),
    (b'{"code":105,"extFields":{"topic":"T1"},"opaque" :7,"opaque" :8}', 7),
])
def test_a_property_written_twice_and_a_map_key_written_twice(tmp_path, header, opaque):
    """A property given twice takes the value fastjson's reading of RemotingCommand leaves
    (:mod:`rocketpy.remoting.commandread`); extFields is a HashMap, where a later key replaces
    the value."""
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, header)
    assert decode_frame(transport.value()).opaque == opaque
    proto, transport = _server(tmp_path, PROFILE_53)
    _send(proto, b'{"code":105,"extFields":{"topic":"nope","topic":"T1"},"opaque":7}')
    assert decode_frame(transport.value()).code == ResponseCode.SUCCESS
