"""A big registration's new topics are found off the reactor and added in bulk
(``FreshTopics``): the reactor's step no longer walks them one by one, and the tables end exactly
as the walk leaves them (order, layouts, counts, answers), also when the tables changed between
the decode and the apply (then the reactor finds them again, a dict lookup a topic, where the
walk took ~3 µs)."""
import json
import zlib

import pytest

from rocketpy.namesrv.profile import PROFILE_49, PROFILE_53
from rocketpy.remoting import RemotingCommand
from processorutil import CH, call, make

WHOLE_WALK = 10 ** 12


def body_of(configs, counter=1):
    """A REGISTER_BROKER body of ``configs``: (topic, readQueueNums, perm) triples."""
    table = {t: {"order": False, "perm": perm, "readQueueNums": queues,
                 "topicFilterType": "SINGLE_TAG", "topicName": t, "topicSysFlag": 0,
                 "writeQueueNums": 4} for t, queues, perm in configs}
    return json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1},
        "topicConfigTable": table}}).encode()


def pending_registration(proc, body, name="broker-a", port=10911):
    """The registration as the server runs it: ``(work, finish)`` (a small body is answered at
    once)."""
    ext = {"brokerName": name, "brokerAddr": f"127.0.0.1:{port}", "clusterName": "C",
           "haServerAddr": "ha", "brokerId": "0", "compressed": "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    pending = proc.process(RemotingCommand.request(103, ext, body, opaque=1, version=479), CH,
                           1000, offload=True)
    if isinstance(pending, RemotingCommand):
        return (lambda: None), (lambda _: pending)
    return pending.work, pending.finish


def processor(tmp_path, walk_from, profile=PROFILE_53):
    proc = make(tmp_path / f"{profile.name}-{walk_from}", profile)
    proc.handlers[103].__self__.narrow_walk_from = walk_from
    return proc


def counting_puts(rim):
    """Count the per-topic steps (``ShapeTable.put``) the tables take."""
    puts = []
    real = rim.shapes.put
    rim.shapes.put = lambda topic, queue_data: puts.append(topic) or real(topic, queue_data)
    return puts


def state(proc):
    """Everything a reader of the topic table could see."""
    rim = proc.route_info_manager
    table = rim.topic_queue_table
    routes = [call(proc, 105, {"topic": t}).body for t in list(table)[::997]]
    return (list(table), {t: dict(shape) for t, shape in table.items()},
            sorted(len(rim.shapes.members(s)) for s in rim.shapes.shapes()),
            rim.queue_data_count, rim.topics_in_order(), rim.get_topics_by_cluster("C"), routes)


def test_a_first_registration_adds_its_new_topics_in_constant_steps_at_doubling_sizes(tmp_path):
    """The reactor's part of a first registration of 20,000 / 40,000 / 80,000 new topics takes
    no per-topic step (the walk took one per topic); every topic answers afterwards."""
    steps = []
    for size in (20_000, 40_000, 80_000):
        proc = make(tmp_path / str(size))
        rim = proc.route_info_manager
        work, finish = pending_registration(proc, body_of([(f"T{i}", 4, 6) for i in range(size)]))
        result = work()                                   # the decode thread's part
        puts = counting_puts(rim)
        assert finish(result).code == 0                   # the reactor's part
        steps.append(len(puts))
        assert len(rim.topic_queue_table) == rim.queue_data_count == size
        assert call(proc, 105, {"topic": f"T{size - 1}"}).code == 0
    assert steps == [0, 0, 0]


@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_53])
def test_the_bulk_add_leaves_the_tables_as_the_walk_does(tmp_path, profile):
    """Three queue layouts interleaved, a third of the topics already served by another broker:
    topic order, layouts, member counts, listings and route answers equal the walk's."""
    held = [(f"T{i}", 8, 6) for i in range(0, 3000, 3)]
    mine = [(f"T{i}", 1 + i % 3, 6 if i % 5 else 4) for i in range(3000)]
    states = []
    for walk_from in (10, WHOLE_WALK):
        proc = processor(tmp_path, walk_from, profile)
        work, finish = pending_registration(proc, body_of(held), "broker-b", 10912)
        assert finish(work()).code == 0
        puts = counting_puts(proc.route_info_manager)
        work, finish = pending_registration(proc, body_of(mine))
        assert finish(work()).code == 0
        assert len(puts) == (len(held) if walk_from == 10 else len(mine))
        states.append(state(proc))
    assert states[0] == states[1]


@pytest.mark.parametrize("meanwhile", [None, "other topic added", "added", "removed"])
def test_a_table_changed_between_decode_and_apply_is_found_again(tmp_path, meanwhile):
    """A new topic registered by another broker, or any topic deleted, while the body was
    decoded: the found topics are stale, the reactor finds the new ones again, and the tables
    end as Java's (the change first, then the registration); either way the new topics are
    added in bulk and only the topics already served are walked."""
    mine = [(f"T{i}", 4, 6) for i in range(2000)]
    states = []
    for walk_from in (10, WHOLE_WALK):
        proc = processor(tmp_path, walk_from)
        rim = proc.route_info_manager
        work, finish = pending_registration(proc, body_of([("T7", 8, 6), ("X", 8, 6)]),
                                            "broker-b", 10912)
        assert finish(work()).code == 0
        work, finish = pending_registration(proc, body_of(mine))
        result = work()
        if meanwhile in ("added", "other topic added"):
            added = "T9" if meanwhile == "added" else "Y"
            other, done = pending_registration(proc, body_of([("X", 8, 6), (added, 8, 6)],
                                                             counter=2), "broker-b", 10912)
            assert done(other()).code == 0
        elif meanwhile == "removed":
            rim.delete_topic("X")
        puts = counting_puts(rim)
        assert finish(result).code == 0
        served = ["T7", "T9"] if meanwhile == "added" else ["T7"]
        walked = served if walk_from == 10 else [t for t, _, _ in mine]
        assert puts == walked
        states.append(state(proc))
    assert states[0] == states[1]


# ------------------------------------------------------------------ a departed broker's topics

def _seeded(proc, size):
    """broker-a with ``size`` topics: a third shared with broker-b, two queue layouts."""
    mine = [(f"T{i}", 1 + i % 2, 6) for i in range(size)]
    for name, port, configs in (("broker-b", 10912, [(t, 8, 6) for t, _, _ in mine[::3]]),
                                ("broker-a", 10911, mine)):
        work, finish = pending_registration(proc, body_of(configs), name, port)
        assert finish(work()).code == 0


def _unregister_a(rim):
    from rocketpy.namesrv.model import UnRegisterBrokerRequest
    rim.unregister_brokers([UnRegisterBrokerRequest("C", "127.0.0.1:10911", "broker-a", 0)])


def test_a_departed_brokers_topics_leave_in_constant_steps_at_doubling_sizes(tmp_path):
    """Unregistering a broker of 10,000 / 20,000 / 40,000 topics takes no per-topic step (the
    removal took one per topic, ~2 µs each: 0.2 s for 100,000)."""
    steps = []
    for size in (10_000, 20_000, 40_000):
        proc = make(tmp_path / str(size))
        rim = proc.route_info_manager
        _seeded(proc, size)
        removes = []
        real = rim.shapes.remove
        rim.shapes.remove = lambda topic, name: removes.append(topic) or real(topic, name)
        _unregister_a(rim)
        steps.append(len(removes))
        assert len(rim.topic_queue_table) == rim.queue_data_count == len(range(0, size, 3))
    assert steps == [0, 0, 0]


def test_a_departed_broker_leaves_the_tables_as_removing_each_topic_does(tmp_path):
    """Removed in bulk: order, layouts, counts, listings, answers and versions equal those of
    the per-topic removal (a delta of one remove_queue_data per topic)."""
    from rocketpy.namesrv.delta import RemoveQueueData, RouteDelta
    states = []
    for bulk in (True, False):
        proc = processor(tmp_path, 10 if bulk else WHOLE_WALK)
        rim = proc.route_info_manager
        _seeded(proc, 3000)
        versions = {t: rim.route_version(t) for t in rim.topic_queue_table}
        if not bulk:
            delta = RouteDelta()
            for topic in rim.topics_of_broker("broker-a"):
                delta.add(RemoveQueueData(topic, "broker-a"))
            rim.apply(delta)
        removes = []
        real = rim.shapes.remove
        rim.shapes.remove = lambda topic, name: removes.append(topic) or real(topic, name)
        _unregister_a(rim)
        assert removes == []                              # in bulk, or done before
        assert all(rim.route_version(t) != v for t, v in versions.items())
        states.append(state(proc))
    assert states[0] == states[1]


def test_topics_found_while_the_release_rebuilt_the_table_are_walked(tmp_path):
    """The memory release rebuilds the topic table in place (emptied, then filled): a decode
    reading it in between finds every topic absent. The release marks what was found before
    it stale, so the registration walks (adding those topics in bulk would drop broker-b from
    them); the tables end as the walk leaves them."""
    from types import SimpleNamespace
    from rocketpy.service.tap import _route_release
    states = []
    for walk_from in (10, WHOLE_WALK):
        proc = processor(tmp_path, walk_from)
        rim = proc.route_info_manager
        work, finish = pending_registration(proc, body_of([(f"T{i}", 8, 6) for i in range(6000)]),
                                            "broker-b", 10912)
        assert finish(work()).code == 0
        table, rim.shapes.topics = rim.shapes.topics, {}   # read mid-rebuild
        work, finish = pending_registration(proc, body_of([(f"T{i}", 4, 6) for i in range(3000)]))
        rim.shapes.topics = table
        result = work()
        _route_release(SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                                       route_info_manager=rim), None, trim=None)()
        assert finish(result).code == 0
        assert rim.topic_queue_table["T5"].keys() == {"broker-b", "broker-a"}
        states.append(state(proc))
    assert states[0] == states[1]
