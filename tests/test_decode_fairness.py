"""Transport: the decode pool is fair between peers and stops at once (issue 20 items 3 and 4),
and holds what it has no place for (issue 33 part 3).

The pool serves per-peer queues in turn, one job at a time, and gives at most ``max_per_peer``
places to one peer host; work past its places waits in the lobby, in line by host (Java's
executor queue holds it too), and only past the lobby's bytes is it refused SYSTEM_BUSY;
``stop()`` abandons what waits and cancels what runs. A registration that waits for the pool (or
is refused SYSTEM_BUSY) still keeps its broker alive, but only the broker its own channel
registered. Against the real server: a peer's bombs neither starve another peer's registration
nor expire a live broker, brokers behind one address all registering big bodies at once are all
served, and SIGTERM stops a server whose pool is full.
"""
import re
import threading
import time
from pathlib import Path

import pytest
from twisted.trial.unittest import SynchronousTestCase

from brokerbody import register_body
from fuzzharness import odd_line_bomb, topic_line_bomb
from rocketpy.remoting import RemotingCommand, bodies
from rocketpy.remoting.budget import DecodeBudget
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import DecodeCancelled
from rocketpy.transport.offload import DecodePool
from serverproc import PATIENCE
from test_transport_offload import ThreadReactor


class PoolTests(SynchronousTestCase):
    def _pool(self, **kwargs):
        kwargs.setdefault("max_waiting_bytes", 0)   # the places alone (LobbyTests give it room)
        reactor = ThreadReactor()
        pool = DecodePool(reactor, **kwargs)
        pool.start()
        self.addCleanup(pool.stop)
        return reactor, pool

    def test_one_peer_holds_at_most_its_share(self):
        reactor, pool = self._pool(max_pending=16, max_per_peer=4)
        gate = threading.Event()
        accepted = [pool.submit(lambda: gate.wait(PATIENCE), "10.0.0.2") for _ in range(6)]
        self.assertEqual([d is not None for d in accepted], [True] * 4 + [False] * 2)
        self.assertIsNotNone(pool.submit(lambda: "other", "10.0.0.3"))
        self.assertEqual((pool.pending, pool.refused, pool.pending_by_peer),
                         (5, 2, {"10.0.0.2": 4, "10.0.0.3": 1}))
        gate.set()
        for _ in range(5):
            reactor.run_one()
        self.assertEqual((pool.pending, pool.done, pool.pending_by_peer), (0, 5, {}))

    def test_peers_are_served_in_turn(self):
        reactor, pool = self._pool()
        gate = threading.Event()
        order = []

        def job(name):
            def work():
                gate.wait(PATIENCE)
                return name
            return work

        for name in ("a1", "a2", "a3"):
            pool.submit(job(name), "10.0.0.2").addCallback(order.append)
        pool.submit(job("b1"), "10.0.0.3").addCallback(order.append)
        pool.submit(job("c1"), "10.0.0.4").addCallback(order.append)
        gate.set()
        for _ in range(5):
            reactor.run_one()
        # a1 was running when b1 and c1 came: each other peer goes before a's second job
        self.assertEqual(order, ["a1", "b1", "c1", "a2", "a3"])

    def test_stop_abandons_the_queue_and_cancels_the_running_decode(self):
        reactor, pool = self._pool(stop_wait=30)
        budget = DecodeBudget(0)
        started = threading.Event()
        ran = []

        def endless():
            started.set()
            while True:       # a decode: a budget check per chunk
                budget.spend(1 << 16, "chunk")

        results = []
        pool.submit(endless, "10.0.0.2", budget.cancel).addErrback(results.append)
        for peer in ("10.0.0.2", "10.0.0.3"):
            pool.submit(lambda: ran.append(1), peer)
        self.assertTrue(started.wait(PATIENCE))
        pool.stop()
        self.assertEqual((pool.abandoned, ran), (2, []))
        reactor.run_one()     # the cancelled decode's end, handed back
        self.assertTrue(results[0].check(DecodeCancelled))


class LobbyTests(SynchronousTestCase):
    """Work past the places waits in the lobby: in line by host, bounded by bytes, withdrawn
    when its connection closes, places given to its hosts in turn."""

    _pool = PoolTests._pool

    def test_work_past_the_places_waits_in_line_and_runs_in_order(self):
        reactor, pool = self._pool(max_pending=16, max_per_peer=4, max_waiting_bytes=1000)
        gate = threading.Event()
        self.addCleanup(gate.set)
        results = []
        for i in range(6):
            pool.submit(lambda i=i: gate.wait(PATIENCE) and i, "10.0.0.2",
                        size=100).addCallback(results.append)
        self.assertIsNotNone(pool.submit(lambda: "other", "10.0.0.3"))
        self.assertEqual((pool.pending, pool.waiting, pool.waiting_bytes, pool.refused,
                          pool.pending_by_peer), (5, 2, 200, 0, {"10.0.0.2": 4, "10.0.0.3": 1}))
        gate.set()
        for _ in range(7):
            reactor.run_one()
        self.assertEqual(results, [0, 1, 2, 3, 4, 5])
        self.assertEqual((pool.pending, pool.waiting, pool.waiting_bytes, pool.done,
                          pool.lobbied), (0, 0, 0, 7, 2))

    def test_the_lobby_is_bounded_by_the_bytes_of_what_waits(self):
        reactor, pool = self._pool(max_pending=1, max_waiting_bytes=250)
        gate = threading.Event()
        self.addCleanup(gate.set)
        self.assertIsNotNone(pool.submit(lambda: gate.wait(PATIENCE), "10.0.0.2", size=100))
        waiting = [pool.submit(lambda: 1, "10.0.0.2", size=100) for _ in range(2)]
        self.assertNotIn(None, waiting)
        self.assertIsNone(pool.submit(lambda: 1, "10.0.0.3", size=51))    # 251 bytes would wait
        self.assertIsNotNone(pool.submit(lambda: 1, "10.0.0.3", size=50))
        self.assertEqual((pool.waiting, pool.waiting_bytes, pool.refused), (3, 250, 1))

    def test_a_withdrawn_job_never_runs_and_frees_its_bytes(self):
        reactor, pool = self._pool(max_pending=1, max_waiting_bytes=1000)
        gate = threading.Event()
        self.addCleanup(gate.set)
        ran, fired = [], []
        pool.submit(lambda: gate.wait(PATIENCE) and ran.append("first"), "10.0.0.2")
        gone = pool.submit(lambda: ran.append("gone"), "10.0.0.2", size=300)
        gone.addBoth(fired.append)
        pool.submit(lambda: ran.append("next"), "10.0.0.2", size=200)
        self.assertEqual((pool.waiting, pool.waiting_bytes), (2, 500))
        self.assertTrue(pool.withdraw(gone))
        self.assertFalse(pool.withdraw(gone))
        self.assertEqual((pool.waiting, pool.waiting_bytes, pool.withdrawn), (1, 200, 1))
        gate.set()
        for _ in range(2):
            reactor.run_one()
        self.assertEqual((ran, fired, pool.waiting, pool.pending), (["first", "next"], [], 0, 0))

    def test_places_go_to_the_lobbys_hosts_in_turn(self):
        reactor, pool = self._pool(max_pending=1, max_waiting_bytes=1000)
        gate = threading.Event()
        self.addCleanup(gate.set)
        order = []
        pool.submit(lambda: gate.wait(PATIENCE) and "x", "10.0.0.1").addCallback(order.append)
        for name, host in (("a1", "10.0.0.2"), ("a2", "10.0.0.2"), ("a3", "10.0.0.2"),
                           ("b1", "10.0.0.3"), ("b2", "10.0.0.3")):
            pool.submit(lambda n=name: n, host, size=1).addCallback(order.append)
        self.assertEqual((pool.pending, pool.waiting), (1, 5))
        gate.set()
        for _ in range(6):
            reactor.run_one()
        self.assertEqual(order, ["x", "a1", "b1", "a2", "b2", "a3"])

    def test_a_job_that_gives_its_place_away_waits_first_in_its_hosts_line(self):
        reactor, pool = self._pool(max_pending=2, max_per_peer=4, max_waiting_bytes=1000)
        gate, started = threading.Event(), threading.Event()
        self.addCleanup(gate.set)
        order, gave_way = [], []

        def first():
            started.set()
            gate.wait(PATIENCE)
            return "x1"

        pool.submit(first, "10.0.0.1").addCallback(order.append)
        self.assertTrue(started.wait(PATIENCE))
        pool.submit(lambda: "x2", "10.0.0.1", size=1).addCallbacks(order.append, gave_way.append)
        pool.submit(lambda: "y1", "10.0.0.2", size=1).addCallback(order.append)   # takes x2's place
        pool.submit(lambda: "x3", "10.0.0.1", size=1).addCallback(order.append)
        self.assertEqual((pool.displaced, pool.waiting, pool.refused, gave_way), (1, 2, 0, []))
        gate.set()
        for _ in range(4):
            reactor.run_one()
        self.assertEqual(sorted(order), ["x1", "x2", "x3", "y1"])
        self.assertLess(order.index("x2"), order.index("x3"))

    def test_waiting_and_getting_a_place_cost_the_same_however_many_hosts_wait(self):
        """Counted, not timed: the reactor's lines, and its lookups of a host's places, to put n
        hosts' jobs in the lobby and to give each its place, at n and 2n: linear (a look at every
        waiting host for each place would be quadratic)."""
        import costcount

        class Lookups(dict):
            count = 0

            def get(self, *args):
                Lookups.count += 1
                return super().get(*args)

        def run(n):
            reactor, pool = self._pool(max_pending=1, max_waiting_bytes=1 << 20)
            pool.pending_by_peer = Lookups()
            gate = threading.Event()
            self.addCleanup(gate.set)
            pool.submit(lambda: gate.wait(PATIENCE), "10.0.0.1")
            Lookups.count = 0
            _, waited = costcount.python_lines(
                lambda: [pool.submit(lambda: None, f"10.1.{i // 250}.{i % 250}", size=1)
                         for i in range(n)])
            gate.set()
            looked, Lookups.count = Lookups.count, 0
            _, placed = costcount.python_lines(lambda: [reactor.run_one() for _ in range(n + 1)])
            self.assertEqual((pool.done, pool.waiting, pool.pending), (n + 1, 0, 0))
            return {"wait lines": waited, "wait lookups": looked, "place lines": placed,
                    "place lookups": Lookups.count}

        growth = costcount.growth(run(200), run(400))
        self.assertTrue(all(g < 2.3 for g in growth.values()), growth)

    def test_stop_abandons_the_lobby(self):
        reactor, pool = self._pool(max_pending=1, max_waiting_bytes=1000, stop_wait=30)
        gate, started = threading.Event(), threading.Event()
        self.addCleanup(gate.set)
        ran = []
        pool.submit(lambda: started.set() or gate.wait(PATIENCE), "10.0.0.1")
        for host in ("10.0.0.2", "10.0.0.3"):
            pool.submit(lambda: ran.append(1), host, size=10)
        self.assertTrue(started.wait(PATIENCE))
        gate.set()
        pool.stop()
        self.assertEqual((pool.abandoned, pool.waiting, pool.waiting_bytes, ran), (2, 0, 0, []))


# ------------------------------------------------------------------ the real server

def _frame(body, opaque, broker, addr, compressed=True, timeout_ms=None):
    fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": "C", "brokerId": "0",
              "haServerAddr": addr, "compressed": str(compressed).lower(),
              "bodyCrc32": str(bodies.body_crc32(body))}
    if timeout_ms is not None:
        fields["heartbeatTimeoutMillis"] = str(timeout_ms)
    return RemotingCommand.request(103, fields, body, opaque=opaque, version=479).encode()


#: compressed, past the 128 bytes decoded on the spot: these go to the pool
TOPICS_A = [f"TopicA{i}" for i in range(100)]
TOPICS_V = [f"TopicV{i}" for i in range(100)]


def _compressed(topics, counter):
    return bodies.RegisterBrokerBody.from_json(register_body(topics, counter)).encode(compress=True)


#: without the decode budget and the topic bound, 3 million topic lines (160 KB) keep the decode
#: thread busy a few seconds each: the slow, accepted work of a hostile peer
_UNBOUNDED = ("-D", "registerBrokerDecodeBudget=0", "-D", "registerBrokerMaxTopics=0")


def _bombers(port, hosts, per_host, body=None):
    from serverproc import RemotingClient
    bomb = _frame(body or topic_line_bomb(3_000_000), 9, "bomb", "10.9.9.9:1")
    clients = []
    for host in hosts:
        for _ in range(per_host):
            client = RemotingClient(port, source=host)
            client.send_frame(bomb)
            clients.append(client)
    return clients


def _answered(clients):
    """The answers the clients have received so far (read without waiting)."""
    got = []
    for client in clients:
        client.sock.settimeout(0.05)
        try:
            got.append(client.read_frame())
        except (TimeoutError, BlockingIOError):
            pass
        finally:
            client.sock.settimeout(PATIENCE)
    return got


@pytest.mark.network
def test_one_peers_bombs_do_not_starve_another_peers_registration():
    """8 slow bodies from 127.0.0.2 were all accepted and another host's registration waited
    behind all 8; then 4 were accepted and 4 refused SYSTEM_BUSY; now 4 have places, 4 wait in
    the lobby, none is refused, and the registration is served after at most the one running."""
    from serverproc import RemotingClient, running_server
    with running_server(*_UNBOUNDED) as server:
        bombers = _bombers(server.port, ["127.0.0.2"], 8)
        # the server has read all 8 frames once 4 wait (no sleep: a busy machine reads late)
        server.wait_for_log(r"decode pool: 127\.0\.0\.2's request waits for a place \(4 waiting")
        victim = RemotingClient(server.port)
        victim.send_frame(_frame(_compressed(TOPICS_V, 1), 1, "broker-v", "127.0.0.1:10911"))
        answer = victim.read_frame()
        assert answer.code == ResponseCode.SUCCESS, answer
        decoded = _answered(bombers)
        assert not any(a.code == ResponseCode.SYSTEM_BUSY for a in decoded), decoded
        assert len(decoded) < 3, f"{len(decoded)} bombs were decoded before the registration"
        for client in bombers + [victim]:
            client.close()


@pytest.mark.network
def test_brokers_behind_one_address_registering_big_bodies_at_once_are_all_served():
    """16 brokers on one host (a Kubernetes node's address, one machine's containers) each
    registering 5,000 topics at once: past the host's 4 places, 6 to 7 of them were answered
    SYSTEM_BUSY in three runs (Java queues them); now they wait in the lobby and every one is
    registered and routed."""
    from serverproc import RemotingClient, running_server
    with running_server() as server:
        brokers = []
        for i in range(16):
            body = register_body([f"Lobby{i}-{t}" for t in range(5000)], 1)
            client = RemotingClient(server.port, source="127.0.0.2")
            client.send_frame(_frame(body, i, f"broker-{i}", f"127.0.0.2:{10911 + i}", False))
            brokers.append(client)
        answers = [client.read_frame() for client in brokers]
        assert [(a.opaque, a.code) for a in answers] == [(i, ResponseCode.SUCCESS) for i in range(16)]
        route = RemotingClient(server.port)
        for i in range(16):
            assert route.call(105, {"topic": f"Lobby{i}-4999"}).code == ResponseCode.SUCCESS, i
        assert not server.log_lines(r"answering request code 103 with SYSTEM_BUSY")
        for client in brokers + [route]:
            client.close()


@pytest.mark.network
def test_a_live_brokers_registration_keeps_it_alive_while_the_pool_is_full():
    """16 bombs from 4 hosts (4 s of decoding each) kept the pool full: a 5.x broker's periodic
    registrations were answered SYSTEM_BUSY or queued behind them, and it expired (its topics
    gone, its connection closed). Now each bomb stops at its budget, a refused or waiting
    registration refreshes its own broker from the header, and a waiting one is served after at
    most one decode of each other peer."""
    from serverproc import RemotingClient, running_server
    bomb = odd_line_bomb(1_000_000)
    with running_server("-D", "registerBrokerMaxTopics=0",
                        "-D", "scanNotActiveBrokerInterval=200") as server:
        broker = RemotingClient(server.port)
        broker.send_frame(_frame(register_body(TOPICS_A, 1), 1, "broker-a", "127.0.0.1:10911",
                                 False, 12000))
        assert broker.read_frame().code == ResponseCode.SUCCESS
        bombers = _bombers(server.port, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], 4,
                           bomb)
        time.sleep(0.2)
        codes = []
        for counter in range(2, 30):     # every 0.5 s for 14 s, past the 12 s timeout
            broker.send_frame(_frame(_compressed(TOPICS_A, counter), counter, "broker-a",
                                     "127.0.0.1:10911", True, 12000))
            codes.append(broker.read_frame().code)
            time.sleep(0.5)
        assert set(codes) == {ResponseCode.SUCCESS}, codes   # a place, or the lobby: none refused
        route = RemotingClient(server.port)
        assert route.call(105, {"topic": "TopicA7"}).code == ResponseCode.SUCCESS
        for client in bombers + [broker, route]:
            client.close()


class OwnedRefreshTests(SynchronousTestCase):
    """Only the channel that registered a broker keeps it alive before its body is decoded."""

    def test_the_owning_channel_refreshes_and_another_does_not(self):
        from rocketpy.namesrv import Channel
        from rocketpy.namesrv.pending import Pending
        from test_fuzz_processor import _processor
        tmp = Path(self.mktemp())
        tmp.mkdir()
        processor = _processor(tmp)
        own, other = Channel(1, "127.0.0.1:40001"), Channel(2, "127.0.0.2:40002")
        rim = processor.route_info_manager

        def register(channel, counter, now_ms, compressed):
            body = (_compressed(TOPICS_A, counter) if compressed
                    else register_body(TOPICS_A, counter))
            request = RemotingCommand.request(
                103, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                      "clusterName": "C", "brokerId": "0", "haServerAddr": "127.0.0.1:10912",
                      "compressed": str(compressed).lower(),
                      "bodyCrc32": str(bodies.body_crc32(body))}, body, opaque=counter,
                version=479)
            return processor.process(request, channel, now_ms, offload=True)

        register(own, 1, 1_000, False).run()
        live = lambda: rim.broker_live_info("C", "127.0.0.1:10911")  # noqa: E731
        self.assertEqual(live().last_update_ms, 1_000)
        self.assertIsInstance(register(other, 2, 50_000, True), Pending)   # not decoded yet
        self.assertEqual(live().last_update_ms, 1_000)
        self.assertIsInstance(register(own, 3, 90_000, True), Pending)
        self.assertEqual(live().last_update_ms, 90_000)


@pytest.mark.network
def test_sigterm_stops_a_server_whose_decode_pool_is_full():
    """16 slow bodies queued kept a SIGTERMed server running for minutes; now the queue is
    abandoned and the running decode cancelled."""
    from serverproc import running_server
    with running_server(*_UNBOUNDED) as server:
        bombers = _bombers(server.port, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], 4)
        # one more from a host whose share is full: its wait in the lobby says the server has
        # read that host's frames and holds their decodes (no sleep: a busy machine reads late)
        bombers += _bombers(server.port, ["127.0.0.2"], 1)
        server.wait_for_log(r"decode pool: 127\.0\.0\.2's request waits for a place")
        assert server.stop() == 0, server.log_text()[-2000:]
        stopped = [re.search(r"decode pool stopped: (\d+) queued decodes abandoned, (\d+) "
                             r"cancelled", line) for line in server.lines]
        stopped = [m for m in stopped if m]
        assert stopped and int(stopped[0][1]) + int(stopped[0][2]) >= 1, \
            server.log_text()[-2000:]
        for client in bombers:
            client.close()
