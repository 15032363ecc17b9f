"""The fast paths equal the reference paths they shortcut.

* route bodies: the wire shape writes every route record through the codec's one writer
  (``TopicRouteData``), and reading that back gives the record, for random routes, both JSON
  styles, 4.9 and 5.x shapes;
* registration bodies: the codec's fast JSON reader (``bodies._read_json``) == its
  ``RegisterBrokerBody`` beans for every REGISTER_BROKER body in the captures (or declines it),
  and for random bodies; its compressed reader == the beans for every compressed one, for
  random compressed bodies with odd lines, and raises the codec's very error for broken ones.
"""
import json
import struct
import zlib

import pytest
from hypothesis import given, settings, strategies as st

import replay
from rocketpy.namesrv.model import BrokerData, DataVersion, QueueData, TopicConfig, TopicRouteData
from rocketpy.namesrv.policy import policies_for
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_53
from fuzzharness import topic_line_bomb, zip_bomb
from rocketpy.remoting import bodies
from rocketpy.remoting.errors import BodyDecodeError

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
def test_route_bodies_say_what_the_route_records_say(route, standard, v5):
    wire = policies_for(PROFILE_53 if v5 else PROFILE_49).wire
    again = bodies.TopicRouteData.from_json(wire.route(route, route.order_topic_conf).to_json(standard))
    assert again.order_topic_conf == route.order_topic_conf and again.filter_server_table == {}
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            for q in again.queue_datas] == [
        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
        for q in route.queue_datas]
    assert [(b.cluster, b.broker_name, b.broker_addrs, b.enable_acting_master,
             b.zone_name if v5 else None) for b in again.broker_datas] == [
        (b.cluster, b.broker_name, b.broker_addrs, b.enable_acting_master if v5 else False,
         b.zone_name if v5 else None) for b in route.broker_datas]


def decode_json_fast(body):
    return bodies._read_json(body, TopicConfig, DataVersion)


def _records(body):
    return bodies.register_broker_body_records(body, TopicConfig, DataVersion)


def decode_compressed_fast(body, version):
    return bodies.read_register_broker_body(body, True, version, TopicConfig, DataVersion)


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
        except bodies._Unusual:
            continue          # e.g. the 5.0 broker's zlib body sent as compressed=false
        slow = bodies.RegisterBrokerBody.decode(request.body, False, broker_version=request.version)
        assert fast == _records(slow), name
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
    assert decode_json_fast(body) == _records(slow)


def _codec(body, version):
    return _records(bodies.RegisterBrokerBody.decode(body, True, broker_version=version))


def _same_outcome(body, version=479):
    """The fast compressed decode gives what the codec gives, or raises its very error."""
    try:
        expected = _codec(body, version)
    except BodyDecodeError as exc:
        with pytest.raises(BodyDecodeError) as raised:
            decode_compressed_fast(body, version)
        assert str(raised.value) == str(exc)
        return None
    assert decode_compressed_fast(body, version) == expected
    return expected


def test_fast_compressed_decode_equals_the_codec_on_every_captured_body():
    checked = 0
    for name, request in REGISTRATIONS:
        if request.ext_fields.get("compressed") != "true":
            continue
        assert _same_outcome(request.body, request.version) is not None, name
        _same_outcome(request.body, 409)   # the 4.x reading (no mapping part) too
        checked += 1
    assert checked >= 4


def _compressed(lines, data_version=b'{"counter":1}', tail=(b"[]",), mapping=0):
    parts = [struct.pack(">i", len(data_version)), data_version, struct.pack(">i", len(lines))]
    for line in lines:
        parts += (struct.pack(">i", len(line)), line)
    for part in tail:
        parts += (struct.pack(">i", len(part)), part)
    if mapping is not None:
        parts.append(struct.pack(">i", mapping))
    return zlib.compress(b"".join(parts))


line_parts = st.sampled_from([b"T", b"", b"T2", "t\u00e9".encode(), b"\xff", b"1", b"+7", b"-1",
                              b"007", b"2147483648", b"99999999999", b"\xd9\xa3", b"SINGLE_TAG",
                              b"MULTI_TAG", b"single_tag", b"{}", b'{"a":"b"}', b"{bad"])


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.lists(line_parts, max_size=7).map(b" ".join), max_size=6),
       cut=st.integers(0, 400))
def test_fast_compressed_decode_equals_the_codec_on_odd_lines(lines, cut):
    """Odd numbers, names, filter types and attributes, truncated streams: same result, same
    error, whatever the tail cache has seen before."""
    body = _compressed(lines)
    _same_outcome(body)
    _same_outcome(zlib.compress(zlib.decompress(body)[:cut]))


def test_fast_compressed_decode_keeps_the_codec_errors_of_broken_bodies():
    good = b"T 8 8 6 SINGLE_TAG"
    cases = [
        zip_bomb(1 << 22, first_part_length=1 << 30),      # a part past the bound
        zip_bomb(1 << 20, first_part_length=-5),          # a negative length
        topic_line_bomb(50_000),                          # valid lines, then no filter list
        _compressed([good] * 3)[:-7],                     # cut inside the zlib stream
        _compressed([good] * 3) + b"junk",                 # junk after the stream: ignored
        _compressed([good, b"T 1 1 6"]),                   # too few fields
        _compressed([good, b"T x 1 6 SINGLE_TAG"]),        # not a number
        _compressed([good, b"T\xff 1 1 6 SINGLE_TAG"]),    # not UTF-8 (name)
        _compressed([good, b"T 1 1 6 SINGLE_TAG \xff"]),   # not UTF-8 (attributes)
        _compressed([good], tail=(b"not json",)),          # broken filter list: empty, as Java
        _compressed([good], mapping=1),                    # a mapping part missing
        _compressed([good] * 2, mapping=None),             # no mapping count (a 4.x body)
        b"\x78\x9c not zlib",
    ]
    for body in cases:
        for version in (479, 409):
            _same_outcome(body, version)
