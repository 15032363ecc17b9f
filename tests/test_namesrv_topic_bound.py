"""``registerBrokerMaxTopics`` (rocketpy's own; Java has no bound): one registration may carry at
most that many topics. A compressed body is refused on the count it declares, before any topic
line is inflated; a plain one on its count of JSON objects and arrays, before ``json.loads``
(which holds the GIL for the whole parse), and on its topic count after. The refusal is a
SYSTEM_ERROR naming the key; the route tables stay as they were; under the bound nothing changes.
"""
import json

import pytest

from brokerbody import register_body
from fuzzharness import topic_line_bomb
from rocketpy.namesrv import Channel, Configuration, KVConfigManager
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.processor import registration
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv.profile import profile_for
from rocketpy.namesrv.route_info_manager import RouteInfoManager
from rocketpy.remoting import RemotingCommand, bodies
from rocketpy.remoting.codes import ResponseCode
from rocketpy.service.propcheck import PropertyError, check_properties

CH = Channel(5, "127.0.0.1:40005")


def _processor(tmp_path, **props):
    prof = profile_for("5.3")
    configuration = Configuration.from_properties(
        {"kvConfigPath": str(tmp_path / "kv.json"), **props}, as_policies(prof), str(tmp_path / "n.properties"))
    rim = RouteInfoManager(configuration.namesrv_config, prof)
    return DefaultRequestProcessor(rim, KVConfigManager(configuration.namesrv_config.kv_config_path),
                                   profile=prof, configuration=configuration)


def _register(body, compressed=False):
    ext = {"brokerName": "b", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0",
           "compressed": "true" if compressed else "false",
           "bodyCrc32": str(bodies.body_crc32(body))}
    return RemotingCommand.request(103, ext, body, opaque=7, version=479)


def _packed(topics):
    return bodies.RegisterBrokerBody.from_json(register_body(topics)).encode(
        compress=True, broker_version=479)


def _refusal(detail, bound):
    return f"[REFUSED] the registration body {detail}, over registerBrokerMaxTopics={bound}"


@pytest.mark.parametrize("offload", [False, True])
def test_bound_refuses_one_topic_too_many_and_keeps_the_tables(tmp_path, offload):
    proc = _processor(tmp_path, registerBrokerMaxTopics="10")
    assert proc.reader.max_topics == 10
    for body, compressed, detail in ((register_body([f"T{i}" for i in range(11)]), False,
                                      "holds 11 topics"),
                                     (_packed([f"T{i}" for i in range(11)]), True,
                                      "declares 11 topics")):
        answer = proc.process(_register(body, compressed), CH, 1000, offload=offload)
        if not isinstance(answer, RemotingCommand):
            answer = answer.run()
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, _refusal(detail, 10))
        assert proc.route_info_manager.broker_addr_table == {}
    for body, compressed in ((register_body([f"T{i}" for i in range(10)]), False),
                             (_packed([f"T{i}" for i in range(10)]), True)):
        answer = proc.process(_register(body, compressed), CH, 2000)
        assert answer.code == ResponseCode.SUCCESS
    assert len(proc.route_info_manager.topic_queue_table) == 10


def test_a_compressed_bomb_is_refused_on_its_declared_count(tmp_path):
    """3 million topic lines in 160 KB: refused after inflating the first two parts only."""
    proc = _processor(tmp_path)
    assert proc.reader.max_topics == registration.DEFAULT_MAX_TOPICS == 200_000
    work = proc.process(_register(topic_line_bomb(3_000_000), True), CH, 1000, offload=True)
    answer = work.run()
    assert answer.remark == _refusal("declares 3000000 topics", 200_000)
    assert proc.route_info_manager.broker_addr_table == {}


def test_a_plain_body_of_tiny_entries_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    proc = _processor(tmp_path, registerBrokerMaxTopics="1000")
    table = ",".join(f'"t{i}":{{}}' for i in range(6000))
    body = ('{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1},"topicConfigTable":{'
            + table + '}}}').encode()

    def not_parsed(*_):
        raise AssertionError("parsed")

    monkeypatch.setattr(bodies, "_read_json", not_parsed)
    answer = proc.process(_register(body), CH, 1000)
    assert answer.remark == _refusal("holds 6004 JSON objects and arrays", 1000)


def test_genuine_captured_registrations_are_far_under_the_default():
    """Every registration body of the fixtures has at most a few JSON containers per topic."""
    from fuzzharness import corpus
    from rocketpy.remoting import decode_frame
    seen = 0
    for frame in corpus():
        cmd = decode_frame(frame)
        if cmd.code == 103 and not cmd.flag & 1 and cmd.body and cmd.body[:1] == b"{":
            topics = len(json.loads(cmd.body)["topicConfigSerializeWrapper"]["topicConfigTable"])
            containers = cmd.body.count(b"{") + cmd.body.count(b"[")
            assert containers <= registration._CONTAINERS_PER_TOPIC * topics + 16
            seen += 1
    assert seen > 100


def test_zero_turns_the_bound_off_and_bad_values_stop_the_start(tmp_path):
    proc = _processor(tmp_path, registerBrokerMaxTopics="0")
    answer = proc.process(_register(register_body([f"T{i}" for i in range(300)])), CH, 1000)
    assert answer.code == ResponseCode.SUCCESS and proc.reader.max_topics == 0
    assert check_properties({"registerBrokerMaxTopics": "5000"}) == []
    for bad in ("-1", "lots", "1e6"):
        with pytest.raises(PropertyError, match="registerBrokerMaxTopics"):
            check_properties({"registerBrokerMaxTopics": bad})
        with pytest.raises(ValueError, match="registerBrokerMaxTopics"):
            registration.max_topics_from_properties({"registerBrokerMaxTopics": bad})
