"""BrokerOuterAPI: REGISTER_BROKER frames byte-identical to the genuine 4.9.8, 5.0.0 and 5.3.3
brokers' (every one in the captures: JSON and ROCKETMQ headers, plain and compressed bodies, oneway),
QUERY_DATA_VERSION, UNREGISTER_BROKER and BROKER_HEARTBEAT frames likewise, and the parallel
registration's per-NameServer results.

Each genuine frame gives the broker's settings (its header) and topic table (its body); the
table is handed to a fresh TopicConfigManager in *sorted* order, so the order on the wire has to
come from rocketpy's model of the Java table, not from the capture.
"""
import zlib

import pytest
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

import golden
from clientsim import Peer, accept, refuse
from rocketpy.broker import BrokerConfig, BrokerOuterAPI, BrokerRelease, TopicConfigManager
from rocketpy.broker.topics import system_topics
from rocketpy.remoting import decode_frame
from rocketpy.remoting.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from rocketpy.remoting.codes import MQVersion
from rocketpy.remoting.headers import RegisterBrokerRequestHeader
from rocketpy.transport.client import RemotingClient, RemotingCommandError, RemotingConnectError

REGISTER, UNREGISTER, QUERY_DATA_VERSION, HEARTBEAT = 103, 104, 322, 904


def _requests(code):
    """Every genuine request frame with ``code``, sent towards the NameServer (a controller-mode
    broker's BROKER_HEARTBEAT to the controller is another header: not BrokerOuterAPI's)."""
    for path in golden.capture_paths():
        for frame in golden.capture_frames(path.name):
            naive = golden.naive(frame.data)
            if (frame.to_server and frame.role == "namesrv" and naive.code == code
                    and not naive.flag & 1):
                yield frame, naive


def _config(ext, compressed):
    header = RegisterBrokerRequestHeader.from_ext_fields(ext) if ext.get("haServerAddr") else None
    ip1, port = ext["brokerAddr"].rsplit(":", 1)
    config = BrokerConfig(broker_cluster_name=ext["clusterName"], broker_name=ext["brokerName"],
                          broker_id=int(ext["brokerId"]), broker_ip1=ip1, listen_port=int(port),
                          compressed_register=compressed)
    if header is not None:
        ip2, ha_port = header.ha_server_addr.rsplit(":", 1)
        config.broker_ip2, config.ha_listen_port = ip2, int(ha_port)
        config.enable_slave_acting_master = bool(header.enable_acting_master)
        if header.heartbeat_timeout_millis is not None:
            config.broker_not_active_timeout_millis = header.heartbeat_timeout_millis
    return config


def _fresh(topic):
    """A TopicConfig built from the values alone (no memory of the keys it was parsed from)."""
    return TopicConfig(topic_name=topic.topic_name, read_queue_nums=topic.read_queue_nums,
                       write_queue_nums=topic.write_queue_nums, perm=topic.perm,
                       topic_filter_type=topic.topic_filter_type, topic_sys_flag=topic.topic_sys_flag,
                       order=topic.order, attributes=dict(topic.attributes or {}))


def _rebuild(naive):
    """``(api, config, manager, now_ms, filter servers, compressed)`` for one genuine REGISTER."""
    compressed = naive.body[:2] == b"\x78\xda"
    body = RegisterBrokerBody.decode(naive.body, compressed, naive.version)
    wrapper = body.topic_config_serialize_wrapper
    dv = wrapper.data_version
    topics = sorted((_fresh(t) for t in wrapper.topic_config_table.values()),
                    key=lambda t: t.topic_name)
    manager = TopicConfigManager(
        naive.ext_fields["clusterName"], naive.ext_fields["brokerName"], 0, topics,
        version=naive.version, with_system_topics=False,
        data_version=DataVersion(counter=dv.counter, state_version=dv.state_version or 0,
                                 timestamp=dv.timestamp))
    mapping = wrapper.mapping_data_version
    now_ms = mapping.timestamp if mapping is not None else 0
    api = BrokerOuterAPI(None, BrokerRelease.of(naive.version), naive.serialize_type)
    return (api, _config(naive.ext_fields, compressed), manager, now_ms,
            body.filter_server_list, compressed)


def _variant(frame, naive):
    header = "ROCKETMQ" if naive.serialize_type else "JSON"
    form = "compressed" if naive.body[:2] == b"\x78\xda" else "plain"
    oneway = "-oneway" if naive.flag & 2 else ""
    return f"{naive.version}/{header}/{form}{oneway}"


def test_every_genuine_register_broker_frame_is_rebuilt_byte_for_byte():
    variants = {}
    for frame, naive in _requests(REGISTER):
        api, config, manager, now_ms, filters, compressed = _rebuild(naive)
        request = api.registration(config, manager.wrapper(now_ms), filters, compressed)
        request.opaque, request.flag = naive.opaque, naive.flag
        assert request.encode() == frame.data, frame.where
        variants[_variant(frame, naive)] = variants.get(_variant(frame, naive), 0) + 1
    assert set(variants) >= {"409/JSON/plain", "409/ROCKETMQ/plain", "409/JSON/compressed",
                             "409/JSON/plain-oneway", "413/JSON/plain", "413/ROCKETMQ/plain",
                             "413/JSON/compressed", "479/JSON/plain", "479/ROCKETMQ/plain",
                             "479/JSON/compressed"}, variants
    assert sum(variants.values()) > 250


def test_five_zero_compresses_but_says_false_and_four_nine_tells_the_truth():
    for version, says in ((MQVersion.V4_9_8, "true"), (MQVersion.V5_0_0, "false")):
        manager = TopicConfigManager("C", "b", 1, version=version)
        api = BrokerOuterAPI(None, BrokerRelease.of(version))
        request = api.registration(BrokerConfig(broker_name="b", broker_cluster_name="C"),
                                   manager.wrapper(2), compressed=True)
        assert request.ext_fields["compressed"] == says
        assert request.body[:2] == b"\x78\xda"
        assert int(request.ext_fields["bodyCrc32"]) == zlib.crc32(request.body) & 0x7FFFFFFF


def test_genuine_query_data_version_unregister_and_heartbeat_frames():
    seen = set()
    for code in (QUERY_DATA_VERSION, UNREGISTER, HEARTBEAT):
        for frame, naive in _requests(code):
            ext = naive.ext_fields
            config = BrokerConfig(broker_cluster_name=ext["clusterName"], broker_name=ext["brokerName"],
                                  broker_id=int(ext.get("brokerId", 0)))
            config.broker_ip1, port = ext["brokerAddr"].rsplit(":", 1)
            config.listen_port = int(port)
            client = _Recorder()
            api = BrokerOuterAPI(client, BrokerRelease.of(naive.version), naive.serialize_type)
            if code == QUERY_DATA_VERSION:
                dv = DataVersion.from_json(naive.body)
                if naive.flag & 2:
                    api.send_heartbeat_via_data_version(["ns"], config, dv)
                else:
                    api.need_register(["ns"], config, dv)
            elif code == UNREGISTER:
                api.unregister_broker_all(["ns"], config)
            else:
                api.send_heartbeat(["ns"], config)
            [(oneway, request)] = client.sent
            assert oneway == bool(naive.flag & 2)
            request.opaque, request.flag = naive.opaque, naive.flag
            assert request.encode() == frame.data, frame.where
            seen.add((code, naive.version, naive.flag))
    assert {(322, 409, 0), (322, 413, 0), (322, 413, 2), (104, 409, 0), (104, 413, 0),
            (904, 413, 2), (322, 479, 0), (104, 479, 0)} <= seen, seen


class _Recorder:
    """Stands in for the client: records what would be sent, answers nothing."""

    def __init__(self):
        self.sent = []

    def invoke(self, addr, request, timeout):
        from twisted.internet.defer import Deferred
        self.sent.append((False, request))
        return Deferred()

    def invoke_oneway(self, addr, request, timeout):
        from twisted.internet.defer import succeed
        self.sent.append((True, request))
        return succeed(None)


def test_system_topics_are_a_genuine_brokers():
    """The tables the genuine brokers registered first hold exactly these system topics."""
    firsts = {}
    for frame, naive in _requests(REGISTER):
        key = (frame.capture, naive.ext_fields["brokerName"])
        if key not in firsts and "-mqadmin-" not in frame.capture and "long-run" not in frame.capture:
            firsts[key] = naive
    checked = 0
    for (capture, broker), naive in firsts.items():
        if naive.body[:2] == b"\x78\xda" or len(RegisterBrokerBody.decode(naive.body, False).topic_config_table) < 8:
            continue
        table = RegisterBrokerBody.decode(naive.body, False).topic_config_table
        ours = {t.topic_name: (t.read_queue_nums, t.write_queue_nums, t.perm)
                for t in system_topics(naive.ext_fields["clusterName"], broker, naive.version)}
        theirs = {n: (t.read_queue_nums, t.write_queue_nums, t.perm) for n, t in table.items()}
        assert {n: theirs.get(n) for n in ours} == ours, capture
        checked += 1
    assert checked >= 4


class RegisterAllTests(SynchronousTestCase):
    """The parallel registration through a real RemotingClient (iosim)."""

    def setUp(self):
        self.reactor = MemoryReactorClock()
        self.client = RemotingClient(self.reactor)
        self.api = BrokerOuterAPI(self.client, BrokerRelease.of(MQVersion.V4_9_8))
        self.config = BrokerConfig()
        self.manager = TopicConfigManager("DefaultCluster", "broker-a", 1000,
                                          version=MQVersion.V4_9_8)

    def test_one_result_per_namesrv_in_parallel(self):
        d = self.api.register_broker_all(["127.0.0.1:9876", "127.0.0.1:9877", "127.0.0.1:9878"],
                                         self.config, self.manager.wrapper(1000))
        self.assertEqual(len(self.reactor.tcpClients), 3)  # all three at once
        slave = Peer(auto=lambda r: r.create_response(0, ext_fields={
            "masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"},
            body=b'{"table":{"TopicA":"broker-a:4"}}'))
        error = Peer(auto=lambda r: r.create_response(1, remark="crc32 not match"))
        accept(self.reactor, slave, index=0)
        accept(self.reactor, error, index=1)
        refuse(self.reactor, index=2)
        [(ok0, result), (ok1, failure1), (ok2, failure2)] = self.successResultOf(d)
        self.assertTrue(ok0)
        self.assertEqual((result.master_addr, result.ha_server_addr, result.kv_table.table),
                         ("127.0.0.1:10911", "127.0.0.1:10912", {"TopicA": "broker-a:4"}))
        self.assertFalse(ok1)
        self.assertEqual(failure1.value.code, 1)
        self.assertIsInstance(failure1.value, RemotingCommandError)
        self.assertFalse(ok2)
        self.assertIsInstance(failure2.value, RemotingConnectError)
        # the same bytes went to every NameServer, opaques aside
        frames = [slave.frames[0], error.frames[0]]
        self.assertEqual(decode_frame(frames[0]).body, decode_frame(frames[1]).body)

    def test_oneway_registration(self):
        d = self.api.register_broker_all(["127.0.0.1:9876"], self.config,
                                         self.manager.wrapper(1000), oneway=True)
        peer, _ = accept(self.reactor)
        self.assertEqual(self.successResultOf(d), [(True, None)])
        self.assertTrue(peer.requests[0].is_oneway)

    def test_need_register_per_namesrv(self):
        dv = self.manager.data_version
        same = Peer(auto=lambda r: r.create_response(0, ext_fields={"changed": "false"},
                                                     body=r.body))
        other = Peer(auto=lambda r: r.create_response(0, ext_fields={"changed": "false"},
                                                      body=b'{"counter":7,"timestamp":1}'))
        told = Peer(auto=lambda r: r.create_response(0, ext_fields={"changed": "true"}))
        d = self.api.need_register(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"],
                                   self.config, dv)
        for i, peer in enumerate((same, other, told)):
            accept(self.reactor, peer, index=i)
        refuse(self.reactor, index=3)
        self.assertEqual(self.successResultOf(d), [False, True, True, True])
        self.assertEqual(same.requests[0].body, b'{"counter":0,"timestamp":1000}')  # 4.9: no stateVersion

    def test_unregister_all(self):
        d = self.api.unregister_broker_all(["127.0.0.1:1", "127.0.0.1:2"], self.config)
        accept(self.reactor, Peer(auto=lambda r: r.create_response(0)), index=0)
        accept(self.reactor, Peer(auto=lambda r: r.create_response(1, remark="x")), index=1)
        [(ok0, _), (ok1, failure)] = self.successResultOf(d)
        self.assertTrue(ok0)
        self.assertFalse(ok1)
        self.assertEqual(failure.value.code, 1)

    def test_topic_changes_move_the_data_version(self):
        before = self.manager.data_version
        self.manager.update_topic(TopicConfig(topic_name="TopicA", read_queue_nums=4,
                                              write_queue_nums=4), 2000)
        self.assertEqual((self.manager.data_version.counter, self.manager.data_version.timestamp),
                         (before.counter + 1, 2000))
        self.assertIn("TopicA", self.manager.table)
        self.assertTrue(self.manager.delete_topic("TopicA", 3000))
        self.assertFalse(self.manager.delete_topic("TopicA", 4000))
        self.assertEqual(self.manager.data_version.counter, before.counter + 2)


@pytest.mark.parametrize("version", [MQVersion.V4_9_8, MQVersion.V5_0_0, MQVersion.V5_3_3])
def test_registration_is_what_the_nameserver_reads(version):
    """Our NameServer's reader takes back what our broker wrote, in every release's form."""
    manager = TopicConfigManager("C", "b", 5, [TopicConfig(topic_name=f"T{i}") for i in range(30)],
                                 version=version)
    api = BrokerOuterAPI(None, BrokerRelease.of(version))
    for compressed in (False, True):
        request = api.registration(BrokerConfig(broker_name="b", broker_cluster_name="C"),
                                   manager.wrapper(6), compressed=compressed)
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        back = RegisterBrokerBody.decode(request.body, compressed, version)
        assert set(back.topic_config_table) == set(manager.table)
        assert header.body_crc32 == zlib.crc32(request.body) & 0x7FFFFFFF
