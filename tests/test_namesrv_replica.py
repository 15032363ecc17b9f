"""A replica of the route tables fed by the writer's op stream (issue 32 part 3, for issue 33
part 2's worker processes): the batches ``RouteInfoManager.journal`` reports, encoded
(rocketpy.namesrv.opcodec) and applied through the same ``apply`` on fresh tables, leave the
replica equal to the writer: the same tables in the same orders, the same route versions and
listing generation (the answer cache keys off them), and byte-identical answers.

* every genuine capture (4.9.8, 5.0.0, 5.3.3) replayed on a writer; after every event that
  changed the tables, every read answer of a processor on the replica equals the writer's;
* Hypothesis: random op sequences (any op, any order, also ones no policy would write), and
  the route-snapshot state machine's registrations, unregistrations, expiries, admin commands
  and config flips, with the replica compared after every step;
* applying the same stream to another fresh replica gives the same again (deterministic), also
  in another process, whose string hashes (and so set orders) differ.
"""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import initialize, invariant
from hypothesis import given

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv import delta as ops
from rocketpy.namesrv.delta import RouteDelta
from rocketpy.namesrv.model import (DataVersion, MappingInfo, QueueData, Registration, TopicConfig,
                                    TopicConfigWrapper)
from rocketpy.namesrv.opcodec import decode_batch, encode_batch
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_53
from test_namesrv_route_snapshots import SnapshotMachine


class Replica:
    """A replica of ``writer``'s tables, fed by its journal through the encoding."""

    def __init__(self, writer, config=None):
        self.rim = RouteInfoManager(config or writer.config, writer.policies)
        self.stream = []
        writer.journal = self.stream.append
        self.applied = 0
        self.bytes = 0

    def catch_up(self):
        """Apply the batches the writer reported since the last call; how many."""
        batches = self.stream[self.applied:]
        for batch in batches:
            data = encode_batch(batch)
            self.bytes += len(data)
            self.rim.apply(RouteDelta(decode_batch(data)))
        self.applied = len(self.stream)
        return len(batches)


def _bodies(rim, route):
    if route is None:
        return None
    bean = rim.wire.route(route)
    return bean.to_json(False), bean.to_json(True)


def observable(rim):
    """What the tables hold and answer: contents in table order, counts, high-water marks,
    versions, the listings' generation, the expiry deadlines and every read answer's body."""
    topics = list(rim.topic_queue_table)
    brokers = list(rim.broker_addr_table)
    clusters = list(rim.cluster_addr_table)
    snapshots = {t: rim.route_snapshot(t) for t in topics}
    return {
        "topics": [(t, tuple(s.queues.values()), s.high) for t, s in rim.topic_queue_table.items()],
        "brokers": list(rim.broker_addr_table.items()),
        "clusters": [(c, tuple(names), rim.cluster_high_water(c))
                     for c, names in rim.cluster_addr_table.items()],
        "live": list(rim.broker_live_table.items()),
        "filters": list(rim.filter_server_table.items()),
        "mappings": [(t, list(m.items()), [rim.mapping_owner(t, b) for b in m])
                     for t, m in rim.topic_queue_mapping_info_table.items()],
        "provisional": list(rim.provisional.items()),
        "counts": (rim.queue_data_count, rim.mapping_count, rim.high_water_marks()),
        "applied": [rim.applied_digest(n) for n in brokers],
        "of_broker": {n: sorted(rim.topics_of_broker(n)) for n in rim.shapes.broker_names()},
        "expiry": {k: e[0] for k, e in rim.expiry._entries.items()},
        "by_channel": {c: list(keys) for c, keys in rim._by_channel.items()},
        "versions": [rim.route_version(t) for t in topics + ["NoSuchTopic"]],
        "generation": rim.snapshots.generation,
        "routes": [(t, s.version, _bodies(rim, s.route)) for t, s in snapshots.items()],
        "lists": (rim.get_all_topic_list(), rim.get_system_topic_list(), rim.get_unit_topics(),
                  rim.get_has_unit_sub_topic_list(), rim.get_has_unit_sub_un_unit_topic_list(),
                  [rim.get_topics_by_cluster(c) for c in clusters + ["NoCluster"]],
                  rim.brokers_in_order(), rim.clusters_in_order()),
        "cluster_info": rim.wire.cluster_info(rim).to_json(False),
    }


# ------------------------------------------------------------------ genuine captures

def test_every_captured_registration_reaches_a_replica_byte_for_byte():
    """Each genuine capture replayed on a writer; after every event that changed the tables,
    the batches it applied are encoded and applied to a replica, and every read answer (routes
    of every topic in both JSON styles, every topic list, the cluster info, each cluster's
    topics, each group's members) of a processor on the replica equals the writer's, bytes
    and all, as do the tables, versions and generation."""
    from replay import PCAP_DIR, build_processor, replay_steps
    from rocketpy.namesrv.processor import DefaultRequestProcessor
    from test_namesrv_routefile import read_answers
    checked = captures = ops_shipped = 0
    for capture in sorted(PCAP_DIR.glob("*.pcap")):
        with tempfile.TemporaryDirectory() as tmp:
            processor = build_processor(capture, tmp)
            writer = processor.route_info_manager
            replica = Replica(writer)
            reader = DefaultRequestProcessor(replica.rim, processor.kv_config_manager,
                                             profile=writer.policies,
                                             configuration=processor.configuration)
            done = 0
            for now in replay_steps(capture, processor):
                if not replica.catch_up():
                    continue
                assert read_answers(reader, now) == read_answers(processor, now), capture.name
                assert observable(replica.rim) == observable(writer), capture.name
                done += 1
            ops_shipped += sum(map(len, replica.stream))
            checked += done
            captures += done > 0
    assert captures >= 40 and checked >= 300 and ops_shipped >= 1000, (captures, checked,
                                                                        ops_shipped)


# ------------------------------------------------------------------ random op sequences

NAMES = st.sampled_from(("a", "b", "c"))
TOPICS = st.sampled_from(("T1", "T2", "T3", "rmq_sys_SYNC_BROKER_MEMBER_a"))
CLUSTERS = st.sampled_from(("C1", "C2"))
ADDRS = st.sampled_from(("10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"))
KEYS = st.tuples(CLUSTERS, ADDRS)
PERMS = st.sampled_from((2, 4, 6, 7))
QUEUE_DATA = st.builds(QueueData, NAMES, st.integers(1, 3), st.integers(1, 3), PERMS,
                       st.sampled_from((0, 1, 2, 3)))
CONFIGS = st.lists(st.builds(TopicConfig, TOPICS, st.integers(1, 3), st.integers(1, 3), PERMS,
                             st.sampled_from((0, 1))), max_size=4).map(tuple)
ADDR_TABLE = st.dictionaries(st.integers(0, 2), ADDRS, max_size=3).map(lambda d: tuple(d.items()))
MAPPING = st.builds(MappingInfo, NAMES, st.just(((0, 0), (1, 1))), st.booleans(),
                    st.integers(0, 3), st.just("__global__"), TOPICS, st.integers(1, 2))
NOW = st.integers(0, 500_000)

RANDOM_OP = st.one_of(
    st.builds(ops.AddToCluster, CLUSTERS, NAMES),
    st.builds(ops.RemoveFromCluster, CLUSTERS, NAMES),
    st.builds(ops.SetBroker, CLUSTERS, NAMES, ADDR_TABLE, st.booleans(),
              st.sampled_from((None, "z1"))),
    st.builds(ops.RemoveBroker, NAMES),
    st.builds(ops.PutLive, KEYS, NOW, st.sampled_from((30_000, 120_000)),
              st.builds(DataVersion, st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
              st.none() | st.integers(1, 3), st.sampled_from((None, "ha")), NAMES,
              st.sampled_from((None, (), ("fs1",), ("fs1", "fs2"))), st.booleans(),
              st.sampled_from((None, "10.0.0.9"))),
    st.builds(ops.RefreshLive, KEYS, NOW),
    st.builds(ops.RemoveLive, KEYS),
    st.builds(ops.RemoveFilterServers, KEYS, NAMES),
    st.builds(ops.MergeTopics, NAMES, CONFIGS, st.booleans(), st.booleans(),
              st.sampled_from((None, b"d1", b"d2")), st.booleans()),
    st.builds(ops.PutTopics, NAMES, CONFIGS, st.booleans(), st.booleans()),
    st.builds(ops.PutQueueData, TOPICS, QUEUE_DATA),
    st.builds(ops.RemoveQueueData, TOPICS, NAMES),
    st.builds(ops.RemoveBrokerTopics, NAMES),
    st.builds(ops.DropTopic, TOPICS),
    st.builds(ops.SetMapping, TOPICS, MAPPING, st.none() | NAMES),
    st.builds(ops.RemoveBrokerMappings, NAMES),
    st.builds(ops.RestoreHighWater, st.integers(0, 3000), st.integers(0, 300),
              st.integers(0, 100)),
    st.builds(ops.RestoreCluster, CLUSTERS, st.lists(NAMES, max_size=3).map(tuple),
              st.integers(0, 5)),
    st.builds(ops.RestoreAppliedDigest, NAMES, st.sampled_from((b"d1", b"d2"))),
    st.builds(ops.RestoreTopics, st.lists(QUEUE_DATA, max_size=2, unique_by=lambda q: q.broker_name)
              .map(tuple), st.integers(1, 4), st.lists(TOPICS, max_size=3).map(tuple)),
    st.builds(ops.NotifyMinBrokerIdChanged, ADDR_TABLE, st.none() | ADDRS, st.none() | ADDRS),
    st.builds(ops.InvalidateRoutes),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(RANDOM_OP, min_size=1, max_size=6), max_size=8),
       st.sampled_from((PROFILE_49, PROFILE_53)), st.booleans())
def test_random_op_sequences_leave_a_replica_equal_to_the_writer(batches, profile, acting):
    writer = RouteInfoManager(NamesrvConfig(support_acting_master=acting), profile)
    replica = Replica(writer)
    for batch in batches:
        writer.apply(RouteDelta(batch))
        assert replica.catch_up() == 1
        assert observable(replica.rim) == observable(writer)
    again = RouteInfoManager(writer.config, profile)   # the same stream, once more
    for batch in replica.stream:
        again.apply(RouteDelta(decode_batch(encode_batch(batch))))
    assert observable(again) == observable(writer)


# ------------------------------------------------------------------ what the policies write

class ReplicatedMachine(SnapshotMachine):
    """The route-snapshot state machine (registrations with zones, acting master, filter
    servers and static mappings; unregistrations; channel closes; expiries; write permission;
    topic deletes and registrations; supportActingMaster flips), a replica beside it."""

    @initialize()
    def setup(self):
        super().setup()
        self.replica = Replica(self.rim)

    @invariant()
    def the_replica_equals_the_writer(self):
        if not hasattr(self, "replica"):
            return
        self.replica.catch_up()
        assert observable(self.replica.rim) == observable(self.rim)


TestReplicated = ReplicatedMachine.TestCase
TestReplicated.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


class ReplicatedMachine49(ReplicatedMachine):
    profile = PROFILE_49


TestReplicated49 = ReplicatedMachine49.TestCase
TestReplicated49.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)


# ------------------------------------------------------------------ another process

CHILD = """
import hashlib, struct, sys
from rocketpy.namesrv import NamesrvConfig, RouteInfoManager, profile_for
from rocketpy.namesrv.delta import RouteDelta
from rocketpy.namesrv.opcodec import decode_batch
from test_namesrv_replica import observable
data = open(sys.argv[1], "rb").read()
rim = RouteInfoManager(NamesrvConfig(), profile_for(sys.argv[2]))
pos = 0
while pos < len(data):
    (size,) = struct.unpack_from(">I", data, pos)
    rim.apply(RouteDelta(decode_batch(data[pos + 4:pos + 4 + size])))
    pos += 4 + size
print(hashlib.blake2b(repr(observable(rim)).encode(), digest_size=16).hexdigest())
"""


def _many_groups_at_once(profile):
    """Eight groups of a master and a slave, each with topics of its own and two shared by
    all; every slave expires in one scan, so one batch changes eight groups."""
    writer = RouteInfoManager(NamesrvConfig(), profile)
    replica = Replica(writer)
    for g in range(8):
        topics = {t: TopicConfig(t, 4, 4, 6) for t in (f"G{g}-1", f"G{g}-2", "S1", "S2")}
        for bid in (0, 1):
            wrapper = TopicConfigWrapper(DataVersion(1, 1, 0), topics)
            writer.register_broker(Registration("C", f"10.0.{g}.{bid}:10911", f"group-{g}", bid,
                                                "ha", wrapper, None, 2 * g + bid + 1, 0))
    for g in range(8):
        writer.update_broker_info_update_timestamp("C", f"10.0.{g}.0:10911", 100_000)
    expired = writer.scan_not_active_broker(130_000)
    assert len(expired) == 8
    writer.unregister_brokers([request for request, _ in expired])
    return writer, replica


def test_a_replica_in_another_process_is_the_same():
    """The stream applied in two other interpreters with other string hash seeds (set orders
    differ there) gives the same tables, versions and answers: nothing the writer does
    depends on an order Python does not fix."""
    for profile in (PROFILE_49, PROFILE_53):
        writer, replica = _many_groups_at_once(profile)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "stream")
            with open(path, "wb") as f:
                for batch in replica.stream:
                    data = encode_batch(batch)
                    f.write(struct.pack(">I", len(data)) + data)
            here = Path(__file__).resolve().parent
            digests = {hashlib.blake2b(repr(observable(writer)).encode(), digest_size=16).hexdigest()}
            for seed in ("1", "2", "3"):
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, path, profile.name], capture_output=True,
                    text=True, timeout=300, cwd=here.parent,
                    env=dict(os.environ, PYTHONHASHSEED=seed,
                             PYTHONPATH=os.pathsep.join((str(here.parent), str(here)))))
                assert done.returncode == 0, done.stderr[-2000:]
                digests.add(done.stdout.strip())
        assert len(digests) == 1, (profile.name, digests)
