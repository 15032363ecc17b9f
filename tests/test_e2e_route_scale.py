"""End to end (issue 21): registrations of any size against a real ``twistd rocketnamesrv``.

* A broker with 100,000 topics registers with a plain JSON body and with a compressed one
  (what ``compressedRegister`` sends), and every topic's route answers.
* A 5.3.3 broker with ``enableSplitRegistration`` sends its table in parts of
  ``splitRegistrationSize`` (800) topics, each a full REGISTER_BROKER whose data version is one
  counter further (``TopicConfigManager.buildSerializeWrapper`` moves it on after each part),
  the last one with the rest (here none) and the static-topic mappings. The NameServer merges
  them: each part is a new data version, so its topics are applied, and the others stay (the
  topics missing from a part are removed only under ``deleteTopicWithBrokerRegistration``).
  Every 30 s the broker sends all parts again.
"""
import json
import zlib

import pytest

from rocketpy.remoting import bodies
from rocketpy.remoting.codes import MQVersion
from serverproc import RemotingClient, running_server

pytestmark = pytest.mark.network

BROKER = "broker-big"
ADDR = "127.0.0.1:10911"


def _body(topics, counter):
    """A 5.x broker's RegisterBrokerBody, compact (100,000 full entries pass 16 MiB)."""
    table = {t: {"topicName": t, "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                 "topicSysFlag": 0, "order": False} for t in topics}
    return json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000},
        "topicConfigTable": table}}, separators=(",", ":")).encode()


def _register(client, body, compressed=False):
    ext = {"brokerName": BROKER, "brokerAddr": ADDR, "clusterName": "DefaultCluster",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0",
           "compressed": "true" if compressed else "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    return client.call(103, ext, body, version=MQVersion.V5_3_3)


def _routes(port, topics):
    """{topic: (code, the broker names of its queue data)}"""
    client = RemotingClient(port)
    try:
        found = {}
        for topic in topics:
            answer = client.call(105, {"topic": topic}, version=MQVersion.V5_3_3)
            names = ([qd["brokerName"] for qd in json.loads(answer.body)["queueDatas"]]
                     if answer.code == 0 else [])
            found[topic] = (answer.code, names)
        return found
    finally:
        client.close()


def _all_topics(port):
    client = RemotingClient(port)
    try:
        answer = client.call(206, version=MQVersion.V5_3_3)
        assert answer.code == 0
        return set(json.loads(answer.body)["topicList"])
    finally:
        client.close()


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "compressed"])
def test_a_broker_with_100000_topics_registers_and_its_routes_answer(compressed):
    topics = [f"big-{i:06d}" for i in range(100_000)]
    body = _body(topics, 1)
    if compressed:
        body = bodies.RegisterBrokerBody.from_json(body).encode(compress=True)
    assert len(body) < 16 * 1024 * 1024
    with running_server() as server:
        broker = RemotingClient(server.port)
        try:
            answer = _register(broker, body, compressed)
            assert (answer.code, answer.remark) == (0, None)
            assert _all_topics(server.port) == set(topics)
            sample = topics[::9973] + [topics[-1]]
            assert _routes(server.port, sample) == {t: (0, [BROKER]) for t in sample}
            again = _register(broker, body, compressed)            # 30 s later: the same body
            assert again.code == 0 and _all_topics(server.port) == set(topics)
        finally:
            broker.close()


def _split(topics, counter, size=800):
    """The parts ``registerBrokerAll`` sends with ``enableSplitRegistration``: a part each
    time ``size`` topics are collected, then the rest (maybe none), one counter each."""
    parts = [topics[i:i + size] for i in range(0, len(topics), size)]
    if len(topics) % size == 0:
        parts.append([])
    return [_body(part, counter + n) for n, part in enumerate(parts)]


def test_a_split_registration_is_merged_part_by_part():
    topics = [f"split-{i:05d}" for i in range(2400)]
    with running_server() as server:
        broker = RemotingClient(server.port)
        try:
            counter = 1
            for _ in range(2):                         # the first round, then one 30 s later
                parts = _split(topics, counter)
                assert [len(json.loads(p)["topicConfigSerializeWrapper"]["topicConfigTable"])
                        for p in parts] == [800, 800, 800, 0]
                for n, part in enumerate(parts):
                    answer = _register(broker, part)
                    assert answer.code == 0, answer.remark
                    held = _all_topics(server.port)
                    assert held == set(topics[:800 * (n + 1)]) or held == set(topics), n
                counter += len(parts)
                assert _all_topics(server.port) == set(topics)
                sample = [topics[0], topics[799], topics[800], topics[1999], topics[-1]]
                assert _routes(server.port, sample) == {t: (0, [BROKER]) for t in sample}
        finally:
            broker.close()
