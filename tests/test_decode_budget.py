"""Codec: every part of a REGISTER_BROKER body is charged to its decode budget while it is read
(``rocketpy.remoting.budget``, issue 20 item 2): static topic mappings, filter servers, topic
lines, plain bodies. The work a bomb costs stops at the bound whatever its size (doubling sizes,
counted in parsed parts and work units), the mapping count is bounded before any mapping is
read, and against the real server a mapping bomb is refused without the server's memory
growing with it.
"""
import json
import struct
import zlib

import pytest

from rocketpy.remoting import bodies
from rocketpy.remoting.budget import ITEM_COST, DecodeBudget, json_items
from rocketpy.remoting.codes import MQVersion, ResponseCode
from rocketpy.remoting.errors import DecodeBudgetExceeded, DecodeCancelled

DV = b'{"counter":1,"timestamp":1}'


def _part(raw):
    return struct.pack(">i", len(raw)) + raw


def mapping_bomb(mappings, entries, filters=b"[]", lines=()):
    """A 5.x compressed body: ``lines`` topic lines, ``filters``, then ``mappings`` static topic
    mappings of ``entries`` ``currIdMap`` entries each."""
    ids = b"{" + b",".join(b'"%d":%d' % (k, k) for k in range(entries)) + b"}"
    raw = [_part(DV), struct.pack(">i", len(lines))] + [_part(line) for line in lines]
    raw += [_part(filters), struct.pack(">i", mappings)]
    for i in range(mappings):
        raw.append(_part(b'{"bname":"b","currIdMap":%s,"topic":"T%d","totalQueues":%d}'
                         % (ids, i, entries)))
    return zlib.compress(b"".join(raw), 9)


class Counting:
    """Counts the mapping parts parsed (``TopicQueueMappingInfo.from_json``)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = bodies.TopicQueueMappingInfo.from_json.__func__

        def from_json(cls, data, **kwargs):
            self.calls += 1
            return real(cls, data, **kwargs)

        monkeypatch.setattr(bodies.TopicQueueMappingInfo, "from_json", classmethod(from_json))


def _records(body, budget, **checks):
    from rocketpy.namesrv.model import DataVersion, TopicConfig
    return bodies.read_register_broker_body(body, True, MQVersion.V5_3_3, TopicConfig, DataVersion,
                                            budget=budget, **checks)


def test_a_mapping_bomb_stops_at_the_budget_whatever_its_size(monkeypatch):
    limit = 1 << 20
    parsed, spent = [], []
    for mappings in (200, 400, 800, 1600):
        counting = Counting(monkeypatch)
        budget = DecodeBudget(limit)
        with pytest.raises(DecodeBudgetExceeded):
            _records(mapping_bomb(mappings, 100), budget)
        parsed.append(counting.calls)
        spent.append(budget.spent)
    # doubling the bomb never parses more of it: the decode stops at the same bound
    assert parsed == sorted(parsed, reverse=True) and parsed[0] < 200
    # and it spent the bound plus the one charge that passed it (a chunk of inflation or one
    # mapping's values), never the bomb's size
    assert all(limit < s <= limit + (1 << 17) for s in spent), spent


def test_an_odd_line_bomb_stops_at_the_budget_whatever_its_size(monkeypatch):
    from fuzzharness import odd_line_bomb
    judged = []
    real = bodies._line
    monkeypatch.setattr(bodies, "_line", lambda raw, i: judged.append(i) or real(raw, i))
    limit = 1 << 22
    counts = []
    for lines in (20_000, 40_000, 80_000, 160_000):
        del judged[:]
        with pytest.raises(DecodeBudgetExceeded):
            _records(odd_line_bomb(lines), DecodeBudget(limit))
        counts.append(len(judged))
    # doubling the bomb never judges more lines: the slow path stops at the same bound
    assert counts == sorted(counts, reverse=True), counts
    assert counts[0] < limit // bodies.JUDGED_LINE_COST


def test_the_mapping_count_is_checked_before_any_mapping_is_read(monkeypatch):
    counting = Counting(monkeypatch)
    seen = []

    def check_mappings(count):
        seen.append(count)
        raise ValueError("too many")

    with pytest.raises(ValueError):
        _records(mapping_bomb(50, 2), DecodeBudget(), check_mappings=check_mappings)
    assert seen == [50] and counting.calls == 0


def test_a_genuine_body_with_mappings_fits_the_default_budget():
    budget = DecodeBudget()
    _, _, _, infos = _records(mapping_bomb(1000, 16), budget)
    assert len(infos) == 1000 and infos["T999"].curr_id_map[15] == 15
    assert 0 < budget.spent < budget.limit // 20


def test_filter_servers_are_charged_before_they_are_parsed(monkeypatch):
    filters = json.dumps([f"10.0.{i >> 8}.{i & 255}:1" for i in range(30000)]).encode()
    parsed = []
    real = bodies.fastjson.loads
    monkeypatch.setattr(bodies.fastjson, "loads", lambda raw, **kw: parsed.append(len(raw)) or real(raw, **kw))
    budget = DecodeBudget(json_items(filters) * ITEM_COST)
    with pytest.raises(DecodeBudgetExceeded, match="filter server list"):
        _records(mapping_bomb(0, 0, filters), budget)
    assert len(filters) not in parsed


def test_a_json_part_past_its_bound_is_refused_before_it_is_inflated():
    huge = b'["' + b"a" * bodies.MAX_JSON_PART + b'"]'
    budget = DecodeBudget()
    with pytest.raises(bodies.BodyDecodeError, match="filter server list of"):
        _records(mapping_bomb(0, 0, huge), budget)
    assert budget.spent < 1 << 17   # a chunk or two of inflation, not the 4 MiB


def test_topic_lines_are_charged_by_their_declared_count():
    lines = [b"T%d 1 1 6 SINGLE_TAG" % i for i in range(4000)]
    budget = DecodeBudget(4000 * ITEM_COST - 1)
    with pytest.raises(DecodeBudgetExceeded, match="4000 topic config"):
        _records(mapping_bomb(0, 0, lines=lines), budget)


def test_a_plain_body_is_charged_before_it_is_parsed():
    from rocketpy.namesrv.model import DataVersion, TopicConfig
    body = json.dumps({"filterServerList": ["a"] * 10000}).encode()
    with pytest.raises(DecodeBudgetExceeded, match="plain body"):
        bodies.read_register_broker_body(body, False, MQVersion.V5_3_3, TopicConfig, DataVersion,
                                         budget=DecodeBudget(10000 * ITEM_COST))


def test_a_cancelled_budget_stops_the_decode_at_its_next_check():
    budget = DecodeBudget()
    budget.cancel()
    with pytest.raises(DecodeCancelled):
        _records(mapping_bomb(10, 10), budget)


# ------------------------------------------------------------------ the real server

def _peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _register_frame(body, opaque, broker="broker-bomb", addr="127.0.0.2:10911"):
    from rocketpy.remoting import RemotingCommand
    fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": "C", "brokerId": "0",
              "haServerAddr": addr, "compressed": "true",
              "bodyCrc32": str(bodies.body_crc32(body))}
    return RemotingCommand.request(103, fields, body, opaque=opaque, version=479).encode()


@pytest.mark.network
def test_a_mapping_bomb_is_refused_without_the_server_growing_with_it():
    """Static topic mappings (3 M map entries in 252 KB) were all decoded and kept (the peak grew
    272 MiB here; a 2.2 MB body took a server past 1 GB); now the decode stops at its budget
    (the peak grew 82 MiB), nothing is kept, and a genuine registration with mappings is
    applied."""
    from serverproc import RemotingClient, running_server
    bomb = mapping_bomb(1500, 2000)
    with running_server() as server:
        client = RemotingClient(server.port)
        client.send_frame(_register_frame(mapping_bomb(20, 8), 1, "broker-ok", "127.0.0.3:10911"))
        assert client.read_frame().code == ResponseCode.SUCCESS
        before = _peak_kib(server.proc.pid)
        client.send_frame(_register_frame(bomb, 2))
        refused = client.read_frame()
        assert (refused.opaque, refused.code) == (2, ResponseCode.SYSTEM_ERROR)
        assert refused.remark.startswith("[REFUSED] decoding the registration body costs over")
        grown_mib = (_peak_kib(server.proc.pid) - before) / 1024
        assert grown_mib < 160, f"the server's peak grew by {grown_mib:.0f} MiB"
        cluster = client.call(106)
        assert b"broker-ok" in cluster.body and b"broker-bomb" not in cluster.body
        client.close()


@pytest.mark.network
def test_static_topic_mappings_count_against_the_topic_bound():
    from serverproc import RemotingClient, running_server
    with running_server("-D", "registerBrokerMaxTopics=100") as server:
        client = RemotingClient(server.port)
        client.send_frame(_register_frame(mapping_bomb(500, 1), 1))
        refused = client.read_frame()
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark == ("[REFUSED] the registration body declares 500 static topic "
                                  "mappings, over registerBrokerMaxTopics=100")
        assert client.call(105, {"topic": "T0"}).code == ResponseCode.TOPIC_NOT_EXIST
        client.close()


def test_the_budget_is_a_property_no_update_can_change():
    from rocketpy.namesrv.processor.configguard import PROTECTED_KEYS
    from rocketpy.namesrv.processor import registration
    read = registration.decode_budget_from_properties
    assert read({}) == registration.DEFAULT_DECODE_BUDGET == 64 * 1024 * 1024
    assert read({"registerBrokerDecodeBudget": " 4096 "}) == 4096
    for bad in ("-1", "lots"):
        with pytest.raises(ValueError, match="registerBrokerDecodeBudget"):
            read({"registerBrokerDecodeBudget": bad})
    assert registration.DECODE_BUDGET_KEY in PROTECTED_KEYS


@pytest.mark.network
def test_a_small_budget_set_at_start_refuses_a_genuine_body():
    from serverproc import RemotingClient, running_server
    body = mapping_bomb(20, 8)
    with running_server("-D", "registerBrokerDecodeBudget=4096") as server:
        client = RemotingClient(server.port)
        client.send_frame(_register_frame(body, 1, "broker-ok", "127.0.0.3:10911"))
        refused = client.read_frame()
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "over registerBrokerDecodeBudget=4096; nothing was applied" in refused.remark
        client.close()


def test_unquoted_numeric_keys_are_charged_as_they_cost():
    """A mapping's ``currIdMap`` keys are read by Python (marked, restored, converted: ~6 µs
    an entry): each colon that follows no quote costs INT_KEY_COST before the part is parsed,
    so the 250,000 of a mapping of the issue and its inflated bytes exceed the default budget
    instead of costing 1.6 s."""
    from rocketpy.remoting.budget import DEFAULT_DECODE_BUDGET, INT_KEY_COST, json_cost
    quoted = b'{"currIdMap":{' + b",".join(b'"%d":%d' % (i, i) for i in range(1000)) + b"}}"
    unquoted = quoted.replace(b'"', b"").replace(b"currIdMap", b'"currIdMap"')
    assert json_cost(unquoted) - json_cost(quoted) == 1000 * INT_KEY_COST
    issue = b"{" + b",".join(b"%d:%d" % (i, i) for i in range(250_000)) + b"}"
    assert json_cost(issue) + len(issue) > DEFAULT_DECODE_BUDGET
