"""Re-registration shortcuts keep Java's semantics, and a reusable route answer names a snapshot
version that follows the route handler's inputs.

Every broker re-registers every 30 s with the same body. rocketpy then skips work Java does or
does not do: the body's CRC (remembered per identical body and header CRC), the decode (an
identical body gives back the same decoded table), and the 5.x per-topic walk (Java's
``isTopicConfigChanged`` finds every topic present, unless some were removed since). These
tests pin that the skips change no answer and no table, and that the skips are really taken.
"""
import json
import zlib

import pytest

from rocketpy.namesrv.model import DataVersion, QueueData, TopicConfig, UnRegisterBrokerRequest
from rocketpy.namesrv.replies import ReusableResponse
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import RemotingCommand, bodies
from brokerbody import register_body
from processorutil import CH, call, make

ADDR = "127.0.0.1:10911"


body_of = register_body


def register(proc, body, crc=None, name="broker-a", addr=ADDR, opaque=1):
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "haServerAddr": "ha",
           "brokerId": "0", "compressed": "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc)}
    return proc.process(RemotingCommand.request(103, ext, body, opaque=opaque, version=479), CH, 1000)


def count_calls(monkeypatch, owner, name):
    calls = []
    real = getattr(owner, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


# ------------------------------------------------------------------ body CRC

def test_identical_body_is_summed_once_per_header_crc(tmp_path, monkeypatch):
    proc = make(tmp_path)
    sums = count_calls(monkeypatch, bodies, "body_crc32")
    body = body_of(["T1", "T2"])
    for opaque in range(1, 5):
        assert register(proc, body, opaque=opaque).code == 0
    assert len(sums) == 1


def test_a_wrong_crc_fails_even_for_a_remembered_body(tmp_path):
    """Java checks bodyCrc32 on every request: the memo never lends its verdict to another CRC."""
    proc = make(tmp_path)
    body = body_of(["T1", "Z"])
    assert register(proc, body).code == 0
    bad = register(proc, body, crc=12345)
    assert (bad.code, bad.remark, bad.ext_fields) == (1, "crc32 not match", {})
    assert register(proc, body).code == 0
    assert register(proc, body, crc=0).code == 0       # 0: not checked, as Java
    assert register(proc, body, crc=12345).remark == "crc32 not match"


def test_a_changed_body_is_summed_and_decoded_again(tmp_path, monkeypatch):
    proc = make(tmp_path)
    assert register(proc, body_of(["T1", "Z"])).code == 0
    sums = count_calls(monkeypatch, bodies, "body_crc32")
    bad = register(proc, body_of(["T1", "T2"], counter=2), crc=1)
    assert bad.remark == "crc32 not match" and len(sums) == 1
    assert register(proc, body_of(["T1", "T2"], counter=2)).code == 0
    assert "T2" in proc.route_info_manager.topic_queue_table


# ------------------------------------------------------------------ the 5.x topic walk

@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53])
def test_unchanged_reregistration_skips_the_walk_until_something_is_removed(tmp_path, monkeypatch,
                                                                             profile):
    proc = make(tmp_path, profile)
    rim = proc.route_info_manager
    walks = count_calls(monkeypatch, rim, "_apply_topic_configs")
    body = body_of(["T1", "T2", "T3"])
    register(proc, body)
    register(proc, body)
    register(proc, body)
    assert len(walks) == 1                       # the first registration only
    before = {t: dict(m) for t, m in rim.topic_queue_table.items()}

    rim.delete_topic("T2")                        # DELETE_TOPIC_IN_NAMESRV
    register(proc, body)                          # Java: T2 lacks this broker -> created again
    assert len(walks) == 2
    assert {t: dict(m) for t, m in rim.topic_queue_table.items()} == before
    register(proc, body)
    assert len(walks) == 2


def test_a_removal_in_another_brokers_topic_does_not_hide_a_missing_one(tmp_path):
    proc = make(tmp_path)
    rim = proc.route_info_manager
    body_a, body_b = body_of(["T1", "T2"]), body_of(["T1", "Z"])
    register(proc, body_a)
    register(proc, body_b, name="broker-b", addr="127.0.0.1:20911")
    rim.delete_topic("T1", "C")                   # both brokers lose T1 (one cluster)
    register(proc, body_a)
    assert set(rim.topic_queue_table["T1"]) == {"broker-a"}
    register(proc, body_b, name="broker-b", addr="127.0.0.1:20911")
    assert set(rim.topic_queue_table["T1"]) == {"broker-a", "broker-b"}


def test_unregistered_broker_registers_its_topics_again(tmp_path):
    proc = make(tmp_path)
    rim = proc.route_info_manager
    body = body_of(["T1", "T2"])
    register(proc, body)
    rim.unregister_brokers([UnRegisterBrokerRequest("C", ADDR, "broker-a", 0)])
    assert rim.topic_queue_table == {}
    register(proc, body)
    assert set(rim.topic_queue_table) == {"T1", "T2"}


def test_write_perm_wiped_by_an_admin_stays_wiped_until_the_version_changes(tmp_path):
    """Neither Java nor rocketpy rewrites present queue data on an unchanged version."""
    proc = make(tmp_path)
    rim = proc.route_info_manager
    body = body_of(["T1", "Z"])
    register(proc, body)
    assert call(proc, 205, {"brokerName": "broker-a"}).code == 0      # WIPE_WRITE_PERM
    register(proc, body)
    assert rim.topic_queue_table["T1"]["broker-a"].perm == 4
    register(proc, body_of(["T1", "Z"], counter=2))
    assert rim.topic_queue_table["T1"]["broker-a"].perm == 6


def test_49_walks_only_on_a_new_data_version(tmp_path):
    proc = make(tmp_path, PROFILE_49)
    rim = proc.route_info_manager
    body = body_of(["T1", "T2"])
    register(proc, body)
    rim.delete_topic("T2")
    register(proc, body)
    assert "T2" not in rim.topic_queue_table          # 4.9.8: same DataVersion, no walk
    register(proc, body_of(["T1", "T2"], counter=2))
    assert "T2" in rim.topic_queue_table


def test_changed_version_with_equal_queue_data_leaves_routes_valid(tmp_path):
    """A new DataVersion walks every topic, but equal QueueData is not replaced (Java
    ``createAndUpdateQueueData``), so cached route answers stay valid."""
    proc = make(tmp_path)
    rim = proc.route_info_manager
    register(proc, body_of(["T1", "T2"]))
    versions = {t: rim.route_version(t) for t in ("T1", "T2")}
    register(proc, body_of(["T1", "T2", "T3"], counter=2))
    assert {t: rim.route_version(t) for t in ("T1", "T2")} == versions
    register(proc, body_of(["T1", "T2", "T3"], counter=3, perm=4))
    assert all(rim.route_version(t) != versions[t] for t in ("T1", "T2"))
    assert rim.topic_queue_table["T1"]["broker-a"] == QueueData("broker-a", 4, 4, 4, 0)


# ------------------------------------------------------------------ the JSON fast path

@pytest.mark.parametrize("config", [
    {"topicName": "T", "perm": None, "readQueueNums": None},
    {"perm": 6},
    {"topicName": "T", "perm": True, "readQueueNums": 4, "writeQueueNums": 4},
    {"topicName": "T", "perm": 2 ** 31, "readQueueNums": 4, "writeQueueNums": 4},
    {"topicName": "T", "perm": -2 ** 31, "readQueueNums": 2 ** 31 - 1, "writeQueueNums": 0,
     "topicSysFlag": 3},
    {"topicName": "T", "perm": 6.0},
    {"topicName": None, "perm": 6, "readQueueNums": 1, "writeQueueNums": 2, "topicSysFlag": 0},
    {"topicName": 7, "perm": 6, "readQueueNums": 1, "writeQueueNums": 2, "topicSysFlag": 0},
    None,
    [],
    "T",
])
def test_fast_json_path_agrees_with_the_codec(config):
    body = json.dumps({"topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 2}, "topicConfigTable": {"T": config}}}).encode()
    try:
        fast = bodies._read_json(body, TopicConfig, DataVersion)
    except bodies._Unusual:
        return  # the processor falls back to the codec, the reference
    ref = bodies.RegisterBrokerBody.decode(body, False, broker_version=479)
    assert fast == bodies.register_broker_body_records(ref, TopicConfig, DataVersion)


# ------------------------------------------------------------------ route answer reuse keys

class _ReuseKey:
    """What an answer reuse is keyed by: the snapshot version a reusable answer names (None: the
    answer is not reusable), asked afresh each time, as the transport's cache learns it."""

    def __init__(self, proc, request, now=1000):
        self.proc, self.request, self.now = proc, request, now

    def __call__(self):
        answer = self.proc.process(self.request, CH, self.now)
        return answer.reuse if isinstance(answer, ReusableResponse) else None


def reusable(proc, request, now=1000):
    return _ReuseKey(proc, request, now)() is not None


def test_reuse_key_only_for_route_queries(tmp_path):
    proc = make(tmp_path)
    register(proc, body_of(["T1", "Z"]))
    route = RemotingCommand.request(105, {"topic": "T1"}, opaque=1, version=401)
    assert reusable(proc, route)
    for request in (RemotingCommand.request(106, None, opaque=1),
                    RemotingCommand.request(105, {"topic": "T1"}, opaque=1, oneway=True)):
        assert not reusable(proc, request)
    # without a topic it is the route query of the topic null, as in Java: never found, reusable
    for request in (RemotingCommand.request(105, {}, opaque=1),
                    RemotingCommand.request(105, None, opaque=1)):
        assert reusable(proc, request)


def test_reuse_key_changes_with_every_input_of_the_route_answer(tmp_path):
    proc = make(tmp_path)
    register(proc, body_of(["T1", "Z"]))
    reuse_key = _ReuseKey(proc, RemotingCommand.request(105, {"topic": "T1"}, opaque=1))
    seen = [reuse_key()]

    def changed():
        value = reuse_key()
        assert value is None or value not in seen   # not reusable, or under a new version
        seen.append(value)

    register(proc, body_of(["T1", "Z"], counter=2, perm=4))           # the route itself
    changed()
    call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"})
    assert reuse_key() == seen[-1] is not None       # orderMessageEnable is off: not in the answer
    call(proc, 318, body=b"orderMessageEnable=true\n")
    changed()
    call(proc, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:8"})
    changed()
    call(proc, 318, body=b"supportActingMaster=true\n")            # the table epoch
    changed()
    call(proc, 318, body=b"waitSecondsForService=100000\n")
    changed()
    call(proc, 318, body=b"needWaitForService=true\n")
    changed()


@pytest.mark.parametrize("profile, cacheable", [(PROFILE_53, False), (PROFILE_49, True)])
def test_zone_filtered_answers_are_not_reused(tmp_path, profile, cacheable):
    """The zone hook exists in 5.x only; 4.9 ignores the fields, so its answer is the plain one."""
    proc = make(tmp_path, profile)
    zone = RemotingCommand.request(105, {"topic": "T1", "__ZONE_MODE": "true", "__ZONE_NAME": "z"},
                                   opaque=1)
    assert reusable(proc, zone) is cacheable
    blank = RemotingCommand.request(105, {"topic": "T1", "__ZONE_MODE": "true", "__ZONE_NAME": " "},
                                    opaque=1)
    assert reusable(proc, blank)


def test_no_reuse_key_inside_the_wait_window_or_in_cluster_test_mode(tmp_path):
    route = RemotingCommand.request(105, {"topic": "T1"}, opaque=1)
    proc = make(tmp_path, need_wait_for_service=True)
    assert not reusable(proc, route, 44_999)
    assert reusable(proc, route, 45_000)
    assert not reusable(make(tmp_path, cluster_test=True), route)


# ------------------------------------------------------------------ the decode

@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53])
def test_unchanged_reregistration_is_not_decoded_again_and_the_cache_keeps_no_topics(
        tmp_path, monkeypatch, profile):
    """The cache remembers a digest, not the decoded topics: an identical body is decoded
    again only when the tables would read its topics (5.x: one was removed meanwhile)."""
    proc = make(tmp_path, profile)
    rim = proc.route_info_manager
    decodes = count_calls(monkeypatch, bodies, "read_register_broker_body")
    body = body_of(["T1", "T2", "T3"])
    for opaque in range(1, 4):
        assert register(proc, body, opaque=opaque).code == 0
    assert len(decodes) == 1
    [entry] = proc.reader.cache._last.values()
    assert entry[3][0].topic_config_table == {}
    rim.delete_topic("T2")
    assert register(proc, body).code == 0
    assert ("T2" in rim.topic_queue_table) is (profile is not PROFILE_49)   # Java's rules
    assert len(decodes) == (1 if profile is PROFILE_49 else 2)
    register(proc, body)
    assert len(decodes) == (1 if profile is PROFILE_49 else 2)



# ------------------------------------------------------------------ the walk, narrowed off the reactor

def _narrowing(proc, walk_from):
    proc.handlers[103].__self__.narrow_walk_from = walk_from


@pytest.mark.parametrize("count", [400, 800])
def test_a_new_data_version_walks_only_the_changed_topics_on_the_reactor(tmp_path, monkeypatch,
                                                                        count):
    """The decode's work finds the topics whose queue data would change; the reactor walks
    those (3 of 400 or 800), and the tables end as the full walk leaves them."""
    topics = [f"T{i}" for i in range(count)]
    changed = body_of(topics, counter=2).replace(b'"T7", "topicSysFlag": 0, "writeQueueNums": 4',
                                                b'"T7", "topicSysFlag": 0, "writeQueueNums": 8')
    changed = changed.replace(
        b'"readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": "T11"',
        b'"readQueueNums": 2, "topicFilterType": "SINGLE_TAG", "topicName": "T11"')
    tables, walked = [], []
    for walk_from in (10, 10 ** 9):                    # narrowed, and the full walk
        proc = make(tmp_path / str(walk_from))
        _narrowing(proc, walk_from)
        rim = proc.route_info_manager
        assert register(proc, body_of(topics)).code == 0
        rim.delete_topic("T3")                         # missing now: walked again
        walks = count_calls(monkeypatch, rim, "_apply_topic_configs")
        assert register(proc, changed).code == 0
        [(broker, configs, wipe, missing_only, bulk, fresh)] = walks
        walked.append(sorted(config.topic_name for config in configs))
        tables.append({t: dict(m) for t, m in rim.topic_queue_table.items()})
        monkeypatch.undo()
    assert walked == [["T11", "T3", "T7"], sorted(topics)]
    assert tables[0] == tables[1]
    assert tables[0]["T7"]["broker-a"] == QueueData("broker-a", 4, 8, 6, 0)
    assert tables[0]["T11"]["broker-a"] == QueueData("broker-a", 2, 4, 6, 0)


def test_a_narrowed_walk_is_dropped_when_the_brokers_queue_data_changed_meanwhile(tmp_path):
    proc = make(tmp_path)
    _narrowing(proc, 10)
    rim = proc.route_info_manager
    topics = [f"T{i}" for i in range(300)]
    assert register(proc, body_of(topics)).code == 0
    ext = {"brokerName": "broker-a", "brokerAddr": ADDR, "clusterName": "C", "haServerAddr": "ha",
           "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}
    walks = []
    real = rim._apply_topic_configs
    rim._apply_topic_configs = lambda name, configs, *rest: walks.append(len(configs)) or real(
        name, configs, *rest)
    for counter, meanwhile in ((2, None), (3, "T5")):
        pending = proc.process(RemotingCommand.request(103, ext, body_of(topics, counter=counter),
                                                       opaque=counter, version=479),
                               CH, 1000, offload=True)
        result = pending.work()                        # off the reactor: nothing to walk
        if meanwhile:
            rim.delete_topic(meanwhile)                # on the reactor, before the answer
        assert pending.finish(result).code == 0
    assert walks == [0, 300]                           # narrowed; then all, as the view is stale
    assert set(rim.topic_queue_table) == set(topics)  # the full walk put T5 back, as Java
