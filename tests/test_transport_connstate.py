"""Transport: the connection's states and pause reasons (``rocketpy.transport.connstate``), the
TLS sniffer in isolation (``sniff``), the adapter for Twisted's shared read size / high-water
mark, the socket peek and the direct write (``tuning``), and the governor's two-method view of a
connection.

And the case the hand-written resume conditions got wrong: a throttled peer that half-closed
(``shutdown(SHUT_WR)``) was taken for gone when its turn came -- the peek saw the end of the
stream -- and reset with its requests unanswered."""
import itertools
import socket

from twisted.internet import task
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import ITLSTransport
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport.connstate import (CLOSED, CLOSING, DECODE, DRAINING, EVENTS, FLOW, OPEN,
                                          OVERLOAD, PAUSE_REASONS, SNIFFING, STATES, TRANSITIONS,
                                          ConnectionState, PauseReasons)
from rocketpy.transport.interfaces import IGovernedConnection
from rocketpy.transport.limits import LoadGovernor, ServerLimits
from rocketpy.transport.sniff import PLAIN, TLS, Refusal, sniff, start_tls
from rocketpy.transport.tuning import READ_AHEAD_MAX, TransportTuning

HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


class Echo:
    def __init__(self):
        self.seen = []

    def process(self, request, channel, now_ms):
        self.seen.append(request.opaque)
        return request.create_response(0)


def request(opaque):
    return RemotingCommand.request(1, {"k": "v"}, opaque=opaque, version=479).encode()


def opaques(transport):
    frames, rest = split_frames(transport.value())
    assert rest == b""
    return [decode_frame(f).opaque for f in frames]


@implementer(ITLSTransport)
class TlsCapable(StringTransport):
    """Records ``startTLS`` and what the TLS layer (``protocol`` after it) is given."""

    def __init__(self):
        super().__init__()
        self.tls_fed = []
        self.protocol = None

    def startTLS(self, context_factory):
        self.started_with = context_factory
        self.protocol = self  # the TLS layer now receives the socket's bytes

    def dataReceived(self, data):
        self.tls_fed.append(data)


def connect(transport=None, **kwargs):
    kwargs.setdefault("tls_mode", TlsMode.DISABLED)
    factory = RemotingServerFactory(Echo(), None, clock=task.Clock(), idle_seconds=0, **kwargs)
    proto = factory.buildProtocol(None)
    transport = transport if transport is not None else StringTransport()
    proto.makeConnection(transport)
    return factory, proto, transport


# -- the table -----------------------------------------------------------------------------

def received(sock):
    """Everything a non-blocking socket has been sent so far."""
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        out += chunk


class TransitionTableTests(SynchronousTestCase):
    def test_every_state_event_pair_is_written_once(self):
        self.assertEqual(set(TRANSITIONS), set(itertools.product(STATES, EVENTS)))
        for (state, event), new in TRANSITIONS.items():
            with self.subTest(state=state, event=event):
                self.assertIn(new, STATES)
                if event == "lost":
                    self.assertEqual(new, CLOSED)          # the transport gone: always closed
                elif state in (CLOSING, CLOSED):
                    self.assertEqual(new, state)           # nothing reopens a closed connection
                elif event == "close":
                    self.assertEqual(new, CLOSING)
                elif event == "read_closed":
                    self.assertEqual(new, DRAINING)
                elif state == SNIFFING:
                    self.assertEqual(new, OPEN)            # either verdict: serve
                else:
                    self.assertEqual(new, state)           # a verdict only counts once

    def test_fire_says_whether_the_state_changed(self):
        machine = ConnectionState()
        self.assertTrue(machine.fire("plain"))
        self.assertFalse(machine.fire("tls"))
        self.assertFalse(machine.closing)
        self.assertTrue(machine.fire("close"))
        self.assertTrue(machine.closing)
        self.assertFalse(machine.fire("close"))
        self.assertTrue(machine.fire("lost"))
        self.assertEqual(machine.state, CLOSED)

    def test_the_protocol_walks_the_table(self):
        """Each pair reached through the protocol's own entry points lands where the table
        says, with the effect that state has on the transport."""
        # sniffing --plain--> open: served
        _, proto, t = connect()
        self.assertEqual(proto.state, SNIFFING)
        proto.dataReceived(request(1))
        self.assertEqual((proto.state, opaques(t)), (OPEN, [1]))
        # open --read_closed--> draining --(nothing left)--> closing
        proto.readConnectionLost()
        self.assertEqual(proto.state, CLOSING)
        self.assertTrue(t.disconnecting)
        # closing --lost--> closed
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(proto.state, CLOSED)
        proto.close("again")  # closed --close--> closed: nothing happens
        self.assertEqual(proto.state, CLOSED)
        # sniffing --tls--> open: the peeked bytes go to the TLS layer
        tls = TlsCapable()
        _, proto, _ = connect(tls, tls_mode=TlsMode.PERMISSIVE, tls_context_factory=object())
        proto.dataReceived(HELLO)
        self.assertEqual((proto.state, tls.tls_fed), (OPEN, [HELLO]))
        # sniffing --refused--> closing
        _, proto, t = connect(tls_mode=TlsMode.ENFORCING)
        proto.dataReceived(request(2))
        self.assertEqual(proto.state, CLOSING)
        self.assertTrue(t.disconnecting)
        # sniffing --lost--> closed
        _, proto, _ = connect()
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(proto.state, CLOSED)


# -- pause reasons ---------------------------------------------------------------------------

class PauseReasonsTests(SynchronousTestCase):
    def test_reading_resumes_only_when_the_last_reason_is_cleared(self):
        """Every set of reasons, cleared in every order: the transport is told to stop at the
        first and to read again at the last, never in between."""
        for n in range(1, len(PAUSE_REASONS) + 1):
            for added in itertools.permutations(PAUSE_REASONS, n):
                for cleared in itertools.permutations(added):
                    reasons = PauseReasons()
                    stops = [reasons.pause(r) for r in added]
                    self.assertEqual(stops, [True] + [False] * (n - 1))
                    self.assertFalse(reasons.pause(added[0]))  # twice: still one reason
                    resumes = [reasons.resume(r) for r in cleared]
                    self.assertEqual(resumes, [False] * (n - 1) + [True], (added, cleared))
                    self.assertFalse(reasons.resume(cleared[0]))  # not paused for it any more
                    self.assertFalse(reasons)

    def test_the_protocol_pauses_the_transport_per_reason(self):
        _, proto, t = connect()
        proto.dataReceived(request(1))
        proto.pauseProducing()
        proto._paused_for(DECODE)
        proto._paused_for(OVERLOAD)
        self.assertEqual(t.producerState, "paused")
        proto.dataReceived(request(2))       # arrives anyway (a TLS layer): held
        for reason in (FLOW, OVERLOAD):
            proto._resumed_from(reason)
            self.assertEqual((t.producerState, opaques(t)), ("paused", [1]))
        proto._resumed_from(DECODE)
        self.assertEqual((t.producerState, opaques(t)), ("producing", [1, 2]))


# -- the sniffer -------------------------------------------------------------------------------

class SnifferTests(SynchronousTestCase):
    def test_verdict_for_every_mode_first_byte_and_context(self):
        expected = {
            (TlsMode.DISABLED, 0x16, True): "tls disabled",
            (TlsMode.DISABLED, 0x16, False): "tls disabled",
            (TlsMode.DISABLED, 0x00, True): PLAIN,
            (TlsMode.DISABLED, 0x00, False): PLAIN,
            (TlsMode.PERMISSIVE, 0x16, True): TLS,
            (TlsMode.PERMISSIVE, 0x16, False): "no tls context",
            (TlsMode.PERMISSIVE, 0x00, True): PLAIN,
            (TlsMode.PERMISSIVE, 0x00, False): PLAIN,
            (TlsMode.ENFORCING, 0x16, True): TLS,
            (TlsMode.ENFORCING, 0x16, False): "no tls context",
            (TlsMode.ENFORCING, 0x00, True): "tls enforcing",
            (TlsMode.ENFORCING, 0x00, False): "tls enforcing",
        }
        for (mode, first, context), want in expected.items():
            got = sniff(first, mode, context)
            if isinstance(got, Refusal):
                self.assertIn("{peer}", got.message)
                got = got.reason
            self.assertEqual(got, want, (mode, first, context))

    def test_start_tls_hands_the_peeked_bytes_to_the_tls_layer(self):
        t = TlsCapable()
        context = object()
        start_tls(t, context, HELLO)
        self.assertIs(t.started_with, context)
        self.assertEqual(t.tls_fed, [HELLO])

    def test_a_transport_that_cannot_start_tls_is_refused(self):
        factory, proto, t = connect(tls_mode=TlsMode.PERMISSIVE, tls_context_factory=object())
        proto.dataReceived(HELLO)
        self.assertTrue(t.disconnecting)
        self.assertEqual(factory.metrics.refused_connections, {"no tls context": 1})


# -- the adapter ---------------------------------------------------------------------------------

class Sized(StringTransport):
    bufferSize = 65536


class TuningTests(SynchronousTestCase):
    def test_read_size_and_high_water_mark_are_two_names(self):
        t = Sized()
        tuning = TransportTuning(t, high_water_mark=4096)
        self.assertEqual((tuning.high_water_mark, tuning.read_size), (4096, 4096))
        tuning.read_up_to(300_000)
        self.assertEqual((tuning.high_water_mark, tuning.read_size), (4096, 300_000))
        tuning.read_up_to(10 * READ_AHEAD_MAX)
        self.assertEqual(tuning.read_size, READ_AHEAD_MAX)
        tuning.before_write()
        self.assertEqual(t.bufferSize, 4096)  # what Twisted measures a write against

    def test_a_transport_without_those_is_left_alone(self):
        t = StringTransport()
        tuning = TransportTuning(t, high_water_mark=4096)
        tuning.read_up_to(300_000)
        tuning.before_write()
        self.assertFalse(hasattr(t, "bufferSize"))
        self.assertEqual((tuning.read_size, tuning.high_water_mark), (0, 0))
        self.assertFalse(tuning.peer_gone())

    def test_peer_gone_means_reset_not_end_of_stream(self):
        for how, gone in (("reset", True), ("half-close", False), ("there", False)):
            ours, theirs = socket.socketpair()
            self.addCleanup(ours.close)
            t = Handled(ours)
            if how == "reset":
                ours.send(b"x")
                theirs.close()      # closed with unread data: a reset
            elif how == "half-close":
                theirs.shutdown(socket.SHUT_WR)
            self.addCleanup(theirs.close)
            self.assertEqual(TransportTuning(t).peer_gone(), gone, how)


class DirectWriteTests(SynchronousTestCase):
    """A write goes straight to the socket when the TCP transport has nothing queued: no round
    through the reactor (no writer registered), and bytes in order whatever is queued."""

    def connection(self):
        from twisted.internet.tcp import Connection
        from twisted.internet.testing import MemoryReactor
        listener = socket.create_server(("127.0.0.1", 0))
        theirs = socket.socket()
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)   # small buffers: a big
        theirs.connect(listener.getsockname())                         # write fills them
        ours, _ = listener.accept()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
        listener.close()
        for s in (ours, theirs):
            s.setblocking(False)
            self.addCleanup(s.close)
        reactor = MemoryReactor()
        conn = Connection(ours, TLSLayer(), reactor)
        conn.connected = 1
        return conn, reactor, theirs

    def test_nothing_queued_is_sent_at_once(self):
        conn, reactor, theirs = self.connection()
        TransportTuning(conn).write(b"answer")
        self.assertEqual(received(theirs), b"answer")
        self.assertEqual((reactor.writers, conn.dataBuffer, conn._tempDataLen), (set(), b"", 0))

    def test_behind_queued_bytes_it_is_queued_too(self):
        conn, reactor, theirs = self.connection()
        conn.write(b"first,")                  # queued: the reactor's next pass sends it
        TransportTuning(conn).write(b"second")
        self.assertEqual(received(theirs), b"")
        self.assertEqual(reactor.writers, {conn})
        conn.doWrite()
        self.assertEqual(received(theirs), b"first,second")

    def test_what_the_socket_does_not_take_is_queued_in_order(self):
        conn, reactor, theirs = self.connection()
        data = bytes(range(256)) * 8192        # 2 MiB: more than a socket buffer holds
        tuning = TransportTuning(conn)
        tuning.write(data)
        tuning.write(b"tail")
        self.assertEqual(reactor.writers, {conn})
        got = b""
        for _ in range(10_000):                # bounded: the socket drains, the reactor writes
            got += received(theirs)
            if conn in reactor.writers:
                conn.doWrite()
            elif len(got) == len(data) + 4:
                break
        self.assertEqual(got, data + b"tail")

    def test_tls_and_closing_connections_are_written_as_before(self):
        conn, reactor, theirs = self.connection()
        conn.TLS = True                        # (Twisted hands TLS writes to its TLS layer)
        TransportTuning(conn).write(b"answer")
        self.assertEqual((received(theirs), conn.protocol.written), (b"", [b"answer"]))
        conn, reactor, theirs = self.connection()
        conn.disconnecting = True
        TransportTuning(conn).write(b"answer")
        self.assertEqual((received(theirs), conn._tempDataBuffer), (b"", [b"answer"]))

    def test_other_transports_are_written_as_usual(self):
        t = StringTransport()
        TransportTuning(t).write(b"answer")
        self.assertEqual(t.value(), b"answer")


class TLSLayer:
    """What a TCP connection hands its writes to once TLS has started (its ``protocol``)."""

    def __init__(self):
        self.written = []

    def write(self, data):
        self.written.append(data)


class Handled(StringTransport):
    """A transport with a real socket behind ``getHandle`` (``ISystemHandle``); reading the
    private ``socket`` attribute fails the test."""

    def __init__(self, sock):
        super().__init__()
        self._sock = sock

    def getHandle(self):
        return self._sock

    @property
    def socket(self):
        raise AssertionError("transport.socket is private to Twisted")


# -- the governor's view ---------------------------------------------------------------------------

LIMITS = ServerLimits(requests_per_turn=10, fair_requests_per_turn=2, shed_requests_per_turn=5)


class GovernedConnectionTests(SynchronousTestCase):
    def test_the_protocol_provides_the_governors_interface(self):
        _, proto, _ = connect()
        verifyObject(IGovernedConnection, proto)
        self.assertEqual(sorted(IGovernedConnection.names()),
                         ["is_closing", "remote_addr", "unthrottle"])

    def test_the_governor_needs_nothing_else(self):
        """Connections that provide only the interface go through turns and the queue."""
        clock = task.Clock()
        governor = LoadGovernor(ServerLimits(requests_per_turn=2, fair_requests_per_turn=1),
                                clock)
        governor.timer = lambda: 0.0

        @implementer(IGovernedConnection)
        class Bare:
            __slots__ = ("remote_addr", "turns", "closed")

            def __init__(self, name, closed=False):
                self.remote_addr, self.turns, self.closed = name, 0, closed

            def unthrottle(self):
                self.turns += 1
                governor.spent(self, 2, 0)  # its quantum uses up the turn

            def is_closing(self):
                return self.closed

        conns = [Bare("a"), Bare("b"), Bare("c", closed=True), Bare("d")]
        for conn in conns:
            verifyObject(IGovernedConnection, conn)
            governor.throttle(conn)
        clock.advance(0)  # one turn each (each uses it up), in order; the closing one dropped
        self.assertEqual([c.turns for c in conns], [1, 1, 0, 1])
        self.assertEqual(governor.turns, 4)

    def _throttled(self, sock):
        clock = task.Clock()
        factory = RemotingServerFactory(Echo(), None, clock=clock, tls_mode=TlsMode.DISABLED,
                                        limits=LIMITS, idle_seconds=0)
        factory.governor.timer = lambda: 0.0
        proto = factory.buildProtocol(None)
        t = Handled(sock)
        proto.makeConnection(t)
        proto.dataReceived(b"".join(request(i) for i in range(30)))
        self.assertTrue(proto.throttled)
        self.assertEqual(len(opaques(t)), 12)  # 12 served, 18 held
        return clock, proto, t

    def test_a_throttled_peer_that_half_closed_gets_every_answer(self):
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        clock, proto, t = self._throttled(ours)
        theirs.shutdown(socket.SHUT_WR)  # sent everything, waits for the answers
        clock.advance(0)                 # its turn: the peek sees the end of the stream
        self.assertFalse(getattr(t, "disconnected", False))
        proto.readConnectionLost()       # what the reactor then reads
        clock.advance(0)
        self.assertEqual(opaques(t), list(range(30)))
        self.assertTrue(t.disconnecting)  # everything answered: closed

    def test_a_throttled_peer_that_reset_is_dropped(self):
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        clock, proto, t = self._throttled(ours)
        ours.send(b"x")
        theirs.close()
        clock.advance(0)
        self.assertEqual(len(opaques(t)), 12)  # nothing more served
        self.assertTrue(getattr(t, "disconnected", False))  # aborted (StringTransport)
