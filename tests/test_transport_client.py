"""RemotingClient: opaque matching, cached connections and reconnects, the timeout scan, the
in-flight semaphores, oneway flow control, requests from the peer, bad input (task.Clock, iosim).
"""
from twisted.internet.interfaces import IPushProducer
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.layout import split_frames
from rocketpy.transport.client import (OnewayNotifier, RemotingClient, RemotingCommandError,
                                       RemotingConnectError, RemotingSendRequestError,
                                       RemotingTimeoutError, RemotingTooMuchRequestError,
                                       check_response, split_address)
from clientsim import Peer, accept, refuse

ADDR = "127.0.0.1:9876"


def request(code=106, **ext):
    return RemotingCommand.request(code, ext or None, version=409)


def ok(body=None):
    return RemotingCommand(code=0, version=409, body=body)


class ClientTest(SynchronousTestCase):
    def setUp(self):
        self.reactor = MemoryReactorClock()
        self.client = RemotingClient(self.reactor)

    def results(self, d):
        out = []
        d.addBoth(out.append)
        return out


class InvokeTests(ClientTest):
    def test_request_bytes_opaque_and_answer(self):
        d = self.client.invoke(ADDR, request(105, topic="TopicA"))
        self.assertEqual(self.reactor.tcpClients[0][:2], ("127.0.0.1", 9876))
        self.assertEqual(self.reactor.tcpClients[0][3], 3.0)  # connectTimeoutMillis
        peer, pump = accept(self.reactor)
        [sent] = peer.requests
        self.assertEqual((sent.code, sent.opaque, sent.flag, sent.version), (105, 0, 0, 409))
        self.assertEqual(peer.frames[0], request(105, topic="TopicA").encode())  # opaque 0 = as built
        peer.answer(sent, ok(b"{}"))
        pump.flush()
        self.assertEqual(self.successResultOf(d).body, b"{}")
        self.assertEqual(self.client.in_flight(), 0)

    def test_one_connection_per_address_and_answers_out_of_order(self):
        first = self.client.invoke(ADDR, request())
        second = self.client.invoke(ADDR, request())
        other = self.client.invoke("127.0.0.1:9877", request())
        self.assertEqual(len(self.reactor.tcpClients), 2)
        peer, pump = accept(self.reactor, index=0)
        self.assertEqual([r.opaque for r in peer.requests], [0, 1])
        peer.answer(peer.requests[1], ok(b"two"))
        peer.answer(peer.requests[0], ok(b"one"))
        pump.flush()
        self.assertEqual(self.successResultOf(first).body, b"one")
        self.assertEqual(self.successResultOf(second).body, b"two")
        self.assertNoResult(other)
        self.assertEqual(sorted(self.client.addresses), [ADDR, "127.0.0.1:9877"])

    def test_answer_fed_one_byte_at_a_time(self):
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        frame = RemotingCommand(code=0, flag=1, body=b"x" * 100).encode()  # opaque 0: ours
        client_proto = pump.client
        for i in range(len(frame)):
            client_proto.dataReceived(frame[i:i + 1])
        self.assertEqual(self.successResultOf(d).body, b"x" * 100)

    def test_error_codes_are_answers_and_check_response_names_them(self):
        d = self.client.invoke(ADDR, request(105, topic="Nope"))
        peer, pump = accept(self.reactor)
        peer.answer(peer.requests[0], RemotingCommand(code=17, remark="No topic route info\nSee x"))
        pump.flush()
        answer = self.successResultOf(d)
        with self.assertRaises(RemotingCommandError) as caught:
            check_response(answer, ADDR)
        self.assertEqual(caught.exception.code, 17)
        self.assertIn("CODE: 17 (TOPIC_NOT_EXIST) DESC: No topic route info", str(caught.exception))

    def test_rpc_hook_changes_the_request(self):
        def hook(addr, command):
            command.ext_fields = dict(command.ext_fields or {}, AccessKey=addr)
            return command
        self.client.rpc_hook = hook
        self.client.invoke(ADDR, request(105, topic="T"))
        peer, _ = accept(self.reactor)
        self.assertEqual(peer.requests[0].ext_fields, {"topic": "T", "AccessKey": ADDR})

    def test_opaque_wraps_like_a_java_int(self):
        self.client._next_opaque = 0x7FFFFFFF
        self.client.invoke(ADDR, request())
        self.client.invoke(ADDR, request())
        peer, _ = accept(self.reactor)
        self.assertEqual([r.opaque for r in peer.requests], [0x7FFFFFFF, -0x80000000])

    def test_unencodable_request_and_bad_address_fail_at_once(self):
        self.failureResultOf(self.client.invoke("nohost", request()), RemotingSendRequestError)
        big = RemotingCommand.request(200050, serialize_type=1)  # does not fit a binary header
        self.failureResultOf(self.client.invoke(ADDR, big), RemotingSendRequestError)

    def test_unmatched_answer_is_dropped(self):
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        stray = RemotingCommand(code=0, opaque=99, flag=1)
        peer.transport.write(stray.encode())
        pump.flush()
        self.assertNoResult(d)
        self.flushLoggedErrors()

    def test_a_flood_of_stray_answers_is_logged_logarithmically(self):
        """A hostile peer answering nothing we asked cannot fill the log: the 1st, 2nd, 4th,
        ... stray answer on a connection is logged, with the count."""
        from twisted.logger import globalLogPublisher
        seen = []
        observer = seen.append
        globalLogPublisher.addObserver(observer)
        try:
            d = self.client.invoke(ADDR, request())
            peer, pump = accept(self.reactor)
            peer.transport.write(b"".join(RemotingCommand(code=0, opaque=1000 + i, flag=1).encode()
                                          for i in range(1000)))
            pump.flush()
        finally:
            globalLogPublisher.removeObserver(observer)
        stray = [e for e in seen if "not matched any request" in e.get("log_format", "")]
        self.assertEqual([e["n"] for e in stray], [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
        self.assertNoResult(d)
        peer.answer(peer.requests[0], ok())          # the connection still serves its request
        pump.flush()
        self.successResultOf(d)


class TimeoutTests(ClientTest):
    def test_timeout_from_the_scan_then_late_answer_dropped(self):
        d = self.client.invoke(ADDR, request(105, topic="T"), timeout=3.0)
        peer, pump = accept(self.reactor)
        self.reactor.advance(2.0)
        self.assertNoResult(d)
        self.reactor.advance(1.0)
        failure = self.failureResultOf(d, RemotingTimeoutError)
        self.assertIn("127.0.0.1:9876", failure.getErrorMessage())
        self.assertIn("3000(ms)", failure.getErrorMessage())
        peer.answer(peer.requests[0], ok())
        pump.flush()
        # the connection stays (clientCloseSocketIfTimeout=false) and serves the next call
        d2 = self.client.invoke(ADDR, request())
        pump.flush()
        peer.answer(peer.requests[1], ok(b"next"))
        pump.flush()
        self.assertEqual(self.successResultOf(d2).body, b"next")
        self.assertEqual(len(self.reactor.tcpClients), 1)

    def test_deadline_counts_the_connect_time(self):
        d = self.client.invoke(ADDR, request(), timeout=2.0)
        self.reactor.advance(1.5)
        accept(self.reactor)
        self.reactor.advance(0.5)
        self.failureResultOf(d, RemotingTimeoutError)

    def _scans(self):
        """The delayed calls other than the connections' idle timers."""
        idle = {channel.idle_call for channel in self.client._channels.values()}
        return [call for call in self.reactor.getDelayedCalls() if call not in idle]

    def test_scan_stops_when_nothing_waits(self):
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        self.assertEqual(len(self._scans()), 1)
        peer.answer(peer.requests[0], ok())
        pump.flush()
        self.successResultOf(d)
        self.reactor.advance(1.0)
        self.assertEqual(self._scans(), [])

    def test_an_idle_connection_is_closed_and_reopened_on_demand(self):
        """Java's clientChannelMaxIdleTimeSeconds: connections to addresses no longer used
        (brokers notified once, NameServers dropped from a list) do not pile up."""
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        peer.answer(peer.requests[0], ok())
        pump.flush()
        self.successResultOf(d)
        self.reactor.advance(100)
        self.successResultOf(self.client.invoke_oneway(ADDR, request(904)))   # traffic at 100 s
        pump.flush()
        self.assertEqual(len(peer.requests), 2)
        self.reactor.advance(119)
        proto = self.client._channels[ADDR].proto
        self.assertFalse(proto.transport.disconnecting)
        self.reactor.advance(2)                      # 120 s after the last frame
        self.assertTrue(proto.transport.disconnecting)
        self.assertNotIn(ADDR, self.client._channels)
        self.assertEqual(self.reactor.getDelayedCalls(), [])
        self.client.invoke(ADDR, request())
        self.assertEqual(len(self.reactor.tcpClients), 2)


class ConnectionTests(ClientTest):
    def test_connect_failure_then_reconnect_on_demand(self):
        d = self.client.invoke(ADDR, request())
        oneway = self.client.invoke_oneway(ADDR, request(904))
        refuse(self.reactor)
        failure = self.failureResultOf(d, RemotingConnectError)
        self.assertIn("connect to 127.0.0.1:9876 failed", failure.getErrorMessage())
        self.failureResultOf(oneway, RemotingConnectError)
        self.assertEqual(self.client.addresses, [])
        d2 = self.client.invoke(ADDR, request())
        self.assertEqual(len(self.reactor.tcpClients), 2)
        peer, pump = accept(self.reactor)
        peer.answer(peer.requests[0], ok())
        pump.flush()
        self.successResultOf(d2)

    def test_connection_lost_fails_waiting_requests_and_next_call_reconnects(self):
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        peer.transport.loseConnection()
        pump.flush()
        self.failureResultOf(d, RemotingSendRequestError)
        self.assertEqual(self.client.in_flight(), 0)
        self.client.invoke(ADDR, request())
        self.assertEqual(len(self.reactor.tcpClients), 2)

    def test_frames_wait_in_order_while_connecting(self):
        for code in (103, 904, 105):
            if code == 904:
                self.client.invoke_oneway(ADDR, request(code))
            else:
                self.client.invoke(ADDR, request(code))
        peer, _ = accept(self.reactor)
        self.assertEqual([(r.code, r.flag) for r in peer.requests], [(103, 0), (904, 2), (105, 0)])

    def test_bad_frame_from_the_peer_closes_and_fails(self):
        d = self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        peer.transport.write(b"\x00\x00\x00\x06\x00\x00\x00\x09{}")  # header runs past the frame
        pump.flush()
        self.failureResultOf(d, RemotingSendRequestError)
        self.assertTrue(pump.client.transport.disconnecting)

    def test_close_channel_and_shutdown(self):
        d = self.client.invoke(ADDR, request())
        accept(self.reactor)
        self.assertTrue(self.client.close_channel(ADDR))
        self.assertFalse(self.client.close_channel(ADDR))
        self.failureResultOf(d, RemotingSendRequestError)
        pending = self.client.invoke("127.0.0.1:1", request())  # still connecting
        self.client.shutdown()
        self.failureResultOf(pending, RemotingSendRequestError)
        self.failureResultOf(self.client.invoke(ADDR, request()), RemotingSendRequestError)

    def test_client_protocol_is_a_push_producer(self):
        self.client.invoke(ADDR, request())
        _, pump = accept(self.reactor)
        verifyObject(IPushProducer, pump.client)


class SemaphoreTests(ClientTest):
    def setUp(self):
        self.reactor = MemoryReactorClock()
        self.client = RemotingClient(self.reactor, async_permits=2, oneway_permits=2)

    def test_in_flight_bound_per_connection(self):
        calls = [self.client.invoke(ADDR, request(), timeout=10) for _ in range(3)]
        other = self.client.invoke("127.0.0.1:9877", request(), timeout=10)
        peer, pump = accept(self.reactor, index=0)
        self.assertEqual(len(peer.requests), 2)  # the third waits for a permit
        peer.answer(peer.requests[0], ok())
        pump.flush()
        self.assertEqual(len(peer.requests), 3)
        self.assertEqual(self.client.in_flight(ADDR), 2)
        other_peer, _ = accept(self.reactor, index=1)
        self.assertEqual(len(other_peer.requests), 1)  # another connection, its own permits
        self.successResultOf(calls[0])
        self.assertNoResult(other)

    def test_waiting_for_a_permit_times_out_as_too_much_request(self):
        [self.client.invoke(ADDR, request(), timeout=10) for _ in range(2)]
        waiting = self.client.invoke(ADDR, request(), timeout=2)
        accept(self.reactor)
        self.reactor.advance(2)
        failure = self.failureResultOf(waiting, RemotingTooMuchRequestError)
        self.assertIn("invokeAsyncImpl tryAcquire semaphore timeout", failure.getErrorMessage())

    def test_oneway_permits_bound_frames_a_full_socket_holds_back(self):
        self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        pump.client.pauseProducing()  # the transport's write buffer is full
        held = [self.client.invoke_oneway(ADDR, request(904), timeout=1) for _ in range(3)]
        self.assertNoResult(held[0])
        self.reactor.advance(1)
        self.failureResultOf(held[2], RemotingTooMuchRequestError)
        self.assertNoResult(held[0])
        pump.client.resumeProducing()
        pump.flush()
        self.successResultOf(held[0])
        self.successResultOf(held[1])
        self.assertEqual([r.code for r in peer.requests], [106, 904, 904])
        self.assertTrue(all(r.is_oneway for r in peer.requests[1:]))


class PeerRequestTests(ClientTest):
    def test_unknown_request_answered_not_supported_and_oneway_ignored(self):
        self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        peer.transport.write(RemotingCommand.request(905, {"minBrokerId": "0"}, opaque=7,
                                                     oneway=True).encode())
        peer.transport.write(RemotingCommand.request(39, opaque=8).encode())
        pump.flush()
        answers = [r for r in peer.requests if r.is_response]
        self.assertEqual([(a.code, a.opaque, a.remark) for a in answers],
                         [(3, 8, " request type 39 not supported")])

    def test_request_handler_answers(self):
        seen = []

        def handler(addr, req):
            seen.append((addr, req.code))
            return None if req.is_oneway else req.create_response(0, remark="done")
        self.client.request_handler = handler
        self.client.invoke(ADDR, request())
        peer, pump = accept(self.reactor)
        peer.transport.write(RemotingCommand.request(905, opaque=5, oneway=True).encode())
        peer.transport.write(RemotingCommand.request(39, opaque=6).encode())
        pump.flush()
        self.assertEqual(seen, [(ADDR, 905), (ADDR, 39)])
        self.assertEqual([(a.code, a.opaque) for a in peer.requests if a.is_response], [(0, 6)])


class InvokeAnyTests(ClientTest):
    def test_keeps_the_chosen_namesrv_and_moves_on_when_one_cannot_connect(self):
        import random
        self.client = RemotingClient(self.reactor, rng=random.Random(7))
        addrs = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
        first = self.client.invoke_any(addrs, request())
        tried = self.reactor.tcpClients[0][1]
        refuse(self.reactor)  # the first try fails: the next in the list is asked
        self.assertEqual(self.reactor.tcpClients[1][1], tried % 3 + 1)
        peer, pump = accept(self.reactor, Peer(auto=lambda r: r.create_response(0)))
        addr, answer = self.successResultOf(first)
        self.assertEqual((addr, answer.code), (f"127.0.0.1:{tried % 3 + 1}", 0))
        again = self.client.invoke_any(addrs, request())  # the chosen one, while it is connected
        pump.flush()
        self.assertEqual(self.successResultOf(again)[0], addr)
        self.assertEqual(len(self.reactor.tcpClients), 2)

    def test_every_namesrv_refusing_fails_with_the_last_connect_error(self):
        d = self.client.invoke_any(["127.0.0.1:1", "127.0.0.1:2"], request())
        refuse(self.reactor, 0)
        refuse(self.reactor, 1)
        self.failureResultOf(d, RemotingConnectError)
        self.failureResultOf(self.client.invoke_any([], request()), RemotingConnectError)


class OnewayNotifierTests(SynchronousTestCase):
    def test_notifier_is_a_use_of_the_client(self):
        reactor = MemoryReactorClock()
        notifier = OnewayNotifier(reactor)
        note = RemotingCommand.request(905, {"minBrokerId": "0"}, version=479)
        notifier(["127.0.0.1:10921", "127.0.0.1:10931"], note)
        notifier(["127.0.0.1:10921"], note)        # waits: a push to 10921 is on its way
        self.assertEqual([c[:2] for c in reactor.tcpClients],
                         [("127.0.0.1", 10921), ("127.0.0.1", 10931)])
        peer, pump = accept(reactor, index=0)
        self.assertEqual([(r.code, r.flag, r.opaque) for r in peer.requests], [(905, 2, 0)])
        self.assertEqual(notifier.sent, 1)
        pump.flush()
        self.assertTrue(pump.serverIO.disconnected)   # closed once its push is written
        self.assertEqual(reactor.tcpClients[2][:2], ("127.0.0.1", 10921))   # then the next one
        later, _ = accept(reactor, index=2)
        self.assertEqual([(r.code, r.flag, r.opaque) for r in later.requests], [(905, 2, 2)])
        refuse(reactor, index=1)  # logged and dropped
        self.assertEqual((notifier.sent, notifier.failed, notifier.active), (2, 1, 0))
        notifier.close()

    def test_fan_out_is_bounded_and_each_push_channel_closed_after_its_oneway(self):
        """Issue 31 hole 6: 5,000 made-up addresses of one group are connected to
        ``concurrency`` at a time, not all at once, and no channel stays cached."""
        reactor = MemoryReactorClock()
        notifier = OnewayNotifier(reactor, concurrency=32)
        note = RemotingCommand.request(908, None, version=479)
        addrs = [f"127.0.0.{1 + i // 60000}:{1024 + i % 60000}" for i in range(5000)]
        notifier(addrs, note)
        self.assertEqual(len(reactor.tcpClients), 32)
        self.assertEqual(notifier.queued, 5000 - 32)
        most_open = 0
        for index in range(5000):
            if index % 3:
                refuse(reactor, index)
            else:
                peer, pump = accept(reactor, index=index)
                self.assertEqual([r.code for r in peer.requests], [908])
                pump.flush()
                self.assertTrue(pump.serverIO.disconnected)
            most_open = max(most_open, len(notifier.client.addresses))
            self.assertLessEqual(len(reactor.tcpClients) - index - 1, 32)
        self.assertEqual(len(reactor.tcpClients), 5000)
        self.assertLessEqual(most_open, 32)
        self.assertEqual(notifier.client.addresses, [])
        self.assertEqual((notifier.sent, notifier.failed), (1667, 3333))

    def test_a_newer_push_replaces_the_waiting_one_and_a_full_queue_drops(self):
        reactor = MemoryReactorClock()
        notifier = OnewayNotifier(reactor, concurrency=1, max_queued=2)
        old = RemotingCommand.request(908, {"masterEpoch": "1"}, version=479)
        new = RemotingCommand.request(908, {"masterEpoch": "2"}, version=479)
        notifier(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], old)
        notifier(["127.0.0.1:2"], new)          # replaces the waiting epoch-1 push
        notifier(["127.0.0.1:4"], new)          # the queue holds 2: dropped
        self.assertEqual((notifier.queued, notifier.dropped), (2, 1))
        accept(reactor, index=0)[1].flush()
        peer, _ = accept(reactor, index=1)
        self.assertEqual([(r.code, r.ext_fields) for r in peer.requests],
                         [(908, {"masterEpoch": "2"})])

    def test_addresses_that_fail_at_once_do_not_recurse(self):
        reactor = MemoryReactorClock()
        notifier = OnewayNotifier(reactor, concurrency=2)
        notifier([f"no-port-{i}" for i in range(5000)], RemotingCommand.request(908, version=479))
        self.assertEqual((notifier.failed, notifier.active, notifier.queued), (5000, 0, 0))


def test_split_address():
    assert split_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert split_address("[::1]:9876") == ("::1", 9876)
    for bad in ("", "host", "host:", ":9876", "h:0", "h:70000", "h:x"):
        try:
            split_address(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_frames_the_client_writes_are_whole_frames():
    reactor = MemoryReactorClock()
    client = RemotingClient(reactor)
    for i in range(3):
        client.invoke(ADDR, request(105, topic=f"T{i}"))
    peer, _ = accept(reactor)
    frames, rest = split_frames(b"".join(peer.frames))
    assert rest == b"" and len(frames) == 3


def test_namesrv_addr_list_and_release_numbers():
    from rocketpy.remoting.codes import release_ordinal
    from rocketpy.transport.client import namesrv_addr_list
    assert namesrv_addr_list(" 127.0.0.1:9876; 127.0.0.1:9877 ;") == ["127.0.0.1:9876", "127.0.0.1:9877"]
    for bad in (None, "", " ; ", "127.0.0.1:9876;nohost"):
        try:
            namesrv_addr_list(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    assert [release_ordinal(t) for t in ("4.9.8", "V5_0_0", " 479 ", "5.3.3")] == [409, 413, 479, 479]
    assert release_ordinal("9.9.9") is None and release_ordinal("x") is None


def test_a_peer_flooding_requests_it_never_reads_the_answers_of_stops_being_read():
    """A hostile peer (a "broker" the NameServer's notifier connects to) sends requests and never
    reads the answers: once the write buffer is full (the protocol paused), the client stops
    reading that peer instead of buffering one answer per request for ever; it reads again once
    the buffer drains."""
    from twisted.internet.testing import StringTransport
    reactor = MemoryReactorClock()
    client = RemotingClient(reactor)
    client.invoke_oneway(ADDR, request(904))
    proto = reactor.tcpClients[0][2].buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    proto.pauseProducing()                       # the socket takes no more of our bytes
    flood = RemotingCommand.request(39, opaque=8).encode()
    proto.dataReceived(flood)
    assert transport.producerState == "paused"   # no further reads from this peer
    proto.resumeProducing()
    assert transport.producerState == "producing"
