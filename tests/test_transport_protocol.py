"""Transport: framing, dispatch, opaque, errors, idle, flow control of RemotingServerProtocol.

No reactor: StringTransport for the connection, task.Clock for time, a fake processor in place
of the NameServer's (the real one is exercised by the service and end-to-end tests).
"""

from hypothesis import given, settings, strategies as st
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IPushProducer
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.transport import (IChannelEventListener, IRequestProcessor, RemotingServerFactory,
                                TlsMode)
from rocketpy.transport import protocol as protocol_module

ECHO = 7
ONEWAY_CODE = 8
BOOM = 9
LATER = 10
NO_ANSWER = 11


@implementer(IRequestProcessor)
class FakeProcessor:
    """Answers every request with its code and a counter; a few codes misbehave on purpose."""

    def __init__(self):
        self.seen = []
        self.later = []

    def process(self, request, channel, now_ms):
        self.seen.append((request, channel, now_ms))
        if request.code == BOOM:
            raise RuntimeError("bug")
        if request.code == NO_ANSWER:
            return None
        if request.code == LATER:
            d = Deferred()
            self.later.append((d, request))
            return d
        return request.create_response(0, ext_fields={"n": str(len(self.seen))}, body=request.body)


@implementer(IChannelEventListener)
class RecordingListener:
    def __init__(self):
        self.events = []

    def on_channel_connect(self, remote_addr, channel):
        self.events.append(("connect", channel.channel_id))

    def on_channel_close(self, remote_addr, channel):
        self.events.append(("close", channel.channel_id))

    def on_channel_exception(self, remote_addr, channel):
        self.events.append(("exception", channel.channel_id))

    def on_channel_idle(self, remote_addr, channel):
        self.events.append(("idle", channel.channel_id))

    def on_channel_active(self, remote_addr, channel):
        self.events.append(("active", channel.channel_id))


class BoundedTransport(StringTransport):
    """A StringTransport that pauses its streaming producer past ``limit`` unsent bytes, as
    Twisted's FileDescriptor does past ``bufferSize``; ``drain()`` plays the socket emptying."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.reads_paused = False

    def write(self, data):
        super().write(data)
        self._check()

    def writeSequence(self, data):
        super().writeSequence(data)
        self._check()

    def _check(self):
        if self.producer is not None and len(self.value()) > self.limit and not self.reads_paused:
            self.producer.pauseProducing()

    def pauseProducing(self):
        self.reads_paused = True

    def resumeProducing(self):
        self.reads_paused = False

    def drain(self):
        sent = self.value()
        self.clear()
        if self.producer is not None:
            self.producer.resumeProducing()
        return sent


def request(code=ECHO, opaque=1, ext=None, body=None, oneway=False, serialize_type=0):
    return RemotingCommand.request(code, ext if ext is not None else {"k": "v"}, body,
                                   opaque=opaque, oneway=oneway, version=479,
                                   serialize_type=serialize_type).encode()


def answers(transport):
    frames, rest = split_frames(transport.value())
    assert rest == b""
    return [decode_frame(f) for f in frames]


class Harness:
    def __init__(self, **kwargs):
        self.clock = task.Clock()
        self.clock.advance(1_700_000_000)
        self.processor = FakeProcessor()
        self.listener = RecordingListener()
        kwargs.setdefault("tls_mode", TlsMode.DISABLED)
        self.factory = RemotingServerFactory(self.processor, self.listener, clock=self.clock, **kwargs)

    def connect(self, transport=None):
        proto = self.factory.buildProtocol(None)
        transport = transport or StringTransport()
        proto.makeConnection(transport)
        return proto, transport


class FramingTests(SynchronousTestCase):
    def test_verify_interfaces(self):
        h = Harness()
        proto, _ = h.connect()
        verifyObject(IPushProducer, proto)
        verifyObject(IRequestProcessor, h.processor)
        verifyObject(IChannelEventListener, h.listener)

    def test_answer_carries_opaque_and_response_flag(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(opaque=4242))
        [answer] = answers(t)
        self.assertEqual(answer.opaque, 4242)
        self.assertTrue(answer.is_response)
        self.assertEqual(answer.code, 0)
        _, channel, now_ms = h.processor.seen[0]
        self.assertEqual(channel.remote_addr, "192.168.1.1:54321")
        self.assertEqual(now_ms, 1_700_000_000_000)

    def test_one_byte_at_a_time(self):
        h = Harness()
        proto, t = h.connect()
        data = b"".join(request(opaque=i, body=b"x" * i) for i in range(1, 6))
        for i in range(len(data)):
            proto.dataReceived(data[i:i + 1])
        self.assertEqual([a.opaque for a in answers(t)], [1, 2, 3, 4, 5])
        self.assertEqual([a.body for a in answers(t)], [b"x" * i for i in range(1, 6)])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(1, 400), min_size=1, max_size=30), st.randoms())
    def test_random_chunks(self, sizes, rnd):
        h = Harness()
        proto, t = h.connect()
        frames = [request(opaque=i, body=bytes(rnd.getrandbits(8) for _ in range(n)),
                          serialize_type=i % 2) for i, n in enumerate(sizes)]
        data = b"".join(frames)
        pos = 0
        while pos < len(data):
            step = rnd.randint(1, 700)
            proto.dataReceived(data[pos:pos + step])
            pos += step
        got = answers(t)
        self.assertEqual([a.opaque for a in got], list(range(len(sizes))))
        self.assertEqual([len(a.body or b"") for a in got], sizes)

    def test_pipelined_answers_written_together(self):
        h = Harness()
        proto, t = h.connect()
        writes = []
        t.write = writes.append
        t.writeSequence = lambda seq: writes.append(list(seq))
        proto.dataReceived(b"".join(request(opaque=i) for i in range(8)))
        self.assertEqual(len(writes), 1)
        self.assertEqual([a.opaque for a in map(decode_frame, split_frames(writes[0])[0])],
                         list(range(8)))

    def test_rocketmq_binary_header_request(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(opaque=77, serialize_type=1))
        [answer] = answers(t)
        self.assertEqual(answer.opaque, 77)
        self.assertEqual(answer.serialize_type, 1)

    def test_oneway_gets_no_answer(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(code=ONEWAY_CODE, oneway=True))
        self.assertEqual(t.value(), b"")
        self.assertEqual(len(h.processor.seen), 1)

    def test_none_means_no_answer(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(code=NO_ANSWER, opaque=1) + request(opaque=2))
        self.assertEqual([a.opaque for a in answers(t)], [2])

    def test_response_frames_are_ignored(self):
        h = Harness()
        proto, t = h.connect()
        response = RemotingCommand(code=0, opaque=5, flag=1).encode()
        proto.dataReceived(response + request(opaque=6))
        self.assertEqual([a.opaque for a in answers(t)], [6])
        self.assertEqual(len(h.processor.seen), 1)
        self.assertFalse(t.disconnecting)

    def test_processor_exception_answers_system_error(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(code=BOOM, opaque=31) + request(opaque=32))
        first, second = answers(t)
        self.assertEqual((first.code, first.opaque), (1, 31))
        self.assertEqual((second.code, second.opaque), (0, 32))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertFalse(t.disconnecting)

    def test_deferred_answer_written_when_it_fires(self):
        h = Harness()
        proto, t = h.connect()
        proto.dataReceived(request(code=LATER, opaque=1) + request(opaque=2))
        self.assertEqual([a.opaque for a in answers(t)], [2])
        d, req = h.processor.later[0]
        d.callback(req.create_response(0))
        self.assertEqual([a.opaque for a in answers(t)], [2, 1])

    def test_preencoded_answer_passes_through(self):
        h = Harness()
        ready = RemotingCommand(code=0, opaque=99, flag=1, remark="cached").encode()
        h.processor.process = lambda req, ch, now: ready
        proto, t = h.connect()
        proto.dataReceived(request(opaque=99))
        self.assertEqual(t.value(), ready)


class BadInputTests(SynchronousTestCase):
    def test_oversized_length_closes_before_buffering(self):
        h = Harness(max_frame_length=1024)
        proto, t = h.connect()
        proto.dataReceived(request(opaque=1) + (2000).to_bytes(4, "big"))
        self.assertEqual([a.opaque for a in answers(t)], [1])
        self.assertTrue(t.disconnecting)
        self.assertFalse(proto._frames.holding)  # nothing of it is kept
        proto.dataReceived(b"y" * 5000)  # ignored once closing
        self.assertEqual(len(h.processor.seen), 1)

    def test_frame_at_the_limit_is_served(self):
        h = Harness(max_frame_length=1024)
        proto, t = h.connect()
        base = request(opaque=3, body=b"")
        frame = request(opaque=3, body=b"z" * (1024 - len(base)))
        self.assertEqual(len(frame), 1024)
        proto.dataReceived(frame)
        self.assertFalse(t.disconnecting)
        self.assertEqual(answers(t)[0].opaque, 3)

    def test_undecodable_frame_closes_only_that_connection(self):
        h = Harness()
        bad, bad_t = h.connect()
        good, good_t = h.connect()
        header = b"{not json"
        junk = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
        bad.dataReceived(request(opaque=1) + junk + request(opaque=2))
        self.assertEqual([a.opaque for a in answers(bad_t)], [1])
        self.assertTrue(bad_t.disconnecting)
        good.dataReceived(request(opaque=3))
        self.assertEqual([a.opaque for a in answers(good_t)], [3])
        self.assertFalse(good_t.disconnecting)

    def test_unknown_serialize_type_closes(self):
        h = Harness()
        proto, t = h.connect()
        frame = bytearray(request(opaque=1))
        frame[4] = 7
        proto.dataReceived(bytes(frame))
        self.assertTrue(t.disconnecting)
        self.assertEqual(t.value(), b"")

    def test_unread_close_is_reset_after_grace(self):
        h = Harness(max_frame_length=64)
        proto, t = h.connect()
        proto.dataReceived((1000).to_bytes(4, "big"))
        self.assertTrue(t.disconnecting)
        self.assertFalse(t.disconnected)
        h.clock.advance(protocol_module.CLOSE_GRACE)
        self.assertTrue(t.disconnected)  # StringTransport's abortConnection


class EventTests(SynchronousTestCase):
    def test_connect_and_clean_close(self):
        h = Harness()
        proto, t = h.connect()
        cid = proto.channel.channel_id
        self.assertIn(cid, h.factory.connections)
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(h.listener.events, [("connect", cid), ("close", cid)])
        self.assertNotIn(cid, h.factory.connections)

    def test_reset_reports_exception_then_close(self):
        h = Harness()
        proto, t = h.connect()
        cid = proto.channel.channel_id
        proto.connectionLost(Failure(ConnectionLost("reset by peer")))
        self.assertEqual(h.listener.events, [("connect", cid), ("exception", cid), ("close", cid)])

    def test_channel_ids_are_unique(self):
        h = Harness()
        ids = {h.connect()[0].channel.channel_id for _ in range(5)}
        self.assertEqual(len(ids), 5)

    def test_listener_bug_is_logged_not_raised(self):
        h = Harness()
        h.listener.on_channel_connect = lambda addr, ch: 1 / 0
        proto, t = h.connect()
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        proto.dataReceived(request(opaque=1))
        self.assertEqual(len(answers(t)), 1)

    def test_close_channel_by_id(self):
        h = Harness()
        proto, t = h.connect()
        self.assertTrue(h.factory.close_channel(proto.channel.channel_id))
        self.assertTrue(t.disconnecting)
        self.assertFalse(h.factory.close_channel(12345))

    def test_close_all_fires_when_every_connection_is_gone(self):
        h = Harness()
        conns = [h.connect() for _ in range(3)]
        d = h.factory.close_all()
        self.assertNoResult(d)
        for proto, t in conns:
            self.assertTrue(t.disconnecting)
            proto.connectionLost(Failure(ConnectionDone()))
        self.successResultOf(d)


class IdleTests(SynchronousTestCase):
    def test_idle_after_120_seconds_of_silence(self):
        h = Harness()
        proto, t = h.connect()
        cid = proto.channel.channel_id
        h.clock.advance(119.9)
        self.assertFalse(t.disconnecting)
        h.clock.advance(0.1)
        self.assertTrue(t.disconnecting)
        self.assertEqual(h.listener.events, [("connect", cid), ("idle", cid)])
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(h.listener.events[-1], ("close", cid))
        self.assertNotIn(("exception", cid), h.listener.events)

    def test_traffic_postpones_idle(self):
        h = Harness()
        proto, t = h.connect()
        for _ in range(5):
            h.clock.advance(100)
            proto.dataReceived(request())
        self.assertFalse(t.disconnecting)
        h.clock.advance(119)
        self.assertFalse(t.disconnecting)
        h.clock.advance(1)
        self.assertTrue(t.disconnecting)

    def test_configured_idle_time(self):
        h = Harness(idle_seconds=10)
        proto, t = h.connect()
        h.clock.advance(10)
        self.assertTrue(t.disconnecting)

    def test_zero_disables_idle(self):
        h = Harness(idle_seconds=0)
        proto, t = h.connect()
        h.clock.advance(10_000)
        self.assertFalse(t.disconnecting)
        self.assertEqual(h.clock.getDelayedCalls(), [])

    def test_a_closed_connection_leaves_the_idle_schedule(self):
        """At once; the server's one idle call fires at its time, finds nothing due and is
        gone, and stopping the factory cancels it."""
        h = Harness()
        first, _ = h.connect()
        cid = first.channel.channel_id
        proto, t = h.connect()
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(len(h.factory.idle_schedule), 1)
        h.clock.advance(120)
        self.assertEqual(h.listener.events[-1], ("idle", cid))
        self.assertEqual(len(h.factory.idle_schedule), 0)
        first.connectionLost(Failure(ConnectionDone()))     # and its close grace call goes
        self.assertEqual(h.clock.getDelayedCalls(), [])
        proto, t = h.connect()
        self.assertEqual(len(h.clock.getDelayedCalls()), 1)
        h.factory.stopFactory()
        self.assertEqual(h.clock.getDelayedCalls(), [])

    def test_one_reactor_call_for_every_connections_idle_check(self):
        """A closing connection leaves the idle schedule at once (Twisted's reactor keeps a
        cancelled call until its time, with the pages it was made on); the others still close
        on time."""
        h = Harness()
        conns = []
        for _ in range(50):
            conns.append(h.connect())
            h.clock.advance(1)
        self.assertEqual(len(h.clock.getDelayedCalls()), 1)
        for proto, _ in conns[:49]:
            proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(len(h.factory.idle_schedule), 1)
        self.assertEqual(len(h.clock.getDelayedCalls()), 1)
        proto, t = conns[-1]
        h.clock.advance(119 - 0.5)          # connected 1 s before the last advance above
        self.assertFalse(t.disconnecting)
        h.clock.advance(0.5)
        self.assertTrue(t.disconnecting)


class FlowControlTests(SynchronousTestCase):
    def test_paused_connection_stops_serving_and_resumes(self):
        self.patch(protocol_module, "FLUSH_BYTES", 1000)
        h = Harness()
        t = BoundedTransport(limit=2000)
        proto, _ = h.connect(t)
        body = b"b" * 500
        burst = b"".join(request(opaque=i, body=body) for i in range(100))
        proto.dataReceived(burst)
        self.assertTrue(t.reads_paused)
        served = len(h.processor.seen)
        self.assertLess(served, 100)
        self.assertLess(len(t.value()), 1000 + 2000)
        # more input while paused is held, not served
        proto.dataReceived(request(opaque=100, body=body))
        self.assertEqual(len(h.processor.seen), served)
        got = []
        for _ in range(200):
            got += [a.opaque for a in decode_all(t.drain())]
            if len(got) == 101:
                break
            h.clock.advance(0)      # the next reactor turn: a slow (busy) machine may end a
                                    # turn on serverTurnMillis and serve the rest in the next
        self.assertEqual(got, list(range(101)))
        self.assertFalse(t.reads_paused)

    def test_never_reading_peer_bounds_buffered_answers(self):
        h = Harness()
        t = BoundedTransport(limit=64 * 1024)
        proto, _ = h.connect(t)
        big = b"q" * 4000
        for i in range(2000):  # 8 MB of requests offered; a paused transport would not read them
            if t.reads_paused:
                break
            proto.dataReceived(request(opaque=i, body=big))
        self.assertTrue(t.reads_paused)
        self.assertLess(len(t.value()), 64 * 1024 + protocol_module.FLUSH_BYTES)


def decode_all(data):
    frames, rest = split_frames(data)
    assert rest == b""
    return [decode_frame(f) for f in frames]


class TlsModeTests(SynchronousTestCase):
    CLIENT_HELLO_START = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"

    def test_disabled_refuses_tls_handshake(self):
        h = Harness(tls_mode=TlsMode.DISABLED)
        proto, t = h.connect()
        proto.dataReceived(self.CLIENT_HELLO_START)
        self.assertTrue(t.disconnecting)
        self.assertEqual(h.processor.seen, [])

    def test_enforcing_refuses_plain_remoting(self):
        h = Harness(tls_mode=TlsMode.ENFORCING)
        proto, t = h.connect()
        proto.dataReceived(request())
        self.assertTrue(t.disconnecting)
        self.assertEqual(h.processor.seen, [])

    def test_permissive_serves_plain_remoting(self):
        h = Harness(tls_mode=TlsMode.PERMISSIVE)
        proto, t = h.connect()
        proto.dataReceived(request(opaque=5))
        self.assertEqual(answers(t)[0].opaque, 5)

    def test_permissive_without_context_closes_tls_attempt(self):
        h = Harness(tls_mode=TlsMode.PERMISSIVE, tls_context_factory=None)
        proto, t = h.connect()
        proto.dataReceived(self.CLIENT_HELLO_START)
        self.assertTrue(t.disconnecting)

    def test_mode_parse_as_java(self):
        self.assertIs(TlsMode.parse("disabled"), TlsMode.DISABLED)
        self.assertIs(TlsMode.parse("enforcing"), TlsMode.ENFORCING)
        self.assertIs(TlsMode.parse("ENFORCING"), TlsMode.PERMISSIVE)
        self.assertIs(TlsMode.parse(None), TlsMode.PERMISSIVE)


