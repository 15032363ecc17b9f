"""The hand-written fast paths equal the reference paths they shortcut.

* route bodies: ``encode_topic_route`` == ``fastjson.dumps(topic_route_json(...))`` for random
  routes, both JSON styles, 4.9 and 5.x shapes;
* registration bodies: ``decode_json_fast`` == the codec's ``RegisterBrokerBody`` for every
  REGISTER_BROKER body in the captures (or declines it), and for random bodies.
"""
import json

from hypothesis import given, settings, strategies as st

import replay
from rocketpy.namesrv.answers import encode_topic_route, topic_route_json
from rocketpy.namesrv.model import BrokerData, QueueData, TopicRouteData
from rocketpy.namesrv.processor.registration import _Unusual, decode_json_fast, wrapper_from_bean
from rocketpy.remoting import bodies, fastjson

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
ids = st.integers(0, 40)


@st.composite
def routes(draw):
    brokers = draw(st.lists(st.builds(
        BrokerData, cluster=names, broker_name=names,
        broker_addrs=st.dictionaries(ids, names, max_size=4),
        enable_acting_master=st.booleans(), zone_name=st.one_of(st.none(), names)), max_size=4))
    queues = draw(st.lists(st.builds(
        QueueData, broker_name=names, read_queue_nums=st.integers(0, 1024),
        write_queue_nums=st.integers(0, 1024), perm=st.integers(0, 7),
        topic_sys_flag=st.integers(0, 3)), max_size=4))
    return TopicRouteData(queues, brokers, {}, None, draw(st.one_of(st.none(), names)))


@settings(max_examples=300, deadline=None)
@given(route=routes(), standard=st.booleans(), v5=st.booleans())
def test_fast_route_encoder_equals_fastjson(route, standard, v5):
    assert encode_topic_route(route, standard, v5) == fastjson.dumps(topic_route_json(route, v5), standard)


def _captured_register_requests():
    for path in sorted(replay.PCAP_DIR.glob("*.pcap")):
        for event in replay.replay_events(path):
            if event.kind == "request" and event.request.code == 103 and event.request.body:
                yield path.name, event.request


REGISTRATIONS = list(_captured_register_requests())


def test_captures_hold_many_registrations():
    assert len(REGISTRATIONS) > 240


def test_fast_registration_decode_equals_the_codec_on_every_captured_body():
    checked = 0
    for name, request in REGISTRATIONS:
        if request.ext_fields.get("compressed") == "true":
            continue
        try:
            fast = decode_json_fast(request.body)
        except _Unusual:
            continue          # e.g. the 5.0 broker's zlib body sent as compressed=false
        slow = bodies.RegisterBrokerBody.decode(request.body, False, broker_version=request.version)
        assert fast == (wrapper_from_bean(slow.topic_config_serialize_wrapper),
                        slow.filter_server_list), name
        checked += 1
    assert checked > 220


topic_configs = st.fixed_dictionaries({}, optional={
    "topicName": names, "readQueueNums": st.integers(0, 1 << 20),
    "writeQueueNums": st.integers(0, 1 << 20), "perm": st.integers(0, 7),
    "topicSysFlag": st.integers(0, 3), "order": st.booleans(),
    "topicFilterType": st.just("SINGLE_TAG")})


@settings(max_examples=200, deadline=None)
@given(table=st.dictionaries(names, topic_configs, max_size=5),
       version=st.fixed_dictionaries({}, optional={"counter": st.integers(0, 1 << 40),
                                                    "timestamp": st.integers(0, 1 << 42),
                                                    "stateVersion": st.integers(0, 9)}),
       filters=st.lists(names, max_size=2))
def test_fast_registration_decode_equals_the_codec_on_random_bodies(table, version, filters):
    body = json.dumps({"filterServerList": filters, "topicConfigSerializeWrapper": {
        "dataVersion": version, "topicConfigTable": table}}).encode()
    slow = bodies.RegisterBrokerBody.decode(body, False)
    assert decode_json_fast(body) == (wrapper_from_bean(slow.topic_config_serialize_wrapper),
                                      slow.filter_server_list)
