"""Hostile input against the request processors (DefaultRequestProcessor + RouteInfoManager + KV).

Mutated genuine requests (and requests whose body went to another code's handler) through the
4.9, 5.0 and 5.3 processors and through one with access control on. Contract (see
:mod:`fuzzharness`): the processor never raises, every two-way request gets a RocketMQ response
code, a handler fails only with a codec error (never TypeError/KeyError/RecursionError... caught
by the safety net), every answer encodes, after every batch the whole route state still reads
and encodes, and no request costs far more per byte of request and answer than the genuine ones
(counted, never timed: tests/costmeter.py). The regression cases at the end are the bugs the
harness found.
"""
import json
import os
import random
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import costmeter
import fuzzharness as fh
from rocketpy.service.fileio import AppendLog, write_file_java
from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv.acl import AccessControl, Account, parse_networks
from rocketpy.remoting import RemotingCommand, bodies, decode_frame, fastjson

SEED = int(os.environ.get("ROCKETPY_FUZZ_SEED", "20250601"))
REQUESTS = fh.request_corpus()
CH = Channel(1, "127.0.0.1:50000")


def guarded_target():
    acl = AccessControl(parse_networks("127.0.0.0/8"),
                        {"rocketmq2": Account("rocketmq2", "12345678", True)})
    return fh.ProcessorTarget("5.3", access_control=acl)


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3", "guarded"])
def test_mutated_genuine_requests(profile):
    rng = random.Random(f"{SEED}-{profile}")
    target = guarded_target() if profile == "guarded" else fh.ProcessorTarget(profile)
    mutator = fh.Mutator(rng, REQUESTS)
    contract = target.contract()
    for i in range(700):                       # every fourth request's cost counted too
        target.run(mutator.mutate(), rng, cost=contract if i % 4 == 0 else None)
    target.probe()
    seen = target.stats.outcomes
    assert target.stats.inputs == 700
    answered = {k for k in seen if k.startswith("answer:")}
    assert {"answer:0", "answer:1"} <= answered, seen        # successes and refusals both
    assert sum(v for k, v in seen.items() if k.startswith("decode:")) > 50, seen
    if profile == "guarded":
        assert "answer:16" in answered
        assert target.processor.access_control.counters["refused_signature"] > 0


@pytest.mark.parametrize("profile", ["4.9", "5.3"])
def test_hostile_numbers_cost_what_genuine_requests_cost(profile):
    """Issue 31's seeds through the processor, each request counted: a number of a genuine
    request's header or body replaced by a big exponent, a long digit run or an exact form, often
    in fastjson's lenient form (registrations, QUERY_DATA_VERSION, REGISTER_TOPIC_IN_NAMESRV...)."""
    rng = random.Random(f"{SEED}-numbers-{profile}")
    target = fh.ProcessorTarget(profile)
    mutator = fh.Mutator(rng, REQUESTS)
    contract = target.contract()
    for _ in range(250):
        target.run(mutator.hostile_number(rng.choice(REQUESTS)), rng, cost=contract)
    assert contract.worst[0] < 1 and target.stats.inputs == 250
    assert sum(v for k, v in target.stats.outcomes.items() if k.startswith("answer:")) > 40


_KEYS = ["topic", "namespace", "key", "value", "brokerName", "brokerAddr", "clusterName",
         "haServerAddr", "brokerId", "compressed", "bodyCrc32", "cluster", "epoch", "maxOffset",
         "heartbeatTimeoutMillis", "enableActingMaster", "acceptStandardJsonOnly", "__ZONE_NAME",
         "__ZONE_MODE", "AccessKey", "Signature", "lo", "ns", "nsd", "bname", "oway"]
_TEXT = st.one_of(st.sampled_from(["0", "1", "-1", "true", "2147483648", "TopicTest", "", "\ud800",
                                   "DefaultCluster", "127.0.0.1:10911", "9" * 30]),
                  st.text(max_size=12))


_BODIES = [cmd.body for cmd in map(decode_frame, REQUESTS[:400]) if cmd.body]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code=st.sampled_from(fh.NAMESRV_CODES),
       ext=st.none() | st.dictionaries(st.sampled_from(_KEYS), _TEXT, max_size=8),
       body=st.none() | st.binary(max_size=64) | st.sampled_from(_BODIES),
       oneway=st.booleans(), version=st.sampled_from([0, 37, 399, 409, 413, 479, -1]),
       serialize=st.sampled_from([0, 1]))
def test_any_fields_any_body(code, ext, body, oneway, version, serialize):
    target = _SHARED["target"]
    request = RemotingCommand.request(code, ext, body, opaque=11, version=version, oneway=oneway,
                                      serialize_type=serialize)
    try:
        frame = request.encode()
    except ValueError:
        return
    target.run(frame, random.Random(code))


_SHARED = {"target": fh.ProcessorTarget("5.3", reset_every=200)}


# ------------------------------------------------------------------ regressions found by fuzzing

def _processor(tmp_path, profile="5.3"):
    prof = profile_for(profile)
    configuration = Configuration.from_properties(
        {"kvConfigPath": str(tmp_path / "kv.json")}, as_policies(prof), str(tmp_path / "namesrv.properties"),
        store=write_file_java)
    rim = RouteInfoManager(configuration.namesrv_config, prof)
    queue = []
    kv = KVConfigManager(configuration.namesrv_config.kv_config_path, store=write_file_java,
                         log=AppendLog(configuration.namesrv_config.kv_config_path))
    proc = DefaultRequestProcessor(rim, kv,
                                   submit_unregistration=lambda r: queue.append(r) or True,
                                   profile=prof, configuration=configuration)
    return proc


def _json_request(code, ext, body=None, version=479):
    """A JSON-header frame written by json.dumps (so a lone surrogate travels as \\ud800)."""
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA",
                         "opaque": 3, "serializeTypeCurrentRPC": "JSON", "version": version}).encode()
    body = body or b""
    return decode_frame(struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body)


def _register(proc, topics, body=None, compressed=False, name="broker-a"):
    if body is None:
        table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics}
        body = json.dumps({"topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table}}).encode()
    ext = {"brokerName": name, "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0",
           "compressed": "true" if compressed else "false", "bodyCrc32": str(bodies.body_crc32(body))}
    return proc.process(_json_request(103, ext, body), CH, 1000)


def test_lone_surrogates_never_poison_answers_or_files(tmp_path):
    """A topic, KV value or config value with a lone surrogate used to make every later answer
    that lists it (cluster info, topic list, routes, GET_NAMESRV_CONFIG) fail to encode."""
    proc = _processor(tmp_path)
    assert _register(proc, ["ok", "bad\ud800"]).code == 0
    for code, ext in ((106, None), (206, None), (105, {"topic": "bad\ud800"}),
                      (105, {"topic": "missing\udfff"}), (224, {"cluster": "C"})):
        answer = proc.process(_json_request(code, ext), CH, 1000)
        frame = answer.encode()
        assert b"bad?" in frame or b"missing?" in frame or answer.code == 0, (code, frame)
    assert proc.process(_json_request(105, {"topic": "bad\ud800"}), CH, 1000).code == 0
    assert b"bad?" in proc.process(_json_request(206, None), CH, 1000).body
    assert proc.process(_json_request(100, {"namespace": "ns", "key": "k", "value": "v\ud800"}),
                        CH, 1000).code == 0
    assert proc.kv_config_manager.persist() is True       # the log's record, then the file
    assert json.loads((tmp_path / "kv.json").read_text())["configTable"]["ns"]["k"] == "v?"
    # a config value with a lone surrogate would not read back as itself: refused (issue 12)
    answer = proc.process(_json_request(318, None, b"productEnvName=x\\uD800\n"), CH, 1000)
    assert answer.code == 29 and "U+D800" in answer.remark
    answer = proc.process(_json_request(319, None), CH, 1000)
    assert b"productEnvName=center" in answer.encode()
    assert not (tmp_path / "namesrv.properties").exists()


def test_zip_bomb_registration_is_refused_quickly(tmp_path):
    proc = _processor(tmp_path)
    bomb = fh.zip_bomb_fast(4096)                     # 4 MiB on the wire, 4 GiB inflated
    answers = []
    cost, _ = costmeter.measure(lambda: answers.append(_register(proc, (), body=bomb,
                                                                 compressed=True)))
    # counted: a few lines, and memory for the 4 MiB the frame carries, not for what it inflates to
    assert cost.lines < 5000 and cost.memory < 3 * len(bomb), cost
    answer = answers[0]
    assert answer.code == 1 and "Failed to decode RegisterBrokerBody" in answer.remark
    assert proc.route_info_manager.broker_addr_table == {}


def test_deep_or_huge_values_get_specific_answers(tmp_path):
    proc = _processor(tmp_path)
    answer = _register(proc, (), body=b"[" * 100_000)
    assert answer.code == 1 and "RecursionError" not in answer.remark
    ext = {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "h",
           "brokerId": "9" * 5000}
    answer = proc.process(_json_request(103, ext, b"{}"), CH, 1000)
    # Java's header decoding logs a value Long.parseLong refuses and leaves the field null, so
    # the processor fails unboxing it exactly as when brokerId is absent
    without = {key: value for key, value in ext.items() if key != "brokerId"}
    absent = proc.process(_json_request(103, without, b"{}"), CH, 1000)
    assert answer.code == absent.code == 1 and "NullPointerException" in answer.remark
    assert answer.remark == absent.remark
    answer = proc.process(_json_request(322, dict(ext, brokerId="0"),
                                        b'{"counter":"' + b"9" * 5000 + b'"}'), CH, 1000)
    assert answer.code == 1 and "ValueError" not in answer.remark
    assert fastjson.loads(b'{"a":1}') == {"a": 1}
    assert zlib.decompress(zlib.compress(b"x")) == b"x"
