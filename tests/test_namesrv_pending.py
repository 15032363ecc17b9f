"""Big registration bodies decoded by a Pending (``rocketpy.namesrv.pending``): its work run on
another thread, as the transport's decode pool runs it, gives exactly the answers and route
tables of the synchronous path -- for every genuine capture replayed with every registration
body forced through a Pending, for big JSON and compressed bodies, for a topic-line bomb, a CRC
mismatch, a oneway registration and a bug inside the work.
"""
import threading

import pytest

import replay
from brokerbody import register_body
from fuzzharness import topic_line_bomb
from rocketpy.namesrv import Channel
from rocketpy.namesrv.pending import Pending
from rocketpy.namesrv.processor import registration
from rocketpy.remoting import RemotingCommand, bodies
from rocketpy.remoting.codes import ResponseCode
from test_fuzz_processor import _processor
from test_namesrv_replay import SC, WHOLE

CH = Channel(3, "127.0.0.1:40003")
TABLES = ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
          "filter_server_table", "topic_queue_mapping_info_table")


def on_a_thread(work):
    """``work()`` run on another thread (its exception, if any, raised here)."""
    box = {}

    def run():
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 -- re-raised on the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def finish_on_a_thread(pending):
    """What a pool and the transport do with a Pending: its work on another thread, then its
    ``finish`` here -- or its ``fail`` when the work raised."""
    try:
        result = on_a_thread(pending.work)
    except Exception as exc:
        return pending.fail(exc)
    return pending.finish(result)


class Offloading:
    """A processor as the transport drives it with a decode pool: ``offload=True``, the work
    of every Pending on another thread, its finish here."""

    def __init__(self, processor):
        self.processor = processor
        self.pending = 0

    def __getattr__(self, name):
        return getattr(self.processor, name)

    def process(self, request, channel, now_ms):
        answer = self.processor.process(request, channel, now_ms, offload=True)
        if isinstance(answer, Pending):
            self.pending += 1
            answer = finish_on_a_thread(answer)
        return answer


def tables(processor):
    rim = processor.route_info_manager
    return {name: getattr(rim, name) for name in TABLES}


@pytest.fixture
def every_body_offloaded(monkeypatch):
    monkeypatch.setattr(registration, "COMPRESSED_INLINE_MAX", 0)
    monkeypatch.setattr(registration, "PLAIN_INLINE_MAX", 0)


@pytest.mark.parametrize("name", sorted(set(SC) | set(WHOLE)))
def test_captures_replay_the_same_through_pending_work(name, tmp_path, every_body_offloaded):
    path = replay.PCAP_DIR / name
    config = WHOLE.get(name, {})
    sync = replay.build_processor(path, tmp_path / "sync", **config)
    expected = replay.replay_capture(path, tmp_path / "sync", processor=sync)
    offloading = Offloading(replay.build_processor(path, tmp_path / "offload", **config))
    got = replay.replay_capture(path, tmp_path / "offload", processor=offloading)
    assert (got.answered, got.silent, got.exact_frames) == \
        (expected.answered, expected.silent, expected.exact_frames)
    assert [(e.ts, d) for e, d in got.mismatches] == [(e.ts, d) for e, d in expected.mismatches]
    assert tables(offloading.processor) == tables(sync)
    registrations = [e for e in replay.replay_events(path)
                     if e.kind == "request" and e.request.code == 103 and e.request.body]
    assert (offloading.pending > 0) == bool(registrations)


def _register(body, compressed=False, crc=None, oneway=False):
    ext = {"brokerName": "broker-big", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0",
           "compressed": "true" if compressed else "false",
           "bodyCrc32": str(bodies.body_crc32(body) if crc is None else crc)}
    return RemotingCommand.request(103, ext, body, opaque=7, version=479, oneway=oneway)


def _query(counter):
    ext = {"brokerName": "broker-big", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "brokerId": "0"}
    body = bodies.DataVersion(counter=counter, timestamp=1, state_version=0).to_json()
    return RemotingCommand.request(322, ext, body, opaque=8, version=479)


class Pair:
    """Two processors fed the same requests: one synchronous, one through Pending work."""

    def __init__(self, tmp_path):
        (tmp_path / "sync").mkdir()
        (tmp_path / "offload").mkdir()
        self.sync_proc = _processor(tmp_path / "sync")
        self.async_proc = _processor(tmp_path / "offload")

    def both(self, request, now_ms=1000):
        """(synchronous answer, answer through the Pending, the Pending or None)."""
        answer = self.sync_proc.process(request, CH, now_ms)
        later = self.async_proc.process(request, CH, now_ms, offload=True)
        pending = later if isinstance(later, Pending) else None
        if pending is not None:
            later = finish_on_a_thread(pending)
        return answer, later, pending


@pytest.fixture
def pair(tmp_path):
    return Pair(tmp_path)


def _encoded(answer):
    return None if answer is None else answer.encode()


def test_big_bodies_go_through_pending_work_and_end_the_same(pair):
    topics = [f"Topic{i:05d}" for i in range(3000)]
    plain = register_body(topics, counter=1)
    packed = bodies.RegisterBrokerBody.from_json(register_body(topics, counter=2)).encode(
        compress=True, broker_version=479)
    assert len(plain) > registration.PLAIN_INLINE_MAX
    assert len(packed) > registration.COMPRESSED_INLINE_MAX
    for request in (_register(plain), _register(packed, compressed=True)):
        answer, later, pending = pair.both(request)
        assert pending is not None and answer.code == ResponseCode.SUCCESS
        assert _encoded(later) == _encoded(answer)
        assert tables(pair.async_proc) == tables(pair.sync_proc)
        assert len(pair.async_proc.route_info_manager.topic_queue_table) == 3000
    answer, later, pending = pair.both(_register(packed, compressed=True), now_ms=2000)
    assert pending is None, "an identical body is the cache's: no work at all"
    assert _encoded(later) == _encoded(answer)
    answer, later, pending = pair.both(_query(2))
    assert answer.ext_fields == {"changed": "false"} and _encoded(later) == _encoded(answer)
    assert tables(pair.async_proc) == tables(pair.sync_proc)


def test_small_bodies_stay_synchronous(pair):
    answer, later, pending = pair.both(_register(register_body(["A", "B"])))
    assert pending is None and later.encode() == answer.encode()


def test_bomb_and_bad_crc_get_the_synchronous_errors(pair):
    bomb = topic_line_bomb(200_000)
    big = register_body([f"T{i}" for i in range(3000)])
    for request in (_register(bomb, compressed=True), _register(big, crc=12345)):
        answer, later, pending = pair.both(request)
        assert pending is not None and answer.code == ResponseCode.SYSTEM_ERROR
        assert _encoded(later) == _encoded(answer)
    refused = pair.both(_register(bomb, compressed=True))[1]
    assert "Failed to decode RegisterBrokerBody" in refused.remark
    assert pair.async_proc.route_info_manager.broker_addr_table == {}


def test_oneway_registration_is_applied_without_answer(pair):
    answer, later, pending = pair.both(_register(register_body([f"T{i}" for i in range(3000)]),
                                                   oneway=True))
    assert pending is not None and answer is None and later is None
    assert "broker-big" in pair.async_proc.route_info_manager.broker_addr_table
    assert tables(pair.async_proc) == tables(pair.sync_proc)


def test_a_bug_in_the_work_is_answered_like_a_bug_in_a_handler(pair, monkeypatch, caplog):
    def boom(body, compressed, version, *checks):
        raise RuntimeError("boom")

    monkeypatch.setattr(registration, "read_body", boom)
    packed = bodies.RegisterBrokerBody.from_json(register_body([f"T{i}" for i in range(3000)])) \
        .encode(compress=True)
    answer, later, pending = pair.both(_register(packed, compressed=True))
    assert pending is not None
    assert answer.code == ResponseCode.SYSTEM_ERROR and "RuntimeError: boom" in answer.remark
    assert _encoded(later) == _encoded(answer)
    logged = [r for r in caplog.records if r.exc_info and "boom" in str(r.exc_info[1])]
    assert len(logged) == 2   # once by each path, with the traceback


def test_pending_then_and_run():
    steps = []
    pending = Pending(lambda: steps.append("work") or 2, lambda x: steps.append("finish") or x * 10)
    assert pending.then(lambda x: x + 1).run() == 21
    assert steps == ["work", "finish"]
