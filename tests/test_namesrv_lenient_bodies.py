"""Request bodies in the forms fastjson's parser accepts, as Java's NameServer reads them
(``RemotingSerializable.decode`` -> ``JSON.parseObject``): a genuine REGISTER_BROKER body of a
4.9.8, a 5.0.0 and a 5.3.3 broker, re-encoded in each form, registers what the genuine body
registers (every topic's route answered byte for byte alike). Property names are matched as each release's
fastjson matches them: any case in 1.2.69 (4.9.8, 5.0.0) and 1.2.83 (5.3.3), also without
``_``/``-`` in 1.2.83 only. docs/protocol.md lists the forms with the fastjson source lines."""
import json
import re
from pathlib import Path

import pytest

import replay
from processorutil import call, make, register
from rocketpy.namesrv import model
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import bodies, fastjson
from rocketpy.remoting.codes import RequestCode, ResponseCode

PCAP = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "pcap"

#: every bean property name rocketpy knows (map keys, such as topic names, are not among them)
PROPERTIES = frozenset(name for cls in bodies.JsonBean.__subclasses__() for name in cls._LOADERS)


def _genuine(name):
    """(profile, version, body) of the capture's first REGISTER_BROKER."""
    for event in replay.replay_events(PCAP / name):
        if event.kind == "request" and event.request.code == RequestCode.REGISTER_BROKER:
            profile = {"rmq49": PROFILE_49, "rmq50": PROFILE_50, "rmq53": PROFILE_53}[name[:5]]
            return profile, event.request.version, event.request.body
    raise AssertionError(f"no REGISTER_BROKER in {name}")


def _write(obj, key=lambda k: json.dumps(k), string=json.dumps, number=str, before="", after=""):
    """``obj`` as JSON text with each part written by the given functions."""
    if isinstance(obj, dict):
        items = [f"{before}{key(k)}:{_write(v, key, string, number, before, after)}"
                 for k, v in obj.items()]
        return "{" + ",".join(items) + after + "}"
    if isinstance(obj, list):
        return "[" + ",".join(_write(v, key, string, number, before, after) for v in obj) + after + "]"
    if isinstance(obj, str):
        return string(obj)
    if obj is True or obj is False or obj is None:
        return json.dumps(obj)
    return number(obj)


def _quote1(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _property(rename):
    return lambda k: json.dumps(rename(k) if k in PROPERTIES else k)


def _snake(name):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


#: (id, body text from the parsed genuine body)
FORMS = [
    ("single-quotes", lambda obj: _write(obj, key=_quote1, string=_quote1)),
    ("unquoted-keys", lambda obj: _write(
        obj, key=lambda k: k if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_]*", k) else json.dumps(k))),
    ("comments-and-commas", lambda obj: _write(obj, before="/* c */,", after=",\n// end\n")),
    # IntegerCodec / LongCodec: a BigDecimal cut to its integer part; in a string too
    ("decimal-numbers", lambda obj: _write(obj, number=lambda n: f"{n}.9")),
    ("numbers-as-strings-with-commas", lambda obj: _write(obj, number=lambda n: f"'{n:,}'")),
    ("upper-case-properties", lambda obj: _write(obj, key=_property(str.upper))),
    ("pascal-case-properties", lambda obj: _write(obj, key=_property(lambda k: k[0].upper() + k[1:]))),
]

CAPTURES = ["rmq49-broker-register.pcap", "rmq50-broker-register.pcap", "rmq53-broker-register.pcap"]


def _routes(proc, topics):
    answers = {}
    for topic in topics:
        answer = call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        answers[topic] = (answer.code, answer.body)
    return answers


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("form,write", FORMS, ids=[f[0] for f in FORMS])
def test_genuine_registration_body_in_a_lenient_form_registers_alike(tmp_path, capture, form, write):
    profile, version, body = _genuine(capture)
    obj = json.loads(body)
    topics = list(obj["topicConfigSerializeWrapper"]["topicConfigTable"])
    assert len(topics) > 5
    genuine = make(tmp_path / "genuine", profile)
    assert register(genuine, body=body, version=version).code == ResponseCode.SUCCESS
    lenient = make(tmp_path / "lenient", profile)
    text = write(obj).encode()
    answer = register(lenient, body=text, version=version)
    assert answer.code == ResponseCode.SUCCESS, (form, answer.remark)
    assert _routes(lenient, topics) == _routes(genuine, topics)
    assert all(code == ResponseCode.SUCCESS for code, _ in _routes(lenient, topics).values())


def test_separators_in_property_names_match_only_in_fastjson_1_2_83(tmp_path):
    """``topic_config_serialize_wrapper``: 5.3.3 (1.2.83, ``fnv1a_64_extract``) reads it as
    ``topicConfigSerializeWrapper``; 4.9.8 (1.2.69, case only) ignores the key and registers
    the broker without topics."""
    for capture in CAPTURES:
        _separators(tmp_path / capture, *_genuine(capture))


def _separators(tmp_path, profile, version, body):
    obj = json.loads(body)
    topics = list(obj["topicConfigSerializeWrapper"]["topicConfigTable"])
    text = _write(obj, key=_property(_snake)).encode()
    assert b"topic_config_table" in text
    genuine = make(tmp_path / "genuine", profile)
    register(genuine, body=body, version=version)
    snake = make(tmp_path / "snake", profile)
    assert register(snake, body=text, version=version).code == ResponseCode.SUCCESS
    if profile.fastjson == "1.2.83":
        assert _routes(snake, topics) == _routes(genuine, topics)
    else:
        assert {code for code, _ in _routes(snake, topics).values()} == {ResponseCode.TOPIC_NOT_EXIST}


def test_a_smart_matched_property_keeps_its_first_value():
    """As for headers: once a property is set, a later key for it is ignored (setFlags)."""
    version = bodies.DataVersion.from_json(b'{"Counter":3,"counter":4,"COUNTER":5}')
    assert version.counter == 3
    version = bodies.DataVersion.from_json(b'{"counter":3,"Counter":4}')
    assert version.counter == 3


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_53], ids=lambda p: p.name)
def test_query_data_version_reads_a_lenient_body(tmp_path, profile):
    proc = make(tmp_path, profile)
    assert register(proc).code == ResponseCode.SUCCESS
    stored = call(proc, RequestCode.QUERY_DATA_VERSION,
                  {"brokerAddr": "127.0.0.1:10911", "clusterName": "C", "brokerName": "broker-a",
                   "brokerId": "0"}, body=b"{'counter':99,/* x */ Timestamp:'1',}")
    assert stored.code == ResponseCode.SUCCESS and stored.ext_fields["changed"] == "true"
    same = json.loads(stored.body)
    lenient = "{" + ",".join(f"{k.upper()}:'{v}'" for k, v in same.items()) + ",}"
    again = call(proc, RequestCode.QUERY_DATA_VERSION,
                 {"brokerAddr": "127.0.0.1:10911", "clusterName": "C", "brokerName": "broker-a",
                  "brokerId": "0"}, body=lenient.encode())
    assert again.code == ResponseCode.SUCCESS and again.ext_fields["changed"] == "false"


@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_register_topic_reads_a_lenient_route(tmp_path, profile):
    proc = make(tmp_path, profile)
    assert register(proc).code == ResponseCode.SUCCESS
    route = (b"{QueueDatas:[{brokerName:'broker-a',ReadQueueNums:'4',writeQueueNums:4.0,"
             b"perm:6,topicSysFlag:0,},],/* the rest */}")
    assert call(proc, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T9"},
                body=route).code == ResponseCode.SUCCESS
    answer = call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T9"})
    assert answer.code == ResponseCode.SUCCESS
    queue = bodies.TopicRouteData.from_json(answer.body).queue_datas[0]
    assert (queue.broker_name, queue.read_queue_nums, queue.write_queue_nums) == ("broker-a", 4, 4)


def test_is_prefix_matches_only_a_boolean_property():
    """smartMatch retries a key starting with ``is`` without it, and keeps the match only for a
    boolean property (1.2.69 and 1.2.83): ``isOrder`` sets TopicConfig.order, ``isPerm`` is
    ignored."""
    for dialect in (fastjson.FASTJSON_1_2_69, fastjson.FASTJSON_1_2_83):
        config = bodies.TopicConfig.from_json(b"{topicName:'t',isOrder:true,isPerm:2}", dialect)
        assert (config.order, config.perm) == (True, bodies.TopicConfig().perm)


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_53], ids=lambda p: p.name)
def test_an_empty_or_null_string_for_a_number_leaves_it_at_its_initial_value(tmp_path, profile):
    """TypeUtils.castToInt and castToLong read "", "null" and "NULL" as null, and a null for a
    primitive property is not set (TopicConfig's perm stays 6, its queue counts 16; a long
    stays 0). Before, each was refused ("expected an integer")."""
    body = (b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":""},'
            b'"topicConfigTable":{"T1":{"perm":"","readQueueNums":"null","writeQueueNums":"NULL",'
            b'"topicName":"T1"},"T2":{"topicName":"T2"}}}}')   # 5.x: two, a first registration
    proc = make(tmp_path, profile)
    answer = register(proc, body=body, version=profile.server_version)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    route = fastjson.loads(call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}).body)
    assert [(q["perm"], q["readQueueNums"], q["writeQueueNums"])
            for q in route["queueDatas"]] == [(6, 16, 16)]
    assert bodies.DataVersion.from_json(b'{"counter":2,"timestamp":"null"}').timestamp == 0


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_a_property_written_twice_under_its_exact_name_keeps_the_first_value(tmp_path, profile):
    """fastjson's bean deserializer sets a property's flag with its first value (null too), and
    a later key for it finds no field (``getFieldDeserializer``'s ``isSetFlag``,
    JavaBeanDeserializer.java:120 at 1.2.69, :129 at 1.2.83), so ``"perm":2,"perm":6``
    registers perm 2 and a repeated ``topicName`` keeps the first; a map (topicConfigTable)
    keeps its last value (``MapDeserializer``'s ``map.put``). Before, json kept the last value
    of every key, on the fast registration path and in the beans."""
    body = (b'{"filterServerList":["10.0.0.1:9999"],"topicConfigSerializeWrapper":{"dataVersion":'
            b'{"counter":1,"counter":9,"timestamp":1},"topicConfigTable":{"T1":{"perm":2,'
            b'"perm":6,"readQueueNums":4,"writeQueueNums":4,"topicName":"T1","topicName":"X"},'
            b'"T2":{"perm":6,"readQueueNums":1,"writeQueueNums":1},'
            b'"T2":{"perm":6,"readQueueNums":8,"writeQueueNums":8,"readQueueNums":3}}}}')
    proc = make(tmp_path, profile)
    assert register(proc, body=body, version=profile.server_version).code == ResponseCode.SUCCESS
    route = fastjson.loads(call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}).body)
    assert [(q["perm"], q["readQueueNums"]) for q in route["queueDatas"]] == [(2, 4)]
    route = fastjson.loads(call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T2"}).body)
    assert [(q["perm"], q["readQueueNums"]) for q in route["queueDatas"]] == [(6, 8)]
    assert call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}).code == \
        ResponseCode.TOPIC_NOT_EXIST
    version = fastjson.loads(call(proc, RequestCode.QUERY_DATA_VERSION,
                                  {"clusterName": "C", "brokerAddr": "127.0.0.1:10911"},
                                  body=b'{"counter":1,"timestamp":1}').body)
    assert version["counter"] == 1
    assert bodies.DataVersion.from_json(b'{"counter":null,"counter":4}').counter == 0
    assert bodies.DataVersion.from_json(b"{counter:5,'counter':4,Counter:3}").counter == 5


@pytest.mark.parametrize("filters", [b'"10.0.0.1:9999"', b'"10.0.0.1\\u003a9999"'])
def test_a_repeated_key_is_found_whatever_the_filter_servers_hold(tmp_path, filters):
    """The fast reader's colon count knows the colons in the parsed filter strings; an escaped
    one (``\\u003a``) is a colon the text does not show, which let ``"readQueueNums":1,
    "readQueueNums":8`` through as json reads it (8), where fastjson's bean keeps 1."""
    body = (b'{"filterServerList":[' + filters + b'],"topicConfigSerializeWrapper":{'
            b'"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"T1":{"perm":6,'
            b'"readQueueNums":1,"writeQueueNums":4,"readQueueNums":8,"topicName":"T1"}}}}')
    proc = make(tmp_path, PROFILE_49)
    assert register(proc, body=body, version=PROFILE_49.server_version).code == \
        ResponseCode.SUCCESS
    route = fastjson.loads(call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}).body)
    assert [q["readQueueNums"] for q in route["queueDatas"]] == [1]


def test_the_repeat_check_is_exact():
    """Colons in strings (filter servers are host:port, topic names can hold anything legal,
    escaped quotes) never make a key look written twice, and a key written twice is found
    whatever the strings hold; the objects the caller did not count only cost the exact scan."""
    for text in (b'{"a":"x:y","b":{"c":"\\":"}}', '{"k:":{":":[{"e":1}]},"\\\\":":"}',
                 b'{"a":{}}', b'[]'):
        obj = json.loads(text)
        assert not fastjson.repeats_keys(text, obj)
        assert not fastjson.repeats_keys(text, obj, 0)
        assert fastjson.written_keys(text) == fastjson.key_count(obj)
    for text, string_colons in ((b'{"a":"x:y","a":2}', 1), ('{"b":{"c":1,"c":"\\":"},"d":":"}', 2),
                                (b'{"a":1,"a":1}', 0)):
        obj = json.loads(text)
        assert fastjson.repeats_keys(text, obj)
        assert fastjson.repeats_keys(text, obj, fastjson.key_count(obj), string_colons)


def test_genuine_bodies_with_colons_in_strings_stay_on_the_fast_reader():
    """A genuine 5.3.3 body (mappingDataVersion, attributes) with host:port filter servers and
    a topic whose name and attributes hold colons is read by the fast reader, not the beans;
    the same body with one property written twice is left to the beans, which keep the first
    value (before, the fast reader kept the last)."""
    _, _, body = _genuine("rmq53-broker-register.pcap")
    obj = json.loads(body)
    obj["filterServerList"] = ["10.0.0.1:9999", "10.0.0.2:9999"]
    table = obj["topicConfigSerializeWrapper"]["topicConfigTable"]
    config = dict(next(iter(table.values())), topicName="a:b", attributes={"+x:y": "z:w"}, perm=2)
    table["a:b"] = config
    text = json.dumps(obj).encode()

    def beans(data):
        return bodies.register_broker_body_records(
            bodies.RegisterBrokerBody.decode(data, False), model.TopicConfig, model.DataVersion)

    fast = bodies._read_json(text, model.TopicConfig, model.DataVersion)
    assert fast == beans(text) and fast[1]["a:b"].perm == 2
    twice = text.replace(b'"perm": 2', b'"perm": 2, "perm": 6')
    assert twice.count(b'"perm": 6') == text.count(b'"perm": 6') + 1
    with pytest.raises(bodies._Unusual):
        bodies._read_json(twice, model.TopicConfig, model.DataVersion)
    assert beans(twice) == fast


def test_an_exact_null_flags_its_property_for_a_later_spelling():
    """fastjson sets a property's flag when its exact key is read, ``null`` too
    (JavaBeanDeserializer.java:885 at 1.2.83), and ``smartMatch(key, setFlags)`` finds no field
    for a flagged one (:1339): ``{"counter":null,"Counter":4}`` leaves the counter at 0."""
    for dialect in (fastjson.FASTJSON_1_2_69, fastjson.FASTJSON_1_2_83):
        assert bodies.DataVersion.from_json(b'{"counter":null,"Counter":4}', dialect).counter == 0
        assert bodies.DataVersion.from_json(b'{"counter":"","Counter":4}', dialect).counter == 0
        assert bodies.DataVersion.from_json(b'{"Counter":null,"COUNTER":4}', dialect).counter == 0
        assert bodies.DataVersion.from_json(b'{"timestamp":null,"Counter":4}', dialect).counter == 4
