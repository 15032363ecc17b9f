"""Transport limits: the per-turn request budget (serve, then wait for a later turn; shed with
SYSTEM_BUSY [OVERLOAD] only past serverMaxWaitingRequests waiting), max connections, pending large-frame memory, slow loris, never-reading peers, and the
structured trouble events and counters of every refusal, bad frame, shed and expiry.

No reactor: StringTransport connections, task.Clock time (a reactor turn ends at
``clock.advance(0)``, where the governor's ``callLater(0)`` runs), the real NameServer
processor where the exact SYSTEM_BUSY bytes matter.
"""
import resource

from twisted.internet import task
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.namesrv import KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.service.tap import Options, default_listen
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport import limits as limits_module
from rocketpy.remoting.layout import peek_request
from rocketpy.remoting.codes import OVERLOAD_REMARK
from rocketpy.transport.limits import (LIMIT_KEYS, NOT_SHED, TROUBLE_EVENTS,
                                       LoadGovernor, RefusedConnection, ServerLimits,
                                       overload_answer, raise_open_files_limit,
                                       connection_cap, OPEN_FILES_MARGIN, MIN_DEFAULT_CONNECTIONS)
from test_transport_protocol import (ECHO, BoundedTransport, FakeProcessor, RecordingListener,
                                     answers, request)


class Addr:
    def __init__(self, host="10.0.0.9", port=40000):
        self.host, self.port = host, port


class TurnClock:
    """The governor's clock: ``callLater(0, f)`` waits for :meth:`end_turn`, which runs only what
    was due when it was called -- as the reactor runs a call scheduled during this iteration in
    the next one (``task.Clock.advance(0)`` would run it at once, collapsing turns)."""

    def __init__(self, clock):
        self._clock = clock
        self.due = []

    def seconds(self):
        return self._clock.seconds()

    def callLater(self, delay, f, *args):
        assert delay == 0
        self.due.append((f, args))
        return f  # a handle; the governor only checks it is not None

    def end_turn(self):
        due, self.due = self.due, []
        for f, args in due:
            f(*args)


class Harness:
    """A factory with the given limits, a fake processor (or a real one) and captured events."""

    def __init__(self, testcase, processor=None, limits=None, **kwargs):
        self.clock = task.Clock()
        self.clock.advance(1_700_000_000)
        self.processor = processor or FakeProcessor()
        self.listener = RecordingListener()
        self.events = []
        testcase.patch(LoadGovernor, "log", Logger(observer=self.events.append))
        kwargs.setdefault("tls_mode", TlsMode.DISABLED)
        self.factory = RemotingServerFactory(self.processor, self.listener, clock=self.clock,
                                             limits=limits, **kwargs)
        self.governor = self.factory.governor
        self.elapsed = 0.0  # the turn stopwatch: time stands still unless a test moves it
        self.governor.timer = lambda: self.elapsed
        self.turns = self.governor._clock = TurnClock(self.clock)
        self.metrics = self.factory.metrics
        self._port = 40000

    def connect(self, transport=None):
        self._port += 1
        proto = self.factory.buildProtocol(Addr(port=self._port))
        transport = transport or StringTransport(peerAddress=Addr(port=self._port))
        proto.makeConnection(transport)
        return proto, transport

    def trouble(self, name=None):
        return [e for e in self.events if "rocketpy_event" in e
                and (name is None or e["rocketpy_event"] == name)]

    def end_turn(self):
        self.turns.end_turn()


def real_processor(profile="5.3", tmp="/nonexistent"):
    prof = profile_for(profile)
    route = RouteInfoManager(None, prof)
    return DefaultRequestProcessor(route, KVConfigManager(f"{tmp}/kv.json"), profile=prof)


# -- the budget ------------------------------------------------------------------------------

class BudgetTests(SynchronousTestCase):
    """Past its budget a turn delays: the rest of a read waits for a later turn, unanswered,
    the socket unread (issue 33: Java refuses nobody for a slow turn)."""

    LIMITS = ServerLimits(requests_per_turn=10, fair_requests_per_turn=2, shed_requests_per_turn=5)

    def test_within_budget_everything_is_served(self):
        h = Harness(self, limits=self.LIMITS)
        proto, t = h.connect()
        proto.dataReceived(b"".join(request(opaque=i) for i in range(12)))
        got = answers(t)
        self.assertEqual([a.opaque for a in got], list(range(12)))
        self.assertEqual({a.code for a in got}, {0})
        self.assertEqual(h.governor.shed_total, 0)
        self.assertFalse(proto.throttled)

    def test_over_budget_waits_for_later_turns_and_is_never_refused(self):
        h = Harness(self, limits=self.LIMITS)
        proto, t = h.connect()
        proto.dataReceived(b"".join(request(opaque=i) for i in range(30)))
        got = answers(t)
        # 2 fair + 10 from the pool served, the other 18 wait (and the socket is not read)
        self.assertEqual([(a.opaque, a.code) for a in got], [(i, 0) for i in range(12)])
        self.assertEqual(len(h.processor.seen), 12)
        self.assertTrue(proto.throttled)
        self.assertEqual(t.producerState, "paused")
        self.assertEqual(h.governor.waiting, 18)
        proto.dataReceived(request(opaque=30))  # arrives anyway (TLS layer): held, not served
        self.assertEqual(len(answers(t)), 12)
        t.clear()
        h.end_turn()  # next turn: alone in the queue, its quantum is the whole pool (10)
        self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(i, 0) for i in range(12, 22)])
        self.assertEqual(h.governor.waiting, 9)
        t.clear()
        h.end_turn()
        self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(i, 0) for i in range(22, 31)])
        self.assertFalse(proto.throttled)
        self.assertEqual(t.producerState, "producing")
        self.assertEqual((h.governor.shed_total, h.governor.waiting, h.metrics.overloaded), (0, 0, {}))

    def test_a_light_client_is_served_while_a_flood_waits(self):
        h = Harness(self, limits=self.LIMITS)
        flood, ft = h.connect()
        light, lt = h.connect()
        flood.dataReceived(b"".join(request(opaque=i) for i in range(40)))
        light.dataReceived(request(opaque=77))
        self.assertEqual([(a.opaque, a.code) for a in answers(lt)], [(77, 0)])
        light.dataReceived(request(opaque=78) + request(opaque=79))  # its third this turn waits
        self.assertEqual([(a.opaque, a.code) for a in answers(lt)], [(77, 0), (78, 0)])
        h.end_turn()
        self.assertEqual([(a.opaque, a.code) for a in answers(lt)], [(77, 0), (78, 0), (79, 0)])
        self.assertEqual(h.governor.shed_total, 0)

    def test_budget_is_per_turn_across_reads(self):
        h = Harness(self, limits=self.LIMITS)
        proto, t = h.connect()
        for i in range(12):
            proto.dataReceived(request(opaque=i))
        proto.dataReceived(request(opaque=12))
        self.assertEqual(len(answers(t)), 12)            # the 13th waits
        h.end_turn()
        self.assertEqual(answers(t)[-1].opaque, 12)
        proto.dataReceived(request(opaque=13))
        self.assertEqual([(a.opaque, a.code) for a in answers(t)][-2:], [(12, 0), (13, 0)])

    def test_zero_turns_the_budget_off(self):
        h = Harness(self, limits=ServerLimits(requests_per_turn=0))
        proto, t = h.connect()
        proto.dataReceived(b"".join(request(opaque=i) for i in range(500)))
        self.assertEqual({a.code for a in answers(t)}, {0})
        self.assertEqual(h.turns.due, [])  # no turn bookkeeping at all

    def test_throttle_and_flow_control_both_release(self):
        h = Harness(self, limits=self.LIMITS)
        t = BoundedTransport(limit=10 ** 9)
        proto, _ = h.connect(t)
        proto.dataReceived(b"".join(request(opaque=i) for i in range(20)))
        self.assertTrue(proto.throttled)
        proto.pauseProducing()   # the peer stopped reading too
        h.end_turn()             # a new turn, but the socket buffer is still full
        self.assertTrue(proto.paused)
        self.assertEqual(len(h.processor.seen), 12)
        t.drain()                # Twisted resumes us once the buffer drains
        self.assertFalse(proto.paused)
        self.assertEqual(len(h.processor.seen), 20)

    def test_flooders_share_the_budget_round_robin_and_light_ones_keep_their_share(self):
        h = Harness(self, limits=ServerLimits(requests_per_turn=10, fair_requests_per_turn=2,
                                              shed_requests_per_turn=1))
        flooders = [h.connect() for _ in range(6)]
        light, lt = h.connect()
        for proto, _ in flooders:
            proto.dataReceived(b"".join(request(opaque=i) for i in range(40)))
        codes = [[x.code for x in answers(t)] for _, t in flooders]
        # turn 1: the first took its 2 + the pool's 10; the others' reads, floods once the pool
        # is gone, wait whole; all six are queued
        self.assertEqual(codes, [[0] * 12] + [[]] * 5)
        self.assertTrue(all(p.throttled for p, _ in flooders))
        light.dataReceived(request(opaque=5) + request(opaque=6))  # light: its fair share, still
        self.assertEqual([(x.opaque, x.code) for x in answers(lt)], [(5, 0), (6, 0)])
        for _, t in flooders:
            t.clear()
        h.end_turn()
        # turn 2: quantum max(2, 10 // 6) = 2 each, in queue order, while the pool lasts
        codes = [[x.code for x in answers(t)] for _, t in flooders]
        self.assertEqual(codes, [[0, 0]] * 5 + [[]])
        self.assertEqual(flooders[5][1].producerState, "paused")  # not reached: head of queue
        for _, t in flooders:
            t.clear()
        h.end_turn()
        # turn 3: the one not reached goes first; the last of the others waits now
        codes = [[x.code for x in answers(t)] for _, t in flooders]
        self.assertEqual(codes, [[0, 0]] * 4 + [[]] + [[0, 0]])
        self.assertEqual(len(h.processor.seen), 12 + 2 + 10 + 10)
        self.assertEqual(h.governor.shed_total, 0)

    def test_queue_progresses_with_no_fair_share_and_no_shedding(self):
        h = Harness(self, limits=ServerLimits(requests_per_turn=2, fair_requests_per_turn=0,
                                              shed_requests_per_turn=0))
        conns = [h.connect() for _ in range(5)]
        for proto, _ in conns:
            proto.dataReceived(b"".join(request(opaque=i) for i in range(3)))
        for _ in range(20):
            h.end_turn()
        self.assertEqual([len(answers(t)) for _, t in conns], [3] * 5)
        self.assertEqual(h.governor.shed_total, 0)

    def test_turn_time_budget(self):
        h = Harness(self, limits=ServerLimits(requests_per_turn=1000, fair_requests_per_turn=2,
                                              shed_requests_per_turn=3, turn_millis=50))
        a, ta = h.connect()
        b, tb = h.connect()
        a.dataReceived(b"".join(request(opaque=i) for i in range(10)))
        self.assertEqual({x.code for x in answers(ta)}, {0})
        h.elapsed = 0.051  # the turn has run 51 ms: only fair shares from now on
        b.dataReceived(request(opaque=1) + request(opaque=2))
        self.assertEqual([x.code for x in answers(tb)], [0, 0])
        b.dataReceived(b"".join(request(opaque=i) for i in range(10)))
        self.assertEqual(len(answers(tb)), 2)          # they wait: a long turn only delays
        self.assertTrue(b.throttled)
        tb.clear()
        h.end_turn()  # the next turn starts its own stopwatch: b's 10 are served
        self.assertEqual([x.code for x in answers(tb)], [0] * 10)


class StretchedTurnTests(SynchronousTestCase):
    """Issue 33: with 16 CPU hogs beside it, a turn ran past serverTurnMillis and every
    connection with more than its fair share in flight was answered SYSTEM_BUSY (Java: none).
    Here the turn's stopwatch moves 5 ms at every look, as a contended CPU makes it, and
    well-behaved pipelining clients (8 in flight, a new request per answer) run for several
    windows each: they are delayed, never refused, each answered in order."""

    def _pipeline(self, connections, window=8, windows=3):
        h = Harness(self)                                   # the default limits
        ticks = [0]

        def stretched():
            ticks[0] += 1
            return ticks[0] * 0.005
        h.governor.timer = stretched
        clients = [h.connect() for _ in range(connections)]
        sent = [window] * connections
        unsent = [b"".join(request(opaque=k) for k in range(window)) for _ in clients]
        got = [[] for _ in clients]
        waited = 0
        for _ in range(10 * connections * windows):         # bounded: turns, not time
            for i, (proto, t) in enumerate(clients):
                if unsent[i] and not proto.paused:          # TCP holds it while not read
                    data, unsent[i] = unsent[i], b""
                    proto.dataReceived(data)
                new = answers(t)
                t.clear()
                got[i] += [(a.opaque, a.code) for a in new]
                more = min(len(new), window * windows - sent[i])
                unsent[i] += b"".join(request(opaque=sent[i] + k) for k in range(more))
                sent[i] += more
            waited += sum(p.throttled for p, _ in clients)
            if all(len(g) == window * windows for g in got):
                break
            h.end_turn()
        return h, got, waited

    def _check(self, connections):
        h, got, waited = self._pipeline(connections)
        self.assertEqual(got, [[(k, 0) for k in range(24)]] * connections)
        self.assertEqual((h.governor.shed_total, h.metrics.overloaded), (0, {}))
        self.assertGreater(waited, 0)         # turns did run long, and requests waited

    def test_16_connections_with_8_in_flight_get_no_system_busy(self):
        self._check(16)

    def test_1000_connections_with_8_in_flight_get_no_system_busy(self):
        self._check(1000)

    def test_a_light_client_is_served_in_the_turn_its_request_is_read(self):
        h, _, _ = self._pipeline(200, windows=1)
        h.end_turn()
        flood = [h.connect() for _ in range(50)]
        for proto, _ in flood:
            proto.dataReceived(b"".join(request(opaque=k) for k in range(8)))
        light, lt = h.connect()
        light.dataReceived(request(opaque=5))
        self.assertEqual([(a.opaque, a.code) for a in answers(lt)], [(5, 0)])


class QueueFullTests(SynchronousTestCase):
    """Past serverMaxWaitingRequests waiting (Java's full queue), a fresh read's requests past
    the connection's share get Java's SYSTEM_BUSY, at most serverShedRequestsPerTurn, and the
    rest waits; what a connection held is never shed."""

    LIMITS = ServerLimits(requests_per_turn=10, fair_requests_per_turn=2, shed_requests_per_turn=5,
                          max_waiting_requests=5)

    def fill(self, h, n=20):
        """A connection whose held requests fill the queue."""
        proto, t = h.connect()
        proto.dataReceived(b"".join(request(opaque=1000 + i) for i in range(n)))
        self.assertTrue(h.governor.queue_full)
        return proto, t

    def test_a_flood_is_shed_then_waits_and_what_waits_is_served(self):
        h = Harness(self, limits=self.LIMITS)
        filler, ft = self.fill(h)
        proto, t = h.connect()
        proto.dataReceived(b"".join(request(opaque=i) for i in range(30)))
        got = answers(t)
        self.assertEqual([a.code for a in got], [2] * 5)     # a flood starting: none served
        self.assertEqual({a.remark for a in got}, {OVERLOAD_REMARK})
        self.assertTrue(proto.throttled)
        light, lt = h.connect()
        light.dataReceived(request(opaque=77))               # its fair share, still
        self.assertEqual([(a.opaque, a.code) for a in answers(lt)], [(77, 0)])
        for _ in range(10):
            h.end_turn()
        self.assertEqual([(a.opaque, a.code) for a in answers(t)],
                         [(i, 2) for i in range(5)] + [(i, 0) for i in range(5, 30)])
        self.assertEqual({a.code for a in answers(ft)}, {0})   # held, never shed
        self.assertEqual(len(answers(ft)), 20)
        self.assertEqual((h.governor.shed_total, h.metrics.overloaded), (5, {-1: 5}))

    def test_oneway_shed_is_dropped_without_answer(self):
        limits = ServerLimits(requests_per_turn=1, fair_requests_per_turn=0, shed_requests_per_turn=5,
                              max_waiting_requests=1)
        h = Harness(self, limits=limits)
        self.fill(h, 3)
        proto, t = h.connect()
        proto.dataReceived(request(opaque=1) + request(opaque=2, oneway=True) + request(opaque=3))
        self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(1, 2), (3, 2)])
        self.assertEqual(h.governor.shed_total, 3)

    def test_ambiguous_header_is_processed_not_guessed(self):
        limits = ServerLimits(requests_per_turn=1, fair_requests_per_turn=0, max_waiting_requests=1)
        h = Harness(self, limits=limits)
        self.fill(h, 3)
        proto, t = h.connect()
        odd = RemotingCommand.request(ECHO, {"opaque": "5"}, opaque=9, version=479).encode()
        odd = odd.replace(b'"opaque":"5"', b'"opaque": 5 ')  # a numeric ext field, as C++ writes
        proto.dataReceived(request(opaque=1) + odd)
        self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(1, 2), (9, 0)])

    def test_shed_answer_is_the_processors_overload_answer(self):
        processor = real_processor()
        limits = ServerLimits(requests_per_turn=1, fair_requests_per_turn=0, max_waiting_requests=1)
        h = Harness(self, processor=processor, limits=limits)
        self.fill(h, 10)
        proto, t = h.connect()
        for st in (0, 1):
            t.clear()
            req = RemotingCommand.request(105, {"topic": "T"}, opaque=-123456, version=479,
                                          serialize_type=st)
            proto.dataReceived(req.encode())
            expected = processor.overload_response(req)
            expected.opaque = req.opaque
            self.assertEqual(split_frames(t.value())[0], [expected.encode()])
            h.end_turn()
            self.assertTrue(h.governor.queue_full)   # the filler serves one a turn
        self.assertEqual(h.metrics.overloaded, {105: 2})

    def test_shed_events_once_per_connection_and_episode(self):
        h = Harness(self, limits=self.LIMITS)
        self.fill(h)
        b, bt = h.connect()
        c, ct = h.connect()
        b.dataReceived(b"".join(request(opaque=i) for i in range(16)))
        c.dataReceived(b"".join(request(opaque=i) for i in range(6)))
        self.assertEqual(len(h.trouble("overload.start")), 1)
        sheds = h.trouble("request.shed")
        self.assertEqual(sorted(e["peer"] for e in sheds), sorted([b.remote_addr, c.remote_addr]))
        self.assertEqual({e["reason"] for e in sheds}, {"overload"})
        for _ in range(10):            # the queue drains; the first turn that sheds nothing
            h.end_turn()               # with nobody queued ends the episode
        ends = h.trouble("overload.end")
        self.assertEqual(len(ends), 1)
        self.assertEqual((ends[0]["shed"], ends[0]["connections"]), (5 + 5, 2))
        self.assertFalse(h.governor.overloaded)
        self.assertEqual([a.code for a in answers(bt)], [2] * 5 + [0] * 11)
        self.assertEqual([a.code for a in answers(ct)], [2] * 5 + [0])
        self.assertEqual(h.governor.waiting, 0)

    def test_zero_never_sheds(self):
        h = Harness(self, limits=ServerLimits(requests_per_turn=1, fair_requests_per_turn=0,
                                              max_waiting_requests=0))
        conns = [h.connect() for _ in range(20)]
        for proto, _ in conns:
            proto.dataReceived(b"".join(request(opaque=i) for i in range(50)))
        for _ in range(2000):
            h.end_turn()
        self.assertEqual([[a.code for a in answers(t)] for _, t in conns], [[0] * 50] * 20)
        self.assertEqual(h.governor.shed_total, 0)

    def test_a_closed_connection_gives_back_what_it_held(self):
        h = Harness(self, limits=self.LIMITS)
        filler, _ = self.fill(h)
        self.assertEqual(h.governor.waiting, 8)
        filler.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(h.governor.waiting, 0)
        self.assertFalse(h.governor.queue_full)


class PeekTests(SynchronousTestCase):
    def test_json_and_binary_headers(self):
        for st in (0, 1):
            for opaque in (0, 7, -5, 2 ** 31 - 1, -2 ** 31):
                frame = RemotingCommand.request(105, {"topic": "x"}, opaque=opaque, oneway=True,
                                                version=479, serialize_type=st).encode()
                self.assertEqual(peek_request(frame), (105, opaque, 2))

    def test_cpp_style_header(self):
        header = (b'{"code":105,"language":"CPP","version":63,"opaque":12,"flag":0,"remark":"",'
                  b'"extFields":{"topic":"T"}}\n')
        frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
        self.assertEqual(peek_request(frame), (105, 12, 0))
        self.assertEqual(decode_frame(frame).opaque, 12)

    def test_unreadable_headers_give_none(self):
        self.assertIsNone(peek_request(b"\x00\x00\x00\x04\x00\x00\x00"))
        header = b'{"code":105,"flag":0}'
        frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
        self.assertIsNone(peek_request(frame))  # no opaque
        self.assertIsNone(peek_request(frame[:-3]))  # header length past the frame
        two = b'{"code":1,"extFields":{"code":2},"flag":0,"opaque":1}'
        frame = (4 + len(two)).to_bytes(4, "big") + len(two).to_bytes(4, "big") + two
        self.assertIsNone(peek_request(frame))

    def test_governor_returns_not_shed_for_unreadable(self):
        g = LoadGovernor(ServerLimits(), task.Clock())
        self.assertIs(g.shed(None, b"\x00\x00\x00\x05\x02\x00\x00\x00\x00"), NOT_SHED)

    def test_overload_answer_without_processor(self):
        frame = overload_answer().encode_for(42)
        answer = decode_frame(frame)
        self.assertEqual((answer.code, answer.opaque, answer.remark, answer.is_response),
                         (2, 42, OVERLOAD_REMARK, True))


# -- connections -------------------------------------------------------------------------------

class ConnectionLimitTests(SynchronousTestCase):
    def test_refused_past_max_connections_logged_and_counted(self):
        h = Harness(self, limits=ServerLimits(max_connections=2))
        first, _ = h.connect()
        second, _ = h.connect()
        refused = h.factory.buildProtocol(Addr("192.0.2.7", 5555))
        self.assertIsInstance(refused, RefusedConnection)
        rt = StringTransport()
        refused.makeConnection(rt)
        self.assertTrue(rt.disconnected)  # aborted at once
        [event] = h.trouble("connection.refused")
        self.assertEqual((event["peer"], event["reason"]), ("192.0.2.7:5555", "max connections"))
        self.assertEqual(h.metrics.refused_connections, {"max connections": 1})
        first.connectionLost(Failure(ConnectionDone()))
        third, _ = h.connect()
        self.assertIsNotNone(third)
        self.assertEqual(len(h.factory.connections), 2)

    def test_refusal_works_under_a_wrapping_tls_factory(self):
        from twisted.protocols.tls import TLSMemoryBIOFactory
        from rocketpy.transport.tls import TlsSettings, build_context_factory
        h = Harness(self, limits=ServerLimits(max_connections=1))
        h.connect()
        context = build_context_factory(TlsSettings.from_properties({}))  # test-mode certificate
        wrapping = TLSMemoryBIOFactory(context, False, h.factory)  # what --listen ssl:... does
        proto = wrapping.buildProtocol(Addr("192.0.2.8", 6666))
        t = StringTransport()
        proto.makeConnection(t)
        self.assertTrue(t.disconnecting)
        self.assertEqual(h.trouble("connection.refused")[0]["peer"], "192.0.2.8:6666")

    def test_tls_refusals_are_trouble_events(self):
        h = Harness(self, tls_mode=TlsMode.ENFORCING)
        proto, t = h.connect()
        proto.dataReceived(request())
        self.assertTrue(t.disconnecting)
        [event] = h.trouble("connection.refused")
        self.assertEqual((event["peer"], event["reason"]), (proto.remote_addr, "tls enforcing"))
        h2 = Harness(self, tls_mode=TlsMode.DISABLED)
        proto, t = h2.connect()
        proto.dataReceived(b"\x16\x03\x01\x02\x00\x01")
        self.assertEqual(h2.metrics.refused_connections, {"tls disabled": 1})


class BadFrameTests(SynchronousTestCase):
    def test_frame_length_and_decode_are_trouble_events(self):
        h = Harness(self)
        proto, t = h.connect()
        proto.dataReceived((64 * 1024 * 1024).to_bytes(4, "big"))
        self.assertTrue(t.disconnecting)
        proto2, t2 = h.connect()
        header = b"{not json"
        proto2.dataReceived((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big")
                            + header)
        self.assertTrue(t2.disconnecting)
        events = h.trouble("frame.bad")
        self.assertEqual([(e["peer"], e["reason"]) for e in events],
                         [(proto.remote_addr, "frame length"), (proto2.remote_addr, "decode")])
        self.assertEqual(h.metrics.bad_frames, {"frame length": 1, "decode": 1})


class PendingFrameMemoryTests(SynchronousTestCase):
    def test_large_partial_frames_are_capped_in_total(self):
        h = Harness(self, limits=ServerLimits(max_pending_frame_bytes=5 << 20))
        big = request(body=b"x" * (2 << 20))
        a, ta = h.connect()
        b, tb = h.connect()
        c, tc = h.connect()
        a.dataReceived(big[:1000])
        b.dataReceived(big[:1000])
        self.assertEqual(h.governor.pending_bytes, 2 * len(big))
        c.dataReceived(big[:1000])  # a third would pass 5 MiB: closed before it is buffered
        self.assertTrue(tc.disconnecting)
        self.assertFalse(ta.disconnecting or tb.disconnecting)
        [event] = h.trouble("connection.dropped")
        self.assertEqual((event["peer"], event["reason"]), (c.remote_addr, "frame memory"))
        self.assertEqual(h.metrics.dropped_connections, {"frame memory": 1})
        a.dataReceived(big[1000:])   # completes: served and released
        self.assertEqual(answers(ta)[0].code, 0)
        self.assertEqual(h.governor.pending_bytes, len(big))
        b.connectionLost(Failure(ConnectionDone()))  # a close releases too
        self.assertEqual(h.governor.pending_bytes, 0)
        d, td = h.connect()
        d.dataReceived(big)
        self.assertEqual(answers(td)[0].code, 0)

    def test_small_partial_frames_are_not_accounted(self):
        h = Harness(self, limits=ServerLimits(max_pending_frame_bytes=1))
        proto, t = h.connect()
        proto.dataReceived(request(body=b"x" * 5000)[:100])
        self.assertFalse(t.disconnecting)
        self.assertEqual(h.governor.pending_bytes, 0)


class SlowPeerTests(SynchronousTestCase):
    def test_slow_loris_trickle_is_closed_after_the_idle_time(self):
        h = Harness(self, idle_seconds=10)
        proto, t = h.connect()
        frame = request(body=b"y" * 100)
        for i in range(8):  # one byte every 4 s: never idle, but the frame never completes
            proto.dataReceived(frame[i:i + 1])
            h.clock.advance(4)
            if t.disconnecting:
                break
        self.assertTrue(t.disconnecting)
        self.assertLessEqual(i, 5)
        [event] = h.trouble("connection.expired")
        self.assertEqual((event["peer"], event["reason"]), (proto.remote_addr, "slow frame"))
        self.assertIn(("idle", proto.channel.channel_id), h.listener.events)
        self.assertEqual(h.governor.drops, {"slow frame": 1})
        self.assertEqual(h.metrics.dropped_connections, {"slow frame": 1})

    def test_slow_but_complete_frames_are_fine(self):
        h = Harness(self, idle_seconds=10)
        proto, t = h.connect()
        for i in range(10):
            frame = request(opaque=i)
            proto.dataReceived(frame[:5])
            h.clock.advance(6)
            proto.dataReceived(frame[5:])
            h.clock.advance(3)
        self.assertFalse(t.disconnecting)
        self.assertEqual(len(answers(t)), 10)

    def test_silent_connection_is_an_idle_expiry(self):
        h = Harness(self, idle_seconds=10)
        proto, t = h.connect()
        h.clock.advance(10)
        self.assertTrue(t.disconnecting)
        [event] = h.trouble("connection.expired")
        self.assertEqual(event["reason"], "idle")

    def test_never_reading_peer_is_paused_then_expired(self):
        h = Harness(self, idle_seconds=30)
        t = BoundedTransport(limit=64 * 1024)
        proto, _ = h.connect(t)
        big = request(body=b"q" * 4000)
        while not t.reads_paused:
            proto.dataReceived(big)
        buffered = len(t.value())
        h.clock.advance(29)
        self.assertFalse(t.disconnecting)
        self.assertEqual(len(t.value()), buffered)  # nothing more was produced while paused
        h.clock.advance(1)
        self.assertTrue(t.disconnecting)
        self.assertEqual(h.trouble("connection.expired")[0]["reason"], "idle")


class ServiceTroubleTests(SynchronousTestCase):
    """The services' own trouble lines (Java's text) carry the same structured fields."""

    def test_queue_full_and_broker_expiry_events(self):
        from rocketpy.namesrv.model import UnRegisterBrokerRequest
        from rocketpy.service.liveness import ScanNotActiveBrokerService
        from rocketpy.service.unregistration import BatchUnregistrationService
        events = []
        request = UnRegisterBrokerRequest("c", "10.0.0.7:10911", "b", 0, channel_id=3)
        batch = BatchUnregistrationService(lambda b: None, task.Clock(), capacity=1)
        batch.log = Logger(observer=events.append)
        self.assertTrue(batch.submit(request))
        self.assertFalse(batch.submit(request))
        scan = ScanNotActiveBrokerService(lambda now: [(request, 3)], lambda cid, why: True,
                                          batch.submit, task.Clock())
        scan.log = Logger(observer=events.append)
        scan.run_once()
        found = [(e["rocketpy_event"], e["peer"], e["reason"]) for e in events
                 if "rocketpy_event" in e]
        self.assertEqual(found[:2], [("queue.full", "10.0.0.7:10911", "unregistration queue full"),
                                     ("broker.expired", "10.0.0.7:10911", "no heartbeat")])


# -- configuration ------------------------------------------------------------------------------

class ConfigTests(SynchronousTestCase):
    def test_defaults_and_keys(self):
        limits = ServerLimits()
        for key, attr, default, meaning in LIMIT_KEYS:
            self.assertEqual(getattr(limits, attr), default, key)
            self.assertTrue(key.startswith("server") and meaning)

    def test_from_properties(self):
        limits = ServerLimits.from_properties({"serverMaxConnections": " 3000 ",
                                               "serverRequestsPerTurn": "0", "other": "x"})
        self.assertEqual((limits.max_connections, limits.requests_per_turn), (3000, 0))
        with self.assertRaises(ValueError):
            ServerLimits.from_properties({"serverShedRequestsPerTurn": "lots"})
        with self.assertRaises(ValueError):
            ServerLimits.from_properties({"serverMaxConnections": "-1"})

    def test_twistd_options(self):
        options = Options()
        options.parseOptions(["-D", "serverMaxConnections=123",
                              "-D", "serverFairRequestsPerTurn=4"])
        self.assertEqual(options["limits"].max_connections, 123)
        self.assertEqual(options["limits"].fair_requests_per_turn, 4)
        with self.assertRaises(SystemExit):    # one line on stderr (service.startup.StartError)
            Options().parseOptions(["-D", "serverMaxConnections=many"])

    def test_default_listen_binds_every_address_like_java(self):
        options = Options()
        options.parseOptions([])
        self.assertEqual(options["listen"], "tcp:9876:interface=0.0.0.0:backlog=1024")
        options = Options()
        options.parseOptions(["-D", "bindAddress=10.1.2.3"])
        self.assertEqual(options["listen"], "tcp:9876:interface=10.1.2.3:backlog=1024")
        self.assertEqual(default_listen(9876, "::1"), r"tcp:9876:interface=\:\:1:backlog=1024")

    def test_trouble_event_names_are_documented(self):
        for name in ("connection.refused", "frame.bad", "request.shed", "connection.expired",
                     "connection.dropped", "queue.full", "broker.expired"):
            self.assertIn(name, TROUBLE_EVENTS)


class OpenFilesTests(SynchronousTestCase):
    def test_soft_limit_is_raised_towards_the_wanted_value(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.assertTrue(hard == resource.RLIM_INFINITY or hard >= 512,
                        "the hard open files limit is below 512: raise it (ulimit -Hn 4096, "
                        "as root) and run again")
        low = 256
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        try:
            events = []
            self.patch(limits_module, "log", Logger(observer=events.append))
            old, new = raise_open_files_limit(400)
            self.assertEqual((old, new), (low, 400))
            self.assertEqual(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 400)
            self.assertEqual(raise_open_files_limit(300), (400, 400))  # already enough
            if hard != resource.RLIM_INFINITY:
                old, new = raise_open_files_limit(hard + 1)
                self.assertEqual(new, hard)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def test_the_connection_cap_is_what_the_open_files_limit_holds(self):
        """The default cap lowered to what fits is an info line; a configured one that does
        not fit is a warning; so is a limit that fits fewer than MIN_DEFAULT_CONNECTIONS (issue
        30: every default start logged 'open files limit ... is below serverMaxConnections')."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            return self.assertEqual(connection_cap(50_000, configured=True), 50_000)
        events = []
        self.patch(limits_module, "log", Logger(observer=events.append))
        try:
            self.assertEqual(connection_cap(hard - OPEN_FILES_MARGIN, configured=True),
                             hard - OPEN_FILES_MARGIN)   # fits: nothing to say
            self.assertEqual([e["log_level"] for e in events if "connections" in e["log_format"]], [])
            self.assertEqual(connection_cap(hard + 50_000, configured=False), hard - OPEN_FILES_MARGIN)
            self.assertEqual(events[-1]["log_level"], LogLevel.info
                             if hard - OPEN_FILES_MARGIN >= MIN_DEFAULT_CONNECTIONS else LogLevel.warn)
            self.assertEqual(connection_cap(hard + 50_000, configured=True), hard - OPEN_FILES_MARGIN)
            self.assertEqual(events[-1]["log_level"], LogLevel.warn)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
