"""Body beans: fastjson's output, both dialects, the compressed registration, bad input.

The golden tests re-encode every captured body; these pin what the captures do not show (static
topic mappings, attributes, zone names, the 4.8 ``topicSynFlag``) and every failure mode, each
raising ``BodyDecodeError`` (or its ``CrcMismatchError``), never anything else.
"""
import struct
import zlib

import pytest
from hypothesis import example, given, settings, strategies as st

from rocketpy.remoting import bodies as B, fastjson
from rocketpy.remoting.codes import MQVersion
from rocketpy.remoting.errors import BodyDecodeError, CrcMismatchError, RemotingCodecError

# GET_ROUTEINFO_BY_TOPIC answers of the genuine 5.0.0 NameServer (rmq50-sc-probe.pcap,
# rmq50-routeinfo-client-versions.pcap): standard dialect to V4_9_4+, legacy to older clients.
ROUTE_50_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:52561"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":7,"readQueueNums":8,"topicSysFlag":0,'
    b'"writeQueueNums":8}]}')
CLUSTER_INFO_49 = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:52061"},"brokerName":'
    b'"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def _route_50():
    return B.TopicRouteData(
        queue_datas=[B.QueueData(broker_name="broker-a", perm=7, read_queue_nums=8,
                                 write_queue_nums=8)],
        broker_datas=[B.BrokerData(cluster="DefaultCluster", broker_name="broker-a",
                                   broker_addrs={0: "127.0.0.1:52561"})])


def test_built_route_is_what_java_5_writes():
    route = _route_50()
    assert route.to_json(standard=True) == ROUTE_50_STANDARD
    assert route.to_json() == ROUTE_50_STANDARD.replace(b'{"0":', b"{0:")
    assert B.TopicRouteData.from_json(ROUTE_50_STANDARD) == route


def test_standard_dialect_sorts_maps_and_quotes_long_keys():
    broker = B.BrokerData(cluster="c", broker_name="b", broker_addrs={2: "x:2", 0: "x:0", 1: "x:1"})
    assert broker.to_json() == (b'{"brokerAddrs":{2:"x:2",0:"x:0",1:"x:1"},"brokerName":"b",'
                                b'"cluster":"c","enableActingMaster":false}')
    assert broker.to_json(standard=True).startswith(
        b'{"brokerAddrs":{"0":"x:0","1":"x:1","2":"x:2"}')


def test_cluster_info_legacy_exact():
    info = B.ClusterInfo.from_json(CLUSTER_INFO_49)
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:52061"}
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert info.to_json() == CLUSTER_INFO_49
    # built fresh, 5.x adds enableActingMaster to each BrokerData
    fresh = info.canonical().to_json()
    assert fresh == CLUSTER_INFO_49.replace(b'"DefaultCluster"}}', b'"DefaultCluster",'
                                            b'"enableActingMaster":false}}')


def test_data_version_both_generations():
    v49 = b'{"counter":0,"timestamp":1795303626773}'
    v50 = b'{"counter":1,"stateVersion":0,"timestamp":1795304749769}'
    dv49 = B.DataVersion.from_json(v49)
    assert (dv49.counter, dv49.state_version, dv49.timestamp) == (0, 0, 1795303626773)
    assert dv49.to_json() == v49  # re-encoded as received
    assert dv49.canonical().to_json() == b'{"counter":0,"stateVersion":0,"timestamp":1795303626773}'
    assert B.DataVersion.from_json(v50).to_json() == v50
    assert B.DataVersion(counter=1, timestamp=1795304749769).to_json() == v50
    assert B.DataVersion.from_json(v49) == B.DataVersion(timestamp=1795303626773)
    assert dv49.sort_key() < B.DataVersion.from_json(v50).sort_key()


def test_queue_data_accepts_the_4_8_spelling():
    old = b'{"brokerName":"b","perm":6,"readQueueNums":4,"topicSynFlag":1,"writeQueueNums":4}'
    qd = B.QueueData.from_json(old)
    assert qd.topic_sys_flag == 1
    assert qd.to_json() == old
    assert qd.canonical().to_json() == old.replace(b"topicSynFlag", b"topicSysFlag")


def test_unknown_keys_and_order_survive():
    odd = b'{"zeta":[1,{"a":null}],"brokerName":"b","perm":6,"alpha":"x"}'
    qd = B.QueueData.from_json(odd)
    assert qd.extras == {"zeta": [1, {"a": None}], "alpha": "x"}
    assert qd.to_json() == b'{"zeta":[1,{}],"brokerName":"b","perm":6,"alpha":"x"}'
    qd.topic_sys_flag = 3  # a change the parsed key set lacks: written sorted, as fastjson
    assert qd.to_json() == (b'{"alpha":"x","brokerName":"b","perm":6,"topicSysFlag":3,'
                            b'"zeta":[1,{}]}')


def test_static_topic_mapping_keys_are_unquoted_ints():
    info = B.TopicQueueMappingInfo(topic="T", bname="broker-a", total_queues=2, epoch=5,
                                   curr_id_map={0: 0, 1: 1})
    assert info.to_json() == (b'{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,'
                              b'"epoch":5,"scope":"__global__","topic":"T","totalQueues":2}')
    route = _route_50()
    route.topic_queue_mapping_by_broker = {"broker-a": info}
    again = B.TopicRouteData.from_json(route.to_json())
    assert again == route
    assert B.TopicRouteData.from_json(route.to_json(standard=True)) == route
    detail = B.TopicQueueMappingDetail(
        topic="T", bname="broker-a", hosted_queues={0: [B.LogicQueueMappingItem(bname="broker-a")]})
    text = detail.to_json()
    assert b'"hostedQueues":{0:[{"bname":"broker-a","endOffset":-1,"gen":0,' in text
    assert B.TopicQueueMappingDetail.from_json(text) == detail


def test_zone_and_order_conf():
    route = _route_50()
    route.order_topic_conf = "broker-a:8"
    route.broker_datas[0].zone_name = "zone-1"
    text = route.to_json()
    assert b'"orderTopicConf":"broker-a:8"' in text and b'"zoneName":"zone-1"' in text
    assert B.TopicRouteData.from_json(text) == route


def test_topic_list_kv_table_member_group():
    assert B.TopicList(topic_list=["b", "a"]).to_json() == b'{"topicList":["b","a"]}'
    assert B.TopicList(topic_list=["a"], broker_addr="x:1").to_json() == (
        b'{"brokerAddr":"x:1","topicList":["a"]}')
    table = b'{"table":{"k1":"v1","k2":"{\\"a\\":1}"}}'
    assert B.KVTable.from_json(table).table == {"k1": "v1", "k2": '{"a":1}'}
    assert B.KVTable.from_json(table).to_json() == table
    assert B.KVTable().to_json() == b'{"table":{}}'
    group = B.GetBrokerMemberGroupResponseBody(broker_member_group=B.BrokerMemberGroup(
        cluster="DefaultCluster", broker_name="broker-a", broker_addrs={0: "127.0.0.1:52561"}))
    assert group.to_json() == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:52561"},'
                               b'"brokerName":"broker-a","cluster":"DefaultCluster"}}')
    assert B.GetBrokerMemberGroupResponseBody().to_json() == b"{}"
    result = B.RegisterBrokerResult(master_addr="m", ha_server_addr="h", kv_table=B.KVTable())
    assert B.RegisterBrokerResult.from_json(result.to_json()) == result


# --- RegisterBrokerBody ----------------------------------------------------------------------

def _topics(n, attributes=None):
    return {f"Topic{i}": B.TopicConfig(topic_name=f"Topic{i}", read_queue_nums=i % 16 + 1,
                                       write_queue_nums=i % 16 + 1, perm=6 + i % 2,
                                       attributes={} if attributes is None else attributes)
            for i in range(n)}


def _body(n=3, attributes=None, mappings=None):
    wrapper = B.TopicConfigAndMappingSerializeWrapper(
        data_version=B.DataVersion(counter=2, timestamp=1795304025152),
        topic_config_table=_topics(n, attributes), topic_queue_mapping_info_map=mappings or {})
    return B.RegisterBrokerBody(topic_config_serialize_wrapper=wrapper)


def test_register_body_json_form():
    body = _body(2)
    text = body.encode()
    assert text.startswith(b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":'
                           b'{"counter":2,"stateVersion":0,"timestamp":1795304025152},'
                           b'"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},'
                           b'"topicConfigTable":{"Topic0":{"attributes":{},"order":false,"perm":6,')
    assert text.endswith(b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}')
    assert B.RegisterBrokerBody.decode(text, False) == body


def test_register_body_compressed_5x_with_attributes_and_mappings():
    info = B.TopicQueueMappingInfo(topic="Topic0", bname="broker-a", total_queues=1,
                                   curr_id_map={0: 0})
    body = _body(3, attributes={"+message.type": "NORMAL"}, mappings={"Topic0": info})
    data = body.encode(compress=True)
    raw = zlib.decompress(data)
    assert b"Topic0 1 1 6 SINGLE_TAG {\"+message.type\":\"NORMAL\"}" in raw
    assert raw.endswith(b'"currIdMap":{0:0},"dirty":false,"epoch":0,"scope":"__global__",'
                        b'"topic":"Topic0","totalQueues":1}')
    back = B.RegisterBrokerBody.decode(data, True, MQVersion.V5_3_3)
    wrapper = back.topic_config_serialize_wrapper
    assert wrapper.topic_config_table == body.topic_config_table
    assert wrapper.topic_queue_mapping_info_map == {"Topic0": info}
    assert back.data_version == body.data_version
    assert back.encode(compress=True) == data


def test_register_body_compressed_4x():
    body = _body(2)
    data = body.encode(compress=True, broker_version=MQVersion.V4_9_8)
    raw = zlib.decompress(data)
    # lines in the order of Java's ConcurrentHashMap copy of the table: Topic1's bucket first
    assert raw.endswith(b"Topic1 2 2 7 SINGLE_TAG\x00\x00\x00\x17Topic0 1 1 6 SINGLE_TAG"
                        b"\x00\x00\x00\x02[]")
    back = B.RegisterBrokerBody.decode(data, True, MQVersion.V4_9_8)
    assert [t.attributes for t in back.topic_config_table.values()] == [None, None]
    assert back.encode(compress=True, broker_version=MQVersion.V4_9_8) == data


def test_compressed_drops_sys_flag_and_order_as_java():
    body = _body(1)
    topic = body.topic_config_table["Topic0"]
    topic.topic_sys_flag, topic.order = 3, True
    back = B.RegisterBrokerBody.decode(body.encode(compress=True), True)
    assert back.topic_config_table["Topic0"].topic_sys_flag == 0
    assert back.topic_config_table["Topic0"].order is False


def test_no_body_reads_as_javas_empty_registration():
    for empty in (None, b""):
        body = B.RegisterBrokerBody.decode(empty, True)
        assert body.data_version == B.DataVersion(counter=0, timestamp=0, state_version=0)
        assert body.topic_config_table == {} and body.filter_server_list == []


def test_topic_line_parsing():
    t = B.TopicConfig.from_text("T 4 8 6 MULTI_TAG")
    assert (t.topic_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_filter_type,
            t.attributes) == ("T", 4, 8, 6, "MULTI_TAG", None)
    assert t.to_text(with_attributes=False) == "T 4 8 6 MULTI_TAG"
    assert t.to_text() == "T 4 8 6 MULTI_TAG "  # 5.x with null attributes: trailing blank
    assert B.TopicConfig.from_text("T 4 8 6 MULTI_TAG ").to_text() == "T 4 8 6 MULTI_TAG "
    # attributes with a blank break Java's split: ignored, as Java ignores them
    t = B.TopicConfig.from_text('T 1 1 6 SINGLE_TAG {"a":"b c"}')
    assert t.attributes == {}
    assert B.TopicConfig.from_text('T 1 1 6 SINGLE_TAG {"a":1}').attributes == {"a": "1"}


def _stream(*parts):
    out = b""
    for part in parts:
        if isinstance(part, int):
            out += struct.pack(">i", part)
        else:
            out += struct.pack(">i", len(part)) + part
    return zlib.compress(out)


DV = b'{"counter":0,"timestamp":1}'


@pytest.mark.parametrize("data, match", [
    (b"not zlib at all", "bad zlib"),
    (zlib.compress(b"\x00\x00")[:-4] + b"\xff\xff\xff\xff", "zlib"),
    (_stream(DV, 1)[:-6], "end of compressed data"),
    (zlib.compress(struct.pack(">i", -1)), "negative length"),
    (zlib.compress(struct.pack(">i", 100) + b"{}"), "end of compressed data"),
    (_stream(b"[1]", 0, b"[]", 0), "expected an object"),
    (_stream(b"{bad", 0, b"[]", 0), "broken JSON"),
    (_stream(DV, 1, b"T 1 1 6", b"[]", 0), "fewer than 5"),
    (_stream(DV, 1, b"T 1 x 6 SINGLE_TAG", b"[]", 0), "not a Java int"),
    (_stream(DV, 1, b"T 1 1 6 SINGLE_TAG", b"[]", 0)[:-1] + b"\x00", "zlib"),
    (_stream(DV, 1, b"T 1 1 6 NO_TAG", b"[]", 0), "topicFilterType"),
    (_stream(DV, 1, b"T 1 1 99999999999 SINGLE_TAG", b"[]", 0), "range"),
    (_stream(DV, 1, b"T\xff 1 1 6 SINGLE_TAG", b"[]", 0), "UTF-8"),
    (_stream(DV, 0, b"[]", 1, b'{"currIdMap":{"x":1}}'), "expected an integer"),
    (_stream(DV, 0, b"[]"), "end of compressed data"),  # a 5.x reader needs the mapping count
])
def test_bad_compressed_bodies(data, match):
    with pytest.raises(BodyDecodeError, match=match):
        B.RegisterBrokerBody.decode(data, True, MQVersion.V5_0_0)


def test_compressed_tolerances_of_java():
    # a broken filter-server list is logged and replaced by an empty one
    body = B.RegisterBrokerBody.decode(_stream(DV, 0, b"[oops", 0), True)
    assert body.filter_server_list == []
    # a negative topic count reads no topic (Java's for loop); trailing bytes are ignored
    body = B.RegisterBrokerBody.decode(_stream(DV, -5, b'["f:1"]', 0, b"trailing"), True)
    assert body.topic_config_table == {} and body.filter_server_list == ["f:1"]


def test_zip_bomb_stops_at_the_bound():
    # a part whose length alone passes the bound is refused before it is inflated
    bomb = zlib.compress(struct.pack(">i", 2 << 20) + bytes(2 << 20), 1)
    with pytest.raises(BodyDecodeError, match="inflates past"):
        B.RegisterBrokerBody.decode(bomb, True, max_inflated=1 << 20)
    big = zlib.compress(struct.pack(">i", B.DEFAULT_MAX_INFLATED) + bytes(B.DEFAULT_MAX_INFLATED), 1)
    assert len(big) < 16 << 20  # fits in one frame
    with pytest.raises(BodyDecodeError, match="inflates past|DataVersion of .* over"):
        B.RegisterBrokerBody.decode(big, True)
    # small valid parts that add up past the bound stop there too
    line = b"T 1 1 6 SINGLE_TAG"
    many = zlib.compress(struct.pack(">i", len(DV)) + DV + struct.pack(">i", 1 << 20)
                         + (struct.pack(">i", len(line)) + line) * 60000, 1)
    with pytest.raises(BodyDecodeError, match="inflates past"):
        B.RegisterBrokerBody.decode(many, True, max_inflated=1 << 20)


def test_json_form_given_zlib_is_a_decode_error():
    with pytest.raises(BodyDecodeError):
        B.RegisterBrokerBody.decode(_body(1).encode(compress=True), False)


def test_body_crc32():
    body = b'{"counter":0,"timestamp":1}'
    assert B.body_crc32(body) == zlib.crc32(body) & 0x7FFFFFFF
    assert B.body_crc32(None) == 0
    B.check_body_crc32(body, B.body_crc32(body))
    B.check_body_crc32(body, 0)  # zero: not checked, as Java
    with pytest.raises(CrcMismatchError):
        B.check_body_crc32(body, B.body_crc32(body) ^ 1)
    assert issubclass(CrcMismatchError, BodyDecodeError)


@pytest.mark.parametrize("cls, data, match", [
    (B.TopicRouteData, b"", "broken JSON"),
    (B.TopicRouteData, None, "no body"),
    (B.TopicRouteData, b"[]", "expected an object"),
    (B.TopicRouteData, b'{"queueDatas":{}}', "expected an array"),
    (B.TopicRouteData, b'{"queueDatas":[{"perm":"x"}]}', r"queueDatas\[0\]\.perm"),
    (B.TopicRouteData, b'{"brokerDatas":[{"brokerAddrs":{"m":"a"}}]}', "brokerAddrs"),
    (B.QueueData, b'{"perm":2147483648}', "range"),
    (B.QueueData, b'{"perm":[1]}', "integer"),
    (B.DataVersion, b'{"counter":1e101}', "Overflow"),
    (B.BrokerData, b'{"enableActingMaster":"maybe"}', "boolean"),
    (B.BrokerData, b'{"brokerName":[1]}', "string"),
    (B.TopicConfig, b'{"topicFilterType":"X"}', "topicFilterType"),
    (B.ClusterInfo, b'{"clusterAddrTable":{"c":"b"}}', "expected an array"),
    (B.KVTable, b'{"table":\xff}', "UTF-8"),
    (B.DataVersion, b'{"counter":1,', "broken JSON"),
])
def test_bad_json_bodies(cls, data, match):
    with pytest.raises(BodyDecodeError, match=match) as info:
        cls.from_json(data)
    assert isinstance(info.value, RemotingCodecError)


def test_lenient_json_scalars_like_fastjson():
    qd = B.QueueData.from_json(b'{"perm":"6","readQueueNums":4.0,"brokerName":7}')
    assert (qd.perm, qd.read_queue_nums, qd.broker_name) == (6, 4, "7")
    assert B.BrokerData.from_json(b'{"enableActingMaster":"TRUE"}').enable_acting_master is True
    assert B.TopicConfig.from_json(b'{"topicFilterType":1}').topic_filter_type == "MULTI_TAG"


def test_booleans_for_int_and_long_properties_as_each_fastjson_release_reads_them():
    """``castToInt`` takes true/false as 1/0 in 1.2.69 and 1.2.83, ``castToLong`` only in
    1.2.83 (1.2.69: "can not cast to long")."""
    from rocketpy.remoting.fastjson import FASTJSON_1_2_69
    assert B.QueueData.from_json(b'{"perm":true,"readQueueNums":false}').perm == 1
    assert B.QueueData.from_json(b'{"perm":true,"readQueueNums":false}').read_queue_nums == 0
    assert B.QueueData.from_json(b'{"perm":true}', FASTJSON_1_2_69).perm == 1
    assert B.DataVersion.from_json(b'{"counter":true}').counter == 1
    with pytest.raises(BodyDecodeError, match="can not cast to long"):
        B.DataVersion.from_json(b'{"counter":true}', FASTJSON_1_2_69)


def test_numbers_with_a_fraction_or_exponent_read_exactly_as_bigdecimal():
    """A body's number with a fraction is fastjson's BigDecimal, exact: a long's integer part
    keeps every digit (a float would round 12345678901234567.9 to ...68), a scale outside
    [-100, 100] must be exact (``longValueExact``) and a scale of -64 or less leaves no low bit."""
    assert B.DataVersion.from_json(b'{"counter":12345678901234567.9}').counter == 12345678901234567
    assert B.DataVersion.from_json(b'{"counter":-7.9}').counter == -7
    assert B.DataVersion.from_json(b'{"counter":1e64}').counter == 0
    assert B.DataVersion.from_json(b'{"counter":1e19}').counter == 10 ** 19 - 2 ** 64
    assert B.DataVersion.from_json(b'{"counter":5.000E+0}').counter == 5
    one = b"1." + b"0" * 150
    assert B.DataVersion.from_json(b'{"counter":' + one + b'}').counter == 1
    assert B.QueueData.from_json(b'{"perm":4294967302.5}').perm == 6   # low 32 bits
    for refused in (b"1e101", b"1.5" + b"0" * 150 + b"1", b"1e-101", b"12345678901234567890e-101"):
        with pytest.raises(BodyDecodeError, match="ArithmeticException"):
            B.DataVersion.from_json(b'{"counter":' + refused + b'}')


# --- Hypothesis ------------------------------------------------------------------------------

_name = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
_word = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=10)
_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i64 = st.integers(-(1 << 63), (1 << 63) - 1)

_queue = st.builds(B.QueueData, broker_name=_name, perm=_i32, read_queue_nums=_i32,
                   write_queue_nums=_i32, topic_sys_flag=_i32)
_broker = st.builds(B.BrokerData, cluster=_name, broker_name=_name,
                    broker_addrs=st.dictionaries(_i64, _name, max_size=3),
                    enable_acting_master=st.booleans(), zone_name=st.one_of(st.none(), _name))
_mapping = st.builds(B.TopicQueueMappingInfo, topic=_name, bname=_name, total_queues=_i32,
                     epoch=_i64, dirty=st.booleans(),
                     curr_id_map=st.dictionaries(st.integers(0, 1 << 31 - 1), _i32, max_size=3))
_route = st.builds(
    B.TopicRouteData, queue_datas=st.lists(_queue, max_size=3),
    broker_datas=st.lists(_broker, max_size=3),
    filter_server_table=st.dictionaries(_name, st.lists(_name, max_size=2), max_size=2),
    order_topic_conf=st.one_of(st.none(), _name),
    topic_queue_mapping_by_broker=st.one_of(
        st.none(), st.dictionaries(_name, _mapping, max_size=2)))


@settings(max_examples=60, deadline=None)
@given(route=_route, standard=st.booleans())
def test_random_routes_roundtrip(route, standard):
    text = route.to_json(standard)
    back = B.TopicRouteData.from_json(text)
    assert back == route
    assert back.to_json(standard) == text
    if not standard:  # standard keys read back as strings, which sort differently ("10" < "9")
        assert fastjson.dumps(fastjson.loads(text)) == text


_topic = st.builds(B.TopicConfig, topic_name=_word, read_queue_nums=_i32, write_queue_nums=_i32,
                   perm=_i32, topic_filter_type=st.sampled_from(B.TOPIC_FILTER_TYPES),
                   attributes=st.dictionaries(_word, _word, max_size=2))


@settings(max_examples=60, deadline=None)
@given(topics=st.lists(_topic, max_size=5, unique_by=lambda t: t.topic_name),
       counter=_i64, filters=st.lists(_name, max_size=2), mappings=st.lists(_mapping, max_size=2))
def test_random_compressed_registrations_roundtrip(topics, counter, filters, mappings):
    wrapper = B.TopicConfigAndMappingSerializeWrapper(
        data_version=B.DataVersion(counter=counter, timestamp=1),
        topic_config_table={t.topic_name: t for t in topics},
        topic_queue_mapping_info_map={m.topic: m for m in mappings})
    body = B.RegisterBrokerBody(topic_config_serialize_wrapper=wrapper, filter_server_list=filters)
    data = body.encode(compress=True)
    back = B.RegisterBrokerBody.decode(data, True)
    assert back.topic_config_table == body.topic_config_table
    assert back.filter_server_list == filters
    assert back.topic_config_serialize_wrapper.topic_queue_mapping_info_map == \
        wrapper.topic_queue_mapping_info_map
    assert back.encode(compress=True) == data
    json_form = body.encode()
    assert B.RegisterBrokerBody.decode(json_form, False) == body


@settings(max_examples=400, deadline=None)
@given(st.recursive(
    st.integers() | st.text(alphabet='{},:"\\ 0123ab-\u00e9'),
    lambda kids: (st.lists(kids, max_size=3)
                  | st.dictionaries(st.integers(-50, 50) | st.text(alphabet='{},:"0 1a', max_size=5),
                                    kids, max_size=3)),
    max_leaves=10))
@example({"a,1:b": {0: "x{2:y"}, 3: [{"k": ",4 : "}]})
@example([{",5:": 1}, {6: "{7:"}])
def test_int_key_marking_shortcut_equals_the_string_aware_pattern(value):
    """fastjson's int-key marking without backslashes (quote parity) marks exactly what the
    string-aware pattern marks, for any nesting of int keys and strings full of '{', ',', ':'
    and quotes; and the parsed value comes back with its int keys."""
    from rocketpy.remoting import fastjson as fj
    text = fj.dumps(value).decode("utf-8")
    assert fj._mark_int_keys(text) == fj._UNQUOTED_KEY.sub(fj._mark_int_key, text)
    assert fj.loads(text) == value


# --- what a Java *client* prints of what it decoded (mqadmin topicRoute) ------------------------

def test_java_view_pretty_route_as_a_4_9_client_prints_it():
    """``JSON.toJSONString(topicRouteData, true)`` of fastjson 1.2.69 (the rules of its
    ``JavaBeanSerializer``/``MapSerializer``/``ListSerializer`` with PrettyFormat): tabs, a break
    before every bean property, string map key and list item but none before a Long map key, and
    a 4.9 client's classes have no enableActingMaster."""
    route = B.TopicRouteData.from_json(ROUTE_50_STANDARD)
    route.broker_datas[0].broker_addrs = {1: "127.0.0.1:52562", 0: "127.0.0.1:52561"}
    text = fastjson.dumps(B.java_view(route, MQVersion.V4_9_8), pretty=True).decode()
    assert text == (
        '{\n'
        '\t"brokerDatas":[\n'
        '\t\t{\n'
        '\t\t\t"brokerAddrs":{0:"127.0.0.1:52561",1:"127.0.0.1:52562"\n'
        '\t\t\t},\n'
        '\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"cluster":"DefaultCluster"\n'
        '\t\t}\n'
        '\t],\n'
        '\t"filterServerTable":{},\n'
        '\t"queueDatas":[\n'
        '\t\t{\n'
        '\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"perm":7,\n'
        '\t\t\t"readQueueNums":8,\n'
        '\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":8\n'
        '\t\t}\n'
        '\t]\n'
        '}')
    five = fastjson.dumps(B.java_view(route, MQVersion.V5_0_0), pretty=True).decode()
    assert '\t\t\t"enableActingMaster":false\n' in five


def test_pretty_string_keyed_map_and_empty_bean():
    text = fastjson.dumps({"b": [], "a": {"x": 1}, "c": fastjson.Bean()}, pretty=True).decode()
    assert text == '{\n\t"b":[],\n\t"a":{\n\t\t"x":1\n\t},\n\t"c":{\n\t\t\n\t}\n}'


def test_java_view_iterates_maps_as_java_hashmaps():
    table = B.KVTable(table={"zz": "1", "TopicA": "2", "k10": "3", "k1": "4"})
    from rocketpy.remoting.javahash import hashmap_order
    assert list(B.java_view(table)["table"]) == hashmap_order(["zz", "TopicA", "k10", "k1"])


def test_for_version_drops_what_older_classes_lack():
    body = _body(1)
    four = body.for_version(MQVersion.V4_9_8).to_json()
    assert b"stateVersion" not in four and b"attributes" not in four and b"mapping" not in four
    assert body.for_version(MQVersion.V5_0_0).to_json() == body.to_json()


# --- ConcurrentHashMap iteration order ------------------------------------------------------------

def test_concurrent_hashmap_capacity_is_java_11s():
    from rocketpy.remoting.javahash import concurrent_hashmap_capacity
    assert concurrent_hashmap_capacity() == 16
    assert concurrent_hashmap_capacity(1024) == 2048   # a broker's topic table
    assert concurrent_hashmap_capacity(8) == 16        # java.util.Properties
    assert concurrent_hashmap_capacity(11) == 16       # Java 8's formula gave 32
    assert concurrent_hashmap_capacity(12) == 32


def test_concurrent_hashmap_resize_reverses_the_nodes_before_the_last_run():
    """Three keys in one bucket of 16 that split 1,1,0 on the resize to 32: the tail (the
    0) keeps its place, the two before it are prepended one by one, so they swap."""
    from rocketpy.remoting.javahash import concurrent_hashmap_order, string_hash

    def spread(key):
        h = string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 0x7FFFFFFF
    names = [f"k{i}" for i in range(5000)]
    bucket = [n for n in names if spread(n) & 15 == 3]
    high = [n for n in bucket if spread(n) & 16]
    low = [n for n in bucket if not spread(n) & 16]
    a, b, c = high[0], high[1], low[0]
    fillers = [n for n in names if spread(n) & 15 not in (3,) and n not in (a, b, c)]
    # a, b, c first, then fill to 12 entries: the 12th put doubles the table to 32
    keys = [a, b, c] + fillers[:9]
    order = concurrent_hashmap_order(keys)
    assert order.index(b) < order.index(a)
    assert concurrent_hashmap_order(keys[:11]).index(a) < concurrent_hashmap_order(keys[:11]).index(b)
