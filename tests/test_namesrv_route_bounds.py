"""Server-wide bounds on the route state (issue 12, part 3): a registration or
REGISTER_TOPIC_IN_NAMESRV that would pass a bound is refused whole, with SYSTEM_ERROR naming
the bound, and the tables are untouched; below the bounds nothing changes. And the memory
service releases once the state has shrunk.
"""
import copy
from collections.abc import Mapping
import json
import zlib

import pytest
from twisted.internet.task import Clock

from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.route_bounds import RouteBounds
from rocketpy.remoting import RemotingCommand
from rocketpy.service.memory import RouteMemoryService, compact_dicts

TABLES = ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
          "filter_server_table")


def _processor(profile="5.3", **bounds):
    props = {key: str(value) for key, value in bounds.items()}
    configuration = Configuration.from_properties(props, as_policies(profile_for(profile)))
    rim = RouteInfoManager(configuration.namesrv_config, profile_for(profile))
    return DefaultRequestProcessor(rim, KVConfigManager("/nonexistent/kv.json"),
                                   configuration=configuration)


def _register(proc, name, topics, addr=None, broker_id=0, filters=(), channel=1, **ext):
    table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics}
    body = json.dumps({"filterServerList": list(filters), "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table}}).encode()
    fields = {"brokerName": name, "brokerAddr": addr or f"127.0.0.1:{10000 + channel}",
              "clusterName": "C", "haServerAddr": "127.0.0.1:1", "brokerId": str(broker_id),
              "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    fields.update(ext)
    request = RemotingCommand.request(103, fields, body, opaque=1, version=479)
    return proc.process(request, Channel(channel, f"127.0.0.1:{40000 + channel}"), 1000)


def _plain(table):
    """A copy of a table (a read-only view, to any depth)."""
    if isinstance(table, Mapping):
        return {key: _plain(value) for key, value in table.items()}
    return copy.deepcopy(table)


def _tables(proc):
    return {name: _plain(getattr(proc.route_info_manager, name)) for name in TABLES}


def test_pairs_bound_refuses_the_whole_registration_and_names_the_bound():
    proc = _processor(namesrvMaxTopicBrokerPairs=10)
    assert _register(proc, "a", [f"T{i}" for i in range(6)]).code == 0
    before = _tables(proc)
    answer = _register(proc, "b", [f"T{i}" for i in range(5)], channel=2)
    assert (answer.code, answer.remark) == (1, "[REFUSED] the route table would hold 11 "
                                                "topic-broker pairs, over "
                                                "namesrvMaxTopicBrokerPairs=10; nothing was applied")
    assert _tables(proc) == before
    assert proc.route_bounds.refused["namesrvMaxTopicBrokerPairs"] == 1
    # the same broker again (nothing new) and a smaller one still fit
    assert _register(proc, "a", [f"T{i}" for i in range(6)]).code == 0
    assert _register(proc, "b", ["T0", "T1", "T2", "T3"], channel=2).code == 0
    assert proc.route_info_manager.queue_data_count == 10


def test_topics_brokers_and_filter_server_bounds():
    proc = _processor(namesrvMaxTopics=3, namesrvMaxBrokers=2, namesrvMaxFilterServers=2)
    assert _register(proc, "a", ["T1", "T2"], filters=["f:1"]).code == 0
    refused = _register(proc, "b", ["T3", "T4"], channel=2)
    assert refused.remark.startswith("[REFUSED] the route table would hold 4 topics, over "
                                     "namesrvMaxTopics=3")
    assert _register(proc, "b", ["T1", "T3"], channel=2, filters=["f:2"]).code == 0
    assert _register(proc, "c", ["T1"], channel=3).remark.startswith(
        "[REFUSED] the route table would hold 3 broker names, over namesrvMaxBrokers=2")
    assert _register(proc, "a", ["T1", "T2"], filters=["f:1", "f:3"]).remark.startswith(
        "[REFUSED] the route table would hold 4 filter servers, over namesrvMaxFilterServers=2")
    # a slave of a known group is a new live broker: counted against namesrvMaxBrokers
    assert _register(proc, "a", ["T1", "T2"], broker_id=1, channel=4).remark.startswith(
        "[REFUSED] the route table would hold 3 live brokers")


def test_slaves_topics_are_not_counted_unless_they_may_apply_them():
    proc = _processor(namesrvMaxTopicBrokerPairs=4, namesrvMaxTopics=4)
    assert _register(proc, "a", ["T1", "T2", "T3", "T4"]).code == 0
    # a 4.x-style slave (no enableActingMaster) never puts its topics in the table
    assert _register(proc, "a", ["X1", "X2"], broker_id=1, channel=2).code == 0
    # a 5.x prime slave may: counted
    assert _register(proc, "b", ["X1"], broker_id=1, channel=3,
                     enableActingMaster="true").code == 1


def test_register_topic_in_namesrv_is_bounded_too():
    proc = _processor(namesrvMaxTopicBrokerPairs=2)
    assert _register(proc, "a", ["T1", "T2"]).code == 0
    body = json.dumps({"queueDatas": [{"brokerName": "a", "readQueueNums": 1, "writeQueueNums": 1,
                                       "perm": 6, "topicSysFlag": 0}], "brokerDatas": []}).encode()
    request = RemotingCommand.request(217, {"topic": "T3"}, body, opaque=2, version=479)
    answer = proc.process(request, Channel(9, "127.0.0.1:9"), 1000)
    assert answer.code == 1 and "namesrvMaxTopicBrokerPairs=2" in answer.remark
    assert "T3" not in proc.route_info_manager.topic_queue_table


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3"])
def test_defaults_are_far_above_a_real_cluster(profile):
    bounds = RouteBounds()
    assert (bounds.max_topics, bounds.max_topic_broker_pairs, bounds.max_brokers,
            bounds.max_filter_servers) == (10_000_000, 10_000_000, 10_000, 10_000)
    proc = _processor(profile)
    for i in range(20):
        assert _register(proc, f"b{i}", [f"T{j}" for j in range(500)], channel=i + 1).code == 0
    assert sum(proc.route_bounds.refused.values()) == 0


def test_a_bound_of_zero_is_no_bound():
    proc = _processor(namesrvMaxTopicBrokerPairs=0, namesrvMaxTopics=0)
    assert _register(proc, "a", [f"T{i}" for i in range(3000)]).code == 0


def test_memory_service_releases_after_a_drop_seen_at_a_tick_or_before_a_batch():
    clock = Clock()
    size = [0]
    released = []
    service = RouteMemoryService(lambda: size[0], lambda: released.append(size[0]), clock,
                                 interval=5, min_drop=100)
    service.startService()
    size[0] = 1000
    clock.advance(5)                          # seen at a tick
    size[0] = 950
    clock.advance(5)
    assert released == []                     # a drop of 50: not worth it
    size[0] = 0
    clock.advance(5)
    assert released == [0] and service.releases == 1
    unregister = service.watching(lambda requests: size.__setitem__(0, 0))
    size[0] = 5000                            # a crowd registered and leaves between two ticks
    unregister(["r"])
    clock.advance(5)
    assert released == [0, 0]
    service.stopService()


def test_memory_service_freezes_the_collector_after_growth_and_thaws_it_to_release():
    """Full collections skip the long-lived tables once they grew by min_drop; a release
    unfreezes first, so cycles the departed brokers left are collected."""
    clock = Clock()
    size, calls = [0], []
    service = RouteMemoryService(lambda: size[0], lambda: calls.append("release"), clock,
                                 interval=5, min_drop=100, freeze=lambda: calls.append("freeze"),
                                 unfreeze=lambda: calls.append("unfreeze"))
    service.startService()
    size[0] = 50
    clock.advance(5)
    assert calls == []                        # grew by 50: not yet
    size[0] = 150
    clock.advance(5)
    size[0] = 200
    clock.advance(5)
    assert calls == ["freeze"]                # once per min_drop of growth
    size[0] = 260
    clock.advance(5)
    assert calls == ["freeze", "freeze"]
    size[0] = 0
    clock.advance(5)
    assert calls == ["freeze", "freeze", "unfreeze", "release"]
    service.stopService()


def test_route_release_drops_the_type_attribute_cache_and_collects_cycles():
    """What kept the allocator's arenas of a flood after its brokers left, a few objects each:
    names made at run time (C code's, ours) held by CPython's type attribute cache, and cycles
    (a closed connection's protocol and transport) waiting for a full collection that an idle
    server does not make (the same collection empties the free lists). The release drops
    both."""
    import gc
    import sys
    import weakref
    from types import SimpleNamespace
    from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
    from rocketpy.service.tap import _route_release

    class Looked:
        pass
    name = "".join(["made_", "at_run_time"])            # not interned, as C code makes them
    before = sys.getrefcount(name)
    getattr(Looked, name, None)
    assert sys.getrefcount(name) > before                 # held by the cache
    processor = SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                                route_info_manager=RouteInfoManager(NamesrvConfig()))
    enabled = gc.isenabled()
    gc.disable()            # no automatic pass meanwhile: only the release may collect
    try:
        left = Looked()
        left.peer = left                                  # a departed broker's connection
        alive = weakref.ref(left)
        del left
        assert alive() is not None
        _route_release(processor, None, trim=None)()
        assert alive() is None
    finally:
        if enabled:
            gc.enable()
    assert sys.getrefcount(name) == before


#: the release's first call in a fresh interpreter (no other test's garbage for its collection
#: to find): the types of the objects it made and kept
FIRST_RELEASE = r"""
import gc
from types import SimpleNamespace
from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.service.allocator import heap_trimmer
from rocketpy.service.tap import _route_release
processor = SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                            route_info_manager=RouteInfoManager(NamesrvConfig()))
release = _route_release(processor, None, trim=heap_trimmer())
gc.collect()
before = {id(o) for o in gc.get_objects()}
release()
made = []
for o in gc.get_objects():
    if id(o) not in before and o is not before and o is not made:
        made.append(type(o).__name__)
print(made)
"""


def test_route_release_leaves_no_object_made_at_its_first_call():
    """A release comes at the route state's peak (the first one while 10 M entries are still
    leaving): an object it makes and keeps (an instance's ``__dict__`` made when first asked
    for, the ``ctypes`` function type and library lookup of ``malloc_trim``) stays on the peak's
    pages and keeps that allocator arena after the brokers left. Everything it keeps is made
    when the service is built."""
    import subprocess
    import sys
    from pathlib import Path
    out = subprocess.run([sys.executable, "-c", FIRST_RELEASE], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_compact_dicts_keeps_identity_order_and_content():
    class Holder:
        pass
    holder = Holder()
    holder.big = {i: str(i) for i in range(100_000)}
    holder.small = {1: 2}
    same = holder.big
    for i in range(99_990):
        del holder.big[i]
    size_before = holder.big.__sizeof__()
    assert compact_dicts(vars(holder)) == 1
    assert holder.big is same and list(holder.big) == list(range(99_990, 100_000))
    assert holder.big.__sizeof__() < size_before / 100


def _register_mappings(proc, counter, mappings, channel=1):
    """A 5.x master's REGISTER_BROKER whose wrapper carries static-topic mappings
    (``{topic: bname}``), at data version ``counter``."""
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": 1},
        "topicConfigTable": {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4,
                                 "perm": 6} for t in ("T", "U")},
        "topicQueueMappingInfoMap": {topic: {"topic": topic, "bname": bname, "totalQueues": 1,
                                             "epoch": 1, "currIdMap": {}}
                                     for topic, bname in mappings.items()}}}).encode()
    fields = {"brokerName": "a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
              "haServerAddr": "127.0.0.1:1", "brokerId": "0", "compressed": "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    request = RemotingCommand.request(103, fields, body, opaque=1, version=479)
    return proc.process(request, Channel(channel, "127.0.0.1:40001"), 1000)


def test_static_topic_mappings_are_bounded_too():
    """A registration's ``topicQueueMappingInfoMap`` names any topics and broker names it likes,
    and the mapping table keeps them (as Java's does) even once the topic is gone: a peer
    registering new mappings at each data version must not grow it for ever. Its entries count
    against namesrvMaxTopicBrokerPairs like the queue data's."""
    proc = _processor(namesrvMaxTopicBrokerPairs=10)
    table = proc.route_info_manager.topic_queue_mapping_info_table
    assert _register_mappings(proc, 1, {f"S{i}": "a" for i in range(8)}).code == 0
    assert sum(map(len, table.values())) == 8
    answers = [_register_mappings(proc, 2 + n, {f"X{n}-{i}": f"b{i}" for i in range(5)})
               for n in range(20)]
    assert answers[0].code == 1 and answers[0].remark == (
        "[REFUSED] the route table would hold 13 static topic mappings and their queues, over "
        "namesrvMaxTopicBrokerPairs=10; nothing was applied")
    assert sum(map(len, table.values())) == 8
    # mappings already held are not new: the same registration again fits
    assert _register_mappings(proc, 30, {f"S{i}": "a" for i in range(8)}).code == 0


def test_memory_service_releases_the_tail_once_the_tables_are_empty():
    """Brokers leave over seconds: a release may come while a few are left, and what those held
    was kept by the allocator (1 M entries: 20,000 left at the release, 122 MiB resident after
    instead of ~60)."""
    clock = Clock()
    size, released = [0], []
    service = RouteMemoryService(lambda: size[0], lambda: released.append(size[0]), clock,
                                 interval=5, min_drop=100)
    service.startService()
    size[0] = 1000
    clock.advance(5)
    size[0] = 50
    clock.advance(5)
    assert released == [50]
    size[0] = 20
    clock.advance(5)
    assert released == [50]                   # a drop of 30, tables not empty: not yet
    size[0] = 0
    clock.advance(5)
    assert released == [50, 0]                # the tail, though only 50 entries dropped
    clock.advance(5)
    size[0] = 10
    clock.advance(5)
    size[0] = 0
    clock.advance(5)
    assert released == [50, 0]                # a small server coming and going: never
    service.stopService()


def test_route_release_collects_fully_only_once_the_tables_are_small(monkeypatch):
    """A full collection walks what the tables still hold (~0.5 s at 10 M entries, on the
    reactor): a release while they are big makes a young pass only."""
    import gc
    from types import SimpleNamespace
    from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
    from rocketpy.service import tap
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *generation: calls.append(generation))
    route = RouteInfoManager(NamesrvConfig())
    processor = SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                                route_info_manager=route)
    release = tap._route_release(processor, None, trim=None)
    release()
    monkeypatch.setattr(tap, "FULL_COLLECTION_BELOW", 0)   # the tables count as big
    release()
    assert calls == [(), (1,)]


def test_compact_dicts_leaves_a_dict_that_still_holds_many_entries():
    """Rebuilding a dict is one step on the reactor (~0.25 s a million entries): one that still
    holds ``below`` entries or more keeps its table until a later release finds it smaller."""
    class Holder:
        pass
    holder = Holder()
    holder.big = {i: None for i in range(40_000)}
    for i in range(20_000):
        del holder.big[i]
    size_before = holder.big.__sizeof__()
    assert compact_dicts(vars(holder), below=20_000) == 0
    assert holder.big.__sizeof__() == size_before
    assert compact_dicts(vars(holder), below=20_001) == 1
    assert holder.big.__sizeof__() < size_before


def test_a_release_beside_large_tables_freezes_the_collector_again(monkeypatch):
    """Above FULL_COLLECTION_BELOW the release makes a young pass; what survives is frozen
    again, so no later automatic full pass walks the tables still held (unfrozen they would
    sit in the oldest generation: ~0.5 s a pass at 10 M pairs)."""
    import gc
    from types import SimpleNamespace
    from rocketpy.service import tap

    proc = _processor()
    assert _register(proc, "a", ["T1", "T2"]).code == 0
    monkeypatch.setattr(tap, "FULL_COLLECTION_BELOW", 1)
    processor = SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                                route_info_manager=proc.route_info_manager)
    gc.unfreeze()                               # as the memory service does before a release
    try:
        tap._route_release(processor, None, trim=None)()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
