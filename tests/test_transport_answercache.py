"""Transport: reused encoded answers (AnswerCache) are byte-for-byte the answers computed afresh.

Unit tests on hand-made frames (JSON and ROCKETMQ headers both ways, stamps, guards), then the
strong check: every genuine capture's request stream through the whole server stack twice, with
and without the cache, and the two byte streams of answers must be identical; plus a Hypothesis
run of registrations, unregistrations, KV and config changes interleaved with route queries.
"""
from hypothesis import given, settings, strategies as st
from twisted.internet import task
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

import replay
from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.service.tap import Options, makeService
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.namesrv.replies import ReusableResponse
from rocketpy.transport.answercache import AnswerCache
from brokerbody import register_body


class Counter:
    """Processor answering with a body that counts how often it really ran; its route answers
    (105) name the one "snapshot" version ``state``."""

    def __init__(self, reply_serialize_type=None):
        self.calls = 0
        self.state = 0
        self.reply_serialize_type = reply_serialize_type

    def process(self, request, channel, now_ms):
        self.calls += 1
        response = request.create_response(
            0, remark="r", ext_fields={"state": str(self.state)}, body=b"body-%d" % self.state,
            serialize_type=self.reply_serialize_type)
        if request.code != 105:
            return response
        topic = request.ext_fields["topic"]
        return ReusableResponse(reuse=(topic, self.state), **{
            name: getattr(response, name) for name in response.__dataclass_fields__})

    def version_of(self, topic):
        return self.state


def _stack(processor, cache=True):
    clock = task.Clock()
    factory = RemotingServerFactory(
        processor, None, clock=clock, tls_mode=TlsMode.DISABLED,
        answer_cache=AnswerCache(processor.version_of) if cache else None)
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport, factory


def _answers(transport):
    frames, rest = split_frames(transport.value())
    assert rest == b""
    transport.clear()
    return [decode_frame(f) for f in frames]


def _req(opaque, code=105, serialize_type=0, oneway=False, ext=None):
    return RemotingCommand.request(code, ext or {"topic": "T"}, opaque=opaque, version=401,
                                   serialize_type=serialize_type, oneway=oneway).encode()


class AnswerCacheTests(SynchronousTestCase):
    def _check(self, request_type, reply_type):
        proc = Counter(reply_type)
        proto, t, factory = _stack(proc)
        for opaque in (1, 22, 333, 4444, -5, 2 ** 31 - 1, 0):
            proto.dataReceived(_req(opaque, serialize_type=request_type))
            [answer] = _answers(t)
            self.assertEqual(answer.opaque, opaque)
            self.assertTrue(answer.is_response)
            self.assertEqual(answer.body, b"body-0")
            self.assertEqual(answer.serialize_type, request_type if reply_type is None else reply_type)
        self.assertEqual(proc.calls, 1)
        self.assertEqual(factory.answer_cache.hits, 6)

    def test_json_request_json_answer(self):
        self._check(0, 0)

    def test_binary_request_json_answer(self):
        self._check(1, 0)

    def test_binary_request_binary_answer(self):
        self._check(1, 1)

    def test_json_request_binary_answer(self):
        self._check(0, 1)

    def test_hit_equals_fresh_encoding(self):
        for request_type in (0, 1):
            cached, t1, _ = _stack(Counter())
            fresh, t2, _ = _stack(Counter(), cache=False)
            data = b"".join(_req(op, serialize_type=request_type) for op in range(1, 300, 7))
            cached.dataReceived(data)
            fresh.dataReceived(data)
            self.assertEqual(t1.value(), t2.value())

    def test_stamp_change_recomputes(self):
        proc = Counter()
        proto, t, _ = _stack(proc)
        proto.dataReceived(_req(1))
        proc.state = 1
        proto.dataReceived(_req(2))
        proto.dataReceived(_req(3))
        self.assertEqual([a.body for a in _answers(t)], [b"body-0", b"body-1", b"body-1"])
        self.assertEqual(proc.calls, 2)

    def test_a_binary_header_longer_than_its_frame_is_a_decode_error(self):
        """The cache's key is cut only from a header that is all in the frame: one whose
        prefix claims more made the opaque's read raise (struct.error) out of dataReceived."""
        proto, t, _ = _stack(Counter())
        frame = (4).to_bytes(4, "big") + (1 << 24 | 100).to_bytes(4, "big")
        proto.dataReceived(frame)
        self.assertTrue(proto.closing)
        self.assertEqual(t.value(), b"")
        self.flushLoggedErrors()

    def test_uncacheable_codes_always_processed(self):
        proc = Counter()
        proto, t, _ = _stack(proc)
        proto.dataReceived(_req(1, code=106) + _req(2, code=106))
        self.assertEqual(proc.calls, 2)

    def test_oneway_never_answered_from_cache(self):
        proc = Counter()
        proto, t, _ = _stack(proc)
        proto.dataReceived(_req(1))
        proto.dataReceived(_req(2, oneway=True) + _req(3, oneway=True))
        self.assertEqual([a.opaque for a in _answers(t)], [1])
        self.assertEqual(proc.calls, 3)

    def test_other_topic_is_another_entry(self):
        proc = Counter()
        proto, t, factory = _stack(proc)
        proto.dataReceived(_req(1, ext={"topic": "A"}) + _req(2, ext={"topic": "B"})
                           + _req(3, ext={"topic": "A"}))
        self.assertEqual(proc.calls, 2)
        self.assertEqual(len(factory.answer_cache), 2)

    def test_non_canonical_opaque_is_not_a_hit(self):
        proc = Counter()
        proto, t, factory = _stack(proc)
        good = _req(12)
        proto.dataReceived(good)
        lookup = factory.answer_cache.lookup
        self.assertIsNone(lookup(good.replace(b'"opaque":12', b'"opaque":00')))
        self.assertIsInstance(lookup(good.replace(b'"opaque":12', b'"opaque":34')), bytes)

    def test_opaque_inside_ext_fields_is_not_trusted(self):
        """A first ``"opaque":<n>`` that is not the header's opaque is never stored."""
        proc = Counter()
        proto, t, factory = _stack(proc)
        header = b'{"code":105,"extFields":{"opaque":7,"topic":"T"},"flag":0,"language":"JAVA",' \
                 b'"opaque":%d,"serializeTypeCurrentRPC":"JSON","version":401}'
        for opaque in (1, 2, 2):
            h = header % opaque
            frame = (4 + len(h)).to_bytes(4, "big") + len(h).to_bytes(4, "big") + h
            proto.dataReceived(frame)
        self.assertEqual([a.opaque for a in _answers(t)], [1, 2, 2])
        self.assertEqual(len(factory.answer_cache), 0)

    def test_full_cache_evicts_the_least_recently_used(self):
        proc = Counter()
        cache = AnswerCache(proc.version_of)
        clock = task.Clock()
        factory = RemotingServerFactory(proc, None, clock=clock, tls_mode=TlsMode.DISABLED,
                                        answer_cache=cache)
        proto = factory.buildProtocol(None)
        proto.makeConnection(StringTransport())
        proto.dataReceived(_req(0, ext={"topic": "T0"}))
        cache.max_bytes = 3 * cache.bytes                 # room for three answers like it
        for i in range(1, 10):
            proto.dataReceived(_req(i, ext={"topic": f"T{i}"}))
            proto.dataReceived(_req(100 + i, ext={"topic": "T7"}))   # T7 stays in use
        self.assertLessEqual(len(cache), 3)
        self.assertLessEqual(cache.bytes, cache.max_bytes)
        calls = proc.calls
        proto.dataReceived(_req(200, ext={"topic": "T7"}) + _req(201, ext={"topic": "T9"}))
        self.assertEqual(proc.calls, calls)               # the recently used are still there
        proto.dataReceived(_req(202, ext={"topic": "T1"}))
        self.assertEqual(proc.calls, calls + 1)           # the oldest went first


# ---------------------------------------------------------------- the real NameServer stack

def _server(profile, tmp, cache, **props):
    clock = task.Clock()
    clock.advance(1_700_000_000)
    args = ["--profile", profile, "--kvConfigPath", str(tmp / "kv.json"), "--listen", "tcp:0",
            "-D", f"configStorePath={tmp / 'namesrv.properties'}", "-D", "tls.server.mode=disabled"]
    for key, value in props.items():
        args += ["-D", f"{key}={value}"]
    if not cache:
        args.append("--no-answer-cache")
    options = Options()
    options.parseOptions(args)
    top = makeService(options, reactor=clock)
    return top, clock


def _reads(events, grouped):
    """``(kind, connection, frames)`` of each read: one request each, or with ``grouped`` a
    connection's consecutive requests (nothing else between them) in one."""
    reads = []
    for event in events:
        if (grouped and reads and event.kind == "request" == reads[-1][0]
                and reads[-1][1] == event.conversation.index):
            reads[-1][2].append(event.request_frame)
        else:
            reads.append((event.kind, event.conversation.index, [event.request_frame]))
    return reads


def _run_capture(path, tmp, cache, grouped=False, on_cache=None):
    """The bytes written for each read of the capture's requests (see :func:`_reads`), and the
    answer cache; ``on_cache(cache)`` first, when given."""
    top, clock = _server(replay.capture_profile(path), tmp, cache)
    factory = top.factory
    if on_cache is not None:
        on_cache(factory.answer_cache)
    conns = {}
    out = []
    for kind, index, frames in _reads(replay.replay_events(path), grouped):
        clock.advance(0)  # drain queued unregistrations, as the reactor would
        if kind == "close":
            if index in conns:
                proto, _ = conns.pop(index)
                proto.connectionLost(Failure(ConnectionDone()))
            continue
        if index not in conns:
            transport = StringTransport()
            proto = factory.buildProtocol(None)
            proto.makeConnection(transport)
            conns[index] = (proto, transport)
        proto, transport = conns[index]
        proto.dataReceived(b"".join(frames))
        out.append(transport.value())
        transport.clear()
    return out, factory.answer_cache


def _mask(data):
    """Answers with the temporary directory's name blanked (GET_NAMESRV_CONFIG shows paths)."""
    import re
    return re.sub(rb"/tmp/[^/\\]+/", b"/tmp/X/", data)


class CaptureEquivalenceTests(SynchronousTestCase):
    def test_every_capture_answers_the_same_with_and_without_cache(self):
        import tempfile
        from pathlib import Path
        hits = 0
        for path in sorted(replay.PCAP_DIR.glob("*.pcap")):
            with tempfile.TemporaryDirectory() as a:
                with_cache, cache = _run_capture(path, Path(a), True)
            with tempfile.TemporaryDirectory() as a:  # same name is not guaranteed: compare
                without, _ = _run_capture(path, Path(a), False)   # with paths masked below
                with_cache = [_mask(x) for x in with_cache]
                without = [_mask(x) for x in without]
            self.assertEqual(with_cache, without, path.name)
            hits += cache.hits
        self.assertGreater(hits, 100)


_TOPICS = ["T0", "T1", "T2"]
_ops = st.lists(st.one_of(
    st.tuples(st.just("route"), st.sampled_from(_TOPICS), st.sampled_from([63, 401]), st.booleans()),
    st.tuples(st.just("register"), st.integers(0, 2), st.lists(st.sampled_from(_TOPICS), unique=True),
              st.integers(0, 3), st.sampled_from([6, 4, 2])),
    st.tuples(st.just("unregister"), st.integers(0, 2)),
    st.tuples(st.just("close"), st.integers(0, 2)),
    st.tuples(st.just("delete_topic"), st.sampled_from(_TOPICS)),
    st.tuples(st.just("order_conf"), st.sampled_from(_TOPICS), st.sampled_from(["", "b0:4"])),
    st.tuples(st.just("config"), st.sampled_from(["orderMessageEnable", "supportActingMaster"]),
              st.booleans()),
    st.tuples(st.just("wipe"), st.integers(0, 2)),
), max_size=40)


def _register_frame(broker, topics, counter, perm, opaque):
    import zlib
    body = register_body(topics, counter, perm)
    ext = {"brokerName": f"b{broker}", "brokerAddr": f"127.0.0.1:{20000 + broker}",
           "clusterName": "C", "haServerAddr": f"127.0.0.1:{30000 + broker}",
           "brokerId": "0", "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    return RemotingCommand.request(103, ext, body, opaque=opaque, version=413).encode()


def _drive(ops, tmp, cache):
    top, clock = _server("5.3", tmp, cache)
    factory = top.factory
    admin = factory.buildProtocol(None)
    admin_t = StringTransport()
    admin.makeConnection(admin_t)
    brokers = {}
    out = []
    opaque = 0
    for op in ops:
        opaque += 1
        kind = op[0]
        if kind == "route":
            _, topic, version, standard_only = op
            ext = {"topic": topic}
            if standard_only:
                ext["acceptStandardJsonOnly"] = "true"
            admin.dataReceived(RemotingCommand.request(105, ext, opaque=opaque, version=version).encode())
        elif kind == "register":
            _, broker, topics, counter, perm = op
            if broker not in brokers:
                t = StringTransport()
                p = factory.buildProtocol(None)
                p.makeConnection(t)
                brokers[broker] = (p, t)
            brokers[broker][0].dataReceived(_register_frame(broker, topics, counter, perm, opaque))
        elif kind == "unregister":
            ext = {"brokerName": f"b{op[1]}", "brokerAddr": f"127.0.0.1:{20000 + op[1]}",
                   "clusterName": "C", "brokerId": "0"}
            admin.dataReceived(RemotingCommand.request(104, ext, opaque=opaque, version=413).encode())
        elif kind == "close" and op[1] in brokers:
            p, _ = brokers.pop(op[1])
            p.connectionLost(Failure(ConnectionDone()))
        elif kind == "delete_topic":
            admin.dataReceived(RemotingCommand.request(216, {"topic": op[1]}, opaque=opaque,
                                                       version=413).encode())
        elif kind == "order_conf":
            ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": op[1], "value": op[2]}
            admin.dataReceived(RemotingCommand.request(100, ext, opaque=opaque, version=413).encode())
        elif kind == "config":
            body = f"{op[1]}={'true' if op[2] else 'false'}".encode()
            admin.dataReceived(RemotingCommand.request(318, None, body, opaque=opaque,
                                                       version=413).encode())
        elif kind == "wipe":
            admin.dataReceived(RemotingCommand.request(205, {"brokerName": f"b{op[1]}"},
                                                       opaque=opaque, version=413).encode())
        clock.advance(0)
        out.append(admin_t.value())
        admin_t.clear()
    return out


class StatefulEquivalenceTests(SynchronousTestCase):
    @settings(max_examples=40, deadline=None)
    @given(_ops)
    def test_route_answers_follow_every_change(self, ops):
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as a:
            cached = _drive(ops, Path(a), True)
        with tempfile.TemporaryDirectory() as a:
            fresh = _drive(ops, Path(a), False)
        self.assertEqual([_mask(x) for x in cached], [_mask(x) for x in fresh])
