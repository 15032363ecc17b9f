"""Route snapshots (warm restart): the image of the route tables and its file format.

* Tables filled from a snapshot answer every read request byte for byte as the tables it was
  taken from, at every point of every genuine capture's registrations (and a snapshot taken
  again from them is the same bytes).
* The reader trusts nothing: a torn, flipped or truncated file, another release profile's, one
  too old, one over the route bounds, and files whose framing is valid but whose content is not
  (a stranger re-signing what it changed) are refused with :exc:`SnapshotRefused`, never
  another exception, and never used in part.
* Cost is counted: a reader step parses one record, a capture step copies a bounded number of
  topics, a restore delta adds a bounded number of pairs, and the step counts grow linearly.
"""
import json
import random
import struct
import tempfile
import zlib
import hashlib
from pathlib import Path

import pytest

from rocketpy.namesrv import Channel, NamesrvConfig, RouteInfoManager
from rocketpy.namesrv.model import (DataVersion, Registration, TopicConfig, TopicConfigWrapper,
                                    UnRegisterBrokerRequest)
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.namesrv.routefile import (END, HEAD, MAX_RECORD, MainReader, ReadLimits,
                                        RoutesReader, RoutesRef, SnapshotRefused, encode_main,
                                        encode_routes, part_length, routes_file_name)
from rocketpy.namesrv.routeimage import (CAPTURE_STEP, RESTORE_SLICE_PAIRS, RoutesCapture,
                                         TablesChanged, capture_main, capture_routes,
                                         delta_work, restore_deltas)
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.bodies import TopicQueueMappingInfo
from rocketpy.service.routesnapshot import read_bounded

LIMITS = ReadLimits(10_000_000, 10_000_000, 10_000, 10_000)
NOW = 1_700_000_000_000


def encode(rim, profile="5.3", taken=NOW, host=lambda cid: f"10.0.0.{cid % 250}"):
    """(main bytes, routes bytes) of ``rim``."""
    routes = capture_routes(rim, profile)
    data, digest = encode_routes(routes)
    ref = RoutesRef(routes_file_name("routes.snap", digest), len(data), digest)
    return encode_main(capture_main(rim, profile, taken, host), ref), data


def read(main, routes, profile="5.3", now=NOW, limits=LIMITS, v5=True):
    """The images of a snapshot, as the service reads them (main part, then routes part)."""
    reader = MainReader(main, limits, profile, now, 120_000, v5)
    while not reader.step():
        pass
    routes_reader = RoutesReader(routes, limits, profile, reader.routes)
    while not routes_reader.step():
        pass
    return reader.image, routes_reader.image


def restore(main_image, routes_image, profile=PROFILE_53, shift=0):
    rim = RouteInfoManager(NamesrvConfig(), profile)
    for delta in restore_deltas(main_image, routes_image, shift):
        rim.apply(delta)
    return rim


def tables(profile=PROFILE_53):
    """Tables with a bit of everything: two clusters, a master and its slave, shared and mixed
    layouts, a write-wiped broker, filter servers, an acting-master group in a zone, static
    topic mappings (5.x), a topic deleted and made again."""
    rim = RouteInfoManager(NamesrvConfig(), profile)
    info = TopicQueueMappingInfo(bname="broker-a", curr_id_map={0: 3, 1: 4}, dirty=True, epoch=9,
                                 scope="sc", topic="Mapped", total_queues=2)

    def register(cluster, addr, name, bid, topics, channel, now, **kw):
        mapping = kw.pop("mapping", {})
        table = {t: TopicConfig(t, 8, 4 if t.endswith("w") else 8, 6) for t in topics}
        return rim.register_broker(Registration(cluster, addr, name, bid, addr + "-ha",
                                   TopicConfigWrapper(DataVersion(channel, now, 2), table, mapping),
                                   kw.pop("filters", None), channel, now, **kw))
    five = profile is not PROFILE_49
    register("C1", "10.0.0.1:10911", "broker-a", 0, [f"T{i}" for i in range(40)] + ["Mapped"],
             1, NOW - 5000, filters=["fs-1", "fs-2"],
             mapping={"Mapped": info} if five else {})
    register("C1", "10.0.0.2:10911", "broker-a", 1, [f"T{i}" for i in range(40)], 2, NOW - 4000)
    register("C1", "10.0.0.3:10911", "broker-b", 0, [f"T{i}" for i in range(20, 60)] + ["Xw"],
             3, NOW - 3000, **({"zone_name": "z1", "enable_acting_master": True,
                                "timeout_millis": 30_000} if five else {}))
    register("C2", "10.0.0.4:10911", "broker-c", 0, ["C2-only", "T5"], 4, NOW - 2000)
    rim.wipe_write_perm_of_broker("broker-c")
    rim.delete_topic("T7")
    register("C1", "10.0.0.1:10911", "broker-a", 0, ["T7", "T8"], 1, NOW - 1000)
    return rim


READ_CODES = ((206, None), (106, None), (304, None), (311, None), (312, None), (313, None))


def read_answers(processor, now=NOW):
    """Every read request's answer, as frame bytes: routes of every topic (two client
    versions) and of an unknown one, every topic list, the cluster info, each cluster's topics
    and each group's members."""
    rim = processor.route_info_manager
    asks = [(105, {"topic": t}, v) for t in [*rim.topic_queue_table, "NoSuchTopic"]
            for v in (317, 479)]
    asks += [(code, ext, 479) for code, ext in READ_CODES]
    asks += [(224, {"cluster": c}, 479) for c in [*rim.cluster_addr_table, "NoCluster"]]
    asks += [(901, {"brokerName": n, "clusterName": "C1"}, 479) for n in rim.broker_addr_table]
    out = []
    for i, (code, ext, version) in enumerate(asks):
        answer = processor.process(RemotingCommand.request(code, ext, opaque=i, version=version),
                                   Channel(99_999, "127.0.0.1:1"), now)
        out.append((code, ext, version, None if answer is None else answer.encode()))
    return out


def processor_of(rim, kv=None):
    from rocketpy.namesrv import KVConfigManager
    from rocketpy.namesrv.processor import DefaultRequestProcessor
    return DefaultRequestProcessor(rim, kv or KVConfigManager(None), profile=rim.policies)


# ------------------------------------------------------------------ faithful

@pytest.mark.parametrize("profile", [PROFILE_49, PROFILE_50, PROFILE_53], ids=lambda p: p.name)
def test_restored_tables_answer_byte_for_byte(profile):
    rim = tables(profile)
    main, routes = encode(rim, profile.name)
    restored = restore(*read(main, routes, profile.name, v5=profile is not PROFILE_49), profile)
    assert read_answers(processor_of(restored)) == read_answers(processor_of(rim))
    assert encode(restored, profile.name) == (main, routes)   # the same bytes, taken again
    assert restored.queue_data_count == rim.queue_data_count
    assert restored.mapping_count == rim.mapping_count
    assert set(restored.provisional) == set(rim.broker_live_table)
    for key, live in rim.broker_live_table.items():
        back = restored.broker_live_table[key]
        assert (back.last_update_ms, back.heartbeat_timeout_ms, back.data_version,
                back.ha_server_addr, back.broker_name, back.channel_id) == (
            live.last_update_ms, live.heartbeat_timeout_ms, live.data_version,
            live.ha_server_addr, live.broker_name, None)
        assert restored.provisional[key] == f"10.0.0.{live.channel_id % 250}"
    assert restored.filter_server_table == rim.filter_server_table
    assert restored.high_water_marks() == rim.high_water_marks()


def _fingerprint(rim):
    from rocketpy.namesrv.routeimage import routes_mark
    return (routes_mark(rim), tuple((k, v.last_update_ms, v.data_version, v.ha_server_addr)
                                    for k, v in rim.broker_live_table.items()),
            tuple(rim.broker_addr_table.items()), tuple(map(tuple, rim.cluster_addr_table.values())))


def test_every_captured_registration_survives_a_restart_byte_for_byte():
    """Each genuine capture (4.9.8, 5.0.0, 5.3.3) replayed; whenever the tables changed, they are
    snapshotted, read back, restored into a fresh NameServer, and every read answer compared."""
    from replay import PCAP_DIR, build_processor, capture_profile, replay_steps
    from rocketpy.namesrv import profile_for
    from rocketpy.namesrv.processor import DefaultRequestProcessor
    checked = captures = 0
    for capture in sorted(PCAP_DIR.glob("*.pcap")):
        with tempfile.TemporaryDirectory() as tmp:
            processor = build_processor(capture, tmp)
            profile = profile_for(capture_profile(capture))
            last = None
            for now in replay_steps(capture, processor):
                rim = processor.route_info_manager
                if not rim.broker_live_table or _fingerprint(rim) == last:
                    continue
                last = _fingerprint(rim)
                main, routes = encode(rim, profile.name, now)
                restored = restore(*read(main, routes, profile.name, now,
                                         v5=profile is not PROFILE_49), profile)
                again = DefaultRequestProcessor(restored, processor.kv_config_manager,
                                                profile=profile,
                                                configuration=processor.configuration)
                assert read_answers(again, now) == read_answers(processor, now), capture.name
                checked += 1
            captures += checked > 0
    assert captures >= 40 and checked >= 300, (captures, checked)


def test_a_restored_mapping_goes_with_the_group_that_registered_it():
    """Group a registers a static mapping naming group b: it is kept as long as a is (the
    route state drops a group's mappings with its last member). The snapshot keeps who
    registered it, so after a restart a's leaving still takes it along (format 1 restored it
    as b's: it outlived a)."""
    rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
    info = TopicQueueMappingInfo(bname="b", curr_id_map={0: 1}, epoch=3, topic="M", total_queues=1)
    for name, addr, mapping in (("a", "10.0.0.1:10911", {"M": info}), ("b", "10.0.0.2:10911", {})):
        rim.register_broker(Registration("C", addr, name, 0, "ha", TopicConfigWrapper(
            DataVersion(1, NOW, 0), {t: TopicConfig(t) for t in ("T1", "T2")}, mapping), None,
            1, NOW))
    restored = restore(*read(*encode(rim)))
    assert restored.mapping_owner("M", "b") == rim.mapping_owner("M", "b") == "a"
    for tables in (rim, restored):
        tables.unregister_brokers([UnRegisterBrokerRequest("C", "10.0.0.1:10911", "a", 0)])
        assert "M" not in tables.topic_queue_mapping_info_table and tables.mapping_count == 0
        assert tables.pickup_topic_route_data("M") is None


def test_times_move_by_the_shift():
    rim = tables()
    main, routes = read(*encode(rim))
    restored = restore(main, routes, shift=-7_000)
    for key, live in rim.broker_live_table.items():
        assert restored.broker_live_table[key].last_update_ms == live.last_update_ms - 7_000
        assert restored.expiry._entries[key][0] == live.last_update_ms - 7_000 + live.heartbeat_timeout_ms


def test_a_peer_stream_is_cut_into_its_two_parts():
    main, routes = encode(tables())
    stream = main + routes
    assert part_length(stream) == len(main)
    with pytest.raises(SnapshotRefused):
        part_length(main[:-3])


# ------------------------------------------------------------------ refused

def _resign(part, mutate):
    """``part`` with each record's payload passed through ``mutate(kind, payload) -> payload``
    and its framing made valid again (CRCs, END's count, offset and digest): what a stranger who
    knows the format can write."""
    out, offset, records = [part[:16]], 16, 0
    while True:
        length, kind = struct.unpack_from(">IB", part, offset)
        payload = part[offset + 5:offset + 5 + length]
        offset += 5 + length + 4
        if kind == END:
            break
        payload = mutate(kind, payload)
        header = struct.pack(">IB", len(payload), kind)
        out += [header, payload, struct.pack(">I", zlib.crc32(payload, zlib.crc32(header)))]
        records += 1
    body = b"".join(out)
    end = json.dumps({"records": records + 1, "bytes": len(body),
                      "blake2b": hashlib.blake2b(body, digest_size=32).hexdigest()}).encode()
    header = struct.pack(">IB", len(end), END)
    return body + header + end + struct.pack(">I", zlib.crc32(end, zlib.crc32(header)))


def _ref(routes):
    digest = hashlib.blake2b(routes[:part_length(routes) - _end_length(routes)], digest_size=32)
    return RoutesRef("r", len(routes), digest.hexdigest())


def _end_length(part):
    offset = 16
    while True:
        length, kind = struct.unpack_from(">IB", part, offset)
        if kind == END:
            return 5 + length + 4
        offset += 5 + length + 4


def _refused(main, routes, **kw):
    with pytest.raises(SnapshotRefused) as caught:
        read(main, routes, **kw)
    return str(caught.value)


def test_every_truncation_and_every_flipped_byte_is_refused():
    main, routes = encode(tables())
    for is_main, part in ((True, main), (False, routes)):
        for cut in range(len(part)):
            assert "torn" in (_refused(part[:cut], routes) if is_main else
                              _refused(main, part[:cut]))
        for i in range(len(part)):
            bad = bytearray(part)
            bad[i] ^= 0x20
            _refused(bytes(bad), routes) if is_main else _refused(main, bytes(bad))
    assert "torn" in _refused(main, routes + b"\0")
    assert "torn" in _refused(main + b"\0", routes)


def test_a_routes_part_of_another_snapshot_is_refused():
    main, _ = encode(tables())
    other = tables()
    other.delete_topic("T1")
    _, routes = encode(other)
    assert "its main part" in _refused(main, routes)


def test_another_release_profile_is_refused():
    main, routes = encode(tables(PROFILE_50), "5.0")
    assert "another release profile" in _refused(main, routes, profile="5.3")
    assert "another release profile" in _refused(main, routes, profile="4.9", v5=False)


def test_a_snapshot_older_than_brokerChannelExpiredTime_is_refused():
    main, routes = encode(tables())
    read(main, routes, now=NOW + 120_000)
    assert "too old" in _refused(main, routes, now=NOW + 120_001)
    assert "future" in _refused(main, routes, now=NOW - 120_001)


def test_over_the_bounds_is_refused_at_the_head_before_anything_else_is_read():
    main, routes = encode(tables())
    head = MainReader(main, LIMITS, "5.3", NOW, 120_000, True)
    while not head.step():
        pass
    for limits, part, what in (
            (ReadLimits(10, 10_000_000, 10_000, 10_000), "routes", "namesrvMaxTopics"),
            (ReadLimits(10_000, 50, 10_000, 10_000), "routes", "namesrvMaxTopicBrokerPairs"),
            (ReadLimits(10_000, 10_000, 2, 10_000), "main", "namesrvMaxBrokers"),
            (ReadLimits(10_000, 10_000, 10, 1), "main", "namesrvMaxFilterServers")):
        reader = (MainReader(main, limits, "5.3", NOW, 120_000, True) if part == "main"
                  else RoutesReader(routes, limits, "5.3", head.routes))
        with pytest.raises(SnapshotRefused, match=f"over the bounds.*{what}"):
            reader.step()
        assert reader._records == 1   # the HEAD only


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path):
    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.truncate(10 * 1024 * 1024 * 1024)   # sparse: a read would take minutes
    with pytest.raises(SnapshotRefused, match="over the bounds"):
        read_bounded(str(path), 64 * 1024 * 1024)
    assert read_bounded(str(tmp_path / "absent"), 10) is None
    assert ReadLimits(0, 10, 10, 10).max_bytes(2) is None   # a bound off: none here either
    assert ReadLimits(10, 10, 10, 10).max_bytes(2) == ReadLimits.BASE_BYTES + 512 * 30


def test_a_record_over_the_record_bound_is_refused_before_it_is_read():
    main, routes = encode(tables())
    header = struct.pack(">IB", MAX_RECORD + 1, HEAD)
    bad = main[:16] + header + b"{}" * 8
    assert f"over {MAX_RECORD}" in _refused(bad, routes)


MUTATIONS = (None, True, -1, 0, 1, 2 ** 31, -(2 ** 63) - 1, 2 ** 64, "", "x", "\udc80", [], {},
             [None], [[[[]]]], {"a": 1}, "[" * 10_000)


def _mutate_json(rng, value, depth=0):
    """``value`` (parsed JSON) with one leaf or branch replaced."""
    if isinstance(value, list) and value and (depth < 3 or rng.random() < 0.5) and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return value[:i] + [_mutate_json(rng, value[i], depth + 1)] + value[i + 1:]
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        return {**value, key: _mutate_json(rng, value[key], depth + 1)}
    choice = rng.choice(MUTATIONS + ("drop", "dup"))
    if choice == "drop" and isinstance(value, list) and value:
        return value[1:]
    if choice == "dup" and isinstance(value, list) and value:
        return value + value[:1]
    return choice


def test_valid_framing_around_invalid_content_is_refused_or_loads_whole():
    """A stranger re-signing what it changed: each of 1,500 mutated snapshots is refused with
    SnapshotRefused, or reads whole and then restores without an error into consistent tables."""
    rng = random.Random(34)
    main, routes = encode(tables())
    loaded = refused = 0
    for case in range(1500):
        target = rng.randrange(2)
        hit = rng.randrange(4)   # each part has four records before its END

        def mutate(kind, payload, seen=[0]):
            seen[0] += 1
            if seen[0] - 1 != hit:
                return payload
            text = payload.decode("ascii")
            if rng.random() < 0.1:
                return json.dumps(json.loads(text) + [1] if text.startswith("[") else 1).encode()
            return json.dumps(_mutate_json(rng, json.loads(text))).encode()
        bad_main, bad_routes = main, routes
        if target == 0:
            bad_main = _resign(main, mutate)
        else:
            bad_routes = _resign(routes, mutate)
            bad_main = _resign(main, lambda kind, p: p if kind != HEAD else json.dumps(
                {**json.loads(p), "routes": {"file": "r", "bytes": len(bad_routes),
                                             "blake2b": _ref(bad_routes).digest}}).encode())
        try:
            images = read(bad_main, bad_routes)
        except SnapshotRefused:
            refused += 1
            continue
        restored = restore(*images)
        assert restored.queue_data_count == sum(len(s) for s in restored.topic_queue_table.values())
        assert set(restored.provisional) == set(restored.broker_live_table)
        loaded += 1
    assert refused > 700 and loaded > 100, (refused, loaded)


# ------------------------------------------------------------------ cost, counted

def big_tables(topics, brokers=4):
    rim = RouteInfoManager(NamesrvConfig())
    per = topics // brokers
    for b in range(brokers):
        table = {f"T{b}-{i}": TopicConfig(f"T{b}-{i}", 8, 8, 6) for i in range(per)}
        rim.register_broker(Registration("C", f"10.0.0.{b}:10911", f"b{b}", 0, None,
                            TopicConfigWrapper(DataVersion(1, 1, 0), table), None,
                            b + 1, NOW))
    return rim


def _reader_steps(main, routes):
    reader = MainReader(main, LIMITS, "5.3", NOW, 120_000, True)
    steps, largest = 0, 0
    for part in (reader, None):
        part = part or RoutesReader(routes, LIMITS, "5.3", reader.routes)
        done = False
        while not done:
            done = part.step()
            steps += 1
            largest = max(largest, part.work)
    return steps, largest


def test_work_per_step_is_bounded_and_steps_grow_linearly():
    counts = {}
    for topics in (40_000, 80_000, 160_000):
        rim = big_tables(topics)
        capture = RoutesCapture(rim, "5.3", step_topics=CAPTURE_STEP)
        image = None
        capture_steps = 0
        while image is None:
            image = capture.step()
            capture_steps += 1
        assert capture.largest_step <= CAPTURE_STEP
        data, digest = encode_routes(image)
        main = encode_main(capture_main(rim, "5.3", NOW, lambda cid: None),
                           RoutesRef("r", len(data), digest))
        steps, largest = _reader_steps(main, data)
        assert largest <= 2 * 256 * 1024   # a record of about TARGET_RECORD
        main_image, routes_image = read(main, data)
        deltas = list(restore_deltas(main_image, routes_image))
        assert max(map(delta_work, deltas)) <= RESTORE_SLICE_PAIRS
        counts[topics] = (capture_steps, steps, len(deltas))
    (a, b, c) = (counts[40_000], counts[80_000], counts[160_000])
    for i in range(3):   # linear (a fixed part plus one per so many topics): doubling the
        # tables doubles what the steps grow by, within a step of rounding
        assert b[i] > a[i] and abs((c[i] - b[i]) - 2 * (b[i] - a[i])) <= 1, counts


def test_a_capture_is_abandoned_when_the_tables_change_under_it():
    rim = big_tables(8_000)
    capture = RoutesCapture(rim, "5.3", step_topics=1000)
    assert capture.step() is None
    rim.delete_topic("T0-5")
    with pytest.raises(TablesChanged):
        capture.step()
    capture = RoutesCapture(rim, "5.3", step_topics=1000)
    assert capture.step() is None
    rim.shapes.rebuilt()   # the memory release rebuilt the dict under the walk
    with pytest.raises(TablesChanged):
        capture.step()
