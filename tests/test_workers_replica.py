"""A worker's replica (rocketpy.namesrv.replica) answers every read as the route writer does.

Every genuine capture is replayed against a writer processor whose journals feed records (as
bytes, through the op codec); after each event the records are applied to a replica, and every
read request of the capture is answered by a processor over the replica and by the writer's:
the frames must be equal, byte for byte. A second replica starts half way from an image (the
warm restart's format, as a new worker gets it) and follows the records from there. And the
handlers' own ``writes`` declaration is checked against what they do: a request whose handler
does not declare it changes no table, no KV entry and no setting, in every capture."""
import pytest

import replay
from rocketpy.namesrv import Channel, KVConfigManager, RouteInfoManager
from rocketpy.namesrv.config import Configuration
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.replica import Feed, Replica, ReplicaError, decode_image, encode_image
from rocketpy.namesrv.routefile import ReadLimits
from rocketpy.namesrv.routeimage import capture_main, capture_routes
from rocketpy.remoting.codes import RequestCode
from rocketpy.service.routesnapshot import RouteSnapshotter

#: the captures with NameServer requests (the long runs take minutes, replayed elsewhere)
CAPTURES = [p for p in sorted(replay.PCAP_DIR.glob("*.pcap"))
            if "long-run" not in p.name and replay.replay_events(p)]


def _writer(path, tmp_path):
    processor = replay.build_processor(path, tmp_path)
    records = []
    Feed(lambda kind, payload, visible: records.append((kind, bytes(payload), visible))).attach(
        processor.route_info_manager, processor.kv_config_manager, processor.configuration)
    return processor, records


def _replica(writer, path, tmp_path):
    """A replica built as a worker builds one: the same settings, empty tables, a KV table in
    memory, no notifier."""
    policies = writer.policies
    source = writer.configuration
    configuration = Configuration.from_properties(
        dict(source.all_configs), policies.config, None)
    rim = RouteInfoManager(configuration.namesrv_config, policies)
    kv = KVConfigManager(str(tmp_path / "replica-kv.json"))
    processor = DefaultRequestProcessor(rim, kv, profile=policies, configuration=configuration)
    return Replica(rim, kv, configuration), processor


def _image(writer):
    rim = writer.route_info_manager
    profile = writer.policies.name
    main = capture_main(rim, profile, 0, lambda channel_id: "127.0.0.1")
    return encode_image(dict(writer.configuration.items()), writer.kv_config_manager.snapshot(),
                        RouteSnapshotter.encode(main, capture_routes(rim, profile)))


def _restore(replica, processor, image):
    replica.restore(image, ReadLimits.from_bounds(processor.route_bounds),
                    processor.policies.name,
                    processor.policies.routes.live_key("", "")[0] is not None)


def _answer(processor, request):
    answer = processor.process(request, Channel(999, "127.0.0.1:1"), 10 ** 13)
    return None if answer is None else answer.encode()


def _replayed(writer, path):
    """``(reads, steps)``: the capture's distinct read requests, and a generator that replays
    its events into ``writer`` one by one, yielding each event's index after it."""
    role = replay.NamesrvRole(writer)
    events = replay.replay_events(path)
    reads = {}
    for event in events:
        if event.kind == "request" and event.request.code not in writer.writes:
            reads.setdefault((event.request.code, event.request.encode()), event.request)

    def steps():
        for index, event in enumerate(events):
            now_ms = int(event.ts * 1000)
            role.tick(now_ms)
            convo = event.conversation
            channel = Channel(convo.index, f"{convo.client[0]}:{convo.client[1]}")
            if event.kind == "close":
                role.close(channel, now_ms)
            else:
                role.process(event.request, channel, now_ms)
            yield index
    return reads, steps(), len(events)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_a_replica_answers_every_read_as_the_writer(path, tmp_path):
    writer, records = _writer(path, tmp_path)
    reads, steps, count = _replayed(writer, path)
    replica, replica_processor = _replica(writer, path, tmp_path / "a")
    late = late_processor = None
    applied = compared = 0
    for index in steps:
        for kind, payload, _visible in records[applied:]:
            replica.apply(kind, payload)
            if late is not None:
                late.apply(kind, payload)
        applied = len(records)
        if index == count // 2:   # a worker starting now: the image, then the records
            late, late_processor = _replica(writer, path, tmp_path / "b")
            _restore(late, late_processor, _image(writer))
        for request in reads.values():
            expected = _answer(writer, request)
            assert _answer(replica_processor, request) == expected, (index, request.code)
            if late is not None:
                assert _answer(late_processor, request) == expected, (index, request.code)
            compared += 1
    assert compared or not reads


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_a_replica_that_lacks_only_records_not_visible_answers_every_read_as_the_writer(
        path, tmp_path):
    """What lets a write's answer wait only for the last *visible* record
    (``Replicator.sequence``): a replica that has applied the stream up to it, and not the
    records after it (a heartbeat's or an unchanged re-registration's new timestamps), answers
    every read of the capture as the writer does, after every request."""
    writer, records = _writer(path, tmp_path)
    reads, steps, count = _replayed(writer, path)
    lagging, lagging_processor = _replica(writer, path, tmp_path / "a")
    applied = seen = last_visible = compared = 0
    for _index in steps:
        for i in range(seen, len(records)):
            if records[i][2]:
                last_visible = i + 1
        seen = len(records)
        for kind, payload, _visible in records[applied:last_visible]:
            lagging.apply(kind, payload)
        applied = last_visible
        for request in reads.values():
            assert _answer(lagging_processor, request) == _answer(writer, request), request.code
            compared += 1
    assert compared or not reads


def test_only_a_change_a_request_reads_back_is_visible(tmp_path):
    """A re-registration that changes nothing but the live entry's timestamps, and a
    heartbeat's refresh, move no read version; a new HA address, a departure and a new topic
    do."""
    from rocketpy.namesrv.delta import PutLive, RefreshLive, RemoveLive, RouteDelta
    from rocketpy.namesrv.model import DataVersion
    rim = RouteInfoManager()
    records = []
    Feed(lambda kind, payload, visible: records.append(visible)).attach(
        rim, KVConfigManager(str(tmp_path / "kv.json")), Configuration.from_properties({}))
    key = ("c", "127.0.0.1:10911")

    def live(ts, ha="127.0.0.1:10912"):
        return PutLive(key, ts, 120_000, DataVersion(1, 5), 7, ha, "b")
    for op in (live(1), live(2), RefreshLive(key, 3), live(4, ha="127.0.0.1:10999"),
               RemoveLive(key)):
        rim.apply(RouteDelta((op,)))
    assert records == [True, False, False, True, True]


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_a_request_not_declared_writes_changes_nothing(path, tmp_path):
    """The declaration the workers forward by (``responder(writes=True)``) is what the
    handlers do: every request of the capture that is not declared is answered with no record
    of the writer's journals (route ops, KV changes, settings)."""
    writer, records = _writer(path, tmp_path)
    role = replay.NamesrvRole(writer)
    reads = writes = 0
    for event in replay.replay_events(path):
        now_ms = int(event.ts * 1000)
        convo = event.conversation
        channel = Channel(convo.index, f"{convo.client[0]}:{convo.client[1]}")
        if event.kind == "close":
            role.close(channel, now_ms)
            continue
        before = len(records)
        writer.process(event.request, channel, now_ms)   # (the queue drained after)
        if event.request.code in writer.writes:
            writes += 1
        else:
            reads += 1
            assert len(records) == before, (event.request.code, records[before:])
        role._drain()
    assert reads + writes


def test_the_declared_codes_are_the_state_changing_ones():
    """The set is derived from the handlers; it names what changes routes, liveness, KV and
    settings, and nothing a client reads."""
    processor = DefaultRequestProcessor(RouteInfoManager(), KVConfigManager("/nonexistent"))
    code = RequestCode
    assert processor.writes == {int(c) for c in (
        code.REGISTER_BROKER, code.UNREGISTER_BROKER, code.QUERY_DATA_VERSION,
        code.BROKER_HEARTBEAT, code.PUT_KV_CONFIG, code.DELETE_KV_CONFIG,
        code.WIPE_WRITE_PERM_OF_BROKER, code.ADD_WRITE_PERM_OF_BROKER,
        code.DELETE_TOPIC_IN_NAMESRV, code.REGISTER_TOPIC_IN_NAMESRV,
        code.UPDATE_NAMESRV_CONFIG)}
    assert int(code.GET_ROUTEINFO_BY_TOPIC) not in processor.writes


def test_an_image_keeps_the_kv_table_order_and_high_water_marks(tmp_path):
    """GET_KVLIST_BY_NAMESPACE answers in Java HashMap order, which the largest size a
    namespace reached fixes: a replica from an image keeps it after deletes."""
    writer_kv = KVConfigManager(str(tmp_path / "w.json"))
    for i in range(100):
        writer_kv.put_kv_config("NS", f"k{i}", f"v{i}")
    for i in range(20, 100):   # 20 left: a HashMap of 32 buckets put afresh, 256 here
        writer_kv.delete_kv_config("NS", f"k{i}")
    props, snapshot, stream = decode_image(encode_image({"a": "1"}, writer_kv.snapshot(), b"R"))
    assert (props, stream) == ({"a": "1"}, b"R")
    replica_kv = KVConfigManager(str(tmp_path / "r.json"))
    replica_kv.restore(snapshot)
    assert replica_kv.get_kv_list_by_namespace("NS") == writer_kv.get_kv_list_by_namespace("NS")
    fresh = KVConfigManager(str(tmp_path / "f.json"))   # the same entries, put afresh
    for key, value in writer_kv.config_table["NS"].items():
        fresh.put_kv_config("NS", key, value)
    assert fresh.get_kv_list_by_namespace("NS") != writer_kv.get_kv_list_by_namespace("NS")


@pytest.mark.parametrize("kind, payload", [
    ("routes", b"not pickled ops"), ("kv", b"[1, 2]"), ("kv", b"{"), ("kv", b'["ns"]'),
    ("config", b'{"a": 1}'), ("config", b"[]"), ("nonsense", b"")])
def test_a_record_that_does_not_parse_is_one_error(kind, payload, tmp_path):
    rim = RouteInfoManager()
    replica = Replica(rim, KVConfigManager(str(tmp_path / "kv.json")),
                      Configuration(rim.config, profile=as_policies(None)))
    with pytest.raises(ReplicaError):
        replica.apply(kind, payload)
